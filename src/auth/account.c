/* GET /account: the signed-in user's connected apps (OAuth grants) and API tokens, with last
 * use, each revocable; their own GitHub token, whether one is stored and since when; and their
 * notification targets with how the last notifications went. POST /account/revoke revokes one;
 * POST /account/credential/set and /account/credential/delete set (or replace) and delete the
 * GitHub token; POST /account/notify/add, /remove and /test add a target (a webhook's signing
 * secret is shown on the page that answers, once), remove one and queue a test notification.
 * POST /account/repo/set and /account/repo/delete keep and delete the user's settings for a
 * repository's runs (a setup script, what a failed setup does; store_repo_setting_*).
 * The secrets card and its posts, /account/secret/set and /delete, are account_secrets.c's; the
 * cached environments' card and POST /account/env/drop, account_envs.c's.
 * Changes redirect back to GET /account, but for the page that shows a new secret. */
#include "auth/auth_internal.h"

#include "http/bearer.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "notify/notify.h"
#include "runs/runs.h"

/* A token of STORE_CREDENTIAL_MAX characters, each percent-escaped, and the form's other fields;
 * anything larger is not a token and is refused before it is parsed. */
#define CREDENTIAL_FORM_MAX 4096
/* A target's URL (STORE_NOTIFY_URL_MAX) percent-escaped fits too. */
#define NOTIFY_FORM_MAX 4096

/* What a page says besides the lists: note, a status line under the name; github, what was wrong
 * with a token just sent; notify, what was wrong with a target just sent; secret, the signing
 * secret of the webhook just added (shown this once). NULL when there is nothing to say. */
struct said {
    const char *note, *github, *notify, *secret, *repos;
    const char *secrets; /* what was wrong with a secret for runs just sent */
};

static void when(struct buf *b, int64_t ms)
{
    if (!ms) {
        buf_puts(b, "never");
        return;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char s[32];
    strftime(s, sizeof(s), "%Y-%m-%d %H:%M UTC", &tm);
    buf_puts(b, s);
}

struct listing {
    struct buf *b;
    const char *csrf;
    int n;
};

/* A button that posts the page's CSRF token, kind (unless NULL) and id to action. */
static void post_button(struct buf *b, const char *csrf, const char *action, const char *kind,
                        const char *id, const char *label)
{
    buf_printf(b, "<form method=\"post\" action=\"%s\">\n", action);
    html_hidden(b, "csrf", csrf);
    if (kind)
        html_hidden(b, "kind", kind);
    html_hidden(b, "id", id);
    buf_puts(b, "<button type=\"submit\">");
    html_text(b, label);
    buf_puts(b, "</button></form>");
}

static void grant_row(const struct store_oauth_grant *g, void *ctx)
{
    struct listing *l = ctx;
    struct buf *b = l->b;
    l->n++;
    buf_puts(b, "<li class=\"item\"><div><strong>");
    html_text(b, g->client_name);
    buf_puts(b, "</strong> <span class=\"muted\">(");
    html_text(b, g->redirect_host);
    buf_puts(b, ")</span><br><span class=\"muted small\">");
    html_text(b, g->scope);
    buf_puts(b, " · approved ");
    when(b, g->created_at);
    buf_puts(b, " · last used ");
    when(b, g->last_used_at);
    buf_puts(b, "</span></div>");
    post_button(b, l->csrf, "/account/revoke", "client", g->id, "Disconnect");
    buf_puts(b, "</li>\n");
}

static void token_row(const struct store_token *t, void *ctx)
{
    struct listing *l = ctx;
    struct buf *b = l->b;
    if (t->revoked_at)
        return;
    l->n++;
    buf_puts(b, "<li class=\"item\"><div><code>");
    html_text(b, t->prefix);
    buf_puts(b, "…</code> ");
    html_text(b, t->label);
    buf_puts(b, "<br><span class=\"muted small\">created ");
    when(b, t->created_at);
    buf_puts(b, " · last used ");
    when(b, t->last_used_at);
    buf_puts(b, "</span></div>");
    post_button(b, l->csrf, "/account/revoke", "token", t->id, "Revoke");
    buf_puts(b, "</li>\n");
}

struct stored {
    bool found;
    int64_t created_at, updated_at;
};

static void find_github(const struct store_credential *c, void *ctx)
{
    struct stored *g = ctx;
    if (strcmp(c->service, "github") == 0)
        *g = (struct stored){true, c->created_at, c->updated_at};
}

static void credential_form(struct buf *b, const char *csrf, const char *action)
{
    buf_printf(b, "<form method=\"post\" action=\"/account/credential/%s\" class=\"stack\">\n",
               action);
    html_hidden(b, "csrf", csrf);
    html_hidden(b, "service", "github");
}

/* The GitHub card: whether a token is stored and when, never any of it; a form to set or replace
 * it (never filled in) and one to delete it. */
static void github_card(struct auth *a, struct buf *b, const char *csrf,
                        const struct store_user *user, const char *problem)
{
    struct stored g = {0};
    struct err err = {0};
    store_credential_list(a->store, user->id, find_github, &g, &err);
    buf_puts(b, "<section class=\"card\" id=\"github\">\n<h2>GitHub</h2>\n");
    if (g.found) {
        buf_puts(b, "<p>A token is stored, set ");
        when(b, g.created_at);
        if (g.updated_at != g.created_at) {
            buf_puts(b, ", replaced ");
            when(b, g.updated_at);
        }
        buf_puts(b, ".</p>\n");
    } else {
        buf_puts(b, "<p class=\"muted\">No token is stored.</p>\n");
    }
    if (problem) {
        buf_puts(b, "<p class=\"error\" role=\"alert\">");
        html_text(b, problem);
        buf_puts(b, "</p>\n");
    }
    credential_form(b, csrf, "set");
    buf_printf(b,
               "<label>%s <input name=\"token\" type=\"password\" autocomplete=\"off\" "
               "autocapitalize=\"none\" spellcheck=\"false\" required></label>\n"
               "<button type=\"submit\" class=\"primary\">%s</button>\n</form>\n",
               g.found ? "New token" : "Token", g.found ? "Replace token" : "Save token");
    if (g.found) {
        credential_form(b, csrf, "delete");
        buf_puts(b, "<button type=\"submit\" class=\"danger\">Delete token</button>\n</form>\n");
    }
    buf_puts(b, "<p class=\"muted small\">Your own fine-grained personal access token or app "
                "installation token: 1 to 255 characters without spaces. It is sealed on the "
                "server and never shown again, here or anywhere.</p>\n</section>\n");
}

static void target_row(const struct store_notify_target *t, void *ctx)
{
    struct listing *l = ctx;
    struct buf *b = l->b;
    char shown[STORE_NOTIFY_URL_MAX + 8];
    notify_url_shown(t->url, shown, sizeof(shown));
    l->n++;
    buf_printf(b, "<li class=\"item\"><div><strong>%s</strong> <code>",
               strcmp(t->kind, "ntfy") == 0 ? "ntfy" : "Webhook");
    html_text(b, shown);
    buf_puts(b, "</code><br><span class=\"muted small\">added ");
    when(b, t->created_at);
    if (t->last_status[0]) {
        buf_puts(b, " · last ");
        html_text(b, t->last_status);
        buf_puts(b, " ");
        when(b, t->last_at);
    } else {
        buf_puts(b, " · nothing sent yet");
    }
    if (t->pending)
        buf_printf(b, " · %lld waiting", (long long)t->pending);
    buf_puts(b, "</span>");
    const char *problem = t->pending_error[0]                        ? t->pending_error
                          : strcmp(t->last_status, "delivered") != 0 ? t->last_error
                                                                     : "";
    if (problem[0]) {
        buf_puts(b, "<br><span class=\"error small\">");
        html_text(b, t->pending_error[0] ? "Last try: " : "");
        html_text(b, problem);
        buf_puts(b, "</span>");
    }
    buf_puts(b, "</div>");
    post_button(b, l->csrf, "/account/notify/test", NULL, t->id, "Send a test");
    post_button(b, l->csrf, "/account/notify/remove", NULL, t->id, "Remove");
    buf_puts(b, "</li>\n");
}

/* The notifications card: the targets, each with how its last notification went, a test button
 * and a remove button; the secret of a webhook just added; a form to add one. */
static void notify_card(struct auth *a, struct buf *b, const char *csrf,
                        const struct store_user *user, const struct said *said)
{
    struct listing l = {b, csrf, 0};
    struct err err = {0};
    buf_puts(b, "<section class=\"card\" id=\"notifications\">\n<h2>Notifications</h2>\n"
                "<ul class=\"list\">\n");
    store_notify_target_list(a->store, user->id, target_row, &l, &err);
    if (!l.n)
        buf_puts(b, "<li class=\"muted\">No target: nothing tells you when a run ends.</li>\n");
    buf_puts(b, "</ul>\n");
    if (said->secret) {
        buf_puts(b, "<p role=\"status\">The webhook's signing secret, shown only now: keep it "
                    "where your receiver checks the <code>" NOTIFY_SIGNATURE_HEADER
                    "</code> header.</p>\n<p><code>");
        html_text(b, said->secret);
        buf_puts(b, "</code></p>\n");
    }
    if (said->notify) {
        buf_puts(b, "<p class=\"error\" role=\"alert\">");
        html_text(b, said->notify);
        buf_puts(b, "</p>\n");
    }
    if (l.n < STORE_NOTIFY_TARGETS_MAX) {
        buf_puts(b, "<form method=\"post\" action=\"/account/notify/add\" class=\"stack\">\n");
        html_hidden(b, "csrf", csrf);
        buf_puts(b, "<label>Kind <select name=\"kind\"><option value=\"ntfy\">ntfy topic (a push "
                    "to your phone)</option><option value=\"webhook\">Webhook (a signed JSON "
                    "POST)</option></select></label>\n"
                    "<label>URL <input name=\"url\" type=\"url\" autocomplete=\"off\" "
                    "autocapitalize=\"none\" spellcheck=\"false\" "
                    "placeholder=\"https://ntfy.sh/your-topic\" required></label>\n"
                    "<button type=\"submit\" class=\"primary\">Add target</button>\n</form>\n");
    }
    buf_printf(b,
               "<p class=\"muted small\">You are told when a run succeeds, fails or is "
               "cancelled and when it opens a pull request, at up to %d https addresses on "
               "the public internet. An ntfy topic's name is all it takes to read it: pick "
               "one nobody can guess. Each notification links to the run's page.</p>\n"
               "</section>\n",
               STORE_NOTIFY_TARGETS_MAX);
}

/* The form that sets a repository's settings: repository NULL for a new one (a field to name
 * it), else its row's, filled in. A script longer than a form field may be is not put in the
 * form (the settings keep it when no script is sent). */
static void repo_form(struct buf *b, const char *csrf, const struct store_repo_setting *rs)
{
    buf_puts(b, "<form method=\"post\" action=\"/account/repo/set\" class=\"stack\">\n");
    html_hidden(b, "csrf", csrf);
    if (rs)
        html_hidden(b, "repository", rs->repository);
    else
        buf_puts(b, "<label>Repository <input name=\"repository\" autocomplete=\"off\" "
                    "autocapitalize=\"none\" spellcheck=\"false\" placeholder=\"owner/name\" "
                    "required></label>\n");
    if (rs && rs->setup && strlen(rs->setup) > FORM_VALUE_MAX) {
        buf_printf(b,
                   "<p class=\"muted small\">Its setup script is %zu bytes, more than this page "
                   "edits (%d); it is kept. Change it with <code>sandbox-mcp user repo "
                   "set</code>.</p>\n",
                   strlen(rs->setup), FORM_VALUE_MAX);
    } else {
        /* the newline after the tag is dropped by the browser, one of the script's is not */
        buf_puts(b, "<label>Setup script <textarea name=\"setup\" rows=\"5\" spellcheck=\"false\" "
                    "autocapitalize=\"none\">\n");
        if (rs && rs->setup)
            html_text(b, rs->setup);
        buf_puts(b, "</textarea></label>\n");
    }
    bool stop = rs && rs->stop_on_failure;
    buf_printf(b,
               "<label>When the setup fails <select name=\"on_setup_failure\">"
               "<option value=\"start\"%s>start the agent anyway (it is told)</option>"
               "<option value=\"stop\"%s>stop: the run fails</option></select></label>\n"
               "<label><input type=\"checkbox\" name=\"fix_ci\" value=\"on\"%s> Fix failing "
               "CI: when a pull request's checks fail, a run gets their logs and makes them "
               "pass</label>\n"
               "<label>Who else may steer from its pull requests (GitHub logins, "
               "comma-separated) <input name=\"steerers\" maxlength=\"%d\" value=\"%s\" "
               "autocapitalize=\"none\" spellcheck=\"false\"></label>\n"
               "<button type=\"submit\" class=\"primary\">%s</button>\n</form>\n",
               stop ? "" : " selected", stop ? " selected" : "", rs && rs->fix_ci ? " checked" : "",
               STORE_STEERERS_BYTES, rs ? rs->steerers : "", rs ? "Save" : "Add repository");
}

static void repo_row(const struct store_repo_setting *rs, void *ctx)
{
    struct listing *l = ctx;
    struct buf *b = l->b;
    l->n++;
    buf_puts(b, "<li class=\"item\"><div><strong>");
    html_text(b, rs->repository);
    buf_puts(b, "</strong><br><span class=\"muted small\">");
    if (rs->setup)
        buf_printf(b, "setup script of %zu bytes", strlen(rs->setup));
    else
        buf_puts(b, "the repository's own setup");
    buf_printf(b, " · on failure: %s%s · updated ", rs->stop_on_failure ? "stop" : "start",
               rs->fix_ci ? " · fixes failing CI" : "");
    when(b, rs->updated_at);
    buf_puts(b, "</span>\n<details><summary>Edit</summary>\n");
    repo_form(b, l->csrf, rs);
    buf_puts(b, "</details></div>");
    post_button(b, l->csrf, "/account/repo/delete", NULL, rs->repository, "Delete");
    buf_puts(b, "</li>\n");
}

/* The repositories card: the user's settings for each repository's runs, each editable and
 * deletable, and a form to add one. */
static void repos_card(struct auth *a, struct buf *b, const char *csrf,
                       const struct store_user *user, const char *problem)
{
    struct listing l = {b, csrf, 0};
    struct err err = {0};
    buf_puts(b, "<section class=\"card\" id=\"repositories\">\n<h2>Repositories</h2>\n"
                "<ul class=\"list\">\n");
    store_repo_setting_list(a->store, user->id, repo_row, &l, &err);
    if (!l.n)
        buf_puts(b, "<li class=\"muted\">No settings: runs use each repository's own "
                    "setup.</li>\n");
    buf_puts(b, "</ul>\n");
    if (problem) {
        buf_puts(b, "<p class=\"error\" role=\"alert\">");
        html_text(b, problem);
        buf_puts(b, "</p>\n");
    }
    if (l.n < STORE_REPO_SETTINGS_MAX)
        repo_form(b, csrf, NULL);
    buf_printf(
        b,
        "<p class=\"muted small\">A setup script here runs before the agent in a new "
        "workspace of the repository, in place of its own <code>.sandbox-mcp/setup.sh</code> "
        "or devcontainer; a run's own setup still comes first. Up to %d bytes here, %d "
        "through the command line; settings for up to %d repositories.</p>\n</section>\n",
        FORM_VALUE_MAX, STORE_REPO_SETUP_MAX, STORE_REPO_SETTINGS_MAX);
}

/* The page, with what said says. */
static void page(struct auth *a, h2o_req_t *req, int status, const struct store_user *user,
                 const struct said *said)
{
    const char *csrf = auth_csrf_token(a, req);
    struct buf b;
    buf_init(&b, 0);
    struct listing l = {&b, csrf, 0};
    struct err err = {0};
    buf_puts(&b, "<section class=\"card\">\n<h1>");
    html_text(&b, user->name);
    buf_puts(&b, "</h1>\n");
    if (said->note) {
        buf_puts(&b, "<p role=\"status\">");
        html_text(&b, said->note);
        buf_puts(&b, "</p>\n");
    }
    buf_puts(&b, "<form method=\"post\" action=\"/logout\">\n");
    html_hidden(&b, "csrf", csrf);
    buf_puts(&b, "<button type=\"submit\">Sign out</button></form>\n</section>\n"
                 "<section class=\"card\">\n<h2>Connected apps</h2>\n<ul class=\"list\">\n");
    store_oauth_grant_list(a->store, user->name, grant_row, &l, &err);
    if (!l.n)
        buf_puts(&b, "<li class=\"muted\">No app is connected.</li>\n");
    buf_puts(&b, "</ul>\n</section>\n<section class=\"card\">\n<h2>API tokens</h2>\n"
                 "<ul class=\"list\">\n");
    l.n = 0;
    store_token_list(a->store, user->name, token_row, &l, &err);
    if (!l.n)
        buf_puts(&b, "<li class=\"muted\">No API token. An operator makes one with "
                     "<code>sandbox-mcp token create</code>.</li>\n");
    buf_puts(&b, "</ul>\n</section>\n");
    github_card(a, &b, csrf, user, said->github);
    notify_card(a, &b, csrf, user, said);
    repos_card(a, &b, csrf, user, said->repos);
    account_secrets_card(a, &b, csrf, user, said->secrets);
    account_envs_card(a, &b, csrf, user);
    auth_page(req, status, "Account", b.data);
    buf_release(&b);
}

/* What GET /account?done=... says after a change redirected there: fixed words only, so that the
 * address carries nothing of what was sent. */
static const char *done_note(h2o_req_t *req)
{
    static const struct {
        const char *done, *note;
    } notes[] = {
        {"github-set", "Your GitHub token is saved."},
        {"github-deleted", "Your GitHub token is deleted."},
        {"notify-added", "The notification target is added."},
        {"notify-removed", "The notification target is removed."},
        {"notify-test", "A test notification is on its way; this page shows how it went."},
        {"repo-set", "The repository's settings are saved."},
        {"repo-deleted", "The repository's settings are deleted."},
        {"secret-set", "The secret is saved."},
        {"env-dropped", "The cached environment is dropped: the next session sets up afresh."},
        {"secret-deleted", "The secret is deleted."},
    };
    if (req->query_at == SIZE_MAX)
        return NULL;
    struct form f;
    struct err err = {0};
    const char *q = req->path.base + req->query_at + 1;
    if (form_parse(q, req->path.len - req->query_at - 1, &f, &err) < 0)
        return NULL;
    const char *done = form_get(&f, "done"), *note = NULL;
    for (size_t i = 0; done && i < ARRAY_SIZE(notes); i++)
        if (strcmp(done, notes[i].done) == 0)
            note = notes[i].note;
    form_release(&f);
    return note;
}

struct owned {
    const char *id;
    bool found;
};

static void find_token(const struct store_token *t, void *ctx)
{
    struct owned *o = ctx;
    o->found |= strcmp(t->id, o->id) == 0 && !t->revoked_at;
}

/* The page's form, read and its CSRF token checked; false when refused (and answered). */
static bool read_page_form(h2o_req_t *req, struct form *f)
{
    if (!auth_read_form(req, f, false))
        return false;
    if (!auth_csrf_ok(req, f)) {
        form_release(f);
        auth_error_page(req, 403, "invalid_request", "The form's security token is missing.");
        return false;
    }
    return true;
}

static void revoke_one(struct auth *a, h2o_req_t *req, const struct store_user *user)
{
    struct form f;
    if (!read_page_form(req, &f))
        return;
    const char *kind = form_get(&f, "kind"), *id = form_get(&f, "id");
    struct err err = {0};
    int r = -ENOENT;
    if (kind && id && strcmp(kind, "client") == 0) {
        r = store_oauth_grant_revoke(a->store, id, user->id, &err);
    } else if (kind && id && strcmp(kind, "token") == 0) {
        struct owned o = {id, false};
        r = store_token_list(a->store, user->name, find_token, &o, &err);
        if (r == 0)
            r = o.found ? store_token_revoke(a->store, id, &err) : -ENOENT;
    }
    if (r == 0) {
        http_bearer_cache_flush();
        log_info("auth revoked user=%s kind=%s id=%s", user->name, kind, id);
    }
    form_release(&f);
    page(a, req, 200, user,
         &(struct said){.note = r == 0 ? "Revoked." : "Nothing to revoke: it was already gone."});
}

/* POST /account/credential/set and /delete: the signed-in user's own GitHub token. The token is
 * never written back: not into the page, the log or the address redirected to. */
static void credential_change(struct auth *a, h2o_req_t *req, const struct store_user *user,
                              bool set)
{
    if (req->entity.len > CREDENTIAL_FORM_MAX) {
        page(a, req, 413, user,
             &(struct said){.github = "Not saved: that is far longer than a token (at most 255 "
                                      "characters). Nothing was changed."});
        return;
    }
    struct form f;
    if (!read_page_form(req, &f))
        return;
    const char *service = form_get(&f, "service"), *token = form_get(&f, "token");
    size_t n = token ? strlen(token) : 0;
    struct err err = {0};
    int r;
    if (!service || strcmp(service, "github") != 0) {
        r = err_set(&err, -EINVAL, "Nothing was changed: only a GitHub token can be kept here.");
    } else if (!a->has_credential_key) {
        r = err_set(&err, -EAGAIN, "This server cannot store tokens now; try again later.");
    } else if (set) {
        const char *why = store_credential_problem(token ? token : "", n);
        if (why)
            r = err_set(&err, -EINVAL,
                        "Not saved: %s. A GitHub token is 1 to 255 printable "
                        "characters without spaces. Nothing was changed.",
                        why);
        else
            r = store_credential_seal(a->store, a->credential_key, user->id, "github", token, n,
                                      time_now_ms(), &err);
    } else {
        r = store_credential_delete(a->store, user->id, "github", &err);
    }
    for (size_t i = 0; i < f.n; i++)
        if (strcmp(f.f[i].name, "token") == 0)
            sodium_memzero(f.f[i].value, strlen(f.f[i].value));
    form_release(&f);
    if (r == 0) {
        log_info("auth credential-%s user=%s service=github", set ? "set" : "deleted", user->name);
        auth_redirect(req, 303, set ? "/account?done=github-set" : "/account?done=github-deleted");
    } else if (r == -EINVAL) {
        page(a, req, 400, user, &(struct said){.github = err.msg});
    } else if (r == -ENOENT && !set) {
        page(a, req, 200, user, &(struct said){.note = "There was no GitHub token to delete."});
    } else {
        log_error("auth store-failure user=%s reason=\"%s\"", user->name, err.msg);
        page(a, req, 503, user,
             &(struct said){.github = r == -EAGAIN ? err.msg
                                                   : "Nothing was changed: the server could not "
                                                     "store it; try again."});
    }
}

/* POST /account/notify/add: a target of the signed-in user's. A webhook's secret is made here,
 * sealed, and shown on the page that answers, never again; the URL is not logged. */
static void notify_add(struct auth *a, h2o_req_t *req, const struct store_user *user)
{
    if (req->entity.len > NOTIFY_FORM_MAX) {
        page(a, req, 413, user,
             &(struct said){.notify = "Not added: that is far longer than a URL may be (1024 "
                                      "bytes). Nothing was changed."});
        return;
    }
    struct form f;
    if (!read_page_form(req, &f))
        return;
    const char *kind_name = form_get(&f, "kind"), *url = form_get(&f, "url");
    enum notify_kind kind;
    struct err err = {0}, why = {0};
    char secret[NOTIFY_SECRET_LEN + 1] = "";
    struct store_notify_target t;
    int r;
    if (notify_kind_parse(kind_name, &kind) < 0) {
        r = err_set(&err, -EINVAL, "Not added: the kind is webhook or ntfy.");
    } else if (!a->has_credential_key) {
        r = err_set(&err, -EAGAIN, "This server cannot keep targets now; try again later.");
    } else if (notify_url_check(url ? url : "", kind, a->conf.notify_loopback, NULL, &why) < 0) {
        r = err_set(&err, -EINVAL, "Not added: %s. Nothing was changed.", why.msg);
    } else {
        if (kind == NOTIFY_WEBHOOK)
            notify_secret_new(secret);
        r = store_notify_target_add(a->store, a->credential_key, user->id, notify_kind_name(kind),
                                    url, secret[0] ? secret : NULL, &t, &err);
        if (r == -EDQUOT)
            r = err_set(&err, -EINVAL,
                        "Not added: you have %d targets, the most there may be; "
                        "remove one first.",
                        STORE_NOTIFY_TARGETS_MAX);
    }
    form_release(&f);
    if (r == 0) {
        log_info("auth notify-added user=%s target=%s kind=%s", user->name, t.id, t.kind);
        if (secret[0])
            page(a, req, 200, user,
                 &(struct said){.note = "The webhook is added.", .secret = secret});
        else
            auth_redirect(req, 303, "/account?done=notify-added");
    } else if (r == -EINVAL) {
        page(a, req, 400, user, &(struct said){.notify = err.msg});
    } else {
        log_error("auth store-failure user=%s reason=\"%s\"", user->name, err.msg);
        page(a, req, 503, user,
             &(struct said){.notify = r == -EAGAIN ? err.msg
                                                   : "Nothing was changed: the server could not "
                                                     "store it; try again."});
    }
    sodium_memzero(secret, sizeof(secret));
}

/* POST /account/notify/remove and /test: one of the signed-in user's targets. */
static void notify_change(struct auth *a, h2o_req_t *req, const struct store_user *user, bool test)
{
    if (req->entity.len > NOTIFY_FORM_MAX) {
        page(a, req, 413, user, &(struct said){.notify = "That is not a form of this page."});
        return;
    }
    struct form f;
    if (!read_page_form(req, &f))
        return;
    const char *id = form_get(&f, "id");
    struct err err = {0};
    char event_id[64];
    int r = !id    ? -ENOENT
            : test ? store_notify_test(a->store, user->id, id, time_now_ms(), event_id, &err)
                   : store_notify_target_delete(a->store, user->id, id, &err);
    if (r == 0)
        log_info("auth notify-%s user=%s target=%.64s", test ? "test" : "removed", user->name, id);
    form_release(&f);
    if (r == 0)
        auth_redirect(req, 303,
                      test ? "/account?done=notify-test" : "/account?done=notify-removed");
    else if (r == -ENOENT)
        page(a, req, 200, user, &(struct said){.note = "There is no such notification target."});
    else if (r == -EDQUOT)
        page(a, req, 429, user, &(struct said){.notify = err.msg});
    else
        page(a, req, 503, user,
             &(struct said){.notify = "Nothing was changed: the server could not store it; try "
                                      "again."});
}

/* POST /account/repo/set and /delete: the signed-in user's settings for a repository. */
static void repo_change(struct auth *a, h2o_req_t *req, const struct store_user *user, bool set)
{
    struct form f;
    if (!read_page_form(req, &f))
        return;
    const char *repo = form_get(&f, set ? "repository" : "id"), *setup = form_get(&f, "setup"),
               *on = form_get(&f, "on_setup_failure"), *steerers = form_get(&f, "steerers");
    char slug[STORE_REPO_NAME_MAX + 1];
    struct err err = {0};
    struct store_repo_setting old = {0};
    int r;
    if (!repo || !runs_repo_slug(repo, slug, sizeof(slug))) {
        r = err_set(&err, -EINVAL,
                    "Not saved: name the repository as owner/name (letters, digits, '.', '_' "
                    "or '-'), or by its URL.");
    } else if (!set) {
        r = store_repo_setting_delete(a->store, user->id, slug, &err);
    } else if (on && strcmp(on, "start") != 0 && strcmp(on, "stop") != 0) {
        r = err_set(&err, -EINVAL, "Not saved: when the setup fails, start or stop.");
    } else if (steerers && !store_logins_valid(steerers)) {
        r = err_set(&err, -EINVAL,
                    "Not saved: who else may steer is at most %d GitHub logins, comma-separated.",
                    STORE_STEERERS_MAX);
    } else {
        /* no script field: the one kept (too long for the page) stays */
        r = setup ? 0 : store_repo_setting_get(a->store, user->id, slug, &old, &err);
        if (r == -ENOENT)
            r = 0;
        if (r == 0) {
            /* a browser sends a textarea's lines ended by CRLF; sh wants LF */
            _cleanup_free_ char *sent = setup && setup[0] ? xstrdup(setup) : NULL;
            char *o = sent;
            for (const char *c = sent; c && *c; c++)
                if (!(c[0] == '\r' && c[1] == '\n'))
                    *o++ = *c;
            if (o)
                *o = '\0';
            const char *script = setup ? sent : old.setup;
            r = store_repo_setting_set(a->store, user->id, slug, script,
                                       on && strcmp(on, "stop") == 0, time_now_ms(), &err);
            /* an unchecked box is not sent at all */
            if (r == 0)
                r = store_repo_setting_set_fix_ci(a->store, user->id, slug,
                                                  form_get(&f, "fix_ci") != NULL, &err);
            if (r == 0 && steerers) /* checked above: letters, digits, '-' and ',' */
                r = store_repo_setting_set_steerers(a->store, user->id, slug, steerers, &err);
        }
        if (r == -ENOSPC)
            r = err_set(&err, -EINVAL,
                        "Not saved: you keep settings for %d repositories, the most there may "
                        "be; delete one first.",
                        STORE_REPO_SETTINGS_MAX);
        else if (r == -EFBIG)
            r = err_set(&err, -EINVAL, "Not saved: the setup script is over %d bytes.",
                        STORE_REPO_SETUP_MAX);
    }
    store_repo_setting_release(&old);
    form_release(&f);
    if (r == 0) {
        log_info("auth repo-%s user=%s repository=%s", set ? "set" : "deleted", user->name, slug);
        auth_redirect(req, 303, set ? "/account?done=repo-set" : "/account?done=repo-deleted");
    } else if (r == -EINVAL) {
        page(a, req, 400, user, &(struct said){.repos = err.msg});
    } else if (r == -ENOENT) {
        page(a, req, 200, user,
             &(struct said){.note = "There were no settings for that repository."});
    } else {
        log_error("auth store-failure user=%s reason=\"%s\"", user->name, err.msg);
        page(a, req, 503, user,
             &(struct said){.repos = "Nothing was changed: the server could not store it; try "
                                     "again."});
    }
}

/* POST /account/env/drop: one of the user's cached environments (account_envs.c). */
static void env_drop(struct auth *a, h2o_req_t *req, const struct store_user *user)
{
    struct form f;
    if (!read_page_form(req, &f))
        return;
    struct err err = {0};
    int r = account_env_drop(a, user, form_get(&f, "id"), &err);
    form_release(&f);
    if (r == 0) {
        log_info("auth env-dropped user=%s", user->name);
        auth_redirect(req, 303, "/account?done=env-dropped");
    } else if (r == -ENOENT || r == -EINVAL) {
        page(a, req, 200, user, &(struct said){.note = err.msg});
    } else {
        log_error("auth store-failure user=%s reason=\"%s\"", user->name, err.msg);
        page(a, req, 503, user,
             &(struct said){.note = "Nothing was changed: the server could not store it; try "
                                    "again."});
    }
}

/* POST /account/secret/set and /delete: a secret for runs (account_secrets.c). */
static void secret_change(struct auth *a, h2o_req_t *req, const struct store_user *user, bool set)
{
    struct form f;
    if (!read_page_form(req, &f))
        return;
    struct err err = {0};
    int r = account_secret_apply(a, user, &f, set, &err);
    form_release(&f);
    if (r == 0) {
        log_info("auth secret-%s user=%s", set ? "set" : "deleted", user->name);
        auth_redirect(req, 303, set ? "/account?done=secret-set" : "/account?done=secret-deleted");
    } else if (r == -EINVAL || r == -ENOSPC || r == -EAGAIN) {
        page(a, req,
             r == -EINVAL   ? 400
             : r == -ENOSPC ? 409
                            : 503,
             user, &(struct said){.secrets = err.msg});
    } else if (r == -ENOENT) {
        page(a, req, 200, user, &(struct said){.note = "There was no such secret to delete."});
    } else {
        log_error("auth store-failure user=%s reason=\"%s\"", user->name, err.msg);
        page(a, req, 503, user,
             &(struct said){.secrets = "Nothing was changed: the server could not store it; try "
                                       "again."});
    }
}

/* What a request to /account asks for, by its path and method. */
enum account_action {
    ACCOUNT_NONE,
    ACCOUNT_VIEW,
    ACCOUNT_REVOKE,
    ACCOUNT_CREDENTIAL_SET,
    ACCOUNT_CREDENTIAL_DELETE,
    ACCOUNT_NOTIFY_ADD,
    ACCOUNT_NOTIFY_REMOVE,
    ACCOUNT_NOTIFY_TEST,
    ACCOUNT_REPO_SET,
    ACCOUNT_REPO_DELETE,
    ACCOUNT_ENV_DROP,
    ACCOUNT_SECRET_SET,
    ACCOUNT_SECRET_DELETE,
};

static enum account_action account_action(h2o_iovec_t p, bool post)
{
    static const struct {
        const char *path;
        enum account_action action;
    } posts[] = {
        {"/account/revoke", ACCOUNT_REVOKE},
        {"/account/credential/set", ACCOUNT_CREDENTIAL_SET},
        {"/account/credential/delete", ACCOUNT_CREDENTIAL_DELETE},
        {"/account/notify/add", ACCOUNT_NOTIFY_ADD},
        {"/account/notify/remove", ACCOUNT_NOTIFY_REMOVE},
        {"/account/notify/test", ACCOUNT_NOTIFY_TEST},
        {"/account/repo/set", ACCOUNT_REPO_SET},
        {"/account/repo/delete", ACCOUNT_REPO_DELETE},
        {"/account/env/drop", ACCOUNT_ENV_DROP},
        {"/account/secret/set", ACCOUNT_SECRET_SET},
        {"/account/secret/delete", ACCOUNT_SECRET_DELETE},
    };
    if (!post)
        return h2o_memis(p.base, p.len, H2O_STRLIT("/account")) ? ACCOUNT_VIEW : ACCOUNT_NONE;
    for (size_t i = 0; i < sizeof(posts) / sizeof(posts[0]); i++)
        if (h2o_memis(p.base, p.len, posts[i].path, strlen(posts[i].path)))
            return posts[i].action;
    return ACCOUNT_NONE;
}

int auth_on_account(h2o_handler_t *self, h2o_req_t *req)
{
    bool post;
    struct auth *a = auth_page_enter(self, req, &post);
    if (!a)
        return 0;
    enum account_action what = account_action(req->path_normalized, post);
    if (what == ACCOUNT_NONE) {
        auth_error_page(req, 404, "not_found", "There is no such page.");
        return 0;
    }
    struct store_user user;
    if (!auth_page_user(a, req, "/account", what != ACCOUNT_VIEW, &user))
        return 0;
    switch (what) {
    case ACCOUNT_VIEW: page(a, req, 200, &user, &(struct said){.note = done_note(req)}); break;
    case ACCOUNT_REVOKE: revoke_one(a, req, &user); break;
    case ACCOUNT_CREDENTIAL_SET: credential_change(a, req, &user, true); break;
    case ACCOUNT_CREDENTIAL_DELETE: credential_change(a, req, &user, false); break;
    case ACCOUNT_NOTIFY_ADD: notify_add(a, req, &user); break;
    case ACCOUNT_NOTIFY_REMOVE: notify_change(a, req, &user, false); break;
    case ACCOUNT_NOTIFY_TEST: notify_change(a, req, &user, true); break;
    case ACCOUNT_REPO_SET: repo_change(a, req, &user, true); break;
    case ACCOUNT_REPO_DELETE: repo_change(a, req, &user, false); break;
    case ACCOUNT_ENV_DROP: env_drop(a, req, &user); break;
    case ACCOUNT_SECRET_SET: secret_change(a, req, &user, true); break;
    case ACCOUNT_SECRET_DELETE: secret_change(a, req, &user, false); break;
    case ACCOUNT_NONE: break;
    }
    return 0;
}

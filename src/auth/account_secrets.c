/* The account page's secrets card (auth/account.c draws the page and answers its posts): the
 * signed-in user's secrets for runs by name, with the repositories each applies to, whether the
 * agent sees it and when it was set, never a value; a form to add or replace one (the value in a
 * password field, never filled in) and a button to delete each. Rule: a value sent is sealed or
 * refused, then wiped from the form; it is never written into a page, the log or an address. */
#include "auth/auth_internal.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/util.h"

struct secret_rows {
    struct buf *b;
    const char *csrf;
    int n;
};

static void secret_row(const struct store_secret *s, const char *value, size_t n, void *ctx)
{
    (void)value, (void)n;
    struct secret_rows *l = ctx;
    struct buf *b = l->b;
    l->n++;
    char when[32];
    time_t t = (time_t)(s->updated_at / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", &tm);
    buf_puts(b, "<li class=\"item\"><div><strong><code>");
    html_text(b, s->name);
    buf_puts(b, "</code></strong><br><span class=\"muted small\">");
    html_text(b, strcmp(s->repos, "*") == 0 ? "every repository" : s->repos);
    buf_printf(b, " · %s · set %s</span></div>", s->agent ? "setup and agent" : "setup only", when);
    buf_puts(b, "<form method=\"post\" action=\"/account/secret/delete\">\n");
    html_hidden(b, "csrf", l->csrf);
    html_hidden(b, "name", s->name);
    buf_puts(b, "<button type=\"submit\">Delete</button></form></li>\n");
}

void account_secrets_card(struct auth *a, struct buf *b, const char *csrf,
                          const struct store_user *user, const char *problem)
{
    struct secret_rows l = {b, csrf, 0};
    struct err err = {0};
    buf_puts(b, "<section class=\"card\" id=\"secrets\">\n<h2>Secrets for runs</h2>\n"
                "<ul class=\"list\">\n");
    store_secret_list(a->store, NULL, user->id, secret_row, &l, &err);
    if (!l.n)
        buf_puts(b, "<li class=\"muted\">No secret is stored.</li>\n");
    buf_puts(b, "</ul>\n");
    if (problem) {
        buf_puts(b, "<p class=\"error\" role=\"alert\">");
        html_text(b, problem);
        buf_puts(b, "</p>\n");
    }
    buf_puts(b, "<form method=\"post\" action=\"/account/secret/set\" class=\"stack\">\n");
    html_hidden(b, "csrf", csrf);
    buf_puts(b,
             "<label>Name <input name=\"name\" autocomplete=\"off\" autocapitalize=\"characters\" "
             "spellcheck=\"false\" pattern=\"[A-Z_][A-Z0-9_]*\" "
             "placeholder=\"NPM_TOKEN\" required></label>\n"
             "<label>Value <input name=\"value\" type=\"password\" autocomplete=\"off\" "
             "autocapitalize=\"none\" spellcheck=\"false\" required></label>\n"
             "<label>Repositories <input name=\"repos\" autocomplete=\"off\" "
             "autocapitalize=\"none\" spellcheck=\"false\" placeholder=\"* or owner/name, "
             "owner/api-*\"></label>\n"
             "<label><input name=\"agent\" type=\"checkbox\" value=\"1\"> The agent sees it "
             "too</label>\n"
             "<button type=\"submit\" class=\"primary\">Save secret</button>\n</form>\n");
    buf_printf(b,
               "<p class=\"muted small\">Environment variables for your runs' setup (and their "
               "agent, when ticked), for the repositories named (* for every run; owner/name "
               "on GitHub, the name may hold *). Saving a name again replaces it. Values are "
               "sealed on the server, never shown again, and taken out of everything a run "
               "shows. At most %d secrets and %d KiB in all; a value here at most 8 KiB "
               "(<code>sandbox-mcp user secret set</code> takes 16 KiB).</p>\n</section>\n",
               STORE_SECRETS_MAX, STORE_SECRETS_TOTAL_MAX / 1024);
}

int account_secret_apply(struct auth *a, const struct store_user *user, struct form *f, bool set,
                         struct err *err)
{
    const char *name = form_get(f, "name"), *value = form_get(f, "value");
    int r;
    if (!name || !*name) {
        r = err_set(err, -EINVAL, "Nothing was changed: a secret needs a name.");
    } else if (!set) {
        r = store_secret_delete(a->store, user->id, name, err);
    } else if (!a->has_credential_key) {
        r = err_set(err, -EAGAIN, "This server cannot store secrets now; try again later.");
    } else {
        const char *agent = form_get(f, "agent");
        struct store_secret s = {.agent = agent && strcmp(agent, "1") == 0};
        const char *repos = form_get(f, "repos");
        snprintf(s.name, sizeof(s.name), "%s", name);
        snprintf(s.repos, sizeof(s.repos), "%s", repos ? repos : "");
        const char *why = strlen(name) > STORE_SECRET_NAME_MAX ? "the name is longer than 64 "
                                                                 "characters"
                                                               : store_secret_name_problem(name);
        if (!why)
            why = store_secret_value_problem(value ? value : "", value ? strlen(value) : 0);
        if (why)
            r = err_set(err, -EINVAL, "Not saved: %s. Nothing was changed.", why);
        else if (repos && strlen(repos) >= sizeof(s.repos))
            r = err_set(err, -EINVAL, "Not saved: too many repositories. Nothing was changed.");
        else if ((r = store_secret_seal(a->store, a->credential_key, user->id, &s, value,
                                        strlen(value), time_now_ms(), err)) == -EINVAL ||
                 r == -ENOSPC) {
            char msg[sizeof(err->msg)];
            snprintf(msg, sizeof(msg), "%s", err->msg);
            err_set(err, r, "Not saved: %s. Nothing was changed.", msg);
        }
    }
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->f[i].name, "value") == 0)
            sodium_memzero(f->f[i].value, strlen(f->f[i].value));
    return r;
}

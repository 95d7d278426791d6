/* GET /account: the signed-in user's connected apps (OAuth grants) and API tokens, with last
 * use, each revocable. POST /account/revoke revokes one. */
#include "auth/auth_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"

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

static void revoke_button(struct buf *b, const char *csrf, const char *kind, const char *id,
                          const char *label)
{
    buf_puts(b, "<form method=\"post\" action=\"/account/revoke\">\n");
    html_hidden(b, "csrf", csrf);
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
    revoke_button(b, l->csrf, "client", g->id, "Disconnect");
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
    revoke_button(b, l->csrf, "token", t->id, "Revoke");
    buf_puts(b, "</li>\n");
}

static void page(struct auth *a, h2o_req_t *req, const struct store_user *user, const char *note)
{
    const char *csrf = auth_csrf_token(a, req);
    struct buf b;
    buf_init(&b, 0);
    struct listing l = {&b, csrf, 0};
    struct err err = {0};
    buf_puts(&b, "<section class=\"card\">\n<h1>");
    html_text(&b, user->name);
    buf_puts(&b, "</h1>\n");
    if (note) {
        buf_puts(&b, "<p role=\"status\">");
        html_text(&b, note);
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
    auth_page(req, 200, "Account", b.data);
    buf_release(&b);
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

static void revoke_one(struct auth *a, h2o_req_t *req, const struct store_user *user)
{
    struct form f;
    if (!auth_read_form(req, &f, false))
        return;
    if (!auth_csrf_ok(req, &f)) {
        form_release(&f);
        auth_error_page(req, 403, "invalid_request", "The form's security token is missing.");
        return;
    }
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
        http_auth_cache_flush();
        log_info("auth revoked user=%s kind=%s id=%s", user->name, kind, id);
    }
    form_release(&f);
    page(a, req, user, r == 0 ? "Revoked." : "Nothing to revoke: it was already gone.");
}

int auth_on_account(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    struct auth *a = route->srv->auth;
    http_request_track(route, req);
    bool post = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"));
    if (post && !http_check_origin(route->srv, req))
        return 0;
    h2o_iovec_t p = req->path_normalized;
    struct store_user user;
    bool in = auth_session_user(a, req, &user);
    if (h2o_memis(p.base, p.len, H2O_STRLIT("/account")) && !post) {
        if (in)
            page(a, req, &user, NULL);
        else
            auth_signin_page(a, req, 200, "/account", NULL);
    } else if (h2o_memis(p.base, p.len, H2O_STRLIT("/account/revoke")) && post) {
        if (in)
            revoke_one(a, req, &user);
        else
            auth_signin_page(a, req, 401, "/account", "Sign in again to change your account.");
    } else {
        auth_error_page(req, 404, "not_found", "There is no such page.");
    }
    return 0;
}

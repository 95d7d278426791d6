/* GET /authorize: an authorization request (OAuth 2.1 4.1.1, PKCE S256 only, resource
 * indicators). POST /authorize: the user's decision on the consent page. Errors about the
 * client or its redirect URI are shown here, never sent to an unchecked redirect. The others go
 * back to the client with state and iss (RFC 9207) only once the signed-in user has approved
 * the client (a grant of theirs, or the decision on its consent page); before that they are
 * shown here too, since anyone may register a client with a redirect URI of their own and use
 * its errors as an open redirector (RFC 9700 4.11.2). */
#include "auth/auth_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"

struct authz {
    struct auth *a;
    h2o_req_t *req;
    struct form f;
    bool post;
    const char *redirect_uri; /* checked; in the pool */
    const char *state;
    bool trusted; /* the signed-in user approved the client: errors may go to redirect_uri */
};

static void authz_dispose(void *p)
{
    struct authz *z = p;
    form_release(&z->f);
}

/* Back to the client: its redirect URI with params, state and iss. */
static void send_back(struct authz *z, const char *k1, const char *v1, const char *k2,
                      const char *v2)
{
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, z->redirect_uri);
    char sep = strchr(z->redirect_uri, '?') ? '&' : '?';
    url_param(&b, sep, k1, v1);
    if (k2)
        url_param(&b, '&', k2, v2);
    if (z->state)
        url_param(&b, '&', "state", z->state);
    url_param(&b, '&', "iss", auth_issuer(z->a));
    auth_redirect(z->req, z->post ? 303 : 302, b.data);
    buf_release(&b);
}

/* An error about the request: back to the client once the user approved it, else a page. */
static void fail(struct authz *z, const char *error, const char *description)
{
    log_info("oauth authorize-refused error=%s reason=\"%s\" to=%s", error, description,
             z->trusted ? "client" : "page");
    if (z->trusted)
        send_back(z, "error", error, "error_description", description);
    else
        auth_error_page(z->req, strcmp(error, "server_error") == 0 ? 500 : 400, error, description);
}

static bool challenge_ok(const char *c)
{
    size_t n = strlen(c);
    return n >= 43 && n <= 128 &&
           strspn(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") == n;
}

/* "/authorize?..." with the request's parameters, to come back to after signing in. */
static const char *return_to(struct authz *z)
{
    static const char *const keep[] = {
        "response_type",         "client_id", "redirect_uri", "code_challenge",
        "code_challenge_method", "state",     "scope",        "resource"};
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "/authorize");
    char sep = '?';
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
        const char *v = form_get(&z->f, keep[i]);
        if (v) {
            url_param(&b, sep, keep[i], v);
            sep = '&';
        }
    }
    const char *out = h2o_strdup(&z->req->pool, b.data, b.len).base;
    buf_release(&b);
    return out;
}

static const struct {
    unsigned bit;
    const char *name, *what;
} scope_text[] = {
    {SCOPE_SANDBOX, "sandbox",
     "Start sandboxes, run commands in them, and read and write "
     "their files"},
    {SCOPE_RUNS, "runs", "Start coding runs on your repositories, follow and cancel them"},
    {SCOPE_OFFLINE, "offline_access", "Stay connected without asking you again"},
};

static void consent_page(struct authz *z, const struct store_oauth_client *c,
                         const struct store_user *user, unsigned scopes)
{
    struct auth *a = z->a;
    char host[256];
    auth_uri_host(z->redirect_uri, host, sizeof(host));
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "<section class=\"card\">\n<h1>Connect <span class=\"client\">");
    html_text(&b, c->name);
    buf_puts(&b, "</span>?</h1>\n<p>");
    if (strcmp(c->kind, "document") == 0) {
        char id_host[256];
        auth_uri_host(c->id, id_host, sizeof(id_host));
        buf_puts(&b, "This app is identified by <strong>");
        html_text(&b, id_host);
        buf_puts(&b, "</strong>.");
    } else {
        buf_puts(&b, "This app registered itself; its name is its own claim.");
    }
    buf_puts(&b, " After you decide, you go back to <strong>");
    html_text(&b, host);
    buf_puts(&b, "</strong>.</p>\n<p>It asks to act as <strong>");
    html_text(&b, user->name);
    buf_puts(&b, "</strong> on this server and to:</p>\n<ul class=\"scopes\">\n");
    for (size_t i = 0; i < sizeof(scope_text) / sizeof(scope_text[0]); i++) {
        if (!(scopes & scope_text[i].bit))
            continue;
        buf_puts(&b, "<li>");
        html_text(&b, scope_text[i].what);
        buf_printf(&b, " <span class=\"muted\">(%s)</span></li>\n", scope_text[i].name);
    }
    buf_puts(&b, "</ul>\n<form method=\"post\" action=\"/authorize\">\n");
    static const char *const keep[] = {
        "response_type", "client_id", "code_challenge", "code_challenge_method",
        "state",         "scope",     "resource"};
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
        const char *v = form_get(&z->f, keep[i]);
        if (v)
            html_hidden(&b, keep[i], v);
    }
    html_hidden(&b, "redirect_uri", z->redirect_uri);
    html_hidden(&b, "csrf", auth_csrf_token(a, z->req));
    buf_puts(&b, "<div class=\"actions\">\n"
                 "<button type=\"submit\" name=\"decision\" value=\"approve\" class=\"primary\">"
                 "Approve</button>\n"
                 "<button type=\"submit\" name=\"decision\" value=\"deny\">Deny</button>\n"
                 "</div>\n</form>\n<p class=\"muted small\">You can disconnect it any time on "
                 "<a href=\"/account\">your account page</a>.</p>\n</section>\n");
    auth_page(z->req, 200, "Connect an app", b.data);
    buf_release(&b);
}

static void issue_code(struct authz *z, const struct store_oauth_grant *g, const char *scope,
                       const char *resource)
{
    struct err err = {0};
    char code[STORE_OAUTH_CODE_LEN + 1];
    if (store_oauth_code_create(z->a->store, g->id, z->redirect_uri,
                                form_get(&z->f, "code_challenge"), resource, scope,
                                AUTH_CODE_TTL_MS, code, &err) < 0) {
        log_error("oauth store-failure reason=\"%s\"", err.msg);
        fail(z, "server_error", "the server could not record the authorization");
        return;
    }
    log_info("oauth code-issued user=%s client=\"%.200s\" scope=\"%s\"", g->user_name, g->client_id,
             scope);
    send_back(z, "code", code, NULL, NULL);
}

static void client_found(void *ctx, struct store_oauth_client *c, const struct err *cerr)
{
    struct authz *z = ctx;
    struct auth *a = z->a;
    h2o_req_t *req = z->req;
    if (!c) {
        if (cerr->code == -ENOENT)
            auth_error_page(req, 401, "invalid_client", cerr->msg);
        else if (cerr->code == -EAGAIN)
            auth_error_page(req, 429, "temporarily_unavailable", cerr->msg);
        else if (cerr->code == -EBUSY)
            auth_error_page(req, 503, "temporarily_unavailable", cerr->msg);
        else
            auth_error_page(req, 503, "temporarily_unavailable",
                            "The server could not look up this app just now; try again.");
        return;
    }
    /* the redirect URI first: until it is checked, nothing may be sent to it */
    const char *ru = form_get(&z->f, "redirect_uri");
    if (!ru) {
        json_t *list = json_loads(c->redirect_uris, 0, NULL);
        if (json_array_size(list) == 1)
            ru = h2o_strdup(&req->pool, json_string_value(json_array_get(list, 0)), SIZE_MAX).base;
        json_decref(list);
    }
    if (!ru || !auth_redirect_uri_match(c->redirect_uris, ru)) {
        auth_error_page(req, 400, "invalid_request",
                        ru ? "The redirect_uri is not one this app registered."
                           : "The request names no redirect_uri.");
        return;
    }
    z->redirect_uri = ru;
    struct store_user user;
    bool signed_in = auth_session_user(a, req, &user);
    struct store_oauth_grant g;
    struct err err = {0};
    int r = signed_in ? store_oauth_grant_find(a->store, user.id, c->id, &g, &err) : -ENOENT;
    if (r < 0 && r != -ENOENT) {
        log_error("oauth store-failure reason=\"%s\"", err.msg);
        auth_error_page(req, 500, "server_error", "The server could not look up your approvals.");
        return;
    }
    z->trusted = r == 0;
    z->state = form_get(&z->f, "state");
    if (z->state && strlen(z->state) > AUTH_STATE_MAX) {
        z->state = NULL;
        fail(z, "invalid_request", "state is too long");
        return;
    }
    const char *rt = form_get(&z->f, "response_type");
    if (!rt || strcmp(rt, "code") != 0) {
        fail(z, "unsupported_response_type", "only response_type=code is supported");
        return;
    }
    const char *method = form_get(&z->f, "code_challenge_method");
    const char *challenge = form_get(&z->f, "code_challenge");
    if (!challenge || !method || strcmp(method, "S256") != 0) {
        fail(z, "invalid_request",
             "PKCE is required: code_challenge with code_challenge_method=S256");
        return;
    }
    if (!challenge_ok(challenge)) {
        fail(z, "invalid_request", "code_challenge is not a valid S256 challenge");
        return;
    }
    unsigned scopes = SCOPES_TOOLS;
    const char *scope = form_get(&z->f, "scope");
    if (scope && strspn(scope, " ") != strlen(scope) && scopes_parse(scope, &scopes, &err) < 0) {
        fail(z, "invalid_scope", err.msg);
        return;
    }
    char own[600];
    auth_resource(a, own, sizeof(own));
    const char *resource = form_get(&z->f, "resource");
    if (resource && strcmp(resource, own) != 0) {
        fail(z, "invalid_target", "this server issues tokens only for its own /mcp resource");
        return;
    }
    if (!signed_in) {
        auth_signin_page(a, req, 200, return_to(z), NULL);
        return;
    }
    char scope_str[128];
    scopes_format(scopes, scope_str, sizeof(scope_str));
    unsigned granted = 0;
    if (r == 0)
        scopes_parse(g.scope, &granted, NULL);
    if (!z->post) {
        if (r == 0 && (granted & scopes) == scopes)
            issue_code(z, &g, scope_str, own);
        else
            consent_page(z, c, &user, scopes);
        return;
    }
    if (!auth_csrf_ok(req, &z->f)) {
        auth_error_page(req, 403, "invalid_request",
                        "The form's security token is missing or stale; reload and try again.");
        return;
    }
    /* the user answered the consent page, which named the host they go back to */
    z->trusted = true;
    const char *decision = form_get(&z->f, "decision");
    if (!decision || strcmp(decision, "approve") != 0) {
        log_info("oauth consent-denied user=%s client=\"%.200s\"", user.name, c->id);
        fail(z, "access_denied", "the user denied the request");
        return;
    }
    char all[128], host[256];
    scopes_format(granted | scopes, all, sizeof(all));
    auth_uri_host(ru, host, sizeof(host));
    r = store_oauth_grant_approve(a->store, user.id, c->id, c->name, host, all, &g, &err);
    if (r < 0) {
        log_error("oauth store-failure reason=\"%s\"", err.msg);
        fail(z, "server_error", "the server could not record your approval");
        return;
    }
    if (r == 1)
        auth_admit_approved(a);
    log_info("oauth consent-approved user=%s client=\"%.200s\" scope=\"%s\"", user.name, c->id,
             all);
    issue_code(z, &g, scope_str, own);
}

int auth_on_authorize(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    struct auth *a = route->ctx;
    http_request_track(route, req);
    if (!auth_path_exact(req, "/authorize", false))
        return 0;
    bool post = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"));
    if (!post && !h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET"))) {
        http_add_header(req, H2O_TOKEN_ALLOW, "GET, POST");
        auth_error_page(req, 405, "invalid_request", "Use GET or POST.");
        return 0;
    }
    if (post && !http_check_origin(route->srv, req))
        return 0;
    struct authz *z = h2o_mem_alloc_shared(&req->pool, sizeof(*z), authz_dispose);
    memset(z, 0, sizeof(*z));
    z->a = a;
    z->req = req;
    z->post = post;
    if (post ? !auth_read_form(req, &z->f, false) : !auth_read_query(req, &z->f))
        return 0;
    const char *client_id = form_get(&z->f, "client_id");
    if (!client_id || !*client_id) {
        auth_error_page(req, 400, "invalid_request", "The request names no client_id.");
        return 0;
    }
    auth_client_find(a, req, client_id, true, client_found, z);
    return 0;
}

/* Signing in: a password (verified on a worker thread, never on the loop) or a one-time code
 * from `sandbox-mcp user login-link`; attempts are throttled (throttle.h): a browser that signed
 * in as the user before, by its device cookie, and the user's own network apart from strangers.
 * A successful sign-in sets the session cookie and the device cookie, and goes back to where it
 * was asked for: an authorization request, the account page, or a run's or session's page, never
 * anywhere else.
 *
 * The device cookie is base64url of the time it was issued (8 bytes, seconds, big-endian), a
 * random id (THROTTLE_DEVICE_ID_BYTES) and an HMAC-SHA256 of both and the user name under a key
 * of the server's. It names no one: it is valid only for the name it was made for, which the
 * sign-in form gives. It proves only that this browser signed in as that user within
 * SIGNIN_TRUST_DAYS, and so is judged by a count of its own; it signs nobody in. */
#include "auth/auth_internal.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/password.h"
#include "auth/throttle.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/util.h"

#define DEVICE_COOKIE "smcp_device"
#define PASSWORD_MAX 1024
#define DEVICE_HEAD (8 + THROTTLE_DEVICE_ID_BYTES) /* issued at, id */
#define DEVICE_RAW (DEVICE_HEAD + crypto_auth_hmacsha256_BYTES)
#define DEVICE_SKEW_S 300 /* a cookie issued by a node whose clock is ahead by up to this */

/* "/runs/<id>" or "/sessions/<id>", a page its owner opens signed in (src/web/web.c); ids are
 * 1 to 63 letters, digits and _. */
static bool page_path(const char *r)
{
    const char *id = strncmp(r, "/runs/", 6) == 0        ? r + 6
                     : strncmp(r, "/sessions/", 10) == 0 ? r + 10
                                                         : NULL;
    if (!id)
        return false;
    size_t n = strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");
    return n > 0 && n < 64 && id[n] == '\0';
}

/* Where a sign-in may go next: an authorization request, the account page, or a run's or
 * session's page. */
static const char *safe_return(const char *r)
{
    if (r && (strncmp(r, "/authorize?", 11) == 0 || strcmp(r, "/account") == 0 || page_path(r)) &&
        !strpbrk(r, "\\\r\n") && r[1] != '/')
        return r;
    return "/account";
}

void auth_signin_page(struct auth *a, h2o_req_t *req, int status, const char *ret,
                      const char *message)
{
    const char *csrf = auth_csrf_token(a, req);
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "<section class=\"card\">\n<h1>Sign in to sandbox-mcp</h1>\n");
    if (message) {
        buf_puts(&b, "<p class=\"error\" role=\"alert\">");
        html_text(&b, message);
        buf_puts(&b, "</p>\n");
    }
    buf_puts(&b, "<form method=\"post\" action=\"/login\" class=\"stack\">\n"
                 "<label>User name <input name=\"name\" autocomplete=\"username\" "
                 "autocapitalize=\"none\" required></label>\n"
                 "<label>Password <input name=\"password\" type=\"password\" "
                 "autocomplete=\"current-password\" required></label>\n");
    html_hidden(&b, "csrf", csrf);
    html_hidden(&b, "return_to", safe_return(ret));
    buf_puts(&b, "<button type=\"submit\" class=\"primary\">Sign in</button>\n</form>\n"
                 "</section>\n<section class=\"card\">\n<h2>Have a one-time sign-in code?</h2>\n"
                 "<form method=\"post\" action=\"/login\" class=\"stack\">\n"
                 "<label>Code <input name=\"code\" autocomplete=\"one-time-code\" "
                 "autocapitalize=\"none\" required></label>\n");
    html_hidden(&b, "csrf", csrf);
    html_hidden(&b, "return_to", safe_return(ret));
    buf_puts(&b, "<button type=\"submit\">Sign in with the code</button>\n</form>\n"
                 "<p class=\"muted small\">An operator prints one with <code>sandbox-mcp user "
                 "login-link NAME</code>.</p>\n</section>\n");
    auth_page(req, status, "Sign in", b.data);
    buf_release(&b);
}

bool auth_page_user(struct auth *a, h2o_req_t *req, const char *return_to, bool change,
                    struct store_user *user)
{
    if (auth_session_user(a, req, user))
        return true;
    if (change)
        auth_signin_page(a, req, 401, return_to, "Sign in again to change your account.");
    else
        auth_signin_page(a, req, 200, return_to, NULL);
    return false;
}

static void device_mac(const struct auth *a, const char *name, const unsigned char *head,
                       unsigned char mac[crypto_auth_hmacsha256_BYTES])
{
    static const char label[] = "sandbox-mcp device v1";
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, a->device_key, sizeof(a->device_key));
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, sizeof(label));
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)name, strlen(name) + 1);
    crypto_auth_hmacsha256_update(&st, head, DEVICE_HEAD);
    crypto_auth_hmacsha256_final(&st, mac);
}

/* The id of the request's device cookie, when it was made for name within the trust period. */
static bool device_of(struct auth *a, h2o_req_t *req, const char *name,
                      unsigned char id[THROTTLE_DEVICE_ID_BYTES])
{
    const char *c = auth_cookie(req, DEVICE_COOKIE);
    unsigned char raw[DEVICE_RAW], mac[crypto_auth_hmacsha256_BYTES];
    size_t n;
    if (!c || strlen(c) > 2 * DEVICE_RAW ||
        sodium_base642bin(raw, sizeof(raw), c, strlen(c), NULL, &n, NULL,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
        n != sizeof(raw))
        return false;
    device_mac(a, name, raw, mac);
    if (sodium_memcmp(mac, raw + DEVICE_HEAD, sizeof(mac)) != 0)
        return false;
    uint64_t issued = 0;
    for (int i = 0; i < 8; i++)
        issued = issued << 8 | raw[i];
    int64_t now = time_now_ms() / 1000;
    if (issued > (uint64_t)(now + DEVICE_SKEW_S) || (int64_t)issued < now - a->trust_s)
        return false;
    memcpy(id, raw + 8, THROTTLE_DEVICE_ID_BYTES);
    return true;
}

/* A new device cookie for name, with a new id. */
static void device_set(struct auth *a, h2o_req_t *req, const char *name)
{
    unsigned char raw[DEVICE_RAW];
    uint64_t now = (uint64_t)(time_now_ms() / 1000);
    for (int i = 0; i < 8; i++)
        raw[i] = (unsigned char)(now >> (56 - 8 * i));
    rand_bytes(raw + 8, THROTTLE_DEVICE_ID_BYTES);
    device_mac(a, name, raw, raw + DEVICE_HEAD);
    char text[2 * DEVICE_RAW];
    base64url_encode(raw, sizeof(raw), text);
    auth_set_cookie(a, req, DEVICE_COOKIE, text, a->trust_s);
}

static void signed_in(struct auth *a, h2o_req_t *req, const struct store_user *user,
                      const char *ret, const char *how)
{
    char plain[STORE_WEB_SESSION_LEN + 1];
    struct err err = {0};
    if (store_web_session_create(a->store, user->id, AUTH_SESSION_TTL_S, plain, &err) < 0) {
        log_error("auth store-failure reason=\"%s\"", err.msg);
        auth_error_page(req, 503, "temporarily_unavailable", "Signing in failed; try again.");
        return;
    }
    log_info("auth signed-in user=%s how=%s", user->name, how);
    auth_set_cookie(a, req, AUTH_SESSION_COOKIE, plain, AUTH_SESSION_TTL_S);
    sodium_memzero(plain, sizeof(plain));
    device_set(a, req, user->name);
    auth_redirect(req, 303, safe_return(ret));
}

static void throttled(struct auth *a, h2o_req_t *req, int64_t wait_ms, const char *ret)
{
    char secs[32];
    snprintf(secs, sizeof(secs), "%lld", (long long)(wait_ms + 999) / 1000);
    http_add_header(req, H2O_TOKEN_RETRY_AFTER, h2o_strdup(&req->pool, secs, SIZE_MAX).base);
    char msg[160];
    snprintf(msg, sizeof(msg), "Too many failed attempts. Try again in %s seconds.", secs);
    auth_signin_page(a, req, 429, ret, msg);
}

/* Too many strangers' sign-ins under way from the client's address or network. */
static void crowded(struct auth *a, h2o_req_t *req, const char *ret)
{
    http_add_header(req, H2O_TOKEN_RETRY_AFTER, "1");
    auth_signin_page(a, req, 429, ret,
                     "Too many sign-ins are under way from your network. Try again in a moment.");
}

static void busy(struct auth *a, h2o_req_t *req, const char *ret)
{
    http_add_header(req, H2O_TOKEN_RETRY_AFTER, "5");
    auth_signin_page(a, req, 503, ret, "The server is busy checking sign-ins; try again soon.");
}

/* A refused attempt: waiting (-EAGAIN) or crowded (-EBUSY). */
static void refused(struct auth *a, h2o_req_t *req, int r, int64_t wait, const char *how,
                    const char *ret)
{
    metrics_signin(how, r == -EAGAIN ? "throttled" : "crowded");
    if (r == -EAGAIN)
        throttled(a, req, wait, ret);
    else
        crowded(a, req, ret);
}

struct login {
    struct auth *a;
    h2o_req_t *req;
    struct password_check *check;
    struct store_user user;
    bool known;
    struct throttle_attempt at; /* open from throttle_begin until answered */
    char name[STORE_USER_NAME_MAX + 1];
    char addr[64];
    char hash[crypto_pwhash_STRBYTES]; /* the stored hash checked, what a rehash replaces */
    const char *ret;
};

static void login_dispose(void *p)
{
    struct login *l = p;
    if (l->check)
        password_check_cancel(l->check);
    /* the client left before its answer: the attempt stays counted */
    throttle_end(&l->at, THROTTLE_FAILED, time_mono_ms());
}

/* A password that matched a hash made with other limits is kept hashed with the current ones
 * (SIGNIN_PASSWORD_MEMORY_MB), unless it was set again meanwhile. */
static void keep_rehash(struct login *l, const char *rehash)
{
    struct err err = {0};
    bool replaced = false;
    if (store_user_rehash_password(l->a->store, l->name, l->hash, rehash, &replaced, &err) < 0)
        log_error("auth store-failure reason=\"%s\"", err.msg);
    else if (replaced)
        log_info("auth password-rehashed user=\"%s\"", l->name);
}

static void password_checked(void *ctx, int result, const char *rehash)
{
    struct login *l = ctx;
    l->check = NULL;
    int64_t now = time_mono_ms();
    if (result == 0 && l->known) {
        if (rehash)
            keep_rehash(l, rehash);
        throttle_end(&l->at, THROTTLE_SUCCEEDED, now);
        metrics_signin("password", "signed_in");
        signed_in(l->a, l->req, &l->user, l->ret, "password");
        return;
    }
    throttle_end(&l->at, THROTTLE_FAILED, now);
    metrics_signin("password", "wrong");
    log_warn("auth sign-in-failed user=\"%s\" addr=%s trusted=%s", l->name, l->addr,
             l->at.trusted ? "yes" : "no");
    auth_signin_page(l->a, l->req, 401, l->ret, "Wrong user name or password.");
}

static void login_code(struct auth *a, h2o_req_t *req, const char *code,
                       const struct throttle_peer *peer, const char *ret)
{
    int64_t now = time_mono_ms(), wait;
    struct throttle_attempt at;
    int r = throttle_begin(&(struct throttle_who){.peer = peer}, now, &at, &wait);
    if (r < 0) {
        refused(a, req, r, wait, "code", ret);
        return;
    }
    struct store_user user;
    struct err err = {0};
    r = store_login_link_consume(a->store, code, strlen(code), &user, &err);
    if (r == 0) {
        throttle_end(&at, THROTTLE_SUCCEEDED, now);
        metrics_signin("code", "signed_in");
        signed_in(a, req, &user, ret, "one-time-code");
        return;
    }
    if (r != -ENOENT) {
        throttle_end(&at, THROTTLE_UNCHECKED, now);
        log_error("auth store-failure reason=\"%s\"", err.msg);
        auth_error_page(req, 503, "temporarily_unavailable", "Signing in failed; try again.");
        return;
    }
    throttle_end(&at, THROTTLE_FAILED, now);
    metrics_signin("code", "wrong");
    log_warn("auth code-failed addr=%s", peer->addr);
    auth_signin_page(a, req, 401, ret, "That code is unknown, used or expired.");
}

/* POST /login */
static void login(struct auth *a, h2o_req_t *req)
{
    struct form f;
    if (!auth_read_form(req, &f, false))
        return;
    const char *ret = h2o_strdup(&req->pool, safe_return(form_get(&f, "return_to")), SIZE_MAX).base;
    if (!auth_csrf_ok(req, &f)) {
        form_release(&f);
        auth_signin_page(a, req, 403, ret,
                         "The form's security token is missing or stale; try again.");
        return;
    }
    struct throttle_peer peer;
    auth_peer_of(req, &peer);
    const char *code = form_get(&f, "code");
    if (code && *code) {
        login_code(a, req, code, &peer, ret);
        form_release(&f);
        return;
    }
    const char *name = form_get(&f, "name"), *pw = form_get(&f, "password");
    if (!name || !pw || !*name || !*pw || strlen(name) > STORE_USER_NAME_MAX ||
        strlen(pw) > PASSWORD_MAX) {
        form_release(&f);
        auth_signin_page(a, req, 400, ret, "Enter your user name and password.");
        return;
    }
    unsigned char device[THROTTLE_DEVICE_ID_BYTES];
    struct throttle_who who = {name, &peer, device_of(a, req, name, device) ? device : NULL};
    struct login *l = h2o_mem_alloc_shared(&req->pool, sizeof(*l), login_dispose);
    memset(l, 0, sizeof(*l));
    int64_t wait;
    int r = throttle_begin(&who, time_mono_ms(), &l->at, &wait);
    if (r < 0) {
        form_release(&f);
        refused(a, req, r, wait, "password", ret);
        return;
    }
    l->a = a;
    l->req = req;
    l->ret = ret;
    snprintf(l->name, sizeof(l->name), "%s", name);
    snprintf(l->addr, sizeof(l->addr), "%s", peer.addr);
    struct err err = {0};
    r = store_user_password(a->store, name, &l->user, l->hash, sizeof(l->hash), &err);
    if (r < 0 && r != -ENOENT) {
        form_release(&f);
        throttle_end(&l->at, THROTTLE_UNCHECKED, time_mono_ms());
        log_error("auth store-failure reason=\"%s\"", err.msg);
        auth_error_page(req, 503, "temporarily_unavailable", "Signing in failed; try again.");
        return;
    }
    /* an unknown user, or one without a password, costs the same time as a wrong password */
    l->known = r == 0 && l->hash[0];
    /* a browser or network that signed in before may take the places kept for them */
    l->check = password_verify_async(l->known ? l->hash : NULL, pw, strlen(pw), l->at.trusted,
                                     password_checked, l, &err);
    for (size_t i = 0; i < f.n; i++)
        if (strcmp(f.f[i].name, "password") == 0)
            sodium_memzero(f.f[i].value, strlen(f.f[i].value));
    form_release(&f);
    if (!l->check) {
        /* counted against the address that asked, not the name: nothing was checked */
        throttle_end(&l->at, THROTTLE_UNCHECKED, time_mono_ms());
        metrics_signin("password", "busy");
        busy(a, req, ret);
    }
}

/* GET /login/link?t=...: a button, so that link previews do not spend the link. POST signs
 * in. */
static void link_page(struct auth *a, h2o_req_t *req)
{
    struct form q;
    if (!auth_read_query(req, &q))
        return;
    const char *t = form_get(&q, "t");
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "<section class=\"card\">\n<h1>Sign in to sandbox-mcp</h1>\n"
                 "<p>This one-time link signs this browser in.</p>\n"
                 "<form method=\"post\" action=\"/login\">\n");
    html_hidden(&b, "code", t ? t : "");
    html_hidden(&b, "csrf", auth_csrf_token(a, req));
    html_hidden(&b, "return_to", "/account");
    buf_puts(&b, "<button type=\"submit\" class=\"primary\">Sign in</button>\n</form>\n"
                 "</section>\n");
    form_release(&q);
    auth_page(req, 200, "Sign in", b.data);
    buf_release(&b);
}

int auth_on_login(h2o_handler_t *self, h2o_req_t *req)
{
    bool post;
    struct auth *a = auth_page_enter(self, req, &post);
    if (!a)
        return 0;
    h2o_iovec_t p = req->path_normalized;
    if (h2o_memis(p.base, p.len, H2O_STRLIT("/login/link")) && !post) {
        link_page(a, req);
    } else if (h2o_memis(p.base, p.len, H2O_STRLIT("/login")) && post) {
        login(a, req);
    } else if (h2o_memis(p.base, p.len, H2O_STRLIT("/login"))) {
        struct form q;
        if (!auth_read_query(req, &q))
            return 0;
        auth_signin_page(a, req, 200, form_get(&q, "return_to"), NULL);
        form_release(&q);
    } else {
        auth_error_page(req, 404, "not_found", "There is no such page.");
    }
    return 0;
}

int auth_on_logout(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    struct auth *a = route->ctx;
    http_request_track(route, req);
    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"))) {
        http_add_header(req, H2O_TOKEN_ALLOW, "POST");
        auth_error_page(req, 405, "invalid_request",
                        "Sign out with the button on the account page.");
        return 0;
    }
    if (!http_check_origin(route->srv, req))
        return 0;
    struct form f;
    if (!auth_read_form(req, &f, false))
        return 0;
    bool ok = auth_csrf_ok(req, &f);
    form_release(&f);
    if (!ok) {
        auth_error_page(req, 403, "invalid_request", "The form's security token is missing.");
        return 0;
    }
    const char *s = auth_cookie(req, AUTH_SESSION_COOKIE);
    if (s) {
        struct err err = {0};
        store_web_session_delete(a->store, s, strlen(s), &err);
    }
    auth_set_cookie(a, req, AUTH_SESSION_COOKIE, "", 0);
    auth_redirect(req, 303, "/login?return_to=/account");
    return 0;
}

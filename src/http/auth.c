/* Who may call: bearer tokens for users, Origin and Host checks for browsers. */
#include "http/http_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth/auth.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "store/store.h"

/* Tokens seen lately, by SHA-256: a client sends the same token with every request. An entry
 * stays true while the database's data version (which any other process's write changes, the
 * CLI revoking a token say) and this process's revocation count are the ones it was checked at;
 * for a minute at most, so that last use is still recorded; and never past the token's expiry. */
#define AUTH_CACHE_SIZE 64
#define AUTH_RECHECK_MS 60000
struct auth_entry {
    char hash[65];
    struct store_user user;
    unsigned scopes;
    int64_t checked_ms;
    int64_t expires_ms; /* wall clock; 0 for API tokens */
    int64_t data_version;
    uint64_t generation;
};
static struct auth_entry auth_cache[AUTH_CACHE_SIZE];
static uint64_t auth_generation;

void http_auth_cache_flush(void)
{
    auth_generation++;
}

/* The data version as read in this turn of the loop, or -1. Every request handled in a turn
 * arrived before the turn's first read of it, so one read serves them all, and a revocation
 * committed before that read is seen by all of them: reading it for each request (two locking
 * system calls) was a good part of the cost of a small request. */
static int64_t turn_version = -1;

void http_auth_after_loop(void)
{
    turn_version = -1;
}

/* WWW-Authenticate for /mcp (RFC 6750, RFC 9728): where the resource's metadata is, which scopes
 * to ask for, and the error if a token was presented. */
static void challenge(struct http_server *srv, h2o_req_t *req, const char *error, const char *scope)
{
    char v[1024];
    int n = snprintf(v, sizeof(v),
                     "Bearer realm=\"sandbox-mcp\", resource_metadata=\"%s/.well-known/"
                     "oauth-protected-resource/mcp\", scope=\"%s\"",
                     srv->cfg->public_url, scope);
    if (error && n > 0 && (size_t)n < sizeof(v))
        snprintf(v + n, sizeof(v) - (size_t)n, ", error=\"%s\"", error);
    http_add_header(req, H2O_TOKEN_WWW_AUTHENTICATE, h2o_strdup(&req->pool, v, SIZE_MAX).base);
}

static void deny(struct http_server *srv, h2o_req_t *req, const char *error, const char *message)
{
    challenge(srv, req, error, AUTH_SCOPES_TEXT);
    http_respond_error(req, 401, "unauthorized", message);
}

void http_insufficient_scope(struct http_server *srv, h2o_req_t *req, unsigned needed)
{
    char scope[128];
    auth_scopes_format(needed, scope, sizeof(scope));
    challenge(srv, req, "insufficient_scope", scope);
    char msg[256];
    snprintf(msg, sizeof(msg), "this token lacks the '%s' scope; sign in again and approve it",
             scope);
    http_respond_error(req, 403, "insufficient_scope", msg);
}

static bool query_has_token(h2o_req_t *req)
{
    if (req->query_at == SIZE_MAX)
        return false;
    const char *q = req->path.base + req->query_at + 1;
    size_t n = req->path.len - req->query_at - 1;
    const char *names[] = {"access_token=", "token=", "api_key=", "key="};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        size_t k = strlen(names[i]);
        for (size_t p = 0; p + k <= n; p++)
            if ((p == 0 || q[p - 1] == '&') && strncmp(q + p, names[i], k) == 0)
                return true;
    }
    return false;
}

bool http_authenticate(struct http_server *srv, h2o_req_t *req, struct store_user *user,
                       unsigned *scopes)
{
    if (query_has_token(req)) {
        deny(srv, req, "invalid_request",
             "tokens in the URL are not accepted: send 'Authorization: Bearer <token>'");
        return false;
    }
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
    if (i < 0) {
        deny(srv, req, NULL, "missing 'Authorization: Bearer <token>' header");
        return false;
    }
    h2o_iovec_t v = req->headers.entries[i].value;
    if (v.len < 7 || strncasecmp(v.base, "Bearer ", 7) != 0) {
        deny(srv, req, "invalid_request", "the Authorization header must use the Bearer scheme");
        return false;
    }
    const char *tok = v.base + 7;
    size_t len = v.len - 7;
    struct err err = {0};
    int r = http_token_check(srv, tok, len, user, scopes, &err);
    if (r == -ENOENT) {
        deny(srv, req, "invalid_token", "invalid, expired or revoked token");
        return false;
    }
    if (r < 0) {
        log_error("auth store-failure reason=\"%s\"", err.msg);
        http_respond_error(req, 503, "unavailable", "authentication is temporarily unavailable");
        return false;
    }
    http_conn_authenticated(req);
    return true;
}

/* An OAuth access token: its user and scopes, if it is live and was issued for this server's
 * /mcp (a token for another resource is refused, whoever issued it). */
static int oauth_check(struct http_server *srv, const char *tok, size_t len,
                       struct store_user *user, unsigned *scopes, int64_t *expires, struct err *err)
{
    struct store_oauth_token t;
    int r = store_oauth_access_check(srv->store, tok, len, user, &t, err);
    if (r < 0)
        return r;
    char resource[600];
    snprintf(resource, sizeof(resource), "%s/mcp", srv->cfg->public_url);
    if (strcmp(t.resource, resource) != 0)
        return err_set(err, -ENOENT, "the token was issued for another resource");
    auth_scopes_parse(t.scope, scopes, NULL);
    *expires = t.expires_at;
    return 0;
}

int http_token_check(struct http_server *srv, const char *tok, size_t len, struct store_user *user,
                     unsigned *scopes, struct err *err)
{
    while (len && *tok == ' ')
        tok++, len--;
    while (len && tok[len - 1] == ' ')
        len--;
    unsigned got = 0;
    if (!scopes)
        scopes = &got;
    char hash[65];
    sha256_hex(tok, len, hash);
    char head[4] = {hash[0], hash[1], hash[2], '\0'};
    struct auth_entry *e = &auth_cache[strtoul(head, NULL, 16) % AUTH_CACHE_SIZE];
    int64_t now = time_mono_ms();
    if (turn_version < 0)
        turn_version = store_data_version(srv->store);
    int64_t version = turn_version;
    if (strcmp(e->hash, hash) == 0 && now - e->checked_ms < AUTH_RECHECK_MS && version >= 0 &&
        version == e->data_version && e->generation == auth_generation &&
        (!e->expires_ms || e->expires_ms > time_now_ms())) {
        *user = e->user;
        *scopes = e->scopes;
        return 0;
    }
    int64_t expires = 0;
    int r;
    if (len == STORE_OAUTH_TOKEN_LEN && strncmp(tok, STORE_OAUTH_ACCESS_PREFIX, 8) == 0) {
        r = oauth_check(srv, tok, len, user, scopes, &expires, err);
    } else {
        r = len > 0 && len <= 256 ? store_token_authenticate(srv->store, tok, len, user, err)
                                  : -ENOENT;
        *scopes = AUTH_SCOPES_ALL;
    }
    if (r == 0) {
        memcpy(e->hash, hash, sizeof(hash));
        e->user = *user;
        e->scopes = *scopes;
        e->checked_ms = now;
        e->expires_ms = expires;
        e->data_version = version;
        e->generation = auth_generation;
    } else if (strcmp(e->hash, hash) == 0) {
        e->hash[0] = '\0';
    }
    return r;
}

/* Host part of "scheme://host[:port]" or "host[:port]"; IPv6 literals keep their brackets. */
static void host_of(const char *s, size_t n, char *out, size_t cap)
{
    const char *p = memmem(s, n, "://", 3);
    if (p) {
        n -= (size_t)(p + 3 - s);
        s = p + 3;
    }
    size_t end = 0;
    if (n && s[0] == '[') {
        while (end < n && s[end] != ']')
            end++;
        if (end < n)
            end++;
    } else {
        while (end < n && s[end] != ':' && s[end] != '/')
            end++;
    }
    snprintf(out, cap, "%.*s", (int)end, s);
    for (char *c = out; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
}

static bool is_loopback_host(const char *h)
{
    return strcmp(h, "localhost") == 0 || strncmp(h, "127.", 4) == 0 || strcmp(h, "[::1]") == 0;
}

static bool origin_listed(const char *list, const char *origin, size_t olen)
{
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        size_t n = (size_t)(e - p);
        while (n && p[n - 1] == ' ')
            n--;
        if (n && ((n == 1 && *p == '*') || (n == olen && strncasecmp(p, origin, n) == 0)))
            return true;
        p = e;
    }
    return false;
}

bool http_check_origin(struct http_server *srv, h2o_req_t *req)
{
    char public_host[256], host[256];
    host_of(srv->cfg->public_url, strlen(srv->cfg->public_url), public_host, sizeof(public_host));

    /* DNS rebinding: a page on evil.example resolving to 127.0.0.1 still sends Host: evil.example.
     */
    if (srv->listen_loopback && req->input.authority.len) {
        host_of(req->input.authority.base, req->input.authority.len, host, sizeof(host));
        if (!is_loopback_host(host) && strcmp(host, public_host) != 0) {
            log_warn("http forbidden-host host=\"%.100s\"", host);
            http_respond_error(req, 403, "forbidden", "Host header is not allowed");
            return false;
        }
    }
    ssize_t i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("origin"), -1);
    if (i < 0)
        return true; /* not a browser, or a same-origin navigation */
    h2o_iovec_t o = req->headers.entries[i].value;
    size_t plen = strlen(srv->cfg->public_url);
    if (o.len == plen && strncasecmp(o.base, srv->cfg->public_url, plen) == 0)
        return true;
    if (origin_listed(srv->cfg->allowed_origins, o.base, o.len))
        return true;
    host_of(o.base, o.len, host, sizeof(host));
    if (srv->listen_loopback && is_loopback_host(host))
        return true;
    log_warn("http forbidden-origin origin=\"%.*s\"", (int)(o.len > 100 ? 100 : o.len), o.base);
    http_respond_error(req, 403, "forbidden", "Origin is not allowed");
    return false;
}

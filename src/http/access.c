/* Who may call, at the HTTP boundary: the Authorization header of /mcp (the token itself is
 * judged by bearer.c) and its 401/403 challenges, and the Origin and Host checks for browsers. */
#include "http/http_internal.h"

#include "http/bearer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/scopes.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "store/store.h"

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
    challenge(srv, req, error, SCOPES_TEXT);
    http_respond_error(req, 401, "unauthorized", message);
}

void http_insufficient_scope(struct http_server *srv, h2o_req_t *req, unsigned needed)
{
    char scope[128];
    scopes_format(needed, scope, sizeof(scope));
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
    int r = http_bearer_check(srv->store, srv->cfg->public_url, tok, len, user, scopes, &err);
    if (r == -ENOENT) {
        deny(srv, req, "invalid_token", "invalid, expired or revoked token");
        return false;
    }
    if (r < 0) {
        log_error("auth store-failure reason=\"%s\"", err.msg);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("5"));
        http_respond_error(req, 503, "unavailable",
                           "authentication is temporarily unavailable: the server's database did "
                           "not answer; try again shortly");
        return false;
    }
    http_conn_authenticated(req);
    return true;
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

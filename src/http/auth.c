/* Who may call: bearer tokens for users, Origin and Host checks for browsers. */
#include "http/http_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "store/store.h"

/* Tokens seen lately, by SHA-256: a client sends the same token with every request. Tokens
 * are revoked only by the CLI, another process, so an entry stays true as long as the
 * database's data version (which any other process's write changes) is the one it was checked
 * at; and for a minute at most, so that last use is still recorded. */
#define AUTH_CACHE_SIZE 64
#define AUTH_RECHECK_MS 60000
struct auth_entry {
    char hash[65];
    struct store_user user;
    int64_t checked_ms;
    int64_t data_version;
};
static struct auth_entry auth_cache[AUTH_CACHE_SIZE];

static void deny(h2o_req_t *req, const char *www_auth, const char *message)
{
    http_add_header(req, H2O_TOKEN_WWW_AUTHENTICATE, www_auth);
    http_respond_error(req, 401, "unauthorized", message);
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

bool http_authenticate(struct http_server *srv, h2o_req_t *req, struct store_user *user)
{
    if (query_has_token(req)) {
        deny(req, "Bearer error=\"invalid_request\"",
             "tokens in the URL are not accepted: send 'Authorization: Bearer <token>'");
        return false;
    }
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
    if (i < 0) {
        deny(req, "Bearer realm=\"sandbox-mcp\"", "missing 'Authorization: Bearer <token>' header");
        return false;
    }
    h2o_iovec_t v = req->headers.entries[i].value;
    if (v.len < 7 || strncasecmp(v.base, "Bearer ", 7) != 0) {
        deny(req, "Bearer realm=\"sandbox-mcp\", error=\"invalid_request\"",
             "the Authorization header must use the Bearer scheme");
        return false;
    }
    const char *tok = v.base + 7;
    size_t len = v.len - 7;
    struct err err = {0};
    int r = http_token_check(srv, tok, len, user, &err);
    if (r == -ENOENT) {
        deny(req, "Bearer realm=\"sandbox-mcp\", error=\"invalid_token\"",
             "invalid or revoked token");
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

int http_token_check(struct http_server *srv, const char *tok, size_t len, struct store_user *user,
                     struct err *err)
{
    while (len && *tok == ' ')
        tok++, len--;
    while (len && tok[len - 1] == ' ')
        len--;
    char hash[65];
    sha256_hex(tok, len, hash);
    char head[4] = {hash[0], hash[1], hash[2], '\0'};
    struct auth_entry *e = &auth_cache[strtoul(head, NULL, 16) % AUTH_CACHE_SIZE];
    int64_t now = time_mono_ms();
    int64_t version = store_data_version(srv->store);
    if (strcmp(e->hash, hash) == 0 && now - e->checked_ms < AUTH_RECHECK_MS && version >= 0 &&
        version == e->data_version) {
        *user = e->user;
        return 0;
    }
    int r =
        len > 0 && len <= 256 ? store_token_authenticate(srv->store, tok, len, user, err) : -ENOENT;
    if (r == 0) {
        memcpy(e->hash, hash, sizeof(hash));
        e->user = *user;
        e->checked_ms = now;
        e->data_version = version;
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

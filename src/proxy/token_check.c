/* The agent's proxy token on the request path: which header carries it, the one check of it
 * (signature and expiry once per token, then from a cache; revocation at most once a second;
 * a warm agent's token standing for its sandbox's run under way), and minting with its row for
 * revocation. Its rule: the token text is never logged, and every request of the proxy, the
 * forwarded ones and the in-namespace listener's, is checked here and nowhere else. */
#include "proxy/proxy_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "proxy/token.h"
#include "store/store.h"

/* Verified tokens: an agent sends the same token with every request, so the signature check and
 * claim parsing run once, and the revocation lookup at most once a second per token. Expiry is
 * checked on every use. A token is known by its digest (token_digest; on the path of every
 * proxied request: bench/proxy.mjs). */
#define TOKEN_CACHE_SIZE 256
#define REVOCATION_RECHECK_MS 1000
struct token_cache_entry {
    unsigned char hash[TOKEN_DIGEST_BYTES];
    bool used;
    struct proxy_claims claims;
    int64_t checked_ms; /* monotonic time of the last revocation lookup */
};
static struct token_cache_entry token_cache[TOKEN_CACHE_SIZE];

h2o_iovec_t proxy_header_value(h2o_req_t *req, const char *name)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, strlen(name), -1);
    if (i < 0)
        return h2o_iovec_init(NULL, 0);
    h2o_iovec_t v = req->headers.entries[i].value;
    while (v.len && (v.base[0] == ' ' || v.base[0] == '\t'))
        v.base++, v.len--;
    while (v.len && (v.base[v.len - 1] == ' ' || v.base[v.len - 1] == '\t'))
        v.len--;
    return v;
}

static h2o_iovec_t trim(h2o_iovec_t v)
{
    while (v.len && (v.base[0] == ' ' || v.base[0] == '\t'))
        v.base++, v.len--;
    while (v.len && (v.base[v.len - 1] == ' ' || v.base[v.len - 1] == '\t'))
        v.len--;
    return v;
}

size_t proxy_token_of(unsigned from, h2o_iovec_t x_api_key, h2o_iovec_t authorization, char *out,
                      size_t cap)
{
    h2o_iovec_t v = trim(x_api_key), tok = {NULL, 0};
    unsigned char raw[6144];
    if ((from & TOKEN_X_API_KEY) && v.len) {
        tok = v;
    } else if (v = trim(authorization),
               (from & TOKEN_BEARER) && v.len > 7 && strncasecmp(v.base, "Bearer ", 7) == 0) {
        tok = h2o_iovec_init(v.base + 7, v.len - 7);
    } else if ((from & TOKEN_TOKEN) && v.len > 6 && strncasecmp(v.base, "token ", 6) == 0) {
        tok = h2o_iovec_init(v.base + 6, v.len - 6);
    } else if ((from & TOKEN_BASIC_PASSWORD) && v.len > 6 &&
               strncasecmp(v.base, "Basic ", 6) == 0 && v.len < 8192) {
        ssize_t n = base64_decode(v.base + 6, v.len - 6, raw);
        const char *colon = n > 0 ? memchr(raw, ':', (size_t)n) : NULL;
        if (!colon)
            return 0;
        tok = h2o_iovec_init(colon + 1, (size_t)n - (size_t)(colon + 1 - (char *)raw));
    }
    if (!tok.len || tok.len >= cap)
        return 0;
    memcpy(out, tok.base, tok.len);
    out[tok.len] = '\0';
    return tok.len;
}

/* Set c's services from a comma-separated list: 0, or -E2BIG past PROXY_SERVICES_MAX (the
 * first of them kept). */
static int claims_set_services(struct proxy_claims *c, const char *services)
{
    char list[PROXY_SERVICES_MAX * 32 + 1];
    snprintf(list, sizeof(list), "%s", services);
    c->nservices = 0;
    for (char *save = NULL, *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        if (c->nservices == PROXY_SERVICES_MAX)
            return -E2BIG;
        snprintf(c->services[c->nservices++], sizeof(c->services[0]), "%s", s);
    }
    return 0;
}

/* A pooled agent's key on its sandbox's listener: the grant of the run of the sandbox's owner
 * running there, with that run's token's row for its usage. */
static int sandbox_key_check(struct proxy *p, const char *listener, struct proxy_claims *claims,
                             struct err *err)
{
    struct proxy_run_grant g = {0};
    if (!p->run_lookup || !p->run_lookup(p->run_lookup_ctx, listener, NULL, &g)) {
        /* a pooled agent's warm-up ends here, once (sandbox/helper/agent.c) */
        char key[96];
        uint64_t suppressed = 0;
        snprintf(key, sizeof(key), "sbxkey %s", listener);
        if (log_ratelimit(key, 1, time_mono_ms(), &suppressed))
            log_info("proxy refused a pooled agent sbx=%s reason=no_run suppressed=%llu", listener,
                     (unsigned long long)suppressed);
        return err_set(err, -ENOENT,
                       "this sandbox's agent key is honored only while one of its runs is "
                       "running");
    }
    *claims = (struct proxy_claims){.warm = true};
    snprintf(claims->user, sizeof(claims->user), "%s", g.user);
    snprintf(claims->run, sizeof(claims->run), "%s", g.run);
    snprintf(claims->sandbox, sizeof(claims->sandbox), "%s", listener);
    snprintf(claims->repo, sizeof(claims->repo), "%s", g.repo);
    snprintf(claims->branch, sizeof(claims->branch), "%s", g.repo[0] ? g.branch : "");
    snprintf(claims->jti, sizeof(claims->jti), "%s", g.jti);
    claims_set_services(claims, g.services);
    claims->iat = time_now_ms() / 1000;
    claims->exp = claims->iat + 60;
    return 0;
}

int proxy_token_check(struct proxy *p, const char *token, size_t len, const char *listener,
                      struct proxy_claims *claims, struct err *err)
{
    if (len > sizeof(PROXY_SANDBOX_KEY_PREFIX) - 1 &&
        memcmp(token, PROXY_SANDBOX_KEY_PREFIX, sizeof(PROXY_SANDBOX_KEY_PREFIX) - 1) == 0) {
        if (!listener || !listener[0] ||
            !proxy_sandbox_key_is(p->key, p->keylen, listener, token, len))
            return err_set(err, -EACCES, "not this sandbox's agent key");
        return sandbox_key_check(p, listener, claims, err);
    }
    unsigned char hash[TOKEN_DIGEST_BYTES];
    token_digest(token, len, hash);
    struct token_cache_entry *ce = &token_cache[hash[0] % TOKEN_CACHE_SIZE];
    int64_t now_ms = time_mono_ms();
    bool cached = ce->used && memcmp(ce->hash, hash, sizeof(hash)) == 0;
    if (cached) {
        *claims = ce->claims;
        if (claims->exp <= time_now_ms() / 1000) {
            ce->used = false;
            return err_set(err, -EACCES, "token expired");
        }
    } else {
        int r =
            proxy_token_verify(p->key, p->keylen, token, len, time_now_ms() / 1000, claims, err);
        if (r < 0)
            return r;
    }
    if (!cached || now_ms - ce->checked_ms >= REVOCATION_RECHECK_MS) {
        int r = store_proxy_token_check(p->store, claims->jti, err);
        if (r == -EKEYREVOKED) {
            ce->used = false;
            return r;
        }
        if (r < 0 && r != -ENOENT && cached) {
            /* the store cannot answer now (its database restarting): a token it knew stays
             * honoured until it can, and is looked up again with the next request */
            log_warn("token revocation not checked jti=%s err=\"%s\"", claims->jti, err->msg);
        } else if (r < 0) {
            return err_set(err, -EACCES, "unknown token");
        } else {
            memcpy(ce->hash, hash, sizeof(hash));
            ce->claims = *claims;
            ce->checked_ms = now_ms;
            ce->used = true;
        }
    }
    /* a warm agent's token stands for the run of its sandbox that is running now, if any, and
     * grants what that run's own token would */
    if (claims->warm) {
        struct proxy_run_grant g = {0};
        if (!p->run_lookup || !claims->sandbox[0] ||
            !p->run_lookup(p->run_lookup_ctx, claims->sandbox, claims->user, &g))
            return err_set(err, -ENOENT,
                           "this sandbox's agent token is honored only while one of its runs is "
                           "running");
        snprintf(claims->run, sizeof(claims->run), "%s", g.run);
        snprintf(claims->repo, sizeof(claims->repo), "%s", g.repo);
        snprintf(claims->branch, sizeof(claims->branch), "%s", g.repo[0] ? g.branch : "");
        claims_set_services(claims, g.services); /* as many as it minted */
    }
    return 0;
}

void proxy_set_run_lookup(struct proxy *p, proxy_run_lookup_fn fn, void *ctx)
{
    p->run_lookup = fn;
    p->run_lookup_ctx = ctx;
}

bool proxy_head_authorized(struct proxy *p, h2o_iovec_t x_api_key, h2o_iovec_t authorization,
                           const char *listener_sandbox)
{
    char token[PROXY_TOKEN_MAX + 1];
    size_t len = proxy_token_of(TOKEN_X_API_KEY | TOKEN_BEARER | TOKEN_BASIC_PASSWORD | TOKEN_TOKEN,
                                x_api_key, authorization, token, sizeof(token));
    struct proxy_claims claims;
    struct err err = {0};
    return len && proxy_token_check(p, token, len, listener_sandbox, &claims, &err) == 0 &&
           strcmp(claims.sandbox, listener_sandbox) == 0;
}

int proxy_mint(struct store *st, const void *key, size_t keylen, const struct proxy_grant *g,
               char **token, char jti[64], struct err *err)
{
    struct proxy_claims c = {0};
    const char *services = g->services;
    snprintf(c.user, sizeof(c.user), "%s", g->user_id);
    snprintf(c.run, sizeof(c.run), "%s", g->run_id ? g->run_id : "");
    snprintf(c.session, sizeof(c.session), "%s", g->session_id ? g->session_id : "");
    snprintf(c.sandbox, sizeof(c.sandbox), "%s", g->sandbox_id ? g->sandbox_id : "");
    snprintf(c.repo, sizeof(c.repo), "%s", g->repo ? g->repo : "");
    snprintf(c.branch, sizeof(c.branch), "%s", g->repo && g->branch ? g->branch : "");
    c.warm = g->warm && g->sandbox_id && !g->run_id;
    if (claims_set_services(&c, services) < 0)
        return err_set(err, -E2BIG, "too many services");
    c.iat = time_now_ms() / 1000;
    c.exp = c.iat + g->ttl_seconds;
    id_new("jti", c.jti);
    int r = proxy_token_mint(key, keylen, &c, token, err);
    if (r < 0)
        return r;
    struct store_proxy_token row = {0};
    snprintf(row.jti, sizeof(row.jti), "%s", c.jti);
    snprintf(row.user_id, sizeof(row.user_id), "%s", g->user_id);
    snprintf(row.run_id, sizeof(row.run_id), "%s", c.run);
    snprintf(row.session_id, sizeof(row.session_id), "%s", c.session);
    snprintf(row.sandbox_id, sizeof(row.sandbox_id), "%s", c.sandbox);
    snprintf(row.services, sizeof(row.services), "%s", services);
    row.created_at = c.iat;
    row.expires_at = c.exp;
    if ((r = store_proxy_token_add(st, &row, err)) < 0) {
        free(*token);
        *token = NULL;
        return r;
    }
    snprintf(jti, 64, "%s", c.jti);
    return 0;
}

bool proxy_agent_auth(void *ctx, h2o_req_t *req, const char *sandbox_id, char user_id[64],
                      char run_id[64])
{
    struct proxy *p = ctx;
    char token[PROXY_TOKEN_MAX + 1];
    size_t len =
        proxy_token_of(TOKEN_X_API_KEY | TOKEN_BEARER, proxy_header_value(req, "x-api-key"),
                       proxy_header_value(req, "authorization"), token, sizeof(token));
    if (!len) {
        proxy_respond_error(req, 401, "missing_token",
                            "the run's proxy token is required (Authorization: Bearer)");
        return false;
    }
    struct proxy_claims claims = {0};
    struct err err = {0};
    /* a pooled agent's key is this sandbox's (checked against the listener), with a run or not */
    bool sandbox_key =
        len > sizeof(PROXY_SANDBOX_KEY_PREFIX) - 1 &&
        memcmp(token, PROXY_SANDBOX_KEY_PREFIX, sizeof(PROXY_SANDBOX_KEY_PREFIX) - 1) == 0;
    int r = proxy_token_check(p, token, len, sandbox_id, &claims, &err);
    explicit_bzero(token, sizeof(token));
    if (r < 0 && r != -ENOENT) {
        proxy_respond_error(req, r == -EKEYREVOKED ? 403 : 401,
                            r == -EKEYREVOKED ? "token_revoked" : "invalid_token", "%s", err.msg);
        return false;
    }
    if (!(r == -ENOENT && sandbox_key) && strcmp(claims.sandbox, sandbox_id) != 0) {
        proxy_respond_error(req, 403, "wrong_listener", "this token belongs to another listener");
        return false;
    }
    /* the sandbox's agent between runs (booted ahead, kept warm) lists the tools; a call needs a
     * run working */
    snprintf(user_id, 64, "%s", r == 0 ? claims.user : "");
    snprintf(run_id, 64, "%s", r == 0 ? claims.run : "");
    return true;
}

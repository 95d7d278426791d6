/* /proxy/<service>/<path>: the proxy's request handler and its life cycle. A request is taken
 * through its checks in order (the service, the agent's token in token_check.c, the method and
 * path, the repository and push policy in push_policy.c, the size, a key to use) and then handed
 * to forward.c, which streams it upstream and the answer back. Its rule: each refusal is
 * answered here or by the check that made it, once, as a JSON error of status and code. */
#include "proxy/proxy_internal.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "proxy/token.h"
#include "store/store.h"

static struct proxy *the_proxy; /* for proxy_provider_names */

void proxy_respond_error(h2o_req_t *req, int status, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* "message" as GitHub's own errors carry it, which gh and Octokit show */
    json_t *body = json_pack("{s:s, s:s, s:s}", "error", msg, "code", code, "message", msg);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    static const char *const reasons[] = {
        [400] = "Bad Request",       [401] = "Unauthorized",       [403] = "Forbidden",
        [404] = "Not Found",         [405] = "Method Not Allowed", [413] = "Payload Too Large",
        [429] = "Too Many Requests", [502] = "Bad Gateway",        [503] = "Service Unavailable",
        [504] = "Gateway Timeout"};
    req->res.status = status;
    req->res.reason = status < 505 && reasons[status] ? reasons[status] : "Error";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                   H2O_STRLIT("application/json"));
    size_t n = strlen(text);
    h2o_iovec_t v = h2o_strdup(&req->pool, text, n);
    free(text);
    req->res.content_length = n;
    h2o_send_inline(req, v.base, v.len);
}

/* --- request side --- */

static const struct provider *find_provider(const struct proxy *p, const char *name, size_t len)
{
    for (size_t i = 0; i < p->nproviders; i++)
        if (strlen(p->providers[i].name) == len && memcmp(p->providers[i].name, name, len) == 0)
            return &p->providers[i];
    return NULL;
}

/* A path we are willing to pass on: printable, starting with '/', no dot segments, no encoded
 * dots or slashes (which upstreams might decode into a path the allow-list never saw). */
static bool path_clean(const char *p, size_t len)
{
    if (len == 0 || p[0] != '/')
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c <= 0x20 || c >= 0x7f || c == '\\')
            return false;
        if (c == '/' && i + 1 < len && p[i + 1] == '.')
            return false;
        if (c == '%' && i + 2 < len &&
            ((p[i + 1] == '2' && (tolower((unsigned char)p[i + 2]) == 'e' ||
                                  tolower((unsigned char)p[i + 2]) == 'f')) ||
             (p[i + 1] == '5' && tolower((unsigned char)p[i + 2]) == 'c')))
            return false;
    }
    return true;
}

/* The checks of a request for prov (rest: its path below the service), in order, each answered
 * when it refuses; then the request goes to forward.c. */
static void serve(struct proxy *p, h2o_req_t *req, const char *listener_sandbox,
                  const struct provider *prov, const char *rest, size_t rlen)
{
    char token[PROXY_TOKEN_MAX + 1];
    size_t tlen = proxy_token_of(prov->token_from, proxy_header_value(req, "x-api-key"),
                                 proxy_header_value(req, "authorization"), token, sizeof(token));
    if (!tlen) {
        if (prov->token_from & TOKEN_BASIC_PASSWORD) /* git asks for credentials only when told */
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE, NULL,
                           H2O_STRLIT("Basic realm=\"sandbox-mcp proxy\""));
        proxy_respond_error(
            req, 401, "missing_token",
            "a proxy token is required (in x-api-key, Authorization: Bearer or token, or "
            "the Basic password, as the service's client sends its key)");
        return;
    }
    struct proxy_claims claims;
    struct err err = {0};
    int r = proxy_token_check(p, token, tlen, listener_sandbox, &claims, &err);
    if (r == -EKEYREVOKED || r == -ENOENT) {
        proxy_respond_error(req, 403, r == -ENOENT ? "no_run" : "token_revoked", "%s", err.msg);
        return;
    }
    if (r < 0) {
        proxy_respond_error(req, 401, "invalid_token", "%s", err.msg);
        return;
    }
    if (!proxy_claims_grant(&claims, provider_grant_name(prov))) {
        proxy_respond_error(req, 403, "service_not_granted", "this token does not grant '%s'",
                            provider_grant_name(prov));
        return;
    }
    if (strcmp(claims.sandbox, listener_sandbox) != 0) {
        proxy_respond_error(req, 403, "wrong_listener",
                            claims.sandbox[0] ? "this token belongs to another sandbox's listener"
                                              : "this token is for the server's own listener");
        return;
    }
    char gql_repo[PROXY_REPO_MAX];
    int gql =
        prov->rest_scoped ? proxy_rest_graphql(req, prov, &claims, &rest, &rlen, gql_repo) : 0;
    if (gql < 0)
        return;
    if (!gql && !(prov->methods & method_bit(req->method.base, req->method.len))) {
        h2o_iovec_t allow = provider_methods(prov, &req->pool);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, allow.base, allow.len);
        proxy_respond_error(req, 405, "method_not_allowed", "method %.*s is not allowed for '%s'",
                            (int)(req->method.len > 16 ? 16 : req->method.len), req->method.base,
                            prov->name);
        return;
    }
    if (!path_clean(rest, rlen) || !provider_path_allowed(prov, rest, rlen)) {
        proxy_respond_error(req, 400, "path_not_allowed", "path '%.*s' is not allowed for '%s'",
                            (int)(rlen > 200 ? 200 : rlen), rest, prov->name);
        return;
    }
    /* the user's own credential for the service, when they have one */
    _cleanup_free_ char *own_value = NULL;
    if (prov->user_credential && p->have_seal_key) {
        char *own = NULL;
        size_t own_len = 0;
        if (store_credential_open(p->store, p->seal_key, claims.user, prov->user_credential, &own,
                                  &own_len, &err) == 0) {
            own_value = provider_key_value(prov->key_format, own);
            explicit_bzero(own, own_len);
            free(own);
        } else if (err.code != -ENOENT) {
            log_warn("proxy credential unusable service=%s user=%s err=\"%s\"", prov->name,
                     claims.user, err.msg);
        }
    }
    if (prov->rest_scoped && !proxy_rest_granted(p, req, prov, &claims, &rest, &rlen,
                                                 gql ? gql_repo : NULL, own_value != NULL)) {
        if (own_value)
            explicit_bzero(own_value, strlen(own_value));
        return;
    }
    char repo[PROXY_REPO_MAX] = "";
    bool push = prov->repo_scoped && proxy_is_push(req, rest, rlen);
    struct push_wait *wait = NULL;
    if (prov->repo_scoped &&
        (!proxy_repo_granted(p, req, prov, &claims, rest, rlen, own_value != NULL, push, repo) ||
         (push && !proxy_push_granted(p, req, &claims, repo, rest, rlen, &wait)))) {
        if (own_value)
            explicit_bzero(own_value, strlen(own_value));
        return;
    }
    if (req->entity.base && req->entity.len > p->max_request_bytes) {
        proxy_respond_error(req, 413, "too_large", "request body is larger than %llu bytes",
                            (unsigned long long)p->max_request_bytes);
        return;
    }
    if (!own_value && !prov->key_value) {
        proxy_respond_error(req, 503, "not_configured", "service '%s' has no key configured",
                            prov->name);
        return;
    }

    struct transfer *t = forward_new(p, req, prov, &claims, rest, rlen, gql > 0,
                                     own_value ? own_value : prov->key_value);
    if (own_value)
        explicit_bzero(own_value, strlen(own_value));
    if (wait)
        proxy_push_check_begin(t, wait);
    else
        forward_connect(t);
}

int proxy_handle(struct proxy *p, h2o_req_t *req, const char *listener_sandbox)
{
    /* /proxy/<service>/<rest>?<query> */
    const char *path = req->path_normalized.base;
    size_t plen = req->path_normalized.len;
    if (plen < 8 || memcmp(path, "/proxy/", 7) != 0) {
        proxy_respond_error(req, 404, "unknown_service", "use /proxy/<service>/<path>");
        return 0;
    }
    const char *svc = path + 7;
    const char *slash = memchr(svc, '/', plen - 7);
    size_t slen = slash ? (size_t)(slash - svc) : plen - 7;
    const struct provider *prov = find_provider(p, svc, slen);
    if (!prov) {
        proxy_respond_error(req, 404, "unknown_service", "unknown service '%.*s' (known: %s)",
                            (int)(slen > 64 ? 64 : slen), svc, p->names);
        return 0;
    }
    serve(p, req, listener_sandbox, prov, slash ? slash : "/", slash ? plen - 7 - slen : 1);
    return 0;
}

int proxy_handle_rest(struct proxy *p, h2o_req_t *req, const char *listener_sandbox)
{
    const struct provider *prov = NULL;
    for (size_t i = 0; i < p->nproviders && !prov; i++)
        if (p->providers[i].rest_scoped)
            prov = &p->providers[i];
    if (!prov) {
        proxy_respond_error(req, 404, "unknown_service", "this server serves no REST API here");
        return 0;
    }
    serve(p, req, listener_sandbox, prov, req->path_normalized.base, req->path_normalized.len);
    return 0;
}

int proxy_new(const struct config *cfg, struct store *st, const void *key, size_t keylen,
              struct proxy **ret, struct err *err)
{
    struct proxy *p = xcalloc(1, sizeof(*p));
    p->store = st;
    p->key = xmalloc(keylen);
    memcpy(p->key, key, keylen);
    p->keylen = keylen;
    int r = providers_load(cfg, &p->providers, &p->nproviders, err);
    if (r < 0) {
        free(p->key);
        free(p);
        return r;
    }
    if ((r = config_get_u64(cfg, "PROXY_MAX_REQUEST_BYTES", cfg->max_request_bytes, 1024,
                            cfg->max_request_bytes, &p->max_request_bytes, err)) < 0 ||
        (r = config_get_u64(cfg, "PROXY_STALL_SECONDS", 300, 1, 86400, &p->stall_seconds, err)) <
            0) {
        proxy_free(p);
        return r;
    }
    uint64_t threads, waiting, backoff, backoff_max;
    if ((r = config_get_u64(cfg, "PROXY_PUSH_CHECKS", 2, 1, 64, &threads, err)) < 0 ||
        (r = config_get_u64(cfg, "PROXY_PUSH_CHECKS_WAITING", 8, 0, 256, &waiting, err)) < 0 ||
        (r = config_get_u64(cfg, "PROXY_PUSH_BACKOFF_SECONDS", 1, 0, 3600, &backoff, err)) < 0 ||
        (r = config_get_u64(cfg, "PROXY_PUSH_BACKOFF_MAX_SECONDS", 60, 0, 86400, &backoff_max,
                            err)) < 0) {
        proxy_free(p);
        return r;
    }
    if (backoff_max < backoff) {
        proxy_free(p);
        return err_set(err, -EINVAL,
                       "PROXY_PUSH_BACKOFF_MAX_SECONDS (%llu) is less than "
                       "PROXY_PUSH_BACKOFF_SECONDS (%llu)",
                       (unsigned long long)backoff_max, (unsigned long long)backoff);
    }
    p->push_checks = push_checks_new(&(struct push_limits){.threads = (unsigned)threads,
                                                           .waiting = (unsigned)waiting,
                                                           .backoff_ms = backoff * 1000,
                                                           .backoff_max_ms = backoff_max * 1000});
    struct buf names;
    buf_init(&names, 0); /* at most PROXY_PROVIDERS_MAX names of PROXY_NAME_MAX bytes */
    p->llms = xcalloc(p->nproviders + 1, sizeof(*p->llms));
    for (size_t i = 0; i < p->nproviders; i++) {
        const struct provider *prov = &p->providers[i];
        buf_printf(&names, "%s%s", i ? ", " : "", prov->name);
        if (prov->llm)
            p->llms[p->nllms++] = (struct proxy_llm){.name = prov->name,
                                                     .key_env = prov->key_env,
                                                     .has_key = prov->key != NULL,
                                                     .wire = prov->wire,
                                                     .base_path = prov->agent_path};
    }
    p->names = buf_steal(&names, NULL);
    if (!p->names)
        p->names = xstrdup("");
    if ((r = forward_init(p, err)) < 0) {
        proxy_free(p);
        return r;
    }
    the_proxy = p;
    *ret = p;
    return 0;
}

void proxy_free(struct proxy *p)
{
    if (!p)
        return;
    forward_release(p);
    push_checks_free(p->push_checks);
    providers_free(p->providers, p->nproviders);
    free(p->llms);
    free(p->names);
    explicit_bzero(p->key, p->keylen);
    explicit_bzero(p->seal_key, sizeof(p->seal_key));
    free(p->key);
    if (the_proxy == p)
        the_proxy = NULL;
    free(p);
}

void proxy_set_seal_key(struct proxy *p, const unsigned char *key)
{
    memcpy(p->seal_key, key, SEAL_KEY_BYTES);
    p->have_seal_key = true;
}

const char *proxy_service_upstream(const struct proxy *p, const char *service)
{
    const struct provider *prov = find_provider(p, service, strlen(service));
    return prov ? prov->upstream : NULL;
}

const char *proxy_service_api(const struct proxy *p, const char *service)
{
    const struct provider *prov = find_provider(p, service, strlen(service));
    return prov ? prov->api : NULL;
}

const char *proxy_provider_names(void)
{
    return the_proxy ? the_proxy->names : "";
}

const struct proxy_llm *proxy_llms(const struct proxy *p, size_t *n)
{
    *n = p->nllms;
    return p->llms;
}

/* Previews: opening, revoking and listing them, and serving /preview/<id>-<mac>/...: the
 * capability checked, the connection counted, a connection made into the sandbox's network
 * namespace (sandbox_connect), then the request relayed over it (http_relay) or, for a WebSocket,
 * the upgrade handed to preview_ws.c. What a preview answers is kept out of the server's origin:
 * a CSP sandbox makes its documents an opaque origin (they reach the preview's own paths with
 * CORS, which the preview grants, and nothing of the server's with the user's cookies), no
 * cookie of the server's is forwarded, and none it sets is kept. */
#include "preview/preview_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/hmac.h>

#include "base/cleanup.h"
#include "base/config.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "http/http_internal.h"
#include "http/watch.h"
#include "http/relay.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

#define MAC_LEN 43 /* base64url of 32 bytes, unpadded */
#define PRUNE_EVERY_MS (3600 * 1000)
#define KEEP_ENDED_MS (24 * 3600 * 1000)

#define TICK_MS 2000
static void on_tick(struct loop_timer *t);

int previews_config_load(const struct config *cfg, struct previews_config *pc, struct err *err)
{
    uint64_t v;
    if (config_get_u64(cfg, "PREVIEW_TTL_MINUTES", 60, 1, PREVIEW_TTL_MAX_MINUTES, &v, err) < 0)
        return err->code;
    pc->ttl_s = v * 60;
    if (config_get_u64(cfg, "PREVIEW_CONNECTIONS", 16, 1, 1024, &v, err) < 0)
        return err->code;
    pc->conns = (unsigned)v;
    if (config_get_u64(cfg, "PREVIEW_CONNECTIONS_PER_USER", 32, 1, 4096, &v, err) < 0)
        return err->code;
    pc->conns_user = (unsigned)v;
    return 0;
}

struct previews *previews_new(const struct previews_config *cfg, struct store *st,
                              struct sandbox_manager *mgr, const unsigned char *key)
{
    struct previews *pv = xcalloc(1, sizeof(*pv));
    pv->cfg = *cfg;
    pv->public_url = xstrdup(cfg->public_url ? cfg->public_url : "");
    pv->cfg.public_url = pv->public_url;
    pv->st = st;
    pv->mgr = mgr;
    memcpy(pv->key, key, sizeof(pv->key));
    loop_timer_start(&pv->tick, TICK_MS, on_tick);
    return pv;
}

void previews_free(struct previews *pv)
{
    if (!pv)
        return;
    loop_timer_stop(&pv->tick);
    preview_ws_close_all(pv);
    free(pv->counts);
    free(pv->public_url);
    OPENSSL_cleanse(pv->key, sizeof(pv->key));
    free(pv);
}

/* --- the capability --- */

static void mac_of(const struct previews *pv, const char *id, char out[MAC_LEN + 1])
{
    unsigned char mac[32];
    unsigned int n = 0;
    HMAC(EVP_sha256(), pv->key, (int)sizeof(pv->key), (const unsigned char *)id, strlen(id), mac,
         &n);
    base64url_encode(mac, sizeof(mac), out);
}

static json_t *describe(const struct previews *pv, const struct store_preview *p)
{
    char mac[MAC_LEN + 1], at[32];
    mac_of(pv, p->id, mac);
    time_format_rfc3339(p->expires_at, at);
    char *url = xasprintf("%s/preview/%s-%s/", pv->public_url, p->id, mac);
    json_t *o =
        json_pack("{s:s, s:s, s:i, s:s, s:s?}", "id", p->id, "url", url, "port", (int)p->port,
                  "expires_at", at, "run_id", p->run_id[0] ? p->run_id : NULL);
    free(url);
    return o;
}

/* The preview "<id>-<mac>" names, when the mac is its id's (constant time): its id in out. */
static bool capability_ok(const struct previews *pv, const char *cap, size_t len, char out[64])
{
    const char *dash = memchr(cap, '-', len); /* ids have none; a MAC may */
    size_t idlen = dash ? (size_t)(dash - cap) : 0;
    if (!dash || idlen == 0 || idlen >= 64 || len - idlen - 1 != MAC_LEN)
        return false;
    memcpy(out, cap, idlen);
    out[idlen] = '\0';
    for (size_t i = 0; i < idlen; i++)
        if (!(out[i] >= 'a' && out[i] <= 'z') && !(out[i] >= '0' && out[i] <= '9') && out[i] != '_')
            return false;
    char want[MAC_LEN + 1];
    mac_of(pv, out, want);
    return CRYPTO_memcmp(want, dash + 1, MAC_LEN) == 0;
}

/* --- opening, revoking, listing --- */

json_t *previews_open(struct previews *pv, const char *user_id, const char *session_id,
                      const char *sandbox_id, unsigned port, uint64_t ttl_s, const char *run_id,
                      struct err *err)
{
    if (port == 0 || port > 65535 || port == SANDBOX_PROXY_PORT || port == SANDBOX_EGRESS_PORT) {
        err_set(err, -EINVAL,
                "port %u cannot be previewed: 1 to 65535, but not %d or %d (the server's own "
                "listeners in every sandbox)",
                port, SANDBOX_PROXY_PORT, SANDBOX_EGRESS_PORT);
        return NULL;
    }
    if (ttl_s == 0)
        ttl_s = pv->cfg.ttl_s;
    if (ttl_s > (uint64_t)PREVIEW_TTL_MAX_MINUTES * 60)
        ttl_s = (uint64_t)PREVIEW_TTL_MAX_MINUTES * 60;
    int64_t now = time_now_ms();
    struct store_preview p = {
        .port = port, .created_at = now, .expires_at = now + (int64_t)ttl_s * 1000};
    id_new("prv", p.id);
    snprintf(p.user_id, sizeof(p.user_id), "%s", user_id);
    snprintf(p.session_id, sizeof(p.session_id), "%s", session_id ? session_id : "");
    snprintf(p.sandbox_id, sizeof(p.sandbox_id), "%s", sandbox_id);
    snprintf(p.run_id, sizeof(p.run_id), "%s", run_id ? run_id : "");
    if (store_preview_open(pv->st, &p, PREVIEWS_PER_SANDBOX, now, err) < 0)
        return NULL;
    log_info("preview opened id=%s sbx=%s port=%u ttl_s=%llu run=%s", p.id, sandbox_id, port,
             (unsigned long long)ttl_s, p.run_id[0] ? p.run_id : "-");
    return describe(pv, &p);
}

int previews_revoke(struct previews *pv, const char *user_id, const char *id, struct err *err)
{
    int r = store_preview_revoke(pv->st, user_id, id, time_now_ms(), err);
    if (r == 0) {
        preview_ws_close(pv, id);
        log_info("preview revoked id=%s", id);
    }
    return r;
}

struct list_ctx {
    const struct previews *pv;
    json_t *out;
};

static void add_listed(const struct store_preview *p, void *ctx)
{
    struct list_ctx *l = ctx;
    json_array_append_new(l->out, describe(l->pv, p));
}

json_t *previews_list(struct previews *pv, const char *sandbox_id, const char *run_id)
{
    struct list_ctx l = {pv, json_array()};
    struct err err = {0};
    if (store_preview_list(pv->st, sandbox_id, run_id, time_now_ms(), add_listed, &l, &err) < 0)
        log_error("previews not listed err=\"%s\"", err.msg);
    return l.out;
}

/* --- counting connections --- */

static struct preview_count *count_of(struct previews *pv, const char *key)
{
    for (size_t i = 0; i < pv->ncounts; i++)
        if (strcmp(pv->counts[i].key, key) == 0)
            return &pv->counts[i];
    return NULL;
}

static void count_add(struct previews *pv, const char *key, int d)
{
    struct preview_count *c = count_of(pv, key);
    if (!c && d > 0) {
        pv->counts = xrealloc(pv->counts, (pv->ncounts + 1) * sizeof(*pv->counts));
        c = &pv->counts[pv->ncounts++];
        memset(c, 0, sizeof(*c));
        snprintf(c->key, sizeof(c->key), "%s", key);
    }
    if (!c)
        return;
    c->n = (unsigned)((int)c->n + d);
    if (c->n == 0) /* gone: the last one takes its place */
        *c = pv->counts[--pv->ncounts];
}

struct preview_slot *preview_slot_take(struct previews *pv, const struct store_preview *p,
                                       const char **why)
{
    struct preview_count *c = count_of(pv, p->id), *u = count_of(pv, p->user_id);
    if (c && c->n >= pv->cfg.conns) {
        *why = "this preview has as many connections open as it may (PREVIEW_CONNECTIONS)";
        return NULL;
    }
    if (u && u->n >= pv->cfg.conns_user) {
        *why = "your previews have as many connections open as they may "
               "(PREVIEW_CONNECTIONS_PER_USER)";
        return NULL;
    }
    struct preview_slot *s = xcalloc(1, sizeof(*s));
    s->pv = pv;
    snprintf(s->preview, sizeof(s->preview), "%s", p->id);
    snprintf(s->user, sizeof(s->user), "%s", p->user_id);
    s->expires_at = p->expires_at;
    count_add(pv, s->preview, 1);
    count_add(pv, s->user, 1);
    return s;
}

void preview_slot_release(struct preview_slot *s)
{
    if (!s)
        return;
    count_add(s->pv, s->preview, -1);
    count_add(s->pv, s->user, -1);
    free(s);
}

/* --- serving --- */

struct req_hold {
    struct pending *pd;
};

static void pending_free(struct pending *pd)
{
    preview_slot_release(pd->slot);
    free(pd);
}

static void on_req_dispose(void *p)
{
    struct req_hold *h = p;
    struct pending *pd = h->pd;
    if (!pd)
        return;
    http_watch_stop(&pd->watch);
    pd->req = NULL;
    if (pd->connecting) /* the connection's answer frees it */
        return;
    if (pd->wsc)
        preview_ws_req_gone(pd->wsc);
    pending_free(pd);
}

/* The client left while the connection was being made. */
static void on_gone(struct http_watch *w)
{
    struct pending *pd = container_of(w, struct pending, watch);
    if (pd->req)
        http_respond(pd->req, 499, NULL, NULL, 0);
}

static bool hop_by_hop(const char *name, size_t len)
{
    static const char *const hop[] = {"connection",
                                      "keep-alive",
                                      "proxy-connection",
                                      "te",
                                      "transfer-encoding",
                                      "upgrade",
                                      "trailer",
                                      "content-length",
                                      "host",
                                      "expect",
                                      "cookie",
                                      "forwarded",
                                      "x-forwarded-for",
                                      "x-forwarded-host",
                                      "x-forwarded-proto",
                                      "x-forwarded-prefix"};
    for (size_t i = 0; i < ARRAY_SIZE(hop); i++)
        if (strlen(hop[i]) == len && strncasecmp(hop[i], name, len) == 0)
            return true;
    return false;
}

/* What the app in the sandbox is told of the request: its headers but the server's cookies and
 * the hop-by-hop ones, its own host, and where the client reached it. */
static struct curl_slist *preview_request_headers(const struct pending *pd, h2o_req_t *req)
{
    struct curl_slist *h = NULL;
    for (size_t i = 0; i < req->headers.size; i++) {
        const h2o_header_t *e = &req->headers.entries[i];
        if (hop_by_hop(e->name->base, e->name->len))
            continue;
        char *line = xasprintf("%.*s: %.*s", (int)e->name->len, e->name->base, (int)e->value.len,
                               e->value.base);
        h = curl_slist_append(h, line);
        free(line);
    }
    char *line = xasprintf("Host: 127.0.0.1:%u", pd->p.port);
    h = curl_slist_append(h, line);
    free(line);
    h = curl_slist_append(h, "Expect:");
    line = xasprintf("X-Forwarded-Prefix: %s", pd->prefix);
    h = curl_slist_append(h, line);
    free(line);
    line = xasprintf("X-Forwarded-Host: %.*s", (int)req->authority.len, req->authority.base);
    h = curl_slist_append(h, line);
    free(line);
    line = xasprintf("X-Forwarded-Proto: %s",
                     strncmp(pd->pv->public_url, "https:", 6) == 0 ? "https" : "http");
    h = curl_slist_append(h, line);
    free(line);
    return h;
}

void preview_answer_headers(h2o_req_t *req, const char *prefix)
{
    /* none of the app's cookies land on the server's origin */
    ssize_t i;
    while ((i = h2o_find_header_by_str(&req->res.headers, H2O_STRLIT("set-cookie"), -1)) >= 0)
        h2o_delete_header(&req->res.headers, i);
    /* a redirect to one of its own paths stays in the preview */
    i = h2o_find_header_by_str(&req->res.headers, H2O_STRLIT("location"), -1);
    if (i >= 0) {
        h2o_iovec_t v = req->res.headers.entries[i].value;
        if (v.len && v.base[0] == '/' && !(v.len > 1 && (v.base[1] == '/' || v.base[1] == '\\'))) {
            h2o_iovec_t nv = h2o_concat(&req->pool, h2o_iovec_init(prefix, strlen(prefix)), v);
            req->res.headers.entries[i].value = nv;
        }
    }
    h2o_set_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("content-security-policy"), 0,
                          H2O_STRLIT("sandbox allow-scripts allow-forms allow-popups "
                                     "allow-modals allow-downloads"),
                          1);
    h2o_set_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-origin"),
                          0, H2O_STRLIT("*"), 1);
    h2o_set_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("referrer-policy"), 0,
                          H2O_STRLIT("no-referrer"), 1);
}

static void on_answer_start(h2o_req_t *req, void *ctx)
{
    preview_answer_headers(req, ctx);
}

static void on_connected(void *ctx, int fd, const struct err *err)
{
    struct pending *pd = ctx;
    pd->connecting = NULL;
    if (!pd->req) { /* the request is gone */
        if (fd >= 0)
            close(fd);
        pending_free(pd);
        return;
    }
    http_watch_stop(&pd->watch);
    if (fd < 0) {
        http_respond_error(pd->req, 502, "bad_gateway", err->msg);
        return;
    }
    if (pd->ws) {
        preview_ws_start(pd, fd);
        return;
    }
    h2o_req_t *req = pd->req;
    char *url = xasprintf("http://127.0.0.1:%u%.*s", pd->p.port, (int)(req->path.len - pd->rest_at),
                          req->path.base + pd->rest_at);
    char what[96];
    snprintf(what, sizeof(what), "port %u of the sandbox (preview %s)", pd->p.port, pd->p.id);
    char *prefix = h2o_mem_alloc_pool(&req->pool, strlen(pd->prefix) + 1);
    memcpy(prefix, pd->prefix, strlen(pd->prefix) + 1);
    http_relay(req, &(struct http_relay_opts){.url = url,
                                              .headers = preview_request_headers(pd, req),
                                              .what = what,
                                              .use_fd = true,
                                              .fd = fd,
                                              .on_start = on_answer_start,
                                              .ctx = prefix});
    free(url);
}

/* A CORS preflight of a preview's page (an opaque origin) to its own paths: granted here. */
static bool preflight(h2o_req_t *req)
{
    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("OPTIONS")))
        return false;
    ssize_t m =
        h2o_find_header_by_str(&req->headers, H2O_STRLIT("access-control-request-method"), -1);
    if (m < 0)
        return false;
    ssize_t hd =
        h2o_find_header_by_str(&req->headers, H2O_STRLIT("access-control-request-headers"), -1);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-origin"),
                          0, NULL, H2O_STRLIT("*"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-methods"),
                          0, NULL, req->headers.entries[m].value.base,
                          req->headers.entries[m].value.len);
    if (hd >= 0)
        h2o_add_header_by_str(
            &req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-headers"), 0, NULL,
            req->headers.entries[hd].value.base, req->headers.entries[hd].value.len);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-max-age"), 0,
                          NULL, H2O_STRLIT("600"));
    http_respond(req, 204, NULL, NULL, 0);
    return true;
}

static int on_preview(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    struct previews *pv = route->ctx;
    http_request_track(route, req);
    /* /preview/<id>-<mac>[/...]: the raw path, as the client sent it, goes to the app */
    static const char base[] = "/preview/";
    const size_t blen = sizeof(base) - 1;
    h2o_iovec_t path = req->path;
    size_t q = 0;
    while (q < path.len && path.base[q] != '?')
        q++;
    size_t cap_end = blen;
    while (cap_end < q && path.base[cap_end] != '/')
        cap_end++;
    char id[64];
    if (path.len < blen || memcmp(path.base, base, blen) != 0 ||
        !capability_ok(pv, path.base + blen, cap_end - blen, id)) {
        http_respond_error(req, 404, "not_found", "no such preview");
        return 0;
    }
    struct store_preview p;
    struct err err = {0};
    int64_t now = time_now_ms();
    if (store_preview_get(pv->st, id, &p, &err) < 0 || p.revoked_at || p.expires_at <= now) {
        http_respond_error(req, 404, "not_found",
                           "no such preview: it expired or was revoked (open another with "
                           "container_preview)");
        return 0;
    }
    if (cap_end == q) { /* the preview's root is a directory: relative links resolve in it */
        h2o_iovec_t loc = h2o_concat(&req->pool, h2o_iovec_init(path.base, cap_end),
                                     h2o_iovec_init(H2O_STRLIT("/")),
                                     h2o_iovec_init(path.base + q, path.len - q));
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_LOCATION, NULL, loc.base, loc.len);
        http_respond(req, 308, NULL, NULL, 0);
        return 0;
    }
    if (preflight(req))
        return 0;
    const char *why = NULL;
    struct preview_slot *slot = preview_slot_take(pv, &p, &why);
    if (!slot) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
        http_respond_error(req, 429, "too_many_connections", why);
        return 0;
    }
    struct pending *pd = xcalloc(1, sizeof(*pd));
    pd->pv = pv;
    pd->slot = slot;
    pd->req = req;
    pd->p = p;
    pd->rest_at = cap_end;
    snprintf(pd->prefix, sizeof(pd->prefix), "%.*s", (int)cap_end, path.base);
    pd->ws = req->upgrade.base && req->version < 0x200 &&
             h2o_lcstris(req->upgrade.base, req->upgrade.len, H2O_STRLIT("websocket"));
    struct req_hold *hold = h2o_mem_alloc_shared(&req->pool, sizeof(*hold), on_req_dispose);
    hold->pd = pd;
    /* a WebSocket is connected here, a request by curl on the loop */
    pd->connecting = sandbox_connect(pv->mgr, p.sandbox_id, p.user_id,
                                     pd->ws ? (uint16_t)p.port : 0, on_connected, pd, &err);
    if (!pd->connecting) {
        http_respond_error(req, err.code == -EBUSY ? 503 : 502,
                           err.code == -EBUSY ? "unavailable" : "bad_gateway", err.msg);
        return 0;
    }
    http_watch_start(&pd->watch, req, on_gone);
    return 0;
}

void previews_register(struct http_server *http, struct previews *pv)
{
    http_add_route(http, "/preview/", "/preview", on_preview, pv);
}

static void on_tick(struct loop_timer *t)
{
    struct previews *pv = container_of(t, struct previews, tick);
    int64_t now = time_mono_ms();
    loop_timer_start(&pv->tick, TICK_MS, on_tick);
    preview_ws_expire(pv, time_now_ms());
    if (now < pv->next_prune)
        return;
    pv->next_prune = now + PRUNE_EVERY_MS;
    struct err err = {0};
    if (store_preview_prune(pv->st, time_now_ms() - KEEP_ENDED_MS, &err) < 0)
        log_error("previews not pruned err=\"%s\"", err.msg);
}

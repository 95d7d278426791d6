/* The h2o server: listener, routes, request bookkeeping, signals and graceful stop. */
#include "http/http_internal.h"

#include "http/bearer.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/metrics.h"
#include "base/util.h"
#include "store/store.h"
#include "version.h"

struct tracker {
    struct http_server *srv;
    h2o_req_t *req;
    const char *label;
    int64_t started_ms;
    char id[24];
};

static void tracker_dispose(void *p)
{
    struct tracker *t = p;
    double secs = (double)(time_mono_ms() - t->started_ms) / 1000.0;
    int status = t->req->res.status;
    metrics_http_request(t->label, status, secs);
    log_debug("http request req=%s route=%s status=%d ms=%.1f", t->id, t->label, status,
              secs * 1000);
    t->srv->inflight--;
}

const char *http_request_track(struct http_route *route, h2o_req_t *req)
{
    struct http_server *srv = route->srv;
    struct tracker *t = h2o_mem_alloc_shared(&req->pool, sizeof(*t), tracker_dispose);
    t->srv = srv;
    t->req = req;
    t->label = route->label;
    t->started_ms = time_mono_ms();
    snprintf(t->id, sizeof(t->id), "r%llx", ++srv->next_request);
    srv->inflight++;
    if (!http_conn_may_persist(req))
        req->http1_is_persistent = 0;
    http_add_header_str(req, "x-request-id", t->id);
    return t->id;
}

static void add_route(struct http_server *srv, h2o_hostconf_t *host, const char *path,
                      const char *label, http_handler_fn fn, void *ctx)
{
    h2o_pathconf_t *pc = h2o_config_register_path(host, path, 0);
    struct http_route *r = (struct http_route *)h2o_create_handler(pc, sizeof(*r));
    r->super.on_req = fn;
    r->srv = srv;
    r->label = label;
    r->ctx = ctx;
}

void http_add_route(struct http_server *srv, const char *path, const char *label,
                    http_handler_fn fn, void *ctx)
{
    assert(!srv->started);
    add_route(srv, srv->main_hosts[0], path, label, fn, ctx);
}

void http_allow_signed_body(struct http_server *srv, const char *path, const char *header,
                            size_t max)
{
    snprintf(srv->signed_path, sizeof(srv->signed_path), "%s", path);
    snprintf(srv->signed_header, sizeof(srv->signed_header), "%s", header);
    srv->signed_max = max < srv->cfg->max_request_bytes ? max : srv->cfg->max_request_bytes;
}

void http_add_sandbox_route(struct http_server *srv, const char *path, const char *label,
                            http_handler_fn fn, void *ctx)
{
    assert(!srv->started);
    add_route(srv, srv->sandbox_hosts[0], path, label, fn, ctx);
}

void http_server_set_head_check(struct http_server *srv, http_head_check_fn fn, void *ctx)
{
    srv->head_check = fn;
    srv->head_check_ctx = ctx;
}

h2o_hostconf_t *http_server_main_host(struct http_server *srv)
{
    return srv->main_hosts[0];
}

struct http_stop_hook {
    struct http_stop_hook *next;
    void (*fn)(void *ctx);
    void *ctx;
};

void http_server_on_stop(struct http_server *srv, void (*fn)(void *ctx), void *ctx)
{
    struct http_stop_hook **pp = &srv->stop_hooks;
    while (*pp)
        pp = &(*pp)->next;
    *pp = xcalloc(1, sizeof(**pp));
    (*pp)->fn = fn;
    (*pp)->ctx = ctx;
}

static void run_stop_hooks(struct http_server *srv)
{
    for (struct http_stop_hook *h = srv->stop_hooks; h; h = h->next)
        h->fn(h->ctx);
}

void http_server_set_cluster(struct http_server *srv, struct cluster *c)
{
    srv->cluster = c;
}

void http_server_set_health(struct http_server *srv, http_health_fn fn, void *ctx)
{
    srv->health = fn;
    srv->health_ctx = ctx;
}

static int on_healthz(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    http_request_track(route, req);
    if (!h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/healthz"))) {
        http_respond_error(req, 404, "not_found", "no such endpoint");
        return 0;
    }
    struct err err = {0};
    int users = store_user_count(route->srv->store, &err);
    json_t *o = json_pack("{s:s, s:s, s:b}", "status", users >= 0 ? "ok" : "degraded", "version",
                          SANDBOX_MCP_VERSION, "database", users >= 0);
    struct http_server *srv = route->srv;
    if (srv->health && srv->health(srv->health_ctx, o))
        json_object_set_new(o, "status", json_string("degraded"));
    char *text = json_dumps(o, JSON_COMPACT);
    http_add_header(req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    http_respond(req, users >= 0 ? 200 : 503, "application/json", text, strlen(text));
    free(text);
    json_decref(o);
    return 0;
}

/* Equal, in a time that does not depend on where they differ. */
static bool secret_equal(const char *given, const char *want)
{
    char a[65], b[65];
    sha256_hex(given, strlen(given), a);
    sha256_hex(want, strlen(want), b);
    unsigned char d = 0;
    for (size_t i = 0; i < 64; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

/* The event loop's lag: a timer due every LAG_PROBE_MS, and how late it fired at most since the
 * last scrape of /metrics. Long work on the loop (a slow statement, a large reply built at once)
 * shows there first. */
#define LAG_PROBE_MS 100
static struct loop_timer lag_probe;
static int64_t lag_due, lag_max;

static void on_lag_probe(struct loop_timer *t)
{
    int64_t now = time_mono_ms();
    if (now - lag_due > lag_max)
        lag_max = now - lag_due;
    lag_due = now + LAG_PROBE_MS;
    loop_timer_start(t, LAG_PROBE_MS, on_lag_probe);
}

static int on_metrics(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    http_request_track(route, req);
    if (!h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/metrics"))) {
        http_respond_error(req, 404, "not_found", "no such endpoint");
        return 0;
    }
    /* Not served without METRICS_TOKEN; with it, only to its bearer. */
    const char *want = route->srv->cfg->metrics_token;
    if (!want) {
        http_respond_error(req, 404, "not_found", "no such endpoint (set METRICS_TOKEN)");
        return 0;
    }
    const char *auth = http_header(req, H2O_TOKEN_AUTHORIZATION);
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0 || !secret_equal(auth + 7, want)) {
        http_add_header(req, H2O_TOKEN_WWW_AUTHENTICATE, "Bearer realm=\"sandbox-mcp metrics\"");
        http_respond_error(req, 401, "unauthorized",
                           "/metrics needs 'Authorization: Bearer "
                           "<METRICS_TOKEN>'");
        return 0;
    }
    size_t conns, gated;
    http_gate_counts(&conns, &gated);
    metrics_gauge_set("sandbox_mcp_http_connections", "HTTP connections open", (double)conns);
    metrics_gauge_set("sandbox_mcp_http_gated_bytes",
                      "Request bytes charged by the gate: unauthenticated requests, and every "
                      "request on sandbox listeners",
                      (double)gated);
    metrics_gauge_set("sandbox_mcp_http_inflight_requests", "HTTP requests being served",
                      route->srv->inflight);
    metrics_gauge_set("sandbox_mcp_loop_lag_seconds",
                      "How late the event loop's 100 ms probe timer fired at most since the "
                      "last scrape",
                      (double)lag_max / 1000.0);
    lag_max = 0;
    struct buf b;
    buf_init(&b, 0);
    metrics_render(&b);
    http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
    buf_release(&b);
    return 0;
}

static int on_fallback(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    http_request_track(route, req);
    if (h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/"))) {
        char *text = xasprintf("{\"name\":\"sandbox-mcp\",\"version\":\"%s\",\"mcp\":\"%s/mcp\"}",
                               SANDBOX_MCP_VERSION, route->srv->cfg->public_url);
        http_respond(req, 200, "application/json", text, strlen(text));
        free(text);
        return 0;
    }
    http_respond_error(req, 404, "not_found", "no such endpoint");
    return 0;
}

static int parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *sslen,
                        struct err *err)
{
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || !colon[1])
        return err_set(err, -EINVAL, "invalid listen address '%s': expected HOST:PORT", spec);
    char host[256];
    snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
    if (host[0] == '[') {
        size_t n = strlen(host);
        if (host[n - 1] != ']')
            return err_set(err, -EINVAL, "invalid listen address '%s'", spec);
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535)
        return err_set(err, -EINVAL, "invalid port in listen address '%s'", spec);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc != 0)
        return err_set(err, -EINVAL, "cannot resolve listen host '%s': %s", host, gai_strerror(rc));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sslen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static bool sockaddr_is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    return false;
}

static void format_addr(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, host, sizeof(host));
        port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
        snprintf(out, cap, "%s:%d", host, port);
    } else {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, host, sizeof(host));
        port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
        snprintf(out, cap, "[%s]:%d", host, port);
    }
}

void http_accept_each(h2o_socket_t *listener, const char *err,
                      void (*fn)(h2o_socket_t *sock, void *ctx))
{
    if (err)
        return;
    /* a bounded batch, so one busy listener cannot hold the loop */
    for (int i = 0; i < 64; i++) {
        h2o_socket_t *sock = h2o_evloop_socket_accept(listener);
        if (!sock)
            break;
        fn(sock, listener->data);
    }
}

static void accept_main(h2o_socket_t *sock, void *ctx)
{
    struct http_server *srv = ctx;
    http_gate_accept(srv->pool, &srv->accept_ctx, sock);
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
    http_accept_each(listener, err, accept_main);
}

static void begin_stop(struct http_server *srv, const char *why)
{
    if (srv->stopping)
        return;
    srv->stopping = true;
    log_info("http stopping reason=%s inflight=%d grace_ms=%d", why, srv->inflight,
             srv->cfg->shutdown_grace_ms);
    if (srv->listener) {
        h2o_socket_read_stop(srv->listener);
        h2o_socket_close(srv->listener);
        srv->listener = NULL;
    }
    run_stop_hooks(srv);
    h2o_context_request_shutdown(&srv->ctx);
}

/* SIGHUP: read the certificate and key again for the connections to come. Open connections
 * keep the context they were accepted with; on failure the old one stays in use. */
static void tls_reload(struct http_server *srv)
{
    const struct config *cfg = srv->cfg;
    if (!srv->ssl_ctx) {
        log_info("http sighup tls=off note=\"nothing to reload\"");
        return;
    }
    SSL_CTX *ctx;
    struct err err = {0};
    if (http_tls_context_new(cfg->tls_cert, cfg->tls_key, &ctx, &err) < 0) {
        log_error(
            "http tls reload-failed err=\"%s\" note=\"the previous certificate stays in use\"",
            err.msg);
        return;
    }
    SSL_CTX *old = srv->ssl_ctx;
    srv->ssl_ctx = ctx;
    SSL_CTX_free(old);
    char desc[512];
    http_tls_describe(ctx, desc, sizeof(desc));
    log_info("http tls reloaded cert=%s %s", cfg->tls_cert, desc);
}

static void on_signal(h2o_socket_t *sock, const char *err)
{
    struct http_server *srv = sock->data;
    if (err)
        return;
    struct signalfd_siginfo si;
    while (read(h2o_socket_get_fd(sock), &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGHUP)
            tls_reload(srv);
        else
            begin_stop(srv, si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
    }
}

int http_server_new(const struct config *cfg, struct store *st, struct http_server **ret,
                    struct err *err)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    int r = http_peer_configure(cfg->trusted_proxies, err);
    if (r < 0)
        return r;
    if ((r = parse_listen(cfg->listen, &ss, &sslen, err)) < 0)
        return r;
    SSL_CTX *ssl_ctx = NULL;
    if (cfg->tls_cert && (r = http_tls_context_new(cfg->tls_cert, cfg->tls_key, &ssl_ctx, err)) < 0)
        return r;
    _cleanup_close_ int fd = -1, sfd = -1;
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        r = err_set(err, -errno, "socket: %s", strerror(errno));
        goto fail;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, sslen) < 0) {
        r = err_set(err, -errno, "cannot listen on '%s': %s", cfg->listen, strerror(errno));
        goto fail;
    }
    if (listen(fd, 1024) < 0) {
        r = err_set(err, -errno, "listen '%s': %s", cfg->listen, strerror(errno));
        goto fail;
    }
    sslen = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sslen);

    /* Signals arrive through the loop. The processes that run other programs set their own mask
     * (the sandbox init's commands and git clones start with none blocked). */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0) {
        r = err_set(err, -errno, "sigprocmask: %s", strerror(errno));
        goto fail;
    }
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        r = err_set(err, -errno, "signalfd: %s", strerror(errno));
        goto fail;
    }
    signal(SIGPIPE, SIG_IGN);

    struct http_server *srv = xcalloc(1, sizeof(*srv));
    srv->cfg = cfg;
    srv->store = st;
    srv->listen_loopback = sockaddr_is_loopback(&ss);
    /* Behind a proxy on this machine every client comes from one loopback address, and one
     * cap would hold them all: there the default is none. */
    srv->preauth_per_address = cfg->preauth_address_connections;
    if (srv->preauth_per_address == SIZE_MAX)
        srv->preauth_per_address = srv->listen_loopback ? 0 : HTTP_PREAUTH_PER_ADDRESS;
    srv->ssl_ctx = ssl_ctx;
    format_addr(&ss, srv->address, sizeof(srv->address));

    h2o_config_init(&srv->globalconf);
    srv->globalconf.server_name = h2o_iovec_init(H2O_STRLIT("sandbox-mcp"));
    srv->globalconf.max_request_entity_size = cfg->max_request_bytes;
    /* HTTP/2 only over TLS, chosen by ALPN, where the gate reads its frames (gate.c); never h2c,
     * whose Upgrade would hand the connection to h2o's HTTP/2 side behind the gate's back. */
    srv->globalconf.http1.upgrade_to_http2 = 0;
    /* Requests of one HTTP/2 connection being handled at once; the others wait, bodies read. */
    srv->globalconf.http2.max_concurrent_requests_per_connection = 16;
    /* The sandboxes' own listeners have a host of their own, which reaches the routes registered
     * for it (the proxy's) and nothing else (start_serving). */
    srv->main_hosts[0] =
        h2o_config_register_host(&srv->globalconf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    srv->sandbox_hosts[0] =
        h2o_config_register_host(&srv->globalconf, h2o_iovec_init(H2O_STRLIT("sandbox")), 65535);
    srv->loop = loop_get();
    srv->accept_ctx.ctx = &srv->ctx;
    srv->accept_ctx.hosts = srv->main_hosts;
    srv->sandbox_accept_ctx.ctx = &srv->ctx;
    srv->sandbox_accept_ctx.hosts = srv->sandbox_hosts;
    srv->pool = http_pool_new(srv, NULL);
    srv->listener = h2o_evloop_socket_create(srv->loop, TAKE_FD(fd), H2O_SOCKET_FLAG_DONT_READ);
    srv->listener->data = srv;
    srv->signals = h2o_evloop_socket_create(srv->loop, TAKE_FD(sfd), H2O_SOCKET_FLAG_DONT_READ);
    srv->signals->data = srv;
    h2o_socket_read_start(srv->signals, on_signal);
    *ret = srv;
    return 0;
fail:
    SSL_CTX_free(ssl_ctx);
    return r;
}

const char *http_server_address(const struct http_server *srv)
{
    return srv->address;
}

/* The server's own routes go after the modules' (h2o takes the first path that matches, and "/"
 * matches all), then the context is made: h2o_context_init sees every handler, as h2o's
 * contract asks. Nothing was accepted before: the loop runs only from here. */
static void start_serving(struct http_server *srv)
{
    h2o_hostconf_t *host = srv->main_hosts[0], *sbx_host = srv->sandbox_hosts[0];
    add_route(srv, host, "/healthz", "/healthz", on_healthz, NULL);
    add_route(srv, host, "/metrics", "/metrics", on_metrics, NULL);
    add_route(srv, host, "/", "other", on_fallback, NULL);
    add_route(srv, sbx_host, "/", "other", on_fallback, NULL);
    srv->started = true;
    h2o_context_init(&srv->ctx, srv->loop, &srv->globalconf);
    h2o_socket_read_start(srv->listener, on_accept);
    lag_due = time_mono_ms() + LAG_PROBE_MS;
    loop_timer_start(&lag_probe, LAG_PROBE_MS, on_lag_probe);
}

int http_server_run(struct http_server *srv)
{
    const struct config *cfg = srv->cfg;
    start_serving(srv);
    if (srv->ssl_ctx) {
        char desc[512];
        http_tls_describe(srv->ssl_ctx, desc, sizeof(desc));
        log_info("http tls cert=%s %s", cfg->tls_cert, desc);
    }
    log_info("http listening addr=%s tls=%s loopback=%s max_body=%zu max_conns=%zu "
             "preauth_request=%zu preauth_total=%zu preauth_per_address=%zu preauth_head_ms=%llu "
             "sandbox_conns=%zu sandbox_bytes=%zu metrics=%s trusted_proxies=%zu",
             srv->address, srv->ssl_ctx ? "on" : "off", srv->listen_loopback ? "yes" : "no",
             cfg->max_request_bytes, cfg->max_connections, cfg->preauth_request_bytes,
             cfg->preauth_total_bytes, srv->preauth_per_address,
             (unsigned long long)cfg->preauth_head_ms, cfg->sandbox_connections, cfg->sandbox_bytes,
             cfg->metrics_token ? "token" : "off", http_peer_trusted_count());
    int64_t deadline = 0;
    for (;;) {
        if (srv->stopping) {
            if (!deadline)
                deadline = time_mono_ms() + srv->cfg->shutdown_grace_ms;
            if (srv->inflight <= 0)
                break;
            if (time_mono_ms() >= deadline) {
                log_warn("http stop-timeout abandoned=%d", srv->inflight);
                break;
            }
        }
        h2o_evloop_run(srv->loop, srv->stopping ? 50 : INT32_MAX);
        http_gate_after_loop();
        http_bearer_after_loop();
    }
    log_info("http stopped");
    return 0;
}

void http_server_free(struct http_server *srv)
{
    if (!srv)
        return;
    if (srv->listener)
        h2o_socket_close(srv->listener);
    if (srv->signals)
        h2o_socket_close(srv->signals);
    loop_timer_stop(&lag_probe);
    run_stop_hooks(srv);
    /* The h2o context is not disposed: h2o 2.2 asserts that every timeout list is empty, which
     * connections abandoned at the end of the grace period violate, and the process is about to
     * exit anyway. The server stays reachable so leak checkers do not report its memory. */
    static struct http_server *retired;
    retired = srv;
    (void)retired;
}

/* One relayed request: a curl transfer on the loop feeding an h2o generator. The state lives in
 * the request's pool; h2o calls stop() before it frees the pool when the client goes away, and
 * stop() aborts the upstream transfer. */
#include "http/relay.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/curl_loop.h"
#include "base/log.h"
#include "base/util.h"
#include "http/http_internal.h"
#include "http/sendq.h"
#include "http/watch.h"

#define RELAY_PENDING_MAX (1 << 20) /* bytes buffered before the upstream is paused */

struct relay {
    h2o_generator_t gen;
    h2o_req_t *req;
    CURL *easy;
    struct curl_slist *headers;
    char what[96];
    struct http_watch watch;
    struct http_sendq q;
    int status;
    unsigned long long bytes;
    int64_t t0;
    bool started, curl_done, stopped, paused;
    int fd; /* the connected upstream given (use_fd) until curl takes it, else -1 */
    void (*on_start)(h2o_req_t *req, void *ctx);
    void *ctx;
};

/* Made at the first relay and kept (reachable) for the process's life, like the h2o context. */
static struct curl_loop *relay_loop;

static void relay_flush(struct relay *r)
{
    if (!r->stopped && r->started)
        http_sendq_flush(&r->q, r->curl_done ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
}

static void relay_release(struct relay *r)
{
    if (r->easy) {
        curl_easy_cleanup(r->easy);
        r->easy = NULL;
    }
    curl_slist_free_all(r->headers);
    r->headers = NULL;
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
}

/* The socket given: handed to curl once, which connects it */
static curl_socket_t open_given(void *ctx, curlsocktype purpose, struct curl_sockaddr *addr)
{
    struct relay *r = ctx;
    (void)purpose;
    if (addr->family != AF_INET || r->fd < 0)
        return CURL_SOCKET_BAD;
    curl_socket_t fd = r->fd;
    r->fd = -1;
    return fd;
}

static void on_proceed(h2o_generator_t *gen, h2o_req_t *req)
{
    struct relay *r = (struct relay *)gen;
    http_sendq_proceed(&r->q);
    bool done = r->curl_done;
    relay_flush(r);
    if (done)
        return;
    if (r->paused && r->q.pending.len < RELAY_PENDING_MAX / 2) {
        r->paused = false;
        curl_easy_pause(r->easy, CURLPAUSE_CONT);
    }
}

static void on_stop(h2o_generator_t *gen, h2o_req_t *req)
{
    struct relay *r = (struct relay *)gen;
    r->stopped = true;
    if (!r->curl_done && r->easy) {
        curl_loop_remove(relay_loop, r->easy);
        log_info("relay aborted %s reason=client-gone bytes=%llu", r->what, r->bytes);
        r->curl_done = true;
    }
    relay_release(r);
}

static void on_dispose(void *p)
{
    struct relay *r = p;
    http_watch_stop(&r->watch);
    if (r->easy && !r->curl_done)
        curl_loop_remove(relay_loop, r->easy);
    relay_release(r);
    http_sendq_release(&r->q);
}

/* The client left while nothing was sent yet: end the upstream transfer and the request. */
static void on_gone(struct http_watch *w)
{
    struct relay *r = container_of(w, struct relay, watch);
    if (r->started || r->curl_done)
        return;
    curl_loop_remove(relay_loop, r->easy);
    r->curl_done = true;
    relay_release(r);
    log_info("relay aborted %s reason=client-gone bytes=0", r->what);
    http_respond(r->req, 499, NULL, NULL, 0);
}

static void start_response(struct relay *r)
{
    if (r->started)
        return;
    r->started = true;
    http_watch_stop(&r->watch);
    r->req->res.status = r->status ? r->status : 502;
    r->req->res.reason = "";
    if (r->on_start)
        r->on_start(r->req, r->ctx);
    h2o_start_response(r->req, &r->gen);
}

static bool hop_by_hop(const char *name, size_t len)
{
    static const char *const hop[] = {
        "connection", "keep-alive", "proxy-connection", "te",   "transfer-encoding",
        "upgrade",    "trailer",    "content-length",   "date", "server"};
    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        if (strlen(hop[i]) == len && strncasecmp(hop[i], name, len) == 0)
            return true;
    return false;
}

static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
    struct relay *r = ctx;
    size_t len = size * n;
    if (r->stopped)
        return 0;
    if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        const char *sp = memchr(data, ' ', len);
        r->status = sp ? atoi(sp + 1) : 502;
        r->req->res.headers = (h2o_headers_t){NULL};
        return len;
    }
    size_t l = len;
    while (l && (data[l - 1] == '\n' || data[l - 1] == '\r'))
        l--;
    const char *colon = l ? memchr(data, ':', l) : NULL;
    if (!colon || r->status < 200)
        return len;
    size_t nlen = (size_t)(colon - data);
    const char *v = colon + 1;
    size_t vlen = l - nlen - 1;
    while (vlen && (*v == ' ' || *v == '\t'))
        v++, vlen--;
    if (hop_by_hop(data, nlen))
        return len;
    h2o_iovec_t name = h2o_strdup(&r->req->pool, data, nlen);
    h2o_strtolower(name.base, name.len);
    h2o_iovec_t value = h2o_strdup(&r->req->pool, v, vlen);
    h2o_add_header_by_str(&r->req->pool, &r->req->res.headers, name.base, name.len, 0, NULL,
                          value.base, value.len);
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    struct relay *r = ctx;
    size_t len = size * n;
    if (r->stopped)
        return 0;
    if (r->q.pending.len >= RELAY_PENDING_MAX) {
        r->paused = true;
        return CURL_WRITEFUNC_PAUSE;
    }
    start_response(r);
    http_sendq_write(&r->q, data, len);
    r->bytes += len;
    /* an event of a stream (a progress notification) goes on at once */
    relay_flush(r);
    return len;
}

static void on_done(CURL *easy, CURLcode rc)
{
    struct relay *r = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&r);
    r->curl_done = true;
    http_watch_stop(&r->watch);
    long ms = (long)(time_mono_ms() - r->t0);
    if (rc != CURLE_OK) {
        bool timeout = rc == CURLE_OPERATION_TIMEDOUT;
        log_warn("relay failed %s err=\"%s\" ms=%ld", r->what, curl_easy_strerror(rc), ms);
        relay_release(r);
        if (!r->started) {
            char msg[256];
            snprintf(msg, sizeof(msg), "%s cannot be reached: %s", r->what, curl_easy_strerror(rc));
            http_respond_error(r->req, timeout ? 504 : 502,
                               timeout ? "upstream_timeout" : "bad_gateway", msg);
        } else {
            http_sendq_fail(&r->q);
        }
        return;
    }
    start_response(r);
    relay_flush(r);
    relay_release(r);
    log_info("relay done %s status=%d bytes=%llu ms=%ld", r->what, r->status, r->bytes, ms);
}

void http_relay(h2o_req_t *req, const struct http_relay_opts *o)
{
    if (!relay_loop)
        relay_loop = curl_loop_new(on_done);
    struct relay *r = h2o_mem_alloc_shared(&req->pool, sizeof(*r), on_dispose);
    memset(r, 0, sizeof(*r));
    r->gen.proceed = on_proceed;
    r->gen.stop = on_stop;
    r->req = req;
    r->headers = o->headers;
    r->fd = o->use_fd ? o->fd : -1;
    r->on_start = o->on_start;
    r->ctx = o->ctx;
    r->t0 = time_mono_ms();
    snprintf(r->what, sizeof(r->what), "%s", o->what ? o->what : "relay");
    http_sendq_init(&r->q, req);
    http_watch_start(&r->watch, req, on_gone);
    CURL *e = r->easy = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, o->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     o->connect_timeout_ms ? o->connect_timeout_ms : 5000L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    if (o->use_fd) {
        curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_given);
        curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, r);
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(e, CURLOPT_IPRESOLVE, (long)CURL_IPRESOLVE_V4);
    }
    bool post = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"));
    if (h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"))) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (post || req->entity.base) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->entity.base ? req->entity.base : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)(req->entity.base ? req->entity.len : 0));
    }
    if (!post && !h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) &&
        !h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"))) {
        char *m = h2o_mem_alloc_pool(&req->pool, req->method.len + 1);
        memcpy(m, req->method.base, req->method.len);
        m[req->method.len] = '\0';
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
    }
    curl_loop_add(relay_loop, e);
}

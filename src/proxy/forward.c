/* Forwarding a checked request: the real key swapped in for the agent's token, the request sent
 * upstream, and the answer streamed back as it arrives, with the tokens it used counted. One
 * transfer per request, owned by the request's pool, and one upstream exchange (upstream.c) over
 * the service's pool of kept connections: h2o calls stop() before it frees the pool when the
 * client goes away, and stop() cancels the exchange, closing its connection, which the upstream
 * sees. h2o notices a client that went away only when it writes to it, so while nothing
 * has been sent yet (a model thinking for minutes) a once-a-second look at the client's socket does
 * the noticing. Its rule: this is the proxy's hot path (bench/proxy.mjs), and nothing here decides
 * what a token may do. */
#include "proxy/proxy_internal.h"

#include <errno.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/loop.h"
#include "base/log.h"
#include "base/util.h"
#include "http/watch.h"
#include "store/store.h"

#define PENDING_MAX (1 << 20) /* response bytes buffered before the upstream is paused */
#define CONNECT_TIMEOUT_MS 10000
#define UPSTREAM_IDLE_MAX 64    /* kept connections per upstream that are not in use */
#define UPSTREAM_IDLE_MS 118000 /* how long one is kept unused */
/* h2o reads all the kernel holds before the PENDING_MAX hold applies: a receive buffer of its
 * own bounds what a client that reads slowly leaves in the server's memory (the kernel doubles
 * it: 1 MiB) */
#define UPSTREAM_RCVBUF (512 << 10)

#define USAGE_FLUSH_MS 1000

static void on_client_gone(struct http_watch *w);

static const char *const hop_by_hop[] = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
};

static bool is_hop(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(hop_by_hop) / sizeof(hop_by_hop[0]); i++)
        if (strlen(hop_by_hop[i]) == len && strncasecmp(hop_by_hop[i], name, len) == 0)
            return true;
    return false;
}

/* --- response side --- */

static void flush(struct transfer *t)
{
    if (t->stopped || !t->started)
        return;
    /* a failed upstream ends the answer with an error: the client sees that it was cut */
    http_sendq_flush(&t->q, !t->done    ? H2O_SEND_STATE_IN_PROGRESS
                            : t->failed ? H2O_SEND_STATE_ERROR
                                        : H2O_SEND_STATE_FINAL);
}

static void on_proceed(h2o_generator_t *gen, h2o_req_t *req)
{
    struct transfer *t = (struct transfer *)gen;
    http_sendq_proceed(&t->q);
    /* Sending the final chunk lets h2o dispose of the request, and t with it. */
    bool done = t->done;
    flush(t);
    if (done)
        return;
    if (t->held && t->q.pending.len < PENDING_MAX / 2) {
        t->held = false;
        upstream_call_resume(&t->call);
    }
}

static void on_stop(h2o_generator_t *gen, h2o_req_t *req)
{
    struct transfer *t = (struct transfer *)gen;
    t->stopped = true;
    if (upstream_call_active(&t->call)) {
        /* The client went away: abort the upstream exchange, closing its connection. */
        upstream_call_cancel(&t->call);
        log_info("proxy aborted service=%s user=%s run=%s reason=client-gone bytes=%llu",
                 t->prov->name, t->user, t->run[0] ? t->run : "-", (unsigned long long)t->bytes);
    }
}

static void on_dispose(void *ptr)
{
    struct transfer *t = ptr;
    http_watch_stop(&t->watch);
    if (t->check) {
        push_check_forget(t->check); /* it owns a copy of what it reads */
        t->check = NULL;
    }
    upstream_call_cancel(&t->call);
    if (t->redirected)
        upstream_dispose(&t->redirect);
    buf_release(&t->head);
    if (t->key) {
        explicit_bzero(t->key, strlen(t->key));
        free(t->key);
    }
    http_sendq_release(&t->q);
    usage_finish(&t->usage);
}

static void start_response(struct transfer *t)
{
    if (t->started)
        return;
    t->started = true;
    http_watch_stop(&t->watch);
    usage_init(&t->usage, t->prov->usage, t->sse);
    t->req->res.status = t->status;
    t->req->res.reason = "";
    h2o_start_response(t->req, &t->gen);
}

static void usage_flush(struct proxy *p)
{
    loop_timer_stop(&p->usage_timer);
    if (p->nusage == 0)
        return;
    struct err err = {0};
    if (store_proxy_token_usage(p->store, p->usage, p->nusage, &err) < 0)
        log_error("proxy usage not recorded tokens=%zu err=\"%s\"", p->nusage, err.msg);
    p->nusage = 0;
}

static void on_usage_timer(struct loop_timer *lt)
{
    usage_flush(container_of(lt, struct proxy, usage_timer));
}

static void record_usage(struct transfer *t)
{
    struct proxy *p = t->p;
    usage_finish(&t->usage);
    size_t i = 0;
    while (i < p->nusage && strcmp(p->usage[i].jti, t->jti) != 0)
        i++;
    if (i == p->nusage) {
        if (p->nusage == USAGE_PENDING_MAX)
            usage_flush(p);
        i = p->nusage++;
        p->usage[i] = (struct store_token_usage){0};
        snprintf(p->usage[i].jti, sizeof(p->usage[i].jti), "%s", t->jti);
        if (p->nusage == 1)
            loop_timer_start(&p->usage_timer, USAGE_FLUSH_MS, on_usage_timer);
    }
    p->usage[i].requests++;
    p->usage[i].input_tokens += t->usage.input;
    p->usage[i].output_tokens += t->usage.output;
}

/* The upstream exchange failed (errstr says how, in h2o's words or ours): before the answer
 * started the client gets a 502, or a 504 for a timeout; after, its answer is cut. */
static void upstream_failed(struct transfer *t, const char *errstr)
{
    bool timeout = strstr(errstr, "timeout") != NULL; /* "I/O timeout", "connection timeout" */
    t->done = t->failed = true;
    t->held = false;
    http_watch_stop(&t->watch);
    log_warn("proxy upstream failed service=%s user=%s run=%s err=\"%s\" ms=%ld", t->prov->name,
             t->user, t->run[0] ? t->run : "-", errstr, (long)(time_mono_ms() - t->t0));
    if (!t->started) {
        if (timeout)
            proxy_respond_error(t->req, 504, "upstream_timeout",
                                "upstream '%s' did not answer in time", t->prov->name);
        else /* how it failed holds nothing secret: a connection, TLS or framing error */
            proxy_respond_error(t->req, 502, "bad_gateway", "upstream '%s' failed: %s",
                                t->prov->name, errstr);
        return;
    }
    flush(t);
}

/* The answer has ended, its last len bytes at data: the client has it before they are read for
 * usage, and before the bookkeeping. */
static void upstream_done(struct transfer *t, const char *data, size_t len)
{
    t->done = true;
    start_response(t);
    flush(t);
    usage_feed(&t->usage, data, len);
    record_usage(t);
    log_info("proxy request service=%s user=%s run=%s status=%d bytes=%llu in=%lld out=%lld ms=%ld",
             t->prov->name, t->user, t->run[0] ? t->run : "-", t->status,
             (unsigned long long)t->bytes, (long long)t->usage.input, (long long)t->usage.output,
             (long)(time_mono_ms() - t->t0));
}

static bool on_body(struct upstream_call *c, const char *data, size_t len, bool end)
{
    struct transfer *t = container_of(c, struct transfer, call);
    uint64_t max = t->prov->answer_max;
    if (max && t->bytes + len > max) {
        upstream_call_cancel(c);
        upstream_failed(t, "the answer is larger than the service's answer_max");
        return false;
    }
    if (len) {
        start_response(t);
        http_sendq_write(&t->q, data, len);
        t->bytes += len;
    }
    if (end) {
        upstream_done(t, data, len);
        return false;
    }
    /* what one read brought leaves in one write, a stream's events at once, and only then are
     * they read for usage */
    flush(t);
    usage_feed(&t->usage, data, len);
    if (t->q.pending.len >= PENDING_MAX) {
        /* The client reads slower than the upstream sends: stop reading the upstream until
         * on_proceed (its stall timeout still runs: a client that takes nothing for that long
         * is cut). */
        t->held = true;
        upstream_call_pause(c);
        if (!t->was_held)
            log_info("proxy upstream held service=%s user=%s run=%s reason=slow-client "
                     "bytes=%llu pending=%zu",
                     t->prov->name, t->user, t->run[0] ? t->run : "-", (unsigned long long)t->bytes,
                     t->q.pending.len);
        t->was_held = true;
    }
    return true;
}

static void on_failed(struct upstream_call *c, const char *errstr)
{
    upstream_failed(container_of(c, struct transfer, call), errstr);
}

static bool on_head(struct upstream_call *c, const struct up_head *h);

static const struct upstream_call_cb call_cb = {
    .head = on_head,
    .body = on_body,
    .failed = on_failed,
};

static bool is_head_method(const h2o_req_t *req)
{
    return h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"));
}

/* A GET the service answers with a redirect to where the content is (GitHub's logs, on blob
 * storage under a signed URL): fetched here, as the client would, over a connection of its own
 * and without the key, so that the client needs no way out of its sandbox for it. One hop: a
 * redirect from there is passed on as it is. */
static void follow_redirect(struct transfer *t, const char *location, size_t len)
{
    h2o_url_t url;
    /* the location is in the connection's buffer, which goes with it */
    char *to = len <= 4096 ? h2o_strdup(&t->req->pool, location, len).base : NULL;
    upstream_call_cancel(&t->call);
    if (!to || h2o_url_parse(to, len, &url) != 0 ||
        upstream_init(&t->redirect, &t->p->upstream_ctx, &url, 0) != 0) {
        upstream_failed(t, "a redirect to something that is not an http or https URL");
        return;
    }
    t->redirected = true;
    buf_release(&t->head);
    buf_init(&t->head, 0);
    buf_printf(&t->head,
               "GET %.*s HTTP/1.1\r\nhost: %.*s\r\nuser-agent: sandbox-mcp\r\naccept: */*\r\n",
               (int)url.path.len, url.path.base, (int)url.authority.len, url.authority.base);
    explicit_bzero(t->key, strlen(t->key));
    free(t->key);
    t->key = xstrdup("\r\n");
    t->reqbufs[0] = h2o_iovec_init(t->head.data, t->head.len);
    t->reqbufs[1] = h2o_iovec_init(t->key, 2);
    log_info("proxy redirect followed service=%s user=%s run=%s to=%.*s", t->prov->name, t->user,
             t->run[0] ? t->run : "-", (int)url.authority.len, url.authority.base);
    upstream_call_start(&t->call, &t->redirect, t->reqbufs, 2, false, &call_cb);
}

static bool on_head(struct upstream_call *c, const struct up_head *h)
{
    struct transfer *t = container_of(c, struct transfer, call);
    h2o_req_t *req = t->req;
    int status = h->status;
    if (t->follow && !t->redirected &&
        (status == 301 || status == 302 || status == 303 || status == 307 || status == 308)) {
        for (size_t i = 0; i < h->nheaders; i++)
            if (h2o_lcstris(h->headers[i].name, h->headers[i].name_len, H2O_STRLIT("location"))) {
                follow_redirect(t, h->headers[i].value, h->headers[i].value_len);
                return false;
            }
    }
    t->status = status;
    for (size_t i = 0; i < h->nheaders; i++) {
        const struct phr_header *hd = &h->headers[i];
        /* h2o writes its own Date and Server on every answer: the upstream's would be a second
         * of each (Date may appear once, RFC 9110 6.6.1) */
        if (is_hop(hd->name, hd->name_len) ||
            (hd->name_len == 4 && strncasecmp(hd->name, "date", 4) == 0) ||
            (hd->name_len == 6 && strncasecmp(hd->name, "server", 6) == 0))
            continue;
        if (hd->name_len == 12 && strncasecmp(hd->name, "content-type", 12) == 0 &&
            hd->value_len >= 17 && strncasecmp(hd->value, "text/event-stream", 17) == 0)
            t->sse = true;
        /* both go with the upstream's input buffer after this call: names lowercased */
        char *name = h2o_strdup(&req->pool, hd->name, hd->name_len).base;
        h2o_strtolower(name, hd->name_len);
        h2o_add_header_by_str(&req->pool, &req->res.headers, name, hd->name_len, 0, NULL,
                              h2o_strdup(&req->pool, hd->value, hd->value_len).base, hd->value_len);
    }
    /* The body is passed on unchanged, so its length is known: the client then has the whole
     * reply with its last byte, rather than after a terminating chunk that h2o can only send once
     * the write of the body has completed. An upstream that sends less fails the exchange, which
     * cuts the client off. */
    if (h->body == UP_BODY_LENGTH)
        req->res.content_length = h->length;
    if (h->body == UP_BODY_LENGTH && t->prov->answer_max && h->length > t->prov->answer_max) {
        t->done = t->failed = true;
        http_watch_stop(&t->watch);
        log_warn("proxy answer refused service=%s user=%s run=%s bytes=%llu reason=answer_max",
                 t->prov->name, t->user, t->run[0] ? t->run : "-", (unsigned long long)h->length);
        proxy_respond_error(req, 502, "answer_too_large",
                            "the answer of '%s' (%llu bytes) is larger than %llu bytes",
                            t->prov->name, (unsigned long long)h->length,
                            (unsigned long long)t->prov->answer_max);
        return false;
    }
    return true;
}

void forward_connect(struct transfer *t)
{
    upstream_call_start(&t->call, &t->up->up, t->reqbufs, t->reqbufs[2].len ? 3 : 2,
                        is_head_method(t->req), &call_cb);
}

/* The request line and headers for the upstream: the client's headers minus hop-by-hop ones,
 * Host, its credentials, cookies and Accept-Encoding (so usage can be read), and the real key in
 * a buffer of its own, cleared when the request is done with. */
static void build_request_head(struct transfer *t, const struct service *up, const char *rest,
                               size_t rlen, bool rooted, const char *key_value)
{
    h2o_req_t *req = t->req;
    const struct provider *prov = t->prov;
    const char *query = req->query_at != SIZE_MAX ? req->path.base + req->query_at : "";
    size_t qlen = req->query_at != SIZE_MAX ? req->path.len - req->query_at : 0;
    struct buf *b = &t->head;
    buf_init(b, 0);
    /* appended piece by piece: this is on the path of every request (bench/proxy.mjs) */
    buf_append(b, req->method.base, req->method.len);
    buf_append(b, " ", 1);
    if (!rooted)
        buf_puts(b, up->base);
    buf_append(b, rest, rlen);
    buf_append(b, query, qlen);
    buf_puts(b, " HTTP/1.1\r\nhost: ");
    buf_append(b, up->authority.base, up->authority.len);
    buf_append(b, "\r\n", 2);
    if (req->entity.base || h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST")))
        buf_printf(b, "content-length: %zu\r\n", req->entity.len);
    for (size_t i = 0; i < req->headers.size; i++) {
        const h2o_header_t *h = &req->headers.entries[i];
        const char *name = h->name->base;
        size_t nlen = h->name->len;
        if (is_hop(name, nlen) || (nlen == 4 && strncasecmp(name, "host", 4) == 0) ||
            (nlen == 13 && strncasecmp(name, "authorization", 13) == 0) ||
            (nlen == 9 && strncasecmp(name, "x-api-key", 9) == 0) ||
            (nlen == 15 && strncasecmp(name, "accept-encoding", 15) == 0) ||
            (nlen == 6 && strncasecmp(name, "cookie", 6) == 0) ||
            (nlen == 6 && strncasecmp(name, "expect", 6) == 0) ||
            (strlen(prov->key_header) == nlen && strncasecmp(name, prov->key_header, nlen) == 0))
            continue;
        buf_append(b, name, nlen);
        buf_append(b, ": ", 2);
        buf_append(b, h->value.base, h->value.len);
        buf_append(b, "\r\n", 2);
    }
    t->key = xasprintf("%s: %s\r\n\r\n", prov->key_header, key_value);
    t->reqbufs[0] = h2o_iovec_init(t->head.data, t->head.len);
    t->reqbufs[1] = h2o_iovec_init(t->key, strlen(t->key));
    t->reqbufs[2] = req->entity.base ? req->entity : h2o_iovec_init(NULL, 0);
}

struct transfer *forward_new(struct proxy *p, h2o_req_t *req, const struct provider *prov,
                             const struct proxy_claims *claims, const char *rest, size_t rlen,
                             bool rooted, const char *key_value)
{
    struct transfer *t = h2o_mem_alloc_shared(&req->pool, sizeof(*t), on_dispose);
    memset(t, 0, sizeof(*t));
    t->gen.proceed = on_proceed;
    t->gen.stop = on_stop;
    t->p = p;
    t->req = req;
    t->prov = prov;
    t->up = &p->upstreams[prov - p->providers];
    t->t0 = time_mono_ms();
    snprintf(t->jti, sizeof(t->jti), "%s", claims->jti);
    snprintf(t->user, sizeof(t->user), "%s", claims->user);
    snprintf(t->run, sizeof(t->run), "%s", claims->run);
    http_watch_start(&t->watch, req, on_client_gone);
    http_sendq_init(&t->q, req);
    usage_init(&t->usage, USAGE_NONE, false);
    build_request_head(t, t->up, rest, rlen, rooted, key_value);
    size_t flen = prov->follow ? strlen(prov->follow) : 0;
    t->follow = flen && rlen >= flen && memcmp(rest + rlen - flen, prov->follow, flen) == 0 &&
                h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET"));
    /* the server's one h2o context resolves names on this loop */
    p->upstream_ctx.getaddr = &req->conn->ctx->receivers.hostinfo_getaddr;
    return t;
}

/* The client left before the upstream answered: cancel the upstream exchange. */
static void on_client_gone(struct http_watch *w)
{
    struct transfer *t = container_of(w, struct transfer, watch);
    if (t->check) { /* answered below: the check's own answer must not come too */
        push_check_forget(t->check);
        t->check = NULL;
    }
    if (upstream_call_active(&t->call)) {
        upstream_call_cancel(&t->call);
        log_info("proxy aborted service=%s user=%s run=%s reason=client-gone bytes=0",
                 t->prov->name, t->user, t->run[0] ? t->run : "-");
    }
    /* h2o learns of the closed connection on this write and disposes of the request */
    proxy_respond_error(t->req, 499, "client_gone", "the client went away");
}

static int service_init(struct proxy *p, struct service *up, const struct provider *prov,
                        struct err *err)
{
    h2o_url_t url;
    if (h2o_url_parse(prov->upstream, strlen(prov->upstream), &url) != 0 ||
        upstream_init(&up->up, &p->upstream_ctx, &url, UPSTREAM_IDLE_MAX) != 0)
        return err_set(err, -EINVAL, "provider '%s': upstream '%s' is not an http or https URL",
                       prov->name, prov->upstream);
    up->authority = url.authority;
    up->base = url.authority.base + url.authority.len; /* h2o makes a missing path "/" */
    return 0;
}

/* The upstream's certificate names the host h2o sent as SNI, the upstream URL's. h2o 2.2 checks
 * the name itself only when the handshake ends without a last flight of the client's to send,
 * which with TLS 1.3 it always has, so the check is OpenSSL's, as part of the chain's. */
static int verify_upstream(int ok, X509_STORE_CTX *store)
{
    if (!ok || X509_STORE_CTX_get_error_depth(store) != 0)
        return ok;
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    const char *host = ssl ? SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) : NULL;
    X509 *cert = X509_STORE_CTX_get_current_cert(store);
    int r = host ? X509_check_ip_asc(cert, host, 0) : 0;
    if (r == -2) /* not an IP address */
        r = X509_check_host(cert, host, 0, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL);
    if (r != 1)
        X509_STORE_CTX_set_error(store, X509_V_ERR_HOSTNAME_MISMATCH);
    return r == 1;
}

/* TLS to upstreams: certificates checked against the system's CA store (OpenSSL's default
 * paths, on Debian /etc/ssl/certs as libcurl's), and their names against the upstream's. */
static SSL_CTX *upstream_tls_new(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return NULL;
    if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
        !SSL_CTX_set_default_verify_paths(ctx)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, verify_upstream);
    return ctx;
}

int forward_init(struct proxy *p, struct err *err)
{
    p->upstream_ctx = (struct upstream_ctx){.ssl_ctx = upstream_tls_new(),
                                            .io_timeout_ms = p->stall_seconds * 1000,
                                            .connect_timeout_ms = CONNECT_TIMEOUT_MS,
                                            .idle_timeout_ms = UPSTREAM_IDLE_MS,
                                            .rcvbuf = UPSTREAM_RCVBUF};
    if (!p->upstream_ctx.ssl_ctx)
        return err_set(err, -ENOMEM, "cannot set up TLS for upstreams");
    p->upstreams = xcalloc(p->nproviders, sizeof(*p->upstreams));
    for (; p->nupstreams < p->nproviders; p->nupstreams++) {
        int r = service_init(p, &p->upstreams[p->nupstreams], &p->providers[p->nupstreams], err);
        if (r < 0)
            return r;
    }
    return 0;
}

void forward_release(struct proxy *p)
{
    usage_flush(p);
    for (size_t i = 0; i < p->nupstreams; i++)
        upstream_dispose(&p->upstreams[i].up);
    free(p->upstreams);
    p->upstreams = NULL;
    p->nupstreams = 0;
    SSL_CTX_free(p->upstream_ctx.ssl_ctx);
    p->upstream_ctx.ssl_ctx = NULL;
}

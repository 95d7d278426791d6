/* Forwarding a checked request: the real key swapped in for the agent's token, the request sent
 * upstream, and the answer streamed back as it arrives, with the tokens it used counted. One
 * transfer per request, owned by the request's pool, and one upstream exchange on h2o's HTTP/1
 * client over the service's pool of kept connections: h2o calls stop() before it frees the pool
 * when the client goes away, and stop() cancels the exchange, closing its connection, which the
 * upstream sees. h2o notices a client that went away only when it writes to it, so while nothing
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
#define UPSTREAM_IDLE_MAX 64        /* kept connections per upstream that are not in use */
#define UPSTREAM_IDLE_MS 118000     /* how long one is kept unused */
#define UPSTREAM_RCVBUF (512 << 10) /* the kernel doubles it: 1 MiB */

#define USAGE_FLUSH_MS 1000

/* A provider's upstream: where its requests go, and its kept connections. */
struct upstream {
    h2o_socketpool_t pool; /* capacity: UPSTREAM_IDLE_MAX */
    h2o_iovec_t authority; /* for Host */
    const char *base;      /* the upstream URL's path, "" for none */
    /* connections handed back since the pool was last found empty, less those taken again: never
     * fewer than it holds (the pool closes expired ones without a word) */
    size_t idle;
    bool timed; /* its idle connections expire: set at its first use */
};

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
    if (t->held && t->client && t->q.pending.len < PENDING_MAX / 2) {
        h2o_socket_read_start(t->client->sock, t->held);
        t->held = NULL;
    }
}

/* Cancel the upstream exchange: its connection is closed, not kept. */
static void upstream_cancel(struct transfer *t)
{
    loop_timer_stop(&t->connect_timer);
    if (t->client) {
        h2o_http1client_cancel(t->client);
        t->client = NULL;
    }
}

static void on_stop(h2o_generator_t *gen, h2o_req_t *req)
{
    struct transfer *t = (struct transfer *)gen;
    t->stopped = true;
    if (t->client) {
        /* The client went away: abort the upstream exchange, closing its connection. */
        upstream_cancel(t);
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
    upstream_cancel(t);
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
    t->held = NULL;
    http_watch_stop(&t->watch);
    log_warn("proxy upstream failed service=%s user=%s run=%s err=\"%s\" ms=%ld", t->prov->name,
             t->user, t->run[0] ? t->run : "-", errstr, (long)(time_mono_ms() - t->t0));
    if (!t->started) {
        proxy_respond_error(
            t->req, timeout ? 504 : 502, timeout ? "upstream_timeout" : "bad_gateway",
            timeout ? "upstream '%s' did not answer in time" : "cannot reach upstream '%s'",
            t->prov->name);
        return;
    }
    flush(t);
}

static void upstream_done(struct transfer *t)
{
    t->done = true;
    start_response(t);
    flush(t); /* the client has its answer before the bookkeeping below */
    record_usage(t);
    log_info("proxy request service=%s user=%s run=%s status=%d bytes=%llu in=%lld out=%lld ms=%ld",
             t->prov->name, t->user, t->run[0] ? t->run : "-", t->status,
             (unsigned long long)t->bytes, (long long)t->usage.input, (long long)t->usage.output,
             (long)(time_mono_ms() - t->t0));
}

/* The exchange on client ended cleanly, and h2o hands its connection back to the pool unless the
 * upstream asked otherwise. h2o 2.2's pool keeps whatever it is handed ("FIXME respect
 * capacity"), so beyond the pool's capacity of idle connections this one is closed instead. */
static void upstream_keep(struct transfer *t, h2o_http1client_t *client)
{
    struct upstream *up = t->up;
    if (up->idle >= up->pool.capacity)
        h2o_socket_close(h2o_http1client_steal_socket(client));
    else
        up->idle++;
}

static int on_body(h2o_http1client_t *client, const char *errstr)
{
    struct transfer *t = client->data;
    h2o_buffer_t **in = &client->sock->input;
    uint64_t max = t->prov->answer_max;
    if (max && t->bytes + (*in)->size > max) {
        t->client = NULL;
        upstream_failed(t, "the answer is larger than the service's answer_max");
        return -1;
    }
    if ((*in)->size) {
        start_response(t);
        http_sendq_write(&t->q, (*in)->bytes, (*in)->size);
        usage_feed(&t->usage, (*in)->bytes, (*in)->size);
        t->bytes += (*in)->size;
        h2o_buffer_consume(in, (*in)->size);
    }
    if (errstr == h2o_http1client_error_is_eos) {
        t->client = NULL;
        if (!t->redirected)
            upstream_keep(t, client);
        upstream_done(t);
    } else if (errstr) {
        t->client = NULL;
        upstream_failed(t, errstr);
    } else {
        flush(t); /* what one read brought leaves in one write; a stream's events at once */
        if (t->q.pending.len >= PENDING_MAX) {
            /* The client reads slower than the upstream sends: stop reading the upstream until
             * on_proceed. h2o 2.2's client has no pause of its own, so its reader is set aside
             * (its stall timeout still runs: a client that takes nothing for that long is cut). */
            t->held = client->sock->_cb.read;
            h2o_socket_read_stop(client->sock);
            if (!t->was_held)
                log_info("proxy upstream held service=%s user=%s run=%s reason=slow-client "
                         "bytes=%llu pending=%zu",
                         t->prov->name, t->user, t->run[0] ? t->run : "-",
                         (unsigned long long)t->bytes, t->q.pending.len);
            t->was_held = true;
        }
    }
    return 0;
}

static h2o_http1client_head_cb on_connect(h2o_http1client_t *client, const char *errstr,
                                          h2o_iovec_t **reqbufs, size_t *reqbufcnt,
                                          int *method_is_head);
static void on_connect_timeout(struct loop_timer *lt);

/* A GET the service answers with a redirect to where the content is (GitHub's logs, on blob
 * storage under a signed URL): fetched here, as the client would, over a connection of its own
 * and without the key, so that the client needs no way out of its sandbox for it. One hop: a
 * redirect from there is passed on as it is. */
static void follow_redirect(struct transfer *t, h2o_iovec_t location)
{
    h2o_url_t url;
    if (location.len > 4096 || h2o_url_parse(location.base, location.len, &url) != 0) {
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
    t->reqbufs[2] = h2o_iovec_init(NULL, 0);
    log_info("proxy redirect followed service=%s user=%s run=%s to=%.*s", t->prov->name, t->user,
             t->run[0] ? t->run : "-", (int)url.authority.len, url.authority.base);
    h2o_http1client_connect(&t->client, t, &t->p->client_ctx, url.host, h2o_url_get_port(&url),
                            url.scheme == &H2O_URL_SCHEME_HTTPS, on_connect);
    if (t->client)
        loop_timer_start(&t->connect_timer, CONNECT_TIMEOUT_MS, on_connect_timeout);
}

static h2o_http1client_body_cb on_head(h2o_http1client_t *client, const char *errstr,
                                       int minor_version, int status, h2o_iovec_t msg,
                                       h2o_header_t *headers, size_t nheaders, int rlen)
{
    struct transfer *t = client->data;
    if (errstr && errstr != h2o_http1client_error_is_eos) {
        t->client = NULL;
        /* A kept connection that the upstream closed while it was idle fails this way before
         * any answer; the request goes again, as libcurl would send it again. */
        if (t->reused && strncmp(errstr, "I/O error", 9) == 0)
            forward_connect(t);
        else
            upstream_failed(t, errstr);
        return NULL;
    }
    h2o_req_t *req = t->req;
    if (t->follow && !t->redirected &&
        (status == 301 || status == 302 || status == 303 || status == 307 || status == 308)) {
        for (size_t i = 0; i < nheaders; i++)
            if (h2o_memis(headers[i].name->base, headers[i].name->len, H2O_STRLIT("location"))) {
                t->client = NULL; /* h2o closes this one when the callback returns NULL */
                follow_redirect(t, headers[i].value);
                return NULL;
            }
    }
    size_t length = SIZE_MAX;
    bool chunked = false;
    t->status = status;
    for (size_t i = 0; i < nheaders; i++) {
        const h2o_iovec_t *name = headers[i].name;
        h2o_iovec_t v = headers[i].value;
        if (h2o_memis(name->base, name->len, H2O_STRLIT("transfer-encoding")))
            chunked = h2o_memis(v.base, v.len, H2O_STRLIT("chunked"));
        else if (h2o_memis(name->base, name->len, H2O_STRLIT("content-length")))
            length = h2o_strtosize(v.base, v.len);
        if (is_hop(name->base, name->len))
            continue;
        if (h2o_memis(name->base, name->len, H2O_STRLIT("content-type")) && v.len >= 17 &&
            strncasecmp(v.base, "text/event-stream", 17) == 0)
            t->sse = true;
        /* names come lowercase; both go with the client's input buffer after this call */
        h2o_add_header_by_str(&req->pool, &req->res.headers,
                              h2o_strdup(&req->pool, name->base, name->len).base, name->len, 0,
                              NULL, h2o_strdup(&req->pool, v.base, v.len).base, v.len);
    }
    /* The body is passed on unchanged, so its length is known: the client then has the whole
     * reply with its last byte, rather than after a terminating chunk that h2o can only send once
     * the write of the body has completed. An upstream that sends less fails the exchange, which
     * cuts the client off. */
    if (!chunked)
        req->res.content_length = length;
    if (!chunked && length != SIZE_MAX && t->prov->answer_max && length > t->prov->answer_max) {
        t->client = NULL;
        t->done = t->failed = true;
        http_watch_stop(&t->watch);
        log_warn("proxy answer refused service=%s user=%s run=%s bytes=%zu reason=answer_max",
                 t->prov->name, t->user, t->run[0] ? t->run : "-", length);
        proxy_respond_error(req, 502, "answer_too_large",
                            "the answer of '%s' (%zu bytes) is larger than %llu bytes",
                            t->prov->name, length, (unsigned long long)t->prov->answer_max);
        return NULL;
    }
    if (errstr) { /* no body: HEAD, 204, 304 */
        t->client = NULL;
        if (!t->redirected)
            upstream_keep(t, client);
        upstream_done(t);
        return NULL;
    }
    return on_body;
}

static h2o_http1client_head_cb on_connect(h2o_http1client_t *client, const char *errstr,
                                          h2o_iovec_t **reqbufs, size_t *reqbufcnt,
                                          int *method_is_head)
{
    struct transfer *t = client->data;
    loop_timer_stop(&t->connect_timer);
    if (errstr) {
        t->client = NULL;
        upstream_failed(t, errstr);
        return NULL;
    }
    if (t->connecting) { /* handed over at once: a kept connection */
        t->reused = true;
        if (t->up->idle)
            t->up->idle--;
    } else {
        /* h2o reads all the kernel holds before the PENDING_MAX hold applies: a receive buffer
         * of its own bounds what a client that reads slowly leaves in the server's memory */
        int rcvbuf = UPSTREAM_RCVBUF;
        setsockopt(h2o_socket_get_fd(client->sock), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    }
    *reqbufs = t->reqbufs;
    *reqbufcnt = t->reqbufs[2].len ? 3 : 2;
    *method_is_head = h2o_memis(t->req->method.base, t->req->method.len, H2O_STRLIT("HEAD"));
    return on_head;
}

static void on_connect_timeout(struct loop_timer *lt)
{
    struct transfer *t = container_of(lt, struct transfer, connect_timer);
    upstream_cancel(t);
    upstream_failed(t, "connection timeout");
}

void forward_connect(struct transfer *t)
{
    struct upstream *up = t->up;
    if (!up->timed) {
        h2o_socketpool_set_timeout(&up->pool, loop_get(), UPSTREAM_IDLE_MS);
        up->timed = true;
    }
    t->connecting = true;
    t->reused = false;
    h2o_http1client_connect_with_pool(&t->client, t, &t->p->client_ctx, &up->pool, on_connect);
    t->connecting = false;
    if (t->client && !t->reused) {
        /* the pool opens a connection only when it holds no idle one that is still open */
        up->idle = 0;
        loop_timer_start(&t->connect_timer, CONNECT_TIMEOUT_MS, on_connect_timeout);
    }
}

/* The request line and headers for the upstream: the client's headers minus hop-by-hop ones,
 * Host, its credentials, cookies and Accept-Encoding (so usage can be read), and the real key in
 * a buffer of its own, cleared when the request is done with. */
static void build_request_head(struct transfer *t, const struct upstream *up, const char *rest,
                               size_t rlen, bool rooted, const char *key_value)
{
    h2o_req_t *req = t->req;
    const struct provider *prov = t->prov;
    const char *query = req->query_at != SIZE_MAX ? req->path.base + req->query_at : "";
    size_t qlen = req->query_at != SIZE_MAX ? req->path.len - req->query_at : 0;
    buf_init(&t->head, 0);
    buf_printf(&t->head, "%.*s %s%.*s%.*s HTTP/1.1\r\nhost: %.*s\r\n", (int)req->method.len,
               req->method.base, rooted ? "" : up->base, (int)rlen, rest, (int)qlen, query,
               (int)up->authority.len, up->authority.base);
    if (req->entity.base || h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST")))
        buf_printf(&t->head, "content-length: %zu\r\n", req->entity.len);
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
        buf_printf(&t->head, "%.*s: %.*s\r\n", (int)nlen, name, (int)h->value.len, h->value.base);
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
    p->client_ctx.getaddr_receiver = &req->conn->ctx->receivers.hostinfo_getaddr;
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
    if (t->client) {
        upstream_cancel(t);
        log_info("proxy aborted service=%s user=%s run=%s reason=client-gone bytes=0",
                 t->prov->name, t->user, t->run[0] ? t->run : "-");
    }
    /* h2o learns of the closed connection on this write and disposes of the request */
    proxy_respond_error(t->req, 499, "client_gone", "the client went away");
}

static int upstream_init(struct upstream *up, const struct provider *prov, struct err *err)
{
    h2o_url_t url;
    if (h2o_url_parse(prov->upstream, strlen(prov->upstream), &url) != 0)
        return err_set(err, -EINVAL, "provider '%s': upstream '%s' is not an http or https URL",
                       prov->name, prov->upstream);
    up->authority = url.authority;
    up->base = url.authority.base + url.authority.len; /* h2o makes a missing path "/" */
    h2o_socketpool_init_by_hostport(&up->pool, url.host, h2o_url_get_port(&url),
                                    url.scheme == &H2O_URL_SCHEME_HTTPS, UPSTREAM_IDLE_MAX);
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
    p->client_ctx = (h2o_http1client_ctx_t){.loop = loop_get(),
                                            .io_timeout = loop_timeout(p->stall_seconds * 1000),
                                            .ssl_ctx = upstream_tls_new()};
    if (!p->client_ctx.ssl_ctx)
        return err_set(err, -ENOMEM, "cannot set up TLS for upstreams");
    p->upstreams = xcalloc(p->nproviders, sizeof(*p->upstreams));
    for (; p->nupstreams < p->nproviders; p->nupstreams++) {
        int r = upstream_init(&p->upstreams[p->nupstreams], &p->providers[p->nupstreams], err);
        if (r < 0)
            return r;
    }
    return 0;
}

void forward_release(struct proxy *p)
{
    usage_flush(p);
    for (size_t i = 0; i < p->nupstreams; i++)
        h2o_socketpool_dispose(&p->upstreams[i].pool);
    free(p->upstreams);
    p->upstreams = NULL;
    p->nupstreams = 0;
    SSL_CTX_free(p->client_ctx.ssl_ctx);
    p->client_ctx.ssl_ctx = NULL;
}

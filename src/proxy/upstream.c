/* The proxy's HTTP/1.1 client (see upstream.h). A call takes the upstream's most recently used
 * idle connection or opens one (a name looked up off the loop, TCP, TLS for https), writes the
 * request, and reads the answer: its head, then its body as framed (upstream_wire.c), each piece
 * handed to the caller as it arrives. A connection whose answer ended cleanly, whose framing
 * allows another and whose upstream has capacity left goes back to the pool and stays
 * registered on the loop: anything it reads while idle (the upstream closing it, or bytes no
 * request asked for) closes it. Callbacks may end the call they report on, or start another on
 * the same struct; c->gone tells the frame below that it has gone. */
#include "proxy/upstream.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/cleanup.h"
#include "base/util.h"

struct upconn {
    h2o_socket_t *sock;
    struct upstream *up;
    struct upstream_call *call; /* NULL while idle */
    h2o_linklist_t link;        /* in up->idle while idle */
    struct loop_timer idle_timer;
};

static void on_read(h2o_socket_t *sock, const char *err);
static void connect_new(struct upstream_call *c);

/* --- connections --- */

static void conn_close(struct upconn *k)
{
    if (h2o_linklist_is_linked(&k->link)) {
        h2o_linklist_unlink(&k->link);
        k->up->nidle--;
    }
    loop_timer_stop(&k->idle_timer);
    h2o_socket_close(k->sock);
    free(k);
}

/* An idle connection read something: the upstream closed it, or sent what nothing asked for. */
static void on_idle_read(h2o_socket_t *sock, const char *err)
{
    conn_close(sock->data);
}

static void on_idle_timeout(struct loop_timer *lt)
{
    conn_close(container_of(lt, struct upconn, idle_timer));
}

static struct upconn *conn_new(struct upstream *up, h2o_socket_t *sock)
{
    struct upconn *k = xcalloc(1, sizeof(*k));
    k->sock = sock;
    k->up = up;
    sock->data = k;
    return k;
}

/* --- the call's end --- */

/* A connection no call holds: back to its upstream's idle ones when keep and there is room, else
 * closed. */
static void conn_release(struct upconn *k, bool keep)
{
    struct upstream *up = k->up;
    k->call = NULL;
    if (!keep || up->nidle >= up->capacity || h2o_socket_is_writing(k->sock) ||
        k->sock->input->size) {
        conn_close(k);
        return;
    }
    h2o_linklist_insert(up->idle.next, &k->link);
    up->nidle++;
    h2o_socket_read_start(k->sock, on_idle_read);
    loop_timer_start(&k->idle_timer, up->ctx->idle_timeout_ms, on_idle_timeout);
}

/* End the call: its connection, if it still holds one, closed. */
static void call_end(struct upstream_call *c)
{
    struct upconn *k = c->conn;
    if (c->lookup) {
        h2o_hostinfo_getaddr_cancel(c->lookup);
        c->lookup = NULL;
    }
    loop_timer_stop(&c->timer);
    if (c->gone)
        *c->gone = true;
    c->gone = NULL;
    c->cb = NULL;
    c->conn = NULL;
    if (k)
        conn_release(k, false);
}

static void call_failed(struct upstream_call *c, const char *errstr)
{
    const struct upstream_call_cb *cb = c->cb;
    call_end(c);
    cb->failed(c, errstr);
}

void upstream_call_cancel(struct upstream_call *c)
{
    if (c->cb)
        call_end(c);
}

/* --- sending --- */

static void on_io_timeout(struct loop_timer *lt)
{
    call_failed(container_of(lt, struct upstream_call, timer), "I/O timeout");
}

static void on_connect_timeout(struct loop_timer *lt)
{
    call_failed(container_of(lt, struct upstream_call, timer), "connection timeout");
}

/* A kept connection failed before any of the answer came: the upstream closed it as the request
 * went out. The request goes again on a new one, as browsers and libcurl send it again. */
static bool retry(struct upstream_call *c)
{
    if (!c->reused || c->answering || c->conn->sock->input->size)
        return false;
    struct upconn *k = c->conn;
    k->call = NULL;
    c->conn = NULL;
    conn_close(k);
    connect_new(c);
    return true;
}

static void on_written(h2o_socket_t *sock, const char *err)
{
    struct upconn *k = sock->data;
    struct upstream_call *c = k->call;
    if (!c || !err || retry(c))
        return;
    call_failed(c, "I/O error (write)");
}

static void send_request(struct upstream_call *c)
{
    h2o_socket_t *sock = c->conn->sock;
    loop_timer_start(&c->timer, c->up->ctx->io_timeout_ms, on_io_timeout);
    h2o_socket_write(sock, c->bufs, c->nbufs, on_written);
    h2o_socket_read_start(sock, on_read);
}

static void on_handshake(h2o_socket_t *sock, const char *err)
{
    struct upconn *k = sock->data;
    if (err) {
        call_failed(k->call, err);
        return;
    }
    send_request(k->call);
}

static void on_connected(h2o_socket_t *sock, const char *err)
{
    struct upconn *k = sock->data;
    struct upstream_call *c = k->call;
    if (err) {
        call_failed(c, err);
        return;
    }
    if (c->up->tls)
        h2o_socket_ssl_handshake(sock, c->up->ctx->ssl_ctx, c->up->host, on_handshake);
    else
        send_request(c);
}

static void connect_to(struct upstream_call *c, struct sockaddr *addr, socklen_t len)
{
    h2o_socket_t *sock = h2o_socket_connect(loop_get(), addr, len, on_connected);
    if (!sock) {
        call_failed(c, h2o_socket_error_conn_fail);
        return;
    }
    struct upconn *k = conn_new(c->up, sock);
    k->call = c;
    c->conn = k;
    if (c->up->ctx->rcvbuf) /* what a client that reads slowly leaves in the server's memory */
        setsockopt(h2o_socket_get_fd(sock), SOL_SOCKET, SO_RCVBUF, &c->up->ctx->rcvbuf,
                   sizeof(c->up->ctx->rcvbuf));
}

static void on_lookup(h2o_hostinfo_getaddr_req_t *req, const char *errstr, struct addrinfo *res,
                      void *data)
{
    struct upstream_call *c = data;
    c->lookup = NULL;
    if (errstr) {
        call_failed(c, errstr);
        return;
    }
    struct addrinfo *ai = h2o_hostinfo_select_one(res);
    connect_to(c, ai->ai_addr, ai->ai_addrlen);
}

static void connect_new(struct upstream_call *c)
{
    struct upstream *up = c->up;
    c->reused = false;
    loop_timer_start(&c->timer, up->ctx->connect_timeout_ms, on_connect_timeout);
    if (up->addrlen) {
        connect_to(c, (struct sockaddr *)&up->addr, up->addrlen);
        return;
    }
    char port[8];
    snprintf(port, sizeof(port), "%u", up->port);
    c->lookup = h2o_hostinfo_getaddr(up->ctx->getaddr, h2o_iovec_init(up->host, strlen(up->host)),
                                     h2o_iovec_init(port, strlen(port)), AF_UNSPEC, SOCK_STREAM,
                                     IPPROTO_TCP, AI_ADDRCONFIG | AI_NUMERICSERV, on_lookup, c);
}

void upstream_call_start(struct upstream_call *c, struct upstream *up, h2o_iovec_t *bufs,
                         size_t nbufs, bool head_method, const struct upstream_call_cb *cb)
{
    upstream_call_cancel(c); /* one a callback is reporting on: it is told */
    *c = (struct upstream_call){
        .cb = cb, .up = up, .bufs = bufs, .nbufs = nbufs, .head_method = head_method};
    if (h2o_linklist_is_empty(&up->idle)) {
        connect_new(c);
        return;
    }
    struct upconn *k = H2O_STRUCT_FROM_MEMBER(struct upconn, link, up->idle.next);
    h2o_linklist_unlink(&k->link);
    up->nidle--;
    loop_timer_stop(&k->idle_timer);
    k->call = c;
    c->conn = k;
    c->reused = true;
    send_request(c);
}

/* --- the answer --- */

/* Hand len bytes at data (in sock's input) to the caller, end: the last; then take used bytes
 * of the input. Returns false when the call is over (or paused) and the input may not be looked
 * at again. */
static bool deliver(struct upstream_call *c, const char *data, size_t len, size_t used, bool end)
{
    const struct upstream_call_cb *cb = c->cb;
    h2o_socket_t *sock = c->conn->sock;
    if (end) {
        /* The call is over before the caller hears of it, so that it may do anything, this
         * struct included; the connection is no longer the call's, and goes after. */
        struct upconn *k = c->conn;
        bool keep = c->keep && used == sock->input->size;
        c->conn = NULL;
        call_end(c);
        cb->body(c, data, len, true);
        h2o_buffer_consume(&sock->input, used);
        conn_release(k, keep);
        return false;
    }
    bool gone = false;
    c->gone = &gone;
    bool more = cb->body(c, data, len, false);
    if (gone) /* and its connection closed, the input with it */
        return false;
    c->gone = NULL;
    h2o_buffer_consume(&sock->input, used);
    if (!more) {
        call_end(c);
        return false;
    }
    return !c->paused;
}

/* Take the head from sock's input: false when the call is over, or the head is not all there. */
static bool take_head(struct upstream_call *c, h2o_socket_t *sock, const char *err)
{
    for (;;) {
        struct up_head h;
        int r = up_parse_head(sock->input->bytes, sock->input->size, c->head_method, &h);
        if (r == -2) {
            if (err && !retry(c))
                call_failed(c, sock->input->size ? "the upstream closed the connection in "
                                                   "the middle of the answer's head"
                                                 : "I/O error (the upstream closed the "
                                                   "connection without an answer)");
            return false;
        }
        if (r < 0 || h.status == 101) {
            call_failed(c, "the upstream's answer is not valid HTTP/1.1");
            return false;
        }
        if (h.status < 200) { /* informational: the answer follows */
            h2o_buffer_consume(&sock->input, (size_t)r);
            continue;
        }
        c->answering = true;
        c->body = h.body;
        c->left = h.length;
        c->keep = h.keep;
        bool gone = false;
        c->gone = &gone;
        bool more = c->cb->head(c, &h);
        if (gone)
            return false;
        c->gone = NULL;
        if (!more) {
            call_end(c);
            return false;
        }
        h2o_buffer_consume(&sock->input, (size_t)r);
        return true;
    }
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    struct upconn *k = sock->data;
    struct upstream_call *c = k->call;
    loop_timer_start(&c->timer, c->up->ctx->io_timeout_ms, on_io_timeout);
    if (!c->answering && !take_head(c, sock, err))
        return;
    h2o_buffer_t *in = sock->input;
    switch (c->body) {
    case UP_BODY_NONE: deliver(c, NULL, 0, 0, true); return;
    case UP_BODY_LENGTH: {
        size_t take = in->size < c->left ? in->size : (size_t)c->left;
        c->left -= take;
        if (c->left == 0) {
            deliver(c, in->bytes, take, take, true);
            return;
        }
        if (take && !deliver(c, in->bytes, take, take, false))
            return;
        break;
    }
    case UP_BODY_CHUNKED: {
        size_t n = in->size, out = 0;
        int r = up_chunked_decode(&c->chunked, in->bytes, &n, &out);
        if (r < 0) {
            call_failed(c, "the upstream's chunked encoding is broken");
            return;
        }
        if (r == 1) {
            deliver(c, in->bytes, out, n, true);
            return;
        }
        if (!out)
            h2o_buffer_consume(&sock->input, n); /* sizes and line ends only */
        else if (!deliver(c, in->bytes, out, n, false))
            return;
        break;
    }
    case UP_BODY_CLOSE:
        if (err) {
            c->keep = false;
            deliver(c, in->bytes, in->size, in->size, true);
            return;
        }
        if (in->size && !deliver(c, in->bytes, in->size, in->size, false))
            return;
        break;
    }
    if (err)
        call_failed(c, "I/O error (the upstream closed the connection in the middle of the "
                       "answer)");
}

void upstream_call_pause(struct upstream_call *c)
{
    if (!c->conn || c->paused)
        return;
    c->paused = true;
    h2o_socket_read_stop(c->conn->sock);
}

void upstream_call_resume(struct upstream_call *c)
{
    if (!c->conn || !c->paused)
        return;
    c->paused = false;
    h2o_socket_read_start(c->conn->sock, on_read);
}

/* --- upstreams --- */

int upstream_init(struct upstream *up, struct upstream_ctx *ctx, const h2o_url_t *url,
                  size_t capacity)
{
    *up = (struct upstream){.ctx = ctx, .capacity = capacity};
    h2o_linklist_init_anchor(&up->idle);
    if (url->scheme != &H2O_URL_SCHEME_HTTP && url->scheme != &H2O_URL_SCHEME_HTTPS)
        return -1;
    up->host = xstrndup(url->host.base, url->host.len);
    up->port = h2o_url_get_port(url);
    up->tls = url->scheme == &H2O_URL_SCHEME_HTTPS;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&up->addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&up->addr;
    if (inet_pton(AF_INET, up->host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(up->port);
        up->addrlen = sizeof(*v4);
    } else if (inet_pton(AF_INET6, up->host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(up->port);
        up->addrlen = sizeof(*v6);
    }
    return 0;
}

void upstream_dispose(struct upstream *up)
{
    while (!h2o_linklist_is_empty(&up->idle))
        conn_close(H2O_STRUCT_FROM_MEMBER(struct upconn, link, up->idle.next));
    free(up->host);
    up->host = NULL;
}

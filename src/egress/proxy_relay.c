/* The egress proxy's last stages (see proxy.c): the tunnel's TLS ClientHello checked against the
 * name judged (hello), and the relay of bytes both ways, each direction bounded by its buffer and
 * drawing on its sandbox's token bucket (the throttle). Everything per byte relayed happens in
 * this file, on the loop. */
#include "egress/proxy_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/util.h"

/* --- relay --- */

static void on_client_read(h2o_socket_t *sock, const char *err);
static void on_upstream_read(h2o_socket_t *sock, const char *err);

static struct throttle *throttle_of(struct dir *d)
{
    return d == &d->c->up ? &d->c->sbx->up : &d->c->sbx->down;
}

/* The socket direction d reads from, and the callback for its reads. */
static h2o_socket_t *dir_source(struct dir *d, h2o_socket_cb *on_read)
{
    struct conn *c = d->c;
    *on_read = d == &c->up ? on_client_read : on_upstream_read;
    return d == &c->up ? c->client : c->upstream;
}

static void read_resume(struct dir *d)
{
    h2o_socket_cb on_read;
    h2o_socket_t *from = dir_source(d, &on_read);
    h2o_socket_read_start(from, on_read);
}

static void on_throttle(struct loop_timer *timer);

static void throttle_arm(struct throttle *t)
{
    uint64_t wait = egress_rate_wait_ms(&t->bucket, RATE_READ_MIN, (int64_t)h2o_now(loop_get()));
    uint64_t ms = 1;
    while (ms < wait && ms < RATE_TICK_MAX)
        ms <<= 1;
    t->armed = true;
    loop_timer_start(&t->timer, ms, on_throttle);
}

/* d stops reading until its turn comes: at the end of the line, or at its head when it was let
 * out and found the bucket emptied by those let out before it. */
static void throttle_wait(struct throttle *t, struct dir *d, bool first)
{
    d->waiting = true;
    if (first) {
        d->next_waiting = t->head;
        if (!t->head)
            t->tail = &d->next_waiting;
        t->head = d;
    } else {
        d->next_waiting = NULL;
        if (!t->head)
            t->tail = &t->head;
        *t->tail = d;
        t->tail = &d->next_waiting;
    }
    if (!t->armed)
        throttle_arm(t);
}

void egress_throttle_remove(struct throttle *t, struct dir *d)
{
    struct dir **pp = &t->head;
    while (*pp != d)
        pp = &(*pp)->next_waiting;
    *pp = d->next_waiting;
    if (!*pp)
        t->tail = pp;
    d->waiting = false;
}

/* The bucket has refilled: let connections out of the line, in order, as many as it has a
 * buffer's worth of tokens for (at least one). */
static void on_throttle(struct loop_timer *timer)
{
    struct throttle *t = (struct throttle *)((char *)timer - offsetof(struct throttle, timer));
    t->armed = false;
    uint64_t budget = egress_rate_available(&t->bucket, (int64_t)h2o_now(loop_get()));
    if (budget >= RATE_READ_MIN) {
        while (t->head && budget > 0) {
            struct dir *d = t->head;
            t->head = d->next_waiting;
            if (!t->head)
                t->tail = &t->head;
            d->waiting = false;
            d->granted = true;
            read_resume(d);
            budget -= budget < RELAY_BUF ? budget : RELAY_BUF;
        }
    }
    if (t->head)
        throttle_arm(t);
}

void egress_throttle_init(struct throttle *t, uint64_t rate)
{
    egress_rate_init(&t->bucket, rate, (int64_t)h2o_now(loop_get()));
    t->head = NULL;
    t->tail = &t->head;
}

void egress_throttle_release(struct throttle *t)
{
    loop_timer_stop(&t->timer);
    t->armed = false;
}

static void relay_done_if_both(struct conn *c)
{
    if (c->up.eof && c->down.eof && !c->up.writing && !c->down.writing) {
        c->reason = "ok";
        egress_conn_finish(c);
    }
}

static void tunnel_alert(struct conn *c);

/* What direction d read has been written: read again, or pass its end on. */
static void dir_written(struct dir *d, const char *err)
{
    struct conn *c = d->c;
    if (err) {
        if (c->stage == ST_RELAY)
            c->reason = "ok";
        egress_conn_finish(c);
        return;
    }
    d->writing = false;
    if (c->stage == ST_HELLO)
        return; /* the 200: the upstream is read once the hello has passed */
    if (c->stage == ST_REFUSE) {
        tunnel_alert(c);
        return;
    }
    loop_timer_start(&c->timer, IDLE_MS, egress_conn_on_timeout);
    if (d->eof) {
        shutdown(h2o_socket_get_fd(d == &c->up ? c->upstream : c->client), SHUT_WR);
        relay_done_if_both(c);
        return;
    }
    read_resume(d);
}

static void on_upstream_written(h2o_socket_t *sock, const char *err)
{
    dir_written(&((struct conn *)sock->data)->up, err);
}

static void on_client_written(h2o_socket_t *sock, const char *err)
{
    dir_written(&((struct conn *)sock->data)->down, err);
}

/* Read what `from` has (at most RELAY_BUF, and what the sandbox's bucket allows) and write it to
 * `to`; false when the connection ended. */
static bool pump(struct conn *c, struct dir *d, h2o_socket_t *from, h2o_socket_t *to,
                 uint64_t *count, h2o_socket_cb written)
{
    struct throttle *t = throttle_of(d);
    if (d->full && d->cap < RELAY_BUF_BULK && c->sbx->bulk < RELAY_BULK_MAX) {
        /* a bulk transfer: a larger buffer (free now, nothing is being written from it) takes
         * fewer system calls and wakeups per byte, which is most of what relaying costs */
        free(d->buf);
        d->buf = xmalloc(RELAY_BUF_BULK);
        d->cap = RELAY_BUF_BULK;
        c->sbx->bulk++;
    }
    size_t want = d->cap;
    if (t->bucket.rate) {
        uint64_t avail = egress_rate_available(&t->bucket, (int64_t)h2o_now(loop_get()));
        bool granted = d->granted;
        d->granted = false;
        if (granted ? avail == 0 : t->head || avail < RATE_READ_MIN) {
            h2o_socket_read_stop(from);
            throttle_wait(t, d, granted);
            return true;
        }
        if (avail < want)
            want = (size_t)avail;
    }
    ssize_t n;
    do
        n = read(h2o_socket_get_fd(from), d->buf, want);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return true;
    h2o_socket_read_stop(from);
    if (n < 0) {
        c->reason = "ok";
        egress_conn_finish(c);
        return false;
    }
    if (n == 0) {
        d->eof = true;
        shutdown(h2o_socket_get_fd(to), SHUT_WR);
        relay_done_if_both(c);
        return true;
    }
    *count += (uint64_t)n;
    d->full = (size_t)n == d->cap;
    egress_rate_take(&t->bucket, (uint64_t)n);
    d->writing = true;
    h2o_iovec_t buf = h2o_iovec_init(d->buf, (size_t)n);
    h2o_socket_write(to, &buf, 1, written);
    return true;
}

static void on_client_read(h2o_socket_t *sock, const char *err)
{
    struct conn *c = sock->data;
    pump(c, &c->up, c->client, c->upstream, &c->nup, on_upstream_written);
}

static void on_upstream_read(h2o_socket_t *sock, const char *err)
{
    struct conn *c = sock->data;
    pump(c, &c->down, c->upstream, c->client, &c->ndown, on_client_written);
}

/* --- hello --- */

/* Close the tunnel once the 200 is written: after a TLS alert when it began with TLS. */
static void tunnel_alert(struct conn *c)
{
    /* a fatal access_denied alert, in a record of TLS 1.2 framing as every version sends it */
    static const char alert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31};
    c->stage = ST_ANSWER;
    loop_timer_start(&c->timer, CONNECT_MS, egress_conn_on_timeout);
    if (!c->alert) {
        egress_conn_finish(c);
        return;
    }
    h2o_iovec_t b = h2o_iovec_init(alert, sizeof(alert));
    h2o_socket_write(c->client, &b, 1, egress_conn_on_answered);
}

/* Refuse a tunnel already answered 200: nothing reaches the upstream, which is closed. */
void egress_tunnel_refuse(struct conn *c, enum egress_reason r, const char *why, bool alert)
{
    c->verdict = "denied";
    c->reason = egress_reason_name(r);
    c->status = 200;
    snprintf(c->why, sizeof(c->why), "%s", why);
    c->why[strcspn(c->why, "\r\n")] = '\0';
    c->alert = alert;
    c->stage = ST_REFUSE;
    h2o_socket_read_stop(c->client);
    if (c->upstream) {
        h2o_socket_close(c->upstream);
        c->upstream = NULL;
    }
    loop_timer_start(&c->timer, CONNECT_MS, egress_conn_on_timeout);
    if (!c->down.writing)
        tunnel_alert(c);
}

static void on_hello_read(h2o_socket_t *sock, const char *err);

/* Judge the tunnel's first bytes once they hold a whole ClientHello, then relay them and what
 * follows, or refuse the tunnel. */
static void hello_check(struct conn *c)
{
    struct egress_hello hello;
    const uint8_t *b = (const uint8_t *)c->up.buf;
    int r = egress_hello_parse(b, c->hello_len, &hello);
    if (r == -EAGAIN) {
        h2o_socket_read_start(c->client, on_hello_read);
        return;
    }
    bool tls = c->hello_len > 0 && b[0] == 0x16;
    if (r == -EMSGSIZE) {
        egress_tunnel_refuse(c, EGRESS_DENY_SNI,
                             "the tunnel's TLS ClientHello is larger than 16 KiB", tls);
        return;
    }
    struct err why = {0};
    enum egress_reason e =
        egress_policy_check_sni(c->sbx->p->policy, c->mode, c->host, r == 0 ? &hello : NULL, &why);
    if (e != EGRESS_OK) {
        egress_tunnel_refuse(c, e, why.msg, tls);
        return;
    }
    c->stage = ST_RELAY;
    loop_timer_start(&c->timer, IDLE_MS, egress_conn_on_timeout);
    c->nup += c->hello_len;
    egress_rate_take(&c->sbx->up.bucket, c->hello_len);
    c->up.writing = true;
    h2o_iovec_t u = h2o_iovec_init(c->up.buf, c->hello_len);
    h2o_socket_write(c->upstream, &u, 1, on_upstream_written);
    if (!c->down.writing)
        read_resume(&c->down);
}

static void on_hello_read(h2o_socket_t *sock, const char *err)
{
    struct conn *c = sock->data;
    ssize_t n;
    do
        n = read(h2o_socket_get_fd(sock), c->up.buf + c->hello_len,
                 EGRESS_HELLO_MAX - c->hello_len);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    h2o_socket_read_stop(sock);
    if (n <= 0) {
        c->verdict = "denied";
        c->reason = egress_reason_name(EGRESS_DENY_SNI);
        c->status = 200;
        snprintf(c->why, sizeof(c->why), "the tunnel ended before its TLS ClientHello");
        egress_conn_finish(c);
        return;
    }
    c->hello_len += (size_t)n;
    hello_check(c);
}

void egress_relay_start(struct conn *c)
{
    c->stage = ST_RELAY;
    c->verdict = "allowed";
    c->reason = "ok";
    c->up.c = c->down.c = c;
    c->up.buf = xmalloc(RELAY_BUF);
    c->down.buf = xmalloc(RELAY_BUF);
    c->up.cap = c->down.cap = RELAY_BUF;
    loop_timer_start(&c->timer, IDLE_MS, egress_conn_on_timeout);
    if (c->is_connect) {
        /* the answer first, then what the client sent after its head (a TLS hello, say) */
        static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
        memcpy(c->down.buf, ok, sizeof(ok) - 1);
        c->down.writing = true;
        h2o_iovec_t b = h2o_iovec_init(c->down.buf, sizeof(ok) - 1);
        h2o_socket_write(c->client, &b, 1, on_client_written);
        size_t hlen = c->head_end;
        if (c->sniff) {
            c->stage = ST_HELLO;
            c->hello_len = c->head_len - hlen; /* < HEAD_MAX < RELAY_BUF */
            memcpy(c->up.buf, c->head + hlen, c->hello_len);
            loop_timer_start(&c->timer, CONNECT_MS, egress_conn_on_timeout);
            hello_check(c);
            return;
        }
        if (c->head_len > hlen) {
            memcpy(c->up.buf, c->head + hlen, c->head_len - hlen);
            c->nup += c->head_len - hlen;
            egress_rate_take(&c->sbx->up.bucket, c->head_len - hlen);
            c->up.writing = true;
            h2o_iovec_t u = h2o_iovec_init(c->up.buf, c->head_len - hlen);
            h2o_socket_write(c->upstream, &u, 1, on_upstream_written);
        } else {
            h2o_socket_read_start(c->client, on_client_read);
        }
        return;
    }
    c->status = 0;
    c->nup += c->forward_len;
    egress_rate_take(&c->sbx->up.bucket, c->forward_len);
    c->up.writing = true;
    h2o_iovec_t f = h2o_iovec_init(c->forward, c->forward_len);
    h2o_socket_write(c->upstream, &f, 1, on_upstream_written);
    h2o_socket_read_start(c->upstream, on_upstream_read);
}

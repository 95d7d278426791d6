/* The egress proxy: what a sandbox's 127.0.0.1:3128 serves. The listener lives in the sandbox's
 * network namespace (the sandbox manager made it there), while this side runs in the host's, so
 * the sandbox needs no interface, route or DNS of its own, and this is its only way out.
 *
 * A connection goes through these stages, one at a time:
 *   head     read the request head (at most HEAD_MAX bytes): CONNECT host:port, or an
 *            absolute-form plain HTTP request, which is rewritten to origin form with
 *            Connection: close and without Proxy-* headers
 *   judge    the policy on the name (egress_policy_check_name), then on every address the name
 *            resolves to (egress_resolve on a thread; egress_policy_check_addrs)
 *   connect  non-blocking, to the checked addresses in turn, within CONNECT_MS
 *   hello    (a CONNECT to a name in allowlist mode) after the 200, the tunnel's first bytes, at
 *            most EGRESS_HELLO_MAX within CONNECT_MS, must be a TLS ClientHello naming that name
 *            (egress_policy_check_sni): else, behind a shared front (a CDN) an allowed name
 *            would reach every other site on it. A refused one gets a TLS access_denied alert.
 *            Absolute-form requests get the same from their Host header, which is rewritten to
 *            the authority judged
 *   relay    bytes both ways; each direction reads at most a buffer's worth and reads again
 *            only once it is written, so a slow reader holds back its writer, and what a
 *            connection holds stays bounded whatever either side does. Buffers are RELAY_BUF;
 *            a direction whose reads fill it (a download, say) gets RELAY_BUF_BULK, as long as
 *            fewer than RELAY_BULK_MAX of its sandbox's have one: per byte relayed the cost is
 *            mostly system calls and wakeups, which a larger buffer makes fewer (bench/NOTES.md)
 * Each direction of a sandbox's relays draws on a token bucket of its own (SANDBOX_EGRESS_RATE
 * bytes a second): a read takes at most what the bucket holds, and a connection that finds it
 * empty stops reading and waits in line on its sandbox's timer, so the sandbox's connections
 * take turns (first come, first served) and the kernel's buffers hold the sender back meanwhile.
 * The sockets are h2o sockets that h2o never reads itself (H2O_SOCKET_FLAG_DONT_READ): h2o's
 * own reads drain the kernel's buffer into a growing buffer, which would not be bounded. Every
 * connection ends in egress_conn_finish(), which records it once.
 *
 * The stages are one file each, around proxy_internal.h, as the relay's per-byte path wants no
 * more than its own file: proxy_head.c (head), proxy_judge.c (judge and connect),
 * proxy_relay.c (hello and relay). This file holds the connection's life (its record, end,
 * timeouts and error answers), the accept of a sandbox's listener, and the public calls. */
#include "egress/proxy_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/cleanup.h"
#include "base/config.h"
#include "base/loop.h"
#include "base/util.h"

#define ACCEPT_BATCH 16

static void record(struct conn *c)
{
    struct egress_proxy *p = c->sbx->p;
    if (!p->record || c->silent)
        return;
    struct egress_attempt a = {.sandbox_id = c->sbx->id,
                               .method = c->method,
                               .host = c->host,
                               .port = c->port,
                               .addr = c->addr,
                               .verdict = c->verdict ? c->verdict : "denied",
                               .reason = c->reason ? c->reason : "bad_request",
                               .why = c->why,
                               .status = c->status,
                               .up = c->nup,
                               .down = c->ndown,
                               .start_ms = c->start_ms,
                               .end_ms = time_now_ms()};
    p->record(p->record_ctx, &a);
}

void egress_conn_finish(struct conn *c)
{
    record(c);
    if (c->up.waiting)
        egress_throttle_remove(&c->sbx->up, &c->up);
    if (c->down.waiting)
        egress_throttle_remove(&c->sbx->down, &c->down);
    loop_timer_stop(&c->timer);
    egress_lookup_cancel(c->lookup);
    if (c->client)
        h2o_socket_close(c->client);
    if (c->upstream)
        h2o_socket_close(c->upstream);
    *c->pprev = c->next;
    if (c->next)
        c->next->pprev = c->pprev;
    c->sbx->nconns--;
    c->sbx->p->conns--;
    free(c->forward);
    c->sbx->bulk -= (c->up.cap == RELAY_BUF_BULK) + (c->down.cap == RELAY_BUF_BULK);
    free(c->up.buf);
    free(c->down.buf);
    free(c);
}

void egress_conn_on_timeout(struct loop_timer *t)
{
    struct conn *c = (struct conn *)((char *)t - offsetof(struct conn, timer));
    if (c->stage == ST_HEAD) {
        c->reason = "timeout";
        egress_conn_finish(c);
    } else if (c->stage == ST_RELAY || c->stage == ST_ANSWER || c->stage == ST_REFUSE) {
        egress_conn_finish(c); /* idle, or the sandbox does not read its answer */
    } else if (c->stage == ST_HELLO) {
        egress_tunnel_refuse(c, EGRESS_DENY_SNI,
                             "the tunnel's TLS ClientHello did not come in time",
                             c->hello_len > 0 && c->up.buf[0] == 0x16);
    } else if (c->stage == ST_CONNECT) {
        egress_conn_answer(c, 504, "allowed", "timeout", "the upstream did not answer in time");
    } else {
        egress_conn_answer(c, 504, "allowed", "timeout", "the name did not resolve in time");
    }
}

void egress_conn_on_answered(h2o_socket_t *sock, const char *err)
{
    egress_conn_finish(sock->data);
}

/* Answer the sandbox with status and a one-line reason, then close. */
void egress_conn_answer(struct conn *c, int status, const char *verdict, const char *reason,
                        const char *why)
{
    static const struct {
        int status;
        const char *text;
    } texts[] = {{400, "Bad Request"},        {403, "Forbidden"},
                 {405, "Method Not Allowed"}, {431, "Request Header Fields Too Large"},
                 {502, "Bad Gateway"},        {503, "Service Unavailable"},
                 {504, "Gateway Timeout"}};
    const char *text = "Error";
    for (size_t i = 0; i < ARRAY_SIZE(texts); i++)
        if (texts[i].status == status)
            text = texts[i].text;
    c->verdict = verdict;
    c->reason = reason;
    c->status = status;
    c->stage = ST_ANSWER;
    egress_lookup_cancel(c->lookup);
    c->lookup = NULL;
    if (c->upstream) {
        h2o_socket_close(c->upstream);
        c->upstream = NULL;
    }
    h2o_socket_read_stop(c->client);
    /* the reason, on one line of at most 300 bytes */
    char *line = c->why;
    snprintf(line, sizeof(c->why), "%s", why);
    line[strcspn(line, "\r\n")] = '\0';
    int n = snprintf(c->answer, sizeof(c->answer),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
                     status, text, strlen(line) + 1, line);
    h2o_iovec_t buf = h2o_iovec_init(c->answer, (size_t)n);
    loop_timer_start(&c->timer, CONNECT_MS, egress_conn_on_timeout);
    h2o_socket_write(c->client, &buf, 1, egress_conn_on_answered);
}

/* --- accept --- */

static void on_accept(h2o_socket_t *listener, const char *err)
{
    struct sbx *s = listener->data;
    struct egress_proxy *p = s->p;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct conn *c = xcalloc(1, sizeof(*c));
        c->sbx = s;
        c->start_ms = time_now_ms();
        c->client = h2o_evloop_socket_create(loop_get(), fd, H2O_SOCKET_FLAG_DONT_READ);
        c->client->data = c;
        c->next = s->conns;
        if (c->next)
            c->next->pprev = &c->next;
        c->pprev = &s->conns;
        s->conns = c;
        s->nconns++;
        p->conns++;
        if (s->nconns > p->max_conns) {
            char why[200];
            snprintf(why, sizeof(why),
                     "this sandbox has %zu proxy connections open, the most it may", p->max_conns);
            egress_conn_answer(c, 503, "denied", "busy", why);
            continue;
        }
        loop_timer_start(&c->timer, CONNECT_MS, egress_conn_on_timeout);
        h2o_socket_read_start(c->client, egress_head_read);
    }
}

static void sbx_free(struct sbx *s)
{
    while (s->conns) {
        if (!s->conns->reason)
            s->conns->reason = "closed";
        egress_conn_finish(s->conns);
    }
    egress_throttle_release(&s->up);
    egress_throttle_release(&s->down);
    h2o_socket_read_stop(s->sock);
    h2o_socket_close(s->sock);
    free(s);
}

void egress_proxy_listener(void *ctx, const char *sandbox_id, int fd)
{
    struct egress_proxy *p = ctx;
    for (struct sbx **pp = &p->sandboxes; *pp; pp = &(*pp)->next) {
        struct sbx *s = *pp;
        if (strcmp(s->id, sandbox_id) != 0)
            continue;
        *pp = s->next;
        sbx_free(s);
        break;
    }
    if (fd < 0)
        return;
    struct sbx *s = xcalloc(1, sizeof(*s));
    s->p = p;
    s->fd = fd;
    snprintf(s->id, sizeof(s->id), "%s", sandbox_id);
    egress_throttle_init(&s->up, p->rate);
    egress_throttle_init(&s->down, p->rate);
    s->sock = h2o_evloop_socket_create(loop_get(), fd, H2O_SOCKET_FLAG_DONT_READ);
    s->sock->data = s;
    h2o_socket_read_start(s->sock, on_accept);
    s->next = p->sandboxes;
    p->sandboxes = s;
}

int egress_proxy_new(const struct config *cfg, const struct egress_policy *policy,
                     struct egress_proxy **out, struct err *err)
{
    struct egress_proxy *p = xcalloc(1, sizeof(*p));
    p->policy = policy;
    p->max_conns = cfg->sandbox_egress_connections;
    p->rate = cfg->sandbox_egress_rate;
    *out = p;
    return 0;
}

void egress_proxy_free(struct egress_proxy *p)
{
    if (!p)
        return;
    while (p->sandboxes) {
        struct sbx *s = p->sandboxes;
        p->sandboxes = s->next;
        sbx_free(s);
    }
    free(p);
}

void egress_proxy_set_mode(struct egress_proxy *p, egress_mode_fn fn, void *ctx)
{
    p->mode_fn = fn;
    p->mode_ctx = ctx;
}

void egress_proxy_set_recorder(struct egress_proxy *p, egress_recorder_fn fn, void *ctx)
{
    p->record = fn;
    p->record_ctx = ctx;
}

size_t egress_proxy_connections(const struct egress_proxy *p)
{
    return p->conns;
}

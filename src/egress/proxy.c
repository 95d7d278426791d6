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
 * connection ends in finish(), which records it once. */
#include "egress/egress.h"

#include <errno.h>
#include <h2o.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/config.h"
#include "base/log.h"
#include "base/picohttp.h"
#include "base/loop.h"
#include "base/util.h"

#define HEAD_MAX 8192
#define RELAY_BUF (64 * 1024)
#define RELAY_BUF_BULK (256 * 1024) /* for a direction whose reads fill RELAY_BUF */
#define RELAY_BULK_MAX 16           /* directions of one sandbox with such a buffer at once */
#define CONNECT_MS 10000            /* head and connect, each */
#define IDLE_MS (5 * 60 * 1000)     /* relay without a byte either way */
#define ACCEPT_BATCH 16
#define RATE_READ_MIN (16 * 1024) /* under the cap, wait for this much rather than read less */
/* Waits for the cap are powers of two of milliseconds up to this: h2o's timers are lists of one
 * duration each, so the number of durations must stay small. */
#define RATE_TICK_MAX 128

_Static_assert(RELAY_BUF >= EGRESS_HELLO_MAX, "a tunnel's hello is held in its up buffer");

struct egress_proxy {
    const struct egress_policy *policy;
    egress_mode_fn mode_fn;
    void *mode_ctx;
    egress_recorder_fn record;
    void *record_ctx;
    size_t max_conns;
    uint64_t rate;
    struct sbx *sandboxes;
    size_t conns;
};

struct dir;

/* One direction of a sandbox's bandwidth cap: its bucket, and the connections waiting for it to
 * refill, in the order they came. The timer is armed while any wait. */
struct throttle {
    struct egress_rate bucket;
    struct dir *head, **tail;
    struct loop_timer timer;
    bool armed;
};

/* One sandbox's listener and its connections. */
struct sbx {
    struct sbx *next;
    struct egress_proxy *p;
    h2o_socket_t *sock;
    int fd;
    char id[64];
    struct conn *conns;
    size_t nconns;
    struct throttle up, down; /* sandbox -> upstream, upstream -> sandbox */
    int bulk;                 /* directions with a RELAY_BUF_BULK buffer */
};

enum stage { ST_HEAD, ST_JUDGE, ST_CONNECT, ST_HELLO, ST_REFUSE, ST_RELAY, ST_ANSWER };

/* One direction of the relay: read from `from`, write to `to`. */
struct dir {
    struct conn *c;
    char *buf;
    size_t cap;
    bool full; /* its last read filled the buffer */
    bool writing;
    bool eof;     /* from has ended, and to has been told (shutdown) */
    bool waiting; /* in its throttle's line, not reading */
    bool granted; /* let out of the line: reads before those still in it */
    struct dir *next_waiting;
};

struct conn {
    struct conn *next, **pprev;
    struct sbx *sbx;
    h2o_socket_t *client, *upstream;
    enum stage stage;
    struct loop_timer timer;
    struct egress_lookup *lookup;
    char head[HEAD_MAX];
    size_t head_len;
    size_t head_end; /* where the head ended: what follows is the client's next bytes */
    bool silent;     /* closed before it sent a byte: nothing to record */
    char method[16];
    char host[256];
    uint16_t port;
    bool is_connect;
    enum egress_mode mode; /* judged under */
    bool sniff;            /* the tunnel must show its name in a TLS ClientHello */
    bool alert;            /* refused in the tunnel: a TLS alert goes before the close */
    size_t hello_len;      /* of the tunnel's first bytes, held in up.buf */
    char *forward;         /* absolute form: the rewritten head and what followed it */
    size_t forward_len;
    struct egress_addr addrs[EGRESS_ADDRS_MAX];
    int naddrs, next_addr;
    char addr[EGRESS_ADDR_TEXT_MAX];
    struct dir up, down;
    uint64_t nup, ndown;
    int64_t start_ms;
    const char *verdict, *reason;
    int status;
    char answer[512]; /* the error response being written */
    char why[301];    /* its reason, one line */
};

static void finish(struct conn *c);
static void relay_start(struct conn *c);
static void tunnel_refuse(struct conn *c, enum egress_reason r, const char *why, bool alert);
static void answer(struct conn *c, int status, const char *verdict, const char *reason,
                   const char *why);

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

static void throttle_remove(struct throttle *t, struct dir *d);

static void finish(struct conn *c)
{
    record(c);
    if (c->up.waiting)
        throttle_remove(&c->sbx->up, &c->up);
    if (c->down.waiting)
        throttle_remove(&c->sbx->down, &c->down);
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

static void on_timeout(struct loop_timer *t)
{
    struct conn *c = (struct conn *)((char *)t - offsetof(struct conn, timer));
    if (c->stage == ST_HEAD) {
        c->reason = "timeout";
        finish(c);
    } else if (c->stage == ST_RELAY || c->stage == ST_ANSWER || c->stage == ST_REFUSE) {
        finish(c); /* idle, or the sandbox does not read its answer */
    } else if (c->stage == ST_HELLO) {
        tunnel_refuse(c, EGRESS_DENY_SNI, "the tunnel's TLS ClientHello did not come in time",
                      c->hello_len > 0 && c->up.buf[0] == 0x16);
    } else if (c->stage == ST_CONNECT) {
        answer(c, 504, "allowed", "timeout", "the upstream did not answer in time");
    } else {
        answer(c, 504, "allowed", "timeout", "the name did not resolve in time");
    }
}

static void on_answered(h2o_socket_t *sock, const char *err)
{
    finish(sock->data);
}

/* Answer the sandbox with status and a one-line reason, then close. */
static void answer(struct conn *c, int status, const char *verdict, const char *reason,
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
    loop_timer_start(&c->timer, CONNECT_MS, on_timeout);
    h2o_socket_write(c->client, &buf, 1, on_answered);
}

/* --- connect --- */

static void try_connect(struct conn *c);

static void on_connected(h2o_socket_t *sock, const char *err)
{
    struct conn *c = sock->data;
    if (err) {
        h2o_socket_close(c->upstream);
        c->upstream = NULL;
        try_connect(c);
        return;
    }
    /* each end coalesces its own writes; what the relay holds back waiting for an ACK (Nagle)
     * would only delay a TLS handshake's next flight by the peer's delayed ACK, 40 ms */
    int one = 1;
    setsockopt(h2o_socket_get_fd(c->upstream), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(h2o_socket_get_fd(c->client), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    relay_start(c);
}

static void try_connect(struct conn *c)
{
    while (c->next_addr < c->naddrs) {
        const struct egress_addr *a = &c->addrs[c->next_addr++];
        egress_addr_format(a, c->addr);
        struct sockaddr_storage ss = {0};
        socklen_t len;
        if (egress_addr_is_v4(a)) {
            struct sockaddr_in *s = (struct sockaddr_in *)&ss;
            s->sin_family = AF_INET;
            s->sin_port = htons(c->port);
            memcpy(&s->sin_addr, a->b + 12, 4);
            len = sizeof(*s);
        } else {
            struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
            s->sin6_family = AF_INET6;
            s->sin6_port = htons(c->port);
            memcpy(&s->sin6_addr, a->b, 16);
            len = sizeof(*s);
        }
        c->upstream = h2o_socket_connect(loop_get(), (struct sockaddr *)&ss, len, on_connected);
        if (!c->upstream)
            continue;
        h2o_socket_dont_read(c->upstream, 1);
        c->upstream->data = c;
        return;
    }
    char why[400];
    snprintf(why, sizeof(why), "cannot connect to '%s' port %u", c->host, (unsigned)c->port);
    answer(c, 502, "allowed", "unreachable", why);
}

/* --- judge --- */

/* The sandbox's mode, and into user the user whose share of lookups it draws on. */
static enum egress_mode mode_of(struct conn *c, char user[64])
{
    struct egress_proxy *p = c->sbx->p;
    if (p->mode_fn)
        return p->mode_fn(p->mode_ctx, c->sbx->id, user);
    snprintf(user, 64, "%s", c->sbx->id);
    return egress_policy_mode(p->policy);
}

static void judge_addrs(struct conn *c, const struct egress_addr *addrs, int n)
{
    struct err why = {0};
    enum egress_reason r =
        egress_policy_check_addrs(c->sbx->p->policy, c->host, addrs, n, c->port, &why);
    if (r != EGRESS_OK) {
        if (n > 0)
            egress_addr_format(&addrs[0], c->addr);
        answer(c, 403, "denied", egress_reason_name(r), why.msg);
        return;
    }
    c->naddrs = n < EGRESS_ADDRS_MAX ? n : EGRESS_ADDRS_MAX;
    memcpy(c->addrs, addrs, (size_t)c->naddrs * sizeof(*addrs));
    c->stage = ST_CONNECT;
    loop_timer_start(&c->timer, CONNECT_MS, on_timeout);
    try_connect(c);
}

static void on_resolved(void *ctx, const struct egress_addr *addrs, int n, const struct err *err)
{
    struct conn *c = ctx;
    c->lookup = NULL;
    if (err && err->code == -ETIMEDOUT) {
        answer(c, 504, "allowed", "timeout", err->msg);
        return;
    }
    if (err) {
        answer(c, 502, "denied", egress_reason_name(EGRESS_DENY_UNRESOLVED), err->msg);
        return;
    }
    judge_addrs(c, addrs, n);
}

static void judge(struct conn *c)
{
    c->stage = ST_JUDGE;
    struct err why = {0};
    char user[64] = "";
    c->mode = mode_of(c, user);
    enum egress_reason r =
        egress_policy_check_name(c->sbx->p->policy, c->mode, c->host, c->port, &why);
    if (r != EGRESS_OK) {
        answer(c, 403, "denied", egress_reason_name(r), why.msg);
        return;
    }
    c->sniff = c->is_connect && egress_policy_needs_sni(c->sbx->p->policy, c->mode, c->host);
    struct egress_addr lit;
    if (egress_addr_parse(c->host, &lit) == 0) {
        judge_addrs(c, &lit, 1);
        return;
    }
    struct err err = {0};
    c->lookup = egress_resolve_for(c->host, user, on_resolved, c, &err);
    if (!c->lookup)
        answer(c, 503, "allowed", "busy", err.msg);
}

/* --- head --- */

/* host:port (CONNECT) or the authority of a URL: "name", "name:port", "[v6]", "[v6]:port".
 * Returns 0, or -1 when it is malformed or needs a port it does not have. */
static int parse_authority(const char *s, size_t len, uint16_t def_port, char *host,
                           size_t host_cap, uint16_t *port)
{
    const char *end = s + len, *colon = NULL;
    const char *h = s, *he;
    if (len > 0 && s[0] == '[') {
        const char *rb = memchr(s, ']', len);
        if (!rb)
            return -1;
        h = s + 1;
        he = rb;
        if (rb + 1 < end) {
            if (rb[1] != ':')
                return -1;
            colon = rb + 1;
        }
    } else {
        colon = memrchr(s, ':', len);
        he = colon ? colon : end;
    }
    size_t hl = (size_t)(he - h);
    if (hl == 0 || hl >= host_cap)
        return -1;
    for (const char *q = h; q < he; q++)
        if (*q <= ' ' || *q == '/' || *q == '@' || *q == '\\' || *q == '%' ||
            (unsigned char)*q >= 0x7f)
            return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    for (char *q = host; *q; q++)
        if (*q >= 'A' && *q <= 'Z')
            *q = (char)(*q - 'A' + 'a');
    if (!colon) {
        if (!def_port)
            return -1;
        *port = def_port;
        return 0;
    }
    unsigned long v = 0;
    const char *q = colon + 1;
    if (q == end || end - q > 5)
        return -1;
    for (; q < end; q++) {
        if (*q < '0' || *q > '9')
            return -1;
        v = v * 10 + (unsigned long)(*q - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

static bool header_dropped(const struct phr_header *h)
{
    /* and Host, which is written from the authority judged */
    static const char *const hop[] = {"connection", "keep-alive", "te",
                                      "trailer",    "upgrade",    "host"};
    if (h->name_len >= 6 && strncasecmp(h->name, "proxy-", 6) == 0)
        return true;
    for (size_t i = 0; i < ARRAY_SIZE(hop); i++)
        if (h->name_len == strlen(hop[i]) && strncasecmp(h->name, hop[i], h->name_len) == 0)
            return true;
    return false;
}

static void append(char **buf, size_t *len, size_t cap, const void *data, size_t n)
{
    if (*len + n <= cap) {
        memcpy(*buf + *len, data, n);
        *len += n;
    }
}

/* The head is complete (hlen bytes of c->head): parse it into the target and, for an
 * absolute-form request, the rewritten head. */
static void on_head(struct conn *c, size_t hlen, const char *method, size_t mlen, const char *path,
                    size_t plen, const struct phr_header *hdrs, size_t nh)
{
    snprintf(c->method, sizeof(c->method), "%.*s", (int)(mlen < 15 ? mlen : 15), method);
    c->head_end = hlen;
    if (mlen == 7 && memcmp(method, "CONNECT", 7) == 0) {
        c->is_connect = true;
        if (parse_authority(path, plen, 0, c->host, sizeof(c->host), &c->port) < 0) {
            answer(c, 400, "denied", "bad_request", "CONNECT takes host:port");
            return;
        }
    } else {
        static const char scheme[] = "http://";
        if (plen < sizeof(scheme) - 1 || strncasecmp(path, scheme, sizeof(scheme) - 1) != 0) {
            answer(c, 400, "denied", "bad_request",
                   plen >= 8 && strncasecmp(path, "https://", 8) == 0
                       ? "https goes through CONNECT host:443"
                       : "this is a proxy: ask for an absolute http:// URL, or CONNECT host:port");
            return;
        }
        const char *auth = path + sizeof(scheme) - 1, *pend = path + plen;
        const char *slash = memchr(auth, '/', (size_t)(pend - auth));
        const char *q = memchr(auth, '?', (size_t)(pend - auth));
        const char *aend = slash && (!q || slash < q) ? slash : q ? q : pend;
        if (parse_authority(auth, (size_t)(aend - auth), 80, c->host, sizeof(c->host), &c->port) <
            0) {
            answer(c, 400, "denied", "bad_request", "the URL's host is malformed");
            return;
        }
        /* METHOD origin-form HTTP/1.1, the headers but hop-by-hop and Proxy-* ones, then
         * Host of the authority judged, Connection: close and whatever of the body came with the
         * head */
        char host[sizeof(c->host) + 16];
        bool v6 = strchr(c->host, ':') != NULL;
        int hl =
            snprintf(host, sizeof(host), "Host: %s%s%s", v6 ? "[" : "", c->host, v6 ? "]" : "");
        if (c->port != 80)
            hl += snprintf(host + hl, sizeof(host) - (size_t)hl, ":%u", (unsigned)c->port);
        size_t cap = HEAD_MAX + 64 + (size_t)hl + (c->head_len - hlen), len = 0;
        c->forward = xmalloc(cap);
        append(&c->forward, &len, cap, method, mlen);
        append(&c->forward, &len, cap, " ", 1);
        if (aend == pend || *aend == '?')
            append(&c->forward, &len, cap, "/", 1);
        append(&c->forward, &len, cap, aend, (size_t)(pend - aend));
        append(&c->forward, &len, cap, " HTTP/1.1\r\n", 11);
        /* the name judged, whatever Host the request gave: a front shared by many sites (a CDN)
         * picks the site by Host */
        append(&c->forward, &len, cap, host, (size_t)hl);
        append(&c->forward, &len, cap, "\r\n", 2);
        for (size_t i = 0; i < nh; i++) {
            if (!hdrs[i].name || header_dropped(&hdrs[i]))
                continue;
            append(&c->forward, &len, cap, hdrs[i].name, hdrs[i].name_len);
            append(&c->forward, &len, cap, ": ", 2);
            append(&c->forward, &len, cap, hdrs[i].value, hdrs[i].value_len);
            append(&c->forward, &len, cap, "\r\n", 2);
        }
        append(&c->forward, &len, cap, "Connection: close\r\n\r\n", 21);
        append(&c->forward, &len, cap, c->head + hlen, c->head_len - hlen);
        c->forward_len = len;
        c->head_len = hlen; /* what followed is in forward */
    }
    judge(c);
}

static void on_head_read(h2o_socket_t *sock, const char *err)
{
    struct conn *c = sock->data;
    size_t prev = c->head_len;
    ssize_t n;
    do
        n = read(h2o_socket_get_fd(sock), c->head + c->head_len, sizeof(c->head) - c->head_len);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n <= 0) {
        c->silent = c->head_len == 0;
        c->reason = "bad_request";
        finish(c);
        return;
    }
    c->head_len += (size_t)n;
    const char *method, *path;
    size_t mlen, plen, nh = 64;
    int minor;
    struct phr_header hdrs[64];
    int r = phr_parse_request(c->head, c->head_len, &method, &mlen, &path, &plen, &minor, hdrs, &nh,
                              prev);
    if (r == -2 && c->head_len < sizeof(c->head))
        return;
    h2o_socket_read_stop(sock);
    if (r == -2) {
        answer(c, 431, "denied", "bad_request", "the request head is larger than 8 KiB");
        return;
    }
    if (r < 0) {
        answer(c, 400, "denied", "bad_request", "malformed request");
        return;
    }
    on_head(c, (size_t)r, method, mlen, path, plen, hdrs, nh);
}

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

static void throttle_remove(struct throttle *t, struct dir *d)
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

static void throttle_init(struct throttle *t, uint64_t rate)
{
    egress_rate_init(&t->bucket, rate, (int64_t)h2o_now(loop_get()));
    t->head = NULL;
    t->tail = &t->head;
}

static void throttle_release(struct throttle *t)
{
    loop_timer_stop(&t->timer);
    t->armed = false;
}

static void relay_done_if_both(struct conn *c)
{
    if (c->up.eof && c->down.eof && !c->up.writing && !c->down.writing) {
        c->reason = "ok";
        finish(c);
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
        finish(c);
        return;
    }
    d->writing = false;
    if (c->stage == ST_HELLO)
        return; /* the 200: the upstream is read once the hello has passed */
    if (c->stage == ST_REFUSE) {
        tunnel_alert(c);
        return;
    }
    loop_timer_start(&c->timer, IDLE_MS, on_timeout);
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
        finish(c);
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
    loop_timer_start(&c->timer, CONNECT_MS, on_timeout);
    if (!c->alert) {
        finish(c);
        return;
    }
    h2o_iovec_t b = h2o_iovec_init(alert, sizeof(alert));
    h2o_socket_write(c->client, &b, 1, on_answered);
}

/* Refuse a tunnel already answered 200: nothing reaches the upstream, which is closed. */
static void tunnel_refuse(struct conn *c, enum egress_reason r, const char *why, bool alert)
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
    loop_timer_start(&c->timer, CONNECT_MS, on_timeout);
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
        tunnel_refuse(c, EGRESS_DENY_SNI, "the tunnel's TLS ClientHello is larger than 16 KiB",
                      tls);
        return;
    }
    struct err why = {0};
    enum egress_reason e =
        egress_policy_check_sni(c->sbx->p->policy, c->mode, c->host, r == 0 ? &hello : NULL, &why);
    if (e != EGRESS_OK) {
        tunnel_refuse(c, e, why.msg, tls);
        return;
    }
    c->stage = ST_RELAY;
    loop_timer_start(&c->timer, IDLE_MS, on_timeout);
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
        finish(c);
        return;
    }
    c->hello_len += (size_t)n;
    hello_check(c);
}

static void relay_start(struct conn *c)
{
    c->stage = ST_RELAY;
    c->verdict = "allowed";
    c->reason = "ok";
    c->up.c = c->down.c = c;
    c->up.buf = xmalloc(RELAY_BUF);
    c->down.buf = xmalloc(RELAY_BUF);
    c->up.cap = c->down.cap = RELAY_BUF;
    loop_timer_start(&c->timer, IDLE_MS, on_timeout);
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
            loop_timer_start(&c->timer, CONNECT_MS, on_timeout);
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
            answer(c, 503, "denied", "busy", why);
            continue;
        }
        loop_timer_start(&c->timer, CONNECT_MS, on_timeout);
        h2o_socket_read_start(c->client, on_head_read);
    }
}

static void sbx_free(struct sbx *s)
{
    while (s->conns) {
        if (!s->conns->reason)
            s->conns->reason = "closed";
        finish(s->conns);
    }
    throttle_release(&s->up);
    throttle_release(&s->down);
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
    throttle_init(&s->up, p->rate);
    throttle_init(&s->down, p->rate);
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

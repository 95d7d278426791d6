#pragma once
/* Shared by the files of the sandboxes' egress proxy (proxy.c: the connection's life, accept and
 * the public calls; proxy_head.c: the request head; proxy_judge.c: the judgement and the
 * connect; proxy_relay.c: the hello check and the relay), and by nothing else. A
 * connection is in one stage at a time (enum stage); whichever file ends it calls
 * egress_conn_finish, which records it once and frees it. Everything runs on the loop. */

#include <h2o.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/loop.h"
#include "egress/egress.h"

#define HEAD_MAX 8192
#define RELAY_BUF (64 * 1024)
#define RELAY_BUF_BULK (256 * 1024) /* for a direction whose reads fill RELAY_BUF */
#define RELAY_BULK_MAX 16           /* directions of one sandbox with such a buffer at once */
#define CONNECT_MS 10000            /* head and connect, each */
#define IDLE_MS (5 * 60 * 1000)     /* relay without a byte either way */
#define RATE_READ_MIN (16 * 1024)   /* under the cap, wait for this much rather than read less */
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

/* proxy.c: record the connection (once), close its sockets and free it. */
void egress_conn_finish(struct conn *c);
/* proxy.c: answer the sandbox with status and a one-line reason (why), record verdict and
 * reason, and close once it is written. */
void egress_conn_answer(struct conn *c, int status, const char *verdict, const char *reason,
                        const char *why);
/* proxy.c: the connection's timer: what a stage does when its time is up. */
void egress_conn_on_timeout(struct loop_timer *t);
/* proxy.c: the write callback that ends a connection once its last bytes are written. */
void egress_conn_on_answered(h2o_socket_t *sock, const char *err);

/* proxy_relay.c: the upstream is connected: answer a CONNECT (then check its hello when it must
 * show one) or forward the rewritten head, and relay. */
void egress_relay_start(struct conn *c);
/* proxy_relay.c: refuse a tunnel already answered 200, with a TLS alert when alert is set. */
void egress_tunnel_refuse(struct conn *c, enum egress_reason r, const char *why, bool alert);
/* proxy_relay.c: a sandbox's bucket for one direction, of rate bytes a second (0: no cap), and
 * its release; remove takes d out of t's line. */
void egress_throttle_init(struct throttle *t, uint64_t rate);
void egress_throttle_release(struct throttle *t);
void egress_throttle_remove(struct throttle *t, struct dir *d);

/* proxy_head.c: host:port (CONNECT) or the authority of a URL ("name", "name:port", "[v6]",
 * "[v6]:port", def_port when it has none; 0 for none allowed) into host (lower case, without
 * brackets, NUL-terminated within host_cap) and *port. Pure. Returns 0, or -1 when it is
 * malformed, too long or needs a port it does not have; host and *port are then unspecified. */
int egress_parse_authority(const char *s, size_t len, uint16_t def_port, char *host,
                           size_t host_cap, uint16_t *port);

/* proxy_head.c: the read callback of a new connection's client socket: read the request head,
 * parse it, and hand the target to egress_judge (or answer the sandbox). */
void egress_head_read(h2o_socket_t *sock, const char *err);
/* proxy_judge.c: judge the connection's target under its sandbox's mode: the name, then every
 * address it resolves to; connect when allowed, answer when not. */
void egress_judge(struct conn *c);

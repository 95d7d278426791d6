#pragma once
/* The proxy's HTTP/1.1 client to its upstreams: one exchange at a time on a connection, and a
 * pool of kept connections per upstream that stay registered on the loop while idle (an upstream
 * that closes one is seen at once, and taking one costs no system call). The wire (a response's
 * head, its body's framing, chunked decoding) is pure and fuzzed (tests/fuzz/fuzz_upstream.c);
 * the rest runs on the server's loop. */
#include <h2o.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/loop.h"
#include "base/picohttp.h"

/* --- the wire (upstream_wire.c) --- */

#define UP_HEAD_MAX (64 << 10) /* a response head longer than this is refused */
#define UP_HEADERS_MAX 100

enum up_body {
    UP_BODY_NONE,    /* HEAD, 1xx, 204, 304 */
    UP_BODY_LENGTH,  /* Content-Length bytes */
    UP_BODY_CHUNKED, /* Transfer-Encoding ending in chunked */
    UP_BODY_CLOSE,   /* until the upstream closes */
};

struct up_head {
    int status;
    int minor; /* HTTP/1.minor */
    enum up_body body;
    uint64_t length; /* UP_BODY_LENGTH */
    bool keep;       /* the connection may carry another exchange once the body is read */
    size_t nheaders;
    struct phr_header headers[UP_HEADERS_MAX];
};

/* Parse the response head at buf (len bytes) to a request whose method was HEAD when
 * head_method, framing included (RFC 9112, 6.3): its length (> 0), -2 while incomplete, -1 when
 * it is not a valid head (or longer than UP_HEAD_MAX, or its framing is ambiguous). */
int up_parse_head(const char *buf, size_t len, bool head_method, struct up_head *h);

/* A chunked body's decoder (RFC 9112, 7.1); zeroed to start. */
struct up_chunked {
    uint64_t left;  /* bytes of the current chunk still to come */
    uint32_t count; /* bytes of the current size, extension or trailer line so far */
    uint8_t state;
};

/* Decode the *len bytes at buf in place: the data they hold is moved to the start of buf and
 * its length put in *out. Returns 0 when all *len were taken and more is wanted, 1 when the
 * body (with its trailer) ended, *len then set to the bytes it took (what follows is no part of
 * it), or -1 when the framing is broken. */
int up_chunked_decode(struct up_chunked *c, char *buf, size_t *len, size_t *out);

/* --- the client (upstream.c) --- */

struct upstream_ctx {
    SSL_CTX *ssl_ctx;                    /* for https upstreams */
    h2o_multithread_receiver_t *getaddr; /* the loop's receiver of name lookups */
    uint64_t io_timeout_ms;              /* no progress for this long fails an exchange */
    uint64_t connect_timeout_ms;         /* lookup, connect and TLS handshake together */
    uint64_t idle_timeout_ms;            /* how long a kept connection waits unused */
    int rcvbuf;                          /* SO_RCVBUF of new connections, 0: the kernel's */
};

/* Where requests go, and the connections kept for it. */
struct upstream {
    struct upstream_ctx *ctx;
    char *host; /* for the lookup and for SNI */
    uint16_t port;
    bool tls;
    struct sockaddr_storage addr; /* the host's address when it is a literal one */
    socklen_t addrlen;            /* 0: looked up for each new connection */
    size_t capacity;              /* idle connections kept at most */
    size_t nidle;
    h2o_linklist_t idle; /* struct upconn, most recently used first */
};

struct upstream_call;

struct upstream_call_cb {
    /* The answer's head (informational ones are skipped); whether a body follows is h->body.
     * Return false to end the call here, its connection closed. */
    bool (*head)(struct upstream_call *c, const struct up_head *h);
    /* Bytes of the body as they arrive; end: it is complete (len may be 0), and the call is
     * over. Return false to end the call, its connection closed. */
    bool (*body)(struct upstream_call *c, const char *data, size_t len, bool end);
    /* The call failed and is over: errstr says how; a timeout's says "timeout". */
    void (*failed)(struct upstream_call *c, const char *errstr);
};

/* One exchange: the request, and its state until the answer has ended. */
struct upstream_call {
    const struct upstream_call_cb *cb;
    struct upstream *up;
    struct upconn *conn;
    h2o_hostinfo_getaddr_req_t *lookup;
    h2o_iovec_t *bufs; /* the request, the caller's until the call is over */
    size_t nbufs;
    bool head_method;
    bool reused;    /* on a kept connection: sent again on a new one if it fails before a byte */
    bool paused;    /* its reading stopped by upstream_call_pause */
    bool answering; /* the head has been taken */
    bool *gone;     /* set while a callback runs: told when the call ends inside it */
    enum up_body body;
    uint64_t left; /* UP_BODY_LENGTH */
    bool keep;
    struct up_chunked chunked;
    struct loop_timer timer; /* connect or I/O timeout */
};

/* Set up up for url (http or https) with capacity kept connections: 0, or -1 when url is not
 * one. The host's name is copied. */
int upstream_init(struct upstream *up, struct upstream_ctx *ctx, const h2o_url_t *url,
                  size_t capacity);
/* Close up's kept connections and free what upstream_init made. */
void upstream_dispose(struct upstream *up);
/* Send bufs (the request's head and body, nbufs of them, kept by the caller until the call is
 * over) to up on a kept connection or a new one; cb reports. */
void upstream_call_start(struct upstream_call *c, struct upstream *up, h2o_iovec_t *bufs,
                         size_t nbufs, bool head_method, const struct upstream_call_cb *cb);
/* End the call now, with no callback: its connection, if any, is closed. Nothing if it is
 * over. */
void upstream_call_cancel(struct upstream_call *c);
/* Whether the call is under way. */
static inline bool upstream_call_active(const struct upstream_call *c)
{
    return c->cb != NULL;
}
/* Stop reading the answer until upstream_call_resume (a client that reads slowly); the I/O
 * timeout still runs. */
void upstream_call_pause(struct upstream_call *c);
void upstream_call_resume(struct upstream_call *c);

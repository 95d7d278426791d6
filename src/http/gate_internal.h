#pragma once
/* Shared by the gate's files: gate.c (admission: pools, accept, HTTP/1 heads, TLS hand-off,
 * lingering) and gate_h2.c (following an unauthenticated HTTP/2 connection's frames) and
 * gate_peers.c (the per-address counts). Main loop only, as all of the gate. */

#include "http/http_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/time.h>

#define REFUSAL_REASONS 12

struct http_pool {
    struct http_server *srv;
    size_t conns, max_conns;
    size_t bytes, max_bytes; /* charged by connections the gate still watches */
    unsigned refs;           /* the listener's, and one per connection */
    /* refusals are logged at most once a second per pool and reason (a few constant strings) */
    struct refusals {
        const char *why;
        int64_t warned_ms;
        unsigned long count; /* since the last warning */
    } refusals[REFUSAL_REASONS];
    char sandbox[64]; /* "" for the main listener */
    /* Main listener only: connections that have not sent a whole first request head (their TLS
     * handshake included), oldest first, of which a newcomer to a full listener closes one; and
     * the unauthenticated connections of each address. */
    h2o_linklist_t waiting;
    struct http_peers *peers;
};

struct h2_watch;

struct http_conn {
    struct http_pool *pool;
    h2o_socket_t *sock;
    h2o_accept_ctx_t *actx;
    struct timeval connected_at;
    SSL_CTX *ssl_ctx;              /* TLS: a reference to the context it is accepted with */
    h2o_timeout_entry_t handshake; /* TLS: linked until the handshake is done */
    struct h2_watch *h2;           /* HTTP/2 until authenticated (gate_h2.c) */
    h2o_socket_cb h2o_read;        /* h2o's read callback, called after the gate's */
    size_t charged;                /* bytes charged to the pool */
    size_t allowed;                /* input the request may fill, once its head is known */
    size_t scanned;                /* input already searched for the end of the head */
    size_t drain_left; /* after a refusal: bytes still read and dropped before closing */
    bool head_done;
    bool authenticated; /* its first request carried a valid credential (main listener) */
    bool gated;
    bool draining; /* refused: h2o sees nothing more, the client's body is read and dropped */
    int linger_fd; /* another descriptor of the socket, kept open past h2o's close; or -1 */
    h2o_linklist_t waiting;            /* in pool->waiting until the first head is whole */
    h2o_linklist_t peer_waiting;       /* in its address's list of those, as long */
    h2o_timeout_entry_t head_deadline; /* linked as long as it is waiting */
    struct http_peer *peer;            /* its address's count while it is unauthenticated */
};

/* gate_peers.c: unauthenticated connections counted per client address (main loop only), for
 * the gate's per-address cap; not to be confused with peer.c, which finds the client's address.
 */
struct sockaddr;
struct http_peer_key {
    uint8_t b[16];
};
/* The key an address counts under: an IPv4 address (also IPv4-mapped IPv6) alone, an IPv6
 * address by its /64. Returns 0, or -EAFNOSUPPORT for another family (key zeroed). */
int http_peer_key(const struct sockaddr *sa, struct http_peer_key *key);
struct http_peer;
struct http_peers;
/* A table sized for about conns connections; http_peers_free accepts NULL. */
struct http_peers *http_peers_new(size_t conns);
void http_peers_free(struct http_peers *t);
/* Count one more connection of key, unless key already has max: returns its record (held until
 * http_peers_release), or NULL when it is at max. */
struct http_peer *http_peers_hold(struct http_peers *t, const struct http_peer_key *key,
                                  size_t max);
/* A list the caller keeps in the record (empty when it is made); it must be empty again when
 * the last hold is released. */
h2o_linklist_t *http_peer_waiting(struct http_peer *peer);
void http_peers_release(struct http_peers *t, struct http_peer *peer);
/* How many addresses have a connection counted (for tests). */
size_t http_peers_count(const struct http_peers *t);
/* gate.c */
/* Charge c n bytes in all (not n more): false, charging nothing, when the pool's budget would
 * be exceeded. */
bool gate_charge(struct http_conn *c, size_t n);
/* c has sent a whole first request head (on HTTP/2, a whole header block), or has been answered
 * by the gate: the head deadline is over, and a newcomer does not close it. */
void gate_head_arrived(struct http_conn *c);
/* c's user is known: the gate charges it no more. */
void gate_authenticate(struct http_conn *c);
/* Count a refusal of p for why (a constant string), logged at most once a second per reason. */
void gate_note_refusal(struct http_pool *p, const char *why);
/* Whether the Authorization and X-API-Key values (either may be empty) carry a credential the
 * listener accepts: a user's bearer token or a proxy token on the main listener, a proxy token
 * of this sandbox on a sandbox's listener (proxy tokens by the head check the wiring set,
 * http_server_set_head_check). */
bool gate_credential_ok(struct http_pool *p, h2o_iovec_t auth, h2o_iovec_t key);
/* Put the gate in front of h2o's read callback. */
void gate_hook(struct http_conn *c);

/* gate_h2.c */
/* Follow c, an HTTP/2 connection just handed to h2o, until it is authenticated. */
void gate_h2_watch(struct http_conn *c);
/* Stop following c (nothing when it is not followed). */
void gate_h2_unwatch(struct http_conn *c);
/* On every read of a followed connection: follow what arrived. NULL to go on (c->h2 is NULL
 * once the connection is authenticated), or an error for h2o to close it with, having dropped
 * what h2o has not parsed yet. */
const char *gate_h2_check(struct http_conn *c);

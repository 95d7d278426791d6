#pragma once
/* This server as one node of several sharing a store (docs/SCALING.md): its row in the store,
 * kept alive by a heartbeat; the sweep that marks nodes whose heartbeat stopped lost; where a
 * user's sandbox lives; and the signatures of the internal channel a node forwards a call over
 * to the node that holds the sandbox. With SQLite there is one node, and nothing is forwarded.
 * Main loop thread only. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "store/store.h"

struct cluster_config {
    const char *node_id;  /* NODE_ID */
    const char *node_url; /* NODE_URL: where the other nodes reach this one */
    const char *secret;   /* CLUSTER_SECRET; NULL: this node neither forwards nor is forwarded to */
    uint64_t heartbeat_ms, lost_ms;
    int64_t max_sandboxes, max_runs;
    size_t max_nonces; /* CLUSTER_NONCE_CACHE: struct cluster_nonces */
};

struct cluster;
struct config;

/* Fill cc from the configuration table (NODE_HEARTBEAT_SECONDS, NODE_LOST_SECONDS,
 * CLUSTER_NONCE_CACHE, NODE_URL, CLUSTER_SECRET); node_url is NULL when NODE_URL is unset (the
 * caller derives it from the listen address), node_id and the capacities are the caller's.
 * Strings point into cfg, which must outlive cc. Returns 0, or -EINVAL with err naming the key
 * (cluster/config.c). */
int cluster_config_load(const struct config *cfg, struct cluster_config *cc, struct err *err);

/* Record this node in the store as up, and keep it so. On success *ret owns the handle. */
int cluster_new(const struct cluster_config *cfg, struct store *st, struct cluster **ret,
                struct err *err);
/* Record the node as stopped (a clean shutdown) and free. NULL is fine. */
void cluster_free(struct cluster *c);

const char *cluster_node_id(const struct cluster *c);

/* Called with the id of each node this one marks lost, after the store says so. */
void cluster_on_lost(struct cluster *c, void (*fn)(void *ctx, const char *node_id), void *ctx);
/* Called with the id of each session this node takes over from a node silent past the lost
 * timeout, after the store says so: a call reached it before any node marked that node lost,
 * whose runs the sweep then no longer finds by their session. */
void cluster_on_taken(struct cluster *c, void (*fn)(void *ctx, const char *session_id), void *ctx);
/* Called when this node finds that another had marked it lost (it could not reach the store
 * for a while): what was taken over meanwhile is no longer its own. */
void cluster_on_back(struct cluster *c, void (*fn)(void *ctx), void *ctx);

/* Where a call on user_id's own sandbox (or session_id's, when not NULL) is served: 0 here (the
 * sandbox is this node's, there is none yet, or it was on a lost node and is this node's now, to
 * start afresh), 1 on the node whose URL goes to url (and id to node), or < 0 (-EHOSTUNREACH when
 * that node holds it and this one has no CLUSTER_SECRET to forward with). */
int cluster_route_sandbox(struct cluster *c, const char *user_id, const char *session_id,
                          char url[256], char node[64], struct err *err);

/* The same for run session session_id of user_id's: its runs and its sandbox live on one
 * node. 0 also when there is no such session (the call is answered here, as not found), and
 * when no node has claimed it yet (its runs wait in the store). A sandbox call on such a
 * session (cluster_route_sandbox) claims it for this node. */
int cluster_route_session(struct cluster *c, const char *user_id, const char *session_id,
                          char url[256], char node[64], struct err *err);

/* The headers of a forwarded call: who it is for, signed with the cluster's key over the time,
 * a random nonce, the sending node, the user, the scopes, the method, the path, the body's length
 * and its digest. A receiving node accepts each nonce once (struct cluster_nonces), so a captured
 * call cannot be sent again. All nodes must run the same version: the signed text changes with
 * it. */
#define CLUSTER_SIGNATURE_HEADER "x-smcp-signature"
/* How far a signature's time may be from the receiver's clock, either way. */
#define CLUSTER_SIGNATURE_SKEW_S 60
struct cluster_claims {
    char node[64];
    char user_id[64];
    char user_name[128];
    unsigned scopes;
    int64_t time; /* seconds */
};
/* The key calls are signed with, derived from CLUSTER_SECRET (have: false without one). */
struct cluster_key {
    bool have;
    unsigned char key[32];
};
void cluster_key_init(struct cluster_key *k, const char *secret);
const struct cluster_key *cluster_key(const struct cluster *c);

/* The nonces of the signatures and head proofs a node has accepted, each kept until twice
 * CLUSTER_SIGNATURE_SKEW_S after its signature's time (a window longer than the signature is
 * good, against a clock set back), at most max at once. Full, it refuses new nonces rather than
 * forget old ones (forgetting would let those be replayed); only a holder of the cluster's key can
 * fill it. Memory grows with use, to about 32 bytes a nonce. One a node; main loop thread only.
 */
struct cluster_nonces;
struct cluster_nonces *cluster_nonces_new(size_t max);
void cluster_nonces_free(struct cluster_nonces *s);
/* This node's set (NULL when it has no CLUSTER_SECRET). */
struct cluster_nonces *cluster_nonces(const struct cluster *c);

/* "t=<time>,r=<nonce>,n=<node>,u=<user id>,m=<user name>,s=<scopes>,v1=<hex HMAC>" into out,
 * with a fresh random nonce: 0, or -EINVAL (no key; a field holding ',' or a line break),
 * -ENOSPC. */
int cluster_sign(const struct cluster_key *k, const struct cluster_claims *cl, const char *method,
                 const char *path, const void *body, size_t len, char *out, size_t cap);
/* Check a signature header for method, path and body at now_s, and spend its nonce in seen:
 * 0 with *cl filled; -EACCES (no key here, a malformed header, a bad signature), -ETIMEDOUT
 * (more than CLUSTER_SIGNATURE_SKEW_S old or ahead), -EALREADY (its nonce was accepted before:
 * a replay) or -EBUSY (seen is full), with err saying which. */
int cluster_verify(const struct cluster_key *k, struct cluster_nonces *seen, const char *header,
                   size_t hlen, const char *method, const char *path, const void *body, size_t len,
                   int64_t now_s, struct cluster_claims *cl, struct err *err);

/* x-smcp-node: "t=<time>,r=<nonce>,n=<node>,v1=<hex HMAC>" over the time, a nonce of its own,
 * the node, the method, the path and the body's length, so that the admission gate can let one
 * forwarded call's body (which may be larger than what it reads for anyone before a credential)
 * in before the body is there to check; cluster_verify checks the whole call once it is. The
 * proof admits that one request: its nonce is spent, and it names no user. */
#define CLUSTER_NODE_HEADER "x-smcp-node"
int cluster_head_sign(const struct cluster_key *k, const char *node, const char *method,
                      const char *path, size_t len, int64_t now_s, char *out, size_t cap);
/* Check a head proof for a request's method and path (as they came, not NUL-terminated) and its
 * announced body length, and spend its nonce in seen: 0, or -EACCES, -ETIMEDOUT, -EALREADY,
 * -EBUSY as cluster_verify. */
int cluster_head_check(const struct cluster_key *k, struct cluster_nonces *seen, const char *header,
                       size_t hlen, const char *method, size_t mlen, const char *path, size_t plen,
                       size_t len, int64_t now_s);

#pragma once

#include <h2o.h>
#include <stdbool.h>

#include "base/config.h"
#include "http/http.h"

/* Whether a request head's X-API-Key or Authorization value (either may be empty) carries a
 * credential of a module above the server (the proxy's tokens) valid on the listener of
 * listener_sandbox ("" for the main listener). Asked by the gate before a body is read. */
typedef bool (*http_head_check_fn)(void *ctx, h2o_iovec_t x_api_key, h2o_iovec_t authorization,
                                   const char *listener_sandbox);

struct http_server {
    const struct config *cfg;
    struct store *store;
    http_head_check_fn head_check; /* http_server_set_head_check; NULL: none */
    void *head_check_ctx;
    h2o_globalconf_t globalconf;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    h2o_accept_ctx_t sandbox_accept_ctx; /* the proxy listeners inside sandboxes */
    h2o_hostconf_t *main_hosts[2];
    h2o_hostconf_t *sandbox_hosts[2];
    h2o_evloop_t *loop;
    h2o_socket_t *listener;
    struct http_pool *pool; /* the main listener's connections */
    h2o_socket_t *signals;
    SSL_CTX *ssl_ctx; /* the main listener's TLS (tls.c), swapped on SIGHUP; NULL: plain HTTP */
    struct cluster *cluster; /* NULL: one node, nothing forwarded */
    http_health_fn health;   /* http_server_set_health, NULL: none */
    void *health_ctx;
    char address[128];
    bool listen_loopback;
    size_t preauth_per_address; /* PREAUTH_ADDRESS_CONNECTIONS in effect; 0: no cap */
    bool stopping;
    bool started; /* http_server_run has added the server's own routes and made the context */
    struct http_stop_hook *stop_hooks; /* http_server_on_stop, run in the order added */
    int inflight;
    unsigned long long next_request;
    /* http_allow_signed_body: POSTs to signed_path whose head carries signed_header may bring
     * a body of up to signed_max before any credential is checked ("" path: none) */
    char signed_path[64];
    char signed_header[32];
    size_t signed_max;
};

/* Per-route handler with a metrics label, and the context its module registered it with (h2o's
 * handlers carry their configuration the same way). */
struct http_route {
    h2o_handler_t super;
    struct http_server *srv;
    const char *label;
    void *ctx;
};

/* Let the gate accept the credentials fn (with ctx, borrowed for the server's life) finds valid,
 * besides a user's bearer token. One hook; a later call replaces it. Before http_server_run, loop
 * thread. */
void http_server_set_head_check(struct http_server *srv, http_head_check_fn fn, void *ctx);

/* The host configuration of the main listener, for a module's filters (src/mcp/mcp_endpoint.c). */
h2o_hostconf_t *http_server_main_host(struct http_server *srv);

/* Request bookkeeping: id for logs, in-flight count and metrics at dispose. */
const char *http_request_track(struct http_route *route, h2o_req_t *req);

/* Find a request header by token; returns NULL or a NUL-terminated copy in the request pool. */
const char *http_header(h2o_req_t *req, const h2o_token_t *token);
const char *http_header_str(h2o_req_t *req, const char *name);

/* Responses. Bodies are copied. */
void http_respond(h2o_req_t *req, int status, const char *content_type, const char *body,
                  size_t len);
/* {"error": message, "code": code} */
void http_respond_error(h2o_req_t *req, int status, const char *code, const char *message);
void http_add_header(h2o_req_t *req, const h2o_token_t *token, const char *value);
void http_add_header_str(h2o_req_t *req, const char *name, const char *value);
const char *http_status_reason(int status);

/* Origin and Host checks against cross-site and DNS-rebinding requests. Returns true if the
 * request may proceed; otherwise has answered 403. */
bool http_check_origin(struct http_server *srv, h2o_req_t *req);

/* Bearer-token authentication: an API token, or an OAuth access token issued for this server's
 * /mcp. Returns true and fills user and scopes (SCOPE_* bits; every one for an API token)
 * on success; otherwise has answered 401 with WWW-Authenticate naming the resource metadata. */
struct store_user;
bool http_authenticate(struct http_server *srv, h2o_req_t *req, struct store_user *user,
                       unsigned *scopes);

/* Answer 403 insufficient_scope for a token that lacks needed (SCOPE_* bits). */
void http_insufficient_scope(struct http_server *srv, h2o_req_t *req, unsigned needed);

/* A streaming response body (SSE). The stream lives in the request pool; on_close runs once if
 * the client goes away before http_stream_end(). After end or close the caller drops it. */
struct http_stream;
struct http_stream *http_stream_start(h2o_req_t *req, int status, const char *content_type,
                                      void (*on_close)(void *ctx), void *ctx);
void http_stream_write(struct http_stream *s, const void *data, size_t len);
void http_stream_end(struct http_stream *s);

/* Accept what is waiting on listener (a bounded batch), calling fn with each new socket and
 * the listener's data. */
void http_accept_each(h2o_socket_t *listener, const char *err,
                      void (*fn)(h2o_socket_t *sock, void *ctx));

/* gate.c: admission of connections and of their first request's body (main loop only). A pool
 * holds one listener's connections: the main listener's (sandbox NULL; caps MAX_CONNECTIONS and
 * PREAUTH_TOTAL_BYTES) or one sandbox's (SANDBOX_CONNECTIONS, SANDBOX_REQUEST_BYTES). The
 * listener owns the first reference; each connection holds one until it closes. */
struct http_pool;
struct http_pool *http_pool_new(struct http_server *srv, const char *sandbox);
void http_pool_release(struct http_pool *pool);
/* Take a just-accepted socket into pool and hand it to h2o through actx. On the main listener:
 * close it when its address holds PREAUTH_ADDRESS_CONNECTIONS unauthenticated connections;
 * when the pool is at its cap, close a connection that has sent no request head yet to make
 * room (its address's oldest, else the oldest), or, when there is none, the new socket. A
 * sandbox's pool closes the new socket at its cap. */
void http_gate_accept(struct http_pool *pool, h2o_accept_ctx_t *actx, h2o_socket_t *sock);
/* Whether req's connection may carry another request: only when its first request carried a
 * valid credential on the main listener. Others must be answered with Connection: close. */
bool http_conn_may_persist(h2o_req_t *req);
/* A handler found req's credential valid: on HTTP/2, its connection is no longer charged by
 * the gate (on HTTP/1 the gate has judged the head already). */
void http_conn_authenticated(h2o_req_t *req);
/* req is answered before its body was read (413), and its connection closes after the answer:
 * keep reading and dropping what the client still sends, for a while (at most LINGER_SECONDS,
 * and the larger of 16 MiB and 4 x MAX_REQUEST_BYTES), so that closing the socket with unread
 * data does not reset the connection before the client has read the answer. HTTP/1 only. */
void http_conn_linger(h2o_req_t *req);
/* After each turn of the event loop: h2o starts reading an HTTP/2 connection again with its
 * own callback after it stopped to let its output drain; put the gate back in front. */
void http_gate_after_loop(void);
/* Connections open, and bytes charged to the requests the gate watches (those not authenticated
 * by their head, and every request on a sandbox's listener), over every listener. */
void http_gate_counts(size_t *conns, size_t *gated_bytes);

/* The default cap of unauthenticated connections per address of a listener that is not on
 * loopback (PREAUTH_ADDRESS_CONNECTIONS; gate_peers.c counts them). */
#define HTTP_PREAUTH_PER_ADDRESS 128

/* peer.c: the client a request came from, when a proxy in TRUSTED_PROXIES (http/peer.h) stands
 * between. Every per-address limit keys on this, never on the TCP peer alone.
 * Parse TRUSTED_PROXIES (list may be NULL: trust none), once at start before any request:
 * 0, or -EINVAL with err naming the bad entry. */
int http_peer_configure(const char *list, struct err *err);
/* Entries of TRUSTED_PROXIES (0: forwarding headers are never read). */
size_t http_peer_trusted_count(void);
/* Whether sa (a socket's peer) is a trusted proxy, for code that sees only a socket. */
bool http_peer_trusted(const struct sockaddr *sa);
/* req's client into out (port 0 when it came from X-Forwarded-For): its connection's peer,
 * unless that is a trusted proxy, then as http_trust_client walks X-Forwarded-For. Only
 * requests from trusted proxies pay for the walk; nothing is allocated. false (out zeroed)
 * when the connection has no peer address. Loop thread only. */
bool http_client_addr(h2o_req_t *req, struct sockaddr_storage *out);

/* tls.c: an OpenSSL server context for the PEM files cert (a chain) and key: TLS 1.2 or later,
 * ALPN h2 and http/1.1. Returns 0 and the context (the caller's reference), or a negative errno
 * with err naming the file and the problem. */
int http_tls_context_new(const char *cert, const char *key, SSL_CTX **ret, struct err *err);
/* subject="..." not_after="..." of ctx's certificate, for the log. */
void http_tls_describe(SSL_CTX *ctx, char *out, size_t cap);
/* Whether the client of a TLS socket whose handshake is done chose HTTP/2 by ALPN. */
bool http_tls_selected_h2(h2o_socket_t *sock);

/* The sandbox a request came through (its proxy listener), or NULL for the main listener. */
const char *http_sandbox_of(h2o_req_t *req);

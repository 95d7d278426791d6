#pragma once
/* The HTTP server: one h2o event loop on the calling thread serving HTTP/1.1, or HTTPS with
 * HTTP/2 and HTTP/1.1 by ALPN when cfg names a certificate (tls.c, gate.c). It serves /healthz
 * and /metrics itself; the modules above it (the authorization server, the MCP endpoint, the run
 * pages, the proxy) register their routes with a context of their own, and it names none of them.
 */

#include <jansson.h>

#include "base/config.h"
#include "base/err.h"

struct http_server;
struct store;

/* Bind the listener named by cfg->listen. The server borrows cfg and st for its whole life.
 * Nothing is accepted until http_server_run. */
int http_server_new(const struct config *cfg, struct store *st, struct http_server **ret,
                    struct err *err);

/* A route's handler: h2o's, with the route's context in ((struct http_route *)self)->ctx. */
struct st_h2o_handler_t;
struct st_h2o_req_t;
typedef int (*http_handler_fn)(struct st_h2o_handler_t *self, struct st_h2o_req_t *req);
/* Serve the path prefix path on the main listener with fn, counted in the metrics under label
 * (kept, not copied); ctx (borrowed, may be NULL) travels with the route. Call between
 * http_server_new and http_server_run, on the loop thread; a path registered first wins over a
 * later one it is a prefix of, and the server's own "/" comes last. */
void http_add_route(struct http_server *srv, const char *path, const char *label,
                    http_handler_fn fn, void *ctx);
/* As http_add_route, on the sandboxes' in-namespace listeners (http_sandbox_listener) instead of
 * the main one: what a sandbox may reach of this server. */
void http_add_sandbox_route(struct http_server *srv, const char *path, const char *label,
                            http_handler_fn fn, void *ctx);

/* Let POSTs to exactly path on the main listener whose head carries header (lowercase) bring a
 * body of up to max bytes (at most MAX_REQUEST_BYTES) without a credential: a sender that
 * signs its body (GitHub's webhooks) rather than holding a token. The body still counts against
 * PREAUTH_TOTAL_BYTES while it is read, so strangers together hold at most that; the route
 * checks the signature. One such path; before http_server_run. */
void http_allow_signed_body(struct http_server *srv, const char *path, const char *header,
                            size_t max);

/* Call fn(ctx) when the server stops accepting (SIGTERM, SIGINT) and again when it is freed:
 * for a module's own listeners. fn must cope with being called twice. Hooks run in the order
 * added; loop thread only. */
void http_server_on_stop(struct http_server *srv, void (*fn)(void *ctx), void *ctx);

/* Serve the sandbox routes (http_add_sandbox_route) on a sandbox's in-namespace listener (fd
 * owned from now on); fd -1 closes the sandbox's listener. Matches sandbox_listener_fn, so it can
 * be the sandbox manager's hook. */
void http_sandbox_listener(struct http_server *srv, const char *sandbox_id, int fd);
/* As http_sandbox_listener, for the sandbox's Unix socket (SANDBOX_SERVER_SOCKET), served the
 * same, and counted in the same pool; fd -1 closes it. */
void http_sandbox_socket(struct http_server *srv, const char *sandbox_id, int fd);

/* This node as one of several (borrowed; NULL: nothing is forwarded): container_* calls on a
 * sandbox another node holds go there, and POST /internal/mcp takes those nodes' calls. */
struct cluster;
void http_server_set_cluster(struct http_server *srv, struct cluster *c);

/* What /healthz adds beside the database: fn adds its fields to health and returns whether the
 * server is degraded by them (the answer stays 200: the server still serves). One hook. */
typedef bool (*http_health_fn)(void *ctx, json_t *health);
void http_server_set_health(struct http_server *srv, http_health_fn fn, void *ctx);

/* The address actually bound ("127.0.0.1:41234"), useful with port 0. */
const char *http_server_address(const struct http_server *srv);

/* Add the server's own routes after the registered ones, then run the loop until SIGTERM or SIGINT,
 * then stop accepting and let in-flight requests finish for the configured grace period; SIGHUP
 * reads the TLS certificate and key again. Returns 0. */
int http_server_run(struct http_server *srv);

void http_server_free(struct http_server *srv);

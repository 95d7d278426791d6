#pragma once
/* The HTTP server: one h2o event loop on the calling thread serving HTTP/1.1, or HTTPS with
 * HTTP/2 and HTTP/1.1 by ALPN when cfg names a certificate (tls.c, gate.c); routes /mcp, /sse,
 * /healthz, /metrics, the run pages and /proxy/. */

#include "base/config.h"
#include "base/err.h"
#include "base/seal.h"

struct http_server;
struct store;
struct mcp_server;

/* Bind the listener named by cfg->listen and prepare routes. The server borrows cfg, st and mcp
 * for its whole life. */
int http_server_new(const struct config *cfg, struct store *st, struct mcp_server *mcp,
                    struct http_server **ret, struct err *err);

/* Serve /proxy/ through p (borrowed; NULL answers 503). */
struct proxy;
void http_server_set_proxy(struct http_server *srv, struct proxy *p);
/* The run engine behind the run and session pages (NULL: they answer 503). */
struct runs;
void http_server_set_runs(struct http_server *srv, struct runs *runs);
/* The key users' credentials are sealed with (copied; see store_credential_key_load), with
 * which the account page sets a user's own. Until it is set, the page cannot store one. */
void http_server_set_credential_key(struct http_server *srv,
                                    const unsigned char key[SEAL_KEY_BYTES]);

/* Serve /proxy/ on a sandbox's in-namespace listener (fd owned from now on); fd -1 closes the
 * sandbox's listener. Matches sandbox_listener_fn, so it can be the sandbox manager's hook. */
void http_sandbox_listener(struct http_server *srv, const char *sandbox_id, int fd);

/* This node as one of several (borrowed; NULL: nothing is forwarded): container_* calls on a
 * sandbox another node holds go there, and POST /internal/mcp takes those nodes' calls. */
struct cluster;
void http_server_set_cluster(struct http_server *srv, struct cluster *c);

/* The address actually bound ("127.0.0.1:41234"), useful with port 0. */
const char *http_server_address(const struct http_server *srv);

/* Run the loop until SIGTERM or SIGINT, then stop accepting and let in-flight requests finish
 * for the configured grace period; SIGHUP reads the TLS certificate and key again. Returns 0. */
int http_server_run(struct http_server *srv);

void http_server_free(struct http_server *srv);

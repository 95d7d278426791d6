#pragma once
/* The MCP endpoint (mcp_endpoint.c): POST /mcp (Streamable HTTP), POST /internal/mcp (calls
 * another node forwarded), /sse (moved: points to /mcp), the JSON-RPC answer to a body over
 * MAX_REQUEST_BYTES, and POST /agent/mcp in sandboxes (the coding agents' own tools). */

#include <stdbool.h>

struct http_server;
struct mcp_server;

/* Serve MCP on http, handing each accepted request to mcp (borrowed for http's life). Before
 * http_server_run, loop thread. */
void mcp_endpoint_register(struct http_server *http, struct mcp_server *mcp);

/* Who an agent's request in a sandbox is: true with its user and the run its token acts for
 * (acting_for "" when none of the sandbox's runs is working now), or false when the request was
 * answered (refused) here. */
struct st_h2o_req_t;
typedef bool (*mcp_agent_auth_fn)(void *ctx, struct st_h2o_req_t *req, const char *sandbox_id,
                                  char user_id[64], char acting_for[64]);
/* Serve mcp (the tools the server offers coding agents) at POST /agent/mcp on the sandboxes'
 * listeners and sockets, each request authenticated by auth. One such server; before
 * http_server_run. */
void mcp_endpoint_register_agent(struct http_server *http, struct mcp_server *mcp,
                                 mcp_agent_auth_fn auth, void *auth_ctx);

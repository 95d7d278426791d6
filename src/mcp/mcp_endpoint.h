#pragma once
/* The MCP endpoint (mcp_endpoint.c): POST /mcp (Streamable HTTP), POST /internal/mcp (calls
 * another node forwarded), /sse (moved: points to /mcp), and the JSON-RPC answer to a body over
 * MAX_REQUEST_BYTES. */

struct http_server;
struct mcp_server;

/* Serve MCP on http, handing each accepted request to mcp (borrowed for http's life). Before
 * http_server_run, loop thread. */
void mcp_endpoint_register(struct http_server *http, struct mcp_server *mcp);

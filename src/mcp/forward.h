#pragma once
/* Calls the MCP endpoint hands to another node, and the calls other nodes hand to this one
 * (forward.c). Loop thread only. */

#include <h2o.h>
#include <stdbool.h>

struct http_server;
struct store_user;
struct mcp_request_info;

/* A container_* call on a sandbox that lives on another node is forwarded there
 * (true: req is answered, by the relay or with an error); false: it is served here. */
bool mcp_forward_call(struct http_server *srv, h2o_req_t *req, const struct store_user *user,
                      unsigned scopes, const struct mcp_request_info *info);
/* The user and scopes of a call another node forwarded to POST /internal/mcp, from its signed
 * header: true, or false having answered 401. */
bool mcp_forwarded_auth(struct http_server *srv, h2o_req_t *req, struct store_user *user,
                        unsigned *scopes);

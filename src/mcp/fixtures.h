#pragma once
/* The tools, resources and prompts that the official MCP conformance suite expects. Registered
 * only with `serve --conformance-fixtures`, never in production. */

struct mcp_server;

void mcp_fixtures_register(struct mcp_server *srv);

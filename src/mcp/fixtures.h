#pragma once
/* The tools, resources and prompts that the official MCP conformance suite expects. Registered
 * only with `serve --conformance-fixtures`, never in production. */

struct mcp_server;

void mcp_fixtures_register(struct mcp_server *srv);

/* fixtures_mrtr.c: the input-required result (SEP-2322) tools and prompt; after
 * mcp_fixtures_register, whose prompts/get it extends. */
void mcp_fixtures_mrtr_register(struct mcp_server *srv);

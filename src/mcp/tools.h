#pragma once
/* Registration of each tool family (one file per family in src/mcp/tools_*.c). */

struct mcp_server;

/* server_info */
void tools_server_register(struct mcp_server *srv);

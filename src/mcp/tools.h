#pragma once
/* Registration of each tool family (one file per family in src/mcp/tools_*.c). */

struct mcp_server;

/* server_info */
void tools_server_register(struct mcp_server *srv);

struct sandbox_manager;
struct sandbox_config;

/* container_* on mgr; when mgr is NULL the tools are listed but answer with `unavailable`. */
void tools_container_register(struct mcp_server *srv, struct sandbox_manager *mgr,
                              const char *unavailable, const struct sandbox_config *cfg);

struct runs;
struct store;

/* run_task, get_result, list_runs, cancel_run (and the opencode_* aliases) on runs; when runs is
 * NULL they are listed but answer with `unavailable`. */
void tools_runs_register(struct mcp_server *srv, struct runs *runs, struct store *st,
                         const char *unavailable);

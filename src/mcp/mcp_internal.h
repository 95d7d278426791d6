#pragma once
/* Shared between the files of the protocol layer (mcp.c, tasks.c); not for tools. */

#include "mcp/mcp.h"

#define MCP_META_RELATED_TASK "io.modelcontextprotocol/related-task"
#define MCP_TASKS_EXTENSION "io.modelcontextprotocol/tasks"

/* The task source that owns task_id (by its prefix), or NULL when none does; *ctx is set to its
 * context. */
const struct mcp_task_source *mcp_server_task_source(const struct mcp_server *srv,
                                                     const char *task_id, void **ctx);
/* The i-th source in the order they were added, or NULL past the last. */
const struct mcp_task_source *mcp_server_task_source_at(const struct mcp_server *srv, size_t i,
                                                        void **ctx);

/* Whether the call speaks the stateless revision. */
bool mcp_call_modern(const struct mcp_call *call);

/* The call only waits to read: a client that goes away cancels it under every revision (older
 * ones otherwise let a call run on with its answer dropped). */
void mcp_call_cancel_on_close(struct mcp_call *call);

/* tasks.c: register tasks/get, tasks/result, tasks/list, tasks/cancel and tasks/update on srv. */
void mcp_tasks_register_methods(struct mcp_server *srv);

/* tasks.c: the task the call asked for, if the `task` parameter (2025-11-25 revisions) or the
 * extension (stateless revision) asks for one; the tool's support is checked by the caller.
 * Returns 0, or a JSON-RPC error code with msg. */
int mcp_tasks_check_request(const struct mcp_call *call, const json_t *params, bool *requested,
                            char *msg, size_t msglen);

#pragma once
/* Shared by the files of the run tools (tools_runs.c: run_task, get_result, list_runs,
 * cancel_run and their registration; tools_runs_tasks.c: the runs as MCP tasks), and by nothing
 * else. Everything runs on the loop. */

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"
#include "mcp/mcp.h"
#include "mcp/tools.h"
#include "store/store.h"

struct tools_runs {
    struct runs *runs; /* NULL when runs are unavailable */
    char *unavailable;
    struct store *st;
};

/* tools_runs_tasks.c: whether the run is still under way (queued or running). */
bool tools_runs_active(const struct store_run *r);
/* tools_runs_tasks.c: the run id of user_id as a task into out (with its result when
 * want_result and the run has ended); 0, or -ENOENT for no such run of that user. */
int tools_runs_task_get(void *ctx, const char *user_id, const char *id, bool want_result,
                        struct mcp_task *out, struct err *err);
/* tools_runs_tasks.c: the runs as a task source; its context is the struct tools_runs. */
extern const struct mcp_task_source tools_runs_task_source;

/* tools_runs.c: what get_result says of the run: its content and structured content, both
 * owned by the caller. */
void tools_runs_describe(struct tools_runs *t, const struct store_run *r, json_t **content,
                         json_t **structured);

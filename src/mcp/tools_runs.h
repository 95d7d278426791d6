#pragma once
/* Shared by the files of the run tools (tools_runs.c: run_task, get_result, list_runs,
 * cancel_run and their registration; tools_runs_schema.c: their schemas; tools_runs_tasks.c: the
 * runs as MCP tasks), and by nothing else. Everything runs on the loop. */

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"
#include "mcp/mcp.h"
#include "mcp/tools.h"
#include "runs/runs.h"
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

/* tools_runs.c: whether runs are available (else the call is answered so); a tool result's text
 * content */
bool tools_runs_available(struct tools_runs *t, struct mcp_call *call);
json_t *tools_runs_text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* tools_runs_attempts.c: run_task with attempts (its arguments s and args); deliver_run; the
 * first attempt of group of user_id's into first (0, or -ENOENT) */
void tools_runs_attempts(struct tools_runs *t, struct mcp_call *call, const struct runs_submit *s,
                         const json_t *args);
void tools_runs_deliver(struct mcp_call *call, const json_t *args, void *ctx);
int tools_runs_group_first(struct tools_runs *t, const char *user_id, const char *group,
                           char first[64], struct err *err);
extern const char tools_runs_deliver_desc[], tools_runs_deliver_schema[],
    tools_runs_deliver_output[];

/* tools_runs_answer.c: answer_run; get_result asking its client's user for the answer the run
 * waits for (true: the call was answered with an input-required result; false: go on, an answer
 * the retry carried recorded); a waiting run's task (INPUT_REQUIRED with its inputRequests);
 * tasks/update's answers */
void tools_runs_answer(struct mcp_call *call, const json_t *args, void *ctx);
extern const char tools_runs_answer_desc[], tools_runs_answer_schema[], tools_runs_answer_output[];
bool tools_runs_ask_client(struct tools_runs *t, struct mcp_call *call, const char *run_id);
void tools_runs_task_input(struct tools_runs *t, const char *run_id, struct mcp_task *out);
int tools_runs_task_update(void *ctx, const char *user_id, const char *id, const json_t *responses,
                           struct err *err);

/* tools_runs_schema.c: the tools' input and output schemas; run_task's input (malloc'd) names
 * the server's defaults, and seed adds the seed's sessionId */
char *tools_runs_task_schema(const struct tools_facts *f, bool seed);
extern const char tools_runs_task_output[], tools_runs_result_schema[],
    tools_runs_result_seed_schema[], tools_runs_result_output[], tools_runs_list_schema[],
    tools_runs_list_seed_schema[], tools_runs_list_output[], tools_runs_cancel_schema[],
    tools_runs_cancel_output[];

/* tools_runs.c: what get_result says of the run: its content and structured content, both
 * owned by the caller. */
void tools_runs_describe(struct tools_runs *t, const struct store_run *r, json_t **content,
                         json_t **structured);

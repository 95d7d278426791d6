/* The runs as the server's MCP tasks (the "run_" task source): a run's task has the run's id,
 * works while the run is queued or running, then is completed (its result what get_result says)
 * or cancelled; runs are kept, so tasks are too. Reads the store and waits on the engine; runs on
 * the loop. */
#include "mcp/tools_runs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "runs/runs.h"
#include "store/store.h"

/* how often a task's client is asked to look (a run takes minutes) */
#define TASK_POLL_MS 5000
/* how long a tasks/result waits on the engine before looking at the run again */
#define TASK_WAIT_MS (10 * 60 * 1000)

bool tools_runs_active(const struct store_run *r)
{
    return strcmp(r->status, "queued") == 0 || strcmp(r->status, "running") == 0;
}

static void task_of_run(const struct store_run *r, struct mcp_task *out)
{
    snprintf(out->id, sizeof(out->id), "%s", r->id);
    bool active = tools_runs_active(r);
    out->status = active                                ? MCP_TASK_WORKING
                  : strcmp(r->status, "cancelled") == 0 ? MCP_TASK_CANCELLED
                                                        : MCP_TASK_COMPLETED;
    /* while it works, what it is doing (its phase) */
    char phase[RUNS_PHASE_TEXT_MAX];
    runs_phase_text(r, phase, sizeof(phase));
    const char *msg = strcmp(r->status, "failed") == 0 && r->error ? r->error
                      : active                                     ? phase
                                                                   : r->status_reason;
    out->status_message = msg && *msg ? xstrdup(msg) : NULL;
    out->created_ms = r->created_at;
    out->updated_ms = r->finished_at ? r->finished_at : r->started_at;
    out->ttl_ms = -1;
    out->poll_ms = TASK_POLL_MS;
    out->tool_error = strcmp(r->status, "failed") == 0;
}

int tools_runs_task_get(void *ctx, const char *user_id, const char *id, bool want_result,
                        struct mcp_task *out, struct err *err)
{
    struct tools_runs *t = ctx;
    struct store_run r = {0};
    int rc = store_run_get(t->st, user_id, id, &r, err);
    if (rc == 0) {
        task_of_run(&r, out);
        if (strcmp(r.phase, "waiting") == 0)
            tools_runs_task_input(t, r.id, out);
        if (want_result && !tools_runs_active(&r)) {
            json_t *content, *sc;
            tools_runs_describe(t, &r, &content, &sc);
            out->result = json_pack("{s:o, s:o, s:b}", "content", content, "structuredContent", sc,
                                    "isError", strcmp(r.status, "succeeded") != 0);
        }
    }
    store_run_release(&r);
    return rc;
}

static void *task_wait(void *ctx, const char *id, void (*cb)(void *cb_ctx), void *cb_ctx)
{
    struct tools_runs *t = ctx;
    return runs_wait(t->runs, id, TASK_WAIT_MS, cb, cb_ctx);
}

static void task_wait_cancel(void *ctx, void *handle)
{
    (void)ctx;
    runs_wait_cancel(handle);
}

static int task_cancel(void *ctx, const char *user_id, const char *id, struct err *err)
{
    struct tools_runs *t = ctx;
    return runs_cancel(t->runs, user_id, id, err);
}

struct task_list {
    void (*each)(const struct mcp_task *t, void *each_ctx);
    void *each_ctx;
    char last[64];
};

static void list_task(const struct store_run *r, void *ctx)
{
    struct task_list *l = ctx;
    struct mcp_task task = {0};
    task_of_run(r, &task);
    l->each(&task, l->each_ctx);
    mcp_task_release(&task);
    snprintf(l->last, sizeof(l->last), "%s", r->id);
}

/* The cursor is the id of the last run of the page: the caller's own, so it tells nothing. */
static int task_list(void *ctx, const char *user_id, const char *cursor, unsigned limit,
                     void (*each)(const struct mcp_task *t, void *each_ctx), void *each_ctx,
                     char next[64], struct err *err)
{
    struct tools_runs *t = ctx;
    struct store_run_list_opts o = {.user_id = user_id, .limit = limit};
    if (cursor) {
        struct store_run r = {0};
        int rc = store_run_get(t->st, user_id, cursor, &r, err);
        o.before = r.n;
        store_run_release(&r);
        if (rc < 0)
            return rc == -ENOENT ? err_set(err, -EINVAL, "invalid cursor") : rc;
    }
    struct task_list l = {each, each_ctx, ""};
    bool more = false;
    int rc = store_run_list(t->st, &o, list_task, &l, &more, err);
    if (rc < 0)
        return rc;
    snprintf(next, 64, "%s", more ? l.last : "");
    return 0;
}

/* A run waits for input while its agent asks (tools_runs_answer.c). */
const struct mcp_task_source tools_runs_task_source = {
    .update = tools_runs_task_update,
    .get = tools_runs_task_get,
    .wait = task_wait,
    .wait_cancel = task_wait_cancel,
    .cancel = task_cancel,
    .list = task_list,
};

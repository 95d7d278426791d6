/* Tasks on the wire. Two protocols share one source of tasks (the runs):
 * - the 2025-11-25 experimental tasks: tools/call with a `task` parameter answers a
 *   CreateTaskResult {task}; tasks/get and tasks/list give Task objects (ttl, pollInterval);
 *   tasks/result blocks until the task ends and gives the tool's result; tasks/cancel gives the
 *   cancelled task and refuses one that has ended. A tool result with isError is `failed`.
 * - the io.modelcontextprotocol/tasks extension of the stateless revision: the server answers a
 *   tools/call from a client that declared the extension with a flat CreateTaskResult
 *   (resultType "task", ttlMs, pollIntervalMs); tasks/get inlines the result or error, or the
 *   inputRequests of a task that waits for input; tasks/update carries the client's answers to
 *   those into the task's source; tasks/cancel acknowledges; tasks/result and tasks/list do not
 *   exist. `failed` is kept for JSON-RPC errors, so a tool result with isError is `completed`.
 * Tasks come from several sources, each owning the ids with its prefix
 * (mcp_server_add_task_source). A task of another user is not found, the same as one that never
 * existed. */
#include "mcp/mcp_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "mcp/jsonrpc.h"

#define LIST_PAGE 50
#define META_IMMEDIATE "io.modelcontextprotocol/model-immediate-response"

void mcp_task_release(struct mcp_task *t)
{
    free(t->status_message);
    json_decref(t->result);
    json_decref(t->input_requests);
    t->status_message = NULL;
    t->result = NULL;
    t->input_requests = NULL;
}

static const char *status_name(const struct mcp_task *t, bool modern)
{
    switch (t->status) {
    case MCP_TASK_WORKING: return "working";
    case MCP_TASK_INPUT_REQUIRED: return "input_required";
    case MCP_TASK_COMPLETED: return !modern && t->tool_error ? "failed" : "completed";
    case MCP_TASK_FAILED: return "failed";
    case MCP_TASK_CANCELLED: return "cancelled";
    }
    return "failed";
}

static bool task_ended(const struct mcp_task *t)
{
    return t->status != MCP_TASK_WORKING && t->status != MCP_TASK_INPUT_REQUIRED;
}

/* The Task object both revisions share, with their names for the durations. */
static json_t *task_json(const struct mcp_task *t, bool modern)
{
    char created[32], updated[32];
    time_format_rfc3339(t->created_ms, created);
    time_format_rfc3339(t->updated_ms > t->created_ms ? t->updated_ms : t->created_ms, updated);
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:o}", "taskId", t->id, "status", status_name(t, modern),
                  "createdAt", created, "lastUpdatedAt", updated, modern ? "ttlMs" : "ttl",
                  t->ttl_ms < 0 ? json_null() : json_integer((json_int_t)t->ttl_ms));
    if (t->status_message)
        json_object_set_new(o, "statusMessage", json_string(t->status_message));
    if (t->poll_ms > 0)
        json_object_set_new(o, modern ? "pollIntervalMs" : "pollInterval",
                            json_integer((json_int_t)t->poll_ms));
    return o;
}

int mcp_tasks_check_request(const struct mcp_call *call, const json_t *params, bool *requested,
                            char *msg, size_t msglen)
{
    *requested = false;
    if (mcp_call_modern(call)) {
        /* The extension has no `task` parameter (it is ignored): declaring the extension is
         * the opt-in, and the server decides. */
        const json_t *ext = json_object_get(mcp_call_client_capabilities(call), "extensions");
        *requested = json_is_object(json_object_get(ext, MCP_TASKS_EXTENSION));
        return 0;
    }
    const json_t *task = json_object_get(params, "task");
    if (!task || json_is_null(task))
        return 0;
    if (!json_is_object(task)) {
        snprintf(msg, msglen, "params.task must be an object");
        return JSONRPC_INVALID_PARAMS;
    }
    const json_t *ttl = json_object_get(task, "ttl");
    if (ttl && !json_is_null(ttl) && (!json_is_number(ttl) || json_number_value(ttl) < 0)) {
        snprintf(msg, msglen, "params.task.ttl must be a number of milliseconds");
        return JSONRPC_INVALID_PARAMS;
    }
    *requested = true;
    return 0;
}

void mcp_call_task_created(struct mcp_call *call, const struct mcp_task *t, const char *note)
{
    bool modern = mcp_call_modern(call);
    json_t *task = task_json(t, modern);
    if (modern) {
        json_object_set_new(task, "resultType", json_string("task"));
        mcp_call_reply(call, task);
        return;
    }
    json_t *r = json_pack("{s:o}", "task", task);
    if (note)
        json_object_set_new(r, "_meta", json_pack("{s:s}", META_IMMEDIATE, note));
    mcp_call_reply(call, r);
}

/* --- lookups --- */

/* Under the stateless revision every task method needs the extension declared on the request. */
static bool extension_declared(struct mcp_call *call)
{
    if (!mcp_call_modern(call))
        return true;
    const json_t *ext = json_object_get(mcp_call_client_capabilities(call), "extensions");
    if (json_is_object(json_object_get(ext, MCP_TASKS_EXTENSION)))
        return true;
    mcp_call_error(
        call, MCP_MISSING_CLIENT_CAPABILITY,
        "Missing required client capability: declare the " MCP_TASKS_EXTENSION
        " extension in the request's client capabilities",
        json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions", MCP_TASKS_EXTENSION));
    return false;
}

static const char *task_id(struct mcp_call *call, const json_t *params)
{
    const char *id = json_string_value(json_object_get(params, "taskId"));
    if (!id || !*id)
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, "params.taskId must be a non-empty string",
                       NULL);
    return id && *id ? id : NULL;
}

static void not_found(struct mcp_call *call)
{
    mcp_call_error(call, JSONRPC_INVALID_PARAMS, "Failed to retrieve task: Task not found", NULL);
}

/* Read task id of the caller into *t; on failure answer the call and return false. src is the
 * source that owns id, or NULL when none does. */
static bool lookup(struct mcp_call *call, const struct mcp_task_source *src, void *ctx,
                   const char *id, bool want_result, struct mcp_task *t)
{
    struct err err = {0};
    if (!src) {
        not_found(call);
        return false;
    }
    int rc = src->get(ctx, mcp_call_principal(call)->user_id, id, want_result, t, &err);
    if (rc == 0)
        return true;
    mcp_task_release(t);
    if (rc == -ENOENT)
        not_found(call);
    else
        mcp_call_error(call, JSONRPC_INTERNAL_ERROR, err.msg, NULL);
    return false;
}

/* The caller's task that a tasks/get, tasks/cancel or tasks/update names, into *t; false when
 * the call has been answered with why it cannot be had. */
static bool named_task(struct mcp_call *call, const json_t *params, void *srv, bool want_result,
                       struct mcp_task *t)
{
    if (!extension_declared(call))
        return false;
    const char *id = task_id(call, params);
    if (!id)
        return false;
    void *ctx;
    const struct mcp_task_source *src = mcp_server_task_source(srv, id, &ctx);
    return lookup(call, src, ctx, id, want_result, t);
}

/* --- tasks/get --- */

static void m_get(struct mcp_call *call, const json_t *params, void *srv)
{
    bool modern = mcp_call_modern(call);
    struct mcp_task t = {0};
    if (!named_task(call, params, srv, modern, &t))
        return;
    json_t *r = task_json(&t, modern);
    /* The extension inlines the outcome: the result of a completed task, the error of a failed
     * one (a cancelled task carries neither). */
    if (modern && t.result && t.status == MCP_TASK_COMPLETED)
        json_object_set(r, "result", t.result);
    else if (modern && t.result && t.status == MCP_TASK_FAILED)
        json_object_set(r, "error", t.result);
    else if (modern && t.status == MCP_TASK_INPUT_REQUIRED)
        json_object_set_new(r, "inputRequests",
                            t.input_requests ? json_incref(t.input_requests) : json_object());
    mcp_task_release(&t);
    mcp_call_reply(call, r);
}

/* --- tasks/result (2025-11-25): held until the task ends --- */

struct result_wait {
    struct mcp_call *call;
    const struct mcp_task_source *src;
    void *ctx;
    void *handle;  /* the source's wait, while one is pending */
    bool in_wait;  /* inside src->wait(): a callback now is the synchronous one */
    int idle_wake; /* wakes that found the task still working with nothing to wait on */
    char id[64];
};

static void result_answer(struct result_wait *w, struct mcp_task *t)
{
    struct mcp_call *call = w->call;
    if (t->status == MCP_TASK_FAILED) {
        const json_t *e = t->result;
        const char *message = json_string_value(json_object_get(e, "message"));
        json_t *data = json_object_get(e, "data");
        mcp_call_error(call,
                       json_is_integer(json_object_get(e, "code"))
                           ? (int)json_integer_value(json_object_get(e, "code"))
                           : JSONRPC_INTERNAL_ERROR,
                       message ? message : "the task failed", data ? json_incref(data) : NULL);
        return;
    }
    if (!json_is_object(t->result)) {
        mcp_call_error(call, JSONRPC_INTERNAL_ERROR,
                       "the task was cancelled before it had a result", NULL);
        return;
    }
    json_t *r = t->result;
    t->result = NULL;
    json_t *meta = json_object_get(r, "_meta");
    if (!json_is_object(meta)) {
        meta = json_object();
        json_object_set_new(r, "_meta", meta);
    }
    json_object_set_new(meta, MCP_META_RELATED_TASK, json_pack("{s:s}", "taskId", w->id));
    mcp_call_reply(call, r);
}

static void result_woke(void *p);

/* Look at the task: answer once it has ended, else wait on the source. */
static void result_check(struct result_wait *w)
{
    for (;;) {
        struct mcp_task t = {0};
        if (!lookup(w->call, w->src, w->ctx, w->id, true, &t)) {
            free(w);
            return;
        }
        if (task_ended(&t)) {
            result_answer(w, &t);
            mcp_task_release(&t);
            free(w);
            return;
        }
        mcp_task_release(&t);
        /* The source answered at once that there is nothing to wait for, yet the task still
         * works: say so rather than spin. */
        if (w->idle_wake++ > 1) {
            mcp_call_error(w->call, JSONRPC_INTERNAL_ERROR, "the task is not being worked on",
                           NULL);
            free(w);
            return;
        }
        w->in_wait = true;
        w->handle = w->src->wait(w->ctx, w->id, result_woke, w);
        w->in_wait = false;
        if (w->handle)
            return;
    }
}

static void result_woke(void *p)
{
    struct result_wait *w = p;
    w->handle = NULL;
    if (w->in_wait)
        return; /* result_check() goes on */
    w->idle_wake = 0;
    result_check(w);
}

static void result_cancelled(struct mcp_call *call, void *p)
{
    struct result_wait *w = p;
    if (!w->handle)
        return;
    w->src->wait_cancel(w->ctx, w->handle);
    mcp_call_error(call, JSONRPC_INTERNAL_ERROR, "request cancelled", NULL);
    free(w);
}

static void m_result(struct mcp_call *call, const json_t *params, void *srv)
{
    const char *id = task_id(call, params);
    if (!id)
        return;
    struct result_wait *w = xcalloc(1, sizeof(*w));
    w->call = call;
    w->src = mcp_server_task_source(srv, id, &w->ctx);
    snprintf(w->id, sizeof(w->id), "%s", id);
    /* Only a read: a client that hangs up no longer holds anything here. */
    mcp_call_cancel_on_close(call);
    mcp_call_on_cancel(call, result_cancelled, w);
    result_check(w);
}

/* --- tasks/cancel --- */

static void m_cancel(struct mcp_call *call, const json_t *params, void *srv)
{
    struct mcp_task t = {0};
    if (!named_task(call, params, srv, false, &t))
        return;
    void *ctx;
    const struct mcp_task_source *src = mcp_server_task_source(srv, t.id, &ctx);
    bool modern = mcp_call_modern(call);
    const char *user = mcp_call_principal(call)->user_id;
    char id[sizeof(t.id)];
    snprintf(id, sizeof(id), "%s", t.id);
    int rc = task_ended(&t) ? -EALREADY : 0;
    struct err err = {0};
    if (rc == 0)
        rc = src->cancel(ctx, user, id, &err);
    if (rc == -EALREADY) {
        /* The extension acknowledges a cancellation whatever comes of it; 2025-11-25 refuses
         * one for a task that has ended. */
        if (modern)
            mcp_call_reply(call, json_object());
        else {
            char msg[128];
            snprintf(msg, sizeof(msg), "Cannot cancel task: already in terminal status '%s'",
                     status_name(&t, false));
            mcp_call_error(call, JSONRPC_INVALID_PARAMS, msg, NULL);
        }
        mcp_task_release(&t);
        return;
    }
    mcp_task_release(&t);
    if (rc == -ENOENT) {
        not_found(call);
        return;
    }
    if (rc < 0) {
        mcp_call_error(call, JSONRPC_INTERNAL_ERROR, err.msg, NULL);
        return;
    }
    if (modern) {
        mcp_call_reply(call, json_object());
        return;
    }
    if (!lookup(call, src, ctx, id, false, &t))
        return;
    json_t *r = task_json(&t, false);
    mcp_task_release(&t);
    mcp_call_reply(call, r);
}

/* --- tasks/list (2025-11-25) --- */

static void add_listed(const struct mcp_task *t, void *tasks)
{
    json_array_append_new(tasks, task_json(t, false));
}

/* The cursor is "<source index>:<that source's cursor>": the sources are paged one after the
 * other, so a page holds one source's tasks (and may be empty where a source has none). */
static void m_list(struct mcp_call *call, const json_t *params, void *srv)
{
    const json_t *c = json_object_get(params, "cursor");
    if (c && !json_is_null(c) && !json_is_string(c)) {
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, "params.cursor must be a string", NULL);
        return;
    }
    const char *cursor = json_string_value(c);
    size_t i = 0;
    if (cursor) {
        char *end;
        unsigned long v = strtoul(cursor, &end, 10);
        void *unused;
        if (end == cursor || *end != ':' || !mcp_server_task_source_at(srv, v, &unused)) {
            mcp_call_error(call, JSONRPC_INVALID_PARAMS, "invalid cursor", NULL);
            return;
        }
        i = v;
        cursor = end[1] ? end + 1 : NULL;
    }
    void *ctx;
    const struct mcp_task_source *src = mcp_server_task_source_at(srv, i, &ctx);
    json_t *tasks = json_array();
    char next[64] = "";
    struct err err = {0};
    int rc = src->list(ctx, mcp_call_principal(call)->user_id, cursor, LIST_PAGE, add_listed, tasks,
                       next, &err);
    if (rc < 0) {
        json_decref(tasks);
        mcp_call_error(call, rc == -EINVAL ? JSONRPC_INVALID_PARAMS : JSONRPC_INTERNAL_ERROR,
                       rc == -EINVAL ? "invalid cursor" : err.msg, NULL);
        return;
    }
    json_t *r = json_pack("{s:o}", "tasks", tasks);
    if (next[0])
        json_object_set_new(r, "nextCursor", json_sprintf("%zu:%s", i, next));
    else if (mcp_server_task_source_at(srv, i + 1, &ctx))
        json_object_set_new(r, "nextCursor", json_sprintf("%zu:", i + 1));
    mcp_call_reply(call, r);
}

/* --- tasks/update (the extension) --- */

/* The answers to a task's inputRequests, handed to its source. Answers to keys the task does not
 * have outstanding are acknowledged and ignored, as the extension says; a task that is not
 * waiting for input at all is refused, so a client learns its answer went nowhere. At most
 * MCP_INPUT_RESPONSES_MAX answers, as on a retried request. */
static void m_update(struct mcp_call *call, const json_t *params, void *srv)
{
    if (!mcp_call_modern(call)) {
        mcp_call_error(call, JSONRPC_METHOD_NOT_FOUND, "Method not found: tasks/update", NULL);
        return;
    }
    if (!extension_declared(call))
        return;
    const json_t *responses = json_object_get(params, "inputResponses");
    if (!json_is_object(responses)) {
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, "params.inputResponses must be an object",
                       NULL);
        return;
    }
    if (json_object_size(responses) > MCP_INPUT_RESPONSES_MAX) {
        char m[96];
        snprintf(m, sizeof(m), "params.inputResponses has too many entries (at most %d)",
                 MCP_INPUT_RESPONSES_MAX);
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, m, NULL);
        return;
    }
    struct mcp_task t = {0};
    if (!named_task(call, params, srv, false, &t))
        return;
    void *ctx;
    const struct mcp_task_source *src = mcp_server_task_source(srv, t.id, &ctx);
    char msg[160];
    snprintf(msg, sizeof(msg), "Task is not waiting for input: its status is '%s'",
             status_name(&t, true));
    bool waiting = t.status == MCP_TASK_INPUT_REQUIRED;
    char id[sizeof(t.id)];
    snprintf(id, sizeof(id), "%s", t.id);
    mcp_task_release(&t);
    struct err err = {0};
    int rc = waiting && src->update
                 ? src->update(ctx, mcp_call_principal(call)->user_id, id, responses, &err)
                 : -EBUSY;
    if (rc == -ENOENT)
        not_found(call);
    else if (rc == -EBUSY)
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, waiting ? err.msg : msg, NULL);
    else if (rc < 0)
        mcp_call_error(call, JSONRPC_INTERNAL_ERROR, err.msg, NULL);
    else
        mcp_call_reply(call, json_object());
}

void mcp_tasks_register_methods(struct mcp_server *srv)
{
    mcp_server_add_method(srv, "tasks/get", m_get, srv, NULL, NULL);
    mcp_server_add_method(srv, "tasks/result", m_result, srv, NULL, NULL);
    mcp_server_add_method(srv, "tasks/cancel", m_cancel, srv, NULL, NULL);
    mcp_server_add_method(srv, "tasks/update", m_update, srv, NULL, NULL);
    /* the 2025-11-25 capability; server/discover shows the extension instead */
    mcp_server_add_method(
        srv, "tasks/list", m_list, srv, "tasks",
        json_pack("{s:{}, s:{}, s:{s:{s:{}}}}", "list", "cancel", "requests", "tools", "call"));
}

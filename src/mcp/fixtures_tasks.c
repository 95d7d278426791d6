/* The tasks extension's conformance fixtures (SEP-2663): tools that run as tasks held in memory,
 * a second task source beside the runs. Each tool is a small state machine on the loop:
 *   slow_compute        works for `seconds`, then completes (or runs inline without a task)
 *   failing_job         task required; completes after a second with a tool error (isError)
 *   protocol_error_job  fails with a JSON-RPC error, which tasks/get inlines as `error`
 *   confirm_delete      waits for one elicitation answer (input_required), then completes
 *   multi_input         waits for two answers at once, which may come in separate tasks/update
 *   test_tool_with_task task required; asks for a name with an InputRequiredResult first, then
 *                       makes a task whose result carries the name
 *   greet               never a task
 * Tasks are the caller's own (another user's is not found), capped per user and overall, and
 * dropped ttl after they were made, whatever their state; an expired task is pruned when the
 * store is next used. */
#include "mcp/fixtures.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/util.h"
#include "mcp/mcp.h"

#define ID_PREFIX "ftask_"
#define POLL_MS 200
#define SECONDS_MAX 120
#define FAILING_JOB_MS 1000
#define MSG_MAX 256

enum kind {
    SLOW_COMPUTE,
    FAILING_JOB,
    PROTOCOL_ERROR_JOB,
    CONFIRM_DELETE,
    MULTI_INPUT,
    GREET_TASK
};

struct ftask {
    struct loop_timer timer; /* first: the timer callback finds its task */
    struct fixture_tasks *ft;
    struct ftask *next;
    char id[64];
    char user[64];
    enum kind kind;
    enum mcp_task_status status;
    char message[MSG_MAX]; /* statusMessage, or "" */
    char subject[MSG_MAX]; /* the label, file name or person the tool was called with */
    int64_t created_ms, updated_ms;
    int64_t expires_mono_ms;
    bool timer_armed;
    json_t *result;   /* CallToolResult when completed; {code, message} when failed */
    json_t *pending;  /* outstanding input requests by key */
    json_t *answered; /* the answers taken so far by key */
};

struct fwait {
    struct fwait *next;
    char id[64];
    void (*cb)(void *cb_ctx);
    void *cb_ctx;
};

struct fixture_tasks {
    struct fixture_tasks_limits lim;
    struct ftask *tasks; /* newest first */
    unsigned count;
    struct fwait *waits;
};

/* ---------- the store ---------- */

static void ftask_free(struct ftask *t)
{
    if (t->timer_armed)
        loop_timer_stop(&t->timer);
    json_decref(t->result);
    json_decref(t->pending);
    json_decref(t->answered);
    free(t);
}

/* Call the waits on task id (all of them when id is NULL), each once. They are taken off the
 * list first: a callback looks the task up again, which may prune. */
static void wake(struct fixture_tasks *ft, const char *id)
{
    struct fwait *woken = NULL;
    for (struct fwait **p = &ft->waits; *p;) {
        struct fwait *w = *p;
        if (!id || strcmp(w->id, id) == 0) {
            *p = w->next;
            w->next = woken;
            woken = w;
        } else {
            p = &w->next;
        }
    }
    while (woken) {
        struct fwait *w = woken;
        woken = w->next;
        void (*cb)(void *) = w->cb;
        void *cb_ctx = w->cb_ctx;
        free(w);
        cb(cb_ctx);
    }
}

/* Drop the tasks whose ttl has passed. */
static void prune(struct fixture_tasks *ft)
{
    int64_t now = time_mono_ms();
    struct ftask *gone = NULL;
    for (struct ftask **p = &ft->tasks; *p;) {
        struct ftask *t = *p;
        if (t->expires_mono_ms <= now) {
            *p = t->next;
            ft->count--;
            t->next = gone;
            gone = t;
        } else {
            p = &t->next;
        }
    }
    while (gone) {
        struct ftask *t = gone;
        gone = t->next;
        char id[64];
        snprintf(id, sizeof(id), "%s", t->id);
        log_info("mcp fixture-task expired task=%s", id);
        ftask_free(t);
        wake(ft, id);
    }
}

static struct ftask *find(struct fixture_tasks *ft, const char *user, const char *id)
{
    prune(ft);
    for (struct ftask *t = ft->tasks; t; t = t->next)
        if (strcmp(t->id, id) == 0 && strcmp(t->user, user) == 0)
            return t;
    return NULL;
}

static bool ended(const struct ftask *t)
{
    return t->status != MCP_TASK_WORKING && t->status != MCP_TASK_INPUT_REQUIRED;
}

static void fill(const struct ftask *t, bool want_result, struct mcp_task *out)
{
    snprintf(out->id, sizeof(out->id), "%s", t->id);
    out->status = t->status;
    out->status_message = t->message[0] ? xstrdup(t->message) : NULL;
    out->created_ms = t->created_ms;
    out->updated_ms = t->updated_ms;
    out->ttl_ms = (int64_t)t->ft->lim.ttl_ms;
    out->poll_ms = POLL_MS;
    out->tool_error =
        t->status == MCP_TASK_COMPLETED && json_is_true(json_object_get(t->result, "isError"));
    if (want_result && t->result && ended(t))
        out->result = json_deep_copy(t->result);
    if (t->status == MCP_TASK_INPUT_REQUIRED && t->pending)
        out->input_requests = json_deep_copy(t->pending);
}

/* The task moves on: its new status and message, and the waits on it hear of it. */
static void settle(struct ftask *t, enum mcp_task_status status, json_t *result,
                   const char *message)
{
    t->status = status;
    if (result) {
        json_decref(t->result);
        t->result = result;
    }
    snprintf(t->message, sizeof(t->message), "%s", message ? message : "");
    t->updated_ms = time_now_ms();
    if (ended(t) && t->timer_armed) {
        loop_timer_stop(&t->timer);
        t->timer_armed = false;
    }
    static const char *const names[] = {"working", "input_required", "completed", "failed",
                                        "cancelled"};
    log_info("mcp fixture-task status task=%s status=%s", t->id, names[status]);
    wake(t->ft, t->id);
}

static json_t *text_result(const char *text, bool is_error)
{
    json_t *r = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);
    if (is_error)
        json_object_set_new(r, "isError", json_true());
    return r;
}

static json_t *elicit_request(const char *message, const char *property, const char *type)
{
    return mcp_input_elicit(message,
                            json_pack("{s:s, s:{s:{s:s}}, s:[s]}", "type", "object", "properties",
                                      property, "type", type, "required", property));
}

/* What the kind does once its time has come (or at once, when it asks for input). */
static void step(struct ftask *t)
{
    char text[2 * MSG_MAX];
    switch (t->kind) {
    case SLOW_COMPUTE:
        snprintf(text, sizeof(text), "Computed '%s'", t->subject);
        settle(t, MCP_TASK_COMPLETED, text_result(text, false), NULL);
        break;
    case FAILING_JOB:
        settle(t, MCP_TASK_COMPLETED, text_result("The job failed, as it always does", true), NULL);
        break;
    case PROTOCOL_ERROR_JOB:
        settle(t, MCP_TASK_FAILED,
               json_pack("{s:i, s:s}", "code", -32603, "message",
                         "Internal error: the job could not be carried out"),
               "the job could not be carried out");
        break;
    case GREET_TASK:
        snprintf(text, sizeof(text), "Hello, %s!", t->subject);
        settle(t, MCP_TASK_COMPLETED, text_result(text, false), NULL);
        break;
    case CONFIRM_DELETE: {
        snprintf(text, sizeof(text), "Delete the file '%s'?", t->subject);
        t->pending =
            json_pack("{s:o}", "confirm-delete-1", elicit_request(text, "confirm", "boolean"));
        settle(t, MCP_TASK_INPUT_REQUIRED, NULL, "waiting for the user to confirm");
        break;
    }
    case MULTI_INPUT:
        t->pending = json_pack(
            "{s:o, s:o}", "multi-input-1", elicit_request("What is your name?", "name", "string"),
            "multi-input-2", elicit_request("Do you confirm?", "confirm", "boolean"));
        settle(t, MCP_TASK_INPUT_REQUIRED, NULL, "waiting for two answers");
        break;
    }
}

static void timer_fired(struct loop_timer *timer)
{
    struct ftask *t = (struct ftask *)timer;
    t->timer_armed = false;
    if (!ended(t))
        step(t);
}

/* Whether one elicitation answer accepts, with content[property] true. */
static bool accepted(const json_t *answer, const char *property)
{
    const char *action = json_string_value(json_object_get(answer, "action"));
    return action && strcmp(action, "accept") == 0 &&
           json_is_true(json_object_get(json_object_get(answer, "content"), property));
}

/* Every outstanding request has its answer: finish with what the answers say. */
static void answered_all(struct ftask *t)
{
    char text[2 * MSG_MAX];
    if (t->kind == CONFIRM_DELETE) {
        bool yes = accepted(json_object_get(t->answered, "confirm-delete-1"), "confirm");
        snprintf(text, sizeof(text), yes ? "Deleted '%s'" : "Kept '%s': the user did not confirm",
                 t->subject);
    } else {
        const char *name = json_string_value(json_object_get(
            json_object_get(json_object_get(t->answered, "multi-input-1"), "content"), "name"));
        bool yes = accepted(json_object_get(t->answered, "multi-input-2"), "confirm");
        snprintf(text, sizeof(text), "Name: %.100s; confirmed: %s", name ? name : "(none)",
                 yes ? "yes" : "no");
    }
    json_decref(t->pending);
    t->pending = NULL;
    settle(t, MCP_TASK_COMPLETED, text_result(text, false), NULL);
}

/* ---------- the task source ---------- */

static int src_get(void *ctx, const char *user_id, const char *id, bool want_result,
                   struct mcp_task *out, struct err *err)
{
    struct ftask *t = find(ctx, user_id, id);
    if (!t)
        return err_set(err, -ENOENT, "task '%s' not found", id);
    fill(t, want_result, out);
    return 0;
}

static void *src_wait(void *ctx, const char *id, void (*cb)(void *cb_ctx), void *cb_ctx)
{
    struct fixture_tasks *ft = ctx;
    prune(ft);
    struct ftask *t = ft->tasks;
    while (t && strcmp(t->id, id) != 0)
        t = t->next;
    if (!t || ended(t)) {
        cb(cb_ctx);
        return NULL;
    }
    struct fwait *w = xcalloc(1, sizeof(*w));
    snprintf(w->id, sizeof(w->id), "%s", id);
    w->cb = cb;
    w->cb_ctx = cb_ctx;
    w->next = ft->waits;
    ft->waits = w;
    return w;
}

static void src_wait_cancel(void *ctx, void *handle)
{
    struct fixture_tasks *ft = ctx;
    for (struct fwait **p = &ft->waits; *p; p = &(*p)->next)
        if (*p == handle) {
            *p = ((struct fwait *)handle)->next;
            free(handle);
            return;
        }
}

static int src_cancel(void *ctx, const char *user_id, const char *id, struct err *err)
{
    struct ftask *t = find(ctx, user_id, id);
    if (!t)
        return err_set(err, -ENOENT, "task '%s' not found", id);
    if (ended(t))
        return err_set(err, -EALREADY, "task '%s' has ended", id);
    json_decref(t->pending);
    t->pending = NULL;
    settle(t, MCP_TASK_CANCELLED, NULL, "cancelled by the client");
    return 0;
}

static int src_list(void *ctx, const char *user_id, const char *cursor, unsigned limit,
                    void (*each)(const struct mcp_task *t, void *each_ctx), void *each_ctx,
                    char next[64], struct err *err)
{
    struct fixture_tasks *ft = ctx;
    prune(ft);
    struct ftask *t = ft->tasks;
    if (cursor) {
        while (t && !(strcmp(t->id, cursor) == 0 && strcmp(t->user, user_id) == 0))
            t = t->next;
        if (!t)
            return err_set(err, -EINVAL, "invalid cursor");
        t = t->next;
    }
    unsigned n = 0;
    next[0] = '\0';
    for (; t; t = t->next) {
        if (strcmp(t->user, user_id) != 0)
            continue;
        if (n == limit) {
            /* more to come: the cursor is the last one listed */
            return 0;
        }
        struct mcp_task task = {0};
        fill(t, false, &task);
        each(&task, each_ctx);
        mcp_task_release(&task);
        snprintf(next, 64, "%s", t->id);
        n++;
    }
    next[0] = '\0';
    return 0;
}

static int src_update(void *ctx, const char *user_id, const char *id, const json_t *responses,
                      struct err *err)
{
    struct ftask *t = find(ctx, user_id, id);
    if (!t)
        return err_set(err, -ENOENT, "task '%s' not found", id);
    if (t->status != MCP_TASK_INPUT_REQUIRED)
        return err_set(err, -EBUSY, "task '%s' is not waiting for input", id);
    const char *key;
    json_t *answer;
    json_object_foreach((json_t *)responses, key, answer)
    {
        if (!json_object_get(t->pending, key))
            continue; /* not outstanding: ignored */
        if (!t->answered)
            t->answered = json_object();
        json_object_set_new(t->answered, key, json_deep_copy(answer));
        json_object_del(t->pending, key);
    }
    if (json_object_size(t->pending) == 0)
        answered_all(t);
    else
        t->updated_ms = time_now_ms();
    return 0;
}

static const struct mcp_task_source source = {
    .get = src_get,
    .wait = src_wait,
    .wait_cancel = src_wait_cancel,
    .cancel = src_cancel,
    .list = src_list,
    .update = src_update,
};

/* ---------- the tools ---------- */

/* Make a task of kind for the caller, started after delay_ms (0: at once), and answer the call
 * with it; past a cap, answer with a tool error (code busy) that says which. */
static void start_task(struct fixture_tasks *ft, struct mcp_call *call, enum kind kind,
                       const char *subject, uint64_t delay_ms)
{
    const char *user = mcp_call_principal(call)->user_id;
    prune(ft);
    unsigned mine = 0;
    for (struct ftask *t = ft->tasks; t; t = t->next)
        mine += strcmp(t->user, user) == 0;
    if (mine >= ft->lim.per_user || ft->count >= ft->lim.max) {
        bool yours = mine >= ft->lim.per_user;
        log_warn("mcp fixture-task refused user=%s reason=%s", user,
                 yours ? "per-user-cap" : "cap");
        mcp_call_tool_fail(call, MCP_TOOL_BUSY,
                           "too many tasks: %s %u are kept (CONFORMANCE_TASKS_%s), each for %llu "
                           "ms after it was made; try again once one has expired",
                           yours ? "each user's at most" : "at most",
                           yours ? ft->lim.per_user : ft->lim.max, yours ? "PER_USER" : "MAX",
                           (unsigned long long)ft->lim.ttl_ms);
        return;
    }
    struct ftask *t = xcalloc(1, sizeof(*t));
    t->ft = ft;
    id_new("ftask", t->id);
    snprintf(t->user, sizeof(t->user), "%s", user);
    t->kind = kind;
    t->status = MCP_TASK_WORKING;
    snprintf(t->subject, sizeof(t->subject), "%s", subject ? subject : "");
    t->created_ms = t->updated_ms = time_now_ms();
    t->expires_mono_ms = time_mono_ms() + (int64_t)ft->lim.ttl_ms;
    t->next = ft->tasks;
    ft->tasks = t;
    ft->count++;
    log_info("mcp fixture-task created task=%s user=%s", t->id, user);
    if (kind == CONFIRM_DELETE || kind == MULTI_INPUT) {
        step(t);
    } else {
        loop_timer_start(&t->timer, delay_ms, timer_fired);
        t->timer_armed = true;
    }
    struct mcp_task out = {0};
    fill(t, false, &out);
    mcp_call_task_created(call, &out, NULL);
    mcp_task_release(&out);
}

/* Without a task, slow_compute works inline: the call waits `seconds` on a timer. */
struct inline_compute {
    struct loop_timer timer; /* first */
    struct mcp_call *call;
    char label[MSG_MAX];
};

static void inline_done(struct loop_timer *timer)
{
    struct inline_compute *c = (struct inline_compute *)timer;
    char text[2 * MSG_MAX];
    snprintf(text, sizeof(text), "Computed '%s'", c->label);
    mcp_call_tool_result(c->call, json_pack("[{s:s, s:s}]", "type", "text", "text", text), NULL,
                         false);
    free(c);
}

static void inline_cancelled(struct mcp_call *call, void *p)
{
    struct inline_compute *c = p;
    loop_timer_stop(&c->timer);
    mcp_call_tool_fail(call, MCP_TOOL_CANCELLED, "cancelled");
    free(c);
}

static void t_slow_compute(struct mcp_call *call, const json_t *args, void *ctx)
{
    double seconds = json_number_value(json_object_get(args, "seconds"));
    const char *label = json_string_value(json_object_get(args, "label"));
    uint64_t ms = (uint64_t)(seconds * 1000);
    if (mcp_call_task_requested(call)) {
        start_task(ctx, call, SLOW_COMPUTE, label, ms);
        return;
    }
    struct inline_compute *c = xcalloc(1, sizeof(*c));
    c->call = call;
    snprintf(c->label, sizeof(c->label), "%s", label ? label : "");
    mcp_call_on_cancel(call, inline_cancelled, c);
    loop_timer_start(&c->timer, ms, inline_done);
}

static void t_failing_job(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args;
    start_task(ctx, call, FAILING_JOB, NULL, FAILING_JOB_MS);
}

static void t_protocol_error_job(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args;
    if (!mcp_call_task_requested(call)) {
        mcp_call_error(call, -32603, "Internal error: the job could not be carried out", NULL);
        return;
    }
    start_task(ctx, call, PROTOCOL_ERROR_JOB, NULL, 100);
}

static void t_confirm_delete(struct mcp_call *call, const json_t *args, void *ctx)
{
    start_task(ctx, call, CONFIRM_DELETE, json_string_value(json_object_get(args, "filename")), 0);
}

static void t_multi_input(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args;
    start_task(ctx, call, MULTI_INPUT, NULL, 0);
}

static void t_greet(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)ctx;
    char text[2 * MSG_MAX];
    snprintf(text, sizeof(text), "Hello, %.200s!",
             json_string_value(json_object_get(args, "name")));
    mcp_call_tool_result(call, json_pack("[{s:s, s:s}]", "type", "text", "text", text), NULL,
                         false);
}

/* Round 1 asks for a name with an InputRequiredResult (no requestState: the answer alone is
 * enough; an answer of another shape is asked for again); round 2, with the answer, makes the task
 * that greets the name. */
static void t_tool_with_task(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args;
    if (strcmp(mcp_call_protocol_version(call), MCP_VERSION_MODERN) != 0) {
        mcp_call_tool_fail(call, MCP_TOOL_UNAVAILABLE,
                           "test_tool_with_task asks for input with an InputRequiredResult, which "
                           "needs protocol version " MCP_VERSION_MODERN);
        return;
    }
    const json_t *answer = mcp_call_input_response(call, "user_name", "elicitation/create");
    const char *action = json_string_value(json_object_get(answer, "action"));
    const char *name =
        json_string_value(json_object_get(json_object_get(answer, "content"), "name"));
    if (!answer) {
        mcp_call_input_required(
            call,
            json_pack("{s:o}", "user_name", elicit_request("What is your name?", "name", "string")),
            NULL);
        return;
    }
    if (!action || strcmp(action, "accept") != 0 || !name || !*name) {
        mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                           "inputResponses.user_name must accept with content.name, a name");
        return;
    }
    start_task(ctx, call, GREET_TASK, name, 0);
}

struct fixture_tasks *mcp_fixtures_tasks_register(struct mcp_server *srv,
                                                  const struct fixture_tasks_limits *lim)
{
    struct fixture_tasks *ft = xcalloc(1, sizeof(*ft));
    ft->lim = *lim;
    const struct mcp_tool_def tools[] = {
        {"greet", NULL, "Greets by name, at once (never a task)",
         "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":200}},"
         "\"required\":[\"name\"]}",
         NULL, MCP_TOOL_READ_ONLY, t_greet, ft},
        {"slow_compute", NULL,
         "Works for `seconds` (at most 120), as a task when the client takes tasks",
         "{\"type\":\"object\",\"properties\":{\"seconds\":{\"type\":\"number\",\"minimum\":0,"
         "\"maximum\":120},\"label\":{\"type\":\"string\",\"maxLength\":200}}}",
         NULL, MCP_TOOL_READ_ONLY | MCP_TOOL_TASK, t_slow_compute, ft},
        {"failing_job", NULL, "A task that ends with a tool error after a second",
         "{\"type\":\"object\",\"properties\":{}}", NULL, MCP_TOOL_TASK_REQUIRED, t_failing_job,
         ft},
        {"protocol_error_job", NULL, "A task that fails with a JSON-RPC error",
         "{\"type\":\"object\",\"properties\":{}}", NULL, MCP_TOOL_TASK, t_protocol_error_job, ft},
        {"confirm_delete", NULL,
         "A task that asks the user to confirm deleting a file (input_required), then says what "
         "it did; nothing is deleted",
         "{\"type\":\"object\",\"properties\":{\"filename\":{\"type\":\"string\",\"maxLength\":"
         "200}}}",
         NULL, MCP_TOOL_TASK_REQUIRED, t_confirm_delete, ft},
        {"multi_input", NULL, "A task that asks two questions at once (input_required)",
         "{\"type\":\"object\",\"properties\":{}}", NULL, MCP_TOOL_TASK_REQUIRED, t_multi_input,
         ft},
        {"test_tool_with_task", NULL,
         "Asks for a name (InputRequiredResult), then greets it from a task",
         "{\"type\":\"object\",\"properties\":{}}", NULL, MCP_TOOL_TASK_REQUIRED, t_tool_with_task,
         ft},
    };
    for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
        mcp_server_add_tool(srv, &tools[i]);
    mcp_server_add_task_source(srv, ID_PREFIX, &source, ft);
    return ft;
}

void mcp_fixtures_tasks_free(struct fixture_tasks *ft)
{
    if (!ft)
        return;
    while (ft->tasks) {
        struct ftask *t = ft->tasks;
        ft->tasks = t->next;
        ftask_free(t);
    }
    while (ft->waits) {
        struct fwait *w = ft->waits;
        ft->waits = w->next;
        free(w);
    }
    free(ft);
}

/* The life of a call and of the exchange that carries it: how an answer leaves (one JSON reply,
 * a batch's array, or events on a stream), what the stateless revision adds to every result, the
 * tool results and failures tools give, progress and log notifications, and cancellation when
 * the client goes away. Every function here runs on the loop, on a call that has not answered
 * yet unless it says otherwise. */
#include "mcp/mcp.h"
#include "mcp/mcp_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "base/json_write.h"
#include "base/util.h"
#include "mcp/jsonrpc.h"
#include "mcp/schema.h"

#define META_SERVERINFO "io.modelcontextprotocol/serverInfo"
#define LIST_TTL_MS 300000

/* Whole numbers as JSON integers, so clients see 50 rather than 50.0. */
static json_t *json_number(double v)
{
    if (v == (double)(long long)v && v > -1e15 && v < 1e15)
        return json_integer((json_int_t)v);
    return json_real(v);
}

int mcp_error_status(int code, bool modern)
{
    switch (code) {
    case JSONRPC_PARSE_ERROR:
    case JSONRPC_INVALID_REQUEST: return 400;
    case JSONRPC_METHOD_NOT_FOUND: return modern ? 404 : 200;
    case JSONRPC_INVALID_PARAMS:
    case MCP_HEADER_MISMATCH:
    case MCP_MISSING_CLIENT_CAPABILITY:
    case MCP_UNSUPPORTED_PROTOCOL_VERSION: return modern ? 400 : 200;
    case JSONRPC_INTERNAL_ERROR: return modern ? 500 : 200;
    }
    return 200;
}

void mcp_exchange_reply_json(struct mcp_exchange *ex, int status, json_t *body)
{
    if (ex->ops) {
        size_t len = 0;
        char *text = body ? json_write_text(body, &len) : NULL;
        ex->ops->reply(ex->sink, status, text, len);
        free(text);
    }
    ex->ops = NULL;
    json_decref(body);
}

static void sink_event_json(struct mcp_exchange *ex, json_t *msg)
{
    if (ex->ops) {
        size_t len;
        char *text = json_write_text(msg, &len);
        ex->ops->event(ex->sink, text, len);
        free(text);
        ex->streaming = true;
    }
    json_decref(msg);
}

static void exchange_free(struct mcp_exchange *ex)
{
    json_decref(ex->batch_replies);
    free(ex);
}

/* Called when the last pending call answered (or none was created). */
void mcp_exchange_complete(struct mcp_exchange *ex)
{
    if (ex->batch) {
        if (json_array_size(ex->batch_replies) == 0)
            mcp_exchange_reply_json(ex, 202, NULL);
        else
            mcp_exchange_reply_json(ex, 200, json_incref(ex->batch_replies));
    }
    exchange_free(ex);
}

/* The call has been answered: forget it, and complete the exchange after its last call. */
void mcp_call_done(struct mcp_call *call)
{
    struct mcp_exchange *ex = call->ex;
    for (struct mcp_call **p = &ex->calls; *p; p = &(*p)->next)
        if (*p == call) {
            *p = call->next;
            break;
        }
    json_decref(call->id);
    json_decref(call->progress_token);
    json_decref(call->client_caps);
    json_decref(call->input.responses);
    json_decref(call->input.state);
    free(call->input.target);
    free(call);
    if (--ex->pending == 0 && !ex->starting)
        mcp_exchange_complete(ex);
}

static void call_finish(struct mcp_call *call, json_t *msg, int status, const char *outcome)
{
    struct mcp_exchange *ex = call->ex;
    if (call->tool && ex->srv->observer)
        ex->srv->observer(call->tool->def.name, call->cancelled ? "cancelled" : outcome,
                          (double)(time_mono_ms() - call->started_ms) / 1000.0);
    if (ex->batch) {
        json_array_append_new(ex->batch_replies, msg);
    } else if (ex->streaming) {
        sink_event_json(ex, msg);
        if (ex->ops)
            ex->ops->end(ex->sink);
        ex->ops = NULL;
    } else {
        mcp_exchange_reply_json(ex, status, msg);
    }
    mcp_call_done(call);
}

/* Results the stateless revision marks as cacheable (ttlMs, cacheScope). */
static bool cacheable_in_modern(const char *method)
{
    static const char *const cacheable[] = {"tools/list",
                                            "prompts/list",
                                            "resources/list",
                                            "resources/templates/list",
                                            "resources/read",
                                            "server/discover",
                                            NULL};
    for (const char *const *c = cacheable; *c; c++)
        if (strcmp(*c, method) == 0)
            return true;
    return false;
}

size_t mcp_call_reply_budget(const struct mcp_call *call)
{
    return call->ex->srv->reply_budget;
}

const json_t *mcp_call_client_capabilities(const struct mcp_call *call)
{
    return call->client_caps;
}

/* What the stateless revision adds to every result. */
void mcp_call_decorate_result(struct mcp_call *call, json_t *result)
{
    if (call->modern) {
        /* "task" when a tools/call made one; every other result is complete */
        if (!json_object_get(result, "resultType"))
            json_object_set_new(result, "resultType", json_string("complete"));
        json_t *meta = json_object_get(result, "_meta");
        if (!json_is_object(meta)) {
            meta = json_object();
            json_object_set_new(result, "_meta", meta);
        }
        json_object_set_new(meta, META_SERVERINFO, mcp_server_info_json(call->ex->srv));
        if (cacheable_in_modern(call->method)) {
            if (!json_object_get(result, "ttlMs"))
                json_object_set_new(result, "ttlMs", json_integer(LIST_TTL_MS));
            /* Results may depend on who asks. */
            if (!json_object_get(result, "cacheScope"))
                json_object_set_new(result, "cacheScope", json_string("private"));
        }
    }
}

void mcp_call_reply(struct mcp_call *call, json_t *result)
{
    if (!result)
        result = json_object();
    mcp_call_decorate_result(call, result);
    const char *outcome = "ok";
    if (json_is_true(json_object_get(result, "isError")))
        outcome = "error";
    call_finish(call, jsonrpc_result(call->id, result), 200, outcome);
}

void mcp_call_error(struct mcp_call *call, int code, const char *message, json_t *data)
{
    call_finish(call, jsonrpc_error(call->id, code, message, data),
                mcp_error_status(code, call->modern), "protocol_error");
}

void mcp_call_tool_result(struct mcp_call *call, json_t *content, json_t *structured, bool is_error)
{
    if (is_error && call->task_requested && !call->modern) {
        /* Refused before a task existed, where the requestor waits for a CreateTaskResult: a
         * JSON-RPC error carries the reason to it. */
        const char *text = json_string_value(json_object_get(json_array_get(content, 0), "text"));
        char msg[2048];
        snprintf(msg, sizeof(msg), "%s", text ? text : "the tool refused the call");
        json_decref(content);
        json_decref(structured);
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, msg, NULL);
        return;
    }
    if (is_error && !structured) {
        const char *text = json_string_value(json_object_get(json_array_get(content, 0), "text"));
        structured = mcp_tool_error_json(MCP_TOOL_FAILED, text ? text : "the tool failed");
    }
    if (!content) {
        content = json_array();
        if (structured) {
            char *text = json_dumps(structured, JSON_COMPACT);
            json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", text));
            free(text);
        }
    }
    /* The result is checked against the tool's output schema after it has gone: the check only
     * warns, so it need not delay the answer. */
    const struct mcp_tool_entry *tool =
        structured && call->tool && call->tool->output_schema ? call->tool : NULL;
    json_t *r = json_pack("{s:o}", "content", content);
    if (structured)
        json_object_set(r, "structuredContent", structured);
    if (is_error)
        json_object_set_new(r, "isError", json_true());
    mcp_call_reply(call, r);
    char msg[512];
    if (tool && !schema_validate(tool->output_schema, structured, msg, sizeof(msg)))
        log_warn("mcp output-schema-mismatch tool=%s reason=\"%s\"", tool->def.name, msg);
    json_decref(structured);
}

static void tool_fail(struct mcp_call *call, enum mcp_tool_error code, const char *fmt, va_list ap)
{
    char text[2048];
    vsnprintf(text, sizeof(text), fmt, ap);
    json_t *content = json_pack("[{s:s, s:s}]", "type", "text", "text", text);
    mcp_call_tool_result(call, content, mcp_tool_error_json(code, text), true);
}

void mcp_call_tool_fail(struct mcp_call *call, enum mcp_tool_error code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tool_fail(call, code, fmt, ap);
    va_end(ap);
}

void mcp_call_tool_error(struct mcp_call *call, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tool_fail(call, MCP_TOOL_FAILED, fmt, ap);
    va_end(ap);
}

void mcp_call_tool_err(struct mcp_call *call, const struct err *err)
{
    mcp_call_tool_fail(call, mcp_tool_error_from_errno(err->code), "%s",
                       err->msg[0] ? err->msg : "the tool failed");
}

const struct mcp_principal *mcp_call_principal(const struct mcp_call *call)
{
    return &call->ex->principal;
}

const char *mcp_call_protocol_version(const struct mcp_call *call)
{
    return call->version;
}

bool mcp_call_wants_progress(const struct mcp_call *call)
{
    return call->progress_token && call->ex->accepts_sse && !call->ex->batch;
}

void mcp_call_progress(struct mcp_call *call, double progress, double total, const char *message)
{
    if (!mcp_call_wants_progress(call) || !call->ex->ops)
        return;
    json_t *p = json_pack("{s:O, s:o}", "progressToken", call->progress_token, "progress",
                          json_number(progress));
    if (total >= 0)
        json_object_set_new(p, "total", json_number(total));
    if (message)
        json_object_set_new(p, "message", json_string(message));
    sink_event_json(call->ex, jsonrpc_notification("notifications/progress", p));
}

void mcp_call_log(struct mcp_call *call, const char *level, const char *logger, json_t *data)
{
    struct mcp_exchange *ex = call->ex;
    if (!call->log_enabled || !ex->accepts_sse || ex->batch || !ex->ops) {
        json_decref(data);
        return;
    }
    json_t *p = json_pack("{s:s, s:o}", "level", level, "data", data ? data : json_null());
    if (logger)
        json_object_set_new(p, "logger", json_string(logger));
    sink_event_json(ex, jsonrpc_notification("notifications/message", p));
}

void mcp_call_on_cancel(struct mcp_call *call, void (*fn)(struct mcp_call *call, void *ctx),
                        void *ctx)
{
    call->on_cancel = fn;
    call->cancel_ctx = ctx;
}

bool mcp_call_cancelled(const struct mcp_call *call)
{
    return call->cancelled;
}

void mcp_call_cancel_on_close(struct mcp_call *call)
{
    call->cancel_on_close = true;
}

bool mcp_call_modern(const struct mcp_call *call)
{
    return call->modern;
}

struct mcp_input_slots *mcp_call_input_slots(const struct mcp_call *call)
{
    return (struct mcp_input_slots *)&call->input;
}

const char *mcp_call_method(const struct mcp_call *call)
{
    return call->method;
}

const char *mcp_call_request_id(const struct mcp_call *call)
{
    return call->ex->request_id;
}

const unsigned char *mcp_call_input_key(const struct mcp_call *call, int64_t *ttl_ms)
{
    *ttl_ms = call->ex->srv->input_ttl_ms;
    return call->ex->srv->input_key;
}

bool mcp_call_task_requested(const struct mcp_call *call)
{
    return call->task_requested;
}

void mcp_exchange_detach(struct mcp_exchange *ex)
{
    ex->ops = NULL;
    /* Under the stateless revision a closed stream cancels the request; older revisions cancel
     * only by notification, which a stateless server cannot correlate, so their calls finish
     * (except those that only wait to read). */
    for (struct mcp_call *c = ex->calls, *next; c; c = next) {
        next = c->next;
        if (c->cancelled)
            continue;
        bool cancel = c->modern || c->cancel_on_close;
        log_info("mcp client-left req=%s user=%s method=%s tool=%s call=%s", ex->request_id,
                 ex->principal.user_id, c->method, c->tool ? c->tool->def.name : "-",
                 cancel ? "cancelled" : "kept");
        if (cancel) {
            c->cancelled = true;
            if (c->on_cancel)
                c->on_cancel(c, c->cancel_ctx);
        }
    }
}

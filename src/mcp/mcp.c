/* Protocol handling for POST /mcp: version eras, header checks, dispatch, replies. */
#include "mcp/mcp.h"
#include "mcp/mcp_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json_write.h"
#include "base/util.h"
#include "mcp/headers.h"
#include "mcp/jsonrpc.h"
#include "mcp/schema.h"

#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define META_LOGLEVEL "io.modelcontextprotocol/logLevel"
#define META_SERVERINFO "io.modelcontextprotocol/serverInfo"
#define LIST_TTL_MS 300000

static const char *const legacy_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", NULL};

/* ---------- versions ---------- */

static bool is_legacy_version(const char *v)
{
    for (const char *const *p = legacy_versions; *p; p++)
        if (strcmp(*p, v) == 0)
            return true;
    return false;
}

bool mcp_version_supported(const char *v)
{
    return v && (strcmp(v, MCP_VERSION_MODERN) == 0 || is_legacy_version(v));
}

/* Whole numbers as JSON integers, so clients see 50 rather than 50.0. */
static json_t *json_number(double v)
{
    if (v == (double)(long long)v && v > -1e15 && v < 1e15)
        return json_integer((json_int_t)v);
    return json_real(v);
}

static json_t *supported_versions(void)
{
    json_t *a = json_array();
    json_array_append_new(a, json_string(MCP_VERSION_MODERN));
    for (const char *const *p = legacy_versions; *p; p++)
        json_array_append_new(a, json_string(*p));
    return a;
}

/* ---------- exchange plumbing ---------- */

static int error_status(int code, bool modern)
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

static void sink_reply_json(struct mcp_exchange *ex, int status, json_t *body)
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
static void exchange_complete(struct mcp_exchange *ex)
{
    if (ex->batch) {
        if (json_array_size(ex->batch_replies) == 0)
            sink_reply_json(ex, 202, NULL);
        else
            sink_reply_json(ex, 200, json_incref(ex->batch_replies));
    }
    exchange_free(ex);
}

/* The call has been answered: forget it, and complete the exchange after its last call. */
static void call_done(struct mcp_call *call)
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
        exchange_complete(ex);
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
        sink_reply_json(ex, status, msg);
    }
    call_done(call);
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
static void decorate_result(struct mcp_call *call, json_t *result)
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
    decorate_result(call, result);
    const char *outcome = "ok";
    if (json_is_true(json_object_get(result, "isError")))
        outcome = "error";
    call_finish(call, jsonrpc_result(call->id, result), 200, outcome);
}

void mcp_call_error(struct mcp_call *call, int code, const char *message, json_t *data)
{
    call_finish(call, jsonrpc_error(call->id, code, message, data),
                error_status(code, call->modern), "protocol_error");
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
    if (structured && call->tool && call->tool->output_schema) {
        char msg[512];
        if (!schema_validate(call->tool->output_schema, structured, msg, sizeof(msg)))
            log_warn("mcp output-schema-mismatch tool=%s reason=\"%s\"", call->tool->def.name, msg);
    }
    json_t *r = json_pack("{s:o}", "content", content);
    if (structured)
        json_object_set_new(r, "structuredContent", structured);
    if (is_error)
        json_object_set_new(r, "isError", json_true());
    mcp_call_reply(call, r);
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
        if ((c->modern || c->cancel_on_close) && !c->cancelled) {
            c->cancelled = true;
            if (c->on_cancel)
                c->on_cancel(c, c->cancel_ctx);
        }
    }
}

/* ---------- request validation and dispatch ---------- */

/* Checks for a request of the stateless revision. Returns 0 or a JSON-RPC error code with msg. */
static int check_modern(const struct mcp_request_info *info, const char *method,
                        const json_t *params, const char *meta_version, char *msg, size_t msglen,
                        json_t **data)
{
    if (!meta_version) {
        snprintf(msg, msglen, "params._meta[\"%s\"] is required", META_VERSION);
        return JSONRPC_INVALID_PARAMS;
    }
    /* A header that disagrees with the body is a mismatch whatever the version says. */
    if (!info->protocol_version || strcmp(info->protocol_version, meta_version) != 0) {
        snprintf(
            msg, msglen,
            "Header mismatch: MCP-Protocol-Version header %s%s%s does not match body value '%s'",
            info->protocol_version ? "'" : "",
            info->protocol_version ? info->protocol_version : "is missing and",
            info->protocol_version ? "'" : "", meta_version);
        return MCP_HEADER_MISMATCH;
    }
    if (strcmp(meta_version, MCP_VERSION_MODERN) != 0) {
        snprintf(msg, msglen, "Unsupported protocol version");
        *data =
            json_pack("{s:o, s:s}", "supported", supported_versions(), "requested", meta_version);
        return MCP_UNSUPPORTED_PROTOCOL_VERSION;
    }
    if (!info->mcp_method || strcmp(info->mcp_method, method) != 0) {
        snprintf(msg, msglen,
                 "Header mismatch: Mcp-Method header %s%.64s%s does not match body value '%.64s'",
                 info->mcp_method ? "'" : "",
                 info->mcp_method ? info->mcp_method : "is missing and",
                 info->mcp_method ? "'" : "", method);
        return MCP_HEADER_MISMATCH;
    }
    const char *field = NULL;
    if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0)
        field = "name";
    else if (strcmp(method, "resources/read") == 0)
        field = "uri";
    else if (strcmp(method, "tasks/get") == 0 || strcmp(method, "tasks/update") == 0 ||
             strcmp(method, "tasks/cancel") == 0)
        field = "taskId"; /* the tasks extension routes on it */
    if (field) {
        const char *body = json_string_value(json_object_get(params, field));
        if (!info->mcp_name) {
            snprintf(msg, msglen, "Header mismatch: Mcp-Name header is required for %s", method);
            return MCP_HEADER_MISMATCH;
        }
        char *decoded = NULL, why[200];
        size_t dlen = 0;
        if (mcp_header_decode(info->mcp_name, strlen(info->mcp_name), &decoded, &dlen, why,
                              sizeof(why)) < 0) {
            snprintf(msg, msglen, "Header mismatch: Mcp-Name header %s", why);
            return MCP_HEADER_MISMATCH;
        }
        bool same = body && dlen == strlen(body) && memcmp(decoded, body, dlen) == 0;
        if (!same)
            snprintf(msg, msglen,
                     "Header mismatch: Mcp-Name header value '%.100s' does not match body value "
                     "'%.100s'",
                     strlen(decoded) == dlen ? decoded : info->mcp_name, body ? body : "");
        free(decoded);
        if (!same)
            return MCP_HEADER_MISMATCH;
    }
    const json_t *meta = json_object_get(params, "_meta");
    if (!json_is_object(json_object_get(meta, META_CAPS))) {
        snprintf(msg, msglen, "params._meta[\"%s\"] is required", META_CAPS);
        return JSONRPC_INVALID_PARAMS;
    }
    return 0;
}

/* Methods the stateless revision removed: the handshake, ping, per-session log levels and
 * subscriptions (replaced by subscriptions/listen, which this server does not offer), and the
 * 2025-11-25 tasks methods its tasks extension dropped. */
static bool removed_in_modern(const char *method)
{
    static const char *const removed[] = {"initialize",
                                          "ping",
                                          "logging/setLevel",
                                          "resources/subscribe",
                                          "resources/unsubscribe",
                                          "tasks/result",
                                          "tasks/list",
                                          NULL};
    for (const char *const *r = removed; *r; r++)
        if (strcmp(*r, method) == 0)
            return true;
    return false;
}

/* Reply to a request that failed before a call was created. */
static void reply_early_error(struct mcp_exchange *ex, const json_t *id, int code, const char *msg,
                              json_t *data, bool modern)
{
    json_t *e = jsonrpc_error(id, code, msg, data);
    if (ex->batch)
        json_array_append_new(ex->batch_replies, e);
    else
        sink_reply_json(ex, error_status(code, modern), e);
}

static void handle_message(struct mcp_exchange *ex, const struct mcp_request_info *info,
                           const json_t *v)
{
    struct jsonrpc_msg m;
    const json_t *id;
    char msg[512];
    int code = jsonrpc_classify(v, &m, &id, msg, sizeof(msg));
    if (code) {
        reply_early_error(ex, id, code, msg, NULL, false);
        return;
    }
    if (m.kind != JSONRPC_REQUEST) {
        /* Notifications and client responses need no answer; a stateless server has no
         * outstanding requests for a response to match. */
        if (!ex->batch)
            sink_reply_json(ex, 202, NULL);
        return;
    }
    json_t *empty = NULL;
    const json_t *params = m.params;
    if (!params)
        params = empty = json_object();
    const json_t *meta = json_object_get(params, "_meta");
    const char *meta_version = json_string_value(json_object_get(meta, META_VERSION));
    bool modern =
        !ex->batch && (meta_version || (info->protocol_version &&
                                        strcmp(info->protocol_version, MCP_VERSION_MODERN) == 0));
    const char *version;
    json_t *data = NULL;
    if (modern) {
        code = check_modern(info, m.method, params, meta_version, msg, sizeof(msg), &data);
        version = MCP_VERSION_MODERN;
    } else {
        version = info->protocol_version ? info->protocol_version : MCP_VERSION_DEFAULT;
        if (info->protocol_version && !is_legacy_version(info->protocol_version)) {
            snprintf(msg, sizeof(msg), "Bad Request: unsupported MCP-Protocol-Version '%.32s'",
                     info->protocol_version);
            data = json_pack("{s:o, s:s}", "supported", supported_versions(), "requested",
                             info->protocol_version);
            reply_early_error(ex, id, JSONRPC_INVALID_REQUEST, msg, data, false);
            json_decref(empty);
            return;
        }
    }
    if (code) {
        reply_early_error(ex, id, code, msg, data, modern);
        json_decref(empty);
        return;
    }
    const struct mcp_method_entry *method = mcp_server_find_method(ex->srv, m.method);
    if (method && modern && removed_in_modern(m.method))
        method = NULL;
    if (!method) {
        snprintf(msg, sizeof(msg), "Method not found: %.100s", m.method);
        reply_early_error(ex, id, JSONRPC_METHOD_NOT_FOUND, msg, NULL, modern);
        json_decref(empty);
        return;
    }
    struct mcp_call *call = xcalloc(1, sizeof(*call));
    call->ex = ex;
    call->id = json_incref((json_t *)id);
    call->modern = modern;
    call->started_ms = time_mono_ms();
    snprintf(call->method, sizeof(call->method), "%s", m.method);
    snprintf(call->version, sizeof(call->version), "%s", version);
    const json_t *token = json_object_get(meta, "progressToken");
    if (json_is_string(token) || json_is_integer(token))
        call->progress_token = json_incref((json_t *)token);
    const json_t *caps = json_object_get(meta, META_CAPS);
    if (modern && json_is_object(caps))
        call->client_caps = json_incref((json_t *)caps);
    /* Log notifications: under the stateless revision only when the request asks for them. */
    call->log_enabled = !modern || json_is_string(json_object_get(meta, META_LOGLEVEL));
    call->next = ex->calls;
    ex->calls = call;
    ex->pending++;
    if (modern && mcp_input_method(m.method) &&
        (code = mcp_input_begin(call, params, msg, sizeof(msg)))) {
        mcp_call_error(call, code, msg, NULL);
        json_decref(empty);
        return;
    }
    method->fn(call, params, method->ctx);
    json_decref(empty);
}

struct mcp_exchange *mcp_exchange_start(struct mcp_server *srv, const struct mcp_request_info *info,
                                        const char *body, size_t len,
                                        const struct mcp_sink_ops *ops, void *sink)
{
    struct mcp_exchange *ex = xcalloc(1, sizeof(*ex));
    ex->srv = srv;
    ex->ops = ops;
    ex->sink = sink;
    ex->accepts_sse = info->accepts_sse;
    ex->principal = info->principal;
    ex->starting = true;
    ex->info = info;
    snprintf(ex->request_id, sizeof(ex->request_id), "%s",
             info->request_id ? info->request_id : "");

    char msg[512];
    json_t *v = jsonrpc_parse(body, len, msg, sizeof(msg));
    if (!v) {
        reply_early_error(ex, NULL, JSONRPC_PARSE_ERROR, msg, NULL, false);
    } else if (json_is_array(v)) {
        const char *ver = info->protocol_version ? info->protocol_version : MCP_VERSION_DEFAULT;
        if (strcmp(ver, "2025-03-26") != 0 || json_array_size(v) == 0) {
            snprintf(msg, sizeof(msg),
                     json_array_size(v) ? "batch requests are not supported in protocol version %s"
                                        : "empty batch",
                     ver);
            reply_early_error(ex, NULL, JSONRPC_INVALID_REQUEST, msg, NULL, false);
        } else {
            ex->batch = true;
            ex->batch_replies = json_array();
            size_t i;
            json_t *e;
            json_array_foreach(v, i, e) handle_message(ex, info, e);
        }
    } else {
        handle_message(ex, info, v);
    }
    json_decref(v);
    ex->starting = false;
    ex->info = NULL;
    if (ex->pending == 0) {
        exchange_complete(ex);
        return NULL;
    }
    return ex;
}

/* ---------- core methods ---------- */

static void core_initialize(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)ctx;
    struct mcp_server *srv = call->ex->srv;
    const char *requested = json_string_value(json_object_get(params, "protocolVersion"));
    const char *chosen =
        requested && is_legacy_version(requested) ? requested : MCP_VERSION_LATEST_LEGACY;
    snprintf(call->version, sizeof(call->version), "%s", chosen);
    json_t *caps = json_deep_copy(srv->capabilities);
    if (strcmp(chosen, "2025-11-25") != 0)
        json_object_del(caps, "tasks"); /* tasks came with 2025-11-25 */
    json_t *r = json_pack("{s:s, s:o, s:o}", "protocolVersion", chosen, "capabilities", caps,
                          "serverInfo", mcp_server_info_json(srv));
    if (srv->info.instructions)
        json_object_set_new(r, "instructions", json_string(srv->info.instructions));
    mcp_call_reply(call, r);
}

static void core_ping(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)params, (void)ctx;
    mcp_call_reply(call, json_object());
}

static void core_discover(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)params, (void)ctx;
    struct mcp_server *srv = call->ex->srv;
    json_t *caps = json_deep_copy(srv->capabilities);
    /* Subscriptions and session log levels do not exist in the stateless revision, and tasks
     * are an extension there, which replaces the 2025-11-25 capability. */
    json_object_del(json_object_get(caps, "resources"), "subscribe");
    json_object_del(caps, "logging");
    json_object_del(caps, "tasks");
    if (srv->nsources) {
        json_t *ext = json_object_get(caps, "extensions");
        if (!json_is_object(ext)) {
            ext = json_object();
            json_object_set_new(caps, "extensions", ext);
        }
        json_object_set_new(ext, MCP_TASKS_EXTENSION, json_object());
    }
    json_t *r =
        json_pack("{s:o, s:o}", "supportedVersions", supported_versions(), "capabilities", caps);
    if (srv->info.instructions)
        json_object_set_new(r, "instructions", json_string(srv->info.instructions));
    mcp_call_reply(call, r);
}

/* A tool as tools/list shows it; task support is a 2025-11-25 notion (the stateless revision's
 * extension lets the server decide per call). */
static json_t *tool_json(const struct mcp_tool_entry *t, bool tasks)
{
    json_t *o = json_pack("{s:s, s:O}", "name", t->def.name, "inputSchema", t->input_schema);
    if (t->def.title)
        json_object_set_new(o, "title", json_string(t->def.title));
    if (t->def.description)
        json_object_set_new(o, "description", json_string(t->def.description));
    if (t->output_schema)
        json_object_set(o, "outputSchema", t->output_schema);
    unsigned f = t->def.flags;
    json_t *a =
        json_pack("{s:b, s:b, s:b, s:b}", "readOnlyHint", !!(f & MCP_TOOL_READ_ONLY),
                  "destructiveHint", !!(f & MCP_TOOL_DESTRUCTIVE), "idempotentHint",
                  !!(f & MCP_TOOL_IDEMPOTENT), "openWorldHint", !!(f & MCP_TOOL_OPEN_WORLD));
    if (t->def.title)
        json_object_set_new(a, "title", json_string(t->def.title));
    json_object_set_new(o, "annotations", a);
    if (tasks && (f & (MCP_TOOL_TASK | MCP_TOOL_TASK_REQUIRED)))
        json_object_set_new(o, "execution",
                            json_pack("{s:s}", "taskSupport",
                                      f & MCP_TOOL_TASK_REQUIRED ? "required" : "optional"));
    return o;
}

static void core_tools_list(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)ctx;
    struct mcp_server *srv = call->ex->srv;
    if (json_object_get(params, "cursor")) {
        /* Every tool fits on the first page, so no cursor was ever issued. */
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, "invalid cursor", NULL);
        return;
    }
    /* The list only changes when a tool is added: build it once, share it with each reply. */
    int rev = call->modern ? 1 : 0;
    if (!srv->tools_listed[rev]) {
        srv->tools_listed[rev] = json_array();
        for (size_t i = 0; i < srv->ntools; i++)
            if (!(srv->tools[i].def.flags & MCP_TOOL_HIDDEN))
                json_array_append_new(srv->tools_listed[rev],
                                      tool_json(&srv->tools[i], srv->nsources && !rev));
    }
    struct mcp_exchange *ex = call->ex;
    if (ex->batch || ex->streaming || !ex->ops) {
        mcp_call_reply(call, json_pack("{s:O}", "tools", srv->tools_listed[rev]));
        return;
    }
    /* A lone request: its reply is the serialized result (made once per revision) with the
     * request's id around it, with no JSON tree built or serialized for it. */
    char **cached = &srv->tools_result[rev];
    if (!*cached) {
        json_t *result = json_pack("{s:O}", "tools", srv->tools_listed[rev]);
        decorate_result(call, result);
        *cached = json_dumps(result, JSON_COMPACT);
        json_decref(result);
    }
    /* appended, not formatted: printf would copy the 11 KB list twice, a byte at a time */
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
    json_write(&b, call->id ? call->id : json_null());
    buf_puts(&b, ",\"result\":");
    buf_puts(&b, *cached);
    buf_puts(&b, "}");
    ex->ops->reply(ex->sink, 200, b.data, b.len);
    ex->ops = NULL;
    buf_release(&b);
    call_done(call);
}

static void core_tools_call(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)ctx;
    const char *name = json_string_value(json_object_get(params, "name"));
    if (!name) {
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, "params.name must be a string", NULL);
        return;
    }
    const struct mcp_tool_entry *tool = mcp_server_find_tool(call->ex->srv, name);
    if (!tool) {
        char msg[200];
        snprintf(msg, sizeof(msg), "Unknown tool: %.128s", name);
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, msg, NULL);
        return;
    }
    call->tool = tool;
    char msg[512];
    if (call->ex->srv->nsources) {
        bool task = false;
        int code = mcp_tasks_check_request(call, params, &task, msg, sizeof(msg));
        if (code) {
            mcp_call_error(call, code, msg, NULL);
            return;
        }
        unsigned f = tool->def.flags;
        if (task && (f & (MCP_TOOL_TASK | MCP_TOOL_TASK_REQUIRED))) {
            call->task_requested = true;
        } else if (task && !call->modern) {
            /* 2025-11-25: a task for a tool that does not offer them is method-not-found; the
             * extension leaves the choice to the server, which answers such a tool directly. */
            snprintf(msg, sizeof(msg), "Tool '%.128s' does not support task-augmented calls", name);
            mcp_call_error(call, JSONRPC_METHOD_NOT_FOUND, msg, NULL);
            return;
        } else if (f & MCP_TOOL_TASK_REQUIRED) {
            /* The tool cannot answer without a task; the stateless revision names what the
             * client must declare, 2025-11-25 says the call as made does not exist. */
            if (call->modern) {
                snprintf(msg, sizeof(msg),
                         "Missing required client capability: tool '%.128s' runs only as a task; "
                         "declare the " MCP_TASKS_EXTENSION " extension in the request's client "
                         "capabilities",
                         name);
                mcp_call_error(call, MCP_MISSING_CLIENT_CAPABILITY, msg,
                               json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions",
                                         MCP_TASKS_EXTENSION));
            } else {
                snprintf(msg, sizeof(msg),
                         "Tool '%.128s' requires a task-augmented call (params.task)", name);
                mcp_call_error(call, JSONRPC_METHOD_NOT_FOUND, msg, NULL);
            }
            return;
        }
    }
    const json_t *args = json_object_get(params, "arguments");
    json_t *empty = NULL;
    if (!args || json_is_null(args))
        args = empty = json_object();
    if (!json_is_object(args)) {
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, "params.arguments must be an object", NULL);
        return;
    }
    /* SEP-2243: under the stateless revision an annotated argument travels in Mcp-Param-{Name}
     * too, where a balancer may have routed on it; the two must agree. Calls are dispatched
     * while their exchange starts, so its headers are at hand. */
    const struct mcp_request_info *info = call->ex->info;
    if (call->modern && tool->nparams && info &&
        mcp_param_check(tool->params, tool->nparams, args, info->params, info->nparams,
                        info->params_truncated, msg, sizeof(msg)) < 0) {
        mcp_call_error(call, MCP_HEADER_MISMATCH, msg, NULL);
    } else if (!schema_validate(tool->input_schema, args, msg, sizeof(msg))) {
        mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS, "invalid arguments for %s: %s", name,
                           msg);
    } else {
        tool->def.fn(call, args, tool->def.ctx);
    }
    json_decref(empty);
}

void mcp_core_register_methods(struct mcp_server *srv)
{
    mcp_server_add_method(srv, "initialize", core_initialize, NULL, NULL, NULL);
    mcp_server_add_method(srv, "ping", core_ping, NULL, NULL, NULL);
    mcp_server_add_method(srv, "server/discover", core_discover, NULL, NULL, NULL);
    mcp_server_add_method(srv, "tools/list", core_tools_list, NULL, NULL, NULL);
    mcp_server_add_method(srv, "tools/call", core_tools_call, NULL, NULL, NULL);
}

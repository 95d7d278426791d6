/* Protocol handling for POST /mcp: the revisions, the checks of a request (its envelope, its
 * headers against its body), and the dispatch of each message to its method. What a call does
 * after that is in call.c; the registries it looks in, in registry.c. */
#include "mcp/mcp.h"
#include "mcp/mcp_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "mcp/headers.h"
#include "mcp/jsonrpc.h"

#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define META_LOGLEVEL "io.modelcontextprotocol/logLevel"

static const char *const legacy_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", NULL};

/* ---------- versions ---------- */

bool mcp_version_legacy(const char *v)
{
    for (const char *const *p = legacy_versions; *p; p++)
        if (strcmp(*p, v) == 0)
            return true;
    return false;
}

bool mcp_version_supported(const char *v)
{
    return v && (strcmp(v, MCP_VERSION_MODERN) == 0 || mcp_version_legacy(v));
}

json_t *mcp_supported_versions(void)
{
    json_t *a = json_array();
    json_array_append_new(a, json_string(MCP_VERSION_MODERN));
    for (const char *const *p = legacy_versions; *p; p++)
        json_array_append_new(a, json_string(*p));
    return a;
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
        *data = json_pack("{s:o, s:s}", "supported", mcp_supported_versions(), "requested",
                          meta_version);
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
        mcp_exchange_reply_json(ex, mcp_error_status(code, modern), e);
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
            mcp_exchange_reply_json(ex, 202, NULL);
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
        if (info->protocol_version && !mcp_version_legacy(info->protocol_version)) {
            snprintf(msg, sizeof(msg), "Bad Request: unsupported MCP-Protocol-Version '%.32s'",
                     info->protocol_version);
            data = json_pack("{s:o, s:s}", "supported", mcp_supported_versions(), "requested",
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
        mcp_exchange_complete(ex);
        return NULL;
    }
    return ex;
}

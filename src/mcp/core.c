/* The methods every server answers, whatever tools it has: initialize and ping (older
 * revisions), server/discover (the stateless revision), tools/list (built once per revision and
 * served from its serialized form) and tools/call (the tool found, its task support and
 * arguments checked, then its handler). */
#include "mcp/mcp.h"
#include "mcp/mcp_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json_write.h"
#include "mcp/headers.h"
#include "mcp/jsonrpc.h"
#include "mcp/schema.h"

static void core_initialize(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)ctx;
    struct mcp_server *srv = call->ex->srv;
    const char *requested = json_string_value(json_object_get(params, "protocolVersion"));
    const char *chosen =
        requested && mcp_version_legacy(requested) ? requested : MCP_VERSION_LATEST_LEGACY;
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
    json_t *r = json_pack("{s:o, s:o}", "supportedVersions", mcp_supported_versions(),
                          "capabilities", caps);
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
        mcp_call_decorate_result(call, result);
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
    mcp_call_done(call);
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

/* The server object and its registries: methods, tools (their schemas checked and completed when
 * added, and the tool error codes every output schema names), task sources, and the settings
 * replies read. Everything here runs at start-up or on the loop; nothing here answers a call. */
#include "mcp/mcp.h"
#include "mcp/mcp_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/ids.h"
#include "base/util.h"
#include "mcp/headers.h"
#include "mcp/schema.h"

struct mcp_server *mcp_server_new(const struct mcp_server_info *info)
{
    struct mcp_server *srv = xcalloc(1, sizeof(*srv));
    srv->info = *info;
    srv->capabilities = json_pack("{s:{s:b}}", "tools", "listChanged", 0);
    srv->reply_budget = MCP_REPLY_BUDGET_DEFAULT;
    rand_bytes(srv->input_key, sizeof(srv->input_key));
    srv->input_ttl_ms = MCP_INPUT_STATE_TTL_DEFAULT_MS;
    mcp_core_register_methods(srv);
    return srv;
}

void mcp_server_free(struct mcp_server *srv)
{
    if (!srv)
        return;
    for (size_t i = 0; i < srv->nmethods; i++)
        free(srv->methods[i].name);
    for (size_t i = 0; i < srv->ntools; i++) {
        json_decref(srv->tools[i].input_schema);
        json_decref(srv->tools[i].output_schema);
        free(srv->tools[i].params);
    }
    free(srv->methods);
    free(srv->tools);
    for (int i = 0; i < 2; i++) {
        json_decref(srv->tools_listed[i]);
        free(srv->tools_result[i]);
    }
    json_decref(srv->capabilities);
    explicit_bzero(srv->input_key, sizeof(srv->input_key));
    free(srv);
}

void mcp_server_set_input_state(struct mcp_server *srv, const unsigned char *key, int64_t ttl_ms)
{
    memcpy(srv->input_key, key, sizeof(srv->input_key));
    srv->input_ttl_ms = ttl_ms;
}

void mcp_server_add_method(struct mcp_server *srv, const char *method, mcp_method_fn fn, void *ctx,
                           const char *capability, json_t *capability_value)
{
    struct mcp_method_entry *m = NULL;
    for (size_t i = 0; i < srv->nmethods && !m; i++)
        if (strcmp(srv->methods[i].name, method) == 0)
            m = &srv->methods[i];
    if (m) {
        m->fn = fn;
        m->ctx = ctx;
    } else {
        srv->methods = xrealloc(srv->methods, (srv->nmethods + 1) * sizeof(*srv->methods));
        srv->methods[srv->nmethods++] = (struct mcp_method_entry){xstrdup(method), fn, ctx};
    }
    if (capability)
        json_object_set_new(srv->capabilities, capability,
                            capability_value ? capability_value : json_object());
    else
        json_decref(capability_value);
}

static json_t *parse_schema(const char *tool, const char *text)
{
    json_error_t e;
    json_t *s = json_loads(text, 0, &e);
    char msg[256];
    if (!s) {
        fprintf(stderr, "BUG: tool '%s' schema: %s\n", tool, e.text);
        abort();
    }
    if (!schema_check(s, msg, sizeof(msg))) {
        fprintf(stderr, "BUG: tool '%s' schema: %s\n", tool, msg);
        abort();
    }
    return s;
}

static void forget_tools_list(struct mcp_server *srv)
{
    for (int i = 0; i < 2; i++) {
        json_decref(srv->tools_listed[i]);
        srv->tools_listed[i] = NULL;
        free(srv->tools_result[i]);
        srv->tools_result[i] = NULL;
    }
}

/* ---------- tool errors ---------- */

static const char *const tool_error_names[] = {
    [MCP_TOOL_FAILED] = "failed",
    [MCP_TOOL_INVALID_ARGUMENTS] = "invalid_arguments",
    [MCP_TOOL_NOT_FOUND] = "not_found",
    [MCP_TOOL_ALREADY_EXISTS] = "already_exists",
    [MCP_TOOL_PERMISSION_DENIED] = "permission_denied",
    [MCP_TOOL_IS_A_DIRECTORY] = "is_a_directory",
    [MCP_TOOL_NOT_A_DIRECTORY] = "not_a_directory",
    [MCP_TOOL_NOT_EMPTY] = "not_empty",
    [MCP_TOOL_TOO_LARGE] = "too_large",
    [MCP_TOOL_NO_SPACE] = "no_space",
    [MCP_TOOL_BUSY] = "busy",
    [MCP_TOOL_TIMED_OUT] = "timed_out",
    [MCP_TOOL_CANCELLED] = "cancelled",
    [MCP_TOOL_UNAVAILABLE] = "unavailable",
};

const char *mcp_tool_error_name(enum mcp_tool_error code)
{
    if ((size_t)code >= ARRAY_SIZE(tool_error_names) || !tool_error_names[code])
        return tool_error_names[MCP_TOOL_FAILED];
    return tool_error_names[code];
}

enum mcp_tool_error mcp_tool_error_from_errno(int neg_errno)
{
    switch (-neg_errno) {
    case EINVAL:
    case ELOOP:
    case ENAMETOOLONG: return MCP_TOOL_INVALID_ARGUMENTS;
    case ENOENT: return MCP_TOOL_NOT_FOUND;
    case EEXIST: return MCP_TOOL_ALREADY_EXISTS;
    case EACCES:
    case EPERM:
    case EROFS: return MCP_TOOL_PERMISSION_DENIED;
    case EISDIR: return MCP_TOOL_IS_A_DIRECTORY;
    case ENOTDIR: return MCP_TOOL_NOT_A_DIRECTORY;
    case ENOTEMPTY: return MCP_TOOL_NOT_EMPTY;
    case EFBIG:
    case E2BIG:
    case EMSGSIZE: return MCP_TOOL_TOO_LARGE;
    case ENOSPC:
    case EDQUOT: return MCP_TOOL_NO_SPACE;
    case EBUSY:
    case EAGAIN: return MCP_TOOL_BUSY;
    case ETIMEDOUT: return MCP_TOOL_TIMED_OUT;
    case ECANCELED: return MCP_TOOL_CANCELLED;
    case ENOTSUP:
    case ENOSYS: return MCP_TOOL_UNAVAILABLE;
    }
    return MCP_TOOL_FAILED;
}

json_t *mcp_tool_error_json(enum mcp_tool_error code, const char *message)
{
    return json_pack("{s:{s:s, s:s}}", "error", "code", mcp_tool_error_name(code), "message",
                     message);
}

/* The "error" property every output schema gets. */
static json_t *tool_error_schema(void)
{
    json_t *codes = json_array();
    for (size_t i = 0; i < ARRAY_SIZE(tool_error_names); i++)
        json_array_append_new(codes, json_string(tool_error_names[i]));
    return json_pack("{s:s, s:s, s:{s:{s:s, s:o}, s:{s:s}}, s:[s, s]}", "type", "object",
                     "description", "Only when isError is true: why the call failed", "properties",
                     "code", "type", "string", "enum", codes, "message", "type", "string",
                     "required", "code", "message");
}

/* A success's output schema, made to hold for failed calls too (see mcp_server_add_tool). */
static json_t *parse_output_schema(const char *tool, const char *text)
{
    json_t *s = parse_schema(tool, text);
    json_t *props = json_object_get(s, "properties");
    if (!json_is_object(props) || json_object_get(props, "error") || json_object_get(s, "anyOf") ||
        json_object_get(s, "oneOf")) {
        fprintf(stderr,
                "BUG: tool '%s' output schema: needs properties, without error, anyOf or oneOf\n",
                tool);
        abort();
    }
    json_object_set_new(props, "error", tool_error_schema());
    json_t *required = json_object_get(s, "required");
    if (required) {
        json_object_set_new(
            s, "anyOf", json_pack("[{s:O}, {s:[s]}]", "required", required, "required", "error"));
        json_object_del(s, "required");
    }
    return s;
}

void mcp_server_add_tool(struct mcp_server *srv, const struct mcp_tool_def *def)
{
    srv->tools = xrealloc(srv->tools, (srv->ntools + 1) * sizeof(*srv->tools));
    struct mcp_tool_entry *t = &srv->tools[srv->ntools++];
    t->def = *def;
    t->input_schema = parse_schema(def->name, def->input_schema);
    t->output_schema =
        def->output_schema ? parse_output_schema(def->name, def->output_schema) : NULL;
    struct mcp_param_decl decls[MCP_PARAM_DECLS_MAX];
    char msg[256];
    int n = mcp_param_decls(t->input_schema, decls, msg, sizeof(msg));
    if (n < 0) {
        fprintf(stderr, "BUG: tool '%s' schema: %s\n", def->name, msg);
        abort();
    }
    t->params = n ? xmalloc((size_t)n * sizeof(decls[0])) : NULL;
    if (n)
        memcpy(t->params, decls, (size_t)n * sizeof(decls[0]));
    t->nparams = (size_t)n;
    forget_tools_list(srv);
}

json_t *mcp_server_tool_names(const struct mcp_server *srv)
{
    json_t *a = json_array();
    for (size_t i = 0; i < srv->ntools; i++)
        if (!(srv->tools[i].def.flags & MCP_TOOL_HIDDEN))
            json_array_append_new(a, json_string(srv->tools[i].def.name));
    return a;
}

void mcp_server_set_tool_observer(struct mcp_server *srv, mcp_tool_observer_fn fn)
{
    srv->observer = fn;
}

void mcp_server_add_task_source(struct mcp_server *srv, const char *id_prefix,
                                const struct mcp_task_source *ops, void *ctx)
{
    size_t n = strlen(id_prefix);
    bool clash = n == 0 || srv->nsources == MCP_TASK_SOURCES_MAX;
    for (size_t i = 0; i < srv->nsources && !clash; i++) {
        size_t m = strlen(srv->sources[i].prefix);
        clash = strncmp(srv->sources[i].prefix, id_prefix, m < n ? m : n) == 0;
    }
    if (clash) {
        fprintf(stderr, "BUG: task source prefix '%s' is empty, overlaps or is one too many\n",
                id_prefix);
        abort();
    }
    srv->sources[srv->nsources++] = (struct mcp_source_entry){id_prefix, ops, ctx};
    if (srv->nsources > 1)
        return;
    mcp_tasks_register_methods(srv);
    forget_tools_list(srv); /* execution.taskSupport appears */
}

const struct mcp_task_source *mcp_server_task_source(const struct mcp_server *srv,
                                                     const char *task_id, void **ctx)
{
    for (size_t i = 0; i < srv->nsources; i++) {
        const struct mcp_source_entry *s = &srv->sources[i];
        if (strncmp(task_id, s->prefix, strlen(s->prefix)) == 0) {
            *ctx = s->ctx;
            return s->ops;
        }
    }
    *ctx = NULL;
    return NULL;
}

const struct mcp_task_source *mcp_server_task_source_at(const struct mcp_server *srv, size_t i,
                                                        void **ctx)
{
    if (i >= srv->nsources) {
        *ctx = NULL;
        return NULL;
    }
    *ctx = srv->sources[i].ctx;
    return srv->sources[i].ops;
}

const struct mcp_method_entry *mcp_server_find_method(const struct mcp_server *srv,
                                                      const char *name)
{
    for (size_t i = 0; i < srv->nmethods; i++)
        if (strcmp(srv->methods[i].name, name) == 0)
            return &srv->methods[i];
    return NULL;
}

mcp_method_fn mcp_server_method(const struct mcp_server *srv, const char *method, void **ctx)
{
    const struct mcp_method_entry *m = mcp_server_find_method(srv, method);
    *ctx = m ? m->ctx : NULL;
    return m ? m->fn : NULL;
}

const struct mcp_tool_entry *mcp_server_find_tool(const struct mcp_server *srv, const char *name)
{
    for (size_t i = 0; i < srv->ntools; i++)
        if (strcmp(srv->tools[i].def.name, name) == 0)
            return &srv->tools[i];
    return NULL;
}

json_t *mcp_server_info_json(const struct mcp_server *srv)
{
    json_t *o = json_pack("{s:s, s:s}", "name", srv->info.name, "version", srv->info.version);
    if (srv->info.title)
        json_object_set_new(o, "title", json_string(srv->info.title));
    if (srv->info.description)
        json_object_set_new(o, "description", json_string(srv->info.description));
    if (srv->info.website_url)
        json_object_set_new(o, "websiteUrl", json_string(srv->info.website_url));
    return o;
}

void mcp_server_set_reply_budget(struct mcp_server *srv, size_t bytes)
{
    srv->reply_budget = bytes;
}

size_t mcp_server_reply_budget(const struct mcp_server *srv)
{
    return srv->reply_budget;
}

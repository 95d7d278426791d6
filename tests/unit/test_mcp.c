/* The protocol layer driven directly, with a sink that records what would go on the wire. */
#include <errno.h>
#include <jansson.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/err.h"
#include "base/util.h"
#include "harness.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp.h"
#include "mcp/reply.h"
#include "base/json_write.h"

struct capture {
    int status;
    int replies;
    int events;
    bool ended;
    struct buf body;
};

static void cap_reply(void *p, int status, const char *body, size_t len)
{
    struct capture *c = p;
    c->status = status;
    c->replies++;
    buf_append(&c->body, body ? body : "", len);
}

static void cap_event(void *p, const char *json, size_t len)
{
    struct capture *c = p;
    c->status = 200;
    c->events++;
    buf_append(&c->body, json, len);
    buf_puts(&c->body, "\n");
}

static void cap_end(void *p)
{
    struct capture *c = p;
    c->ended = true;
}

static const struct mcp_sink_ops ops = {cap_reply, cap_event, cap_end};

static struct mcp_call *parked; /* an asynchronous call waiting to be answered */

static void echo_tool(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)ctx;
    mcp_call_progress(call, 1, 2, "half");
    mcp_call_tool_result(call, NULL, json_pack("{s:O}", "args", args), false);
}

static void park_tool(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    parked = call;
}

static bool cancel_seen;
static void on_cancel(struct mcp_call *call, void *ctx)
{
    (void)call, (void)ctx;
    cancel_seen = true;
}

static void cancellable_tool(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    parked = call;
    mcp_call_on_cancel(call, on_cancel, NULL);
}

/* A tool with an output schema: n = 1 succeeds, 2 fails from an errno, else with a code. */
static void shaped_tool(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)ctx;
    json_int_t n = json_integer_value(json_object_get(args, "n"));
    struct err e = {0};
    if (n == 1) {
        mcp_call_tool_result(call, NULL, json_pack("{s:s}", "path", "/x"), false);
    } else if (n == 2) {
        err_set(&e, -ENOENT, "cannot read '/x': No such file or directory");
        mcp_call_tool_err(call, &e);
    } else {
        mcp_call_tool_fail(call, MCP_TOOL_BUSY, "at capacity: retry later");
    }
}

static struct mcp_server *server(void)
{
    struct mcp_server_info info = {.name = "t", .version = "1"};
    struct mcp_server *s = mcp_server_new(&info);
    struct mcp_tool_def echo = {
        .name = "echo",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},"
                        "\"additionalProperties\":false}",
        .fn = echo_tool};
    struct mcp_tool_def park = {
        .name = "park", .input_schema = "{\"type\":\"object\"}", .fn = park_tool};
    struct mcp_tool_def canc = {
        .name = "cancellable", .input_schema = "{\"type\":\"object\"}", .fn = cancellable_tool};
    struct mcp_tool_def hidden = {.name = "alias",
                                  .input_schema = "{\"type\":\"object\"}",
                                  .fn = echo_tool,
                                  .flags = MCP_TOOL_HIDDEN};
    mcp_server_add_tool(s, &echo);
    mcp_server_add_tool(s, &park);
    mcp_server_add_tool(s, &canc);
    mcp_server_add_tool(s, &hidden);
    struct mcp_tool_def shaped = {
        .name = "shaped",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":"
                         "\"string\"}},\"required\":[\"path\"]}",
        .fn = shaped_tool,
        .flags = MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT};
    mcp_server_add_tool(s, &shaped);
    return s;
}

/* Run one exchange; returns the parsed body (first line for SSE is not parsed). */
static json_t *run(struct mcp_server *s, struct mcp_request_info *info, const char *body,
                   struct capture *c)
{
    memset(c, 0, sizeof(*c));
    buf_init(&c->body, 0);
    mcp_exchange_start(s, info, body, strlen(body), &ops, c);
    json_t *v = c->body.data ? json_loads(c->body.data, 0, NULL) : NULL;
    return v;
}

static int err_code(json_t *v)
{
    return (int)json_integer_value(json_object_get(json_object_get(v, "error"), "code"));
}

TEST(initialize_negotiates_version)
{
    struct mcp_server *s = server();
    struct mcp_request_info info = {0};
    struct capture c;
    json_t *v = run(s, &info,
                    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                    "\"protocolVersion\":\"2025-06-18\"}}",
                    &c);
    CHECK_INT_EQ(c.status, 200);
    CHECK_STR_EQ(
        json_string_value(json_object_get(json_object_get(v, "result"), "protocolVersion")),
        "2025-06-18");
    json_decref(v);
    buf_release(&c.body);
    v = run(s, &info,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
            "\"protocolVersion\":\"2099-01-01\"}}",
            &c);
    CHECK_STR_EQ(
        json_string_value(json_object_get(json_object_get(v, "result"), "protocolVersion")),
        "2025-11-25");
    json_decref(v);
    buf_release(&c.body);
    mcp_server_free(s);
}

TEST(envelope_errors)
{
    struct mcp_server *s = server();
    struct mcp_request_info info = {0};
    struct capture c;
    json_t *v = run(s, &info, "{not json", &c);
    CHECK_INT_EQ(c.status, 400);
    CHECK_INT_EQ(err_code(v), JSONRPC_PARSE_ERROR);
    CHECK(json_is_null(json_object_get(v, "id")));
    json_decref(v);
    buf_release(&c.body);
    v = run(s, &info, "{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"ping\"}", &c);
    CHECK_INT_EQ(c.status, 400);
    CHECK_INT_EQ(err_code(v), JSONRPC_INVALID_REQUEST);
    CHECK_INT_EQ(json_integer_value(json_object_get(v, "id")), 7);
    json_decref(v);
    buf_release(&c.body);
    v = run(s, &info, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope\"}", &c);
    CHECK_INT_EQ(err_code(v), JSONRPC_METHOD_NOT_FOUND);
    json_decref(v);
    buf_release(&c.body);
    v = run(s, &info, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &c);
    CHECK_INT_EQ(c.status, 202);
    CHECK_INT_EQ(c.body.len, 0);
    buf_release(&c.body);
    mcp_server_free(s);
}

TEST(tools_list_hides_aliases)
{
    struct mcp_server *s = server();
    struct mcp_request_info info = {0};
    struct capture c;
    json_t *v = run(s, &info, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", &c);
    json_t *tools = json_object_get(json_object_get(v, "result"), "tools");
    CHECK_INT_EQ(json_array_size(tools), 4);
    json_decref(v);
    buf_release(&c.body);
    v = run(
        s, &info,
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"alias\"}}",
        &c);
    CHECK(json_object_get(v, "result") != NULL);
    json_decref(v);
    buf_release(&c.body);
    mcp_server_free(s);
}

TEST(tool_argument_errors_are_results)
{
    struct mcp_server *s = server();
    struct mcp_request_info info = {0};
    struct capture c;
    json_t *v = run(s, &info,
                    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"
                    "call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"n\":\"x\"}}}",
                    &c);
    json_t *r = json_object_get(v, "result");
    CHECK(json_is_true(json_object_get(r, "isError")));
    CHECK_STR_CONTAINS(json_string_value(json_object_get(
                           json_array_get(json_object_get(r, "content"), 0), "text")),
                       "field 'n': must be an integer");
    json_decref(v);
    buf_release(&c.body);
    v = run(s, &info,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"
            "call\",\"params\":{\"name\":\"missing\"}}",
            &c);
    CHECK_INT_EQ(err_code(v), JSONRPC_INVALID_PARAMS);
    json_decref(v);
    buf_release(&c.body);
    mcp_server_free(s);
}

/* One tools/call of shaped with n; returns its result (the caller frees the reply v). */
static json_t *call_shaped(struct mcp_server *s, int n, json_t **v)
{
    struct mcp_request_info info = {0};
    struct capture c;
    char body[200];
    snprintf(body, sizeof(body),
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"shaped\",\"arguments\":{\"n\":%d}}}",
             n);
    *v = run(s, &info, body, &c);
    buf_release(&c.body);
    return json_object_get(*v, "result");
}

TEST(output_schema_holds_for_errors_too)
{
    struct mcp_server *s = server();
    struct mcp_request_info info = {0};
    struct capture c;
    json_t *v = run(s, &info, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", &c);
    buf_release(&c.body);
    json_t *tools = json_object_get(json_object_get(v, "result"), "tools");
    json_t *schema = NULL, *ann = NULL;
    size_t i;
    json_t *t;
    json_array_foreach(tools, i,
                       t) if (strcmp(json_string_value(json_object_get(t, "name")), "shaped") == 0)
    {
        schema = json_object_get(t, "outputSchema");
        ann = json_object_get(t, "annotations");
    }
    CHECK(schema != NULL);
    /* required moved into anyOf with the error's; an error property of code and message */
    CHECK(json_object_get(schema, "required") == NULL);
    char *any = json_dumps(json_object_get(schema, "anyOf"), JSON_COMPACT);
    CHECK_STR_EQ(any, "[{\"required\":[\"path\"]},{\"required\":[\"error\"]}]");
    free(any);
    json_t *e = json_object_get(json_object_get(schema, "properties"), "error");
    CHECK_STR_EQ(json_string_value(json_object_get(e, "type")), "object");
    CHECK(json_object_get(json_object_get(e, "properties"), "code") != NULL);
    CHECK(json_is_true(json_object_get(ann, "readOnlyHint")));
    CHECK(json_is_true(json_object_get(ann, "idempotentHint")));
    CHECK(json_is_false(json_object_get(ann, "destructiveHint")));
    CHECK(json_is_false(json_object_get(ann, "openWorldHint")));
    json_decref(v);

    json_t *r = call_shaped(s, 1, &v);
    CHECK_STR_EQ(
        json_string_value(json_object_get(json_object_get(r, "structuredContent"), "path")), "/x");
    CHECK(json_object_get(r, "isError") == NULL);
    json_decref(v);

    struct {
        int n;
        const char *code, *message;
    } cases[] = {
        {2, "not_found", "cannot read '/x': No such file or directory"},
        {3, "busy", "at capacity: retry later"},
        /* arguments that break the input schema */
        {-1, "invalid_arguments", "invalid arguments for shaped"},
    };
    for (size_t k = 0; k < ARRAY_SIZE(cases); k++) {
        if (cases[k].n < 0) {
            v = run(s, &info,
                    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                    "\"name\":\"shaped\",\"arguments\":{\"n\":\"x\"}}}",
                    &c);
            buf_release(&c.body);
            r = json_object_get(v, "result");
        } else {
            r = call_shaped(s, cases[k].n, &v);
        }
        CHECK(json_is_true(json_object_get(r, "isError")));
        json_t *err = json_object_get(json_object_get(r, "structuredContent"), "error");
        CHECK_STR_EQ(json_string_value(json_object_get(err, "code")), cases[k].code);
        CHECK_STR_CONTAINS(json_string_value(json_object_get(err, "message")), cases[k].message);
        /* the same words as text for the model */
        CHECK_STR_CONTAINS(json_string_value(json_object_get(
                               json_array_get(json_object_get(r, "content"), 0), "text")),
                           cases[k].message);
        json_decref(v);
    }
    mcp_server_free(s);
}

/* Start a call of park, which waits in parked to be answered. */
static struct mcp_exchange *start_park(struct mcp_server *s, struct mcp_request_info *info,
                                       struct capture *c)
{
    memset(c, 0, sizeof(*c));
    buf_init(&c->body, 0);
    const char *body =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"park\"}}";
    return mcp_exchange_start(s, info, body, strlen(body), &ops, c);
}

TEST(tool_errors_without_structured_content_get_the_error_shape)
{
    struct mcp_server *s = server();
    struct mcp_request_info info = {0};
    struct capture c;
    start_park(s, &info, &c);
    mcp_call_tool_result(parked, json_pack("[{s:s, s:s}]", "type", "text", "text", "it broke"),
                         NULL, true);
    json_t *v = json_loads(c.body.data, 0, NULL);
    json_t *e = json_object_get(json_object_get(json_object_get(v, "result"), "structuredContent"),
                                "error");
    CHECK_STR_EQ(json_string_value(json_object_get(e, "code")), "failed");
    CHECK_STR_EQ(json_string_value(json_object_get(e, "message")), "it broke");
    json_decref(v);
    buf_release(&c.body);
    mcp_server_free(s);
}

TEST(tool_error_codes_follow_errno)
{
    CHECK_STR_EQ(mcp_tool_error_name(mcp_tool_error_from_errno(-ENOENT)), "not_found");
    CHECK_STR_EQ(mcp_tool_error_name(mcp_tool_error_from_errno(-EINVAL)), "invalid_arguments");
    CHECK_STR_EQ(mcp_tool_error_name(mcp_tool_error_from_errno(-EBUSY)), "busy");
    CHECK_STR_EQ(mcp_tool_error_name(mcp_tool_error_from_errno(-EISDIR)), "is_a_directory");
    CHECK_STR_EQ(mcp_tool_error_name(mcp_tool_error_from_errno(-ENOTEMPTY)), "not_empty");
    CHECK_STR_EQ(mcp_tool_error_name(mcp_tool_error_from_errno(-EIO)), "failed");
    CHECK_STR_EQ(mcp_tool_error_name(mcp_tool_error_from_errno(0)), "failed");
    CHECK_STR_EQ(mcp_tool_error_name((enum mcp_tool_error)99), "failed");
}

TEST(progress_streams_only_with_token_and_sse)
{
    struct mcp_server *s = server();
    struct mcp_request_info info = {.accepts_sse = true};
    struct capture c;
    run(s, &info,
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"
        "call\",\"params\":{\"name\":\"echo\",\"_meta\":{\"progressToken\":\"p\"}}}",
        &c);
    CHECK_INT_EQ(c.events, 2);
    CHECK(c.ended);
    CHECK_STR_CONTAINS(c.body.data, "\"progressToken\":\"p\"");
    buf_release(&c.body);
    info.accepts_sse = false;
    json_t *v = run(s, &info,
                    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"
                    "call\",\"params\":{\"name\":\"echo\",\"_meta\":{\"progressToken\":\"p\"}}}",
                    &c);
    CHECK_INT_EQ(c.events, 0);
    CHECK_INT_EQ(c.replies, 1);
    CHECK(json_object_get(v, "result") != NULL);
    json_decref(v);
    buf_release(&c.body);
    mcp_server_free(s);
}

TEST(async_call_answers_later_and_detach_drops_output)
{
    struct mcp_server *s = server();
    struct mcp_request_info info = {0};
    struct capture c;
    struct mcp_exchange *ex = start_park(s, &info, &c);
    CHECK(ex != NULL);
    CHECK_INT_EQ(c.replies, 0);
    mcp_call_tool_error(parked, "late");
    CHECK_INT_EQ(c.replies, 1);
    CHECK_STR_CONTAINS(c.body.data, "late");
    buf_release(&c.body);

    ex = start_park(s, &info, &c);
    mcp_exchange_detach(ex);
    mcp_call_tool_error(parked, "nobody listens");
    CHECK_INT_EQ(c.replies, 0);
    buf_release(&c.body);
    mcp_server_free(s);
}

TEST(modern_detach_cancels)
{
    struct mcp_server *s = server();
    struct mcp_request_info info = {
        .protocol_version = "2026-07-28", .mcp_method = "tools/call", .mcp_name = "cancellable"};
    struct capture c;
    memset(&c, 0, sizeof(c));
    const char *body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"
                       "call\",\"params\":{\"name\":\"cancellable\","
                       "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                       "\"io.modelcontextprotocol/clientCapabilities\":{}}}}";
    cancel_seen = false;
    struct mcp_exchange *ex = mcp_exchange_start(s, &info, body, strlen(body), &ops, &c);
    CHECK(ex != NULL);
    mcp_exchange_detach(ex);
    CHECK(cancel_seen);
    CHECK(mcp_call_cancelled(parked));
    mcp_call_tool_error(parked, "cancelled");
    CHECK_INT_EQ(c.replies, 0);
    mcp_server_free(s);
}

static const char modern_meta[] =
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
    "\"io.modelcontextprotocol/clientCapabilities\":{}}";

TEST(modern_headers_checked)
{
    struct mcp_server *s = server();
    struct capture c;
    char body[512];
    snprintf(body, sizeof(body),
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"
             "call\",\"params\":{\"name\":\"echo\",%s}}",
             modern_meta);
    struct mcp_request_info info = {.protocol_version = "2026-07-28", .mcp_method = "tools/call"};
    json_t *v = run(s, &info, body, &c);
    CHECK_INT_EQ(c.status, 400);
    CHECK_INT_EQ(err_code(v), MCP_HEADER_MISMATCH);
    json_decref(v);
    buf_release(&c.body);
    info.mcp_name = "=?base64?ZWNobw==?="; /* "echo" */
    v = run(s, &info, body, &c);
    CHECK_INT_EQ(c.status, 200);
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(v, "result"), "resultType")),
                 "complete");
    json_decref(v);
    buf_release(&c.body);
    info.mcp_method = "tools/list";
    v = run(s, &info, body, &c);
    CHECK_INT_EQ(err_code(v), MCP_HEADER_MISMATCH);
    json_decref(v);
    buf_release(&c.body);
    snprintf(body, sizeof(body),
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{%s}}", modern_meta);
    info.mcp_method = "ping";
    v = run(s, &info, body, &c);
    CHECK_INT_EQ(c.status, 404);
    CHECK_INT_EQ(err_code(v), JSONRPC_METHOD_NOT_FOUND);
    json_decref(v);
    buf_release(&c.body);
    mcp_server_free(s);
}

/* SEP-2243: a tool's x-mcp-header arguments must come in Mcp-Param-{Name} too, under the
 * stateless revision; a mismatch is 400 and -32020 before the tool runs. */
TEST(modern_param_headers_checked)
{
    struct mcp_server *s = server();
    struct mcp_tool_def routed = {
        .name = "routed",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"region\":{\"type\":\"string\","
                        "\"x-mcp-header\":\"Region\"},\"n\":{\"type\":\"integer\"}}}",
        .fn = echo_tool};
    mcp_server_add_tool(s, &routed);
    struct capture c;
    char body[512];
    snprintf(body, sizeof(body),
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"routed\",\"arguments\":{\"region\":\"Hello\"},%s}}",
             modern_meta);
    struct mcp_request_info info = {
        .protocol_version = "2026-07-28", .mcp_method = "tools/call", .mcp_name = "routed"};
    /* missing */
    json_t *v = run(s, &info, body, &c);
    CHECK_INT_EQ(c.status, 400);
    CHECK_INT_EQ(err_code(v), MCP_HEADER_MISMATCH);
    CHECK_STR_CONTAINS(json_string_value(json_object_get(json_object_get(v, "error"), "message")),
                       "Mcp-Param-Region header is required");
    json_decref(v);
    buf_release(&c.body);
    /* bad base64, then a different value */
    struct mcp_header_value h = {"region", 6, "=?base64?SGVsbG8?=", 18};
    info.params = &h;
    info.nparams = 1;
    v = run(s, &info, body, &c);
    CHECK_INT_EQ(c.status, 400);
    CHECK_INT_EQ(err_code(v), MCP_HEADER_MISMATCH);
    json_decref(v);
    buf_release(&c.body);
    h.value = "Bye";
    h.value_len = 3;
    v = run(s, &info, body, &c);
    CHECK_INT_EQ(err_code(v), MCP_HEADER_MISMATCH);
    json_decref(v);
    buf_release(&c.body);
    /* equal: the tool runs */
    h.value = "=?base64?SGVsbG8=?=";
    h.value_len = strlen(h.value);
    v = run(s, &info, body, &c);
    CHECK_INT_EQ(c.status, 200);
    CHECK(json_object_get(v, "result") != NULL);
    json_decref(v);
    buf_release(&c.body);
    /* the older revisions have no such headers: not checked */
    struct mcp_request_info legacy = {.protocol_version = "2025-11-25"};
    v = run(s, &legacy,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"routed\",\"arguments\":{\"region\":\"Hello\"}}}",
            &c);
    CHECK_INT_EQ(c.status, 200);
    CHECK(json_object_get(v, "result") != NULL);
    json_decref(v);
    buf_release(&c.body);
    /* Mcp-Name is decoded as strictly: bad padding is a mismatch */
    info.mcp_name = "=?base64?cm91dGVk?=";
    v = run(s, &info, body, &c);
    CHECK_INT_EQ(c.status, 200);
    json_decref(v);
    buf_release(&c.body);
    info.mcp_name = "=?base64?ZWNobw?="; /* "echo" without its padding */
    snprintf(body, sizeof(body),
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"echo\",%s}}",
             modern_meta);
    v = run(s, &info, body, &c);
    CHECK_INT_EQ(c.status, 400);
    CHECK_STR_CONTAINS(json_string_value(json_object_get(json_object_get(v, "error"), "message")),
                       "Mcp-Name header has invalid base64");
    json_decref(v);
    buf_release(&c.body);
    mcp_server_free(s);
}

TEST(modern_unsupported_version)
{
    struct mcp_server *s = server();
    struct capture c;
    const char *body =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{\"_meta\":{"
        "\"io.modelcontextprotocol/protocolVersion\":\"1900-01-01\","
        "\"io.modelcontextprotocol/clientCapabilities\":{}}}}";
    struct mcp_request_info info = {.protocol_version = "1900-01-01",
                                    .mcp_method = "server/discover"};
    json_t *v = run(s, &info, body, &c);
    CHECK_INT_EQ(c.status, 400);
    CHECK_INT_EQ(err_code(v), MCP_UNSUPPORTED_PROTOCOL_VERSION);
    json_t *data = json_object_get(json_object_get(v, "error"), "data");
    CHECK_STR_EQ(json_string_value(json_object_get(data, "requested")), "1900-01-01");
    CHECK_INT_EQ(json_array_size(json_object_get(data, "supported")), 4);
    json_decref(v);
    buf_release(&c.body);
    mcp_server_free(s);
}

TEST(batch_only_in_2025_03_26)
{
    struct mcp_server *s = server();
    struct capture c;
    struct mcp_request_info info = {0};
    json_t *v = run(s, &info,
                    "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\","
                    "\"method\":\"n\"},"
                    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"nope\"}]",
                    &c);
    CHECK_INT_EQ(c.status, 200);
    CHECK_INT_EQ(json_array_size(v), 2);
    json_decref(v);
    buf_release(&c.body);
    info.protocol_version = "2025-06-18";
    v = run(s, &info, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", &c);
    CHECK_INT_EQ(c.status, 400);
    CHECK_INT_EQ(err_code(v), JSONRPC_INVALID_REQUEST);
    json_decref(v);
    buf_release(&c.body);
    mcp_server_free(s);
}

TEST(unsupported_legacy_header)
{
    struct mcp_server *s = server();
    struct capture c;
    struct mcp_request_info info = {.protocol_version = "2024-01-01"};
    json_t *v = run(s, &info, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &c);
    CHECK_INT_EQ(c.status, 400);
    json_decref(v);
    buf_release(&c.body);
    mcp_server_free(s);
}

TEST(reply_cuts_keep_head_and_tail_within_the_budget)
{
    struct reply_cut c = reply_cut_text("short\n", 6, 100);
    CHECK_INT_EQ(c.head, 6);
    CHECK_INT_EQ(c.tail, 6);
    /* lines of 10 bytes ("line 0001\n"...): cuts at line breaks, within the budget */
    struct buf b;
    buf_init(&b, 0);
    for (int i = 1; i <= 1000; i++)
        buf_printf(&b, "line %04d\n", i);
    c = reply_cut_text(b.data, b.len, 1000);
    CHECK(c.head < c.tail);
    CHECK(json_string_cost(b.data, c.head) + json_string_cost(b.data + c.tail, b.len - c.tail) <=
          1000);
    CHECK(c.head > 300 && b.len - c.tail > 300);
    CHECK(b.data[c.head - 1] == '\n');
    CHECK(b.data[c.tail - 1] == '\n');
    /* without line breaks: character boundaries only */
    const char *euros = "\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC"; /* 12 bytes */
    c = reply_cut_text(euros, 12, 8);
    CHECK_INT_EQ(c.head, 3);
    CHECK_INT_EQ(c.tail, 9);
    buf_release(&b);

    size_t a, z;
    reply_share(10, 20, 100, &a, &z);
    CHECK(a == 10 && z == 20);
    reply_share(10, 2000, 100, &a, &z); /* the small one whole, the large the rest */
    CHECK(a == 10 && z == 90);
    reply_share(2000, 3000, 100, &a, &z); /* both large: half each */
    CHECK(a == 50 && z == 50);
    reply_share(3000, 30, 100, &a, &z);
    CHECK(a == 70 && z == 30);
}

TEST(reply_text_content_takes_the_buffer)
{
    struct buf b;
    buf_init(&b, 0);
    buf_append(&b, "exit code 0\n\0tail", 17);
    json_t *content = reply_text_content(&b);
    CHECK_INT_EQ(b.len, 0);
    CHECK_INT_EQ(json_array_size(content), 1);
    const json_t *block = json_array_get(content, 0);
    CHECK_STR_EQ(json_string_value(json_object_get(block, "type")), "text");
    const json_t *text = json_object_get(block, "text");
    CHECK_INT_EQ(json_string_length(text), 17);
    CHECK(memcmp(json_string_value(text), "exit code 0\n\0tail", 17) == 0);
    json_decref(content);
    buf_release(&b);
}

/* --- tasks: a source of tasks held in memory, and a tool that makes them --- */

struct fake_task {
    char id[16], user[16];
    enum mcp_task_status status;
    bool tool_error;
    json_t *result;
};
static struct fake_task ftasks[8];
static int nftasks;
static void (*fwait_cb)(void *);
static void *fwait_ctx;
static int fwait_cancels;

static struct fake_task *ftask(const char *user, const char *id)
{
    for (int i = 0; i < nftasks; i++)
        if (strcmp(ftasks[i].id, id) == 0 && strcmp(ftasks[i].user, user) == 0)
            return &ftasks[i];
    return NULL;
}

static void ftask_fill(const struct fake_task *f, bool want_result, struct mcp_task *out)
{
    snprintf(out->id, sizeof(out->id), "%s", f->id);
    out->status = f->status;
    out->status_message = f->status == MCP_TASK_WORKING ? strdup("busy") : NULL;
    out->created_ms = 1767225600000; /* 2026-01-01T00:00:00Z */
    out->updated_ms = out->created_ms + 1500;
    out->ttl_ms = -1;
    out->poll_ms = 5000;
    out->tool_error = f->tool_error;
    out->result = want_result && f->result ? json_deep_copy(f->result) : NULL;
}

static int f_get(void *ctx, const char *user, const char *id, bool want_result,
                 struct mcp_task *out, struct err *err)
{
    (void)ctx;
    struct fake_task *f = ftask(user, id);
    if (!f)
        return err_set(err, -ENOENT, "task '%s' not found", id);
    ftask_fill(f, want_result, out);
    return 0;
}

static void *f_wait(void *ctx, const char *id, void (*cb)(void *), void *cb_ctx)
{
    (void)ctx, (void)id;
    fwait_cb = cb;
    fwait_ctx = cb_ctx;
    return &fwait_cb;
}

static void f_wait_cancel(void *ctx, void *handle)
{
    (void)ctx, (void)handle;
    fwait_cb = NULL;
    fwait_cancels++;
}

static int f_cancel(void *ctx, const char *user, const char *id, struct err *err)
{
    (void)ctx;
    struct fake_task *f = ftask(user, id);
    if (!f)
        return err_set(err, -ENOENT, "not found");
    if (f->status != MCP_TASK_WORKING)
        return err_set(err, -EALREADY, "ended");
    f->status = MCP_TASK_CANCELLED;
    return 0;
}

static int f_list(void *ctx, const char *user, const char *cursor, unsigned limit,
                  void (*each)(const struct mcp_task *t, void *each_ctx), void *each_ctx,
                  char next[64], struct err *err)
{
    (void)ctx, (void)limit;
    if (cursor)
        return err_set(err, -EINVAL, "bad cursor");
    for (int i = nftasks - 1; i >= 0; i--)
        if (strcmp(ftasks[i].user, user) == 0) {
            struct mcp_task t = {0};
            ftask_fill(&ftasks[i], false, &t);
            each(&t, each_ctx);
            mcp_task_release(&t);
        }
    next[0] = '\0';
    return 0;
}

static const struct mcp_task_source fake_source = {
    .get = f_get, .wait = f_wait, .wait_cancel = f_wait_cancel, .cancel = f_cancel, .list = f_list};

/* "job": with a task asked for, makes one for the caller; {"refuse":true} is refused. */
static void job_tool(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)ctx;
    if (json_is_true(json_object_get(args, "refuse"))) {
        mcp_call_tool_error(call, "job refused: no such thing");
        return;
    }
    if (!mcp_call_task_requested(call)) {
        mcp_call_tool_result(call, NULL, json_pack("{s:s}", "done", "now"), false);
        return;
    }
    struct fake_task *f = &ftasks[nftasks++];
    snprintf(f->id, sizeof(f->id), "task%d", nftasks);
    snprintf(f->user, sizeof(f->user), "%s", mcp_call_principal(call)->user_id);
    f->status = MCP_TASK_WORKING;
    f->tool_error = false;
    f->result = NULL;
    struct mcp_task t = {0};
    ftask_fill(f, false, &t);
    mcp_call_task_created(call, &t, "started a job");
    mcp_task_release(&t);
}

static struct mcp_server *task_server(void)
{
    for (int i = 0; i < nftasks; i++)
        json_decref(ftasks[i].result);
    nftasks = 0;
    fwait_cb = NULL;
    fwait_cancels = 0;
    struct mcp_server *s = server();
    struct mcp_tool_def job = {.name = "job",
                               .input_schema = "{\"type\":\"object\",\"properties\":{\"refuse\":"
                                               "{\"type\":\"boolean\"}}}",
                               .fn = job_tool,
                               .flags = MCP_TOOL_TASK};
    mcp_server_add_tool(s, &job);
    mcp_server_add_task_source(s, "task", &fake_source, NULL);
    return s;
}

static void task_finish(const char *id, const char *result_json)
{
    for (int i = 0; i < nftasks; i++)
        if (strcmp(ftasks[i].id, id) == 0) {
            ftasks[i].status = MCP_TASK_COMPLETED;
            ftasks[i].result = json_loads(result_json, 0, NULL);
            ftasks[i].tool_error = json_is_true(json_object_get(ftasks[i].result, "isError"));
        }
}

#define TASKS_EXT "{\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}}"

/* One request of user: under 2025-11-25 (caps NULL) or the stateless revision with those client
 * capabilities; params is a JSON object's text. Returns the parsed reply (NULL while pending). */
static json_t *task_req(struct mcp_server *s, const char *user, const char *caps,
                        const char *method, const char *params, struct capture *c)
{
    json_t *p = json_loads(params, 0, NULL);
    struct mcp_request_info info = {.protocol_version = caps ? "2026-07-28" : "2025-11-25",
                                    .mcp_method = method};
    snprintf(info.principal.user_id, sizeof(info.principal.user_id), "%s", user);
    const char *name = json_string_value(json_object_get(p, "name"));
    if (!name)
        name = json_string_value(json_object_get(p, "taskId"));
    info.mcp_name = name;
    if (caps)
        json_object_set_new(p, "_meta",
                            json_pack("{s:s, s:o}", "io.modelcontextprotocol/protocolVersion",
                                      "2026-07-28", "io.modelcontextprotocol/clientCapabilities",
                                      json_loads(caps, 0, NULL)));
    json_t *m =
        json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id", 1, "method", method, "params", p);
    char *body = json_dumps(m, JSON_COMPACT);
    json_t *v = run(s, &info, body, c);
    buf_release(&c->body);
    free(body);
    json_decref(m);
    return v;
}

static json_t *res(json_t *v)
{
    return json_object_get(v, "result");
}

static const char *str_at(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

TEST(tasks_capabilities_by_revision)
{
    struct mcp_server *s = task_server();
    struct capture c;
    json_t *v = task_req(s, "u1", NULL, "initialize", "{\"protocolVersion\":\"2025-11-25\"}", &c);
    json_t *tasks = json_object_get(json_object_get(res(v), "capabilities"), "tasks");
    CHECK(json_is_object(json_object_get(tasks, "list")));
    CHECK(json_is_object(json_object_get(tasks, "cancel")));
    CHECK(json_is_object(
        json_object_get(json_object_get(json_object_get(tasks, "requests"), "tools"), "call")));
    json_decref(v);
    /* tasks came with 2025-11-25 */
    v = task_req(s, "u1", NULL, "initialize", "{\"protocolVersion\":\"2025-06-18\"}", &c);
    CHECK(!json_object_get(json_object_get(res(v), "capabilities"), "tasks"));
    json_decref(v);
    v = task_req(s, "u1", NULL, "tools/list", "{}", &c);
    size_t i;
    json_t *t;
    int with_execution = 0;
    json_array_foreach(json_object_get(res(v), "tools"), i, t)
    {
        json_t *ex = json_object_get(t, "execution");
        if (ex) {
            with_execution++;
            CHECK_STR_EQ(str_at(t, "name"), "job");
            CHECK_STR_EQ(str_at(ex, "taskSupport"), "optional");
        }
    }
    CHECK_INT_EQ(with_execution, 1);
    json_decref(v);
    /* the stateless revision: the extension in server/discover, nothing per tool */
    v = task_req(s, "u1", "{}", "server/discover", "{}", &c);
    json_t *caps = json_object_get(res(v), "capabilities");
    CHECK(!json_object_get(caps, "tasks"));
    CHECK(json_is_object(
        json_object_get(json_object_get(caps, "extensions"), "io.modelcontextprotocol/tasks")));
    json_decref(v);
    v = task_req(s, "u1", "{}", "tools/list", "{}", &c);
    json_array_foreach(json_object_get(res(v), "tools"), i, t)
        CHECK(!json_object_get(t, "execution"));
    json_decref(v);
    mcp_server_free(s);
}

TEST(tasks_2025_11_25_lifecycle)
{
    struct mcp_server *s = task_server();
    struct capture c;
    json_t *v = task_req(s, "u1", NULL, "tools/call",
                         "{\"name\":\"job\",\"arguments\":{},\"task\":{\"ttl\":60000}}", &c);
    json_t *task = json_object_get(res(v), "task");
    CHECK_STR_EQ(str_at(task, "taskId"), "task1");
    CHECK_STR_EQ(str_at(task, "status"), "working");
    CHECK_STR_EQ(str_at(task, "statusMessage"), "busy");
    CHECK_STR_EQ(str_at(task, "createdAt"), "2026-01-01T00:00:00.000Z");
    CHECK_STR_EQ(str_at(task, "lastUpdatedAt"), "2026-01-01T00:00:01.500Z");
    CHECK(json_is_null(json_object_get(task, "ttl")));
    CHECK_INT_EQ(json_integer_value(json_object_get(task, "pollInterval")), 5000);
    CHECK_STR_EQ(str_at(json_object_get(res(v), "_meta"),
                        "io.modelcontextprotocol/model-immediate-response"),
                 "started a job");
    json_decref(v);
    /* the same tool without a task answers at once */
    v = task_req(s, "u1", NULL, "tools/call", "{\"name\":\"job\",\"arguments\":{}}", &c);
    CHECK_STR_EQ(str_at(json_object_get(res(v), "structuredContent"), "done"), "now");
    json_decref(v);

    v = task_req(s, "u1", NULL, "tasks/get", "{\"taskId\":\"task1\"}", &c);
    CHECK_STR_EQ(str_at(res(v), "status"), "working");
    CHECK(!json_object_get(res(v), "result"));
    json_decref(v);
    /* tasks/result waits for the end */
    v = task_req(s, "u1", NULL, "tasks/result", "{\"taskId\":\"task1\"}", &c);
    CHECK(v == NULL);
    CHECK_INT_EQ(c.replies, 0);
    CHECK(fwait_cb != NULL);
    task_finish("task1", "{\"content\":[{\"type\":\"text\",\"text\":\"all done\"}],"
                         "\"structuredContent\":{\"n\":1}}");
    buf_init(&c.body, 0);
    fwait_cb(fwait_ctx);
    CHECK_INT_EQ(c.replies, 1);
    v = json_loads(c.body.data, 0, NULL);
    buf_release(&c.body);
    CHECK_STR_EQ(str_at(json_array_get(json_object_get(res(v), "content"), 0), "text"), "all done");
    CHECK_STR_EQ(str_at(json_object_get(json_object_get(res(v), "_meta"),
                                        "io.modelcontextprotocol/related-task"),
                        "taskId"),
                 "task1");
    json_decref(v);
    v = task_req(s, "u1", NULL, "tasks/get", "{\"taskId\":\"task1\"}", &c);
    CHECK_STR_EQ(str_at(res(v), "status"), "completed");
    json_decref(v);
    /* an ended task answers tasks/result at once */
    v = task_req(s, "u1", NULL, "tasks/result", "{\"taskId\":\"task1\"}", &c);
    CHECK_INT_EQ(
        json_integer_value(json_object_get(json_object_get(res(v), "structuredContent"), "n")), 1);
    json_decref(v);
    /* ...and refuses to be cancelled */
    v = task_req(s, "u1", NULL, "tasks/cancel", "{\"taskId\":\"task1\"}", &c);
    CHECK_INT_EQ(err_code(v), JSONRPC_INVALID_PARAMS);
    CHECK_STR_CONTAINS(str_at(json_object_get(v, "error"), "message"),
                       "already in terminal status 'completed'");
    json_decref(v);

    /* a second task, cancelled while it works; a third that ends with a tool error */
    json_decref(task_req(s, "u1", NULL, "tools/call", "{\"name\":\"job\",\"task\":{}}", &c));
    v = task_req(s, "u1", NULL, "tasks/cancel", "{\"taskId\":\"task2\"}", &c);
    CHECK_STR_EQ(str_at(res(v), "taskId"), "task2");
    CHECK_STR_EQ(str_at(res(v), "status"), "cancelled");
    json_decref(v);
    json_decref(task_req(s, "u1", NULL, "tools/call", "{\"name\":\"job\",\"task\":{}}", &c));
    task_finish("task3", "{\"content\":[],\"isError\":true}");
    v = task_req(s, "u1", NULL, "tasks/get", "{\"taskId\":\"task3\"}", &c);
    CHECK_STR_EQ(str_at(res(v), "status"), "failed");
    json_decref(v);

    /* tasks/list: the caller's own */
    v = task_req(s, "u1", NULL, "tasks/list", "{}", &c);
    json_t *list = json_object_get(res(v), "tasks");
    CHECK_INT_EQ(json_array_size(list), 3);
    CHECK_STR_EQ(str_at(json_array_get(list, 0), "taskId"), "task3");
    CHECK(!json_object_get(res(v), "nextCursor"));
    json_decref(v);
    v = task_req(s, "u1", NULL, "tasks/list", "{\"cursor\":\"x\"}", &c);
    CHECK_INT_EQ(err_code(v), JSONRPC_INVALID_PARAMS);
    json_decref(v);
    v = task_req(s, "u2", NULL, "tasks/list", "{}", &c);
    CHECK_INT_EQ(json_array_size(json_object_get(res(v), "tasks")), 0);
    json_decref(v);
    /* another user's task does not exist for them */
    const char *methods[] = {"tasks/get", "tasks/result", "tasks/cancel"};
    for (size_t m = 0; m < 3; m++) {
        v = task_req(s, "u2", NULL, methods[m], "{\"taskId\":\"task1\"}", &c);
        CHECK_INT_EQ(err_code(v), JSONRPC_INVALID_PARAMS);
        CHECK_STR_CONTAINS(str_at(json_object_get(v, "error"), "message"), "Task not found");
        json_decref(v);
    }
    mcp_server_free(s);
}

TEST(tasks_2025_11_25_refusals)
{
    struct mcp_server *s = task_server();
    struct capture c;
    static const struct {
        const char *method, *params;
        int code;
        const char *says;
    } refused[] = {
        /* a task for a tool that offers none is method-not-found */
        {"tools/call", "{\"name\":\"echo\",\"task\":{}}", JSONRPC_METHOD_NOT_FOUND, "echo"},
        {"tools/call", "{\"name\":\"job\",\"task\":5}", JSONRPC_INVALID_PARAMS, "params.task"},
        {"tools/call", "{\"name\":\"job\",\"task\":{\"ttl\":\"soon\"}}", JSONRPC_INVALID_PARAMS,
         "params.task.ttl"},
        /* refused before a task existed: an error that names why, where a task was due */
        {"tools/call", "{\"name\":\"job\",\"arguments\":{\"refuse\":true},\"task\":{}}",
         JSONRPC_INVALID_PARAMS, "job refused"},
        {"tools/call", "{\"name\":\"job\",\"arguments\":{\"refuse\":\"yes\"},\"task\":{}}",
         JSONRPC_INVALID_PARAMS, "field 'refuse'"},
        {"tasks/update", "{\"taskId\":\"x\",\"inputResponses\":{}}", JSONRPC_METHOD_NOT_FOUND,
         "tasks/update"},
        {"tasks/get", "{}", JSONRPC_INVALID_PARAMS, "taskId"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        json_t *v = task_req(s, "u1", NULL, refused[i].method, refused[i].params, &c);
        CHECK_INT_EQ(err_code(v), refused[i].code);
        CHECK_STR_CONTAINS(str_at(json_object_get(v, "error"), "message"), refused[i].says);
        json_decref(v);
    }
    /* without a task the refusal stays a tool result */
    json_t *v = task_req(s, "u1", NULL, "tools/call",
                         "{\"name\":\"job\",\"arguments\":{\"refuse\":true}}", &c);
    CHECK(json_is_true(json_object_get(res(v), "isError")));
    json_decref(v);
    CHECK_INT_EQ(nftasks, 0);
    mcp_server_free(s);
}

TEST(tasks_result_dropped_when_the_client_leaves)
{
    struct mcp_server *s = task_server();
    struct capture c;
    json_decref(task_req(s, "u1", NULL, "tools/call", "{\"name\":\"job\",\"task\":{}}", &c));
    memset(&c, 0, sizeof(c));
    struct mcp_request_info info = {.protocol_version = "2025-11-25"};
    snprintf(info.principal.user_id, sizeof(info.principal.user_id), "u1");
    const char *body = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tasks/result\","
                       "\"params\":{\"taskId\":\"task1\"}}";
    struct mcp_exchange *ex = mcp_exchange_start(s, &info, body, strlen(body), &ops, &c);
    CHECK(ex != NULL);
    CHECK(fwait_cb != NULL);
    /* a legacy call would run on; this one only waited to read, so it stops waiting */
    mcp_exchange_detach(ex);
    CHECK_INT_EQ(fwait_cancels, 1);
    CHECK(fwait_cb == NULL);
    CHECK_INT_EQ(c.replies, 0);
    mcp_server_free(s);
}

TEST(tasks_extension_lifecycle)
{
    struct mcp_server *s = task_server();
    struct capture c;
    /* without the extension declared the tool answers directly */
    json_t *v = task_req(s, "u1", "{}", "tools/call", "{\"name\":\"job\",\"arguments\":{}}", &c);
    CHECK_STR_EQ(str_at(res(v), "resultType"), "complete");
    CHECK(json_object_get(res(v), "content") != NULL);
    json_decref(v);
    /* with it, a flat CreateTaskResult; a 2025-11-25 `task` parameter means nothing here */
    v = task_req(s, "u1", TASKS_EXT, "tools/call",
                 "{\"name\":\"job\",\"arguments\":{},\"task\":{\"ttl\":5}}", &c);
    json_t *r = res(v);
    CHECK_STR_EQ(str_at(r, "resultType"), "task");
    CHECK_STR_EQ(str_at(r, "taskId"), "task1");
    CHECK_STR_EQ(str_at(r, "status"), "working");
    CHECK(json_is_null(json_object_get(r, "ttlMs")));
    CHECK(!json_object_get(r, "ttl"));
    CHECK_INT_EQ(json_integer_value(json_object_get(r, "pollIntervalMs")), 5000);
    CHECK(!json_object_get(r, "task"));
    json_decref(v);
    /* a tool without tasks is answered directly even with the extension */
    v = task_req(s, "u1", TASKS_EXT, "tools/call", "{\"name\":\"echo\"}", &c);
    CHECK_STR_EQ(str_at(res(v), "resultType"), "complete");
    json_decref(v);

    /* every task method needs the extension declared */
    const char *gated[] = {"tasks/get", "tasks/cancel", "tasks/update"};
    for (size_t m = 0; m < 3; m++) {
        v = task_req(s, "u1", "{}", gated[m], "{\"taskId\":\"task1\",\"inputResponses\":{}}", &c);
        CHECK_INT_EQ(c.status, 400);
        CHECK_INT_EQ(err_code(v), MCP_MISSING_CLIENT_CAPABILITY);
        CHECK(json_object_get(json_object_get(json_object_get(json_object_get(v, "error"), "data"),
                                              "requiredCapabilities"),
                              "extensions") != NULL);
        json_decref(v);
    }
    v = task_req(s, "u1", TASKS_EXT, "tasks/get", "{\"taskId\":\"task1\"}", &c);
    CHECK_STR_EQ(str_at(res(v), "status"), "working");
    CHECK_STR_EQ(str_at(res(v), "resultType"), "complete");
    CHECK(!json_object_get(res(v), "result"));
    json_decref(v);
    /* a tool error is a completed task, its result inlined */
    task_finish("task1", "{\"content\":[{\"type\":\"text\",\"text\":\"no\"}],\"isError\":true}");
    v = task_req(s, "u1", TASKS_EXT, "tasks/get", "{\"taskId\":\"task1\"}", &c);
    CHECK_STR_EQ(str_at(res(v), "status"), "completed");
    CHECK(json_is_true(json_object_get(json_object_get(res(v), "result"), "isError")));
    CHECK(!json_object_get(json_object_get(res(v), "result"), "_meta"));
    json_decref(v);
    /* cancel acknowledges, an ended task too; update refuses a task that does not wait for
     * input; an unknown one is not found */
    const char *acked[] = {"tasks/cancel", "tasks/update"};
    for (size_t m = 0; m < 2; m++) {
        v = task_req(s, "u1", TASKS_EXT, acked[m], "{\"taskId\":\"task1\",\"inputResponses\":{}}",
                     &c);
        if (m == 0) {
            CHECK_STR_EQ(str_at(res(v), "resultType"), "complete");
            CHECK_INT_EQ(json_object_size(res(v)), 2); /* resultType and _meta */
        } else {
            CHECK_INT_EQ(err_code(v), JSONRPC_INVALID_PARAMS);
            CHECK(strstr(json_string_value(json_object_get(json_object_get(v, "error"), "message")),
                         "not waiting for input: its status is 'completed'") != NULL);
        }
        json_decref(v);
        v = task_req(s, "u2", TASKS_EXT, acked[m], "{\"taskId\":\"task1\",\"inputResponses\":{}}",
                     &c);
        CHECK_INT_EQ(err_code(v), JSONRPC_INVALID_PARAMS);
        json_decref(v);
    }
    v = task_req(s, "u1", TASKS_EXT, "tasks/update", "{\"taskId\":\"task1\"}", &c);
    CHECK_INT_EQ(err_code(v), JSONRPC_INVALID_PARAMS);
    json_decref(v);
    /* a working task cancelled shows as cancelled, without a result */
    json_decref(task_req(s, "u1", TASKS_EXT, "tools/call", "{\"name\":\"job\"}", &c));
    json_decref(task_req(s, "u1", TASKS_EXT, "tasks/cancel", "{\"taskId\":\"task2\"}", &c));
    v = task_req(s, "u1", TASKS_EXT, "tasks/get", "{\"taskId\":\"task2\"}", &c);
    CHECK_STR_EQ(str_at(res(v), "status"), "cancelled");
    json_decref(v);
    /* tasks/result and tasks/list are not part of the extension */
    const char *removed[] = {"tasks/result", "tasks/list"};
    for (size_t m = 0; m < 2; m++) {
        v = task_req(s, "u1", TASKS_EXT, removed[m], "{\"taskId\":\"task1\"}", &c);
        CHECK_INT_EQ(c.status, 404);
        CHECK_INT_EQ(err_code(v), JSONRPC_METHOD_NOT_FOUND);
        json_decref(v);
    }
    /* Mcp-Name must carry the task id */
    struct mcp_request_info info = {
        .protocol_version = "2026-07-28", .mcp_method = "tasks/get", .mcp_name = "task2"};
    const char *body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/get\",\"params\":{"
                       "\"taskId\":\"task1\",\"_meta\":{\"io.modelcontextprotocol/"
                       "protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/"
                       "clientCapabilities\":" TASKS_EXT "}}}";
    v = run(s, &info, body, &c);
    CHECK_INT_EQ(err_code(v), MCP_HEADER_MISMATCH);
    json_decref(v);
    buf_release(&c.body);
    mcp_server_free(s);
    for (int i = 0; i < nftasks; i++)
        json_decref(ftasks[i].result);
    nftasks = 0;
}

/* A second source (ids "ask..."): one task of u1 that waits for the answer under key "q". */
static enum mcp_task_status ask_status;
static json_t *ask_answers;

static int a_get(void *ctx, const char *user, const char *id, bool want_result,
                 struct mcp_task *out, struct err *err)
{
    (void)ctx, (void)want_result;
    if (strcmp(user, "u1") != 0 || strcmp(id, "ask1") != 0)
        return err_set(err, -ENOENT, "not found");
    snprintf(out->id, sizeof(out->id), "%s", id);
    out->status = ask_status;
    out->created_ms = out->updated_ms = 1767225600000;
    out->ttl_ms = 60000;
    if (ask_status == MCP_TASK_INPUT_REQUIRED)
        out->input_requests = json_pack("{s:{s:s, s:{s:s}}}", "q", "method", "elicitation/create",
                                        "params", "message", "sure?");
    return 0;
}

static int a_update(void *ctx, const char *user, const char *id, const json_t *responses,
                    struct err *err)
{
    (void)ctx, (void)user, (void)id, (void)err;
    json_decref(ask_answers);
    ask_answers = json_deep_copy(responses);
    if (json_object_get(responses, "q"))
        ask_status = MCP_TASK_COMPLETED;
    return 0;
}

static const struct mcp_task_source ask_source = {.get = a_get, .update = a_update};

static void needs_task(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    CHECK(mcp_call_task_requested(call));
    mcp_call_tool_result(call, NULL, json_pack("{s:s}", "ran", "yes"), false);
}

TEST(tasks_input_required_update_and_sources)
{
    struct mcp_server *s = task_server();
    mcp_server_add_task_source(s, "ask", &ask_source, NULL);
    struct mcp_tool_def req = {.name = "needs_task",
                               .input_schema = "{\"type\":\"object\"}",
                               .fn = needs_task,
                               .flags = MCP_TOOL_TASK_REQUIRED};
    mcp_server_add_tool(s, &req);
    ask_status = MCP_TASK_INPUT_REQUIRED;
    struct capture c;
    /* the task of the second source, by its prefix: input_required with its requests */
    json_t *v = task_req(s, "u1", TASKS_EXT, "tasks/get", "{\"taskId\":\"ask1\"}", &c);
    CHECK_STR_EQ(str_at(res(v), "status"), "input_required");
    CHECK_STR_EQ(str_at(json_object_get(json_object_get(res(v), "inputRequests"), "q"), "method"),
                 "elicitation/create");
    json_decref(v);
    /* 2025-11-25 knows the status, not the requests */
    v = task_req(s, "u1", NULL, "tasks/get", "{\"taskId\":\"ask1\"}", &c);
    CHECK_STR_EQ(str_at(res(v), "status"), "input_required");
    CHECK(!json_object_get(res(v), "inputRequests"));
    json_decref(v);
    /* another user's is not found; an id no source owns neither */
    v = task_req(s, "u2", TASKS_EXT, "tasks/get", "{\"taskId\":\"ask1\"}", &c);
    CHECK_INT_EQ(err_code(v), JSONRPC_INVALID_PARAMS);
    json_decref(v);
    v = task_req(s, "u1", TASKS_EXT, "tasks/update",
                 "{\"taskId\":\"zzz\",\"inputResponses\":{\"q\":{}}}", &c);
    CHECK_INT_EQ(err_code(v), JSONRPC_INVALID_PARAMS);
    json_decref(v);
    /* tasks/update hands the responses to the source, which moves on */
    v = task_req(s, "u1", TASKS_EXT, "tasks/update",
                 "{\"taskId\":\"ask1\",\"inputResponses\":{\"q\":{\"action\":\"accept\"}}}", &c);
    CHECK_STR_EQ(str_at(res(v), "resultType"), "complete");
    json_decref(v);
    CHECK_STR_EQ(str_at(json_object_get(ask_answers, "q"), "action"), "accept");
    v = task_req(s, "u1", TASKS_EXT, "tasks/get", "{\"taskId\":\"ask1\"}", &c);
    CHECK_STR_EQ(str_at(res(v), "status"), "completed");
    CHECK(!json_object_get(res(v), "inputRequests"));
    json_decref(v);
    /* a tool that needs a task: refused without the extension (-32021 naming it), or without
     * params.task under 2025-11-25 (-32601); listed as required there */
    v = task_req(s, "u1", "{}", "tools/call", "{\"name\":\"needs_task\"}", &c);
    CHECK_INT_EQ(err_code(v), MCP_MISSING_CLIENT_CAPABILITY);
    CHECK(json_object_get(
              json_object_get(json_object_get(json_object_get(json_object_get(v, "error"), "data"),
                                              "requiredCapabilities"),
                              "extensions"),
              "io.modelcontextprotocol/tasks") != NULL);
    json_decref(v);
    v = task_req(s, "u1", NULL, "tools/call", "{\"name\":\"needs_task\"}", &c);
    CHECK_INT_EQ(err_code(v), JSONRPC_METHOD_NOT_FOUND);
    json_decref(v);
    v = task_req(s, "u1", TASKS_EXT, "tools/call", "{\"name\":\"needs_task\"}", &c);
    CHECK_STR_EQ(str_at(json_object_get(res(v), "structuredContent"), "ran"), "yes");
    json_decref(v);
    v = task_req(s, "u1", NULL, "tools/list", "{}", &c);
    size_t i;
    json_t *tool;
    bool listed = false;
    json_array_foreach(json_object_get(res(v), "tools"), i, tool)
    {
        if (strcmp(str_at(tool, "name"), "needs_task") == 0) {
            CHECK_STR_EQ(str_at(json_object_get(tool, "execution"), "taskSupport"), "required");
            listed = true;
        }
    }
    CHECK(listed);
    json_decref(v);
    buf_release(&c.body);
    mcp_server_free(s);
    json_decref(ask_answers);
    ask_answers = NULL;
    for (int k = 0; k < nftasks; k++)
        json_decref(ftasks[k].result);
    nftasks = 0;
}

/* ---------- input-required results ---------- */

/* Asks "q" with state {"n": 1}; answered with that state, replies with the answer and the state. */
static void asking_tool(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    json_auto_t *schema = json_pack("{s:s, s:{s:{s:s}}, s:[s]}", "type", "object", "properties",
                                    "a", "type", "string", "required", "a");
    const json_t *state = mcp_call_input_state(call);
    const json_t *r = mcp_call_input_response(call, "q", "elicitation/create");
    bool declined;
    const json_t *content = r ? mcp_input_accepted(r, schema, &declined) : NULL;
    if (content && json_integer_value(json_object_get(state, "n")) == 1) {
        mcp_call_tool_result(call, NULL, json_pack("{s:O, s:O}", "answer", content, "state", state),
                             false);
        return;
    }
    mcp_call_input_required(call,
                            json_pack("{s:o}", "q", mcp_input_elicit("?", json_incref(schema))),
                            json_pack("{s:i}", "n", 1));
}

static json_t *ask_round(struct mcp_server *s, const char *version, const char *caps,
                         const char *extra, struct capture *c)
{
    struct mcp_request_info info = {.protocol_version = version,
                                    .mcp_method = "tools/call",
                                    .mcp_name = "ask",
                                    .principal = {.user_id = "usr_a"}};
    bool modern = strcmp(version, "2026-07-28") == 0;
    _cleanup_free_ char *body = xasprintf(
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/"
        "call\",\"params\":{\"name\":\"ask\"%s%s%s%s%s}}",
        extra,
        modern ? ",\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"," : "",
        modern ? "\"io.modelcontextprotocol/clientCapabilities\":" : "", modern ? caps : "",
        modern ? "}" : "");
    json_t *v = run(s, &info, body, c);
    buf_release(&c->body);
    return v;
}

TEST(input_required_round_trip_through_the_protocol_layer)
{
    struct mcp_server *s = server();
    struct mcp_tool_def ask = {
        .name = "ask", .input_schema = "{\"type\":\"object\"}", .fn = asking_tool};
    mcp_server_add_tool(s, &ask);
    struct capture c;
    json_auto_t *first = ask_round(s, "2026-07-28", "{\"elicitation\":{}}", "", &c);
    json_t *res = json_object_get(first, "result");
    CHECK_STR_EQ(json_string_value(json_object_get(res, "resultType")), "input_required");
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_object_get(res, "inputRequests"), "q"), "method")),
                 "elicitation/create");
    const char *state = json_string_value(json_object_get(res, "requestState"));
    CHECK(state != NULL);
    /* the retry: the handler sees the answer and the state it sealed */
    _cleanup_free_ char *extra =
        xasprintf(",\"inputResponses\":{\"q\":{\"action\":\"accept\",\"content\":{\"a\":\"yes\"}},"
                  "\"extra\":{}},\"requestState\":\"%s\"",
                  state);
    json_auto_t *second = ask_round(s, "2026-07-28", "{\"elicitation\":{}}", extra, &c);
    res = json_object_get(second, "result");
    CHECK_STR_EQ(json_string_value(json_object_get(res, "resultType")), "complete");
    json_t *sc = json_object_get(res, "structuredContent");
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(sc, "answer"), "a")), "yes");
    CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(sc, "state"), "n")), 1);
    /* an answer of the wrong shape is asked again */
    _cleanup_free_ char *wrong =
        xasprintf(",\"inputResponses\":{\"q\":{\"action\":\"accept\",\"content\":{\"a\":1}}},"
                  "\"requestState\":\"%s\"",
                  state);
    json_auto_t *third = ask_round(s, "2026-07-28", "{\"elicitation\":{}}", wrong, &c);
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(third, "result"), "resultType")),
                 "input_required");
    mcp_server_free(s);
}

TEST(input_required_needs_the_capability_and_the_stateless_revision)
{
    struct mcp_server *s = server();
    struct mcp_tool_def ask = {
        .name = "ask", .input_schema = "{\"type\":\"object\"}", .fn = asking_tool};
    mcp_server_add_tool(s, &ask);
    struct capture c;
    json_auto_t *undeclared = ask_round(s, "2026-07-28", "{\"sampling\":{}}", "", &c);
    CHECK_INT_EQ(c.status, 400);
    CHECK_INT_EQ(err_code(undeclared), MCP_MISSING_CLIENT_CAPABILITY);
    CHECK(json_is_object(json_object_get(
        json_object_get(json_object_get(json_object_get(undeclared, "error"), "data"),
                        "requiredCapabilities"),
        "elicitation")));
    /* older revisions have no input-required results: a handler that asks anyway is a bug */
    json_auto_t *legacy = ask_round(s, "2025-11-25", "", "", &c);
    CHECK_INT_EQ(err_code(legacy), JSONRPC_INTERNAL_ERROR);
    /* a state that does not open stops the call before the handler */
    json_auto_t *bad =
        ask_round(s, "2026-07-28", "{\"elicitation\":{}}", ",\"requestState\":\"AAAA\"", &c);
    CHECK_INT_EQ(c.status, 400);
    CHECK_INT_EQ(err_code(bad), JSONRPC_INVALID_PARAMS);
    json_auto_t *null_responses =
        ask_round(s, "2026-07-28", "{\"elicitation\":{}}", ",\"inputResponses\":null", &c);
    CHECK_INT_EQ(err_code(null_responses), JSONRPC_INVALID_PARAMS);
    mcp_server_free(s);
}

TEST_MAIN()

/* The protocol layer driven directly, with a sink that records what would go on the wire. */
#include <jansson.h>

#include "base/buf.h"
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
    CHECK_INT_EQ(json_array_size(tools), 3);
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
    memset(&c, 0, sizeof(c));
    buf_init(&c.body, 0);
    const char *body =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"park\"}}";
    struct mcp_exchange *ex = mcp_exchange_start(s, &info, body, strlen(body), &ops, &c);
    CHECK(ex != NULL);
    CHECK_INT_EQ(c.replies, 0);
    mcp_call_tool_error(parked, "late");
    CHECK_INT_EQ(c.replies, 1);
    CHECK_STR_CONTAINS(c.body.data, "late");
    buf_release(&c.body);

    memset(&c, 0, sizeof(c));
    ex = mcp_exchange_start(s, &info, body, strlen(body), &ops, &c);
    mcp_exchange_detach(ex);
    mcp_call_tool_error(parked, "nobody listens");
    CHECK_INT_EQ(c.replies, 0);
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

TEST_MAIN()

#include "mcp/fixtures.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/loop.h"
#include "base/util.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp.h"

#define PNG_B64                                                                                    \
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJg" \
    "gg=="
#define WAV_B64 "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
#define EMPTY_SCHEMA "{\"type\":\"object\",\"properties\":{}}"

static void reply_content(struct mcp_call *call, const char *content_json)
{
    json_error_t e;
    json_t *content = json_loads(content_json, 0, &e);
    if (!content)
        abort();
    mcp_call_tool_result(call, content, NULL, false);
}

static void t_simple_text(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    reply_content(call,
                  "[{\"type\":\"text\",\"text\":\"This is a simple text response for testing.\"}]");
}

static void t_image(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    reply_content(call,
                  "[{\"type\":\"image\",\"data\":\"" PNG_B64 "\",\"mimeType\":\"image/png\"}]");
}

static void t_audio(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    reply_content(call,
                  "[{\"type\":\"audio\",\"data\":\"" WAV_B64 "\",\"mimeType\":\"audio/wav\"}]");
}

static void t_embedded(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    reply_content(
        call, "[{\"type\":\"resource\",\"resource\":{\"uri\":\"test://embedded-resource\","
              "\"mimeType\":\"text/plain\",\"text\":\"This is an embedded resource content.\"}}]");
}

static void t_mixed(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    reply_content(call,
                  "[{\"type\":\"text\",\"text\":\"Multiple content types test:\"},"
                  "{\"type\":\"image\",\"data\":\"" PNG_B64 "\",\"mimeType\":\"image/png\"},"
                  "{\"type\":\"resource\",\"resource\":{\"uri\":\"test://mixed-content-resource\","
                  "\"mimeType\":\"application/"
                  "json\",\"text\":\"{\\\"test\\\":\\\"data\\\",\\\"value\\\":123}\"}}]");
}

static void t_error(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    mcp_call_tool_error(call, "This tool intentionally returns an error for testing");
}

static void t_server_to_client(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    mcp_call_tool_error(call, "this server is stateless: it cannot send requests to the client "
                              "and wait for the answer on another connection");
}

/* Tools that emit notifications over time, to exercise the streaming path for real. */
struct ticker {
    struct loop_timer timer;
    struct mcp_call *call;
    int step;
    bool progress; /* else logging */
    bool cancelled;
};

static void ticker_cancel(struct mcp_call *call, void *p)
{
    (void)call;
    struct ticker *t = p;
    t->cancelled = true;
}

static void ticker_tick(struct loop_timer *timer)
{
    struct ticker *t = (struct ticker *)timer; /* timer is the first member */
    static const char *const logs[] = {"Tool execution started", "Tool processing data",
                                       "Tool execution completed"};
    if (!t->cancelled) {
        if (t->progress) {
            char msg[64];
            snprintf(msg, sizeof(msg), "Completed step %d of 100", t->step * 50);
            mcp_call_progress(t->call, t->step * 50, 100, msg);
        } else {
            mcp_call_log(t->call, "info", "conformance-test-server", json_string(logs[t->step]));
        }
    }
    if (++t->step < 3 && !t->cancelled) {
        loop_timer_start(&t->timer, 50, ticker_tick);
        return;
    }
    if (t->progress)
        reply_content(t->call,
                      "[{\"type\":\"text\",\"text\":\"Progress reported in three steps\"}]");
    else
        reply_content(t->call,
                      "[{\"type\":\"text\",\"text\":\"Tool with logging executed successfully\"}]");
    free(t);
}

static void start_ticker(struct mcp_call *call, bool progress)
{
    struct ticker *t = xcalloc(1, sizeof(*t));
    t->call = call;
    t->progress = progress;
    mcp_call_on_cancel(call, ticker_cancel, t);
    ticker_tick(&t->timer);
}

static void t_logging(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    start_ticker(call, false);
}

static void t_progress(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    start_ticker(call, true);
}

/* Needs sampling, which this request must declare (stateless revision); rejected with -32021. */
static void t_missing_capability(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    const json_t *caps = mcp_call_client_capabilities(call);
    if (!json_is_object(json_object_get(caps, "sampling"))) {
        mcp_call_error(call, MCP_MISSING_CLIENT_CAPABILITY,
                       "this tool requires the sampling client capability",
                       json_pack("{s:{s:{}}}", "requiredCapabilities", "sampling"));
        return;
    }
    t_server_to_client(call, args, ctx);
}

static void t_schema_2020(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)ctx;
    char *text = json_dumps(args, JSON_COMPACT);
    json_t *content = json_pack("[{s:s, s:s+}]", "type", "text", "text",
                                "JSON Schema 2020-12 tool called with: ", text);
    free(text);
    mcp_call_tool_result(call, content, NULL, false);
}

/* Arguments mirrored into Mcp-Param-* headers (SEP-2243); the server checks them before this
 * runs, so it only says what it was given. */
static void t_param_headers(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)ctx;
    char *text = json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS);
    json_t *content = json_pack("[{s:s, s:s+}]", "type", "text", "text",
                                "Mcp-Param headers matched the arguments: ", text);
    free(text);
    mcp_call_tool_result(call, content, NULL, false);
}

/* ---------- resources, prompts and the rest ---------- */

static void m_empty(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)params, (void)ctx;
    mcp_call_reply(call, json_object());
}

static void m_resources_list(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)params, (void)ctx;
    json_t *r = json_loads(
        "{\"resources\":["
        "{\"uri\":\"test://static-text\",\"name\":\"static-text\",\"title\":\"Static Text "
        "Resource\","
        "\"description\":\"A static text resource for testing\",\"mimeType\":\"text/plain\"},"
        "{\"uri\":\"test://static-binary\",\"name\":\"static-binary\",\"title\":\"Static Binary "
        "Resource\","
        "\"description\":\"A static binary resource (image) for "
        "testing\",\"mimeType\":\"image/png\"},"
        "{\"uri\":\"test://watched-resource\",\"name\":\"watched-resource\",\"title\":\"Watched "
        "Resource\","
        "\"description\":\"A resource that can be subscribed to\",\"mimeType\":\"text/plain\"}]}",
        0, NULL);
    mcp_call_reply(call, r);
}

static void m_templates_list(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)params, (void)ctx;
    mcp_call_reply(
        call, json_loads("{\"resourceTemplates\":[{\"uriTemplate\":\"test://template/{id}/data\","
                         "\"name\":\"template\",\"title\":\"Resource Template\","
                         "\"description\":\"A resource template with parameter substitution\","
                         "\"mimeType\":\"application/json\"}]}",
                         0, NULL));
}

static json_t *contents_text(const char *uri, const char *mime, const char *text)
{
    return json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType", mime, "text",
                     text);
}

static void m_resources_read(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)ctx;
    const char *uri = json_string_value(json_object_get(params, "uri"));
    if (!uri) {
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, "params.uri must be a string", NULL);
        return;
    }
    if (strcmp(uri, "test://static-text") == 0) {
        mcp_call_reply(call, contents_text(uri, "text/plain",
                                           "This is the content of the static text resource."));
    } else if (strcmp(uri, "test://static-binary") == 0) {
        mcp_call_reply(call, json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType",
                                       "image/png", "blob", PNG_B64));
    } else if (strcmp(uri, "test://watched-resource") == 0) {
        mcp_call_reply(call, contents_text(uri, "text/plain", "Watched resource content"));
    } else if (strncmp(uri, "test://template/", 16) == 0 && strlen(uri) > 21 &&
               strcmp(uri + strlen(uri) - 5, "/data") == 0 &&
               !memchr(uri + 16, '/', strlen(uri) - 21)) {
        int idlen = (int)(strlen(uri) - 21);
        char *text =
            xasprintf("{\"id\":\"%.*s\",\"templateTest\":true,\"data\":\"Data for ID: %.*s\"}",
                      idlen, uri + 16, idlen, uri + 16);
        mcp_call_reply(call, contents_text(uri, "application/json", text));
        free(text);
    } else {
        bool modern = strcmp(mcp_call_protocol_version(call), MCP_VERSION_MODERN) == 0;
        mcp_call_error(call, modern ? JSONRPC_INVALID_PARAMS : MCP_RESOURCE_NOT_FOUND,
                       "Resource not found", json_pack("{s:s}", "uri", uri));
    }
}

static void m_prompts_list(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)params, (void)ctx;
    mcp_call_reply(
        call,
        json_loads(
            "{\"prompts\":["
            "{\"name\":\"test_simple_prompt\",\"title\":\"Simple Test Prompt\",\"description\":\"A "
            "simple prompt without arguments\"},"
            "{\"name\":\"test_prompt_with_arguments\",\"title\":\"Prompt With "
            "Arguments\",\"description\":\"A prompt with required arguments\","
            "\"arguments\":[{\"name\":\"arg1\",\"description\":\"First test "
            "argument\",\"required\":true},"
            "{\"name\":\"arg2\",\"description\":\"Second test argument\",\"required\":true}]},"
            "{\"name\":\"test_prompt_with_embedded_resource\",\"title\":\"Prompt With Embedded "
            "Resource\","
            "\"description\":\"A prompt that includes an embedded resource\","
            "\"arguments\":[{\"name\":\"resourceUri\",\"description\":\"URI of the resource to "
            "embed\",\"required\":true}]},"
            "{\"name\":\"test_prompt_with_image\",\"title\":\"Prompt With "
            "Image\",\"description\":\"A prompt that includes image content\"}]}",
            0, NULL));
}

static json_t *user_text(const char *text)
{
    return json_pack("{s:s, s:{s:s, s:s}}", "role", "user", "content", "type", "text", "text",
                     text);
}

static void m_prompts_get(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)ctx;
    const char *name = json_string_value(json_object_get(params, "name"));
    const json_t *args = json_object_get(params, "arguments");
    if (!name) {
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, "params.name must be a string", NULL);
    } else if (strcmp(name, "test_simple_prompt") == 0) {
        mcp_call_reply(call, json_pack("{s:[o]}", "messages",
                                       user_text("This is a simple prompt for testing.")));
    } else if (strcmp(name, "test_prompt_with_arguments") == 0) {
        const char *a1 = json_string_value(json_object_get(args, "arg1"));
        const char *a2 = json_string_value(json_object_get(args, "arg2"));
        if (!a1 || !a2) {
            mcp_call_error(call, JSONRPC_INVALID_PARAMS, "arguments arg1 and arg2 are required",
                           NULL);
            return;
        }
        char *text = xasprintf("Prompt with arguments: arg1='%s', arg2='%s'", a1, a2);
        mcp_call_reply(call, json_pack("{s:[o]}", "messages", user_text(text)));
        free(text);
    } else if (strcmp(name, "test_prompt_with_embedded_resource") == 0) {
        const char *uri = json_string_value(json_object_get(args, "resourceUri"));
        if (!uri) {
            mcp_call_error(call, JSONRPC_INVALID_PARAMS, "argument resourceUri is required", NULL);
            return;
        }
        json_t *res = json_pack("{s:s, s:{s:s, s:{s:s, s:s, s:s}}}", "role", "user", "content",
                                "type", "resource", "resource", "uri", uri, "mimeType",
                                "text/plain", "text", "Embedded resource content for testing.");
        mcp_call_reply(call, json_pack("{s:[o, o]}", "messages", res,
                                       user_text("Please process the embedded resource above.")));
    } else if (strcmp(name, "test_prompt_with_image") == 0) {
        json_t *img = json_pack("{s:s, s:{s:s, s:s, s:s}}", "role", "user", "content", "type",
                                "image", "data", PNG_B64, "mimeType", "image/png");
        mcp_call_reply(call, json_pack("{s:[o, o]}", "messages", img,
                                       user_text("Please analyze the image above.")));
    } else {
        mcp_call_error(call, JSONRPC_INVALID_PARAMS, "Unknown prompt", NULL);
    }
}

static void m_complete(struct mcp_call *call, const json_t *params, void *ctx)
{
    (void)ctx;
    const char *prefix =
        json_string_value(json_object_get(json_object_get(params, "argument"), "value"));
    static const char *const values[] = {"testValue1", "testValue2", "test"};
    json_t *out = json_array();
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
        if (!prefix || strncmp(values[i], prefix, strlen(prefix)) == 0)
            json_array_append_new(out, json_string(values[i]));
    size_t n = json_array_size(out);
    mcp_call_reply(call, json_pack("{s:{s:o, s:i, s:b}}", "completion", "values", out, "total",
                                   (int)n, "hasMore", 0));
}

void mcp_fixtures_register(struct mcp_server *srv)
{
    static const struct mcp_tool_def tools[] = {
        {"test_simple_text", NULL, "Tests simple text content response", EMPTY_SCHEMA, NULL,
         MCP_TOOL_READ_ONLY, t_simple_text, NULL},
        {"test_image_content", NULL, "Tests image content response", EMPTY_SCHEMA, NULL,
         MCP_TOOL_READ_ONLY, t_image, NULL},
        {"test_audio_content", NULL, "Tests audio content response", EMPTY_SCHEMA, NULL,
         MCP_TOOL_READ_ONLY, t_audio, NULL},
        {"test_embedded_resource", NULL, "Tests embedded resource content response", EMPTY_SCHEMA,
         NULL, MCP_TOOL_READ_ONLY, t_embedded, NULL},
        {"test_multiple_content_types", NULL,
         "Tests response with multiple content types (text, image, resource)", EMPTY_SCHEMA, NULL,
         MCP_TOOL_READ_ONLY, t_mixed, NULL},
        {"test_tool_with_logging", NULL, "Tests tool that emits log messages during execution",
         EMPTY_SCHEMA, NULL, MCP_TOOL_READ_ONLY, t_logging, NULL},
        {"test_logging_tool", NULL,
         "Tests tool that emits log messages during execution (stateless revision name)",
         EMPTY_SCHEMA, NULL, MCP_TOOL_READ_ONLY, t_logging, NULL},
        {"test_tool_with_progress", NULL, "Tests tool that reports progress notifications",
         EMPTY_SCHEMA, NULL, MCP_TOOL_READ_ONLY, t_progress, NULL},
        {"test_error_handling", NULL, "Tests error response handling", EMPTY_SCHEMA, NULL,
         MCP_TOOL_READ_ONLY, t_error, NULL},
        {"test_sampling", NULL, "Tests server-initiated sampling (LLM completion request)",
         "{\"type\":\"object\",\"properties\":{\"prompt\":{\"type\":\"string\",\"description\":"
         "\"The prompt to send to the LLM\"}},\"required\":[\"prompt\"]}",
         NULL, 0, t_server_to_client, NULL},
        {"test_elicitation", NULL, "Tests server-initiated elicitation (user input request)",
         "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\",\"description\":"
         "\"The message to show the user\"}},\"required\":[\"message\"]}",
         NULL, 0, t_server_to_client, NULL},
        {"test_elicitation_sep1034_defaults", NULL,
         "Tests elicitation with default values per SEP-1034", EMPTY_SCHEMA, NULL, 0,
         t_server_to_client, NULL},
        {"test_elicitation_sep1330_enums", NULL,
         "Tests elicitation with enum schema improvements per SEP-1330", EMPTY_SCHEMA, NULL, 0,
         t_server_to_client, NULL},
        {"test_missing_capability", NULL,
         "Tests rejection of a request that did not declare the sampling capability", EMPTY_SCHEMA,
         NULL, 0, t_missing_capability, NULL},
        {"json_schema_2020_12_tool", NULL,
         "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
         "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\","
         "\"$defs\":{\"address\":{\"$anchor\":\"addressDef\",\"type\":\"object\","
         "\"properties\":{\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"}}}},"
         "\"properties\":{\"name\":{\"type\":\"string\"},"
         "\"address\":{\"$ref\":\"#/$defs/address\"},"
         "\"contactMethod\":{\"type\":\"string\",\"enum\":[\"phone\",\"email\"]},"
         "\"phone\":{\"type\":\"string\"},\"email\":{\"type\":\"string\"}},"
         "\"allOf\":[{\"anyOf\":[{\"required\":[\"phone\"]},{\"required\":[\"email\"]}]}],"
         "\"if\":{\"properties\":{\"contactMethod\":{\"const\":\"phone\"}},"
         "\"required\":[\"contactMethod\"]},"
         "\"then\":{\"required\":[\"phone\"]},\"else\":{\"required\":[\"email\"]},"
         "\"additionalProperties\":false}",
         NULL, MCP_TOOL_READ_ONLY, t_schema_2020, NULL},
        {"test_param_headers", NULL,
         "Tests custom headers from x-mcp-header annotations (SEP-2243): region, priority and "
         "verbose travel in Mcp-Param-Region, Mcp-Param-Priority and Mcp-Param-Verbose too",
         "{\"type\":\"object\",\"properties\":{"
         "\"region\":{\"type\":\"string\",\"x-mcp-header\":\"Region\","
         "\"description\":\"Where to run; mirrored into Mcp-Param-Region\"},"
         "\"priority\":{\"type\":\"integer\",\"x-mcp-header\":\"Priority\","
         "\"description\":\"Mirrored into Mcp-Param-Priority\"},"
         "\"verbose\":{\"type\":\"boolean\",\"x-mcp-header\":\"Verbose\","
         "\"description\":\"Mirrored into Mcp-Param-Verbose\"},"
         "\"query\":{\"type\":\"string\",\"description\":\"Not mirrored\"}},"
         "\"required\":[\"region\",\"query\"]}",
         NULL, MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT, t_param_headers, NULL},
    };
    for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
        mcp_server_add_tool(srv, &tools[i]);
    mcp_server_add_method(srv, "resources/list", m_resources_list, NULL, "resources",
                          json_pack("{s:b, s:b}", "subscribe", 1, "listChanged", 0));
    mcp_server_add_method(srv, "resources/templates/list", m_templates_list, NULL, NULL, NULL);
    mcp_server_add_method(srv, "resources/read", m_resources_read, NULL, NULL, NULL);
    mcp_server_add_method(srv, "resources/subscribe", m_empty, NULL, NULL, NULL);
    mcp_server_add_method(srv, "resources/unsubscribe", m_empty, NULL, NULL, NULL);
    mcp_server_add_method(srv, "prompts/list", m_prompts_list, NULL, "prompts",
                          json_pack("{s:b}", "listChanged", 0));
    mcp_server_add_method(srv, "prompts/get", m_prompts_get, NULL, NULL, NULL);
    mcp_server_add_method(srv, "completion/complete", m_complete, NULL, "completions", NULL);
    mcp_server_add_method(srv, "logging/setLevel", m_empty, NULL, "logging", NULL);
    mcp_fixtures_mrtr_register(srv);
}

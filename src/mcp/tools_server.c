/* server_info: lets an assistant check who it is connected as and what this server offers. */
#include "mcp/tools.h"

#include <jansson.h>

#include "mcp/mcp.h"
#include "version.h"

static const char input_schema[] =
    "{"
    "\"type\":\"object\","
    "\"properties\":{\"include_tools\":{\"type\":\"boolean\",\"description\":"
    "\"Also list the names of the tools this server offers (default false)\"}},"
    "\"additionalProperties\":false}";

static const char output_schema[] =
    "{"
    "\"type\":\"object\","
    "\"properties\":{"
    "\"name\":{\"type\":\"string\"},\"version\":{\"type\":\"string\"},"
    "\"user\":{\"type\":\"string\"},\"protocol_version\":{\"type\":\"string\"},"
    "\"tools\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
    "\"required\":[\"name\",\"version\",\"user\",\"protocol_version\"]}";

static void server_info(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct mcp_server *srv = ctx;
    const struct mcp_principal *who = mcp_call_principal(call);
    json_t *out =
        json_pack("{s:s, s:s, s:s, s:s}", "name", "sandbox-mcp", "version", SANDBOX_MCP_VERSION,
                  "user", who->user_name, "protocol_version", mcp_call_protocol_version(call));
    if (json_is_true(json_object_get(args, "include_tools")))
        json_object_set_new(out, "tools", mcp_server_tool_names(srv));
    mcp_call_tool_result(call, NULL, out, false);
}

void tools_server_register(struct mcp_server *srv)
{
    struct mcp_tool_def def = {
        .name = "server_info",
        .title = "Server info",
        .description = "Report this sandbox-mcp server's version, the user the caller is signed in "
                       "as, and the negotiated MCP protocol version.",
        .input_schema = input_schema,
        .output_schema = output_schema,
        .flags = MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT,
        .fn = server_info,
        .ctx = srv,
    };
    mcp_server_add_tool(srv, &def);
}

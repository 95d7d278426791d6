/* server_info: lets an assistant check who it is connected as and what this server offers; and
 * the server's instructions, what a model reads about the server before any tool. */
#include "mcp/tools.h"

#include <jansson.h>
#include <string.h>

#include "base/util.h"
#include "mcp/mcp.h"
#include "sandbox/sandbox.h"
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

char *tools_instructions(const struct tools_facts *f)
{
    const struct sandbox_config *c = f->sandbox;
    char idle[32], exec_def[32], exec_max[32], reply[32], file_max[32];
    format_span_ms(c->idle_ms, idle);
    format_span_ms(c->exec_timeout_ms, exec_def);
    format_span_ms(c->exec_timeout_max, exec_max);
    format_bytes(f->reply_max_bytes, reply);
    format_bytes(c->file_max_bytes, file_max);
    const char *net =
        strcmp(f->network, "public") == 0
            ? "It reaches any public internet host through the HTTP(S) proxy set in its "
              "environment."
        : strcmp(f->network, "allowlist") == 0
            ? "It reaches only the hosts on this server's allow list (package registries such as "
              "pypi.org and registry.npmjs.org, git hosts such as github.com) through the HTTP(S) "
              "proxy set in its environment."
            : "It has no network.";
    const char *tools =
        strcmp(c->template_name ? c->template_name : "debian", "debian") == 0
            ? " It runs Debian with python3 (numpy, pandas, matplotlib and scipy installed; pip "
              "install works as is), git, gcc and make, curl, node, npm and pnpm; apt-get install "
              "adds Debian packages where the network allows. (While the server is still "
              "building that toolset, container_ping says so and the sandbox runs the host's own "
              "programs.)"
            : "";
    return xasprintf(
        "sandbox-mcp gives you an isolated Linux sandbox of your own and a coding agent to hand "
        "long tasks to.\n"
        "\n"
        "Your sandbox: a Linux machine where you are root, working directory /workspace. Files, "
        "installed packages and background processes stay between calls until "
        "container_initialize wipes them; it stops after %s idle and comes back with its files on "
        "the next call.%s %s\n"
        "- container_exec runs a shell command (timeout %s by default, at most %s). A reply "
        "holds about %s: longer output shows its head and tail, and the whole of it stays in a "
        "file in the sandbox whose path and offset the reply gives, to page through with "
        "container_file_read.\n"
        "- container_file_write / container_file_read / container_files_list / "
        "container_file_delete work on files (relative paths are under /workspace; writes up to "
        "%s a call, larger files in pieces with append; reads page with offset). "
        "container_file_read returns a PNG, JPEG, GIF or WebP image as an image you see: to "
        "look at a plot, save it as PNG and read it (it must fit the reply as base64: a plot at "
        "matplotlib's default size and dpi does).\n"
        "- container_ping checks the sandbox; container_initialize starts it over, empty.\n"
        "\n"
        "Coding runs, fire and forget: run_task hands a task (with a git repository, if any) to "
        "an agent that works in a sandbox of its own for minutes or hours (default timeout %llu "
        "min, at most %llu min). It needs a model provider the operator has configured (such as "
        "ANTHROPIC_API_KEY). run_task returns at once with run_id and web_url: give the user "
        "web_url, where the run can be watched live on any device. Then check with get_result "
        "and wait_seconds 30 to 60 (it returns as soon as the run ends); call again while the "
        "status is queued or running, about once a minute, not in a tight loop. list_runs finds "
        "earlier runs, cancel_run stops one; pass a run's session_id to run_task to continue its "
        "work, or to the container_* tools to look at its workspace.\n"
        "\n"
        "A failed call has isError and structuredContent.error {code, message}: busy means retry "
        "later; invalid_arguments means fix the arguments the message names.",
        idle, tools, net, exec_def, exec_max, reply, file_max,
        (unsigned long long)(f->run_timeout_ms / 60000),
        (unsigned long long)(f->run_timeout_max_ms / 60000));
}

/* The Claude Code adapter: `claude -p --output-format stream-json --verbose` in the run's
 * directory, the task on stdin, its Anthropic base URL the proxy's provider of the model and its
 * key the run's token (both from the environment, so the token is in no file and no argument),
 * every permission granted (the sandbox is the boundary), and nothing but the model reached:
 * no update, telemetry or error report. A later run continues the conversation with --resume. */
#include "runs/runs_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "proxy/proxy.h"

void claude_code_launch(struct agent_launch *l)
{
    const char *slash = strchr(l->model, '/');
    const char *model = slash ? slash + 1 : l->model;
    size_t n = 0;
    l->argv = xcalloc(14, sizeof(char *));
    l->argv[n++] = xstrdup(l->program);
    l->argv[n++] = xstrdup("-p");
    l->argv[n++] = xstrdup("--output-format");
    l->argv[n++] = xstrdup("stream-json");
    l->argv[n++] = xstrdup("--verbose");
    l->argv[n++] = xstrdup("--dangerously-skip-permissions");
    l->argv[n++] = xstrdup("--model");
    l->argv[n++] = xstrdup(model);
    /* the server's tools for the agent, whose calls wait for a person; the token comes from the
     * environment (Claude Code expands ${VAR} in MCP configurations) */
    char *url = agent_mcp_url(l);
    l->argv[n++] = xstrdup("--mcp-config");
    l->argv[n++] =
        xasprintf("{\"mcpServers\":{\"" AGENT_MCP_NAME "\":{\"type\":\"http\",\"url\":"
                  "\"%s\",\"headers\":{\"Authorization\":\"Bearer ${" AGENT_TOKEN_ENV "}\"}}}}",
                  url);
    free(url);
    if (l->session && *l->session) {
        l->argv[n++] = xstrdup("--resume");
        l->argv[n++] = xstrdup(l->session);
    }
    /* Claude Code adds /v1/messages to its base URL itself */
    const struct proxy_llm *p = l->nproviders ? &l->providers[0] : NULL;
    size_t bl = p ? strlen(p->base_path) : 0;
    if (bl >= 3 && strcmp(p->base_path + bl - 3, "/v1") == 0)
        bl -= 3;
    n = 0;
    l->env = xcalloc(12 + AGENT_COMMON_ENV, sizeof(char *));
    l->env[n++] =
        p ? xasprintf("ANTHROPIC_BASE_URL=%s/%s%.*s", l->proxy_url, p->name, (int)bl, p->base_path)
          : xasprintf("ANTHROPIC_BASE_URL=%s", l->proxy_url);
    l->env[n++] = xasprintf("ANTHROPIC_API_KEY=%s", l->proxy_token);
    l->env[n++] = xasprintf(AGENT_TOKEN_ENV "=%s", l->proxy_token);
    l->env[n++] = xasprintf("MCP_TOOL_TIMEOUT=%d", AGENT_MCP_TIMEOUT_S * 1000);
    /* the server's two tools in the model's list, not behind a tool search */
    l->env[n++] = xstrdup("ENABLE_TOOL_SEARCH=false");
    /* its side requests (a small model's) go to the run's model, the one the operator serves */
    l->env[n++] = xasprintf("ANTHROPIC_DEFAULT_HAIKU_MODEL=%s", model);
    /* it refuses --dangerously-skip-permissions as root unless told it is in a sandbox */
    l->env[n++] = xstrdup("IS_SANDBOX=1");
    l->env[n++] = xstrdup("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1");
    l->env[n++] = xstrdup("DISABLE_AUTOUPDATER=1");
    l->env[n++] = xstrdup("DISABLE_TELEMETRY=1");
    l->env[n++] = xstrdup("DISABLE_ERROR_REPORTING=1");
    agent_common_env(l, l->env + n);
}

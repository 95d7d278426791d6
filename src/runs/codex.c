/* The Codex adapter: `codex exec --json` in the run's directory, the task on stdin, with a model
 * provider of its own pointed at the proxy's provider of the model (the Responses API, streamed)
 * and the run's token read from the environment (env_key), so it is in no file and no argument.
 * Its approvals and its own sandbox are off (ours is the boundary), plugins and analytics too,
 * so it reaches nothing but the model. A later run continues the thread with `exec resume`. */
#include "runs/runs_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "proxy/proxy.h"

#define TOKEN_ENV AGENT_TOKEN_ENV

void codex_launch(struct agent_launch *l)
{
    const char *slash = strchr(l->model, '/');
    const struct proxy_llm *p = l->nproviders ? &l->providers[0] : NULL;
    size_t n = 0;
    l->argv = xcalloc(24, sizeof(char *));
    l->argv[n++] = xstrdup(l->program);
    l->argv[n++] = xstrdup("exec");
    l->argv[n++] = xstrdup("--json");
    l->argv[n++] = xstrdup("--skip-git-repo-check");
    l->argv[n++] = xstrdup("--dangerously-bypass-approvals-and-sandbox");
    l->argv[n++] = xstrdup("--disable");
    l->argv[n++] = xstrdup("plugins");
    l->argv[n++] = xstrdup("-c");
    l->argv[n++] = xstrdup("analytics.enabled=false");
    l->argv[n++] = xstrdup("-c");
    l->argv[n++] = xstrdup("model_provider=\"sandbox-mcp\"");
    l->argv[n++] = xstrdup("-c");
    /* the URL holds only a provider's name and path: both checked when the files were loaded;
     * requests are retried with backoff for minutes, so that a run outlives a restart of the
     * server */
    l->argv[n++] =
        xasprintf("model_providers.sandbox-mcp={name=\"sandbox-mcp\",base_url=\"%s/%s%s\","
                  "env_key=\"" TOKEN_ENV "\",wire_api=\"responses\","
                  "request_max_retries=10,stream_max_retries=10}",
                  l->proxy_url, p ? p->name : "", p ? p->base_path : "");
    /* the server's tools for the agent, whose calls wait for a person */
    char *url = agent_mcp_url(l);
    l->argv[n++] = xstrdup("-c");
    l->argv[n++] =
        xasprintf("mcp_servers." AGENT_MCP_NAME "={url=\"%s\",bearer_token_env_var=\"" TOKEN_ENV
                  "\",tool_timeout_sec=%d,startup_timeout_sec=60}",
                  url, AGENT_MCP_TIMEOUT_S);
    free(url);
    l->argv[n++] = xstrdup("-m");
    l->argv[n++] = xstrdup(slash ? slash + 1 : l->model);
    if (l->session && *l->session) {
        l->argv[n++] = xstrdup("resume");
        l->argv[n++] = xstrdup(l->session);
    }
    l->argv[n++] = xstrdup("-"); /* the task from stdin */
    n = 0;
    l->env = xcalloc(12 + AGENT_COMMON_ENV, sizeof(char *));
    l->env[n++] = xasprintf(TOKEN_ENV "=%s", l->proxy_token);
    /* it runs ripgrep, which its package carries beside its program */
    char *dir = xstrdup(l->program), *bin = strrchr(dir, '/');
    if (bin) {
        *bin = '\0';
        bin = strrchr(dir, '/');
    }
    if (bin)
        *bin = '\0';
    l->env[n++] = xasprintf("PATH=%s/codex-path:/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                            "/usr/bin:/sbin:/bin",
                            dir);
    free(dir);
    agent_common_env(l, l->env + n);
}

/* The OpenCode adapter: `opencode run --format json` in the run's directory, its Anthropic and
 * OpenAI providers pointed at the sandbox's proxy listener with the run's token as the key (read
 * from the environment, so it is in no file and no argument), every permission granted (the
 * sandbox is the boundary), and nothing fetched from the network. */
#include "runs/runs_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "runs/agent.h"

#define TOKEN_ENV "SANDBOX_MCP_PROXY_TOKEN"

void agent_launch_release(struct agent_launch *l)
{
    for (size_t i = 0; l->argv && l->argv[i]; i++)
        free(l->argv[i]);
    for (size_t i = 0; l->env && l->env[i]; i++)
        free(l->env[i]);
    free(l->argv);
    free(l->env);
    l->argv = l->env = NULL;
}

void opencode_launch(struct agent_launch *l)
{
    char *base_a = xasprintf("%s/anthropic/v1", l->proxy_url);
    char *base_o = xasprintf("%s/openai/v1", l->proxy_url);
    json_t *cfg = json_pack(
        "{s:s, s:b, s:s, s:{s:{s:{s:s, s:s}}, s:{s:{s:s, s:s}}}, s:{s:s, s:s, s:s, s:s, s:s}}",
        "$schema", "https://opencode.ai/config.json", "autoupdate", 0, "share", "disabled",
        "provider", "anthropic", "options", "baseURL", base_a, "apiKey", "{env:" TOKEN_ENV "}",
        "openai", "options", "baseURL", base_o, "apiKey", "{env:" TOKEN_ENV "}", "permission",
        "edit", "allow", "bash", "allow", "webfetch", "allow", "external_directory", "allow",
        "doom_loop", "allow");
    free(base_a);
    free(base_o);
    char *cfg_text = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);

    size_t n = 0;
    l->argv = xcalloc(12, sizeof(char *));
    l->argv[n++] = xstrdup(l->program);
    l->argv[n++] = xstrdup("run");
    l->argv[n++] = xstrdup("--format");
    l->argv[n++] = xstrdup("json");
    l->argv[n++] = xstrdup("--thinking");
    l->argv[n++] = xstrdup("--model");
    l->argv[n++] = xstrdup(l->model);
    if (l->session && *l->session) {
        l->argv[n++] = xstrdup("--session");
        l->argv[n++] = xstrdup(l->session);
    }
    n = 0;
    l->env = xcalloc(12, sizeof(char *));
    l->env[n++] = xasprintf("OPENCODE_CONFIG_CONTENT=%s", cfg_text);
    l->env[n++] = xasprintf(TOKEN_ENV "=%s", l->proxy_token);
    l->env[n++] = xstrdup("OPENCODE_DISABLE_MODELS_FETCH=1");
    l->env[n++] = xstrdup("OPENCODE_DISABLE_AUTOUPDATE=1");
    l->env[n++] = xstrdup("OPENCODE_DISABLE_SHARE=1");
    l->env[n++] = xstrdup("OPENCODE_DISABLE_LSP_DOWNLOAD=1");
    l->env[n++] = xstrdup("GIT_AUTHOR_NAME=sandbox-mcp agent");
    l->env[n++] = xstrdup("GIT_AUTHOR_EMAIL=agent@sandbox-mcp.invalid");
    l->env[n++] = xstrdup("GIT_COMMITTER_NAME=sandbox-mcp agent");
    l->env[n++] = xstrdup("GIT_COMMITTER_EMAIL=agent@sandbox-mcp.invalid");
    free(cfg_text);
}

static const struct agent_adapter agent_adapters[] = {
    {"opencode", opencode_launch, opencode_parse_event},
};

const struct agent_adapter *agent_find(const char *name)
{
    for (size_t i = 0; i < sizeof(agent_adapters) / sizeof(agent_adapters[0]); i++)
        if (strcmp(agent_adapters[i].name, name) == 0)
            return &agent_adapters[i];
    return NULL;
}

const char *agent_names(void)
{
    return "opencode";
}

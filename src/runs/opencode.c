/* The OpenCode adapter: `opencode run --format json` in the run's directory, the LLM providers
 * of the proxy's provider files pointed at the sandbox's proxy listener with the run's token as
 * the key (read from the environment, so it is in no file and no argument), every permission
 * granted (the sandbox is the boundary), and nothing fetched from the network. */
#include "runs/runs_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "proxy/proxy.h"
#include "runs/agent.h"
#include "sandbox/sandbox.h"

#define TOKEN_ENV AGENT_TOKEN_ENV

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

/* The AI SDK package OpenCode speaks a wire format with; OpenCode bundles all three (it imports
 * a bundled package instead of installing it, and a sandbox could not fetch one). */
static const char *sdk_package(enum proxy_wire w)
{
    switch (w) {
    case PROXY_WIRE_ANTHROPIC: return "@ai-sdk/anthropic";
    case PROXY_WIRE_OPENAI: return "@ai-sdk/openai";
    case PROXY_WIRE_OPENAI_COMPATIBLE: break;
    }
    return "@ai-sdk/openai-compatible";
}

size_t agent_common_env(const struct agent_launch *l, char **env)
{
    size_t n = 0;
    env[n++] = xstrdup("GIT_AUTHOR_NAME=sandbox-mcp agent");
    env[n++] = xstrdup("GIT_AUTHOR_EMAIL=agent@sandbox-mcp.invalid");
    env[n++] = xstrdup("GIT_COMMITTER_NAME=sandbox-mcp agent");
    env[n++] = xstrdup("GIT_COMMITTER_EMAIL=agent@sandbox-mcp.invalid");
    if (l->gh_host && *l->gh_host) {
        env[n++] = xstrdup("GH_CONFIG_DIR=" SANDBOX_SERVER_DIR);
        env[n++] = xasprintf("GH_HOST=%s", l->gh_host);
        /* gh sends GH_ENTERPRISE_TOKEN to any host but github.com */
        env[n++] = xasprintf("GH_TOKEN=%s", l->proxy_token);
        env[n++] = xasprintf("GH_ENTERPRISE_TOKEN=%s", l->proxy_token);
        env[n++] = xstrdup("GH_PROMPT_DISABLED=1");
        env[n++] = xstrdup("GH_NO_UPDATE_NOTIFIER=1");
    }
    return n;
}

char *agent_mcp_url(const struct agent_launch *l)
{
    size_t n = strlen(l->proxy_url);
    if (n >= 6 && strcmp(l->proxy_url + n - 6, "/proxy") == 0)
        n -= 6;
    return xasprintf("%.*s/agent/mcp", (int)n, l->proxy_url);
}

char *opencode_config(const struct agent_launch *l)
{
    const char *slash = strchr(l->model, '/');
    size_t plen = slash ? (size_t)(slash - l->model) : 0;
    json_t *providers = json_object(), *enabled = json_array();
    for (size_t i = 0; i < l->nproviders; i++) {
        const struct proxy_llm *p = &l->providers[i];
        char *base = xasprintf("%s/%s%s", l->proxy_url, p->name, p->base_path);
        json_t *prov = json_pack("{s:s, s:{s:s, s:s}}", "npm", sdk_package(p->wire), "options",
                                 "baseURL", base, "apiKey", "{env:" TOKEN_ENV "}");
        free(base);
        /* OpenCode knows a model only from its catalogue or the configuration */
        if (slash && slash[1] && strlen(p->name) == plen && memcmp(p->name, l->model, plen) == 0)
            json_object_set_new(prov, "models", json_pack("{s:{}}", slash + 1));
        json_object_set_new(providers, p->name, prov);
        json_array_append_new(enabled, json_string(p->name));
    }
    /* the server's tools for the agent. Their calls wait for a person: the requests' timeout
     * (experimental.mcp_timeout, in ms) is long. A server's own "timeout" would bound its
     * connection too, which must stay short (OpenCode's default, 30 s): a prompt waits for it. */
    char *url = agent_mcp_url(l);
    json_t *mcp = json_pack("{s:{s:s, s:s, s:{s:s}, s:b, s:b}}", AGENT_MCP_NAME, "type", "remote",
                            "url", url, "headers", "Authorization", "Bearer {env:" TOKEN_ENV "}",
                            "oauth", 0, "enabled", 1);
    free(url);
    json_t *cfg = json_pack(
        "{s:s, s:b, s:b, s:s, s:o, s:o, s:o, s:{s:I}, s:{s:s, s:s, s:s, s:s, s:s}}", "$schema",
        "https://opencode.ai/config.json", "autoupdate", 0, "snapshot", 0, "share", "disabled",
        "enabled_providers", enabled, "provider", providers, "mcp", mcp, "experimental",
        "mcp_timeout", (json_int_t)AGENT_MCP_TIMEOUT_S * 1000, "permission", "edit", "allow",
        "bash", "allow", "webfetch", "allow", "external_directory", "allow", "doom_loop", "allow");
    char *text = json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(cfg);
    return text;
}

void opencode_launch(struct agent_launch *l)
{
    char *cfg_text = opencode_config(l);

    size_t n = 0;
    l->argv = xcalloc(12, sizeof(char *));
    if (l->warm_port && l->start_ahead) {
        l->argv[n++] = xstrdup("sandbox-agent");
        l->argv[n++] = xstrdup("--start");
        l->argv[n++] = xstrdup(l->program);
        l->argv[n++] = xstrdup(l->warm_port);
        l->argv[n++] = xasprintf("%u", l->warm_idle_s);
        if (l->warm_dir) {
            l->argv[n++] = xstrdup(l->model);
            l->argv[n++] = xstrdup(l->warm_dir);
        }
        goto env;
    }
    if (l->warm_port) {
        l->argv[n++] = xstrdup("sandbox-agent");
        l->argv[n++] = xstrdup(l->program);
        l->argv[n++] = xstrdup(l->warm_port);
        l->argv[n++] = xasprintf("%u", l->warm_idle_s);
        l->argv[n++] = xstrdup(l->model);
        if (l->session && *l->session)
            l->argv[n++] = xstrdup(l->session);
        goto env;
    }
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
env:
    n = 0;
    l->env = xcalloc(8 + AGENT_COMMON_ENV, sizeof(char *));
    l->env[n++] = xasprintf("OPENCODE_CONFIG_CONTENT=%s", cfg_text);
    l->env[n++] = xasprintf(TOKEN_ENV "=%s", l->proxy_token);
    l->env[n++] = xstrdup("OPENCODE_DISABLE_MODELS_FETCH=1");
    l->env[n++] = xstrdup("OPENCODE_DISABLE_AUTOUPDATE=1");
    l->env[n++] = xstrdup("OPENCODE_DISABLE_SHARE=1");
    l->env[n++] = xstrdup("OPENCODE_DISABLE_LSP_DOWNLOAD=1");
    agent_common_env(l, l->env + n);
    free(cfg_text);
}

/* The agent adapters beside OpenCode: Claude Code's and Codex's command lines and environments
 * (src/runs/claude_code.c, codex.c), and which models each agent can run (agents.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proxy/proxy.h"
#include "runs/runs_internal.h"

static const struct proxy_llm llms[] = {
    {.name = "anthropic", .has_key = true, .wire = PROXY_WIRE_ANTHROPIC, .base_path = "/v1"},
    {.name = "openai", .has_key = true, .wire = PROXY_WIRE_OPENAI, .base_path = "/v1"},
    {.name = "openrouter",
     .has_key = true,
     .wire = PROXY_WIRE_OPENAI_COMPATIBLE,
     .base_path = "/api/v1"},
};

static const char *env_of(char **env, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; env[i]; i++)
        if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
            return env[i] + n + 1;
    return NULL;
}

static bool argv_has(char **argv, const char *s)
{
    for (size_t i = 0; argv[i]; i++)
        if (strcmp(argv[i], s) == 0)
            return true;
    return false;
}

static void no_token_in_argv(char **argv)
{
    for (size_t i = 0; argv[i]; i++)
        CHECK(!strstr(argv[i], "secret-token"));
}

TEST(claude_code_launch_points_it_at_the_proxy)
{
    struct agent_launch l = {.model = "anthropic/claude-sonnet-4-5",
                             .session = "",
                             .proxy_url = "http://127.0.0.1:8788/proxy",
                             .proxy_token = "secret-token",
                             .program = "/opt/agents/claude-code/claude.exe",
                             .providers = llms,
                             .nproviders = 1};
    claude_code_launch(&l);
    no_token_in_argv(l.argv);
    CHECK_STR_EQ(l.argv[0], "/opt/agents/claude-code/claude.exe");
    CHECK(argv_has(l.argv, "stream-json") && argv_has(l.argv, "--dangerously-skip-permissions"));
    CHECK(argv_has(l.argv, "claude-sonnet-4-5"));
    CHECK(!argv_has(l.argv, "--resume"));
    CHECK_STR_EQ(env_of(l.env, "ANTHROPIC_API_KEY"), "secret-token");
    /* it adds /v1/messages itself */
    CHECK_STR_EQ(env_of(l.env, "ANTHROPIC_BASE_URL"), "http://127.0.0.1:8788/proxy/anthropic");
    CHECK_STR_EQ(env_of(l.env, "IS_SANDBOX"), "1");
    CHECK_STR_EQ(env_of(l.env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"), "1");
    CHECK(env_of(l.env, "GIT_AUTHOR_NAME") != NULL);
    agent_launch_release(&l);

    l.session = "7987e1b7-63f6-4808-8fc6-fd406e557b36";
    claude_code_launch(&l);
    CHECK(argv_has(l.argv, "--resume") && argv_has(l.argv, l.session));
    agent_launch_release(&l);
}

TEST(codex_launch_points_it_at_the_proxy)
{
    struct agent_launch l = {.model = "openai/gpt-5-codex",
                             .session = "",
                             .proxy_url = "http://127.0.0.1:8788/proxy",
                             .proxy_token = "secret-token",
                             .program = "/opt/agents/codex/bin/codex",
                             .providers = llms + 1,
                             .nproviders = 1};
    codex_launch(&l);
    no_token_in_argv(l.argv);
    CHECK_STR_EQ(l.argv[1], "exec");
    CHECK(argv_has(l.argv, "--json") &&
          argv_has(l.argv, "--dangerously-bypass-approvals-and-sandbox"));
    CHECK(argv_has(l.argv, "model_providers.sandbox-mcp={name=\"sandbox-mcp\",base_url=\"http://"
                           "127.0.0.1:8788/proxy/openai/v1\",env_key=\"SANDBOX_MCP_PROXY_TOKEN\","
                           "wire_api=\"responses\",request_max_retries=10,stream_max_retries=10}"));
    CHECK(argv_has(l.argv, "gpt-5-codex") && !argv_has(l.argv, "resume"));
    size_t n = 0;
    while (l.argv[n])
        n++;
    CHECK_STR_EQ(l.argv[n - 1], "-"); /* the task from stdin */
    CHECK_STR_EQ(env_of(l.env, "SANDBOX_MCP_PROXY_TOKEN"), "secret-token");
    CHECK(strncmp(env_of(l.env, "PATH"), "/opt/agents/codex/codex-path:", 29) == 0);
    agent_launch_release(&l);

    l.session = "01a249ee-15b3-7280-b713-3239a5569495";
    codex_launch(&l);
    n = 0;
    while (l.argv[n])
        n++;
    CHECK_STR_EQ(l.argv[n - 3], "resume");
    CHECK_STR_EQ(l.argv[n - 2], l.session);
    agent_launch_release(&l);
}

TEST(agents_run_the_models_they_speak_to)
{
    struct err err = {0};
    const struct agent_adapter *claude = agent_find("claude-code"), *codex = agent_find("codex"),
                               *opencode = agent_find("opencode");
    CHECK(claude && codex && opencode);
    CHECK_INT_EQ(agent_model_check(claude, llms, 3, "anthropic/claude-sonnet-4-5", &err), 0);
    CHECK_INT_EQ(agent_model_check(codex, llms, 3, "openai/gpt-5-codex", &err), 0);
    for (size_t i = 0; i < 3; i++)
        CHECK_INT_EQ(agent_model_check(opencode, llms, 3, llms[i].name, &err), 0);
    CHECK_INT_EQ(agent_model_check(claude, llms, 3, "openai/gpt-5", &err), -EINVAL);
    CHECK_STR_EQ(err.msg, "agent 'claude-code' cannot use model 'openai/gpt-5': provider 'openai' "
                          "speaks OpenAI's Responses API, which claude-code does not; agents "
                          "that can: opencode, codex");
    CHECK_INT_EQ(agent_model_check(codex, llms, 3, "openrouter/x/y", &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "agents that can: opencode");
    CHECK_INT_EQ(agent_model_check(codex, llms, 3, "anthropic/claude-sonnet-4-5", &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "agents that can: opencode, claude-code");
    /* a provider the server does not have is proxy_llm_check's to refuse */
    CHECK_INT_EQ(agent_model_check(codex, llms, 3, "nope/m", &err), 0);
}

/* The run page shows an event's words in full, read again from its line by the run's agent */
TEST(runs_event_words_reads_each_agents_lines)
{
    static const char claude_text[] =
        "{\"type\":\"assistant\",\"message\":{\"id\":\"m1\",\"content\":[{\"type\":\"text\","
        "\"text\":\"Line one\\nline two\"}]}}";
    char *w = runs_event_words("claude-code", "text", claude_text);
    CHECK_STR_EQ(w, "Line one\nline two");
    free(w);
    CHECK(runs_event_words("claude-code", "step_start", claude_text) == NULL);
    static const char codex_failed[] =
        "{\"type\":\"turn.failed\",\"error\":{\"message\":\"unexpected status 400\"}}";
    w = runs_event_words("codex", "error", codex_failed);
    CHECK_STR_EQ(w, "unexpected status 400");
    free(w);
    CHECK(runs_event_words("nobody", "text", claude_text) == NULL);
    CHECK(runs_event_words("codex", "text", "not json") == NULL);
}

TEST_MAIN()

/* The table of agent adapters: the one place where the engine learns which coding agents it can
 * run. An adapter (struct agent_adapter, runs_internal.h) is a file of its own for its start
 * (opencode.c, claude_code.c, codex.c) and one for its output (opencode_events.c,
 * claude_events.c, codex_events.c): how to start its agent (command line and environment,
 * pointed at the proxy with the run's token), how to read a line of its output into
 * agent_events, where its program is installed, which model APIs it speaks, and the few ways it
 * differs (a wrapper to start it under, whether it can be kept warm, whether its conversations
 * belong to a directory).
 *
 * The rule of this file: the stages (workspace.c, launch.c, ingest.c, finish.c) never name an
 * agent; adding one is an entry here and its adapter's files. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <string.h>

#include "base/cleanup.h"
#include "runs/agent.h"

#if defined(__aarch64__)
#define CODEX_PLATFORM "@openai/codex-linux-arm64/vendor/aarch64-unknown-linux-musl"
#else
#define CODEX_PLATFORM "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl"
#endif

/* Agents that print one event a line, read without what came before */
static int read_opencode(struct agent_reader *rd, const char *line, size_t len,
                         struct agent_event *evs)
{
    return opencode_parse_event(line, len, evs) < 0 ? -EINVAL : 1;
}

static const struct agent_adapter agent_adapters[] = {
    {.name = "opencode",
     .launch = opencode_launch,
     .parse = read_opencode,
     .seed = scripts_agent_seed,
     .warm = true,
     .conversation_per_dir = true,
     .program_env = "OPENCODE_BIN",
     .installed = "opencode/node_modules/opencode-ai/bin/opencode.exe",
     .wires =
         1u << PROXY_WIRE_ANTHROPIC | 1u << PROXY_WIRE_OPENAI | 1u << PROXY_WIRE_OPENAI_COMPATIBLE},
    {.name = "claude-code",
     .launch = claude_code_launch,
     .parse = claude_parse_line,
     /* it keeps its conversations by the directory they began in (~/.claude/projects) */
     .conversation_per_dir = true,
     .program_env = "CLAUDE_CODE_BIN",
     .installed = "claude-code/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
     .wires = 1u << PROXY_WIRE_ANTHROPIC},
    {.name = "codex",
     .launch = codex_launch,
     .parse = codex_parse_line,
     .totals = codex_line_totals,
     .program_env = "CODEX_BIN",
     .installed = "codex/node_modules/" CODEX_PLATFORM "/bin/codex",
     .mount_up = 1, /* its platform directory: ripgrep, which it runs, is beside bin/ */
     .wires = 1u << PROXY_WIRE_OPENAI},
};

const struct agent_adapter *agent_find(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(agent_adapters); i++)
        if (strcmp(agent_adapters[i].name, name) == 0)
            return &agent_adapters[i];
    return NULL;
}

const struct agent_adapter *agent_first(void)
{
    return &agent_adapters[0];
}

const struct agent_adapter *agent_next(const struct agent_adapter *ad)
{
    return ad + 1 < agent_adapters + ARRAY_SIZE(agent_adapters) ? ad + 1 : NULL;
}

bool agent_speaks(const struct agent_adapter *ad, const struct proxy_llm *llm)
{
    return (ad->wires & 1u << llm->wire) != 0;
}

static const char *wire_name(enum proxy_wire w)
{
    switch (w) {
    case PROXY_WIRE_ANTHROPIC: return "the Anthropic Messages API";
    case PROXY_WIRE_OPENAI: return "OpenAI's Responses API";
    case PROXY_WIRE_OPENAI_COMPATIBLE: break;
    }
    return "OpenAI-compatible chat completions";
}

int agent_model_check(const struct agent_adapter *ad, const struct proxy_llm *llms, size_t n,
                      const char *model, struct err *err)
{
    size_t plen = strcspn(model, "/");
    const struct proxy_llm *llm = NULL;
    for (size_t i = 0; i < n && !llm; i++)
        if (strlen(llms[i].name) == plen && memcmp(llms[i].name, model, plen) == 0)
            llm = &llms[i];
    if (!llm || agent_speaks(ad, llm))
        return 0;
    char can[256] = "";
    for (size_t i = 0, len = 0; i < ARRAY_SIZE(agent_adapters); i++)
        if (agent_speaks(&agent_adapters[i], llm))
            len += (size_t)snprintf(can + len, sizeof(can) - len, "%s%s", len ? ", " : "",
                                    agent_adapters[i].name);
    return err_set(err, -EINVAL,
                   "agent '%s' cannot use model '%.120s': provider '%s' speaks %s, which %s does "
                   "not; agents that can: %s",
                   ad->name, model, llm->name, wire_name(llm->wire), ad->name,
                   can[0] ? can : "none");
}

char *runs_event_words(const char *agent, const char *type, const char *raw)
{
    const struct agent_adapter *ad = agent_find(agent);
    enum agent_event_kind kind = agent_event_kind_of(type);
    if (!ad || (kind != AGENT_EV_TEXT && kind != AGENT_EV_ERROR))
        return NULL;
    struct agent_reader rd = {0};
    struct agent_event evs[AGENT_LINE_EVENTS];
    int n = ad->parse(&rd, raw, strlen(raw), evs);
    char *words = NULL;
    for (int i = 0; i < n; i++) {
        if (!words && evs[i].kind == kind) {
            words = kind == AGENT_EV_TEXT ? evs[i].text : evs[i].error;
            if (kind == AGENT_EV_TEXT)
                evs[i].text = NULL;
            else
                evs[i].error = NULL;
        }
        agent_event_clear(&evs[i]);
    }
    agent_reader_clear(&rd);
    return words;
}

const char *agent_names(void)
{
    static char names[256];
    if (!names[0])
        for (size_t i = 0, len = 0; i < ARRAY_SIZE(agent_adapters); i++)
            len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "",
                                    agent_adapters[i].name);
    return names;
}

/* A run's phase: what it is doing now, in words a person on a phone or a polling model can pass
 * on. The engine moves a run through
 *   queued -> preparing (the sandbox, the workspace) -> cloning (a repository not yet in the
 *   workspace) -> preparing (unpacking it) -> setting up (the run's or the repository's setup,
 *   setup.c) -> agent (step N: what the agent did last) -> finishing (collecting the changes
 *   and the diff) -> delivering (push, pull request)
 * and ends it in succeeded, failed or cancelled, with where it ended ("at step 3", "while
 * cloning"). The agent's part comes from its events: each step (a turn with the model) counts
 * one, and its last tool call, message or error tells what it did in it. OpenCode prints a tool
 * call once it is over, so the line says what the agent did ("ran `make test`"), not what it is
 * doing. The phase is kept on the run's row (store_run_set_phase), where get_result and the run's
 * page read it. */
#include "runs/runs.h"

#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/utf8.h"
#include "base/util.h"
#include "runs/agent.h"
#include "runs/runs_internal.h"
#include "store/store.h"

#define TARGET_SHOWN 100 /* bytes of a command or path in a phase line */
#define WORDS_SHOWN 80   /* bytes of the agent's words or an error */
#define RECENT_LOOK 40   /* events looked at, newest first, for the recent ones */

/* s into out, at most max bytes of it, cut on a character boundary and marked with "…". */
static void put_cut(char *out, size_t cap, const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max) {
        snprintf(out, cap, "%s", s);
        return;
    }
    n = utf8_boundary(s, max);
    snprintf(out, cap, "%.*s\xE2\x80\xA6", (int)n, s);
}

bool phase_activity(const struct agent_event *ev, const char *workdir, char *out, size_t cap)
{
    char what[TARGET_SHOWN + 8] = "";
    switch (ev->kind) {
    case AGENT_EV_STEP_START:
    case AGENT_EV_REASONING: snprintf(out, cap, "thinking"); return true;
    case AGENT_EV_TEXT:
        if (!ev->summary || !ev->summary[0])
            return false;
        put_cut(what, sizeof(what), ev->summary, WORDS_SHOWN);
        snprintf(out, cap, "said \"%s\"", what);
        return true;
    case AGENT_EV_ERROR:
        put_cut(what, sizeof(what), ev->summary ? ev->summary : "", WORDS_SHOWN);
        snprintf(out, cap, "error: %s", what);
        return true;
    case AGENT_EV_TOOL_USE: break;
    default: return false;
    }
    static const struct {
        const char *tool, *verb;
        bool code;   /* the target is shown as code */
        bool target; /* the target is shown at all */
    } verbs[] = {
        {"bash", "ran", true, true},
        {"edit", "edited", false, true},
        {"multiedit", "edited", false, true},
        {"patch", "edited", false, true},
        {"apply_patch", "edited", false, true},
        {"write", "wrote", false, true},
        {"read", "read", false, true},
        {"grep", "searched for", true, true},
        {"glob", "looked for", true, true},
        {"list", "listed", false, true},
        {"webfetch", "fetched", false, true},
        {"websearch", "searched the web for", false, true},
        {"codesearch", "searched code for", false, true},
        {"todowrite", "updated its to-do list", false, false},
        {"todoread", "read its to-do list", false, false},
        {"task", "handed a subtask to another agent:", false, true},
    };
    const char *target = ev->target;
    /* a path in the workspace reads best from there */
    size_t wl = workdir ? strlen(workdir) : 0;
    if (target && wl > 1 && strncmp(target, workdir, wl) == 0 && target[wl] == '/' &&
        target[wl + 1])
        target += wl + 1;
    if (target)
        put_cut(what, sizeof(what), target, TARGET_SHOWN);
    const char *suffix = ev->tool_failed ? " (failed)" : "";
    char code[24] = "";
    if (ev->exit_status)
        snprintf(code, sizeof(code), " (exit %d)", ev->exit_status);
    for (size_t i = 0; i < ARRAY_SIZE(verbs); i++) {
        if (strcmp(ev->tool, verbs[i].tool) != 0)
            continue;
        if (!verbs[i].target || !target)
            snprintf(out, cap, "%s%s%s", verbs[i].verb, suffix, code);
        else if (verbs[i].code)
            snprintf(out, cap, "%s `%s`%s%s", verbs[i].verb, what, suffix, code);
        else
            snprintf(out, cap, "%s %s%s%s", verbs[i].verb, what, suffix, code);
        return true;
    }
    if (target)
        snprintf(out, cap, "used %s on %s%s%s", ev->tool[0] ? ev->tool : "a tool", what, suffix,
                 code);
    else
        snprintf(out, cap, "used %s%s%s", ev->tool[0] ? ev->tool : "a tool", suffix, code);
    return true;
}

/* Whether a command runs tests: a test runner by name, or a build tool's test target ("npm
 * test", "go test ./...", "cargo test", "npm run test", "make check"). `test` on its own is the
 * shell's test, not one. */
static bool test_command(const char *cmd)
{
    static const char *const runners[] = {"pytest", "jest",  "vitest",  "mocha",   "rspec",
                                          "tox",    "ctest", "phpunit", "unittest"};
    static const char *const tools[] = {
        "npm",    "yarn", "pnpm", "bun", "go",    "cargo", "make",    "mvn",  "gradle", "gradlew",
        "dotnet", "mix",  "deno", "run", "swift", "zig",   "flutter", "dart", "sbt",    "lein"};
    char word[64], prev[64] = "";
    const char *p = cmd + strspn(cmd, " \t;&|()");
    while (*p) {
        size_t n = strcspn(p, " \t;&|()");
        if (n < sizeof(word)) {
            memcpy(word, p, n);
            word[n] = '\0';
            const char *base = strrchr(word, '/') ? strrchr(word, '/') + 1 : word;
            bool after_tool = false;
            for (size_t i = 0; i < ARRAY_SIZE(tools); i++)
                after_tool |= strcmp(prev, tools[i]) == 0;
            if (after_tool && (strcmp(base, "test") == 0 ||
                               (strcmp(prev, "make") == 0 && strcmp(base, "check") == 0)))
                return true;
            for (size_t i = 0; i < ARRAY_SIZE(runners); i++)
                if (strcmp(base, runners[i]) == 0)
                    return true;
            /* options between a tool and its target ("make -j4 test", "go test -v") */
            if (base[0] != '-')
                snprintf(prev, sizeof(prev), "%s", base);
        }
        p += n;
        p += strspn(p, " \t;&|()");
    }
    return false;
}

bool phase_tests(const struct agent_event *ev, char *out, size_t cap)
{
    if (ev->kind != AGENT_EV_TOOL_USE || strcmp(ev->tool, "bash") != 0 || !ev->target ||
        !test_command(ev->target))
        return false;
    char what[TARGET_SHOWN + 8];
    put_cut(what, sizeof(what), ev->target, TARGET_SHOWN);
    if (ev->exit_status)
        snprintf(out, cap, "failed: %s (exit %d)", what, ev->exit_status);
    else if (ev->tool_failed)
        snprintf(out, cap, "failed: %s", what);
    else
        snprintf(out, cap, "passed: %s", what);
    return true;
}

bool phase_event_shown(const char *type)
{
    /* a turn's start and end (with its token counts) and thinking say nothing of the work */
    return strcmp(type, "step_start") != 0 && strcmp(type, "step_finish") != 0 &&
           strcmp(type, "reasoning") != 0;
}

/* A run from before phases were kept reads as its status. */
static const char *phase_name(const struct store_run *r)
{
    return r->phase[0] ? r->phase : r->status;
}

void runs_phase_text(const struct store_run *r, char *out, size_t cap)
{
    const char *name = phase_name(r);
    const char *detail = r->phase_detail && *r->phase_detail ? r->phase_detail : NULL;
    if (!r->phase[0] && strcmp(r->status, "running") == 0 && r->status_reason)
        snprintf(out, cap, "%s", r->status_reason);
    else if (strcmp(name, "agent") == 0 && r->phase_step > 0)
        snprintf(out, cap, "step %lld: %s", (long long)r->phase_step, detail ? detail : "working");
    else if (strcmp(name, "succeeded") == 0 || strcmp(name, "failed") == 0 ||
             strcmp(name, "cancelled") == 0)
        snprintf(out, cap, "%s%s%s", name, detail ? " " : "", detail ? detail : "");
    else
        snprintf(out, cap, "%s", detail ? detail : name);
}

json_t *runs_phase_describe(const struct store_run *r)
{
    char text[RUNS_PHASE_TEXT_MAX];
    runs_phase_text(r, text, sizeof(text));
    json_t *since = json_null();
    if (r->phase_at) {
        char at[32];
        time_format_rfc3339(r->phase_at, at);
        since = json_string(at);
    }
    return json_pack("{s:s, s:I, s:s?, s:s, s:o}", "name", phase_name(r), "step",
                     (json_int_t)r->phase_step, "detail", r->phase_detail, "text", text, "since",
                     since);
}

int64_t runs_elapsed_ms(const struct store_run *r, int64_t now_ms)
{
    int64_t from = r->started_at ? r->started_at : r->created_at;
    int64_t to = r->finished_at ? r->finished_at : now_ms;
    return to > from ? to - from : 0;
}

void runs_duration_text(int64_t ms, char *out, size_t cap)
{
    long long s = (long long)(ms / 1000);
    if (s < 60)
        snprintf(out, cap, "%llds", s);
    else if (s < 3600)
        snprintf(out, cap, "%lldm %02llds", s / 60, s % 60);
    else
        snprintf(out, cap, "%lldh %02lldm", s / 3600, s / 60 % 60);
}

struct recent {
    json_t *list;
    unsigned want;
};

static void add_recent(const struct store_run_event_row *e, void *ctx)
{
    struct recent *rc = ctx;
    if (json_array_size(rc->list) >= rc->want || !phase_event_shown(e->type))
        return;
    char at[32];
    time_format_rfc3339(e->time, at);
    /* newest first from the store, oldest first in the answer */
    json_array_insert_new(rc->list, 0,
                          json_pack("{s:I, s:s, s:s, s:s}", "seq", (json_int_t)e->seq, "time", at,
                                    "type", e->type, "summary", e->summary));
}

json_t *runs_recent_events(struct store *st, const char *run_id, unsigned n)
{
    struct recent rc = {json_array(), n};
    struct err err = {0};
    store_run_events_back(st, run_id, 0, RECENT_LOOK, add_recent, &rc, &err);
    return rc.list;
}

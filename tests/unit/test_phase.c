/* A run's phase: the agent's events in words, the phase line, elapsed time (the store's part:
 * test_store.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runs/agent.h"
#include "runs/runs.h"
#include "runs/runs_internal.h"
#include "store/store.h"

/* What phase_activity says of one line of OpenCode's output ("" when it says nothing). */
static const char *activity(const char *line, const char *workdir)
{
    static char out[RUNS_PHASE_TEXT_MAX];
    struct agent_event ev;
    strcpy(out, "");
    if (opencode_parse_event(line, strlen(line), &ev) < 0)
        return "(not parsed)";
    if (!phase_activity(&ev, workdir, out, sizeof(out)))
        strcpy(out, "");
    agent_event_clear(&ev);
    return out;
}

#define TOOL(tool, input, extra)                                                                   \
    "{\"type\":\"tool_use\",\"part\":{\"tool\":\"" tool "\",\"state\":{\"status\":"                \
    "\"completed\",\"input\":" input extra "}}}"

TEST(phase_activity_of_tools)
{
    const char *wd = "/workspace/widget";
    /* a command as code, not its description; its exit status when not 0 */
    CHECK_STR_EQ(activity(TOOL("bash", "{\"command\":\"npm test\",\"description\":\"Run tests\"}",
                               ",\"metadata\":{\"exit\":0}"),
                          wd),
                 "ran `npm test`");
    CHECK_STR_EQ(activity(TOOL("bash", "{\"command\":\"make check\\nmake install\"}",
                               ",\"metadata\":{\"exit\":2}"),
                          wd),
                 "ran `make check` (exit 2)");
    /* paths in the workspace from there; others as given */
    CHECK_STR_EQ(activity(TOOL("edit", "{\"filePath\":\"/workspace/widget/src/x.c\"}", ""), wd),
                 "edited src/x.c");
    CHECK_STR_EQ(activity(TOOL("write", "{\"filePath\":\"/tmp/notes.md\"}", ""), wd),
                 "wrote /tmp/notes.md");
    CHECK_STR_EQ(activity(TOOL("write", "{\"filePath\":\"/workspace/widgetx/a\"}", ""), wd),
                 "wrote /workspace/widgetx/a");
    CHECK_STR_EQ(activity(TOOL("read", "{\"filePath\":\"/workspace/widget/README.md\"}", ""), NULL),
                 "read /workspace/widget/README.md");
    CHECK_STR_EQ(activity(TOOL("grep", "{\"pattern\":\"TODO\",\"path\":\"/src\"}", ""), wd),
                 "searched for `TODO`");
    CHECK_STR_EQ(activity(TOOL("todowrite", "{\"todos\":[]}", ",\"title\":\"3 todos\""), wd),
                 "updated its to-do list");
    CHECK_STR_EQ(activity(TOOL("frobnicate", "{\"path\":\"/x\"}", ""), wd),
                 "used frobnicate on /x");
    CHECK_STR_EQ(activity("{\"type\":\"tool_use\",\"part\":{}}", wd), "used a tool");
    /* a failed call says so */
    CHECK_STR_EQ(activity("{\"type\":\"tool_use\",\"part\":{\"tool\":\"read\",\"state\":{"
                          "\"status\":\"error\",\"input\":{\"filePath\":\"/workspace/widget/"
                          "gone.txt\"},\"error\":\"File not found\"}}}",
                          wd),
                 "read gone.txt (failed)");
    /* a long command is cut on a character boundary, and marked */
    char line[1024], want[256];
    snprintf(line, sizeof(line), TOOL("bash", "{\"command\":\"echo %s\"}", ""),
             "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"
             "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"
             "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"
             "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"
             "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9");
    const char *got = activity(line, wd);
    /* "echo " and 47 of the two-byte characters fit in 100 bytes; then the ellipsis */
    snprintf(want, sizeof(want), "ran `echo %.94s\xE2\x80\xA6`",
             "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"
             "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"
             "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"
             "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"
             "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9");
    CHECK_STR_EQ(got, want);
}

TEST(phase_activity_of_other_events)
{
    CHECK_STR_EQ(activity("{\"type\":\"step_start\",\"part\":{\"type\":\"step-start\"}}", NULL),
                 "thinking");
    CHECK_STR_EQ(activity("{\"type\":\"reasoning\",\"part\":{\"text\":\"hmm\"}}", NULL),
                 "thinking");
    CHECK_STR_EQ(activity("{\"type\":\"text\",\"part\":{\"text\":\"I will add hello.txt.\\nThen "
                          "commit.\"}}",
                          NULL),
                 "said \"I will add hello.txt.\"");
    CHECK_STR_EQ(activity("{\"type\":\"error\",\"error\":{\"name\":\"APIError\",\"data\":{"
                          "\"message\":\"invalid x-api-key\",\"statusCode\":401}}}",
                          NULL),
                 "error: APIError 401: invalid x-api-key");
    /* a step's end and anything else say nothing of the work */
    CHECK_STR_EQ(activity("{\"type\":\"step_finish\",\"part\":{\"reason\":\"stop\"}}", NULL), "");
    CHECK_STR_EQ(activity("{\"type\":\"something\"}", NULL), "");
    CHECK(phase_event_shown("tool_use") && phase_event_shown("text") &&
          phase_event_shown("error") && phase_event_shown("push_refused"));
    CHECK(!phase_event_shown("step_start") && !phase_event_shown("step_finish") &&
          !phase_event_shown("reasoning"));
}

/* A run row as the store gives it, in memory. */
static struct store_run row(const char *status, const char *phase, int64_t step, const char *detail)
{
    struct store_run r = {0};
    snprintf(r.status, sizeof(r.status), "%s", status);
    snprintf(r.phase, sizeof(r.phase), "%s", phase);
    r.phase_step = step;
    r.phase_detail = (char *)detail;
    return r;
}

static const char *text_of(struct store_run r)
{
    static char out[RUNS_PHASE_TEXT_MAX];
    runs_phase_text(&r, out, sizeof(out));
    return out;
}

TEST(phase_text)
{
    CHECK_STR_EQ(text_of(row("queued", "queued", 0, NULL)), "queued");
    CHECK_STR_EQ(text_of(row("running", "cloning", 0, "cloning https://h/a/b")),
                 "cloning https://h/a/b");
    CHECK_STR_EQ(text_of(row("running", "agent", 0, "starting the agent")), "starting the agent");
    CHECK_STR_EQ(text_of(row("running", "agent", 3, "ran `make`")), "step 3: ran `make`");
    CHECK_STR_EQ(text_of(row("running", "agent", 3, NULL)), "step 3: working");
    CHECK_STR_EQ(text_of(row("running", "finishing", 3, "collecting the changes")),
                 "collecting the changes");
    /* how it ended */
    CHECK_STR_EQ(text_of(row("failed", "failed", 3, "at step 3")), "failed at step 3");
    CHECK_STR_EQ(text_of(row("succeeded", "succeeded", 1, "after 1 step")),
                 "succeeded after 1 step");
    CHECK_STR_EQ(text_of(row("cancelled", "cancelled", 0, NULL)), "cancelled");
    /* a run from before phases were kept reads as its status, and a running one its reason */
    CHECK_STR_EQ(text_of(row("succeeded", "", 0, NULL)), "succeeded");
    struct store_run old = row("running", "", 0, NULL);
    old.status_reason = (char *)"preparing the sandbox";
    CHECK_STR_EQ(text_of(old), "preparing the sandbox");

    struct store_run r = row("running", "agent", 3, "ran `make`");
    r.phase_at = 4000;
    json_t *j = runs_phase_describe(&r);
    CHECK_STR_EQ(json_string_value(json_object_get(j, "name")), "agent");
    CHECK_INT_EQ(json_integer_value(json_object_get(j, "step")), 3);
    CHECK_STR_EQ(json_string_value(json_object_get(j, "detail")), "ran `make`");
    CHECK_STR_EQ(json_string_value(json_object_get(j, "text")), "step 3: ran `make`");
    CHECK_STR_EQ(json_string_value(json_object_get(j, "since")), "1970-01-01T00:00:04.000Z");
    json_decref(j);
    j = runs_phase_describe(&old);
    CHECK_STR_EQ(json_string_value(json_object_get(j, "name")), "running");
    CHECK(json_is_null(json_object_get(j, "since")) && json_is_null(json_object_get(j, "detail")));
    json_decref(j);
}

TEST(phase_elapsed)
{
    struct store_run r = row("queued", "queued", 0, NULL);
    r.created_at = 1000;
    CHECK_INT_EQ(runs_elapsed_ms(&r, 3000), 2000); /* waiting */
    r.started_at = 6000;
    CHECK_INT_EQ(runs_elapsed_ms(&r, 9000), 3000); /* running */
    r.finished_at = 16000;
    CHECK_INT_EQ(runs_elapsed_ms(&r, 99000), 10000); /* how long it ran */
    r.started_at = 0;
    CHECK_INT_EQ(runs_elapsed_ms(&r, 99000), 15000); /* ended before it started */
    CHECK_INT_EQ(runs_elapsed_ms(&r, 0), 15000);
    r.finished_at = 0;
    CHECK_INT_EQ(runs_elapsed_ms(&r, 500), 0); /* a clock that went back */
    char d[32];
    runs_duration_text(14999, d, sizeof(d));
    CHECK_STR_EQ(d, "14s");
    runs_duration_text(125000, d, sizeof(d));
    CHECK_STR_EQ(d, "2m 05s");
    runs_duration_text(3720000, d, sizeof(d));
    CHECK_STR_EQ(d, "1h 02m");
}

TEST_MAIN()

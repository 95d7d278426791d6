/* A run's phase: the agent's events in words, the phase line, elapsed time (the store's part:
 * test_store.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* What the waiters of a run were told: its phase each time. */
struct told {
    struct store *st;
    const char *run_id;
    int n;
    char text[8][RUNS_PHASE_TEXT_MAX];
};

static void on_progress(void *ctx)
{
    struct told *t = ctx;
    struct store_run row = {0};
    struct err err = {0};
    if (store_run_get(t->st, NULL, t->run_id, &row, &err) == 0 && t->n < 8)
        runs_phase_text(&row, t->text[t->n++], sizeof(t->text[0]));
    store_run_release(&row);
}

#define STEP_START "{\"type\":\"step_start\",\"part\":{\"type\":\"step-start\"}}\n"
#define STEP_FINISH "{\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\"}}\n"

/* However many steps one read of the event file brings, each step's phase is recorded and told
 * in turn: a client that waits with a progress token hears every step. */
TEST(phase_told_for_every_step_of_one_read)
{
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_user u;
    CHECK_INT_EQ(store_user_add(st, "ann", &u, &err), 0);
    struct store_session ses = {0};
    snprintf(ses.id, sizeof(ses.id), "ses_a");
    snprintf(ses.user_id, sizeof(ses.user_id), "%s", u.id);
    snprintf(ses.agent, sizeof(ses.agent), "opencode");
    CHECK_INT_EQ(store_session_create(st, &ses, &err), 0);
    struct store_run row = {0};
    snprintf(row.id, sizeof(row.id), "run_phase_steps");
    snprintf(row.user_id, sizeof(row.user_id), "%s", u.id);
    snprintf(row.session_id, sizeof(row.session_id), "%s", ses.id);
    snprintf(row.model, sizeof(row.model), "anthropic/x");
    snprintf(row.agent, sizeof(row.agent), "opencode");
    row.task = (char *)"do it";
    row.status_reason = (char *)"accepted";
    row.timeout_ms = 60000;
    row.created_at = 1000;
    CHECK_INT_EQ(store_run_insert(st, &row, &err), 0);

    char dir[] = "/tmp/smcp-phase-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char events[sizeof(dir) + 16];
    snprintf(events, sizeof(events), "%s/events.jsonl", dir);
    FILE *f = fopen(events, "w");
    CHECK(f != NULL);
    static const char *const lines[] = {
        STEP_START,
        TOOL("bash", "{\"command\":\"ls README.md\"}", ",\"metadata\":{\"exit\":0}") "\n",
        STEP_FINISH,
        STEP_START,
        TOOL("write", "{\"filePath\":\"/workspace/w/notes.md\",\"content\":\"n\"}", "") "\n",
        STEP_FINISH,
        STEP_START,
        "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"Wrote notes.md.\"}}\n",
        STEP_FINISH,
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        fputs(lines[i], f);
    long size = ftell(f);
    fclose(f);

    struct runs e = {.st = st};
    struct run r = {.e = &e, .adapter = agent_find("opencode"), .wd = -1, .wd_status = -1};
    snprintf(r.id, sizeof(r.id), "%s", row.id);
    snprintf(r.session_id, sizeof(r.session_id), "%s", row.session_id);
    snprintf(r.dir, sizeof(r.dir), "%s", dir);
    snprintf(r.workdir, sizeof(r.workdir), "/workspace/w");
    snprintf(r.ph_name, sizeof(r.ph_name), "agent");
    struct told told = {.st = st, .run_id = row.id};
    struct runs_waiter w = {.e = &e, .progress = on_progress, .ctx = &told};
    snprintf(w.run_id, sizeof(w.run_id), "%s", row.id);
    e.waiters = &w;

    run_ingest(&r);
    CHECK_INT_EQ(r.offset, size);
    CHECK_INT_EQ(r.steps, 3);
    CHECK_INT_EQ(told.n, 3);
    CHECK_STR_EQ(told.text[0], "step 1: ran `ls README.md`");
    CHECK_STR_EQ(told.text[1], "step 2: wrote notes.md");
    CHECK_STR_EQ(told.text[2], "step 3: said \"Wrote notes.md.\"");
    struct store_run stored = {0};
    CHECK_INT_EQ(store_run_get(st, NULL, row.id, &stored, &err), 0);
    CHECK_INT_EQ(stored.event_count, 9);
    store_run_release(&stored);
    agent_reader_clear(r.reader); /* what the parser kept between lines */
    free(r.reader);

    unlink(events);
    rmdir(dir);
    store_close(st);
    free(path);
}

/* A test command's outcome, for comparing attempts: runners by name and build tools' test
 * targets, not the shell's test */
TEST(phase_tests_tells_test_commands)
{
    static const struct {
        const char *target;
        int exit_status;
        const char *want; /* NULL: not a test command */
    } cases[] = {
        {"npm test", 0, "passed: npm test"},
        {"cd app && npm test", 1, "failed: cd app && npm test (exit 1)"},
        {"go test -v ./...", 0, "passed: go test -v ./..."},
        {"python -m pytest -q", 2, "failed: python -m pytest -q (exit 2)"},
        {"make -j4 check", 0, "passed: make -j4 check"},
        {"npm run test", 0, "passed: npm run test"},
        {"./node_modules/.bin/vitest run", 0, "passed: ./node_modules/.bin/vitest run"},
        {"test -f hello.txt", 0, NULL},
        {"echo test", 0, NULL},
        {"make", 0, NULL},
        {"git commit -m 'add test'", 0, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct agent_event ev = {.kind = AGENT_EV_TOOL_USE,
                                 .target = (char *)cases[i].target,
                                 .exit_status = cases[i].exit_status};
        snprintf(ev.tool, sizeof(ev.tool), "bash");
        char out[160] = "";
        bool is = phase_tests(&ev, out, sizeof(out));
        CHECK(is == (cases[i].want != NULL));
        if (cases[i].want)
            CHECK_STR_EQ(out, cases[i].want);
    }
    /* only a command's */
    struct agent_event edit = {.kind = AGENT_EV_TOOL_USE, .target = (char *)"npm test"};
    snprintf(edit.tool, sizeof(edit.tool), "edit");
    char out[160];
    CHECK(!phase_tests(&edit, out, sizeof(out)));
}

TEST_MAIN()

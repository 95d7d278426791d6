/* Codex's `exec --json` lines read into agent events (src/runs/codex_events.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runs/agent.h"

/* Lines as Codex 0.171.0 printed them (`codex exec --json` against a scripted Responses API). */
static const char thread_line[] =
    "{\"type\":\"thread.started\",\"thread_id\":\"01a249b8-4009-7251-a37e-e20f456646fc\"}";
static const char warning_line[] =
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_0\",\"type\":\"error\",\"message\":"
    "\"Model metadata for `gpt-5-codex` not found. Defaulting to fallback metadata; this can "
    "degrade performance and cause issues.\"}}";
static const char turn_started_line[] = "{\"type\":\"turn.started\"}";
static const char command_started_line[] =
    "{\"type\":\"item.started\",\"item\":{\"id\":\"item_1\",\"type\":\"command_execution\","
    "\"command\":\"/bin/bash -lc 'echo hi > hello.txt && cat hello.txt'\",\"aggregated_output\":"
    "\"\",\"exit_code\":null,\"status\":\"in_progress\"}}";
static const char command_line[] =
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_1\",\"type\":\"command_execution\","
    "\"command\":\"/bin/bash -lc 'echo hi > hello.txt && cat hello.txt'\",\"aggregated_output\":"
    "\"hi\\n\",\"exit_code\":0,\"status\":\"completed\"}}";
static const char message_line[] =
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_2\",\"type\":\"agent_message\",\"text\":"
    "\"Wrote hello.txt.\"}}";
static const char turn_completed_line[] =
    "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":200,\"cached_input_tokens\":0,"
    "\"cache_write_input_tokens\":0,\"output_tokens\":40,\"reasoning_output_tokens\":0}}";
static const char reasoning_line[] =
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_0\",\"type\":\"reasoning\",\"text\":"
    "\"**Thinking about it**\"}}";
static const char file_change_line[] =
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_0\",\"type\":\"file_change\",\"changes\":"
    "[{\"path\":\"/tmp/agents36/work1/hello.txt\",\"kind\":\"add\"}],\"status\":\"completed\"}}";
static const char notice_line[] =
    "{\"type\":\"error\",\"message\":\"unexpected status 401 Unauthorized: fake failure 401, url: "
    "http://127.0.0.1:18471/v1/responses\"}";
static const char failed_line[] =
    "{\"type\":\"turn.failed\",\"error\":{\"message\":\"unexpected status 401 Unauthorized: fake "
    "failure 401, url: http://127.0.0.1:18471/v1/responses\"}}";

TEST(codex_a_run_as_events)
{
    struct agent_event ev;
    CHECK_INT_EQ(codex_parse_event(thread_line, strlen(thread_line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_OTHER);
    CHECK_STR_EQ(ev.type, "thread.started");
    CHECK_STR_EQ(ev.session, "01a249b8-4009-7251-a37e-e20f456646fc");
    CHECK_STR_EQ(ev.summary, "thread started");
    agent_event_clear(&ev);

    /* an unknown model's warning does not end the run: not an error */
    CHECK_INT_EQ(codex_parse_event(warning_line, strlen(warning_line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_OTHER);
    CHECK(ev.error == NULL);
    CHECK_STR_CONTAINS(ev.summary, "Model metadata for `gpt-5-codex` not found.");
    agent_event_clear(&ev);

    CHECK_INT_EQ(codex_parse_event(turn_started_line, strlen(turn_started_line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_STEP_START);
    CHECK_STR_EQ(ev.summary, "step start");
    agent_event_clear(&ev);

    /* a command still running is not yet a tool use */
    CHECK_INT_EQ(codex_parse_event(command_started_line, strlen(command_started_line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_OTHER);
    CHECK_STR_EQ(ev.summary, "item.started");
    agent_event_clear(&ev);

    CHECK_INT_EQ(codex_parse_event(command_line, strlen(command_line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_TOOL_USE);
    CHECK_STR_EQ(ev.tool, "bash");
    CHECK_STR_EQ(ev.target, "echo hi > hello.txt && cat hello.txt"); /* out of its shell */
    CHECK_STR_EQ(ev.summary, "bash: echo hi > hello.txt && cat hello.txt");
    CHECK_INT_EQ(ev.exit_status, 0);
    CHECK(!ev.tool_failed && ev.error == NULL);
    agent_event_clear(&ev);

    CHECK_INT_EQ(codex_parse_event(message_line, strlen(message_line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_TEXT);
    CHECK_STR_EQ(ev.text, "Wrote hello.txt.");
    CHECK_STR_EQ(ev.summary, "Wrote hello.txt.");
    agent_event_clear(&ev);

    CHECK_INT_EQ(codex_parse_event(turn_completed_line, strlen(turn_completed_line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_STEP_FINISH);
    CHECK_INT_EQ(ev.input_tokens, 200);
    CHECK_INT_EQ(ev.output_tokens, 40);
    CHECK(ev.cost == 0);
    CHECK_STR_EQ(ev.summary, "step finish: 200 in, 40 out");
    agent_event_clear(&ev);
}

TEST(codex_reasoning_file_changes_and_failures)
{
    struct agent_event ev;
    CHECK_INT_EQ(codex_parse_event(reasoning_line, strlen(reasoning_line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_REASONING);
    CHECK_STR_EQ(ev.summary, "**Thinking about it**");
    agent_event_clear(&ev);

    CHECK_INT_EQ(codex_parse_event(file_change_line, strlen(file_change_line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_TOOL_USE);
    CHECK_STR_EQ(ev.tool, "edit");
    CHECK_STR_EQ(ev.target, "/tmp/agents36/work1/hello.txt");
    CHECK_STR_EQ(ev.summary, "edit hello.txt");
    agent_event_clear(&ev);

    /* the notice before a failure is not the failure: turn.failed is */
    CHECK_INT_EQ(codex_parse_event(notice_line, strlen(notice_line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_OTHER);
    CHECK(ev.error == NULL);
    CHECK_STR_CONTAINS(ev.summary, "401 Unauthorized");
    agent_event_clear(&ev);
    CHECK_INT_EQ(codex_parse_event(failed_line, strlen(failed_line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_ERROR);
    CHECK_STR_CONTAINS(ev.error, "unexpected status 401 Unauthorized");
    CHECK_STR_CONTAINS(ev.summary, "401 Unauthorized");
    agent_event_clear(&ev);

    /* a command that failed, one declined, several files, an MCP tool that failed */
    static const char exit_line[] =
        "{\"type\":\"item.completed\",\"item\":{\"type\":\"command_execution\",\"command\":"
        "\"npm test\\nnpm run lint\",\"aggregated_output\":\"1 failing\\n\",\"exit_code\":1,"
        "\"status\":\"failed\"}}";
    CHECK_INT_EQ(codex_parse_event(exit_line, strlen(exit_line), &ev), 0);
    CHECK_STR_EQ(ev.target, "npm test");
    CHECK_STR_EQ(ev.summary, "bash: npm test (exit 1)");
    CHECK_INT_EQ(ev.exit_status, 1);
    agent_event_clear(&ev);
    static const char declined_line[] =
        "{\"type\":\"item.completed\",\"item\":{\"type\":\"command_execution\",\"command\":"
        "\"/bin/bash -lc 'rm -rf /'\",\"aggregated_output\":\"\",\"exit_code\":null,"
        "\"status\":\"declined\"}}";
    CHECK_INT_EQ(codex_parse_event(declined_line, strlen(declined_line), &ev), 0);
    CHECK_STR_EQ(ev.summary, "bash: rm -rf / (declined)");
    CHECK(ev.tool_failed);
    CHECK_STR_EQ(ev.error, "declined");
    agent_event_clear(&ev);
    static const char files_line[] =
        "{\"type\":\"item.completed\",\"item\":{\"type\":\"file_change\",\"changes\":[{\"path\":"
        "\"src/a.c\",\"kind\":\"update\"},{\"path\":\"src/b.c\",\"kind\":\"add\"},{\"path\":"
        "\"c.c\",\"kind\":\"delete\"}],\"status\":\"failed\"}}";
    CHECK_INT_EQ(codex_parse_event(files_line, strlen(files_line), &ev), 0);
    CHECK_STR_EQ(ev.summary, "edit a.c and 2 more (failed)");
    CHECK(ev.tool_failed);
    agent_event_clear(&ev);
    static const char mcp_line[] =
        "{\"type\":\"item.completed\",\"item\":{\"type\":\"mcp_tool_call\",\"server\":\"docs\","
        "\"tool\":\"search\",\"arguments\":{},\"status\":\"failed\",\"error\":{\"message\":"
        "\"no route\"}}}";
    CHECK_INT_EQ(codex_parse_event(mcp_line, strlen(mcp_line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_TOOL_USE);
    CHECK_STR_EQ(ev.tool, "search");
    CHECK_STR_EQ(ev.summary, "mcp: docs/search (failed)");
    CHECK_STR_EQ(ev.error, "no route");
    agent_event_clear(&ev);
}

TEST(codex_odd_lines)
{
    struct agent_event ev;
    CHECK_INT_EQ(codex_parse_event("not json", 8, &ev), -EINVAL);
    CHECK_INT_EQ(codex_parse_event("[1]", 3, &ev), -EINVAL);
    CHECK_INT_EQ(codex_parse_event(NULL, 0, &ev), -EINVAL);
    static const char *const odd[] = {
        "{}",
        "{\"type\":7}",
        "{\"type\":\"item.completed\"}",
        "{\"type\":\"item.completed\",\"item\":{\"type\":\"command_execution\",\"exit_code\":1e300}"
        "}",
        "{\"type\":\"item.completed\",\"item\":{\"type\":\"file_change\",\"changes\":\"x\"}}",
        "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":-5,\"output_tokens\":\"9\"}}",
        "{\"type\":\"turn.failed\",\"error\":\"  \"}",
        "{\"type\":\"thread.started\",\"thread_id\":\"has space\"}",
        "{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":"
        "\"a\\u0000b\\ud800\"}}",
    };
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        CHECK_INT_EQ(codex_parse_event(odd[i], strlen(odd[i]), &ev), 0);
        CHECK(ev.summary != NULL && (ev.summary[0] || !ev.type[0]));
        CHECK(ev.input_tokens >= 0 && ev.output_tokens >= 0);
        CHECK_STR_EQ(ev.session, "");
        if (ev.kind == AGENT_EV_TEXT)
            CHECK_STR_EQ(ev.text, "a\xEF\xBF\xBD"
                                  "b\xEF\xBF\xBD");
        if (ev.kind == AGENT_EV_ERROR)
            CHECK_STR_EQ(ev.error, "the turn failed");
        agent_event_clear(&ev);
    }
}

/* Codex reports its thread's totals: a run's steps count only their own, and a run continuing a
 * thread starts from the totals it had (the second run's line is the real resumed one). */
TEST(codex_steps_count_their_own_tokens)
{
    struct agent_reader rd = {0};
    struct agent_event evs[AGENT_LINE_EVENTS];
    static const char resumed_line[] =
        "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":300,\"cached_input_tokens\":0,"
        "\"cache_write_input_tokens\":0,\"output_tokens\":60,\"reasoning_output_tokens\":0}}";
    CHECK_INT_EQ(codex_parse_line(&rd, turn_completed_line, strlen(turn_completed_line), evs), 1);
    CHECK_INT_EQ(evs[0].input_tokens, 200);
    CHECK_INT_EQ(evs[0].output_tokens, 40);
    agent_event_clear(&evs[0]);
    CHECK_INT_EQ(codex_parse_line(&rd, resumed_line, strlen(resumed_line), evs), 1);
    CHECK_INT_EQ(evs[0].input_tokens, 100);
    CHECK_INT_EQ(evs[0].output_tokens, 20);
    CHECK_STR_EQ(evs[0].summary, "step finish: 100 in, 20 out");
    agent_event_clear(&evs[0]);

    /* a later run's reader starts from what the last run's line reports */
    struct agent_reader next = {0};
    CHECK(codex_line_totals(turn_completed_line, strlen(turn_completed_line), &next.total_in,
                            &next.total_out));
    CHECK(!codex_line_totals(message_line, strlen(message_line), &next.total_in, &next.total_out));
    CHECK_INT_EQ(codex_parse_line(&next, resumed_line, strlen(resumed_line), evs), 1);
    CHECK_INT_EQ(evs[0].input_tokens, 100);
    agent_event_clear(&evs[0]);
    /* totals that went down are another thread's: counted whole */
    CHECK_INT_EQ(codex_parse_line(&next, turn_completed_line, strlen(turn_completed_line), evs), 1);
    CHECK_INT_EQ(evs[0].input_tokens, 200);
    agent_event_clear(&evs[0]);
    CHECK_INT_EQ(codex_parse_line(&next, "nope", 4, evs), -EINVAL);
}
TEST_MAIN()

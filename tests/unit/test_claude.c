/* Claude Code's stream-json lines read into agent events (src/runs/claude_events.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runs/agent.h"

/* Lines as Claude Code 2.1.332 printed them (`claude -p --output-format stream-json --verbose`
 * against a scripted Messages API), shortened: the fields the parser does not read are left
 * out, and the ids are the run's. */
static const char init_line[] =
    "{\"type\":\"system\",\"subtype\":\"init\",\"cwd\":\"/workspace/r\",\"session_id\":"
    "\"7987e1b7-63f6-4808-8fc6-fd406e557b36\",\"tools\":[\"Task\",\"Bash\"],\"mcp_servers\":[],"
    "\"model\":\"claude-sonnet-4-5\",\"permissionMode\":\"bypassPermissions\"}";
static const char text_line[] =
    "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_fake_3\",\"type\":\"message\",\"role\":"
    "\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[{\"type\":\"text\",\"text\":"
    "\"Let me look.\"}],\"stop_reason\":null,\"usage\":{\"input_tokens\":100,\"output_tokens\":1}},"
    "\"parent_tool_use_id\":null,\"session_id\":\"7987e1b7-63f6-4808-8fc6-fd406e557b36\","
    "\"timestamp\":\"2026-12-06T05:54:54.898Z\"}";
static const char call1_line[] =
    "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_fake_3\",\"type\":\"message\",\"role\":"
    "\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_script_1\",\"name\":\"Bash\","
    "\"input\":{\"command\":\"echo hi > a.txt\",\"description\":\"write\"}}]},\"session_id\":"
    "\"7987e1b7-63f6-4808-8fc6-fd406e557b36\"}";
static const char call2_line[] =
    "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_fake_3\",\"type\":\"message\",\"role\":"
    "\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_script_2\",\"name\":\"Bash\","
    "\"input\":{\"command\":\"exit 3\",\"description\":\"fail\"}}]},\"session_id\":"
    "\"7987e1b7-63f6-4808-8fc6-fd406e557b36\"}";
static const char result1_line[] =
    "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":[{\"tool_use_id\":"
    "\"toolu_script_1\",\"type\":\"tool_result\",\"content\":\"(Bash completed with no output)\","
    "\"is_error\":false}]},\"parent_tool_use_id\":null,\"session_id\":"
    "\"7987e1b7-63f6-4808-8fc6-fd406e557b36\",\"tool_use_result\":{\"stdout\":\"\",\"stderr\":\"\","
    "\"interrupted\":false,\"isImage\":false}}";
static const char result2_line[] =
    "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
    "\"content\":\"Exit code 3\",\"is_error\":true,\"tool_use_id\":\"toolu_script_2\"}]},"
    "\"session_id\":\"7987e1b7-63f6-4808-8fc6-fd406e557b36\",\"tool_use_result\":\"Error: Exit "
    "code 3\"}";
static const char next_call_line[] =
    "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_fake_5\",\"type\":\"message\",\"role\":"
    "\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_script_4\",\"name\":\"Read\","
    "\"input\":{\"file_path\":\"/workspace/r/nope.txt\"}}]},\"session_id\":"
    "\"7987e1b7-63f6-4808-8fc6-fd406e557b36\"}";
static const char read_error_line[] =
    "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
    "\"content\":[{\"type\":\"text\",\"text\":\"<tool_use_error>File does not exist."
    "</tool_use_error>\"}],\"is_error\":true,\"tool_use_id\":\"toolu_script_4\"}]},"
    "\"session_id\":\"7987e1b7-63f6-4808-8fc6-fd406e557b36\"}";
static const char success_line[] =
    "{\"duration_api_ms\":198,\"stop_reason\":\"end_turn\",\"session_id\":"
    "\"7987e1b7-63f6-4808-8fc6-fd406e557b36\",\"total_cost_usd\":0.0018000000000000002,\"usage\":"
    "{\"input_tokens\":300,\"cache_creation_input_tokens\":10,\"cache_read_input_tokens\":5,"
    "\"output_tokens\":60},\"is_error\":false,\"num_turns\":3,\"subtype\":\"success\","
    "\"api_error_status\":null,\"result\":\"All done.\",\"type\":\"result\"}";
static const char failure_line[] =
    "{\"duration_api_ms\":0,\"stop_reason\":\"stop_sequence\",\"session_id\":"
    "\"4a53134d-1616-4d8c-9e3f-56637a7ac06b\",\"total_cost_usd\":0,\"usage\":{\"input_tokens\":0,"
    "\"output_tokens\":0},\"terminal_reason\":\"prompt_too_long\",\"is_error\":true,\"num_turns\":"
    "1,"
    "\"subtype\":\"success\",\"api_error_status\":400,\"api_error_type\":\"invalid_request_error\","
    "\"result\":\"Prompt is too long \xC2\xB7 this conversation is a single exchange and cannot be "
    "compacted\",\"type\":\"result\"}";

static int parse(struct agent_reader *rd, const char *line, struct agent_event evs[])
{
    return claude_parse_line(rd, line, strlen(line), evs);
}

static void clear(struct agent_event evs[], int n)
{
    for (int i = 0; i < n; i++)
        agent_event_clear(&evs[i]);
}

TEST(claude_a_run_as_events)
{
    struct agent_reader rd = {0};
    struct agent_event evs[AGENT_LINE_EVENTS];
    CHECK_INT_EQ(parse(&rd, init_line, evs), 1);
    CHECK_INT_EQ(evs[0].kind, AGENT_EV_OTHER);
    CHECK_STR_EQ(evs[0].type, "system");
    CHECK_STR_EQ(evs[0].session, "7987e1b7-63f6-4808-8fc6-fd406e557b36");
    CHECK_STR_EQ(evs[0].summary, "session started (claude-sonnet-4-5)");
    clear(evs, 1);

    /* a new model message begins a step */
    CHECK_INT_EQ(parse(&rd, text_line, evs), 2);
    CHECK_INT_EQ(evs[0].kind, AGENT_EV_STEP_START);
    CHECK_STR_EQ(agent_event_type(&evs[0]), "step_start");
    CHECK_INT_EQ(evs[1].kind, AGENT_EV_TEXT);
    CHECK_STR_EQ(agent_event_type(&evs[1]), "text");
    CHECK_STR_EQ(evs[1].text, "Let me look.");
    clear(evs, 2);

    /* its calls are the same step; a call is remembered, not yet a tool use */
    CHECK_INT_EQ(parse(&rd, call1_line, evs), 1);
    CHECK_INT_EQ(evs[0].kind, AGENT_EV_OTHER);
    CHECK_STR_EQ(evs[0].summary, "call bash: echo hi > a.txt");
    clear(evs, 1);
    CHECK_INT_EQ(parse(&rd, call2_line, evs), 1);
    clear(evs, 1);

    /* the results are the tool uses, with their calls' targets */
    CHECK_INT_EQ(parse(&rd, result1_line, evs), 1);
    CHECK_INT_EQ(evs[0].kind, AGENT_EV_TOOL_USE);
    CHECK_STR_EQ(evs[0].tool, "bash");
    CHECK_STR_EQ(evs[0].target, "echo hi > a.txt");
    CHECK_STR_EQ(evs[0].summary, "bash: echo hi > a.txt");
    CHECK(!evs[0].tool_failed && evs[0].exit_status == 0);
    clear(evs, 1);
    CHECK_INT_EQ(parse(&rd, result2_line, evs), 1);
    CHECK_STR_EQ(evs[0].summary, "bash: exit 3 (exit 3)");
    CHECK_INT_EQ(evs[0].exit_status, 3);
    CHECK(!evs[0].tool_failed); /* a command that ran, as OpenCode counts it */
    clear(evs, 1);

    /* another tool's error is the call's failure */
    CHECK_INT_EQ(parse(&rd, next_call_line, evs), 2);
    CHECK_INT_EQ(evs[0].kind, AGENT_EV_STEP_START);
    clear(evs, 2);
    CHECK_INT_EQ(parse(&rd, read_error_line, evs), 1);
    CHECK_STR_EQ(evs[0].tool, "read");
    CHECK_STR_EQ(evs[0].summary, "read /workspace/r/nope.txt (error)");
    CHECK(evs[0].tool_failed);
    CHECK_STR_CONTAINS(evs[0].error, "File does not exist.");
    clear(evs, 1);

    /* the end: the run's tokens as the provider counted them, and its cost */
    CHECK_INT_EQ(parse(&rd, success_line, evs), 1);
    CHECK_INT_EQ(evs[0].kind, AGENT_EV_STEP_FINISH);
    CHECK_INT_EQ(evs[0].input_tokens, 315);
    CHECK_INT_EQ(evs[0].output_tokens, 60);
    CHECK(evs[0].cost > 0.0017 && evs[0].cost < 0.0019);
    CHECK_STR_EQ(evs[0].session, "7987e1b7-63f6-4808-8fc6-fd406e557b36");
    clear(evs, 1);
    agent_reader_clear(&rd);
}

TEST(claude_failures_and_odd_lines)
{
    struct agent_reader rd = {0};
    struct agent_event evs[AGENT_LINE_EVENTS];
    CHECK_INT_EQ(parse(&rd, failure_line, evs), 1);
    CHECK_INT_EQ(evs[0].kind, AGENT_EV_ERROR);
    CHECK_STR_CONTAINS(evs[0].error, "Prompt is too long");
    CHECK_STR_CONTAINS(evs[0].summary, "Prompt is too long");
    clear(evs, 1);
    static const char max_turns[] =
        "{\"type\":\"result\",\"subtype\":\"error_max_turns\",\"is_error\":false}";
    CHECK_INT_EQ(parse(&rd, max_turns, evs), 1);
    CHECK_INT_EQ(evs[0].kind, AGENT_EV_ERROR);
    CHECK_STR_EQ(evs[0].error, "error_max_turns");
    clear(evs, 1);

    /* a result whose call came before a restart (or never): a tool use of no known tool */
    CHECK_INT_EQ(parse(&rd, result2_line, evs), 1);
    CHECK_INT_EQ(evs[0].kind, AGENT_EV_TOOL_USE);
    CHECK_STR_EQ(evs[0].summary, "tool result (error)");
    CHECK(evs[0].tool_failed);
    clear(evs, 1);

    /* several blocks on one line: each an event, those past the room told as one */
    static const char many[] =
        "{\"type\":\"assistant\",\"message\":{\"id\":\"m9\",\"content\":[{\"type\":\"thinking\","
        "\"thinking\":\"Plan it\\nthen do it\"},{\"type\":\"text\",\"text\":\"a\"},{\"type\":"
        "\"tool_use\",\"id\":\"t1\",\"name\":\"Grep\",\"input\":{\"pattern\":\"TODO\"}},{\"type\":"
        "\"tool_use\",\"id\":\"t2\",\"name\":\"mcp__srv__Do\",\"input\":{}}]}}";
    CHECK_INT_EQ(parse(&rd, many, evs), AGENT_LINE_EVENTS);
    CHECK_INT_EQ(evs[0].kind, AGENT_EV_STEP_START);
    CHECK_INT_EQ(evs[1].kind, AGENT_EV_REASONING);
    CHECK_STR_EQ(evs[1].summary, "Plan it");
    CHECK_INT_EQ(evs[2].kind, AGENT_EV_TEXT);
    CHECK_STR_EQ(evs[3].summary, "2 more blocks");
    clear(evs, AGENT_LINE_EVENTS);
    static const char both[] =
        "{\"type\":\"user\",\"message\":{\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
        "\"t2\",\"content\":\"ok\"},{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":"
        "\"x\"}]}}";
    CHECK_INT_EQ(parse(&rd, both, evs), 2);
    CHECK_STR_EQ(evs[0].tool, "mcp__srv__do");
    CHECK_STR_EQ(evs[1].summary, "grep TODO");
    clear(evs, 2);

    /* not an object: refused; an object of no known type: kept as it is */
    CHECK_INT_EQ(parse(&rd, "[1]", evs), -EINVAL);
    CHECK(evs[0].summary == NULL);
    CHECK_INT_EQ(parse(&rd, "{\"type\":\"stream_event\"}", evs), 1);
    CHECK_STR_EQ(evs[0].summary, "stream_event");
    clear(evs, 1);
    CHECK_INT_EQ(parse(&rd, "{\"type\":\"system\",\"subtype\":\"api_retry\"}", evs), 1);
    CHECK_STR_EQ(evs[0].summary, "system: api_retry");
    clear(evs, 1);

    /* more calls than are remembered: the oldest are forgotten, the newest still matched */
    char line[256];
    for (int i = 0; i < AGENT_CALLS_MAX + 5; i++) {
        snprintf(line, sizeof(line),
                 "{\"type\":\"assistant\",\"message\":{\"id\":\"m%d\",\"content\":[{\"type\":"
                 "\"tool_use\",\"id\":\"c%d\",\"name\":\"Write\",\"input\":{\"file_path\":\"f%d\"}}"
                 "]}}",
                 i, i, i);
        clear(evs, parse(&rd, line, evs));
    }
    snprintf(line, sizeof(line),
             "{\"type\":\"user\",\"message\":{\"content\":[{\"type\":\"tool_result\","
             "\"tool_use_id\":\"c%d\"}]}}",
             AGENT_CALLS_MAX + 4);
    CHECK_INT_EQ(parse(&rd, line, evs), 1);
    CHECK_STR_EQ(evs[0].summary, "write f36");
    clear(evs, 1);
    CHECK_INT_EQ(parse(&rd,
                       "{\"type\":\"user\",\"message\":{\"content\":[{\"type\":"
                       "\"tool_result\",\"tool_use_id\":\"c0\"}]}}",
                       evs),
                 1);
    CHECK_STR_EQ(evs[0].summary, "tool result");
    clear(evs, 1);
    agent_reader_clear(&rd);
}
TEST_MAIN()

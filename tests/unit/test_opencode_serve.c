/* The agent bridge's pure part: a warm OpenCode server's events as `opencode run --format json`
 * lines, read back by the same parser the engine uses for `opencode run`. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "harness.h"
#include "proxy/proxy.h"
#include "runs/agent.h"
#include "sandbox/opencode_serve.h"
#include "runs/runs_internal.h"

#define SES "ses_dc863df4affe4RdMEFPt1qbQoy"

/* Events as `opencode serve` 1.18.33 sends them on GET /event (fields it sends but the bridge
 * does not read left out). */
static const char tool_done[] =
    "{\"type\":\"message.part.updated\",\"properties\":{\"part\":{\"id\":\"prt_1\",\"sessionID\":"
    "\"" SES
    "\",\"messageID\":\"msg_1\",\"type\":\"tool\",\"tool\":\"bash\",\"callID\":\"toolu_1\","
    "\"state\":{\"status\":\"completed\",\"input\":{\"command\":\"ls\",\"description\":\"List\"},"
    "\"output\":\"a.txt\\n\",\"metadata\":{\"exit\":0},\"title\":\"ls\",\"time\":{\"start\":1,"
    "\"end\":2}}}}}";
static const char tool_running[] =
    "{\"type\":\"message.part.updated\",\"properties\":{\"part\":{\"id\":\"prt_1\",\"sessionID\":"
    "\"" SES "\",\"type\":\"tool\",\"tool\":\"bash\",\"state\":{\"status\":\"running\"}}}}";
static const char step_start[] =
    "{\"type\":\"message.part.updated\",\"properties\":{\"part\":{\"id\":\"prt_0\",\"sessionID\":"
    "\"" SES "\",\"messageID\":\"msg_1\",\"type\":\"step-start\",\"snapshot\":\"0d8a\"}}}";
static const char step_finish[] =
    "{\"type\":\"message.part.updated\",\"properties\":{\"part\":{\"id\":\"prt_3\",\"sessionID\":"
    "\"" SES "\",\"type\":\"step-finish\",\"reason\":\"stop\",\"cost\":0.5,\"tokens\":{\"input\":"
    "10,\"output\":5,\"reasoning\":0,\"cache\":{\"read\":1,\"write\":2}}}}}";
static const char text_streaming[] =
    "{\"type\":\"message.part.updated\",\"properties\":{\"part\":{\"id\":\"prt_2\",\"sessionID\":"
    "\"" SES "\",\"type\":\"text\",\"text\":\"Hel\",\"time\":{\"start\":1}}}}";
static const char text_done[] =
    "{\"type\":\"message.part.updated\",\"properties\":{\"part\":{\"id\":\"prt_2\",\"sessionID\":"
    "\"" SES "\",\"type\":\"text\",\"text\":\"Hello there.\",\"time\":{\"start\":1,\"end\":3}}}}";
static const char reasoning_done[] =
    "{\"type\":\"message.part.updated\",\"properties\":{\"part\":{\"id\":\"prt_5\",\"sessionID\":"
    "\"" SES "\",\"type\":\"reasoning\",\"text\":\"Think.\",\"time\":{\"start\":1,\"end\":3}}}}";
static const char other_session_text[] =
    "{\"type\":\"message.part.updated\",\"properties\":{\"part\":{\"id\":\"prt_9\",\"sessionID\":"
    "\"ses_other\",\"type\":\"text\",\"text\":\"Not ours.\",\"time\":{\"start\":1,\"end\":3}}}}";
static const char session_error[] =
    "{\"type\":\"session.error\",\"properties\":{\"sessionID\":\"" SES "\",\"error\":{\"name\":"
    "\"APIError\",\"data\":{\"message\":\"invalid x-api-key\",\"statusCode\":401}}}}";
static const char other_idle[] =
    "{\"type\":\"session.status\",\"properties\":{\"sessionID\":\"ses_other\",\"status\":{"
    "\"type\":\"idle\"}}}";
static const char busy[] = "{\"type\":\"session.status\",\"properties\":{\"sessionID\":\"" SES
                           "\",\"status\":{\"type\":\"busy\"}}}";
static const char idle[] = "{\"type\":\"session.status\",\"properties\":{\"sessionID\":\"" SES
                           "\",\"status\":{\"type\":\"idle\"}}}";

/* The line for one event, parsed as the engine parses `opencode run` output. */
static char *line_for(struct oc_follow *f, const char *event, struct agent_event *ev)
{
    char perm[64];
    char *line = oc_follow_event(f, event, strlen(event), 1796229311799, perm, sizeof(perm));
    memset(ev, 0, sizeof(*ev));
    if (line) {
        CHECK(line[strlen(line) - 1] == '\n');
        CHECK_INT_EQ(opencode_parse_event(line, strlen(line), ev), 0);
        CHECK_INT_EQ(ev->time_ms, 1796229311799);
        CHECK_STR_EQ(ev->session, SES);
    }
    CHECK_STR_EQ(perm, "");
    return line;
}

TEST(serve_events_read_as_run_lines)
{
    struct oc_follow f;
    oc_follow_init(&f, SES, true);
    struct agent_event ev;
    char *line;

    line = line_for(&f, step_start, &ev);
    CHECK(line != NULL);
    CHECK_INT_EQ(ev.kind, AGENT_EV_STEP_START);
    CHECK_STR_EQ(ev.type, "step_start");
    free(line);
    agent_event_clear(&ev);

    CHECK(line_for(&f, tool_running, &ev) == NULL); /* only once it completed */
    line = line_for(&f, tool_done, &ev);
    CHECK_INT_EQ(ev.kind, AGENT_EV_TOOL_USE);
    CHECK_STR_EQ(ev.tool, "bash");
    CHECK_STR_EQ(ev.target, "ls");
    free(line);
    agent_event_clear(&ev);

    CHECK(line_for(&f, text_streaming, &ev) == NULL); /* only once it ended */
    line = line_for(&f, text_done, &ev);
    CHECK_INT_EQ(ev.kind, AGENT_EV_TEXT);
    CHECK_STR_EQ(ev.text, "Hello there.");
    free(line);
    agent_event_clear(&ev);

    line = line_for(&f, reasoning_done, &ev);
    CHECK_INT_EQ(ev.kind, AGENT_EV_REASONING);
    free(line);
    agent_event_clear(&ev);

    line = line_for(&f, step_finish, &ev);
    CHECK_INT_EQ(ev.kind, AGENT_EV_STEP_FINISH);
    CHECK_INT_EQ(ev.input_tokens, 13);
    CHECK_INT_EQ(ev.output_tokens, 5);
    free(line);
    agent_event_clear(&ev);

    CHECK(line_for(&f, other_session_text, &ev) == NULL);
    CHECK(line_for(&f, other_idle, &ev) == NULL);
    CHECK(line_for(&f, busy, &ev) == NULL);
    CHECK(!f.idle && !f.errored);

    line = line_for(&f, session_error, &ev);
    CHECK_INT_EQ(ev.kind, AGENT_EV_ERROR);
    CHECK_STR_CONTAINS(ev.error, "invalid x-api-key");
    CHECK(f.errored && !f.idle);
    free(line);
    agent_event_clear(&ev);

    CHECK(line_for(&f, idle, &ev) == NULL);
    CHECK(f.idle);
}

TEST(serve_reasoning_only_when_thinking)
{
    struct oc_follow f;
    oc_follow_init(&f, SES, false);
    struct agent_event ev;
    CHECK(line_for(&f, reasoning_done, &ev) == NULL);
}

/* A model request to be tried again: the pooled agent's warm-up stops there (helper/agent.c). */
TEST(serve_retry_status)
{
    struct oc_follow f;
    oc_follow_init(&f, SES, true);
    char perm[64];
    const char *other = "{\"type\":\"session.status\",\"properties\":{\"sessionID\":\"ses_other\","
                        "\"status\":{\"type\":\"retry\",\"attempt\":1,\"message\":\"x\"}}}";
    CHECK(oc_follow_event(&f, other, strlen(other), 1, perm, sizeof(perm)) == NULL);
    CHECK(!f.retrying);
    CHECK(oc_follow_event(&f, busy, strlen(busy), 1, perm, sizeof(perm)) == NULL);
    CHECK(!f.retrying);
    const char *retry = "{\"type\":\"session.status\",\"properties\":{\"sessionID\":\"" SES "\","
                        "\"status\":{\"type\":\"retry\",\"attempt\":1,\"message\":\"403\"}}}";
    CHECK(oc_follow_event(&f, retry, strlen(retry), 1, perm, sizeof(perm)) == NULL);
    CHECK(f.retrying && !f.idle);
}

TEST(serve_idle_event_and_odd_input)
{
    struct oc_follow f;
    oc_follow_init(&f, SES, true);
    char perm[64];
    static const char *const odd[] = {
        "",
        "not json",
        "[1,2]",
        "{\"type\":3,\"properties\":{}}",
        "{\"type\":\"message.part.updated\"}",
        "{\"type\":\"message.part.updated\",\"properties\":{\"part\":\"x\"}}",
        "{\"type\":\"message.part.updated\",\"properties\":{\"part\":{\"type\":\"text\"}}}",
        "{\"type\":\"session.error\",\"properties\":{\"sessionID\":\"" SES "\"}}",
        "{\"type\":\"session.status\",\"properties\":{\"sessionID\":\"" SES "\"}}",
    };
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
        CHECK(oc_follow_event(&f, odd[i], strlen(odd[i]), 1, perm, sizeof(perm)) == NULL);
    CHECK(!f.idle && !f.errored);
    const char *old_idle = "{\"type\":\"session.idle\",\"properties\":{\"sessionID\":\"" SES "\"}}";
    CHECK(oc_follow_event(&f, old_idle, strlen(old_idle), 1, perm, sizeof(perm)) == NULL);
    CHECK(f.idle);

    /* no session to follow (an id too long) matches nothing */
    char longid[200];
    memset(longid, 'a', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    oc_follow_init(&f, longid, true);
    CHECK(oc_follow_event(&f, idle, strlen(idle), 1, perm, sizeof(perm)) == NULL);
    CHECK(!f.idle);
}

TEST(serve_permissions_of_the_session_and_its_subagents)
{
    struct oc_follow f;
    oc_follow_init(&f, SES, true);
    char perm[64];
    const char *stranger = "{\"type\":\"permission.asked\",\"properties\":{\"id\":\"per_1\","
                           "\"sessionID\":\"ses_child\",\"permission\":\"bash\"}}";
    CHECK(oc_follow_event(&f, stranger, strlen(stranger), 1, perm, sizeof(perm)) == NULL);
    CHECK_STR_EQ(perm, "");
    const char *child = "{\"type\":\"session.created\",\"properties\":{\"info\":{\"id\":"
                        "\"ses_child\",\"parentID\":\"" SES "\"}}}";
    CHECK(oc_follow_event(&f, child, strlen(child), 1, perm, sizeof(perm)) == NULL);
    CHECK(oc_follow_event(&f, stranger, strlen(stranger), 1, perm, sizeof(perm)) == NULL);
    CHECK_STR_EQ(perm, "per_1");
    /* a grandchild of another tree is not ours */
    const char *other = "{\"type\":\"session.created\",\"properties\":{\"info\":{\"id\":"
                        "\"ses_x\",\"parentID\":\"ses_unrelated\"}}}";
    oc_follow_event(&f, other, strlen(other), 1, perm, sizeof(perm));
    CHECK_INT_EQ(f.ntree, 2);
    /* the subagent's own text is not the run's */
    const char *child_text =
        "{\"type\":\"message.part.updated\",\"properties\":{\"part\":{\"sessionID\":\"ses_child\","
        "\"type\":\"text\",\"text\":\"x\",\"time\":{\"end\":1}}}}";
    CHECK(oc_follow_event(&f, child_text, strlen(child_text), 1, perm, sizeof(perm)) == NULL);
}

/* A run stopped just before this one, in the same session: its end comes on the new prompt's
 * stream first (as opencode serve 1.18.33 sends it when a prompt is posted right after an abort:
 * the old answer's MessageAbortedError, idle, the old message completed, idle again; then the
 * new prompt's user message and its answer). None of the old end is the new prompt's. */
TEST(serve_an_earlier_prompts_end_is_not_this_ones)
{
#define OLD_USER "msg_24972255b001WjR0RDETrLnpu4"
#define OLD_ANSWER "msg_2497228df001KgepQKHWYhWJEP"
#define NEW_USER "msg_249722c97001522IOHg1R2ouDY"
#define NEW_ANSWER "msg_249722caa0017pFIQZz4I2o7cw"
    static const char *const old_end[] = {
        "{\"type\":\"session.error\",\"properties\":{\"sessionID\":\"" SES "\",\"error\":{"
        "\"name\":\"MessageAbortedError\",\"data\":{\"message\":\"Aborted\"}}}}",
        idle,
        "{\"type\":\"session.idle\",\"properties\":{\"sessionID\":\"" SES "\"}}",
        "{\"type\":\"message.part.updated\",\"properties\":{\"part\":{\"id\":\"prt_8\","
        "\"sessionID\":\"" SES "\",\"messageID\":\"" OLD_ANSWER "\",\"type\":\"text\","
        "\"text\":\"Half an answer\",\"time\":{\"start\":1,\"end\":2}}}}",
        "{\"type\":\"message.updated\",\"properties\":{\"info\":{\"id\":\"" OLD_ANSWER "\","
        "\"sessionID\":\"" SES "\",\"role\":\"assistant\",\"time\":{\"created\":1,"
        "\"completed\":2},\"error\":{\"name\":\"MessageAbortedError\"}}}}",
        /* the older user message, and another session's newer one, arm nothing */
        "{\"type\":\"message.updated\",\"properties\":{\"info\":{\"id\":\"" OLD_USER "\","
        "\"sessionID\":\"" SES "\",\"role\":\"user\"}}}",
        "{\"type\":\"message.updated\",\"properties\":{\"info\":{\"id\":\"" NEW_ANSWER "\","
        "\"sessionID\":\"ses_other\",\"role\":\"user\"}}}",
        idle,
    };
    struct oc_follow f;
    oc_follow_init(&f, SES, true);
    oc_follow_after(&f, OLD_ANSWER);
    struct agent_event ev;
    for (size_t i = 0; i < sizeof(old_end) / sizeof(old_end[0]); i++) {
        CHECK(line_for(&f, old_end[i], &ev) == NULL);
        CHECK(!f.idle && !f.errored);
    }
    const char *new_user = "{\"type\":\"message.updated\",\"properties\":{\"info\":{\"id\":"
                           "\"" NEW_USER "\",\"sessionID\":\"" SES "\",\"role\":\"user\"}}}";
    CHECK(line_for(&f, new_user, &ev) == NULL);
    CHECK(f.armed);
    CHECK(line_for(&f, busy, &ev) == NULL);
    char *line = line_for(&f, text_done, &ev);
    CHECK_INT_EQ(ev.kind, AGENT_EV_TEXT);
    free(line);
    agent_event_clear(&ev);
    line = line_for(&f, session_error, &ev);
    CHECK_INT_EQ(ev.kind, AGENT_EV_ERROR);
    CHECK_STR_CONTAINS(ev.error, "invalid x-api-key");
    free(line);
    agent_event_clear(&ev);
    CHECK(line_for(&f, idle, &ev) == NULL);
    CHECK(f.idle && f.errored);

    /* the first part of the new answer arms it as well (its message's update may come later) */
    oc_follow_init(&f, SES, true);
    oc_follow_after(&f, OLD_ANSWER);
    const char *new_part =
        "{\"type\":\"message.part.updated\",\"properties\":{\"part\":{\"id\":\"prt_9\","
        "\"sessionID\":\"" SES "\",\"messageID\":\"" NEW_ANSWER "\",\"type\":\"step-start\"}}}";
    line = line_for(&f, new_part, &ev);
    CHECK_INT_EQ(ev.kind, AGENT_EV_STEP_START);
    free(line);
    agent_event_clear(&ev);
    CHECK(line_for(&f, idle, &ev) == NULL);
    CHECK(f.idle);

    /* a session without messages, or an id too long to be the server's: all is the prompt's */
    oc_follow_init(&f, SES, true);
    oc_follow_after(&f, "");
    CHECK(line_for(&f, idle, &ev) == NULL);
    CHECK(f.idle);
    char longid[200];
    memset(longid, 'm', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    oc_follow_init(&f, SES, true);
    oc_follow_after(&f, longid);
    CHECK(f.armed);
#undef OLD_USER
#undef OLD_ANSWER
#undef NEW_USER
#undef NEW_ANSWER
}

TEST(serve_bridge_error_line)
{
    char *line = oc_error_line(SES, "the agent's server did not start", 5);
    struct agent_event ev = {0};
    CHECK_INT_EQ(opencode_parse_event(line, strlen(line), &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_ERROR);
    CHECK_STR_CONTAINS(ev.error, "did not start");
    agent_event_clear(&ev);
    free(line);
}

static bool sse(struct oc_sse *s, const char *line, const char **data, size_t *len, bool *over)
{
    return oc_sse_line(s, line, strlen(line), data, len, over);
}

TEST(serve_sse_framing)
{
    struct oc_sse s;
    oc_sse_init(&s, 32);
    const char *data;
    size_t len;
    bool over;
    CHECK(!sse(&s, ": a comment", &data, &len, &over));
    CHECK(!sse(&s, "", &data, &len, &over)); /* nothing to dispatch */
    CHECK(!sse(&s, "event: message", &data, &len, &over));
    CHECK(!sse(&s, "data: {\"a\":", &data, &len, &over));
    CHECK(!sse(&s, "data:1}\r", &data, &len, &over));
    CHECK(sse(&s, "\r", &data, &len, &over));
    CHECK(!over);
    CHECK_INT_EQ(len, 8);
    CHECK(memcmp(data, "{\"a\":\n1}", 8) == 0);
    /* past the cap: reported as over, with nothing */
    CHECK(!sse(&s, "data: 0123456789012345678901234567890123456789", &data, &len, &over));
    CHECK(sse(&s, "", &data, &len, &over));
    CHECK(over);
    CHECK_INT_EQ(len, 0);
    /* and the next event is whole again */
    CHECK(!sse(&s, "data: {}", &data, &len, &over));
    CHECK(sse(&s, "", &data, &len, &over));
    CHECK(!over);
    CHECK_INT_EQ(len, 2);
    oc_sse_free(&s);
}

TEST(serve_directory_header)
{
    char out[64];
    CHECK(oc_uri_component("/workspace/my repo", out, sizeof(out)));
    CHECK_STR_EQ(out, "%2Fworkspace%2Fmy%20repo");
    CHECK(oc_uri_component("a-b_c.d!~*'()", out, sizeof(out)));
    CHECK_STR_EQ(out, "a-b_c.d!~*'()");
    CHECK(oc_uri_component("\xc3\xa9", out, sizeof(out)));
    CHECK_STR_EQ(out, "%C3%A9");
    CHECK(!oc_uri_component("/////", out, 15));
    CHECK(oc_uri_component("/////", out, 16));
}

static const struct proxy_llm warm_llms[] = {
    {.name = "anthropic", .wire = PROXY_WIRE_ANTHROPIC, .base_path = "/v1", .has_key = true},
};

TEST(serve_warm_launch_is_the_bridge_without_the_token_in_argv)
{
    struct agent_launch l = {.model = "anthropic/claude-sonnet-4-5",
                             .session = "ses_1",
                             .proxy_url = "http://127.0.0.1:8788/proxy",
                             .proxy_token = "secret-token",
                             .program = "/opt/agents/opencode",
                             .providers = warm_llms,
                             .nproviders = 1,
                             .warm_port = "8789",
                             .warm_idle_s = 300};
    opencode_launch(&l);
    static const char *const want[] = {"sandbox-agent", "/opt/agents/opencode",        "8789",
                                       "300",           "anthropic/claude-sonnet-4-5", "ses_1"};
    size_t n = 0;
    for (; l.argv[n]; n++) {
        CHECK(n < 6);
        CHECK_STR_EQ(l.argv[n], want[n]);
    }
    CHECK_INT_EQ(n, 6);
    bool token = false;
    for (size_t i = 0; l.env[i]; i++)
        token |= strcmp(l.env[i], "SANDBOX_MCP_PROXY_TOKEN=secret-token") == 0;
    CHECK(token);
    agent_launch_release(&l);

    l.session = "";
    opencode_launch(&l);
    for (n = 0; l.argv[n]; n++)
        ;
    CHECK_INT_EQ(n, 5);
    agent_launch_release(&l);
}

TEST_MAIN()

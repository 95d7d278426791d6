#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/utf8.h"
#include "harness.h"
#include "proxy/proxy.h"
#include "runs/agent.h"
#include "runs/runs_internal.h"

/* Lines as OpenCode 1.18.33 printed them (`run --format json` against a scripted provider). */
static const char step_start_line[] =
    "{\"type\":\"step_start\",\"timestamp\":1795975723414,\"sessionID\":"
    "\"ses_dd7816a9fffe8tWAXhXReqoMKQ\",\"part\":{\"id\":\"prt_2287eb90800123SHBs4F80eAxv\","
    "\"messageID\":\"msg_2287ea2dc001SRq3xiPY7IrcX6\",\"sessionID\":"
    "\"ses_dd7816a9fffe8tWAXhXReqoMKQ\",\"snapshot\":\"0d8a474fc67971fb3dd7616e26323d3066442555\","
    "\"type\":\"step-start\"}}";

static const char write_line[] =
    "{\"type\":\"tool_use\",\"timestamp\":1795975409219,\"sessionID\":"
    "\"ses_dd786249cffe7kIj2dGrw1MsJT\",\"part\":{\"type\":\"tool\",\"tool\":\"write\",\"callID\":"
    "\"toolu_1\",\"state\":{\"status\":\"completed\",\"input\":{\"filePath\":\"/tmp/ocx/../repo/"
    "hello.txt\",\"content\":\"hello\\n\"},\"output\":\"Wrote file successfully.\",\"metadata\":{"
    "\"diagnostics\":{},\"filepath\":\"/tmp/ocx/../repo/hello.txt\",\"exists\":false,"
    "\"truncated\":false},\"title\":\"../../repo/hello.txt\",\"time\":{\"start\":1795975409179,"
    "\"end\":1795975409213}},\"id\":\"prt_22879ee0b001kxWmPlA98Zs05j\",\"sessionID\":"
    "\"ses_dd786249cffe7kIj2dGrw1MsJT\",\"messageID\":\"msg_22879e4c3001Wo6eJWHA7Q8V7g\"}}";

static const char bash_exit_line[] =
    "{\"type\":\"tool_use\",\"timestamp\":1795975410082,\"sessionID\":"
    "\"ses_dd786249cffe7kIj2dGrw1MsJT\",\"part\":{\"type\":\"tool\",\"tool\":\"bash\",\"callID\":"
    "\"toolu_2\",\"state\":{\"status\":\"completed\",\"input\":{\"command\":\"git add hello.txt && "
    "git commit -q -m \\\"Add hello\\\"\",\"description\":\"Commit\"},\"output\":\"fatal: "
    "pathspec 'hello.txt' did not match any files\\n\",\"metadata\":{\"output\":\"fatal: pathspec "
    "'hello.txt' did not match any files\\n\",\"exit\":128,\"truncated\":false},\"title\":\"git "
    "add "
    "hello.txt && git commit -q -m \\\"Add hello\\\"\",\"time\":{\"start\":1795975409761,\"end\":"
    "1795975410075}},\"id\":\"prt_22879f057001kFwgg5ollLbT3v\",\"sessionID\":"
    "\"ses_dd786249cffe7kIj2dGrw1MsJT\",\"messageID\":\"msg_22879ef45001WfIDhWk4IjcCS2\"}}";

static const char bash_line[] =
    "{\"type\":\"tool_use\",\"timestamp\":1795975650211,\"sessionID\":"
    "\"ses_dd78313eaffeMlIDVx9wHRhuj3\",\"part\":{\"type\":\"tool\",\"tool\":\"bash\",\"callID\":"
    "\"toolu_1\",\"state\":{\"status\":\"completed\",\"input\":{\"command\":\"ls\",\"description\":"
    "\"List\"},\"output\":\"a.txt\\n\",\"metadata\":{\"output\":\"a.txt\\n\",\"exit\":0,"
    "\"truncated\":false},\"title\":\"ls\",\"time\":{\"start\":1795975648565,\"end\":"
    "1795975649813}},\"id\":\"prt_2287d94d6001FiKvPt3xlyc4iL\",\"sessionID\":"
    "\"ses_dd78313eaffeMlIDVx9wHRhuj3\",\"messageID\":\"msg_2287d3e89001Bix6mJ3rhvs5Dd\"}}";

static const char read_error_line[] =
    "{\"type\":\"tool_use\",\"timestamp\":1795975645673,\"sessionID\":"
    "\"ses_dd7831d95ffecqaLgX1NrByLwP\",\"part\":{\"type\":\"tool\",\"tool\":\"read\",\"callID\":"
    "\"toolu_1\",\"state\":{\"status\":\"error\",\"input\":{\"filePath\":\"/tmp/ocerr/toolerr/repo/"
    "missing.txt\"},\"error\":\"File not found: /tmp/ocerr/toolerr/repo/missing.txt\",\"time\":{"
    "\"start\":1795975645071,\"end\":1795975645439}},\"id\":\"prt_2287d862b0013ab74X5bSLEoyH\","
    "\"sessionID\":\"ses_dd7831d95ffecqaLgX1NrByLwP\",\"messageID\":"
    "\"msg_2287d2c74001LX5OWV0M8YIBKZ\"}}";

static const char edit_error_line[] =
    "{\"type\":\"tool_use\",\"timestamp\":1795975648553,\"sessionID\":"
    "\"ses_dd7831d95ffecqaLgX1NrByLwP\",\"part\":{\"type\":\"tool\",\"tool\":\"edit\",\"callID\":"
    "\"toolu_2\",\"state\":{\"status\":\"error\",\"input\":{\"filePath\":\"/tmp/ocerr/toolerr/repo/"
    "a.txt\",\"oldString\":\"nope\",\"newString\":\"x\"},\"error\":\"Could not find oldString in "
    "the file. It must match exactly, including whitespace, indentation, and line endings.\","
    "\"time\":{\"start\":1795975648320,\"end\":1795975648447}},\"id\":"
    "\"prt_2287d9406001dYC6eIvZQAe8Nv\",\"sessionID\":\"ses_dd7831d95ffecqaLgX1NrByLwP\","
    "\"messageID\":\"msg_2287d90b2001158chOjZk9XSDJ\"}}";

static const char write_schema_line[] =
    "{\"type\":\"tool_use\",\"timestamp\":1795975653884,\"sessionID\":"
    "\"ses_dd7831d95ffecqaLgX1NrByLwP\",\"part\":{\"type\":\"tool\",\"tool\":\"write\",\"callID\":"
    "\"toolu_5\",\"state\":{\"status\":\"error\",\"input\":{\"content\":\"no path\"},\"error\":"
    "\"The write tool was called with invalid arguments: SchemaError(Missing key\\n  at "
    "[\\\"filePath\\\"]).\\nPlease rewrite the input so it satisfies the expected schema.\","
    "\"time\":{\"start\":1795975653867,\"end\":1795975653876}},\"id\":"
    "\"prt_2287da9bf001l2o7KLv9vzpfml\",\"sessionID\":\"ses_dd7831d95ffecqaLgX1NrByLwP\","
    "\"messageID\":\"msg_2287da8a2001EOo9IotQl1uqjf\"}}";

static const char glob_error_line[] =
    "{\"type\":\"tool_use\",\"timestamp\":1795975723666,\"sessionID\":"
    "\"ses_dd7816a9fffe8tWAXhXReqoMKQ\",\"part\":{\"type\":\"tool\",\"tool\":\"glob\",\"callID\":"
    "\"toolu_1\",\"state\":{\"status\":\"error\",\"input\":{\"pattern\":\"**/*.txt\"},\"error\":"
    "\"ripgrep execution failed\",\"time\":{\"start\":1795975723383,\"end\":1795975723629}},\"id\":"
    "\"prt_2287eb94c001zIKCEIZAYjhaaQ\",\"sessionID\":\"ses_dd7816a9fffe8tWAXhXReqoMKQ\","
    "\"messageID\":\"msg_2287ea2dc001SRq3xiPY7IrcX6\"}}";

/* A call of a tool that does not exist: OpenCode runs its "invalid" tool instead. */
static const char invalid_tool_line[] =
    "{\"type\":\"tool_use\",\"timestamp\":1795975652973,\"sessionID\":"
    "\"ses_dd7831d95ffecqaLgX1NrByLwP\",\"part\":{\"type\":\"tool\",\"tool\":\"invalid\","
    "\"callID\":\"toolu_4\",\"state\":{\"status\":\"completed\",\"input\":{\"tool\":\"nosuchtool\","
    "\"error\":\"Model tried to call unavailable tool 'nosuchtool'.\"},\"output\":\"The arguments "
    "provided to the tool are invalid: Model tried to call unavailable tool 'nosuchtool'.\","
    "\"metadata\":{\"truncated\":false},\"title\":\"Invalid Tool\",\"time\":{\"start\":"
    "1795975652925,\"end\":1795975652937}},\"id\":\"prt_2287da625001gW03nsQy1gwTwG\","
    "\"sessionID\":\"ses_dd7831d95ffecqaLgX1NrByLwP\",\"messageID\":"
    "\"msg_2287da42b001X5d1pqGCSn0Z3j\"}}";

static const char step_finish_line[] =
    "{\"type\":\"step_finish\",\"timestamp\":1795975646867,\"sessionID\":"
    "\"ses_dd7831d95ffecqaLgX1NrByLwP\",\"part\":{\"id\":\"prt_2287d8d7c001LHQjtDBClT6nq0\","
    "\"reason\":\"tool-calls\",\"snapshot\":\"0d8a474fc67971fb3dd7616e26323d3066442555\","
    "\"messageID\":\"msg_2287d2c74001LX5OWV0M8YIBKZ\",\"sessionID\":"
    "\"ses_dd7831d95ffecqaLgX1NrByLwP\",\"type\":\"step-finish\",\"tokens\":{\"total\":130,"
    "\"input\":100,\"output\":20,\"reasoning\":0,\"cache\":{\"write\":3,\"read\":7}},\"cost\":"
    "0.00061335}}";

static const char text_line[] =
    "{\"type\":\"text\",\"timestamp\":1795975654456,\"sessionID\":"
    "\"ses_dd7831d95ffecqaLgX1NrByLwP\",\"part\":{\"id\":\"prt_2287dac28001INzlokEpLfmtlc\","
    "\"messageID\":\"msg_2287daacb001znESXAO4YI39sv\",\"sessionID\":"
    "\"ses_dd7831d95ffecqaLgX1NrByLwP\",\"type\":\"text\",\"text\":\"All done.\\nSecond line.\","
    "\"time\":{\"start\":1795975654440,\"end\":1795975654446}}}";

/* Printed only with --thinking, from an Anthropic "thinking" block. */
static const char reasoning_line[] =
    "{\"type\":\"reasoning\",\"timestamp\":1795975723414,\"sessionID\":"
    "\"ses_dd7816a9fffe8tWAXhXReqoMKQ\",\"part\":{\"id\":\"prt_2287eb915001yHyzQNhiP3ElVc\","
    "\"messageID\":\"msg_2287ea2dc001SRq3xiPY7IrcX6\",\"sessionID\":"
    "\"ses_dd7816a9fffe8tWAXhXReqoMKQ\",\"type\":\"reasoning\",\"text\":\"Let me think about "
    "this.\\nStep two.\",\"time\":{\"start\":1795975723285,\"end\":1795975723307},\"metadata\":{"
    "\"anthropic\":{\"signature\":\"x\"}}}}";

/* The provider answered 401 authentication_error; OpenCode exits with status 1. */
static const char error_401_line[] =
    "{\"type\":\"error\",\"timestamp\":1795975496811,\"sessionID\":"
    "\"ses_dd784cc44ffepp8oML8Eg9Bwub\",\"error\":{\"name\":\"APIError\",\"data\":{\"message\":"
    "\"invalid x-api-key\",\"statusCode\":401,\"isRetryable\":false,\"responseHeaders\":{"
    "\"connection\":\"keep-alive\",\"content-type\":\"application/json\",\"date\":\"Sun, 29 Nov "
    "2026 18:04:56 GMT\",\"keep-alive\":\"timeout=5\",\"request-id\":\"req_fake\","
    "\"transfer-encoding\":\"chunked\"},\"responseBody\":\"{\\\"type\\\":\\\"error\\\","
    "\\\"error\\\":{\\\"type\\\":\\\"authentication_error\\\",\\\"message\\\":\\\"invalid "
    "x-api-key\\\"}}\",\"metadata\":{\"url\":\"http://127.0.0.1:36083/v1/messages\"}}}}";

/* 500 overloaded_error, after OpenCode's own retries ran out. */
static const char error_500_line[] =
    "{\"type\":\"error\",\"timestamp\":1795975576239,\"sessionID\":"
    "\"ses_dd784a7e1ffeEyy754RxKN6IMe\",\"error\":{\"name\":\"APIError\",\"data\":{\"message\":"
    "\"Overloaded\",\"statusCode\":500,\"isRetryable\":true,\"responseHeaders\":{\"connection\":"
    "\"keep-alive\",\"content-type\":\"application/json\",\"date\":\"Sun, 29 Nov 2026 18:06:16 "
    "GMT\",\"keep-alive\":\"timeout=5\",\"request-id\":\"req_fake\",\"transfer-encoding\":"
    "\"chunked\"},\"responseBody\":\"{\\\"type\\\":\\\"error\\\",\\\"error\\\":{\\\"type\\\":"
    "\\\"overloaded_error\\\",\\\"message\\\":\\\"Overloaded\\\"}}\",\"metadata\":{\"url\":"
    "\"http://127.0.0.1:45555/v1/messages\"}}}}";

/* 400 "prompt is too long": no statusCode in this one. */
static const char error_overflow_line[] =
    "{\"type\":\"error\",\"timestamp\":1795975651734,\"sessionID\":"
    "\"ses_dd78313eaffeMlIDVx9wHRhuj3\",\"error\":{\"name\":\"ContextOverflowError\",\"data\":{"
    "\"message\":\"prompt is too long: 250000 tokens > 200000 maximum\",\"responseBody\":"
    "\"{\\\"type\\\":\\\"error\\\",\\\"error\\\":{\\\"type\\\":\\\"invalid_request_error\\\","
    "\\\"message\\\":\\\"prompt is too long: 250000 tokens > 200000 maximum\\\"}}\"}}}";

static int parse(const char *line, struct agent_event *ev)
{
    return opencode_parse_event(line, strlen(line), ev);
}

/* The line parses, and its summary is want (nothing else of the event is checked). */
#define CHECK_SUMMARY(line, want)                                                                  \
    do {                                                                                           \
        struct agent_event ev_;                                                                    \
        CHECK_INT_EQ(parse(line, &ev_), 0);                                                        \
        CHECK_STR_EQ(ev_.summary, want);                                                           \
        agent_event_clear(&ev_);                                                                   \
    } while (0)

/* The summary invariants every event must keep. */
static void check_summary(const struct agent_event *ev)
{
    CHECK(ev->summary != NULL);
    if (!ev->summary)
        return;
    size_t n = strlen(ev->summary);
    CHECK(n <= AGENT_SUMMARY_MAX);
    CHECK(utf8_valid(ev->summary, n));
    for (size_t i = 0; i < n; i++)
        CHECK((unsigned char)ev->summary[i] >= 0x20 && ev->summary[i] != 0x7F);
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && memcmp(s + n - t, tail, t) == 0;
}

TEST(opencode_step_start)
{
    struct agent_event ev;
    CHECK_INT_EQ(parse(step_start_line, &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_STEP_START);
    CHECK_STR_EQ(ev.type, "step_start");
    CHECK_INT_EQ(ev.time_ms, 1795975723414);
    CHECK_STR_EQ(ev.session, "ses_dd7816a9fffe8tWAXhXReqoMKQ");
    CHECK_STR_EQ(ev.summary, "step start");
    CHECK(ev.text == NULL);
    CHECK(ev.error == NULL);
    CHECK(!ev.tool_failed);
    CHECK_INT_EQ(ev.input_tokens, 0);
    agent_event_clear(&ev);
}

TEST(opencode_tool_use_completed)
{
    struct agent_event ev;
    CHECK_INT_EQ(parse(write_line, &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_TOOL_USE);
    CHECK_STR_EQ(ev.type, "tool_use");
    CHECK_STR_EQ(ev.session, "ses_dd786249cffe7kIj2dGrw1MsJT");
    CHECK_STR_EQ(ev.summary, "write hello.txt");
    CHECK(!ev.tool_failed);
    CHECK(ev.error == NULL && ev.text == NULL);
    agent_event_clear(&ev);

    CHECK_SUMMARY(bash_line, "bash: List");

    /* a command that exits non-zero is still "completed" for OpenCode */
    CHECK_INT_EQ(parse(bash_exit_line, &ev), 0);
    CHECK_STR_EQ(ev.summary, "bash: Commit (exit 128)");
    CHECK(!ev.tool_failed);
    CHECK(ev.error == NULL);
    agent_event_clear(&ev);

    CHECK_SUMMARY(invalid_tool_line, "invalid nosuchtool");
}

TEST(opencode_tool_use_failed)
{
    struct agent_event ev;
    CHECK_INT_EQ(parse(read_error_line, &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_TOOL_USE);
    CHECK_STR_EQ(ev.summary, "read missing.txt (error)");
    CHECK(ev.tool_failed);
    CHECK_STR_EQ(ev.error, "File not found: /tmp/ocerr/toolerr/repo/missing.txt");
    CHECK(!ev.truncated);
    agent_event_clear(&ev);

    CHECK_INT_EQ(parse(edit_error_line, &ev), 0);
    CHECK_STR_EQ(ev.summary, "edit a.txt (error)");
    CHECK_STR_CONTAINS(ev.error, "Could not find oldString");
    agent_event_clear(&ev);

    CHECK_INT_EQ(parse(glob_error_line, &ev), 0);
    CHECK_STR_EQ(ev.summary, "glob **/*.txt (error)");
    CHECK_STR_EQ(ev.error, "ripgrep execution failed");
    agent_event_clear(&ev);

    /* no input worth showing; the error keeps its lines, the summary has none */
    CHECK_INT_EQ(parse(write_schema_line, &ev), 0);
    CHECK_STR_EQ(ev.summary, "write (error)");
    CHECK_STR_CONTAINS(ev.error, "SchemaError(Missing key\n  at [\"filePath\"]).\nPlease");
    agent_event_clear(&ev);

    /* status error without an error message */
    CHECK_INT_EQ(parse("{\"type\":\"tool_use\",\"part\":{\"tool\":\"grep\",\"state\":{\"status\":"
                       "\"error\",\"input\":{\"pattern\":\"TODO\",\"path\":\"/src\"}}}}",
                       &ev),
                 0);
    CHECK_STR_EQ(ev.summary, "grep TODO (error)");
    CHECK_STR_EQ(ev.error, "tool failed");
    agent_event_clear(&ev);

    /* an error that is not a string is kept as JSON */
    CHECK_INT_EQ(
        parse("{\"type\":\"tool_use\",\"part\":{\"tool\":\"webfetch\",\"state\":{\"status\":"
              "\"error\",\"input\":{\"url\":\"https://example.com/x\"},\"error\":{\"code\":"
              "7}}}}",
              &ev),
        0);
    CHECK_STR_EQ(ev.summary, "webfetch https://example.com/x (error)");
    CHECK_STR_EQ(ev.error, "{\"code\":7}");
    agent_event_clear(&ev);
}

TEST(opencode_tool_use_details)
{
    struct agent_event ev;
    /* bash without a description: the command's first line */
    CHECK_SUMMARY("{\"type\":\"tool_use\",\"part\":{\"tool\":\"bash\",\"state\":{\"status\":"
                  "\"completed\",\"input\":{\"command\":\"\\n  git commit -m 'x'\\necho "
                  "done\",\"description\":\"  \"}}}}",
                  "bash: git commit -m 'x'");

    /* a task's description; a tool with nothing but a title; a status other than the two */
    CHECK_SUMMARY("{\"type\":\"tool_use\",\"part\":{\"tool\":\"task\",\"state\":{\"status\":"
                  "\"completed\",\"input\":{\"description\":\"Explore the repo\"}}}}",
                  "task: Explore the repo");
    CHECK_INT_EQ(parse("{\"type\":\"tool_use\",\"part\":{\"tool\":\"todowrite\",\"state\":{"
                       "\"status\":\"running\",\"input\":{\"todos\":[]},\"title\":\"3 todos\"}}}",
                       &ev),
                 0);
    CHECK_STR_EQ(ev.summary, "todowrite: 3 todos (running)");
    CHECK(!ev.tool_failed);
    agent_event_clear(&ev);

    /* paths: the last component, a trailing slash ignored, "/" kept whole; "path" as is */
    CHECK_SUMMARY("{\"type\":\"tool_use\",\"part\":{\"tool\":\"read\",\"state\":{\"status\":"
                  "\"completed\",\"input\":{\"filePath\":\"/a/dir/\"}}}}",
                  "read dir");
    CHECK_SUMMARY("{\"type\":\"tool_use\",\"part\":{\"tool\":\"read\",\"state\":{\"status\":"
                  "\"completed\",\"input\":{\"filePath\":\"/\"}}}}",
                  "read /");
    CHECK_SUMMARY("{\"type\":\"tool_use\",\"part\":{\"tool\":\"list\",\"state\":{\"status\":"
                  "\"completed\",\"input\":{\"path\":\"/work/src\"}}}}",
                  "list /work/src");

    /* no tool name, no state */
    CHECK_INT_EQ(parse("{\"type\":\"tool_use\",\"part\":{}}", &ev), 0);
    CHECK_STR_EQ(ev.summary, "tool");
    CHECK(!ev.tool_failed && ev.error == NULL);
    agent_event_clear(&ev);
}

TEST(opencode_tool_and_target)
{
    struct agent_event ev;
    /* a command: the command itself, not its description; its exit status */
    CHECK_INT_EQ(parse(bash_exit_line, &ev), 0);
    CHECK_STR_EQ(ev.tool, "bash");
    CHECK_STR_EQ(ev.target, "git add hello.txt && git commit -q -m \"Add hello\"");
    CHECK_INT_EQ(ev.exit_status, 128);
    agent_event_clear(&ev);
    CHECK_INT_EQ(parse(bash_line, &ev), 0);
    CHECK_STR_EQ(ev.target, "ls");
    CHECK_INT_EQ(ev.exit_status, 0);
    agent_event_clear(&ev);
    /* a file as given (the summary has only its name) */
    CHECK_INT_EQ(parse(write_line, &ev), 0);
    CHECK_STR_EQ(ev.tool, "write");
    CHECK_STR_EQ(ev.target, "/tmp/ocx/../repo/hello.txt");
    agent_event_clear(&ev);
    CHECK_INT_EQ(parse(glob_error_line, &ev), 0);
    CHECK_STR_EQ(ev.target, "**/*.txt");
    CHECK(ev.tool_failed);
    agent_event_clear(&ev);
    /* nothing to name; a command's first line, one line; a name with odd bytes */
    CHECK_INT_EQ(parse(write_schema_line, &ev), 0);
    CHECK(ev.target == NULL);
    agent_event_clear(&ev);
    CHECK_INT_EQ(parse("{\"type\":\"tool_use\",\"part\":{\"tool\":\"bash\",\"state\":{"
                       "\"input\":{\"command\":\"\\n  make\\t -j2 \\nmake install\"}}}}",
                       &ev),
                 0);
    CHECK_STR_EQ(ev.target, "make -j2");
    agent_event_clear(&ev);
    CHECK_INT_EQ(parse("{\"type\":\"tool_use\",\"part\":{\"tool\":\"b\\u00e9sh\\n\",\"state\":{"
                       "\"input\":{\"path\":\"/src\"}}}}",
                       &ev),
                 0);
    CHECK_STR_EQ(ev.tool, "b??sh?");
    CHECK_STR_EQ(ev.target, "/src");
    agent_event_clear(&ev);
    /* other kinds have neither */
    CHECK_INT_EQ(parse(step_start_line, &ev), 0);
    CHECK_STR_EQ(ev.tool, "");
    CHECK(ev.target == NULL);
    agent_event_clear(&ev);
}

TEST(opencode_step_finish)
{
    struct agent_event ev;
    CHECK_INT_EQ(parse(step_finish_line, &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_STEP_FINISH);
    /* input 100 + cache read 7 + cache write 3: what the provider counted as input */
    CHECK_INT_EQ(ev.input_tokens, 110);
    CHECK_INT_EQ(ev.output_tokens, 20);
    CHECK(ev.cost > 0.00061334 && ev.cost < 0.00061336);
    CHECK_STR_EQ(ev.summary, "step finish (tool-calls): 110 in, 20 out, $0.0006134");
    agent_event_clear(&ev);

    /* reasoning tokens are output the provider billed; OpenCode subtracts them from output */
    CHECK_INT_EQ(parse("{\"type\":\"step_finish\",\"part\":{\"reason\":\"stop\",\"tokens\":{"
                       "\"input\":5,\"output\":7,\"reasoning\":11},\"cost\":0}}",
                       &ev),
                 0);
    CHECK_INT_EQ(ev.input_tokens, 5);
    CHECK_INT_EQ(ev.output_tokens, 18);
    CHECK_STR_EQ(ev.summary, "step finish (stop): 5 in, 18 out, $0");
    agent_event_clear(&ev);

    /* nonsense numbers count nothing */
    CHECK_INT_EQ(parse("{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":-5,\"output\":"
                       "1e300,\"reasoning\":\"9\",\"cache\":{\"read\":123456789012345678901234,"
                       "\"write\":2.9}},\"cost\":-1}}",
                       &ev),
                 0);
    CHECK_INT_EQ(ev.input_tokens, 2);
    CHECK_INT_EQ(ev.output_tokens, 0);
    CHECK(ev.cost == 0);
    CHECK_STR_EQ(ev.summary, "step finish: 2 in, 0 out, $0");
    agent_event_clear(&ev);

    CHECK_INT_EQ(
        parse("{\"type\":\"step_finish\",\"part\":{\"tokens\":[1,2],\"cost\":\"1\"}}", &ev), 0);
    CHECK_INT_EQ(ev.input_tokens, 0);
    CHECK(ev.cost == 0);
    agent_event_clear(&ev);
}

TEST(opencode_text_and_reasoning)
{
    struct agent_event ev;
    CHECK_INT_EQ(parse(text_line, &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_TEXT);
    CHECK_STR_EQ(ev.text, "All done.\nSecond line.");
    CHECK_STR_EQ(ev.summary, "All done.");
    CHECK(ev.error == NULL && !ev.truncated);
    agent_event_clear(&ev);

    CHECK_INT_EQ(parse(reasoning_line, &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_REASONING);
    CHECK_STR_EQ(ev.type, "reasoning");
    CHECK_STR_EQ(ev.summary, "Let me think about this.");
    CHECK(ev.text == NULL);
    agent_event_clear(&ev);

    /* leading blank lines are skipped for the summary, kept in the text */
    CHECK_INT_EQ(
        parse("{\"type\":\"text\",\"part\":{\"text\":\"\\n\\n  Hello\\t there \\nWorld\"}}", &ev),
        0);
    CHECK_STR_EQ(ev.summary, "Hello there");
    CHECK_STR_EQ(ev.text, "\n\n  Hello\t there \nWorld");
    agent_event_clear(&ev);

    /* no text, or text of the wrong type: an empty text, the type as summary */
    CHECK_INT_EQ(parse("{\"type\":\"text\",\"part\":{\"text\":12}}", &ev), 0);
    CHECK_STR_EQ(ev.text, "");
    CHECK_STR_EQ(ev.summary, "text");
    agent_event_clear(&ev);
    CHECK_SUMMARY("{\"type\":\"reasoning\"}", "reasoning");
}

TEST(opencode_error_events)
{
    struct agent_event ev;
    CHECK_INT_EQ(parse(error_401_line, &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_ERROR);
    CHECK_STR_EQ(ev.type, "error");
    CHECK_INT_EQ(ev.time_ms, 1795975496811);
    CHECK_STR_EQ(ev.session, "ses_dd784cc44ffepp8oML8Eg9Bwub");
    CHECK_STR_EQ(ev.error, "invalid x-api-key");
    CHECK_STR_EQ(ev.summary, "APIError 401: invalid x-api-key");
    CHECK(ev.text == NULL && !ev.tool_failed);
    agent_event_clear(&ev);

    CHECK_INT_EQ(parse(error_500_line, &ev), 0);
    CHECK_STR_EQ(ev.error, "Overloaded");
    CHECK_STR_EQ(ev.summary, "APIError 500: Overloaded");
    agent_event_clear(&ev);

    CHECK_INT_EQ(parse(error_overflow_line, &ev), 0);
    CHECK_STR_EQ(ev.error, "prompt is too long: 250000 tokens > 200000 maximum");
    CHECK_STR_EQ(ev.summary, "ContextOverflowError: prompt is too long: 250000 tokens > 200000 "
                             "maximum");
    agent_event_clear(&ev);

    /* a name and no message (OpenCode then reports the name) */
    CHECK_INT_EQ(parse("{\"type\":\"error\",\"error\":{\"name\":\"MessageOutputLengthError\","
                       "\"data\":{}}}",
                       &ev),
                 0);
    CHECK_STR_EQ(ev.error, "MessageOutputLengthError");
    CHECK_STR_EQ(ev.summary, "MessageOutputLengthError");
    agent_event_clear(&ev);

    /* other shapes: a bare string, a message beside the name, nothing at all */
    CHECK_INT_EQ(parse("{\"type\":\"error\",\"error\":\"boom\\nsecond\"}", &ev), 0);
    CHECK_STR_EQ(ev.error, "boom\nsecond");
    CHECK_STR_EQ(ev.summary, "boom second");
    agent_event_clear(&ev);
    CHECK_SUMMARY("{\"type\":\"error\",\"error\":{\"name\":\"UnknownError\",\"message\":"
                  "\"socket hang up\",\"data\":{\"statusCode\":99999}}}",
                  "UnknownError: socket hang up");
    CHECK_INT_EQ(parse("{\"type\":\"error\",\"error\":{\"data\":{\"message\":\"   \"}}}", &ev), 0);
    CHECK_STR_EQ(ev.error, "unknown error");
    CHECK_STR_EQ(ev.summary, "unknown error");
    agent_event_clear(&ev);
    CHECK_INT_EQ(
        parse("{\"type\":\"error\",\"error\":{\"name\":\"X\",\"data\":{\"message\":[1]}}}", &ev),
        0);
    CHECK_STR_EQ(ev.error, "[1]");
    agent_event_clear(&ev);
}

TEST(opencode_other_and_odd_fields)
{
    struct agent_event ev;
    CHECK_INT_EQ(
        parse("{\"type\":\"permission_asked\",\"timestamp\":5,\"sessionID\":\"ses_1\"}", &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_OTHER);
    CHECK_STR_EQ(ev.summary, "permission_asked");
    CHECK_INT_EQ(ev.time_ms, 5);
    agent_event_clear(&ev);

    CHECK_INT_EQ(parse("{}", &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_OTHER);
    CHECK_STR_EQ(ev.type, "");
    CHECK_STR_EQ(ev.summary, "");
    CHECK_STR_EQ(ev.session, "");
    CHECK_INT_EQ(ev.time_ms, 0);
    agent_event_clear(&ev);

    /* every field of the wrong type */
    CHECK_INT_EQ(parse("{\"type\":5,\"timestamp\":\"x\",\"sessionID\":7,\"part\":[]}", &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_OTHER);
    CHECK_STR_EQ(ev.type, "");
    CHECK_INT_EQ(ev.time_ms, 0);
    agent_event_clear(&ev);
    CHECK_SUMMARY("{\"type\":\"tool_use\",\"part\":\"x\"}", "tool");
    CHECK_INT_EQ(parse("{\"type\":\"tool_use\",\"part\":{\"tool\":[],\"state\":{\"status\":1,"
                       "\"input\":{\"filePath\":{}}}}}",
                       &ev),
                 0);
    CHECK_STR_EQ(ev.summary, "tool");
    CHECK(!ev.tool_failed);
    agent_event_clear(&ev);

    /* huge and fractional timestamps */
    CHECK_INT_EQ(parse("{\"type\":\"text\",\"timestamp\":123456789012345678901234567890}", &ev), 0);
    CHECK_INT_EQ(ev.time_ms, 0);
    agent_event_clear(&ev);
    CHECK_INT_EQ(parse("{\"type\":\"text\",\"timestamp\":1795975654456.9}", &ev), 0);
    CHECK_INT_EQ(ev.time_ms, 1795975654456);
    agent_event_clear(&ev);

    /* the session from the part when the line has none */
    CHECK_INT_EQ(parse("{\"type\":\"text\",\"part\":{\"sessionID\":\"ses_part\"}}", &ev), 0);
    CHECK_STR_EQ(ev.session, "ses_part");
    agent_event_clear(&ev);
}

TEST(opencode_type_and_session_kept_safe)
{
    struct agent_event ev;
    CHECK_INT_EQ(parse("{\"type\":\"an_event_type_much_longer_than_thirty_one\"}", &ev), 0);
    CHECK_STR_EQ(ev.type, "an_event_type_much_longer_than_");
    CHECK_INT_EQ(ev.kind, AGENT_EV_OTHER);
    agent_event_clear(&ev);

    /* not printable ASCII: replaced, and no longer any known kind */
    CHECK_INT_EQ(parse("{\"type\":\"t\\u00e9xt\\n\"}", &ev), 0);
    CHECK_STR_EQ(ev.type, "t??xt?");
    CHECK_INT_EQ(ev.kind, AGENT_EV_OTHER);
    agent_event_clear(&ev);
    CHECK_INT_EQ(parse("{\"type\":\"text\\u0000x\"}", &ev), 0);
    CHECK_STR_EQ(ev.type, "text?x");
    CHECK_INT_EQ(ev.kind, AGENT_EV_OTHER);
    agent_event_clear(&ev);

    /* a session id that would not round-trip is dropped, not mangled */
    char line[512];
    char longid[200];
    memset(longid, 'a', 128);
    longid[128] = '\0';
    snprintf(line, sizeof(line), "{\"type\":\"text\",\"sessionID\":\"%s\"}", longid);
    CHECK_INT_EQ(parse(line, &ev), 0);
    CHECK_STR_EQ(ev.session, "");
    agent_event_clear(&ev);
    longid[127] = '\0';
    snprintf(line, sizeof(line), "{\"type\":\"text\",\"sessionID\":\"%s\"}", longid);
    CHECK_INT_EQ(parse(line, &ev), 0);
    CHECK_STR_EQ(ev.session, longid);
    agent_event_clear(&ev);
    CHECK_INT_EQ(parse("{\"type\":\"text\",\"sessionID\":\"ses 1\"}", &ev), 0);
    CHECK_STR_EQ(ev.session, "");
    agent_event_clear(&ev);
    CHECK_INT_EQ(parse("{\"type\":\"text\",\"sessionID\":\"\"}", &ev), 0);
    CHECK_STR_EQ(ev.session, "");
    agent_event_clear(&ev);
}

/* Build {"type":"text","part":{"text":"<rep * count>"}}; caller frees. */
static char *text_event_of(const char *rep, size_t count)
{
    size_t rl = strlen(rep), n = 64 + rl * count;
    char *line = malloc(n);
    size_t o = (size_t)sprintf(line, "{\"type\":\"text\",\"part\":{\"text\":\"");
    for (size_t i = 0; i < count; i++, o += rl)
        memcpy(line + o, rep, rl);
    strcpy(line + o, "\"}}");
    return line;
}

TEST(opencode_summary_cut_on_character_boundary)
{
    static const char *reps[] = {"a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "ab "};
    for (size_t r = 0; r < sizeof(reps) / sizeof(reps[0]); r++) {
        char *line = text_event_of(reps[r], 300);
        struct agent_event ev;
        CHECK_INT_EQ(parse(line, &ev), 0);
        check_summary(&ev);
        CHECK(ends_with(ev.summary, "\xE2\x80\xA6"));
        CHECK(strlen(ev.summary) > AGENT_SUMMARY_MAX - 6);
        CHECK(!ends_with(ev.summary, " \xE2\x80\xA6"));
        CHECK(!ev.truncated);
        agent_event_clear(&ev);
        free(line);
    }
    /* exactly 200 bytes fit without a mark */
    char *line = text_event_of("x", AGENT_SUMMARY_MAX);
    struct agent_event ev;
    CHECK_INT_EQ(parse(line, &ev), 0);
    CHECK_INT_EQ(strlen(ev.summary), AGENT_SUMMARY_MAX);
    CHECK(!ends_with(ev.summary, "\xE2\x80\xA6"));
    agent_event_clear(&ev);
    free(line);
}

TEST(opencode_summary_keeps_tool_status_when_cut)
{
    char line[4096];
    char cmd[1500];
    memset(cmd, 'c', sizeof(cmd) - 1);
    cmd[sizeof(cmd) - 1] = '\0';
    snprintf(line, sizeof(line),
             "{\"type\":\"tool_use\",\"part\":{\"tool\":\"bash\",\"state\":{\"status\":\"error\","
             "\"input\":{\"command\":\"%s\"},\"error\":\"killed\"}}}",
             cmd);
    struct agent_event ev;
    CHECK_INT_EQ(parse(line, &ev), 0);
    check_summary(&ev);
    CHECK(ends_with(ev.summary, "\xE2\x80\xA6 (error)"));
    CHECK(strncmp(ev.summary, "bash: ccc", 9) == 0);
    CHECK(ev.tool_failed);
    CHECK_STR_EQ(ev.error, "killed");
    agent_event_clear(&ev);
}

TEST(opencode_summary_one_line)
{
    struct agent_event ev;
    /* controls, C1 controls (NEL, CSI), no-break space, U+2028/U+2029, tabs: one space each run */
    CHECK_INT_EQ(parse("{\"type\":\"tool_use\",\"part\":{\"tool\":\"bash\",\"state\":{\"status\":"
                       "\"completed\",\"input\":{\"description\":\" a\\u0085b\\u009b\\u00a0c"
                       "\\u2028\\u2029d\\u001b[31m\\t\\r\\ne\\u007f \"}}}}",
                       &ev),
                 0);
    CHECK_STR_EQ(ev.summary, "bash: a b c d [31m e");
    check_summary(&ev);
    agent_event_clear(&ev);

    /* a NUL inside a string shows as U+FFFD */
    CHECK_INT_EQ(parse("{\"type\":\"text\",\"part\":{\"text\":\"a\\u0000b\"}}", &ev), 0);
    CHECK_STR_EQ(ev.summary, "a\xEF\xBF\xBD"
                             "b");
    CHECK_STR_EQ(ev.text, "a\xEF\xBF\xBD"
                          "b");
    agent_event_clear(&ev);

    /* a status that is long or odd is cut short */
    CHECK_INT_EQ(parse("{\"type\":\"tool_use\",\"part\":{\"tool\":\"x\",\"state\":{\"status\":"
                       "\"waiting\\nfor a very long time indeed, longer than anyone\"}}}",
                       &ev),
                 0);
    check_summary(&ev);
    CHECK_STR_CONTAINS(ev.summary, "x (waiting for a very long");
    CHECK(ends_with(ev.summary, "\xE2\x80\xA6)"));
    agent_event_clear(&ev);
}

TEST(opencode_text_and_error_capped)
{
    /* 3-byte characters: 64 KiB is not a multiple of 3, so the cut must back off */
    char *line = text_event_of("\xE2\x82\xAC", 30000);
    struct agent_event ev;
    CHECK_INT_EQ(parse(line, &ev), 0);
    CHECK_INT_EQ(strlen(ev.text), AGENT_TEXT_MAX - 1);
    CHECK(utf8_valid(ev.text, strlen(ev.text)));
    CHECK(ev.truncated);
    check_summary(&ev);
    agent_event_clear(&ev);
    free(line);

    /* NULs grow when replaced: the cap still holds */
    line = text_event_of("\\u0000", AGENT_TEXT_MAX / 2);
    CHECK_INT_EQ(parse(line, &ev), 0);
    CHECK(strlen(ev.text) <= AGENT_TEXT_MAX);
    CHECK(utf8_valid(ev.text, strlen(ev.text)));
    CHECK(ev.truncated);
    agent_event_clear(&ev);
    free(line);

    size_t n = 10000;
    char *big = malloc(n + 128);
    int o = sprintf(
        big, "{\"type\":\"error\",\"error\":{\"name\":\"APIError\",\"data\":{\"message\":\"");
    memset(big + o, 'm', n);
    strcpy(big + o + n, "\"}}}");
    CHECK_INT_EQ(parse(big, &ev), 0);
    CHECK_INT_EQ(strlen(ev.error), AGENT_ERROR_MAX);
    CHECK(ev.truncated);
    check_summary(&ev);
    CHECK(strncmp(ev.summary, "APIError: mmm", 13) == 0);
    agent_event_clear(&ev);
    free(big);
}

TEST(opencode_repairs_what_jansson_refuses)
{
    struct agent_event ev;
    /* a lone surrogate (a JavaScript string cut inside a pair), high and low */
    CHECK_INT_EQ(parse("{\"type\":\"text\",\"part\":{\"text\":\"ab\\ud83d\"}}", &ev), 0);
    CHECK_STR_EQ(ev.text, "ab\xEF\xBF\xBD");
    agent_event_clear(&ev);
    CHECK_INT_EQ(parse("{\"type\":\"text\",\"part\":{\"text\":\"\\ude00\\ud83d\\ude00x\"}}", &ev),
                 0);
    CHECK_STR_EQ(ev.text, "\xEF\xBF\xBD\xF0\x9F\x98\x80x");
    agent_event_clear(&ev);
    /* an escaped backslash before "ud800" is plain text, and stays so */
    CHECK_INT_EQ(parse("{\"type\":\"text\",\"part\":{\"text\":\"\\\\ud800 \\ud800\"}}", &ev), 0);
    CHECK_STR_EQ(ev.text, "\\ud800 \xEF\xBF\xBD");
    agent_event_clear(&ev);

    /* bytes that are not UTF-8 */
    static const char raw[] = "{\"type\":\"text\",\"part\":{\"text\":\"a\xFF\xC3(b\"}}";
    CHECK_INT_EQ(opencode_parse_event(raw, sizeof(raw) - 1, &ev), 0);
    CHECK_STR_EQ(ev.text, "a\xEF\xBF\xBD\xEF\xBF\xBD(b");
    CHECK_STR_EQ(ev.summary, "a\xEF\xBF\xBD\xEF\xBF\xBD(b");
    agent_event_clear(&ev);

    /* a repaired line must still be JSON */
    static const char bad[] = "{\"type\":\"text\xFF\"";
    CHECK_INT_EQ(opencode_parse_event(bad, sizeof(bad) - 1, &ev), -EINVAL);
    CHECK_INT_EQ(parse("{\"type\":\"text\",\"x\":\"\\ud800\"", &ev), -EINVAL);
}

TEST(opencode_invalid_lines)
{
    static const char *bad[] = {"",     "\n", "not json",   "[1,2]", "\"str\"",      "42",
                                "null", "{",  "{\"type\":", "{} {}", "{\"a\":1e400}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct agent_event ev;
        memset(&ev, 0x5A, sizeof(ev));
        CHECK_INT_EQ(parse(bad[i], &ev), -EINVAL);
        /* left cleared: nothing to free, nothing stale */
        CHECK(ev.summary == NULL && ev.text == NULL && ev.error == NULL);
        CHECK_INT_EQ(ev.type[0], 0);
        CHECK_INT_EQ(ev.kind, AGENT_EV_STEP_START);
    }
    struct agent_event ev;
    CHECK_INT_EQ(opencode_parse_event(NULL, 0, &ev), -EINVAL);
}

TEST(opencode_line_framing)
{
    struct agent_event ev;
    /* the trailing newline of a line, CRLF too */
    CHECK_INT_EQ(parse("{\"type\":\"step_start\"}\n", &ev), 0);
    CHECK_INT_EQ(ev.kind, AGENT_EV_STEP_START);
    agent_event_clear(&ev);
    CHECK_INT_EQ(parse("{\"type\":\"step_start\"}\r\n", &ev), 0);
    agent_event_clear(&ev);
    /* only len bytes are read: the next line in the buffer is not part of this one */
    static const char two[] = "{\"type\":\"text\",\"part\":{\"text\":\"one\"}}\n{\"type\":\"x\"}";
    CHECK_INT_EQ(opencode_parse_event(two, strchr(two, '\n') - two, &ev), 0);
    CHECK_STR_EQ(ev.text, "one");
    agent_event_clear(&ev);
    CHECK_INT_EQ(opencode_parse_event(two, 10, &ev), -EINVAL);
}

TEST(opencode_clear_is_idempotent)
{
    struct agent_event ev = {0};
    agent_event_clear(&ev);
    CHECK_INT_EQ(parse(text_line, &ev), 0);
    agent_event_clear(&ev);
    CHECK(ev.summary == NULL && ev.text == NULL);
    agent_event_clear(&ev);
}

/* --- the configuration OpenCode is started with --- */

static const struct proxy_llm launch_llms[] = {
    {"fakeco", "FAKECO_API_KEY", true, PROXY_WIRE_OPENAI_COMPATIBLE, "/v1"},
    {"anthropic", "ANTHROPIC_API_KEY", true, PROXY_WIRE_ANTHROPIC, "/v1"},
    {"router", "ROUTER_API_KEY", true, PROXY_WIRE_OPENAI, ""},
};

static json_t *config_of(const char *model, size_t nllms)
{
    struct agent_launch l = {.model = model,
                             .proxy_url = "http://127.0.0.1:8788/proxy",
                             .proxy_token = "secret-token",
                             .providers = launch_llms,
                             .nproviders = nllms};
    char *text = opencode_config(&l);
    CHECK(text != NULL);
    CHECK(!strstr(text ? text : "", "secret-token")); /* the token comes from the environment */
    json_t *cfg = json_loads(text ? text : "", 0, NULL);
    free(text);
    CHECK(json_is_object(cfg));
    return cfg;
}

static const char *str_at(const json_t *o, const char *a, const char *b, const char *c)
{
    o = json_object_get(o, a);
    if (b)
        o = json_object_get(o, b);
    if (c)
        o = json_object_get(o, c);
    return json_string_value(o) ? json_string_value(o) : "(none)";
}

TEST(opencode_config_from_the_providers)
{
    json_t *cfg = config_of("fakeco/vendor/model-1:free", 3);
    const json_t *prov = json_object_get(cfg, "provider");
    CHECK_INT_EQ(json_object_size(prov), 3);
    const json_t *f = json_object_get(prov, "fakeco"), *a = json_object_get(prov, "anthropic"),
                 *r = json_object_get(prov, "router");
    CHECK_STR_EQ(str_at(f, "npm", NULL, NULL), "@ai-sdk/openai-compatible");
    CHECK_STR_EQ(str_at(a, "npm", NULL, NULL), "@ai-sdk/anthropic");
    CHECK_STR_EQ(str_at(r, "npm", NULL, NULL), "@ai-sdk/openai");
    CHECK_STR_EQ(str_at(f, "options", "baseURL", NULL), "http://127.0.0.1:8788/proxy/fakeco/v1");
    CHECK_STR_EQ(str_at(a, "options", "baseURL", NULL), "http://127.0.0.1:8788/proxy/anthropic/v1");
    CHECK_STR_EQ(str_at(r, "options", "baseURL", NULL), "http://127.0.0.1:8788/proxy/router");
    CHECK_STR_EQ(str_at(f, "options", "apiKey", NULL), "{env:SANDBOX_MCP_PROXY_TOKEN}");
    CHECK_STR_EQ(str_at(a, "options", "apiKey", NULL), "{env:SANDBOX_MCP_PROXY_TOKEN}");
    /* the model's own provider lists the model (the part after the first slash), no other */
    const json_t *models = json_object_get(f, "models");
    CHECK_INT_EQ(json_object_size(models), 1);
    CHECK(json_is_object(json_object_get(models, "vendor/model-1:free")));
    CHECK(json_object_get(a, "models") == NULL);
    CHECK(json_object_get(r, "models") == NULL);
    /* only these providers, and everything allowed */
    const json_t *enabled = json_object_get(cfg, "enabled_providers");
    CHECK_INT_EQ(json_array_size(enabled), 3);
    CHECK_STR_EQ(json_string_value(json_array_get(enabled, 0)), "fakeco");
    CHECK_STR_EQ(str_at(cfg, "permission", "bash", NULL), "allow");
    CHECK_STR_EQ(str_at(cfg, "permission", "edit", NULL), "allow");
    CHECK_STR_EQ(str_at(cfg, "share", NULL, NULL), "disabled");
    CHECK(json_is_false(json_object_get(cfg, "autoupdate")));
    CHECK(json_is_false(json_object_get(cfg, "snapshot")));
    json_decref(cfg);
}

TEST(opencode_config_with_one_provider)
{
    json_t *cfg = config_of("anthropic/claude-sonnet-4-5", 2);
    const json_t *prov = json_object_get(cfg, "provider");
    CHECK_INT_EQ(json_object_size(prov), 2);
    CHECK(json_is_object(json_object_get(
        json_object_get(json_object_get(prov, "anthropic"), "models"), "claude-sonnet-4-5")));
    CHECK(json_object_get(json_object_get(prov, "fakeco"), "models") == NULL);
    json_decref(cfg);
    cfg = config_of("anthropic/claude-sonnet-4-5", 0);
    CHECK_INT_EQ(json_object_size(json_object_get(cfg, "provider")), 0);
    CHECK_INT_EQ(json_array_size(json_object_get(cfg, "enabled_providers")), 0);
    json_decref(cfg);
}

TEST(opencode_launch_keeps_the_token_out_of_argv)
{
    struct agent_launch l = {.model = "fakeco/m",
                             .session = "ses_1",
                             .proxy_url = "http://127.0.0.1:8788/proxy",
                             .proxy_token = "secret-token",
                             .program = "/opt/agents/opencode",
                             .providers = launch_llms,
                             .nproviders = 1};
    opencode_launch(&l);
    bool in_env = false;
    for (size_t i = 0; l.argv[i]; i++)
        CHECK(!strstr(l.argv[i], "secret-token"));
    for (size_t i = 0; l.env[i]; i++) {
        in_env |= strcmp(l.env[i], "SANDBOX_MCP_PROXY_TOKEN=secret-token") == 0;
        if (strncmp(l.env[i], "OPENCODE_CONFIG_CONTENT=", 24) == 0)
            CHECK_STR_CONTAINS(l.env[i], "\"fakeco\":{\"models\":{\"m\":{}}");
    }
    CHECK(in_env);
    CHECK_STR_EQ(l.argv[6], "fakeco/m");
    agent_launch_release(&l);
}

TEST_MAIN()

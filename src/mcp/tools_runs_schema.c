/* The JSON Schemas of the run tools (run_task, get_result, list_runs, cancel_run and the seed's
 * names for them), registered by tools_runs.c. */
#include "mcp/tools_runs.h"

#include "base/util.h"
#include "runs/runs.h"

#define TASK_MAX 50000

/* The JSON Schema text of the tools, one property a line (clang-format would scatter them). */
/* clang-format off */
#define NULLABLE(type) "{\"anyOf\":[{\"type\":\"" type "\"},{\"type\":\"null\"}]}"
#define OBJECT_OR_NULL "{\"anyOf\":[{\"type\":\"object\"},{\"type\":\"null\"}]"
#define STATUSES "\"queued\",\"running\",\"succeeded\",\"failed\",\"cancelled\""
#define STATUS_DESC                                                                                \
    "Only runs in this status: queued (waiting to start), running, succeeded, failed or "          \
    "cancelled"
#define RUN_ID_PROP                                                                                \
    "\"run_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"                            \
        "\"description\":\"The run_id run_task returned\"}"
#define SESSION_FILTER_PROP                                                                        \
    "\"session_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"                        \
        "\"description\":\"Only runs of this session (the session_id run_task returned)\"}"
#define WAIT_PROP                                                                                  \
    "\"wait_seconds\":{\"type\":\"number\",\"minimum\":0,\"maximum\":60,"                          \
        "\"description\":\"Hold the call until the run ends or this many seconds pass (default "   \
        "0: answer at once); 30 to 60 is the way to wait for a run\"}"
#define LIST_PROPS                                                                                 \
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100,"                               \
        "\"description\":\"Runs per page (default 10)\"},"                                         \
    "\"cursor\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":128,"                           \
        "\"description\":\"The next_cursor of the previous page, as it was\"}"

/* run_task's input schema; seed adds the seed's sessionId. */
char *tools_runs_task_schema(const struct tools_facts *f, bool seed)
{
    return xasprintf("{\"type\":\"object\",\"properties\":{"
        "\"task\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":%d,"
            "\"description\":\"What the coding agent should do, as you would tell a colleague: "
            "the goal, where to look, how to check the work\"},"
        "\"repository\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":2048,"
            "\"description\":\"Git repository to work in (an https URL), cloned into the "
            "session's workspace. Omit to work in an empty workspace, or in the session's\"},"
        "\"branch\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":200,"
            "\"description\":\"Branch to start from, and the pull request's base (default: the "
            "repository's default branch)\"},"
        "\"pull_request\":{\"type\":\"string\",\"enum\":[\"none\",\"draft\",\"ready\"],"
            "\"description\":\"When the run ends with commits, push them to the session's own "
            "branch and open a pull request (draft or ready for review) against the base, or "
            "comment on the session's pull request. Default: draft for a GitHub repository your "
            "credential serves, else none\"},"
        "\"fix_ci\":{\"type\":\"boolean\","
            "\"description\":\"When the pull request's checks fail on the branch the server "
            "pushed, queue runs in this session that get the failing jobs' logs and make them "
            "pass (up to the server's CI_FIX_ATTEMPTS per push), until they pass or someone else "
            "pushes. Stays on for the session's later runs until set false\"},"
        "\"plan_first\":{\"type\":\"boolean\","
            "\"description\":\"The agent first writes a plan without changing anything, and "
            "the run waits until the plan is approved (answer_run, or the run's page), "
            "possibly with changes; a plan not approved in time delivers nothing\"},"
        "\"question_timeout_minutes\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1440,"
            "\"description\":\"How long a question of the agent's (or its plan) waits for an "
            "answer before the agent goes on without one (default: the server's, 30)\"},"
        "\"session_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
            "\"description\":\"Continue an earlier run's session: the same sandbox, workspace "
            "and agent conversation. Omit to start a new session\"},"
        "%s"
        "\"model\":{\"type\":\"string\",\"minLength\":3,\"maxLength\":120,"
            "\"description\":\"provider/model (default %s); the provider must be one this "
            "server has a key for\"},"
        "\"title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":100,"
            "\"description\":\"A short name for the run, shown in lists and on its page\"},"
        "\"agent\":{\"type\":\"string\",\"enum\":[\"opencode\",\"claude-code\",\"codex\"],"
            "\"description\":\"The coding agent (default %s): opencode (any provider), "
            "claude-code (Anthropic-compatible providers) or codex (OpenAI's Responses API). A "
            "session's later run keeps its agent unless another is named, which starts a new "
            "conversation in the same workspace\"},"
        "\"attempts\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":4,"
            "\"description\":\"Run the task this many times at once, each attempt in a session "
            "of its own from the same repository, to compare them (default 1). Nothing is "
            "pushed until one is picked with deliver_run\"},"
        "\"variants\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":4,\"items\":{"
            "\"type\":\"object\",\"properties\":{"
                "\"agent\":{\"type\":\"string\",\"enum\":[\"opencode\",\"claude-code\","
                    "\"codex\"]},"
                "\"model\":{\"type\":\"string\",\"minLength\":3,\"maxLength\":120}},"
            "\"additionalProperties\":false},"
            "\"description\":\"The agents and models to spread the attempts over, in turn "
            "(default: agent and model for every attempt); without attempts, one attempt "
            "each\"},"
        "\"timeout_minutes\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":%llu,"
            "\"description\":\"Stop the agent after this many minutes (default %llu)\"},"
        "\"setup\":{\"type\":\"string\",\"maxLength\":%d,"
            "\"description\":\"A shell script run in the workspace (by /bin/sh) before the agent "
            "starts, e.g. installing dependencies. Default: the repository's own, for a new "
            "workspace: .sandbox-mcp/setup.sh, else its devcontainer.json's creation commands. "
            "A failed setup does not stop the run: the agent is told\"},"
        "\"network\":{\"type\":\"string\",\"enum\":[\"none\",\"allowlist\",\"public\"],"
            "\"description\":\"What the agent's sandbox may reach: nothing, the operator's allow "
            "list (package registries and git hosts), or any public address. Default: the most "
            "this server gives you (here at most %s); asking for more is an error\"}},"
        "\"required\":[\"task\"],\"additionalProperties\":false}",
        TASK_MAX,
        seed ? "\"sessionId\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
                   "\"description\":\"The same as session_id\"},"
             : "",
        f->default_model, f->default_agent ? f->default_agent : RUNS_DEFAULT_AGENT,
        (unsigned long long)(f->run_timeout_max_ms / 60000),
        (unsigned long long)(f->run_timeout_ms / 60000), RUNS_SETUP_MAX, f->network);
}

const char tools_runs_task_output[] = "{\"type\":\"object\",\"properties\":{"
    "\"run_id\":{\"type\":\"string\",\"description\":\"Pass it to get_result\"},"
    "\"session_id\":{\"type\":\"string\",\"description\":\"Pass it to run_task to continue, or "
        "to the container_* tools to look at the workspace\"},"
    "\"status\":{\"type\":\"string\",\"enum\":[" STATUSES "]},"
    "\"web_url\":{\"type\":\"string\",\"description\":\"The run's live page, for a person\"},"
    "\"session_web_url\":{\"type\":\"string\"},"
    "\"group_id\":{\"type\":\"string\",\"description\":\"With attempts: the group; run_id "
        "is its first attempt\"},"
    "\"group_web_url\":{\"type\":\"string\",\"description\":\"The attempts side by side, "
        "for a person\"},"
    "\"attempts\":{\"type\":\"array\",\"items\":{\"type\":\"object\"},"
        "\"description\":\"Every attempt: run_id, session_id, agent, model, status, web_url\"}},"
    "\"required\":[\"run_id\",\"session_id\",\"status\",\"web_url\"]}";

const char tools_runs_result_schema[] = "{\"type\":\"object\",\"properties\":{"
    RUN_ID_PROP ","
    "\"group_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
        "\"description\":\"Instead of run_id: a group of attempts, answered as its first "
        "attempt (whose group holds them all)\"},"
    WAIT_PROP
    "},\"anyOf\":[{\"required\":[\"run_id\"]},{\"required\":[\"group_id\"]}],"
    "\"additionalProperties\":false}";

const char tools_runs_result_seed_schema[] = "{\"type\":\"object\",\"properties\":{"
    RUN_ID_PROP ","
    "\"runId\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
        "\"description\":\"The same as run_id\"},"
    WAIT_PROP
    "},\"anyOf\":[{\"required\":[\"run_id\"]},{\"required\":[\"runId\"]}],"
    "\"additionalProperties\":false}";

const char tools_runs_result_output[] = "{\"type\":\"object\",\"properties\":{"
    "\"run_id\":{\"type\":\"string\"},"
    "\"session_id\":{\"type\":\"string\"},"
    "\"status\":{\"type\":\"string\",\"enum\":[" STATUSES "]},"
    "\"status_reason\":" NULLABLE("string") ","
    "\"task\":{\"type\":\"string\"},"
    "\"title\":" NULLABLE("string") ","
    "\"model\":{\"type\":\"string\"},"
    "\"agent\":{\"type\":\"string\"},"
    "\"repository\":" NULLABLE("string") ","
    "\"branch\":" NULLABLE("string") ","
    "\"created_at\":" NULLABLE("string") ","
    "\"started_at\":" NULLABLE("string") ","
    "\"finished_at\":" NULLABLE("string") ","
    "\"result\":{\"type\":\"object\",\"properties\":{"
            "\"success\":" NULLABLE("boolean") ","
            "\"summary\":" NULLABLE("string") ","
            "\"error\":" NULLABLE("string") "},"
        "\"description\":\"success (null while the run is under way), the agent's summary, the "
        "error\"},"
    "\"changes\":" OBJECT_OR_NULL ",\"description\":\"files_changed, insertions, deletions, "
        "files, commits (sha and message), branch\"},"
    "\"usage\":{\"type\":\"object\",\"properties\":{"
        "\"input_tokens\":{\"type\":\"integer\"},"
        "\"output_tokens\":{\"type\":\"integer\"},"
        "\"cost\":{\"type\":\"number\"}}},"
    "\"phase\":{\"type\":\"object\",\"properties\":{"
            "\"name\":{\"type\":\"string\",\"enum\":[\"preparing\",\"cloning\","
                "\"setting up\",\"agent\",\"waiting\","
                "\"finishing\",\"delivering\"," STATUSES "]},"
            "\"step\":{\"type\":\"integer\",\"description\":\"The agent's steps so far\"},"
            "\"detail\":" NULLABLE("string") ","
            "\"text\":{\"type\":\"string\"},"
            "\"since\":" NULLABLE("string") "},"
        "\"required\":[\"name\",\"step\",\"text\"],"
        "\"description\":\"What the run is doing now, or how it ended; text is one line to pass "
        "on, e.g. 'cloning https://github.com/o/r', 'step 3: ran `npm test`', 'collecting the "
        "changes', 'succeeded after 4 steps', 'failed while cloning'\"},"
    "\"elapsed_seconds\":{\"type\":\"integer\",\"description\":\"How long the run has been "
        "going (waiting, while queued), or how long it ran once it ended\"},"
    "\"recent_events\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
            "\"seq\":{\"type\":\"integer\"},"
            "\"time\":{\"type\":\"string\"},"
            "\"type\":{\"type\":\"string\"},"
            "\"summary\":{\"type\":\"string\"}},"
            "\"required\":[\"seq\",\"time\",\"type\",\"summary\"]},"
        "\"description\":\"Its last 5 events that tell of its work (tool calls, the agent's "
        "messages, errors), oldest first\"},"
    "\"event_count\":{\"type\":\"integer\"},"
    "\"latest_event\":" OBJECT_OR_NULL "},"
    "\"transitions\":{\"type\":\"array\",\"items\":{\"type\":\"object\"},"
        "\"description\":\"Every status change with its time and reason\"},"
    "\"web_url\":{\"type\":\"string\",\"description\":\"The run's live page, for a person\"},"
    "\"session_web_url\":{\"type\":\"string\"},"
    "\"exit_code\":" NULLABLE("integer") ","
    "\"network\":" OBJECT_OR_NULL ",\"description\":\"The mode, the hosts the sandbox reached "
        "and the attempts refused, with the reason\"},"
    "\"pull_request\":" OBJECT_OR_NULL ",\"description\":\"url, number, state, draft\"},"
    "\"delivery\":" OBJECT_OR_NULL ",\"description\":\"status (delivered, skipped or failed), "
        "reason, branch, commits\"},"
    "\"setup\":" OBJECT_OR_NULL ",\"description\":\"The setup run before the agent: source, "
        "exit_status, duration_ms, timed_out, failed (the agent started anyway, told of it)\"},"
    "\"pull_request_mode\":{\"type\":\"string\"},"
    "\"previews\":{\"type\":\"array\",\"items\":{\"type\":\"object\"},\"description\":"
        "\"Ports its agent opened for the person to look at (open_preview): id, url, port, "
        "expires_at\"},"
    "\"evidence\":{\"type\":\"array\",\"items\":{\"type\":\"object\"},\"description\":"
        "\"Images its agent kept to show its work (add_evidence): n, mime, bytes, caption, "
        "path on the run's page; the newest that fit come as image content too\"},"
    "\"question\":" OBJECT_OR_NULL ",\"description\":\"What its agent asks and waits for (phase "
        "waiting): id, kind (question, or plan to approve), text, choices, asked_at, answer_by "
        "(when it goes on without), how to answer\"},"
    "\"tests\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],\"description\":"
        "\"How the last test command the agent ran ended: 'passed: npm test', 'failed: npm test "
        "(exit 1)'\"},"
    "\"group\":" OBJECT_OR_NULL ",\"description\":\"One of several attempts: group_id, web_url, "
        "picked (the attempt delivered, if any), delivery_run, and every attempt with its "
        "status, summary, files_changed, insertions, deletions, commits, tests, cost and "
        "web_url\"},"
    "\"delivers\":{\"type\":\"string\",\"description\":\"The attempt this run delivers\"}},"
    "\"required\":[\"run_id\",\"session_id\",\"status\",\"web_url\"]}";

const char tools_runs_list_schema[] = "{\"type\":\"object\",\"properties\":{"
    SESSION_FILTER_PROP ","
    "\"status\":{\"type\":\"string\",\"enum\":[" STATUSES "],"
        "\"description\":\"" STATUS_DESC "\"},"
    LIST_PROPS
    "},\"additionalProperties\":false}";

const char tools_runs_list_seed_schema[] = "{\"type\":\"object\",\"properties\":{"
    SESSION_FILTER_PROP ","
    "\"sessionId\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
        "\"description\":\"The same as session_id\"},"
    "\"status\":{\"type\":\"string\",\"enum\":[" STATUSES ",\"started\",\"completed\"],"
        "\"description\":\"" STATUS_DESC "; started is queued and completed is succeeded\"},"
    "\"before\":{\"type\":\"number\",\"exclusiveMinimum\":0,"
        "\"description\":\"Only runs created before this Unix time (seconds or milliseconds)\"},"
    LIST_PROPS
    "},\"additionalProperties\":false}";

const char tools_runs_list_output[] = "{\"type\":\"object\",\"properties\":{"
    "\"runs\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
            "\"run_id\":{\"type\":\"string\"},"
            "\"session_id\":{\"type\":\"string\"},"
            "\"status\":{\"type\":\"string\",\"enum\":[" STATUSES "]},"
            "\"title\":" NULLABLE("string") ","
            "\"task_preview\":{\"type\":\"string\"},"
            "\"model\":{\"type\":\"string\"},"
            "\"created_at\":" NULLABLE("string") ","
            "\"finished_at\":" NULLABLE("string") ","
            "\"success\":" NULLABLE("boolean") ","
            "\"web_url\":{\"type\":\"string\"},"
            "\"agent\":{\"type\":\"string\"},"
            "\"group_id\":{\"type\":\"string\"},"
            "\"pull_request\":" OBJECT_OR_NULL "}},"
            "\"required\":[\"run_id\",\"session_id\",\"status\"]},"
        "\"description\":\"Newest first\"},"
    "\"has_more\":{\"type\":\"boolean\"},"
    "\"next_cursor\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],"
        "\"description\":\"Pass it as cursor for the next page (null without has_more)\"}},"
    "\"required\":[\"runs\",\"has_more\"]}";

const char tools_runs_cancel_schema[] = "{\"type\":\"object\",\"properties\":{"
    RUN_ID_PROP
    "},\"required\":[\"run_id\"],\"additionalProperties\":false}";

const char tools_runs_cancel_output[] = "{\"type\":\"object\",\"properties\":{"
    "\"run_id\":{\"type\":\"string\"},"
    "\"status\":{\"type\":\"string\",\"enum\":[" STATUSES "],"
        "\"description\":\"cancelled, or the status the run had already ended in\"},"
    "\"already_ended\":{\"type\":\"boolean\","
        "\"description\":\"The run had ended before this call: nothing was stopped\"}},"
    "\"required\":[\"run_id\",\"status\"]}";
/* clang-format on */

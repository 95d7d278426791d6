/* Answers to a run's questions from the MCP client (runs/ask.c holds the agent's side): the
 * answer_run tool; get_result asking the client's user for the answer with an input-required
 * result (the stateless revision's elicitation, answered on the retry); and the run's task
 * waiting for input (input_required, its inputRequests keyed by the question's id), answered
 * with tasks/update. Every path ends in runs_answer, which keeps the first answer. */
#include "mcp/tools_runs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/util.h"

#define ELICIT "elicitation/create"

const char tools_runs_answer_desc[] =
    "Answer the question a run's agent is waiting on, or approve its plan (run_task "
    "plan_first). get_result shows what it asks under question (kind question or plan). For a "
    "question, answer is your user's answer; for a plan, leave answer out to approve it as "
    "written, or give the changes to make as answer to approve it with them. Ask your user: "
    "never answer in their place. The run goes on with the answer at once.";

const char tools_runs_answer_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"run_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
    "\"description\":\"The run whose agent asks\"},"
    "\"answer\":{\"type\":\"string\",\"maxLength\":16384,"
    "\"description\":\"The answer; for a plan, the changes to approve it with (none: approve "
    "as written)\"},"
    "\"question_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
    "\"description\":\"The question's id as get_result showed it: the answer is refused if the "
    "run asks something else by now\"}},"
    "\"required\":[\"run_id\"],\"additionalProperties\":false}";

const char tools_runs_answer_output[] = "{\"type\":\"object\",\"properties\":{"
                                        "\"run_id\":{\"type\":\"string\"},"
                                        "\"answered\":{\"type\":\"boolean\"}},"
                                        "\"required\":[\"run_id\",\"answered\"]}";

void tools_runs_answer(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_runs *t = ctx;
    if (!tools_runs_available(t, call))
        return;
    const struct mcp_principal *p = mcp_call_principal(call);
    const char *run_id = json_string_value(json_object_get(args, "run_id"));
    const char *answer = json_string_value(json_object_get(args, "answer"));
    const char *qid = json_string_value(json_object_get(args, "question_id"));
    struct err err = {0};
    if (runs_answer(t->runs, p->user_id, run_id, qid, answer ? answer : "", "tool", &err) < 0) {
        mcp_call_tool_err(call, &err);
        return;
    }
    mcp_call_tool_result(call, tools_runs_text("Answered: run %s goes on with it.", run_id),
                         json_pack("{s:s, s:b}", "run_id", run_id, "answered", 1), false);
}

/* The elicitation that asks for question q's answer. */
static json_t *elicit_request(const json_t *q)
{
    const char *kind = json_string_value(json_object_get(q, "kind"));
    json_t *choices = json_object_get(q, "choices");
    _cleanup_free_ char *cj = json_array_size(choices) ? json_dumps(choices, JSON_COMPACT) : NULL;
    _cleanup_free_ char *msg =
        runs_question_message(kind, json_string_value(json_object_get(q, "text")), cj);
    return mcp_input_elicit(msg, runs_question_elicit_schema(kind));
}

bool tools_runs_ask_client(struct tools_runs *t, struct mcp_call *call, const char *run_id)
{
    if (!mcp_call_can_ask(call, ELICIT))
        return false;
    json_t *q = runs_question_json(t->st, run_id);
    if (!q)
        return false;
    const char *qid = json_string_value(json_object_get(q, "id"));
    const char *kind = json_string_value(json_object_get(q, "kind"));
    const json_t *resp = mcp_call_input_response(call, qid, ELICIT);
    const json_t *state = mcp_call_input_state(call);
    if (!resp) {
        /* ask, the state naming the run and question the answer is for */
        mcp_call_input_required(call, json_pack("{s:o}", qid, elicit_request(q)),
                                json_pack("{s:s, s:s}", "run", run_id, "question", qid));
        json_decref(q);
        return true;
    }
    /* the retry: an answer to the question asked, for this run (else it is ignored and the run
     * is described, its question still waiting) */
    json_t *schema = runs_question_elicit_schema(kind);
    bool declined = false;
    const json_t *content = mcp_input_accepted(resp, schema, &declined);
    const char *for_run = json_string_value(json_object_get(state, "run"));
    const char *for_q = json_string_value(json_object_get(state, "question"));
    if (content && for_run && strcmp(for_run, run_id) == 0 && for_q && strcmp(for_q, qid) == 0) {
        struct err err = {0};
        const struct mcp_principal *p = mcp_call_principal(call);
        runs_answer(t->runs, p->user_id, run_id, qid, runs_question_elicit_answer(kind, content),
                    "mrtr", &err);
    }
    json_decref(schema);
    json_decref(q);
    return false;
}

void tools_runs_task_input(struct tools_runs *t, const char *run_id, struct mcp_task *out)
{
    json_t *q = runs_question_json(t->st, run_id);
    if (!q)
        return;
    out->status = MCP_TASK_INPUT_REQUIRED;
    out->input_requests =
        json_pack("{s:o}", json_string_value(json_object_get(q, "id")), elicit_request(q));
    json_decref(q);
}

int tools_runs_task_update(void *ctx, const char *user_id, const char *id, const json_t *responses,
                           struct err *err)
{
    struct tools_runs *t = ctx;
    struct store_run r = {0};
    int rc = store_run_get(t->st, user_id, id, &r, err);
    store_run_release(&r);
    if (rc < 0)
        return rc;
    json_t *q = runs_question_json(t->st, id);
    if (!q)
        return err_set(err, -EBUSY, "run '%s' is not waiting for input", id);
    const char *qid = json_string_value(json_object_get(q, "id"));
    const char *kind = json_string_value(json_object_get(q, "kind"));
    const json_t *resp = json_object_get(responses, qid);
    rc = 0;
    if (resp) {
        json_t *schema = runs_question_elicit_schema(kind);
        bool declined = false;
        const json_t *content = mcp_input_accepted(resp, schema, &declined);
        if (content)
            rc = runs_answer(t->runs, user_id, id, qid, runs_question_elicit_answer(kind, content),
                             "tasks", err);
        else if (!declined)
            rc = err_set(err, -EINVAL,
                         "inputResponses[\"%s\"] must accept with content of the requested "
                         "schema",
                         qid);
        json_decref(schema);
    }
    json_decref(q);
    return rc;
}

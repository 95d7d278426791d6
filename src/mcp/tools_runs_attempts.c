/* Attempts as the run tools offer them: run_task with `attempts` (and `variants`, the agents and
 * models to spread them over) starts a group of runs and answers with all of them; deliver_run
 * delivers the attempt the user picks; get_result of any attempt (or of the group) shows the
 * whole group. The engine's side is runs_submit_attempts and runs_deliver_attempt. */
#include "mcp/tools_runs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/util.h"
#include "mcp/jsonrpc.h"
#include "runs/runs.h"
#include "store/store.h"

/* clang-format off */
const char tools_runs_deliver_desc[] =
    "Deliver the attempt you (or the user) picked of a run_task with attempts: its commits are "
    "pushed to its session's branch and its pull request opened, as a run on its own does at "
    "its end. Only one attempt of a group is delivered; the others' sessions stay, to be "
    "continued with run_task and their session_id. Answers with the run that delivers it: "
    "follow it with get_result.";
const char tools_runs_deliver_schema[] = "{\"type\":\"object\",\"properties\":{"
    "\"run_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
        "\"description\":\"The attempt to deliver (one of the run_ids run_task gave)\"}},"
    "\"required\":[\"run_id\"],\"additionalProperties\":false}";
const char tools_runs_deliver_output[] = "{\"type\":\"object\",\"properties\":{"
    "\"run_id\":{\"type\":\"string\",\"description\":\"The run that delivers it: pass it to "
        "get_result\"},"
    "\"attempt\":{\"type\":\"string\"},"
    "\"group_id\":{\"type\":\"string\"},"
    "\"web_url\":{\"type\":\"string\"}},"
    "\"required\":[\"run_id\",\"attempt\"]}";
/* clang-format on */

static const char *str_of(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s && *s ? s : NULL;
}

void tools_runs_attempts(struct tools_runs *t, struct mcp_call *call, const struct runs_submit *s,
                         const json_t *args)
{
    const json_t *variants = json_object_get(args, "variants");
    struct runs_variant v[RUNS_ATTEMPTS_MAX] = {0};
    size_t nv = json_array_size(variants);
    if (nv > RUNS_ATTEMPTS_MAX) {
        mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                           "variants: at most %d agents and models to spread attempts over",
                           RUNS_ATTEMPTS_MAX);
        return;
    }
    for (size_t i = 0; i < nv; i++) {
        v[i].agent = str_of(json_array_get(variants, i), "agent");
        v[i].model = str_of(json_array_get(variants, i), "model");
    }
    const json_t *a = json_object_get(args, "attempts");
    unsigned n = a ? (unsigned)json_integer_value(a) : (unsigned)(nv ? nv : 1);
    char group[64], runs[RUNS_ATTEMPTS_MAX][64], sessions[RUNS_ATTEMPTS_MAX][64];
    struct err err = {0};
    if (runs_submit_attempts(t->runs, s, n, v, nv, group, runs, sessions, &err) < 0) {
        mcp_call_tool_err(call, &err);
        return;
    }
    json_t *group_json = runs_describe_group(t->runs, s->user_id, group, &err);
    const char *group_url = json_string_value(json_object_get(group_json, "web_url"));
    struct buf text;
    buf_init(&text, 0);
    buf_printf(&text,
               "%u attempts queued in group %s, each in a session of its own; nothing is pushed "
               "until one is picked with deliver_run. Compare them at %s, or with get_result of "
               "any of them:",
               n, group, group_url ? group_url : "");
    json_t *list = json_array();
    size_t i;
    json_t *att;
    json_array_foreach(json_object_get(group_json, "attempts"), i, att)
    {
        buf_printf(&text, "\n- %s (%s, %s), session %s", str_of(att, "run_id"),
                   str_of(att, "agent"), str_of(att, "model"), str_of(att, "session_id"));
        json_array_append_new(list, json_pack("{s:O, s:O, s:O, s:O, s:s, s:O}", "run_id",
                                              json_object_get(att, "run_id"), "session_id",
                                              json_object_get(att, "session_id"), "agent",
                                              json_object_get(att, "agent"), "model",
                                              json_object_get(att, "model"), "status", "queued",
                                              "web_url", json_object_get(att, "web_url")));
    }
    if (mcp_call_task_requested(call)) {
        /* a task per attempt: the first is this call's, the others are in tasks/list */
        struct mcp_task task = {0};
        if (tools_runs_task_get(t, s->user_id, runs[0], false, &task, &err) < 0)
            mcp_call_error(call, JSONRPC_INTERNAL_ERROR, err.msg, NULL);
        else
            mcp_call_task_created(call, &task, text.data);
        mcp_task_release(&task);
        json_decref(list);
    } else {
        const json_t *first = json_array_get(list, 0);
        json_t *sc = json_pack("{s:O, s:O, s:s, s:O, s:s, s:s, s:o}", "run_id",
                               json_object_get(first, "run_id"), "session_id",
                               json_object_get(first, "session_id"), "status", "queued", "web_url",
                               json_object_get(first, "web_url"), "group_id", group,
                               "group_web_url", group_url ? group_url : "", "attempts", list);
        mcp_call_tool_result(call, tools_runs_text("%s", text.data), sc, false);
    }
    json_decref(group_json);
    buf_release(&text);
}

void tools_runs_deliver(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_runs *t = ctx;
    if (!tools_runs_available(t, call))
        return;
    const char *id = json_string_value(json_object_get(args, "run_id"));
    const struct mcp_principal *p = mcp_call_principal(call);
    char delivery[64] = "";
    struct err err = {0};
    int rc = runs_deliver_attempt(t->runs, p->user_id, id, delivery, &err);
    if (rc < 0) {
        mcp_call_tool_fail(
            call, rc == -EALREADY ? MCP_TOOL_ALREADY_EXISTS : mcp_tool_error_from_errno(rc), "%s",
            err.msg);
        return;
    }
    _cleanup_(store_run_release) struct store_run r = {0};
    store_run_get(t->st, p->user_id, delivery, &r, &err);
    char url[512];
    runs_web_url(t->runs, false, delivery, url, sizeof(url));
    json_t *sc = json_pack("{s:s, s:s, s:s, s:s}", "run_id", delivery, "attempt", id, "group_id",
                           r.group_id, "web_url", url);
    mcp_call_tool_result(call,
                         tools_runs_text("Attempt %s is being delivered by run %s: follow it with "
                                         "get_result, or at %s",
                                         id, delivery, url),
                         sc, false);
}

struct first {
    char id[64];
};

static void on_member(const struct store_run *r, void *ctx)
{
    struct first *f = ctx;
    if (!f->id[0] && !r->delivers[0])
        snprintf(f->id, sizeof(f->id), "%s", r->id);
}

int tools_runs_group_first(struct tools_runs *t, const char *user_id, const char *group,
                           char first[64], struct err *err)
{
    struct first f = {0};
    int rc = store_group_runs(t->st, user_id, group, on_member, &f, err);
    if (rc < 0)
        return rc;
    snprintf(first, 64, "%s", f.id);
    return 0;
}

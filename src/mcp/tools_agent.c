/* The tools the server offers the coding agents in its sandboxes (POST /agent/mcp, each request
 * with the run's proxy token): ask_user, a question to the person who gave the run its task,
 * and submit_plan, a plan for them to approve. Each call is held until the answer comes
 * (runs/ask.c), which may take hours; a client that asked for progress gets a notification
 * every KEEPALIVE_MS meanwhile, which resets the request timeouts of the MCP clients that allow
 * it. The agents' configurations give these calls a day's timeout (runs/<agent>.c). */
#include "mcp/tools.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/loop.h"
#include "base/util.h"
#include "mcp/mcp.h"
#include "preview/preview.h"
#include "runs/runs.h"

#define KEEPALIVE_MS 20000

struct agent_tools {
    struct runs *runs;
    struct previews *previews; /* NULL: open_preview answers unavailable */
};

struct held_ask {
    struct runs *runs;
    struct mcp_call *call;
    void *handle; /* runs_ask's, NULL until it returned one */
    struct loop_timer keepalive;
    double waited; /* progress told so far */
};

static void held_free(struct held_ask *h)
{
    loop_timer_stop(&h->keepalive);
    free(h);
}

static void on_keepalive(struct loop_timer *t)
{
    struct held_ask *h = container_of(t, struct held_ask, keepalive);
    h->waited += 1;
    mcp_call_progress(h->call, h->waited, -1, "waiting for the person's answer");
    loop_timer_start(&h->keepalive, KEEPALIVE_MS, on_keepalive);
}

static void on_answer(void *ctx, const char *reply, const struct err *err)
{
    struct held_ask *h = ctx;
    if (reply)
        mcp_call_tool_result(h->call, json_pack("[{s:s, s:s}]", "type", "text", "text", reply),
                             NULL, false);
    else
        mcp_call_tool_err(h->call, err);
    held_free(h);
}

/* The agent's call went away (its client gave up, the agent was stopped): the question stays, for
 * the same call again to wait on. */
static void on_cancel(struct mcp_call *call, void *ctx)
{
    struct held_ask *h = ctx;
    runs_ask_cancel(h->runs, h->handle);
    mcp_call_tool_fail(call, MCP_TOOL_CANCELLED, "the call was cancelled; the question waits");
    held_free(h);
}

static void ask(struct mcp_call *call, struct runs *runs, const char *kind, const char *text,
                const json_t *choices)
{
    const struct mcp_principal *who = mcp_call_principal(call);
    if (!who->acting_for[0]) {
        mcp_call_tool_fail(call, MCP_TOOL_UNAVAILABLE,
                           "none of this sandbox's runs is working now: there is nobody to ask");
        return;
    }
    struct held_ask *h = xcalloc(1, sizeof(*h));
    h->runs = runs;
    h->call = call;
    struct runs_ask a = {
        .user_id = who->user_id,
        .run_id = who->acting_for,
        .kind = kind,
        .text = text,
        .choices = choices,
    };
    void *handle = runs_ask(runs, &a, on_answer, h);
    if (!handle)
        return; /* answered already: h is gone */
    h->handle = handle;
    mcp_call_on_cancel(call, on_cancel, h);
    if (mcp_call_wants_progress(call))
        loop_timer_start(&h->keepalive, KEEPALIVE_MS, on_keepalive);
}

static void t_ask_user(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct agent_tools *at = ctx;
    const char *q = json_string_value(json_object_get(args, "question"));
    const json_t *choices = json_object_get(args, "choices");
    if (strlen(q) > RUNS_QUESTION_MAX) {
        mcp_call_tool_fail(call, MCP_TOOL_TOO_LARGE, "the question is longer than %d bytes",
                           RUNS_QUESTION_MAX);
        return;
    }
    size_t i;
    const json_t *c;
    json_array_foreach(choices, i, c)
    {
        if (strlen(json_string_value(c)) > RUNS_CHOICE_MAX) {
            mcp_call_tool_fail(call, MCP_TOOL_TOO_LARGE, "choice %zu is longer than %d bytes",
                               i + 1, RUNS_CHOICE_MAX);
            return;
        }
    }
    ask(call, at->runs, RUNS_ASK_QUESTION, q, choices);
}

static void t_submit_plan(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct agent_tools *at = ctx;
    const char *plan = json_string_value(json_object_get(args, "plan"));
    if (strlen(plan) > RUNS_PLAN_MAX) {
        mcp_call_tool_fail(call, MCP_TOOL_TOO_LARGE, "the plan is longer than %d bytes",
                           RUNS_PLAN_MAX);
        return;
    }
    ask(call, at->runs, RUNS_ASK_PLAN, plan, NULL);
}

/* open_preview: a URL for a port the agent's app serves, for the person to look at; noted in
 * the run's timeline, shown on its page and by get_result. */
static void t_open_preview(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct agent_tools *at = ctx;
    const struct mcp_principal *who = mcp_call_principal(call);
    char sbx[64], session[64];
    if (!at->previews) {
        mcp_call_tool_fail(call, MCP_TOOL_UNAVAILABLE, "previews are not available here");
        return;
    }
    if (!who->acting_for[0] ||
        runs_run_sandbox(at->runs, who->user_id, who->acting_for, sbx, session) < 0) {
        mcp_call_tool_fail(call, MCP_TOOL_UNAVAILABLE,
                           "none of this sandbox's runs is working now");
        return;
    }
    unsigned port = (unsigned)json_integer_value(json_object_get(args, "port"));
    const char *what = json_string_value(json_object_get(args, "description"));
    struct err err = {0};
    json_t *p =
        previews_open(at->previews, who->user_id, session, sbx, port, 0, who->acting_for, &err);
    if (!p) {
        mcp_call_tool_err(call, &err);
        return;
    }
    const char *url = json_string_value(json_object_get(p, "url"));
    char line[400];
    snprintf(line, sizeof(line), "Preview of port %u%s%.200s", port, what ? ": " : "",
             what ? what : "");
    json_t *raw = json_deep_copy(p);
    if (what)
        json_object_set_new(raw, "description", json_string(what));
    runs_note(at->runs, who->acting_for, "preview", line, raw);
    char *text = xasprintf("Port %u is at %s until %s; the person sees it on the run's page. Keep "
                           "the app running for them to look at.",
                           port, url, json_string_value(json_object_get(p, "expires_at")));
    mcp_call_tool_result(call, json_pack("[{s:s, s:s}]", "type", "text", "text", text), p, false);
    free(text);
}

/* add_evidence: an image of the agent's (a screenshot) kept on the run, its page and get_result */
static void on_evidence(void *ctx, json_t *item, const struct err *err)
{
    struct mcp_call *call = ctx;
    if (!item) {
        mcp_call_tool_err(call, err);
        return;
    }
    char *text = xasprintf("Kept as evidence %lld: the person sees it on the run's page and with "
                           "its result.",
                           (long long)json_integer_value(json_object_get(item, "n")));
    mcp_call_tool_result(call, json_pack("[{s:s, s:s}]", "type", "text", "text", text), item,
                         false);
    free(text);
}

static void t_add_evidence(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct agent_tools *at = ctx;
    const struct mcp_principal *who = mcp_call_principal(call);
    if (!who->acting_for[0]) {
        mcp_call_tool_fail(call, MCP_TOOL_UNAVAILABLE,
                           "none of this sandbox's runs is working now");
        return;
    }
    struct err err = {0};
    if (runs_add_evidence(at->runs, who->user_id, who->acting_for,
                          json_string_value(json_object_get(args, "path")),
                          json_string_value(json_object_get(args, "caption")), on_evidence, call,
                          &err) < 0)
        mcp_call_tool_err(call, &err);
}

static const char evidence_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,"
    "\"description\":\"The image: a PNG, JPEG, GIF or WebP of at most 512 KiB (relative paths "
    "are under /workspace)\"},"
    "\"caption\":{\"type\":\"string\",\"maxLength\":200,"
    "\"description\":\"What it shows, in a few words\"}},"
    "\"required\":[\"path\"],\"additionalProperties\":false}";

static const char preview_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535,"
    "\"description\":\"The port your app listens on (0.0.0.0 or 127.0.0.1)\"},"
    "\"description\":{\"type\":\"string\",\"maxLength\":200,"
    "\"description\":\"What it shows, in a few words\"}},"
    "\"required\":[\"port\"],\"additionalProperties\":false}";

/* the schemas' numbers are the caps of runs.h */
_Static_assert(RUNS_QUESTION_MAX == 4096 && RUNS_CHOICES_MAX == 10 && RUNS_CHOICE_MAX == 200 &&
                   RUNS_PLAN_MAX == 32768,
               "the tools' schemas name the caps of runs.h");
static const char ask_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"question\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,"
    "\"description\":\"The question, with what they need to know to answer it\"},"
    "\"choices\":{\"type\":\"array\",\"maxItems\":10,\"items\":{\"type\":\"string\","
    "\"minLength\":1,\"maxLength\":200},"
    "\"description\":\"Answers to choose from (they may still answer otherwise)\"}},"
    "\"required\":[\"question\"],\"additionalProperties\":false}";
static const char plan_schema[] =
    "{\"type\":\"object\",\"properties\":{\"plan\":{\"type\":\"string\",\"minLength\":1,"
    "\"maxLength\":32768,\"description\":\"The plan, in Markdown: what you will change and "
    "how you will check it\"}},\"required\":[\"plan\"],\"additionalProperties\":false}";

void tools_agent_register(struct mcp_server *srv, struct runs *runs, struct previews *previews)
{
    static struct agent_tools at;
    at = (struct agent_tools){runs, previews};
    static const struct mcp_tool_def tools[] = {
        {"ask_user", "Ask the person",
         "Ask the person who gave you this task a question, and wait for their answer. They may "
         "be away (on a phone, in a meeting): the answer can take minutes or hours, and if none "
         "comes in time you are told to proceed on your own judgement. Ask only what you cannot "
         "sensibly decide yourself (a choice between designs they care about, a missing "
         "credential, an ambiguity in the task), one question at a time, with the choices you "
         "see when there are some. Returns their answer.",
         ask_schema, NULL, MCP_TOOL_READ_ONLY, t_ask_user, NULL},
        {"submit_plan", "Submit a plan for approval",
         "Submit your plan for the task to the person who gave it, and wait for their approval "
         "before changing anything. Returns when they approve it, possibly with changes to make; "
         "carry out the plan as approved. If it says the plan is not approved, change nothing.",
         plan_schema, NULL, MCP_TOOL_READ_ONLY, t_submit_plan, NULL},
        {"open_preview", "Show the person a port",
         "Give a port your app serves in this sandbox (a web app, an API, a dev server) a URL "
         "the person who gave you the task can open, shown on the run's page, for an hour. Start "
         "the app in the background first (nohup ... &) so that it keeps serving.",
         preview_schema, NULL, MCP_TOOL_READ_ONLY, t_open_preview, NULL},
        {"add_evidence", "Show the person an image",
         "Keep an image that shows your work (a screenshot of the app, a chart of the results) "
         "with the run: the person sees it on the run's page and with its result. For a "
         "screenshot of a page your app serves: sh /opt/sandbox-mcp/screenshot "
         "http://127.0.0.1:PORT/ /workspace/screenshot.png (headless Chromium at a phone's "
         "width, when the sandbox has Chromium), then add_evidence that file. At most 8 a run.",
         evidence_schema, NULL, MCP_TOOL_READ_ONLY, t_add_evidence, NULL},
    };
    for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
        struct mcp_tool_def d = tools[i];
        d.ctx = &at;
        mcp_server_add_tool(srv, &d);
    }
}

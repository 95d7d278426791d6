/* run_task, get_result, list_runs, cancel_run: fire-and-forget coding runs. The engine
 * (src/runs) does the work; these read and shape what the store holds. Another user's runs and
 * sessions are "not found", never "forbidden", so ids reveal nothing.
 *
 * The runs are also the server's MCP tasks: a run_task a client asks to run as a task answers
 * with the run as a task, whose id is the run id (unguessable, and bound to its user like every
 * run), working while the run is queued or running, then completed (its result what get_result
 * says, an error result unless the run succeeded) or cancelled. Runs are kept, so tasks are too:
 * their ttl is unlimited. */
#include "mcp/tools.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/util.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp.h"
#include "runs/runs.h"
#include "store/store.h"

#define TASK_MAX 50000
#define WAIT_MAX_SECONDS 60
/* how often a task's client is asked to look (a run takes minutes) */
#define TASK_POLL_MS 5000
/* how long a tasks/result waits on the engine before looking at the run again */
#define TASK_WAIT_MS (10 * 60 * 1000)

struct tools_runs {
    struct runs *runs; /* NULL when runs are unavailable */
    char *unavailable;
    struct store *st;
};

static struct tools_runs the_tools;

static bool available(struct tools_runs *t, struct mcp_call *call)
{
    if (t->runs)
        return true;
    mcp_call_tool_error(call, "runs are unavailable on this server: %s", t->unavailable);
    return false;
}

static const char *opt_str(const json_t *args, const char *key)
{
    const char *s = json_string_value(json_object_get(args, key));
    return s && *s ? s : NULL;
}

static json_t *text_content(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *text_content(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        abort();
    va_end(ap);
    json_t *c = json_pack("[{s:s, s:s%}]", "type", "text", "text", text, strlen(text));
    free(text);
    return c;
}

static bool run_active(const struct store_run *r)
{
    return strcmp(r->status, "queued") == 0 || strcmp(r->status, "running") == 0;
}

static int task_get(void *ctx, const char *user_id, const char *id, bool want_result,
                    struct mcp_task *out, struct err *err);

/* --- run_task --- */

static void tool_run_task(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_runs *t = ctx;
    if (!available(t, call))
        return;
    const struct mcp_principal *p = mcp_call_principal(call);
    const json_t *tm = json_object_get(args, "timeout_minutes");
    struct runs_submit s = {
        .user_id = p->user_id,
        .task = json_string_value(json_object_get(args, "task")),
        .repository = opt_str(args, "repository"),
        .branch = opt_str(args, "branch"),
        .session_id = opt_str(args, "session_id"),
        .model = opt_str(args, "model"),
        .title = opt_str(args, "title"),
        .agent = opt_str(args, "agent"),
        .timeout_ms = tm ? (uint64_t)(json_number_value(tm) * 60000.0) : 0,
        .network = opt_str(args, "network"),
        .pull_request = opt_str(args, "pull_request"),
    };
    if (tm && s.timeout_ms == 0)
        s.timeout_ms = 1;
    char run_id[64], session_id[64], url[512], session_url[512];
    struct err err = {0};
    if (runs_submit(t->runs, &s, run_id, session_id, &err) < 0) {
        mcp_call_tool_error(call, "%s", err.msg);
        return;
    }
    runs_web_url(t->runs, false, run_id, url, sizeof(url));
    runs_web_url(t->runs, true, session_id, session_url, sizeof(session_url));
    _cleanup_free_ char *text = xasprintf("Run %s queued in session %s. Check on it with "
                                          "get_result (run_id %s), or watch it at %s",
                                          run_id, session_id, run_id, url);
    if (mcp_call_task_requested(call)) {
        /* the run is in the store now: a tasks/get right after this answer finds it */
        struct mcp_task task = {0};
        if (task_get(t, p->user_id, run_id, false, &task, &err) < 0)
            mcp_call_error(call, JSONRPC_INTERNAL_ERROR, err.msg, NULL);
        else
            mcp_call_task_created(call, &task, text);
        mcp_task_release(&task);
        return;
    }
    json_t *sc = json_pack("{s:s, s:s, s:s, s:s, s:s}", "run_id", run_id, "session_id", session_id,
                           "status", "queued", "web_url", url, "session_web_url", session_url);
    mcp_call_tool_result(call, text_content("%s", text), sc, false);
}

/* --- get_result --- */

struct get_job {
    struct tools_runs *t;
    struct mcp_call *call;
    char run_id[64];
    struct runs_waiter *waiter;
};

/* One paragraph on what the run's sandbox reached and was refused, for the text content: the
 * first few of each, with the reason for a refusal. "" when it tried nothing. */
/* The first few host:port of a network summary's list, with each one's reason when asked. */
static void add_hosts(struct buf *b, const json_t *list, bool reasons)
{
    size_t i;
    json_t *h;
    json_array_foreach(list, i, h)
    {
        if (i == 5) {
            buf_printf(b, ", ...");
            break;
        }
        buf_printf(b, "%s%s:%lld%s%s", i ? ", " : "", json_string_value(json_object_get(h, "host")),
                   (long long)json_integer_value(json_object_get(h, "port")), reasons ? " " : "",
                   reasons ? json_string_value(json_object_get(h, "reason")) : "");
    }
}

static char *network_text(const json_t *net)
{
    size_t nr = json_array_size(json_object_get(net, "reached"));
    json_int_t refused = json_integer_value(json_object_get(net, "denied_attempts"));
    if (!json_is_object(net) || (nr == 0 && refused == 0))
        return xstrdup("");
    struct buf b;
    buf_init(&b, 256);
    buf_printf(&b, "\n\nNetwork (%s): ", json_string_value(json_object_get(net, "mode")));
    if (nr) {
        buf_printf(&b, "reached ");
        add_hosts(&b, json_object_get(net, "reached"), false);
    }
    if (refused) {
        buf_printf(&b, "%s%lld attempts refused (", nr ? "; " : "", (long long)refused);
        add_hosts(&b, json_object_get(net, "denied"), true);
        buf_printf(&b, ")");
    }
    buf_printf(&b, ".");
    return buf_steal(&b, NULL);
}

/* One line on the delivery: the pull request, or why there is none. */
static char *delivery_text(const json_t *d)
{
    const char *status = json_string_value(json_object_get(d, "status"));
    if (!status)
        return xstrdup("");
    const json_t *pr = json_object_get(d, "pull_request");
    const char *reason = json_string_value(json_object_get(d, "reason"));
    if (pr)
        return xasprintf("\n\nPull request #%lld (%s%s): %s%s%s",
                         (long long)json_integer_value(json_object_get(pr, "number")),
                         json_is_true(json_object_get(pr, "draft")) ? "draft, " : "",
                         json_string_value(json_object_get(pr, "state")),
                         json_string_value(json_object_get(pr, "url")), reason ? "; " : "",
                         reason ? reason : "");
    return xasprintf("\n\nDelivery %s%s%s", status, reason ? ": " : ".", reason ? reason : "");
}

/* What get_result answers about run r: its text content and structured content. */
static void describe_run(struct tools_runs *t, const struct store_run *r, json_t **content,
                         json_t **structured)
{
    json_t *sc = runs_describe(t->runs, r);
    if (run_active(r)) {
        *content =
            text_content("Run %s is %s (%s); %lld events so far.", r->id, r->status,
                         r->status_reason ? r->status_reason : "", (long long)r->event_count);
    } else {
        _cleanup_free_ char *net = network_text(json_object_get(sc, "network"));
        _cleanup_free_ char *dv = delivery_text(json_object_get(sc, "delivery"));
        *content =
            text_content("Run %s %s.\n\n%s%s%s%s%s", r->id, r->status, r->summary ? r->summary : "",
                         r->error ? "\n\nError: " : "", r->error ? r->error : "", dv, net);
    }
    *structured = sc;
}

static void answer_result(void *ctx)
{
    struct get_job *j = ctx;
    j->waiter = NULL;
    const struct mcp_principal *p = mcp_call_principal(j->call);
    struct store_run r = {0};
    struct err err = {0};
    if (store_run_get(j->t->st, p->user_id, j->run_id, &r, &err) < 0) {
        mcp_call_tool_error(j->call, "%s", err.msg);
    } else {
        json_t *content, *sc;
        describe_run(j->t, &r, &content, &sc);
        mcp_call_tool_result(j->call, content, sc, false);
    }
    store_run_release(&r);
    free(j);
}

static void on_get_cancel(struct mcp_call *call, void *ctx)
{
    struct get_job *j = ctx;
    if (j->waiter) {
        runs_wait_cancel(j->waiter);
        answer_result(j);
    }
}

static void tool_get_result(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_runs *t = ctx;
    if (!available(t, call))
        return;
    const char *id = json_string_value(json_object_get(args, "run_id"));
    const struct mcp_principal *p = mcp_call_principal(call);
    struct store_run r = {0};
    struct err err = {0};
    int rc = store_run_get(t->st, p->user_id, id, &r, &err);
    store_run_release(&r);
    if (rc < 0) {
        mcp_call_tool_error(call, "%s", err.msg);
        return;
    }
    struct get_job *j = xcalloc(1, sizeof(*j));
    j->t = t;
    j->call = call;
    snprintf(j->run_id, sizeof(j->run_id), "%s", id);
    const json_t *ws = json_object_get(args, "wait_seconds");
    uint64_t wait_ms = ws ? (uint64_t)(json_number_value(ws) * 1000.0) : 0;
    /* answer_result() may run (and free j) before runs_wait() returns */
    struct runs_waiter *w = runs_wait(t->runs, id, wait_ms, answer_result, j);
    if (w) {
        j->waiter = w;
        mcp_call_on_cancel(call, on_get_cancel, j);
    }
}

/* --- list_runs --- */

struct list_ctx {
    json_t *runs;
    int64_t last_n;
};

static void add_run(const struct store_run *r, void *ctx)
{
    struct list_ctx *l = ctx;
    json_array_append_new(l->runs, runs_describe_short(the_tools.runs, r));
    l->last_n = r->n;
}

static void tool_list_runs(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_runs *t = ctx;
    if (!available(t, call))
        return;
    const struct mcp_principal *p = mcp_call_principal(call);
    struct store_run_list_opts o = {
        .user_id = p->user_id,
        .session_id = opt_str(args, "session_id"),
        .status = opt_str(args, "status"),
        .limit = 10,
    };
    const json_t *lim = json_object_get(args, "limit");
    if (lim)
        o.limit = (unsigned)json_integer_value(lim);
    const char *cursor = opt_str(args, "cursor");
    if (cursor) {
        char *end = NULL;
        long long v = strtoll(cursor, &end, 10);
        if (!end || *end || v <= 0) {
            mcp_call_tool_error(call, "cursor '%s' is not one list_runs returned", cursor);
            return;
        }
        o.before = v;
    }
    struct err err = {0};
    if (o.session_id) {
        struct store_session ses;
        if (store_session_get(t->st, p->user_id, o.session_id, &ses, &err) < 0) {
            mcp_call_tool_error(call, "%s", err.msg);
            return;
        }
    }
    struct list_ctx l = {.runs = json_array()};
    bool more = false;
    if (store_run_list(t->st, &o, add_run, &l, &more, &err) < 0) {
        json_decref(l.runs);
        mcp_call_tool_error(call, "%s", err.msg);
        return;
    }
    char next[32] = "";
    if (more)
        snprintf(next, sizeof(next), "%lld", (long long)l.last_n);
    size_t count = json_array_size(l.runs);
    json_t *sc = json_pack("{s:o, s:b, s:s?}", "runs", l.runs, "has_more", more, "next_cursor",
                           more ? next : NULL);
    json_t *content;
    if (count == 0) {
        content = text_content("No runs.");
    } else {
        char *text = json_dumps(json_object_get(sc, "runs"), JSON_INDENT(1) | JSON_COMPACT);
        content = text_content("%zu run%s%s\n%s", count, count == 1 ? "" : "s",
                               more ? " (more with next_cursor)" : "", text);
        free(text);
    }
    mcp_call_tool_result(call, content, sc, false);
}

/* --- cancel_run --- */

static void tool_cancel_run(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_runs *t = ctx;
    if (!available(t, call))
        return;
    const char *id = json_string_value(json_object_get(args, "run_id"));
    const struct mcp_principal *p = mcp_call_principal(call);
    struct err err = {0};
    if (runs_cancel(t->runs, p->user_id, id, &err) < 0) {
        mcp_call_tool_error(call, "%s", err.msg);
        return;
    }
    struct store_run r = {0};
    store_run_get(t->st, p->user_id, id, &r, &err);
    json_t *sc = json_pack("{s:s, s:s}", "run_id", id, "status", r.status[0] ? r.status : "");
    mcp_call_tool_result(call, text_content("Run %s is %s.", id, r.status), sc, false);
    store_run_release(&r);
}

/* --- the runs as MCP tasks --- */

static void describe_run(struct tools_runs *t, const struct store_run *r, json_t **content,
                         json_t **structured);

static void task_of_run(const struct store_run *r, struct mcp_task *out)
{
    snprintf(out->id, sizeof(out->id), "%s", r->id);
    bool active = run_active(r);
    out->status = active                                ? MCP_TASK_WORKING
                  : strcmp(r->status, "cancelled") == 0 ? MCP_TASK_CANCELLED
                                                        : MCP_TASK_COMPLETED;
    const char *msg = strcmp(r->status, "failed") == 0 && r->error ? r->error : r->status_reason;
    out->status_message = msg && *msg ? xstrdup(msg) : NULL;
    out->created_ms = r->created_at;
    out->updated_ms = r->finished_at ? r->finished_at : r->started_at;
    out->ttl_ms = -1;
    out->poll_ms = TASK_POLL_MS;
    out->tool_error = strcmp(r->status, "failed") == 0;
}

static int task_get(void *ctx, const char *user_id, const char *id, bool want_result,
                    struct mcp_task *out, struct err *err)
{
    struct tools_runs *t = ctx;
    struct store_run r = {0};
    int rc = store_run_get(t->st, user_id, id, &r, err);
    if (rc == 0) {
        task_of_run(&r, out);
        if (want_result && !run_active(&r)) {
            json_t *content, *sc;
            describe_run(t, &r, &content, &sc);
            out->result = json_pack("{s:o, s:o, s:b}", "content", content, "structuredContent", sc,
                                    "isError", strcmp(r.status, "succeeded") != 0);
        }
    }
    store_run_release(&r);
    return rc;
}

static void *task_wait(void *ctx, const char *id, void (*cb)(void *cb_ctx), void *cb_ctx)
{
    struct tools_runs *t = ctx;
    return runs_wait(t->runs, id, TASK_WAIT_MS, cb, cb_ctx);
}

static void task_wait_cancel(void *ctx, void *handle)
{
    (void)ctx;
    runs_wait_cancel(handle);
}

static int task_cancel(void *ctx, const char *user_id, const char *id, struct err *err)
{
    struct tools_runs *t = ctx;
    return runs_cancel(t->runs, user_id, id, err);
}

struct task_list {
    void (*each)(const struct mcp_task *t, void *each_ctx);
    void *each_ctx;
    char last[64];
};

static void list_task(const struct store_run *r, void *ctx)
{
    struct task_list *l = ctx;
    struct mcp_task task = {0};
    task_of_run(r, &task);
    l->each(&task, l->each_ctx);
    mcp_task_release(&task);
    snprintf(l->last, sizeof(l->last), "%s", r->id);
}

/* The cursor is the id of the last run of the page: the caller's own, so it tells nothing. */
static int task_list(void *ctx, const char *user_id, const char *cursor, unsigned limit,
                     void (*each)(const struct mcp_task *t, void *each_ctx), void *each_ctx,
                     char next[64], struct err *err)
{
    struct tools_runs *t = ctx;
    struct store_run_list_opts o = {.user_id = user_id, .limit = limit};
    if (cursor) {
        struct store_run r = {0};
        int rc = store_run_get(t->st, user_id, cursor, &r, err);
        o.before = r.n;
        store_run_release(&r);
        if (rc < 0)
            return rc == -ENOENT ? err_set(err, -EINVAL, "invalid cursor") : rc;
    }
    struct task_list l = {each, each_ctx, ""};
    bool more = false;
    int rc = store_run_list(t->st, &o, list_task, &l, &more, err);
    if (rc < 0)
        return rc;
    snprintf(next, 64, "%s", more ? l.last : "");
    return 0;
}

static const struct mcp_task_source task_source = {
    task_get, task_wait, task_wait_cancel, task_cancel, task_list,
};

/* --- registration --- */

static const char run_task_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"task\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":50000,"
    "\"description\":\"What the coding agent should do, as you would tell a colleague\"},"
    "\"repository\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":2048,"
    "\"description\":\"Git repository to work in (https URL); cloned into the session's "
    "workspace. Omit to work in an empty workspace (or the session's)\"},"
    "\"branch\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":200,"
    "\"description\":\"Branch to start from, and the pull request's base (default: the "
    "repository's default branch)\"},"
    "\"pull_request\":{\"type\":\"string\",\"enum\":[\"none\",\"draft\",\"ready\"],"
    "\"description\":\"When the run ends with changes, push them to the session's own branch "
    "and open a pull request (draft or ready for review) against the base, or comment on the "
    "session's pull request. Default: draft for a GitHub repository your credential serves, "
    "else none\"},"
    "\"session_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
    "\"description\":\"Continue an earlier run's session: same sandbox, workspace and agent "
    "conversation. Omit to start a new session\"},"
    "\"model\":{\"type\":\"string\",\"minLength\":3,\"maxLength\":120,"
    "\"description\":\"provider/model (default anthropic/claude-sonnet-4-5)\"},"
    "\"title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":100,"
    "\"description\":\"A short name for the run\"},"
    "\"agent\":{\"type\":\"string\",\"enum\":[\"opencode\"],"
    "\"description\":\"The coding agent (default opencode)\"},"
    "\"timeout_minutes\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":10080,"
    "\"description\":\"Stop the agent after this long (default 50)\"},"
    "\"network\":{\"type\":\"string\",\"enum\":[\"none\",\"allowlist\",\"public\"],"
    "\"description\":\"What the agent's sandbox may reach: nothing, the operator's allow list "
    "(package registries and git hosts), or any public address. Default: the most this server "
    "gives you; asking for more is an error\"}},"
    "\"required\":[\"task\"],\"additionalProperties\":false}";

static const char run_task_output[] =
    "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\"},"
    "\"session_id\":{\"type\":\"string\"},\"status\":{\"type\":\"string\"},"
    "\"web_url\":{\"type\":\"string\"},\"session_web_url\":{\"type\":\"string\"}},"
    "\"required\":[\"run_id\",\"session_id\",\"status\",\"web_url\"]}";

static const char get_result_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"run_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64},"
    "\"wait_seconds\":{\"type\":\"number\",\"minimum\":0,\"maximum\":60,"
    "\"description\":\"Hold the call until the run ends or this many seconds pass\"}},"
    "\"required\":[\"run_id\"],\"additionalProperties\":false}";

static const char list_runs_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"session_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64},"
    "\"status\":{\"type\":\"string\",\"enum\":[\"queued\",\"running\",\"succeeded\","
    "\"failed\",\"cancelled\"]},"
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100,\"description\":"
    "\"Runs per page (default 10)\"},"
    "\"cursor\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":32,\"description\":"
    "\"next_cursor of the previous page\"}},\"additionalProperties\":false}";

static const char cancel_run_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"run_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64}},"
    "\"required\":[\"run_id\"],\"additionalProperties\":false}";

void tools_runs_register(struct mcp_server *srv, struct runs *runs, struct store *st,
                         const char *unavailable)
{
    struct tools_runs *t = &the_tools;
    t->runs = runs;
    t->st = st;
    free(t->unavailable);
    t->unavailable = xstrdup(unavailable ? unavailable : "unknown reason");
    static const char run_task_desc[] =
        "Hand a coding task to an agent (OpenCode) that works on it in its own sandbox, for "
        "minutes or hours, while you are away. Returns at once with a run_id (check on it with "
        "get_result) and a web_url where a person can watch it. Give a git repository to work "
        "in; pass the session_id of an earlier run to continue in the same workspace and "
        "conversation.";
    static const char get_result_desc[] =
        "The state and outcome of a run: status, the agent's summary or error, files changed "
        "with insertions/deletions, the commits it made, token usage and cost, and its latest "
        "event, and its network: the hosts its sandbox reached and the attempts refused, with "
        "the reason. wait_seconds holds the call until the run ends (at most 60 s).";
    static const char list_runs_desc[] =
        "Your runs, newest first, optionally of one session or status; pages with cursor "
        "(has_more and next_cursor).";
    static const char cancel_run_desc[] = "Stop a queued or running run; its status becomes "
                                          "cancelled.";
    const struct mcp_tool_def defs[] = {
        {"run_task", "Start a coding run", run_task_desc, run_task_schema, run_task_output,
         MCP_TOOL_OPEN_WORLD | MCP_TOOL_TASK, tool_run_task, t},
        {"get_result", "Get a run's result", get_result_desc, get_result_schema, NULL,
         MCP_TOOL_READ_ONLY, tool_get_result, t},
        {"list_runs", "List runs", list_runs_desc, list_runs_schema, NULL, MCP_TOOL_READ_ONLY,
         tool_list_runs, t},
        {"cancel_run", "Cancel a run", cancel_run_desc, cancel_run_schema, NULL,
         MCP_TOOL_DESTRUCTIVE | MCP_TOOL_IDEMPOTENT, tool_cancel_run, t},
        /* the names of the original TypeScript sandbox-mcp, for clients written against it */
        {"opencode_run_task", "Start a coding run", run_task_desc, run_task_schema, run_task_output,
         MCP_TOOL_OPEN_WORLD | MCP_TOOL_HIDDEN | MCP_TOOL_TASK, tool_run_task, t},
        {"opencode_get_result", "Get a run's result", get_result_desc, get_result_schema, NULL,
         MCP_TOOL_READ_ONLY | MCP_TOOL_HIDDEN, tool_get_result, t},
        {"opencode_list_runs", "List runs", list_runs_desc, list_runs_schema, NULL,
         MCP_TOOL_READ_ONLY | MCP_TOOL_HIDDEN, tool_list_runs, t},
    };
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++)
        mcp_server_add_tool(srv, &defs[i]);
    if (runs)
        mcp_server_set_task_source(srv, &task_source, t);
}

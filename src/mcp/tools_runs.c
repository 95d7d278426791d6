/* run_task, get_result, list_runs, cancel_run: fire-and-forget coding runs. The engine
 * (src/runs) does the work; these read and shape what the store holds. Another user's runs and
 * sessions are "not found", never "forbidden", so ids reveal nothing.
 *
 * The runs are also the server's MCP tasks: a run_task a client asks to run as a task answers
 * with the run as a task, whose id is the run id (unguessable, and bound to its user like every
 * run), working while the run is queued or running, then completed (its result what get_result
 * says, an error result unless the run succeeded) or cancelled. Runs are kept, so tasks are too:
 * their ttl is unlimited. That task source is tools_runs_tasks.c. */
#include "mcp/tools_runs.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/ids.h"
#include "base/util.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp.h"
#include "proxy/proxy.h"
#include "runs/runs.h"
#include "store/store.h"

#define WAIT_MAX_SECONDS 60
static struct tools_runs the_tools;

bool tools_runs_available(struct tools_runs *t, struct mcp_call *call)
{
    if (t->runs)
        return true;
    mcp_call_tool_fail(call, MCP_TOOL_UNAVAILABLE, "runs are unavailable on this server: %s",
                       t->unavailable);
    return false;
}

static const char *opt_str(const json_t *args, const char *key)
{
    const char *s = json_string_value(json_object_get(args, key));
    return s && *s ? s : NULL;
}

#define available tools_runs_available
#define text_content tools_runs_text

json_t *tools_runs_text(const char *fmt, ...)
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

/* --- run_task --- */

/* question_timeout_minutes in whole seconds, at least one; 0 when absent */
static uint64_t question_timeout_s(const json_t *args)
{
    const json_t *m = json_object_get(args, "question_timeout_minutes");
    if (!m)
        return 0;
    uint64_t s = (uint64_t)(json_number_value(m) * 60.0 + 0.999);
    return s ? s : 1;
}

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
        .setup = opt_str(args, "setup"),
        .fix_ci = json_is_true(json_object_get(args, "fix_ci"))    ? RUNS_FIX_CI_ON
                  : json_is_false(json_object_get(args, "fix_ci")) ? RUNS_FIX_CI_OFF
                                                                   : RUNS_FIX_CI_KEEP,
        .plan_first = json_is_true(json_object_get(args, "plan_first")),
        .question_timeout_s = question_timeout_s(args),
    };
    if (tm && s.timeout_ms == 0)
        s.timeout_ms = 1;
    if (json_object_get(args, "attempts") || json_object_get(args, "variants")) {
        tools_runs_attempts(t, call, &s, args);
        return;
    }
    char run_id[64], session_id[64], url[512], session_url[512];
    struct err err = {0};
    if (runs_submit(t->runs, &s, run_id, session_id, &err) < 0) {
        mcp_call_tool_err(call, &err);
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
        if (tools_runs_task_get(t, p->user_id, run_id, false, &task, &err) < 0)
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
    /* progress told so far (a client's progress token): how often, and the last phase and
     * event count told */
    unsigned told;
    char phase[RUNS_PHASE_TEXT_MAX];
    int64_t events;
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

/* The run's latest events, one a line ("- bash: Run the tests (exit 1)"). */
static void add_recent(struct buf *b, const json_t *recent)
{
    size_t i;
    json_t *ev;
    if (json_array_size(recent))
        buf_printf(b, "\n\nLatest events:");
    json_array_foreach(recent, i, ev)
        buf_printf(b, "\n- %s", json_string_value(json_object_get(ev, "summary")));
}

/* The run's evidence as image content, newest first, as much as EVIDENCE_SHOWN bytes of base64
 * hold (an image that does not fit is on the run's page). */
#define EVIDENCE_SHOWN (64 * 1024)
static void add_evidence(struct tools_runs *t, const struct store_run *r, json_t *content,
                         const json_t *evidence)
{
    size_t left = EVIDENCE_SHOWN;
    for (size_t i = json_array_size(evidence); i-- > 0;) {
        const json_t *item = json_array_get(evidence, i);
        size_t bytes = (size_t)json_integer_value(json_object_get(item, "bytes"));
        char mime[32];
        size_t n = 0;
        if ((bytes + 2) / 3 * 4 > left)
            continue;
        _cleanup_free_ char *data = runs_evidence_data(t->runs, r->id, (unsigned)i + 1, &n, mime);
        if (!data || (n + 2) / 3 * 4 > left)
            continue;
        char *b64 = xmalloc((n + 2) / 3 * 4 + 1);
        base64_encode(data, n, b64);
        left -= strlen(b64);
        const char *caption = json_string_value(json_object_get(item, "caption"));
        char *text =
            xasprintf("Evidence %zu%s%s", i + 1, caption ? ": " : "", caption ? caption : "");
        json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", text));
        json_array_append_new(
            content, json_pack("{s:s, s:s, s:s}", "type", "image", "data", b64, "mimeType", mime));
        free(text);
        free(b64);
    }
}

/* What get_result answers about run r: its text content and structured content. */
void tools_runs_describe(struct tools_runs *t, const struct store_run *r, json_t **content,
                         json_t **structured)
{
    json_t *sc = runs_describe(t->runs, r);
    bool active = tools_runs_active(r);
    char phase[RUNS_PHASE_TEXT_MAX], took[32];
    runs_phase_text(r, phase, sizeof(phase));
    runs_duration_text(runs_elapsed_ms(r, time_now_ms()), took, sizeof(took));
    struct buf recent;
    buf_init(&recent, 0);
    if (active || strcmp(r->status, "succeeded") != 0)
        add_recent(&recent, json_object_get(sc, "recent_events"));
    const json_t *q = json_object_get(sc, "question");
    if (active && json_is_object(q)) {
        bool plan = strcmp(json_string_value(json_object_get(q, "kind")), RUNS_ASK_PLAN) == 0;
        *content = text_content(
            "Run %s waits for your user's %s (question_id %s, until %s):\n\n%s\n\nAsk them, "
            "then %s.",
            r->id, plan ? "approval of its plan" : "answer",
            json_string_value(json_object_get(q, "id")),
            json_string_value(json_object_get(q, "answer_by")),
            json_string_value(json_object_get(q, "text")),
            json_string_value(json_object_get(q, "how")));
    } else if (active) {
        *content =
            text_content("Run %s is %s, %s so far: %s (%lld events).%s", r->id, r->status, took,
                         phase, (long long)r->event_count, recent.data ? recent.data : "");
    } else {
        _cleanup_free_ char *net = network_text(json_object_get(sc, "network"));
        _cleanup_free_ char *dv = delivery_text(json_object_get(sc, "delivery"));
        *content = text_content("Run %s %s (in %s).\n\n%s%s%s%s%s%s", r->id, phase, took,
                                r->summary ? r->summary : "", r->error ? "\n\nError: " : "",
                                r->error ? r->error : "", dv, net, recent.data ? recent.data : "");
    }
    buf_release(&recent);
    add_evidence(t, r, *content, json_object_get(sc, "evidence"));
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
        mcp_call_tool_err(j->call, &err);
    } else {
        json_t *content, *sc;
        tools_runs_describe(j->t, &r, &content, &sc);
        mcp_call_tool_result(j->call, content, sc, false);
    }
    store_run_release(&r);
    free(j);
}

/* The run moved on: tell a client that sent a progress token its phase, when it is another or
 * the run recorded more events since. */
static void tell_progress(void *ctx)
{
    struct get_job *j = ctx;
    struct store_run r = {0};
    struct err err = {0};
    if (store_run_get(j->t->st, NULL, j->run_id, &r, &err) == 0) {
        char phase[RUNS_PHASE_TEXT_MAX];
        runs_phase_text(&r, phase, sizeof(phase));
        if (j->told == 0 || strcmp(phase, j->phase) != 0 || r.event_count != j->events) {
            snprintf(j->phase, sizeof(j->phase), "%s", phase);
            j->events = r.event_count;
            mcp_call_progress(j->call, ++j->told, -1, phase);
        }
    }
    store_run_release(&r);
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
    char first[64];
    const char *group = opt_str(args, "group_id");
    if (!id && group) {
        /* a group answers as its first attempt, whose result holds the whole group */
        if (tools_runs_group_first(t, p->user_id, group, first, &err) < 0) {
            mcp_call_tool_err(call, &err);
            return;
        }
        id = first;
    }
    if (!id) {
        mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS, "give run_id (or group_id)");
        return;
    }
    int rc = store_run_get(t->st, p->user_id, id, &r, &err);
    bool waiting = rc == 0 && strcmp(r.phase, "waiting") == 0;
    store_run_release(&r);
    if (rc < 0) {
        mcp_call_tool_err(call, &err);
        return;
    }
    /* a run that waits for an answer: its client may ask its user now; else it is answered at
     * once, the question in it */
    if (waiting && tools_runs_ask_client(t, call, id))
        return;
    struct get_job *j = xcalloc(1, sizeof(*j));
    j->t = t;
    j->call = call;
    snprintf(j->run_id, sizeof(j->run_id), "%s", id);
    const json_t *ws = json_object_get(args, "wait_seconds");
    uint64_t wait_ms = ws && !waiting ? (uint64_t)(json_number_value(ws) * 1000.0) : 0;
    /* answer_result() may run (and free j) before runs_wait() returns */
    struct runs_waiter *w = runs_wait(t->runs, id, wait_ms, answer_result, j);
    if (w) {
        j->waiter = w;
        mcp_call_on_cancel(call, on_get_cancel, j);
        if (mcp_call_wants_progress(call)) {
            /* where the run is now, then each step it takes while the call waits */
            runs_wait_progress(w, tell_progress);
            tell_progress(j);
        }
    }
}

/* --- list_runs --- */

/* A page's cursor is the last run it listed, by id, base64url-encoded: opaque to clients, it
 * reveals nothing beyond the run id its holder has already seen, and it leads on only in the
 * list of the run's own user (another's, or an altered one, names no run of the caller). */
#define CURSOR_MAX 128

static void cursor_encode(const char *run_id, char out[CURSOR_MAX])
{
    base64url_encode(run_id, strlen(run_id), out);
}

/* The run a cursor names into run_id; -EINVAL when it is not a cursor's shape. */
static int cursor_decode(const char *cursor, char run_id[64])
{
    size_t n = strlen(cursor);
    unsigned char raw[CURSOR_MAX];
    if (n == 0 || n >= CURSOR_MAX)
        return -EINVAL;
    ssize_t len = base64_decode(cursor, n, raw);
    if (len <= 0 || len >= 64)
        return -EINVAL;
    for (ssize_t i = 0; i < len; i++)
        if (!isalnum(raw[i]) && raw[i] != '_')
            return -EINVAL;
    memcpy(run_id, raw, (size_t)len);
    run_id[len] = '\0';
    return 0;
}

struct list_ctx {
    json_t *runs;
    char last_id[64];
};

static void add_run(const struct store_run *r, void *ctx)
{
    struct list_ctx *l = ctx;
    json_array_append_new(l->runs, runs_describe_short(the_tools.runs, r));
    snprintf(l->last_id, sizeof(l->last_id), "%s", r->id);
}

/* list_runs, and the seed's opencode_list_runs with created_before (ms, 0: any). */
static void list_runs(struct mcp_call *call, struct tools_runs *t, const json_t *args,
                      int64_t created_before)
{
    if (!available(t, call))
        return;
    const struct mcp_principal *p = mcp_call_principal(call);
    struct store_run_list_opts o = {
        .user_id = p->user_id,
        .session_id = opt_str(args, "session_id"),
        .status = opt_str(args, "status"),
        .created_before = created_before,
        .limit = 10,
    };
    const json_t *lim = json_object_get(args, "limit");
    if (lim)
        o.limit = (unsigned)json_integer_value(lim);
    struct err err = {0};
    const char *cursor = opt_str(args, "cursor");
    if (cursor) {
        char id[64];
        struct store_run from = {0};
        int r = cursor_decode(cursor, id);
        if (r == 0)
            r = store_run_get(t->st, p->user_id, id, &from, &err);
        o.before = from.n;
        store_run_release(&from);
        if (r == -EINVAL || r == -ENOENT) {
            mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                               "cursor '%.*s' is not one list_runs gave you: pass next_cursor "
                               "exactly as the previous page returned it, or omit it to start "
                               "from the newest run",
                               CURSOR_MAX, cursor);
            return;
        }
        if (r < 0) {
            mcp_call_tool_err(call, &err);
            return;
        }
    }
    if (o.session_id) {
        struct store_session ses;
        if (store_session_get(t->st, p->user_id, o.session_id, &ses, &err) < 0) {
            mcp_call_tool_err(call, &err);
            return;
        }
    }
    struct list_ctx l = {.runs = json_array()};
    bool more = false;
    if (store_run_list(t->st, &o, add_run, &l, &more, &err) < 0) {
        json_decref(l.runs);
        mcp_call_tool_err(call, &err);
        return;
    }
    char next[CURSOR_MAX] = "";
    if (more)
        cursor_encode(l.last_id, next);
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

static void tool_list_runs(struct mcp_call *call, const json_t *args, void *ctx)
{
    list_runs(call, ctx, args, 0);
}

/* --- cancel_run --- */

/* Idempotent: a run that has already ended (cancelled, or finished by itself) is answered with
 * its final status, as a repeated cancel expects, and already_ended says so. */
static void tool_cancel_run(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_runs *t = ctx;
    if (!available(t, call))
        return;
    const char *id = json_string_value(json_object_get(args, "run_id"));
    const struct mcp_principal *p = mcp_call_principal(call);
    struct err err = {0};
    int rc = runs_cancel(t->runs, p->user_id, id, &err);
    if (rc < 0 && rc != -EALREADY) {
        mcp_call_tool_err(call, &err);
        return;
    }
    struct store_run r = {0};
    if (store_run_get(t->st, p->user_id, id, &r, &err) < 0) {
        store_run_release(&r);
        mcp_call_tool_err(call, &err);
        return;
    }
    bool already = rc == -EALREADY;
    json_t *sc =
        json_pack("{s:s, s:s, s:b}", "run_id", id, "status", r.status, "already_ended", already);
    json_t *content = already ? text_content("Run %s had already ended: it is %s.", id, r.status)
                              : text_content("Run %s is %s.", id, r.status);
    mcp_call_tool_result(call, content, sc, false);
    store_run_release(&r);
}

/* --- the seed's names ---
 * The opencode_* tools of the original TypeScript sandbox-mcp took camelCase parameters (runId,
 * sessionId), its own status names (started for a run not yet at work, completed for one that
 * succeeded) and before, a Unix time, as the list's cursor. The aliases take those as well as
 * this server's names, and answer as the tools they stand for. */

/* Rename key seed to key ours in a copy of args; false (with the call answered) when both are
 * given and differ. */
static bool seed_rename(struct mcp_call *call, json_t *args, const char *seed, const char *ours)
{
    json_t *v = json_object_get(args, seed);
    if (!v)
        return true;
    json_t *mine = json_object_get(args, ours);
    if (mine && !json_equal(mine, v)) {
        mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                           "%s and %s name the same thing: give one of them", ours, seed);
        return false;
    }
    json_object_set(args, ours, v);
    json_object_del(args, seed);
    return true;
}

/* The statuses the seed's list_runs filtered on, as this server names them. */
static const char *seed_status(const char *status)
{
    if (status && strcmp(status, "started") == 0)
        return "queued";
    if (status && strcmp(status, "completed") == 0)
        return "succeeded";
    return status;
}

static void alias_run_task(struct mcp_call *call, const json_t *args, void *ctx)
{
    json_auto_t *a = json_deep_copy(args);
    if (seed_rename(call, a, "sessionId", "session_id"))
        tool_run_task(call, a, ctx);
}

static void alias_get_result(struct mcp_call *call, const json_t *args, void *ctx)
{
    json_auto_t *a = json_deep_copy(args);
    if (seed_rename(call, a, "runId", "run_id"))
        tool_get_result(call, a, ctx);
}

static void alias_list_runs(struct mcp_call *call, const json_t *args, void *ctx)
{
    json_auto_t *a = json_deep_copy(args);
    if (!seed_rename(call, a, "sessionId", "session_id"))
        return;
    const char *status = json_string_value(json_object_get(a, "status"));
    if (status && seed_status(status) != status)
        json_object_set_new(a, "status", json_string(seed_status(status)));
    /* before: the seed's Unix time, in seconds or milliseconds (a time in seconds is below 1e11
     * until the year 5138; in milliseconds, above it since 1973) */
    int64_t before = 0;
    const json_t *b = json_object_get(a, "before");
    if (b) {
        double v = json_number_value(b);
        before = v < 1e11 ? (int64_t)(v * 1000.0) : (int64_t)v;
        if (before <= 0)
            before = 1;
    }
    list_runs(call, ctx, a, before);
}

/* --- registration --- */

void tools_runs_register(struct mcp_server *srv, struct runs *runs, struct store *st,
                         const char *unavailable, const struct tools_facts *f)
{
    struct tools_runs *t = &the_tools;
    t->runs = runs;
    t->st = st;
    free(t->unavailable);
    t->unavailable = xstrdup(unavailable ? unavailable : "unknown reason");
    /* built once per server start; the strings must outlive the server, as registered tools do */
    static char *run_task_in, *run_task_seed_in, *run_task_desc;
    free(run_task_in);
    free(run_task_seed_in);
    free(run_task_desc);
    run_task_in = tools_runs_task_schema(f, false);
    run_task_seed_in = tools_runs_task_schema(f, true);
    /* the providers a model may name, as the operator configured them */
    struct buf providers;
    buf_init(&providers, 0);
    for (size_t i = 0; i < f->nllms; i++)
        if (f->llms[i].has_key)
            buf_printf(&providers, "%s%s", providers.len ? ", " : "", f->llms[i].name);
    _cleanup_free_ char *models =
        providers.len ? xasprintf("Models of these providers work here: %s.", providers.data)
        : f->nllms    ? xstrdup("No model provider has its key set on this server yet: run_task "
                                   "refuses runs until the operator sets one (e.g. ANTHROPIC_API_KEY).")
                      : xstrdup("");
    buf_release(&providers);
    char def[32], max[32];
    format_span_ms(f->run_timeout_ms, def);
    format_span_ms(f->run_timeout_max_ms, max);
    run_task_desc = xasprintf(
        "Hand a coding task to a coding agent (%s by default; opencode, claude-code or codex "
        "with agent) that works on it in a sandbox of its own, for minutes or hours, while you do "
        "something else (default timeout %s, at most %s). Returns at once with run_id, "
        "session_id and web_url: give the user web_url, where a person can watch the run live, "
        "then check on it with get_result (wait_seconds 30 to 60, every minute or so; not in a "
        "tight loop). Give a git repository to work in; pass the session_id of an earlier run "
        "to continue in the same workspace and conversation. To compare approaches, attempts "
        "(up to 4, spread over variants of agent and model) runs the task several times at "
        "once; nothing is pushed until one is picked with deliver_run. "
        "The agent needs a model provider this server has a key for (the operator sets it, "
        "e.g. ANTHROPIC_API_KEY), and run_task refuses a model without one; the model defaults "
        "to %s. %s",
        f->default_agent ? f->default_agent : RUNS_DEFAULT_AGENT, def, max, f->default_model,
        models);
    static const char get_result_desc[] =
        "The state and outcome of a run: status (queued, running, succeeded, failed, "
        "cancelled) and its reason, its phase (what it is doing now, e.g. 'step 3: ran `npm "
        "test`', or how it ended), elapsed_seconds, its latest events, the agent's summary or "
        "error, files changed with insertions "
        "and deletions, the commits it made, the pull request, token usage and cost, its latest "
        "event, and the hosts its sandbox reached or was refused. To wait for a run, pass "
        "wait_seconds (at most 60): the call returns as soon as the run ends, so call again "
        "while status is queued or running rather than polling rapidly; with a progress token "
        "it reports the phase as progress notifications while it waits.";
    static const char list_runs_desc[] =
        "Your runs, newest first, optionally only one session's or those in one status; 10 a "
        "page by default (limit, at most 100). When has_more is true, pass next_cursor as "
        "cursor for the next page.";
    static const char cancel_run_desc[] =
        "Stop a queued or running run: the agent is stopped and the status becomes cancelled. "
        "Cancelling a run that has already ended changes nothing and answers with its final "
        "status (already_ended true).";
    const struct mcp_tool_def defs[] = {
        {"run_task", "Start a coding run", run_task_desc, run_task_in, tools_runs_task_output,
         MCP_TOOL_OPEN_WORLD | MCP_TOOL_TASK, tool_run_task, t},
        {"get_result", "Get a run's result", get_result_desc, tools_runs_result_schema,
         tools_runs_result_output, MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT, tool_get_result, t},
        {"list_runs", "List runs", list_runs_desc, tools_runs_list_schema, tools_runs_list_output,
         MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT, tool_list_runs, t},
        {"cancel_run", "Cancel a run", cancel_run_desc, tools_runs_cancel_schema,
         tools_runs_cancel_output, MCP_TOOL_DESTRUCTIVE | MCP_TOOL_IDEMPOTENT, tool_cancel_run, t},
        {"deliver_run", "Deliver the attempt picked", tools_runs_deliver_desc,
         tools_runs_deliver_schema, tools_runs_deliver_output,
         MCP_TOOL_OPEN_WORLD | MCP_TOOL_IDEMPOTENT, tools_runs_deliver, t},
        {"answer_run", "Answer a run's question", tools_runs_answer_desc, tools_runs_answer_schema,
         tools_runs_answer_output, MCP_TOOL_IDEMPOTENT, tools_runs_answer, t},
        /* the names of the original TypeScript sandbox-mcp, with its parameter names, for
         * clients written against it */
        {"opencode_run_task", "Start a coding run", run_task_desc, run_task_seed_in,
         tools_runs_task_output, MCP_TOOL_OPEN_WORLD | MCP_TOOL_HIDDEN | MCP_TOOL_TASK,
         alias_run_task, t},
        {"opencode_get_result", "Get a run's result", get_result_desc,
         tools_runs_result_seed_schema, tools_runs_result_output,
         MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT | MCP_TOOL_HIDDEN, alias_get_result, t},
        {"opencode_list_runs", "List runs", list_runs_desc, tools_runs_list_seed_schema,
         tools_runs_list_output, MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT | MCP_TOOL_HIDDEN,
         alias_list_runs, t},
    };
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++)
        mcp_server_add_tool(srv, &defs[i]);
    if (runs)
        mcp_server_add_task_source(srv, "run_", &tools_runs_task_source, t);
}

/* The web pages of runs and sessions, for people watching from a phone or a browser:
 *   GET /runs/<id>?t=TOKEN            the page (static HTML; app.js renders it)
 *   GET /runs/<id>/data?t=TOKEN       the run as get_result shows it (JSON)
 *   GET /runs/<id>/diff?t=TOKEN       its full diff, cut to what a page shows (JSON,
 *                                     src/runs/diff.h), or null when there is none
 *   GET /runs/<id>/events?t=TOKEN     its events as Server-Sent Events, resumable with
 *                                     Last-Event-ID, and its phase whenever it changes,
 *                                     ending when the run ends
 *   GET /sessions/<id>[/data]?t=TOKEN the runs of a session
 *   GET /groups/<id>[/data]?t=TOKEN   a group of attempts side by side; its data says whether
 *                                     the browser is signed in as its owner, with the CSRF
 *                                     token of the owner's one action:
 *   POST /groups/<id>/deliver         (the owner signed in; form run_id, csrf) deliver the
 *                                     attempt picked, as deliver_run does
 *   GET /static/app.js, app.css, icon.svg   the page's script, style and icon (embedded)
 *   GET /favicon.ico                  the icon again, for what a browser asks of its own accord
 *                                     (a page without the head's link, such as a JSON answer)
 * The token is the view capability of that run or session (src/runs/view.c): with a wrong one (or
 * an id that does not exist) a request is 403, and says no more. Without one, the page opens for
 * its owner signed in in this browser (the session cookie of /login, as the account page), so
 * that an address without a token (NOTIFY_VIEW_TOKEN=0) is of use to its owner alone: a browser
 * not signed in is sent to sign in (the data, diff and stream answer 401), and one signed in as
 * someone else gets 404, as for an id that does not exist.
 * Everything the agent wrote reaches the browser as JSON and is put on the page as text (the
 * script never builds HTML from data), under a Content-Security-Policy that allows no inline
 * script at all. */
#include "web/web.h"
#include "http/http_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/auth.h"
#include "auth/form.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/embedded.h"
#include "base/json_write.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/util.h"
#include "base/utf8.h"
#include "runs/runs.h"
#include "store/store.h"

/* What the pages read: the route context web_register makes. */
struct web {
    struct store *store;
    struct auth *auth;
    struct runs *runs; /* NULL: the pages answer 503 */
};

#define EVENTS_PER_PUMP 200
#define PUMP_MS 250
#define KEEPALIVE_MS 15000
#define EVENT_TEXT_MAX 4096

static const char csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                          "form-action 'none'; frame-ancestors 'none'";

static void security_headers(h2o_req_t *req)
{
    http_add_header_str(req, "content-security-policy", csp);
    http_add_header_str(req, "referrer-policy", "no-referrer");
    http_add_header_str(req, "x-content-type-options", "nosniff");
    http_add_header_str(req, "x-frame-options", "DENY");
}

static const struct embedded_file *asset(const char *name)
{
    for (const struct embedded_file *f = embedded_web; f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

static void respond_asset(h2o_req_t *req, int status, const char *name, const char *type)
{
    const struct embedded_file *f = asset(name);
    security_headers(req);
    http_add_header(req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    http_respond(req, status, type, f ? f->data : "", f ? f->size : 0);
}

/* An HTML page: the shared head (head.html: doctype, meta, icon, style), then the page's own
 * file (its title, script if any, and body). */
static void respond_page(h2o_req_t *req, int status, const char *name)
{
    const struct embedded_file *head = asset("head.html"), *page = asset(name);
    size_t hl = head ? head->size : 0, pl = page ? page->size : 0;
    char *text = h2o_mem_alloc_pool(&req->pool, hl + pl + 1);
    if (hl)
        memcpy(text, head->data, hl);
    if (pl)
        memcpy(text + hl, page->data, pl);
    security_headers(req);
    http_add_header(req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    http_respond(req, status, "text/html; charset=utf-8", text, hl + pl);
}

/* The request's view token (?t=...), NUL-terminated in the pool; NULL when absent. */
static const char *view_token(h2o_req_t *req)
{
    if (req->query_at == SIZE_MAX)
        return NULL;
    const char *q = req->path.base + req->query_at + 1, *end = req->path.base + req->path.len;
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *stop = amp ? amp : end;
        if (stop - q > 2 && q[0] == 't' && q[1] == '=') {
            size_t n = (size_t)(stop - q - 2);
            if (n >= RUNS_VIEW_TOKEN_MAX)
                return "";
            char *t = h2o_mem_alloc_pool(&req->pool, n + 1);
            memcpy(t, q + 2, n);
            t[n] = '\0';
            return t;
        }
        q = stop + 1;
    }
    return NULL;
}

/* What a page shows: a run, a session, or a group of attempts (the first part of its path) */
enum page_kind { PAGE_RUN, PAGE_SESSION, PAGE_GROUP };
static const char *const page_paths[] = {"runs", "sessions", "groups"};

static void no_run(const struct store_run *r, void *ctx)
{
}

/* Whether the browser is signed in as the owner of id: 0 when it is; 401 when it is not signed
 * in; 404 when it is someone else's, or there is no such id (the same answer). */
static int owner_status(struct web *srv, h2o_req_t *req, enum page_kind kind, const char *id)
{
    struct store_user user;
    if (!auth_session_user(srv->auth, req, &user))
        return 401;
    struct err err = {0};
    int r;
    if (kind == PAGE_SESSION) {
        struct store_session s;
        r = store_session_get(srv->store, user.id, id, &s, &err);
    } else if (kind == PAGE_GROUP) {
        r = store_group_runs(srv->store, user.id, id, no_run, NULL, &err);
    } else {
        struct store_run run = {0};
        r = store_run_get(srv->store, user.id, id, &run, &err);
        store_run_release(&run);
    }
    return r == 0 ? 0 : r == -ENOENT ? 404 : 503;
}

/* A page or its data refused with status: not signed in, a page sends the browser to sign in and
 * come back; else the denied page, or the error in JSON. */
static void refuse(h2o_req_t *req, int status, enum page_kind kind, const char *id, bool page)
{
    if (page && status == 401) {
        /* sign in, and come back here (ids are letters, digits and _: nothing to encode) */
        char to[128];
        snprintf(to, sizeof(to), "/login?return_to=/%s/%s", page_paths[kind], id);
        http_add_header(req, H2O_TOKEN_LOCATION, to);
        http_add_header(req, H2O_TOKEN_CACHE_CONTROL, "no-store");
        security_headers(req);
        http_respond(req, 303, NULL, NULL, 0);
    } else if (page) {
        respond_page(req, status, "denied.html");
    } else {
        security_headers(req);
        http_respond_error(req, status,
                           status == 401   ? "unauthorized"
                           : status == 403 ? "forbidden"
                           : status == 404 ? "not_found"
                                           : "unavailable",
                           status == 401   ? "sign in as the owner, or use the address with its "
                                             "view token (?t=...)"
                           : status == 403 ? "this view token does not open this page"
                           : status == 404 ? "no such page"
                                           : "runs are unavailable on this server");
    }
}

/* With a token: 403 when it is wrong, whether the id exists or not. Without: the owner signed in
 * (owner_status). */
static bool allowed(struct web *srv, h2o_req_t *req, enum page_kind kind, const char *id, bool page)
{
    const char *token = view_token(req);
    int status = 0;
    if (!srv->runs)
        status = 503;
    else if (!token || !*token)
        status = owner_status(srv, req, kind, id);
    else if (!(kind == PAGE_GROUP ? runs_group_view_check(srv->runs, id, token)
                                  : runs_view_check(srv->runs, kind == PAGE_SESSION, id, token)))
        status = 403;
    if (!status)
        return true;
    refuse(req, status, kind, id, page);
    return false;
}

static void respond_json(h2o_req_t *req, json_t *j)
{
    size_t len;
    char *text = json_write_text(j, &len);
    json_decref(j);
    security_headers(req);
    http_add_header(req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    http_respond(req, 200, "application/json", text, len);
    free(text);
}

/* --- the event stream --- */

struct event_stream {
    struct web *srv;
    struct http_stream *s;
    char run_id[64];
    int64_t last_seq;
    int64_t last_write;
    struct loop_timer timer;
    struct buf out;
    size_t batch;
    char phase[RUNS_PHASE_TEXT_MAX]; /* the phase last sent */
    char agent[32];                  /* the run's agent, whose adapter reads its events */
};

static void stream_free(struct event_stream *es)
{
    loop_timer_stop(&es->timer);
    buf_release(&es->out);
    free(es);
}

static void on_stream_close(void *ctx)
{
    stream_free(ctx);
}

/* One stored event as an SSE message: "id: seq", "event: run-event", its JSON on one line. */
static void add_event(const struct store_run_event_row *e, void *ctx)
{
    struct event_stream *es = ctx;
    char when[32];
    time_format_rfc3339(e->time, when);
    json_t *j = json_pack("{s:I, s:s, s:s, s:s}", "seq", (json_int_t)e->seq, "time", when, "type",
                          e->type, "summary", e->summary);
    /* the words of the agent (text, reasoning) and of errors are shown in full, up to a cap */
    json_t *raw = json_loads(e->raw, 0, NULL);
    const char *text = json_string_value(json_object_get(json_object_get(raw, "part"), "text"));
    _cleanup_free_ char *words = text ? NULL : runs_event_words(es->agent, e->type, e->raw);
    if (words)
        text = words;
    if (text) /* cut on a character boundary: jansson refuses half a character */
        json_object_set_new(j, "text",
                            json_stringn(text, utf8_boundary(text, strnlen(text, EVENT_TEXT_MAX))));
    json_decref(raw);
    char *data = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(j);
    buf_printf(&es->out, "id: %lld\nevent: run-event\ndata: ", (long long)e->seq);
    buf_puts(&es->out, data);
    buf_puts(&es->out, "\n\n");
    free(data);
    es->last_seq = e->seq;
    es->batch++;
}

static void pump(struct loop_timer *t)
{
    struct event_stream *es = container_of(t, struct event_stream, timer);
    struct store *st = es->srv->store;
    struct err err = {0};
    es->batch = 0;
    buf_reset(&es->out);
    struct store_run row = {0};
    /* the status first: an event stored after this read is sent on the next round */
    int r = store_run_get(st, NULL, es->run_id, &row, &err);
    bool ended = r == 0 && strcmp(row.status, "queued") != 0 && strcmp(row.status, "running") != 0;
    char status[STORE_RUN_STATUS_MAX];
    snprintf(status, sizeof(status), "%s", row.status);
    if (r == 0)
        snprintf(es->agent, sizeof(es->agent), "%s", row.agent);
    char phase[RUNS_PHASE_TEXT_MAX];
    if (r == 0) {
        runs_phase_text(&row, phase, sizeof(phase));
        if (strcmp(phase, es->phase) != 0) {
            /* "event: phase", {phase, elapsed_seconds} (no id: it is not resumed, but sent anew
             * to each stream) */
            snprintf(es->phase, sizeof(es->phase), "%s", phase);
            json_t *j =
                json_pack("{s:o, s:I}", "phase", runs_phase_describe(&row), "elapsed_seconds",
                          (json_int_t)(runs_elapsed_ms(&row, time_now_ms()) / 1000));
            char *data = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
            json_decref(j);
            buf_printf(&es->out, "event: phase\ndata: %s\n\n", data);
            free(data);
        }
    }
    store_run_release(&row);
    store_run_events(st, es->run_id, es->last_seq, EVENTS_PER_PUMP, add_event, es, &err);
    int64_t now = time_mono_ms();
    if (es->batch == 0 && now - es->last_write >= KEEPALIVE_MS)
        buf_puts(&es->out, ": keep-alive\n\n");
    bool done = r < 0 || (ended && es->batch < EVENTS_PER_PUMP);
    if (done)
        buf_printf(&es->out, "event: end\ndata: {\"status\":\"%s\"}\n\n", r < 0 ? "gone" : status);
    if (es->out.len) {
        http_stream_write(es->s, es->out.data, es->out.len);
        es->last_write = now;
    }
    if (done) {
        http_stream_end(es->s);
        stream_free(es);
        return;
    }
    loop_timer_start(&es->timer, es->batch == EVENTS_PER_PUMP ? 1 : PUMP_MS, pump);
}

static void serve_events(struct web *srv, h2o_req_t *req, const char *run_id)
{
    struct event_stream *es = xcalloc(1, sizeof(*es));
    es->srv = srv;
    snprintf(es->run_id, sizeof(es->run_id), "%s", run_id);
    buf_init(&es->out, 0);
    /* resume after the last event the client has (EventSource sends it on reconnect) */
    const char *last = http_header_str(req, "last-event-id");
    if (last)
        es->last_seq = strtoll(last, NULL, 10);
    if (es->last_seq < 0)
        es->last_seq = 0;
    security_headers(req);
    es->s = http_stream_start(req, 200, "text/event-stream", on_stream_close, es);
    static const char hello[] = "retry: 2000\n\n";
    http_stream_write(es->s, hello, sizeof(hello) - 1);
    es->last_write = time_mono_ms();
    pump(&es->timer);
}

/* --- the diff --- */

/* The stored text as it is (the engine wrote it as JSON): it is large, and read once a page. */
static void serve_diff(struct web *srv, h2o_req_t *req, const char *run_id)
{
    _cleanup_free_ char *diff = NULL;
    struct err err = {0};
    security_headers(req);
    if (store_run_get_diff(srv->store, run_id, &diff, &err) < 0) {
        http_respond_error(req, 403, "forbidden", "this view token does not open this page");
        return;
    }
    http_add_header(req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    http_respond(req, 200, "application/json", diff ? diff : "null", diff ? strlen(diff) : 4);
}

/* GET /runs/<id>/evidence/<n>: an image the run's agent kept as evidence, as it was made */
static void serve_evidence(struct web *srv, h2o_req_t *req, const char *run_id, const char *num)
{
    char mime[32];
    char *end;
    size_t len = 0;
    unsigned long n = strtoul(num, &end, 10);
    security_headers(req);
    _cleanup_free_ char *data =
        *end || n == 0 || n > RUNS_EVIDENCE_MAX
            ? NULL
            : runs_evidence_data(srv->runs, run_id, (unsigned)n, &len, mime);
    if (!data) {
        http_respond_error(req, 404, "not_found", "no such image of this run's");
        return;
    }
    http_add_header(req, H2O_TOKEN_CACHE_CONTROL, "private, max-age=3600");
    http_respond(req, 200, h2o_strdup(&req->pool, mime, SIZE_MAX).base, data, len);
}

/* --- routes --- */

/* "/<prefix>/<id>[/<rest>]": the id (at most 63 characters of [A-Za-z0-9_]) and the rest. */
static bool split_path(h2o_req_t *req, size_t prefix, char id[64], const char **rest)
{
    const char *p = req->path_normalized.base + prefix;
    size_t n = req->path_normalized.len - prefix;
    size_t i = 0;
    while (i < n && p[i] != '/') {
        char c = p[i];
        if (i >= 63 || !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '_'))
            return false;
        id[i] = c;
        i++;
    }
    id[i] = '\0';
    if (i == 0)
        return false;
    char *r = h2o_mem_alloc_pool(&req->pool, n - i + 1);
    memcpy(r, p + i, n - i);
    r[n - i] = '\0';
    *rest = r;
    return true;
}

static bool is_get(h2o_req_t *req)
{
    if (h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) ||
        h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD")))
        return true;
    http_add_header(req, H2O_TOKEN_ALLOW, "GET, HEAD");
    http_respond_error(req, 405, "method_not_allowed", "only GET is served here");
    return false;
}

/* The common part of /runs/ and /sessions/: a GET of "/<kind>s/<id>[/data|/events|/diff]" with the
 * view token of that id. Fills id and rest ("" for the page) or answers and returns false. */
static bool open_target(struct web *srv, h2o_req_t *req, bool session, char id[64],
                        const char **rest)
{
    if (!is_get(req))
        return false;
    if (!split_path(req, strlen(session ? "/sessions/" : "/runs/"), id, rest) ||
        !(!**rest || strcmp(*rest, "/") == 0 || strcmp(*rest, "/data") == 0 ||
          (!session && (strcmp(*rest, "/events") == 0 || strcmp(*rest, "/diff") == 0 ||
                        strncmp(*rest, "/evidence/", 10) == 0)))) {
        http_respond_error(req, 404, "not_found", "no such page");
        return false;
    }
    if (strcmp(*rest, "/") == 0)
        *rest = "";
    return allowed(srv, req, session ? PAGE_SESSION : PAGE_RUN, id, !**rest);
}

static void add_owner(struct web *srv, h2o_req_t *req, enum page_kind kind, const char *id,
                      json_t *data, const char *flag);
static void run_cancel(struct web *srv, struct http_route *route, h2o_req_t *req, const char *id);
static void run_answer(struct web *srv, struct http_route *route, h2o_req_t *req, const char *id);
static void session_follow_up(struct web *srv, struct http_route *route, h2o_req_t *req,
                              const char *id);

/* A POST to "<prefix><id><action>", action one of actions (NULL-terminated): fills id and
 * returns the action's index (its handler then answers), or -2 when answered here (no such
 * action); -1 when it is no POST. */
static int owner_post(h2o_req_t *req, size_t prefix, const char *const *actions, char id[64])
{
    const char *rest;
    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST")))
        return -1;
    if (split_path(req, prefix, id, &rest))
        for (int i = 0; actions[i]; i++)
            if (strcmp(rest, actions[i]) == 0)
                return i;
    http_respond_error(req, 404, "not_found", "no such page");
    return -2;
}

static int on_runs(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    struct web *srv = route->ctx;
    http_request_track(route, req);
    char id[64];
    const char *rest;
    static const char *const actions[] = {"/cancel", "/answer", NULL};
    switch (owner_post(req, strlen("/runs/"), actions, id)) {
    case -1: break;
    case 0: run_cancel(srv, route, req, id); return 0;
    case 1: run_answer(srv, route, req, id); return 0;
    default: return 0;
    }
    if (!open_target(srv, req, false, id, &rest))
        return 0;
    bool page = !*rest;
    if (page) {
        respond_page(req, 200, "run.html");
    } else if (strcmp(rest, "/events") == 0) {
        serve_events(srv, req, id);
    } else if (strcmp(rest, "/diff") == 0) {
        serve_diff(srv, req, id);
    } else if (strncmp(rest, "/evidence/", 10) == 0) {
        serve_evidence(srv, req, id, rest + 10);
    } else {
        struct store_run r = {0};
        struct err err = {0};
        if (store_run_get(srv->store, NULL, id, &r, &err) < 0) {
            http_respond_error(req, 403, "forbidden", "this view token does not open this page");
        } else {
            json_t *d = runs_describe(srv->runs, &r);
            add_owner(srv, req, PAGE_RUN, id, d, "can_act");
            respond_json(req, d);
        }
        store_run_release(&r);
    }
    return 0;
}

struct session_list {
    struct web *srv;
    json_t *runs;
};

static void add_session_run(const struct store_run *r, void *ctx)
{
    struct session_list *l = ctx;
    json_array_append_new(l->runs, runs_describe_short(l->srv->runs, r));
}

static int on_sessions(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    struct web *srv = route->ctx;
    http_request_track(route, req);
    char id[64];
    const char *rest;
    static const char *const actions[] = {"/follow-up", NULL};
    switch (owner_post(req, strlen("/sessions/"), actions, id)) {
    case -1: break;
    case 0: session_follow_up(srv, route, req, id); return 0;
    default: return 0;
    }
    if (!open_target(srv, req, true, id, &rest))
        return 0;
    if (!*rest) {
        respond_page(req, 200, "session.html");
        return 0;
    }
    /* The session's runs, newest first (its owner is whoever owns its first run). */
    struct store_session ses = {0};
    struct err err = {0};
    struct session_list l = {srv, json_array()};
    int64_t gen;
    if (store_view_generation(srv->store, true, id, &gen, &err) == 0 &&
        store_session_get(srv->store, NULL, id, &ses, &err) == 0) {
        struct store_run_list_opts o = {.user_id = ses.user_id, .session_id = id, .limit = 100};
        bool more;
        store_run_list(srv->store, &o, add_session_run, &l, &more, &err);
    }
    char created[32];
    time_format_rfc3339(ses.created_at, created);
    /* its pull request, and whether it still takes steering from it (src/runs/review.c) */
    json_t *pr = json_null();
    if (ses.pr_number > 0)
        pr = json_pack("{s:s, s:I, s:s, s:b, s:b, s:i}", "url", ses.pr_url, "number",
                       (json_int_t)ses.pr_number, "state", ses.pr_state[0] ? ses.pr_state : "open",
                       "steering",
                       strcmp(ses.pr_state, "closed") != 0 && strcmp(ses.pr_state, "merged") != 0,
                       "fix_ci", ses.fix_ci, "ci_fixes", (int)ses.ci_fixes);
    json_t *d = json_pack("{s:s, s:s, s:s, s:o, s:o}", "session_id", id, "agent", ses.agent,
                          "created_at", created, "pull_request", pr, "runs", l.runs);
    add_owner(srv, req, PAGE_SESSION, id, d, "can_act");
    respond_json(req, d);
    return 0;
}

/* --- groups of attempts --- */

/* --- the owner's forms: what the signed-in owner's pages post --- */

#define FOLLOW_UP_MAX                                                                              \
    (16 * 1024) /* bytes of a follow-up from the session page (its form stays                      \
                   within the gate's unauthenticated allowance) */

/* The checks every form of the owner's pages passes: its Origin, a signed-in user, a
 * urlencoded body of at most max bytes (the gate has kept a stranger's larger one out before it
 * was read), and the page's CSRF token. Fills user and f (form_release it), or answers and
 * returns false. Whose the target is, the caller checks. */
static bool page_form(struct web *srv, struct http_route *route, h2o_req_t *req, size_t max,
                      const char *fields, struct store_user *user, struct form *f)
{
    security_headers(req);
    struct err err = {0};
    const char *ct = http_header(req, H2O_TOKEN_CONTENT_TYPE);
    if (!http_check_origin(route->srv, req))
        return false;
    if (!srv->runs || !auth_session_user(srv->auth, req, user)) {
        http_respond_error(req, 401, "unauthorized", "sign in as the owner");
        return false;
    }
    if (!ct || strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0 ||
        req->entity.len > max || form_parse(req->entity.base, req->entity.len, f, &err) < 0) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "send %s as application/x-www-form-urlencoded, at most %zu bytes", fields, max);
        http_respond_error(req, 400, "invalid_request", msg);
        form_release(f);
        return false;
    }
    if (!auth_page_csrf_is(req, form_get(f, "csrf"))) {
        http_respond_error(req, 403, "forbidden",
                           "the form's CSRF token is wrong: reload the page");
        form_release(f);
        return false;
    }
    return true;
}

/* What the owner's pages may do, in their data: can_act, and the CSRF token their forms carry.
 * A view token alone only reads; without one, allowed() found the browser to be the owner's. */
static void add_owner(struct web *srv, h2o_req_t *req, enum page_kind kind, const char *id,
                      json_t *data, const char *flag)
{
    const char *token = view_token(req);
    bool owner = !token || !*token || owner_status(srv, req, kind, id) == 0;
    json_object_set_new(data, flag, json_boolean(owner));
    if (owner)
        json_object_set_new(data, "csrf", json_string(auth_page_csrf(srv->auth, req)));
}

/* POST /groups/<id>/deliver: the owner signed in picks an attempt */
static void group_deliver(struct web *srv, struct http_route *route, h2o_req_t *req, const char *id)
{
    struct store_user user;
    struct form f = {0};
    struct err err = {0};
    if (!page_form(srv, route, req, 4096, "run_id and csrf", &user, &f))
        return;
    const char *run_id = form_get(&f, "run_id");
    if (!run_id) {
        http_respond_error(req, 404, "not_found", "no such attempt of yours");
    } else {
        /* only an attempt of this group, and the user's own */
        struct store_run r = {0};
        char delivery[64] = "";
        int rc = store_run_get(srv->store, user.id, run_id, &r, &err);
        if (rc == 0 && strcmp(r.group_id, id) != 0)
            rc = err_set(&err, -ENOENT, "run %s is not an attempt of group %s", run_id, id);
        store_run_release(&r);
        if (rc == 0)
            rc = runs_deliver_attempt(srv->runs, user.id, run_id, delivery, &err);
        if (rc < 0)
            http_respond_error(req, rc == -ENOENT ? 404 : 409,
                               rc == -ENOENT ? "not_found" : "conflict", err.msg);
        else
            respond_json(req, json_pack("{s:s, s:s}", "run_id", delivery, "attempt", run_id));
    }
    form_release(&f);
}

/* POST /runs/<id>/cancel: the owner signed in stops a run */
static void run_cancel(struct web *srv, struct http_route *route, h2o_req_t *req, const char *id)
{
    struct store_user user;
    struct form f = {0};
    struct err err = {0};
    if (!page_form(srv, route, req, 4096, "csrf", &user, &f))
        return;
    int rc = runs_cancel(srv->runs, user.id, id, &err);
    if (rc == -ENOENT)
        http_respond_error(req, 404, "not_found", "no such run of yours");
    else if (rc < 0)
        http_respond_error(req, 409, "conflict", err.msg);
    else
        respond_json(req, json_pack("{s:s, s:s}", "run_id", id, "status", "cancelled"));
    form_release(&f);
}

/* POST /runs/<id>/answer: the owner signed in answers what the run's agent asks (answer; for a
 * plan, the changes it is approved with, or nothing), question_id naming what they answer */
static void run_answer(struct web *srv, struct http_route *route, h2o_req_t *req, const char *id)
{
    struct store_user user;
    struct form f = {0};
    struct err err = {0};
    if (!page_form(srv, route, req, 3 * RUNS_ANSWER_MAX + 256, "answer, question_id and csrf",
                   &user, &f))
        return;
    const char *answer = form_get(&f, "answer");
    int rc = runs_answer(srv->runs, user.id, id, form_get(&f, "question_id"), answer ? answer : "",
                         "page", &err);
    if (rc == -ENOENT)
        http_respond_error(req, 404, "not_found", "no such run of yours");
    else if (rc == -EINVAL || rc == -E2BIG)
        http_respond_error(req, 400, "invalid_request", err.msg);
    else if (rc < 0)
        http_respond_error(req, 409, "conflict", err.msg);
    else
        respond_json(req, json_pack("{s:s, s:b}", "run_id", id, "answered", 1));
    form_release(&f);
}

/* POST /sessions/<id>/follow-up: the owner signed in queues a run in the session */
static void session_follow_up(struct web *srv, struct http_route *route, h2o_req_t *req,
                              const char *id)
{
    struct store_user user;
    struct form f = {0};
    struct err err = {0};
    /* the task's bytes as a form carries them: up to three for one, and the field's name */
    if (!page_form(srv, route, req, 3 * FOLLOW_UP_MAX + 256, "task and csrf", &user, &f))
        return;
    const char *task = form_get(&f, "task");
    struct runs_submit s = {.user_id = user.id, .task = task, .session_id = id};
    char run_id[64], session_id[64], url[512];
    int rc = !task || !*task || strlen(task) > FOLLOW_UP_MAX
                 ? err_set(&err, -EINVAL, "a follow-up is 1 to %d bytes of text", FOLLOW_UP_MAX)
                 : runs_submit(srv->runs, &s, run_id, session_id, &err);
    if (rc == -ENOENT) {
        http_respond_error(req, 404, "not_found", "no such session of yours");
    } else if (rc < 0) {
        http_respond_error(req, rc == -EINVAL ? 400 : 503,
                           rc == -EINVAL ? "invalid_request" : "unavailable", err.msg);
    } else {
        runs_web_url(srv->runs, false, run_id, url, sizeof(url));
        log_info("web follow-up run=%s session=%s user=%s", run_id, id, user.id);
        respond_json(req, json_pack("{s:s, s:s, s:s}", "run_id", run_id, "session_id", session_id,
                                    "web_url", url));
    }
    form_release(&f);
}

static int on_groups(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    struct web *srv = route->ctx;
    http_request_track(route, req);
    char id[64];
    const char *rest;
    bool post = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"));
    if (!post && !is_get(req))
        return 0;
    if (!split_path(req, strlen("/groups/"), id, &rest) ||
        !(post ? strcmp(rest, "/deliver") == 0
               : !*rest || strcmp(rest, "/") == 0 || strcmp(rest, "/data") == 0)) {
        http_respond_error(req, 404, "not_found", "no such page");
        return 0;
    }
    if (post) {
        group_deliver(srv, route, req, id);
        return 0;
    }
    bool page = !*rest || strcmp(rest, "/") == 0;
    if (!allowed(srv, req, PAGE_GROUP, id, page))
        return 0;
    if (page) {
        respond_page(req, 200, "group.html");
        return 0;
    }
    struct err err = {0};
    json_t *g = runs_describe_group(srv->runs, NULL, id, &err);
    if (!g) {
        http_respond_error(req, 404, "not_found", "no such page");
        return 0;
    }
    /* the owner signed in may pick one (a view token alone only reads) */
    add_owner(srv, req, PAGE_GROUP, id, g, "can_pick");
    respond_json(req, g);
    return 0;
}

static int on_static(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    http_request_track(route, req);
    if (!is_get(req))
        return 0;
    if (h2o_memis(req->path_normalized.base, req->path_normalized.len,
                  H2O_STRLIT("/static/app.js")))
        respond_asset(req, 200, "app.js", "text/javascript; charset=utf-8");
    else if (h2o_memis(req->path_normalized.base, req->path_normalized.len,
                       H2O_STRLIT("/static/app.css")))
        respond_asset(req, 200, "app.css", "text/css; charset=utf-8");
    else if (h2o_memis(req->path_normalized.base, req->path_normalized.len,
                       H2O_STRLIT("/static/icon.svg")) ||
             h2o_memis(req->path_normalized.base, req->path_normalized.len,
                       H2O_STRLIT("/favicon.ico")))
        respond_asset(req, 200, "icon.svg", "image/svg+xml");
    else
        http_respond_error(req, 404, "not_found", "no such file");
    return 0;
}

void web_register(struct http_server *http, struct store *st, struct auth *auth, struct runs *runs)
{
    struct web *w = xcalloc(1, sizeof(*w));
    w->store = st;
    w->auth = auth;
    w->runs = runs;
    http_add_route(http, "/runs/", "/runs", on_runs, w);
    http_add_route(http, "/sessions/", "/sessions", on_sessions, w);
    http_add_route(http, "/groups/", "/groups", on_groups, w);
    http_add_route(http, "/static/", "/static", on_static, NULL);
    http_add_route(http, "/favicon.ico", "/static", on_static, NULL);
}

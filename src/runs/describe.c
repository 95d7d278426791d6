/* Runs as the tools (get_result, list_runs) and the web pages show them. */
#include "runs/runs.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "runs/runs_internal.h"
#include "store/store.h"

#define PREVIEW_CHARS 120
#define RECENT_EVENTS 5

static json_t *time_or_null(int64_t ms)
{
    if (!ms)
        return json_null();
    char buf[32];
    time_format_rfc3339(ms, buf);
    return json_string(buf);
}

static void add_transition(int64_t at, const char *status, const char *reason, void *ctx)
{
    json_array_append_new(ctx, json_pack("{s:s, s:o, s:s}", "status", status, "at",
                                         time_or_null(at), "reason", reason ? reason : ""));
}

static void set_latest(const struct store_run_event_row *e, void *ctx)
{
    json_t **out = ctx;
    json_decref(*out);
    *out = json_pack("{s:I, s:s, s:s, s:o}", "seq", (json_int_t)e->seq, "type", e->type, "summary",
                     e->summary, "time", time_or_null(e->time));
}

json_t *runs_describe(struct runs *e, const struct store_run *r)
{
    struct store *st = runs_store_of(e);
    char url[512], session_url[512];
    runs_web_url_gen(e, r->id, r->view_generation, url, sizeof(url));
    runs_web_url(e, true, r->session_id, session_url, sizeof(session_url));
    json_t *changes = r->changes ? json_loads(r->changes, 0, NULL) : NULL;
    if (!changes)
        changes = json_null();
    json_t *transitions = json_array();
    struct err err = {0};
    store_run_transitions(st, r->id, add_transition, transitions, &err);
    json_t *latest = json_null();
    if (r->event_count > 0)
        store_run_events(st, r->id, r->event_count - 1, 1, set_latest, &latest, &err);
    bool done = r->success >= 0 || r->finished_at;
    json_t *result = json_pack("{s:o, s:s?, s:s?}", "success",
                               done ? json_boolean(r->success == 1) : json_null(), "summary",
                               r->summary, "error", r->error);
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s?, s:s, s:s?, s:s, s:s, s:s?, s:s?, s:o, s:o, s:o, s:o, s:o, "
        "s:{s:I, s:I, s:f}, s:I, s:o, s:o, s:s, s:o}",
        "run_id", r->id, "session_id", r->session_id, "status", r->status, "status_reason",
        r->status_reason, "task", r->task ? r->task : "", "title", r->title, "model", r->model,
        "agent", r->agent, "repository", r->repository, "branch", r->branch[0] ? r->branch : NULL,
        "created_at", time_or_null(r->created_at), "started_at", time_or_null(r->started_at),
        "finished_at", time_or_null(r->finished_at), "result", result, "changes", changes, "usage",
        "input_tokens", (json_int_t)r->input_tokens, "output_tokens", (json_int_t)r->output_tokens,
        "cost", r->cost, "event_count", (json_int_t)r->event_count, "latest_event", latest,
        "transitions", transitions, "web_url", url, "exit_code",
        r->exit_code >= 0 ? json_integer(r->exit_code) : json_null());
    json_object_set_new(j, "session_web_url", json_string(session_url));
    /* what it is doing now (or how it ended), for how long, and its latest work */
    json_object_set_new(j, "phase", runs_phase_describe(r));
    json_object_set_new(j, "elapsed_seconds",
                        json_integer((json_int_t)(runs_elapsed_ms(r, time_now_ms()) / 1000)));
    json_object_set_new(j, "recent_events", runs_recent_events(st, r->id, RECENT_EVENTS));
    if (runs_network_of(e))
        runs_network_flush(runs_network_of(e)); /* what the last moments counted, too */
    json_object_set_new(j, "network", runs_network_summary(st, r));
    /* delivery: what became of the push and the pull request; the pull request on its own */
    json_t *delivery = r->delivery ? json_loads(r->delivery, 0, NULL) : NULL;
    json_t *pr = json_object_get(delivery, "pull_request");
    json_object_set(j, "pull_request", pr ? pr : json_null());
    json_object_set_new(j, "delivery", delivery ? delivery : json_null());
    /* setup: what became of the one that ran before the agent */
    json_t *setup = r->setup_result ? json_loads(r->setup_result, 0, NULL) : NULL;
    json_object_set_new(j, "setup", setup ? setup : json_null());
    if (r->pull_request[0])
        json_object_set_new(j, "pull_request_mode", json_string(r->pull_request));
    json_object_set_new(j, "tests",
                        r->test_outcome[0] ? json_string(r->test_outcome) : json_null());
    if (r->group_id[0]) {
        /* one of several attempts (or the delivery of the one picked): the whole group */
        json_t *group = runs_describe_group(e, r->user_id, r->group_id, &err);
        json_object_set_new(j, "group", group ? group : json_null());
    }
    if (r->delivers[0])
        json_object_set_new(j, "delivers", json_string(r->delivers));
    /* what its agent asks and waits for */
    json_t *question = strcmp(r->phase, "waiting") == 0 ? runs_question_json(st, r->id) : NULL;
    json_object_set_new(j, "question", question ? question : json_null());
    /* images its agent kept as evidence, and where the page finds them */
    json_t *evidence = runs_evidence(e, r->id);
    size_t i;
    json_t *item;
    json_array_foreach(evidence, i, item)
    {
        char at[160];
        snprintf(at, sizeof(at), "/runs/%s/evidence/%zu", r->id, i + 1);
        json_object_set_new(item, "path", json_string(at));
        json_object_del(item, "file");
    }
    json_object_set_new(j, "evidence", evidence);
    /* what its agent opened for the person to look at */
    json_object_set_new(j, "previews",
                        e->previews ? e->previews(e->previews_ctx, r->id) : json_array());
    return j;
}

json_t *runs_describe_short(struct runs *e, const struct store_run *r)
{
    const char *task = r->task ? r->task : "";
    size_t n = strlen(task);
    size_t cut = 0, chars = 0;
    while (cut < n && chars < PREVIEW_CHARS) {
        unsigned char c = (unsigned char)task[cut];
        cut += c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        chars++;
    }
    if (cut > n)
        cut = n;
    char *preview = xasprintf("%.*s%s", (int)cut, task, cut < n ? "…" : "");
    for (char *p = preview; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
    char url[512];
    runs_web_url_gen(e, r->id, r->view_generation, url, sizeof(url));
    json_t *delivery = r->delivery ? json_loads(r->delivery, 0, NULL) : NULL;
    json_t *pr = json_object_get(delivery, "pull_request");
    json_t *j = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s, s:o, s:o, s:o, s:s}", "run_id", r->id,
                          "session_id", r->session_id, "status", r->status, "title", r->title,
                          "task_preview", preview, "model", r->model, "created_at",
                          time_or_null(r->created_at), "finished_at", time_or_null(r->finished_at),
                          "success", r->success >= 0 ? json_boolean(r->success == 1) : json_null(),
                          "web_url", url);
    json_object_set(j, "pull_request", pr ? pr : json_null());
    json_decref(delivery);
    free(preview);
    json_object_set_new(j, "agent", json_string(r->agent));
    if (r->group_id[0])
        json_object_set_new(j, "group_id", json_string(r->group_id));
    return j;
}

struct group_list {
    struct runs *e;
    json_t *attempts;
    const char *picked, *delivery_run, *delivery_status;
    char picked_id[64], delivery_id[64], delivery_st[16];
};

static json_t *int_or(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_incref((json_t *)v) : json_integer(0);
}

static void on_group_member(const struct store_run *r, void *ctx)
{
    struct group_list *g = ctx;
    if (r->delivers[0]) {
        /* the picked attempt's delivery (the last one that did not fail) */
        if (strcmp(r->status, "failed") != 0 && strcmp(r->status, "cancelled") != 0) {
            snprintf(g->picked_id, sizeof(g->picked_id), "%s", r->delivers);
            snprintf(g->delivery_id, sizeof(g->delivery_id), "%s", r->id);
            snprintf(g->delivery_st, sizeof(g->delivery_st), "%s", r->status);
        }
        return;
    }
    char url[512];
    runs_web_url_gen(g->e, r->id, r->view_generation, url, sizeof(url));
    json_t *changes = r->changes ? json_loads(r->changes, 0, NULL) : NULL;
    json_t *delivery = r->delivery ? json_loads(r->delivery, 0, NULL) : NULL;
    json_t *a = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s?, s:s?, s:o, s:o, s:o, s:I, s:s?, s:f, s:I, s:I, s:O?, "
        "s:s, s:s?}",
        "run_id", r->id, "session_id", r->session_id, "agent", r->agent, "model", r->model,
        "status", r->status, "summary", r->summary, "error", r->error, "files_changed",
        int_or(changes, "files_changed"), "insertions", int_or(changes, "insertions"), "deletions",
        int_or(changes, "deletions"), "commits",
        (json_int_t)json_array_size(json_object_get(changes, "commits")), "tests",
        r->test_outcome[0] ? r->test_outcome : NULL, "cost", r->cost, "input_tokens",
        (json_int_t)r->input_tokens, "output_tokens", (json_int_t)r->output_tokens, "delivery",
        delivery, "web_url", url, "base_commit", r->base_commit[0] ? r->base_commit : NULL);
    json_decref(changes);
    json_decref(delivery);
    json_array_append_new(g->attempts, a);
}

json_t *runs_describe_group(struct runs *e, const char *user_id, const char *group_id,
                            struct err *err)
{
    struct group_list g = {.e = e, .attempts = json_array()};
    if (store_group_runs(e->st, user_id, group_id, on_group_member, &g, err) < 0) {
        json_decref(g.attempts);
        return NULL;
    }
    char url[512];
    runs_group_url(e, group_id, url, sizeof(url));
    /* whether they all started from one commit (each clones its branch's head as it starts) */
    const char *base = NULL;
    bool same = true;
    size_t i;
    json_t *a;
    json_array_foreach(g.attempts, i, a)
    {
        const char *b = json_string_value(json_object_get(a, "base_commit"));
        if (b && base && strcmp(b, base) != 0)
            same = false;
        base = b ? b : base;
    }
    json_t *j = json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:o}", "group_id", group_id, "web_url", url,
                          "picked", g.picked_id[0] ? g.picked_id : NULL, "delivery_run",
                          g.delivery_id[0] ? g.delivery_id : NULL, "delivery_status",
                          g.delivery_st[0] ? g.delivery_st : NULL, "attempts", g.attempts);
    json_object_set_new(j, "same_start", json_boolean(same));
    return j;
}

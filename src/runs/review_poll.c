/* The review loop's poller, for a server GitHub cannot reach (no public URL for its webhooks):
 * every GITHUB_POLL_SECONDS the open pull requests of this node's active sessions are read
 * through GitHub's REST API with their owner's credential, and what is new goes through the same
 * rules as a webhook's delivery (runs_review_event): comments, reviews and review comments made
 * since the last look, the pull request's closing, and CI on the head the server pushed.
 *
 * Within GitHub's limits: requests are conditional (If-None-Match with the ETag of the same
 * request's last answer), which GitHub does not count against the rate limit when nothing
 * changed; one session at a time and one request at a time, at most POLL_BATCH sessions a round
 * (the ones looked at longest ago), and a round stops when GitHub says the credential has fewer
 * than POLL_RATE_FLOOR requests left, until its reset. What was read last is the session's
 * poll_cursor (the newest creation time seen), so a restart reads on from there. */
#include "runs/runs_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "github/receiver.h"
#include "github/rest.h"
#include "store/store.h"

#define POLL_BATCH 20                        /* sessions a round */
#define POLL_ACTIVE_MS (14 * 86400 * 1000LL) /* sessions with a run in the last 14 days */
#define POLL_ETAGS 256                       /* requests whose ETag is kept */
#define POLL_CI_SEEN 256                     /* sessions whose last CI verdict is kept */
#define POLL_RATE_FLOOR 100                  /* requests a credential keeps for other uses */

enum poll_step {
    STEP_PULL,
    STEP_COMMENTS,
    STEP_REVIEWS,
    STEP_REVIEW_COMMENTS,
    STEP_CI,
    STEP_DONE,
};

struct poller {
    struct runs *e;
    struct loop_timer timer;
    uint64_t interval_ms;
    char mention[64];
    struct store_session batch[POLL_BATCH];
    size_t n, i;
    enum poll_step step;
    char *cred;
    struct github_call *call;
    char path[400];
    char cursor[32]; /* the newest creation time read in this session's look */
    char head[64];   /* the pull request's head, as its read said */
    int64_t hold_until_ms;
    struct {
        char path[400];
        char etag[128];
        char head[64]; /* a pull request's read: its head, which a 304 does not repeat */
    } etags[POLL_ETAGS];
    size_t next_etag;
    struct {
        char session[64];
        char verdict[80]; /* "<head> failed" or "<head> passed" */
    } ci_seen[POLL_CI_SEEN];
    size_t next_ci;
};

static void poll_next(struct poller *pl);
static void on_timer(struct loop_timer *t);

/* src into dst (cap bytes, cut), which may be parts of the same poller */
static void set_text(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memmove(dst, src, n);
    dst[n] = '\0';
}

static int etag_slot(const struct poller *pl, const char *path)
{
    for (size_t i = 0; i < POLL_ETAGS; i++)
        if (strcmp(pl->etags[i].path, path) == 0)
            return (int)i;
    return -1;
}

static const char *etag_of(struct poller *pl, const char *path)
{
    int i = etag_slot(pl, path);
    return i >= 0 ? pl->etags[i].etag : NULL;
}

static void etag_keep(struct poller *pl, const char *path, const char *etag, const char *head)
{
    if (!etag || !*etag)
        return;
    int i = etag_slot(pl, path);
    size_t slot = i >= 0 ? (size_t)i : pl->next_etag;
    if (i < 0)
        pl->next_etag = (pl->next_etag + 1) % POLL_ETAGS;
    set_text(pl->etags[slot].path, sizeof(pl->etags[0].path), path);
    set_text(pl->etags[slot].etag, sizeof(pl->etags[0].etag), etag);
    set_text(pl->etags[slot].head, sizeof(pl->etags[0].head), head);
}

/* Whether the session's CI was last seen so; records it when not. */
static bool ci_seen(struct poller *pl, const char *session, const char *verdict)
{
    for (size_t i = 0; i < POLL_CI_SEEN; i++)
        if (strcmp(pl->ci_seen[i].session, session) == 0) {
            if (strcmp(pl->ci_seen[i].verdict, verdict) == 0)
                return true;
            snprintf(pl->ci_seen[i].verdict, sizeof(pl->ci_seen[0].verdict), "%s", verdict);
            return false;
        }
    size_t i = pl->next_ci;
    pl->next_ci = (pl->next_ci + 1) % POLL_CI_SEEN;
    set_text(pl->ci_seen[i].session, sizeof(pl->ci_seen[0].session), session);
    set_text(pl->ci_seen[i].verdict, sizeof(pl->ci_seen[0].verdict), verdict);
    return false;
}

static void act(struct poller *pl, struct github_event *ev)
{
    const struct store_session *ses = &pl->batch[pl->i];
    snprintf(ev->repo, sizeof(ev->repo), "%s", ses->pr_repo);
    ev->pr = ses->pr_number;
    struct github_outcome o = {.status = 202};
    runs_review_event(pl->e, ev, &o);
    log_info("review poll event session=%s pr=%lld kind=%d outcome=%s why=\"%s\"", ses->id,
             (long long)ses->pr_number, (int)ev->kind, o.word, o.why);
    github_event_clear(ev);
}

/* The items of a list read that are new (created after the session's cursor), as events. */
static void read_items(struct poller *pl, const json_t *list, enum github_event_kind kind,
                       const char *time_key)
{
    const struct store_session *ses = &pl->batch[pl->i];
    size_t k;
    const json_t *item;
    json_array_foreach(list, k, item)
    {
        const char *at = json_string_value(json_object_get(item, time_key));
        if (!at || strcmp(at, ses->poll_cursor) <= 0)
            continue;
        if (strcmp(at, pl->cursor) > 0)
            snprintf(pl->cursor, sizeof(pl->cursor), "%.31s", at);
        /* a review still pending (not submitted) has no time and is passed over above */
        struct github_event ev = {0};
        github_event_of(kind, item, pl->mention, &ev);
        act(pl, &ev);
    }
}

static void read_ci(struct poller *pl, const json_t *runs)
{
    const struct store_session *ses = &pl->batch[pl->i];
    size_t k;
    const json_t *run, *failed = NULL;
    size_t done = 0, passed = 0;
    json_array_foreach(json_object_get(runs, "workflow_runs"), k, run)
    {
        const char *status = json_string_value(json_object_get(run, "status"));
        const char *c = json_string_value(json_object_get(run, "conclusion"));
        if (!status || strcmp(status, "completed") != 0)
            return; /* still running: its end decides */
        done++;
        if (github_conclusion_failed(c))
            failed = failed ? failed : run;
        else if (c && strcmp(c, "success") == 0)
            passed++;
    }
    if (!done || (!failed && passed == 0))
        return;
    char verdict[80];
    snprintf(verdict, sizeof(verdict), "%.64s %s", pl->head, failed ? "failed" : "passed");
    if (ci_seen(pl, ses->id, verdict))
        return;
    struct github_event ev = {.kind = failed ? GITHUB_EV_CI_FAILED : GITHUB_EV_CI_PASSED};
    snprintf(ev.head, sizeof(ev.head), "%s", pl->head);
    const json_t *named =
        failed ? failed : json_array_get(json_object_get(runs, "workflow_runs"), 0);
    const char *name = json_string_value(json_object_get(named, "name"));
    const char *url = json_string_value(json_object_get(named, "html_url"));
    snprintf(ev.name, sizeof(ev.name), "%s", name ? name : "");
    snprintf(ev.url, sizeof(ev.url), "%s", url ? url : "");
    act(pl, &ev);
}

static void on_answer(void *ctx, const struct github_answer *a)
{
    struct poller *pl = ctx;
    pl->call = NULL;
    const struct store_session *ses = &pl->batch[pl->i];
    if (a->rate_remaining >= 0 && a->rate_remaining < POLL_RATE_FLOOR && a->rate_reset > 0) {
        pl->hold_until_ms = a->rate_reset * 1000;
        log_warn("review poll held session=%s remaining=%ld until=%ld", ses->id, a->rate_remaining,
                 a->rate_reset);
        pl->step = STEP_DONE;
    }
    bool fresh = a->status == 200 && a->json;
    if (pl->step == STEP_PULL) {
        /* the head: as read now, or as the read an unchanged answer stands for said */
        const char *head =
            json_string_value(json_object_get(json_object_get(a->json, "head"), "sha"));
        int slot = etag_slot(pl, pl->path);
        set_text(pl->head, sizeof(pl->head),
                 fresh                           ? (head ? head : "")
                 : a->status == 304 && slot >= 0 ? pl->etags[slot].head
                                                 : "");
    }
    if (a->status == 200)
        etag_keep(pl, pl->path, a->etag, pl->step == STEP_PULL ? pl->head : "");
    if (a->status != 200 && a->status != 304)
        pl->step = STEP_DONE; /* what GitHub refused is logged; the next round tries again */
    switch (pl->step) {
    case STEP_PULL: {
        const char *state = json_string_value(json_object_get(a->json, "state"));
        if (fresh && state && strcmp(state, "closed") == 0) {
            struct github_event ev = {.kind = GITHUB_EV_PR_CLOSED,
                                      .merged = json_is_true(json_object_get(a->json, "merged"))};
            act(pl, &ev);
            pl->step = STEP_DONE;
        } else {
            pl->step = STEP_COMMENTS;
        }
        break;
    }
    case STEP_COMMENTS:
        if (fresh)
            read_items(pl, a->json, GITHUB_EV_COMMENT, "created_at");
        pl->step = STEP_REVIEWS;
        break;
    case STEP_REVIEWS:
        if (fresh)
            read_items(pl, a->json, GITHUB_EV_REVIEW, "submitted_at");
        pl->step = STEP_REVIEW_COMMENTS;
        break;
    case STEP_REVIEW_COMMENTS:
        if (fresh)
            read_items(pl, a->json, GITHUB_EV_REVIEW_COMMENT, "created_at");
        pl->step =
            ses->fix_ci && pl->head[0] && strcmp(pl->head, ses->ci_head) == 0 ? STEP_CI : STEP_DONE;
        break;
    case STEP_CI:
        if (fresh)
            read_ci(pl, a->json);
        pl->step = STEP_DONE;
        break;
    case STEP_DONE: break;
    }
    poll_next(pl);
}

/* The next request of the session's look, or the next session's, or the round's end. */
static void poll_next(struct poller *pl)
{
    struct runs *e = pl->e;
    while (pl->i < pl->n) {
        const struct store_session *ses = &pl->batch[pl->i];
        if (!pl->cred && pl->step != STEP_DONE) {
            pl->cred = runs_github_credential(e, ses->user_id, ses->pr_repo);
            snprintf(pl->cursor, sizeof(pl->cursor), "%s", ses->poll_cursor);
            if (!pl->cred)
                pl->step = STEP_DONE;
        }
        const char *r = ses->pr_repo;
        long long n = (long long)ses->pr_number;
        switch (pl->step) {
        case STEP_PULL: snprintf(pl->path, sizeof(pl->path), "/repos/%s/pulls/%lld", r, n); break;
        case STEP_COMMENTS:
            snprintf(pl->path, sizeof(pl->path),
                     "/repos/%s/issues/%lld/comments?since=%s&per_page=100", r, n,
                     ses->poll_cursor);
            break;
        case STEP_REVIEWS:
            snprintf(pl->path, sizeof(pl->path), "/repos/%s/pulls/%lld/reviews?per_page=100", r, n);
            break;
        case STEP_REVIEW_COMMENTS:
            snprintf(pl->path, sizeof(pl->path),
                     "/repos/%s/pulls/%lld/comments?since=%s&per_page=100", r, n, ses->poll_cursor);
            break;
        case STEP_CI:
            snprintf(pl->path, sizeof(pl->path), "/repos/%s/actions/runs?head_sha=%s&per_page=20",
                     r, pl->head);
            break;
        case STEP_DONE: {
            struct err err = {0};
            bool moved = strcmp(pl->cursor, ses->poll_cursor) > 0;
            if (store_session_set_polled(e->st, ses->id, moved ? pl->cursor : NULL, time_now_ms(),
                                         &err) < 0)
                log_error("review poll not recorded session=%s err=\"%s\"", ses->id, err.msg);
            runs_wipe_free(pl->cred);
            pl->cred = NULL;
            pl->i++;
            pl->step = STEP_PULL;
            if (pl->hold_until_ms > time_now_ms())
                pl->i = pl->n; /* the round ends: GitHub's limit is near */
            continue;
        }
        }
        struct github_request rq = {.api = e->github_api,
                                    .credential = pl->cred,
                                    .method = "GET",
                                    .path = pl->path,
                                    .etag = etag_of(pl, pl->path)};
        pl->call = github_rest_call(e->gh, &rq, on_answer, pl);
        return;
    }
    loop_timer_start(&pl->timer, pl->interval_ms, on_timer);
}

static void on_batch(const struct store_session *s, void *ctx)
{
    struct poller *pl = ctx;
    if (pl->n < POLL_BATCH)
        pl->batch[pl->n++] = *s;
}

static void on_timer(struct loop_timer *t)
{
    struct poller *pl = container_of(t, struct poller, timer);
    int64_t now = time_now_ms();
    if (pl->hold_until_ms > now) {
        loop_timer_start(&pl->timer, (uint64_t)(pl->hold_until_ms - now) + 1000, on_timer);
        return;
    }
    pl->n = pl->i = 0;
    pl->step = STEP_PULL;
    struct err err = {0};
    if (store_sessions_to_poll(pl->e->st, now - POLL_ACTIVE_MS, POLL_BATCH, on_batch, pl, &err) < 0)
        log_error("review poll failed err=\"%s\"", err.msg);
    poll_next(pl);
}

struct poller *review_poller_new(struct runs *e, uint64_t interval_ms, const char *mention)
{
    struct poller *pl = xcalloc(1, sizeof(*pl));
    pl->e = e;
    pl->interval_ms = interval_ms;
    snprintf(pl->mention, sizeof(pl->mention), "%s", mention);
    loop_timer_start(&pl->timer, interval_ms, on_timer);
    return pl;
}

void review_poller_free(struct poller *pl)
{
    if (!pl)
        return;
    loop_timer_stop(&pl->timer);
    github_rest_cancel(pl->call);
    runs_wipe_free(pl->cred);
    free(pl);
}

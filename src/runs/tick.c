/* The run engine's periodic look (runs_tick_start, every RUNS_TICK_MS): runs past their
 * deadline, agents that ended or died, events that arrived without a notice, waits that ran out
 * or whose run another node ended, queued runs to take up and start, sessions past their
 * retention (their sandbox and run directories removed), the pool's prepared agents, and the
 * environment snapshots to sweep or rebuild. The stages it hands runs to are the other files
 * behind runs_internal.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "runs/runs_internal.h"
#include "store/store.h"

#define RETENTION_CHECK_MAX_MS (3600 * 1000)
#define ENV_SWEEP_MS 60000 /* how often dropped snapshots are looked at */

/* A finished run's directory: its files are in the store by now. */
static void remove_run_dir(const struct store_run *run, void *ctx)
{
    struct runs *e = ctx;
    static const char *const files[] = {"events.jsonl", "agent.log", "status", "task.txt",
                                        "repo.tar"};
    char path[PATH_MAX + 32];
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        snprintf(path, sizeof(path), "%s/runs/%s/%s", e->data_dir, run->id, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof(path), "%s/runs/%s", e->data_dir, run->id);
    rmdir(path);
    e->last_removed = run->n;
}

static void on_expired_session(const struct store_session *ses, void *ctx)
{
    struct runs *e = ctx;
    struct err err = {0};
    int r = sandbox_manager_discard(e->mgr, ses->user_id, ses->id, &err);
    if (r < 0 && r != -ENOENT) {
        log_warn("session cleanup deferred session=%s err=\"%s\"", ses->id, err.msg);
        return;
    }
    struct store_run_list_opts o = {.user_id = ses->user_id, .session_id = ses->id, .limit = 100};
    bool more = true;
    while (more) {
        e->last_removed = 0;
        if (store_run_list(e->st, &o, remove_run_dir, e, &more, &err) < 0 || !e->last_removed)
            break;
        o.before = e->last_removed; /* the list is newest first: go on below the last one */
    }
    store_session_mark_cleaned(e->st, ses->id, time_now_ms(), &err);
    log_info("session workspace removed session=%s user=%s", ses->id, ses->user_id);
}

static void on_tick(struct loop_timer *t)
{
    struct runs *e = container_of(t, struct runs, tick);
    int64_t now = time_mono_ms();
    for (struct run *r = e->runs, *next; r; r = next) {
        next = r->next;
        if (r->phase == PH_FINISHING && r->end_pending && !r->dv && !r->ex) {
            run_record_end(r, r->changes, r->end_delivery); /* may free it */
            continue;
        }
        if (r->phase == PH_QUEUED || r->phase == PH_FINISHING)
            continue;
        if (r->began && !r->wait_since && now >= r->deadline && !r->timed_out) {
            r->timed_out = true;
            log_info("run timed out run=%s", r->id);
            if (r->phase != PH_ACQUIRE)
                run_finish(r);
            continue;
        }
        if (r->phase == PH_AGENT) {
            run_ingest(r);
            run_check_output(r);
            if (run_agent_ended(r))
                run_finish(r);
        }
    }
    for (struct runs_waiter **pp = &e->waiters; *pp;) {
        struct runs_waiter *w = *pp;
        if (now >= w->deadline || (w->elsewhere && !runs_active_elsewhere(e, w->run_id))) {
            *pp = w->next;
            w->cb(w->ctx);
            free(w);
        } else {
            pp = &w->next;
        }
    }
    runs_ask_tick(e);
    runs_take_queued(e);
    runs_schedule(e);
    if (e->cfg.retention_ms && now >= e->next_retention) {
        /* often enough that a workspace outlives its retention by at most a quarter of it */
        uint64_t every = e->cfg.retention_ms / 4;
        e->next_retention =
            now + (int64_t)(every < 1000                     ? 1000
                            : every > RETENTION_CHECK_MAX_MS ? RETENTION_CHECK_MAX_MS
                                                             : every);
        struct err err = {0};
        store_session_list_expired(e->st, time_now_ms() - (int64_t)e->cfg.retention_ms,
                                   on_expired_session, e, &err);
    }
    runs_pool_check(e, false);
    if (envs_enabled(e) && now >= e->next_env_sweep) {
        /* snapshots aged out, and dropped ones no sandbox starts on any more */
        e->next_env_sweep = now + ENV_SWEEP_MS;
        envs_sweep(e);
        envs_rebuild_due(e);
    }
    loop_timer_start(&e->tick, RUNS_TICK_MS, on_tick);
}

void runs_tick_start(struct runs *e)
{
    loop_timer_start(&e->tick, RUNS_TICK_MS, on_tick);
}

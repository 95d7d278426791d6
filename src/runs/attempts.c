/* Attempts: several runs at one task, started together (runs_submit_attempts, submit.c), each in
 * a session of its own, sharing a group, all from one commit (the first ready records it, the
 * others check it out: workspace.c). None pushes at its end: an attempt that would deliver
 * commits its leftovers and keeps its commits on its session's branch, its delivery "held"
 * (finish.c). The user picks one (deliver_run, or the button on the group's page): a run without
 * an agent is queued in the picked attempt's session, with `delivers` naming the attempt; it
 * goes through the workspace stage like any later run of the session, then counts its changes
 * from the attempt's starting commit and delivers them as the attempt would have at its end.
 * The other attempts' sessions stay, to be continued or left to retention.
 *
 * The rule of this file: a group is only what the store holds (runs sharing a group_id); nothing
 * of it is kept in memory. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "store/store.h"

void attempt_deliver_now(struct run *r)
{
    struct runs *e = r->e;
    struct err err = {0};
    _cleanup_(store_run_release) struct store_run a = {0};
    if (store_run_get(e->st, r->user_id, r->delivers, &a, &err) < 0) {
        run_fail(r, "the attempt %s cannot be delivered: %s", r->delivers, err.msg);
        return;
    }
    /* its changes are the attempt's: from where the attempt started */
    snprintf(r->base, sizeof(r->base), "%s", a.base_commit);
    char what[256];
    snprintf(what, sizeof(what), "delivering attempt %s (%s, %s)", a.id, a.agent, a.model);
    /* the attempt's summary becomes this run's, for its pull request */
    run_server_words(
        r, "delivering", what, a.summary && *a.summary ? a.summary : NULL,
        json_pack("{s:s, s:s, s:s}", "attempt", a.id, "agent", a.agent, "model", a.model));
    log_info("run delivers attempt run=%s attempt=%s group=%s", r->id, a.id, r->group_id);
    r->exited = true;
    r->exit_code = 0;
    run_finish(r);
}

struct picked {
    const char *attempt;
    char failed[64]; /* an attempt whose delivery failed or was cancelled (it may be picked over) */
    char mine[64];   /* a delivery of this attempt still good (queued, running or succeeded) */
    char other[64];  /* another attempt's */
    char other_attempt[64];
};

static void on_group_run(const struct store_run *row, void *ctx)
{
    struct picked *p = ctx;
    if (!row->delivers[0])
        return;
    if (strcmp(row->status, "failed") == 0 || strcmp(row->status, "cancelled") == 0) {
        snprintf(p->failed, sizeof(p->failed), "%s", row->delivers);
        return;
    }
    if (strcmp(row->delivers, p->attempt) == 0)
        snprintf(p->mine, sizeof(p->mine), "%s", row->id);
    else if (!p->other[0]) {
        snprintf(p->other, sizeof(p->other), "%s", row->id);
        snprintf(p->other_attempt, sizeof(p->other_attempt), "%s", row->delivers);
    }
}

int runs_deliver_attempt(struct runs *e, const char *user_id, const char *run_id,
                         char delivery_run[64], struct err *err)
{
    _cleanup_(store_run_release) struct store_run a = {0};
    int rc = store_run_get(e->st, user_id, run_id, &a, err);
    if (rc < 0)
        return rc;
    if (!a.group_id[0] || a.delivers[0])
        return err_set(err, -EINVAL,
                       "run %s is not one of several attempts: a run on its own delivers at its "
                       "end",
                       run_id);
    struct picked p = {.attempt = a.id};
    if ((rc = store_group_runs(e->st, user_id, a.group_id, on_group_run, &p, err)) < 0)
        return rc;
    if (p.mine[0]) {
        snprintf(delivery_run, 64, "%s", p.mine);
        return 0;
    }
    if (p.other[0]) {
        snprintf(delivery_run, 64, "%s", p.other);
        return err_set(err, -EALREADY,
                       "attempt %s of group %s was picked already (its delivery is run %s)",
                       p.other_attempt, a.group_id, p.other);
    }
    if (strcmp(a.status, "succeeded") != 0)
        return err_set(err, -EINVAL, "attempt %s %s: only one that succeeded is delivered", a.id,
                       strcmp(a.status, "queued") == 0 || strcmp(a.status, "running") == 0
                           ? "has not ended yet"
                           : a.status);
    json_auto_t *d = a.delivery ? json_loads(a.delivery, 0, NULL) : NULL;
    const char *status = json_string_value(json_object_get(d, "status"));
    if (!status || strcmp(status, "held") != 0) {
        const char *why = json_string_value(json_object_get(d, "reason"));
        return err_set(err, -EINVAL, "attempt %s has nothing to deliver%s%s", a.id, why ? ": " : "",
                       why ? why : "");
    }
    struct store_session ses = {0};
    if ((rc = store_session_get(e->st, user_id, a.session_id, &ses, err)) < 0)
        return rc;
    if (ses.cleaned_at)
        return err_set(err, -ENOENT, "attempt %s's session has expired (its workspace was removed)",
                       a.id);
    /* one pick a group, whichever node is asked: a compare-and-set on the group's row (none
     * when its attempts never had a workspace, and then none has anything to deliver) */
    char current[64];
    rc = store_group_pick(e->st, a.group_id, p.failed, a.id, current, err);
    if (rc == 0)
        return err_set(err, -EALREADY, "attempt %s of group %s was picked already%s", current,
                       a.group_id,
                       strcmp(current, a.id) == 0 ? " (on another node: ask again shortly)" : "");
    if (rc < 0 && rc != -ENOENT)
        return rc;
    _cleanup_free_ char *task = xasprintf("Deliver attempt %s: push its commits and open its pull "
                                          "request",
                                          a.id);
    struct store_run row = {0};
    id_new("run", row.id);
    snprintf(row.user_id, sizeof(row.user_id), "%s", user_id);
    snprintf(row.session_id, sizeof(row.session_id), "%s", a.session_id);
    snprintf(row.model, sizeof(row.model), "%s", a.model);
    snprintf(row.agent, sizeof(row.agent), "%s", a.agent);
    snprintf(row.group_id, sizeof(row.group_id), "%s", a.group_id);
    snprintf(row.delivers, sizeof(row.delivers), "%s", a.id);
    snprintf(row.network, sizeof(row.network), "%s", a.network);
    snprintf(row.pull_request, sizeof(row.pull_request), "%s", a.pull_request);
    row.task = task;
    row.title = a.title;
    row.repository = a.repository;
    row.status_reason = (char *)"picked";
    row.timeout_ms = (int64_t)e->cfg.timeout_ms;
    row.created_at = time_now_ms();
    if ((rc = store_run_insert(e->st, &row, err)) < 0)
        return rc;
    log_info("run attempt picked group=%s attempt=%s run=%s user=%s", a.group_id, a.id, row.id,
             user_id);
    snprintf(delivery_run, 64, "%s", row.id);
    run_queued(e, &row, ses.node_id);
    return 0;
}

/* Runs, their transitions and their events, and the view links of runs and sessions (the
 * sessions themselves are sessions.c's). */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "base/buf.h"
#include "store/store_internal.h"

static void text_col(char *dst, size_t cap, struct db_stmt *s, int col)
{
    const char *t = db_col_text(s, col);
    snprintf(dst, cap, "%s", t ? t : "");
}

static char *dup_col(struct db_stmt *s, int col)
{
    const char *t = db_col_text(s, col);
    return t ? xstrdup(t) : NULL;
}

/* --- runs --- */

#define RUN_COLUMNS                                                                                \
    "n, id, user_id, session_id, status, model, agent, coalesce(branch, ''), "                     \
    "coalesce(workdir, ''), coalesce(base_commit, ''), task, title, repository, status_reason, "   \
    "summary, error, changes, timeout_ms, created_at, coalesce(started_at, 0), "                   \
    "coalesce(finished_at, 0), coalesce(agent_pid, 0), events_offset, event_count, "               \
    "coalesce(exit_code, -1), coalesce(success, -1), input_tokens, output_tokens, cost, "          \
    "view_generation, coalesce(network, ''), coalesce(pull_request, ''), delivery, "               \
    "coalesce(phase, ''), phase_step, phase_detail, coalesce(phase_at, 0), setup, setup_result, "  \
    "rebuild, group_id, delivers, test_outcome, origin, plan_first, question_timeout_s"

static void read_run(struct db_stmt *s, struct store_run *r)
{
    memset(r, 0, sizeof(*r));
    r->n = db_col_int64(s, 0);
    text_col(r->id, sizeof(r->id), s, 1);
    text_col(r->user_id, sizeof(r->user_id), s, 2);
    text_col(r->session_id, sizeof(r->session_id), s, 3);
    text_col(r->status, sizeof(r->status), s, 4);
    text_col(r->model, sizeof(r->model), s, 5);
    text_col(r->agent, sizeof(r->agent), s, 6);
    text_col(r->branch, sizeof(r->branch), s, 7);
    text_col(r->workdir, sizeof(r->workdir), s, 8);
    text_col(r->base_commit, sizeof(r->base_commit), s, 9);
    r->task = dup_col(s, 10);
    r->title = dup_col(s, 11);
    r->repository = dup_col(s, 12);
    r->status_reason = dup_col(s, 13);
    r->summary = dup_col(s, 14);
    r->error = dup_col(s, 15);
    r->changes = dup_col(s, 16);
    r->timeout_ms = db_col_int64(s, 17);
    r->created_at = db_col_int64(s, 18);
    r->started_at = db_col_int64(s, 19);
    r->finished_at = db_col_int64(s, 20);
    r->agent_pid = db_col_int64(s, 21);
    r->events_offset = db_col_int64(s, 22);
    r->event_count = db_col_int64(s, 23);
    r->exit_code = db_col_int(s, 24);
    r->success = db_col_int(s, 25);
    r->input_tokens = db_col_int64(s, 26);
    r->output_tokens = db_col_int64(s, 27);
    r->cost = db_col_double(s, 28);
    r->view_generation = db_col_int64(s, 29);
    text_col(r->network, sizeof(r->network), s, 30);
    text_col(r->pull_request, sizeof(r->pull_request), s, 31);
    r->delivery = dup_col(s, 32);
    text_col(r->phase, sizeof(r->phase), s, 33);
    r->phase_step = db_col_int64(s, 34);
    r->phase_detail = dup_col(s, 35);
    r->phase_at = db_col_int64(s, 36);
    r->setup = dup_col(s, 37);
    r->setup_result = dup_col(s, 38);
    text_col(r->rebuild, sizeof(r->rebuild), s, 39);
    text_col(r->group_id, sizeof(r->group_id), s, 40);
    text_col(r->delivers, sizeof(r->delivers), s, 41);
    text_col(r->test_outcome, sizeof(r->test_outcome), s, 42);
    r->origin = dup_col(s, 43);
    r->plan_first = db_col_int64(s, 44) != 0;
    r->question_timeout_s = db_col_int64(s, 45);
}

void store_run_release(struct store_run *r)
{
    if (!r)
        return;
    free(r->task);
    free(r->title);
    free(r->repository);
    free(r->status_reason);
    free(r->summary);
    free(r->error);
    free(r->changes);
    free(r->delivery);
    free(r->phase_detail);
    free(r->setup);
    free(r->setup_result);
    free(r->origin);
    r->task = r->title = r->repository = r->status_reason = r->summary = r->error = r->changes =
        r->delivery = r->phase_detail = r->setup = r->setup_result = NULL;
}

static int add_transition(struct store *st, const char *id, const char *status, const char *reason,
                          int64_t at, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st, "INSERT INTO run_transitions(run_id, at, status, reason) VALUES (?, ?, ?, ?)", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    db_bind_int64(s, 2, at);
    db_bind_text(s, 3, status);
    db_bind_text(s, 4, reason);
    return store_step_done(st, s, "record transition", err);
}

int store_run_insert(struct store *st, const struct store_run *run, struct err *err)
{
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        r = store_prepare(
            st,
            "INSERT INTO runs(id, user_id, session_id, status, status_reason, task, "
            "title, model, agent, repository, branch, timeout_ms, created_at, network, "
            "pull_request, phase, phase_at, setup, rebuild, group_id, delivers, origin, "
            "plan_first, "
            "question_timeout_s) VALUES "
            "(?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, nullif(?, ''), ?, ?12, nullif(?, ''), "
            "nullif(?, ''), 'queued', ?12, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
            &s, err);
        if (r == 0) {
            db_bind_text(s, 1, run->id);
            db_bind_text(s, 2, run->user_id);
            db_bind_text(s, 3, run->session_id);
            db_bind_text(s, 4, run->status_reason);
            db_bind_text(s, 5, run->task);
            db_bind_text(s, 6, run->title);
            db_bind_text(s, 7, run->model);
            db_bind_text(s, 8, run->agent);
            db_bind_text(s, 9, run->repository);
            db_bind_text(s, 10, run->branch);
            db_bind_int64(s, 11, run->timeout_ms);
            db_bind_int64(s, 12, run->created_at);
            db_bind_text(s, 13, run->network);
            db_bind_text(s, 14, run->pull_request);
            db_bind_text(s, 15, run->setup);
            db_bind_text(s, 16, run->rebuild);
            db_bind_text(s, 17, run->group_id);
            db_bind_text(s, 18, run->delivers);
            db_bind_text(s, 19, run->origin ? run->origin : "");
            db_bind_int64(s, 20, run->plan_first);
            db_bind_int64(s, 21, run->question_timeout_s);
            r = store_step_done(st, s, "insert run", err);
        }
    }
    if (r == 0)
        r = add_transition(st, run->id, "queued", run->status_reason, run->created_at, err);
    if (r < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    return store_exec(st, "COMMIT", err);
}

int store_run_get(struct store *st, const char *user_id, const char *id, struct store_run *out,
                  struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
#define BY_ID "SELECT " RUN_COLUMNS " FROM runs WHERE id = ?"
    int r = store_find_row(st, BY_ID, BY_ID " AND user_id = ?", id, user_id, "run", &s, err);
#undef BY_ID
    if (r < 0)
        return r;
    read_run(s, out);
    return 0;
}

/* Whether user_id has fewer than limit runs running, on any node: 1, 0, or < 0. Within a
 * transaction, after locking the user's row, so that nodes starting runs of one user at once
 * count one after the other (SQLite's write lock does that by itself). */
static int under_run_limit(struct store *st, const char *user_id, unsigned limit, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *lock = NULL;
    int r = store_prepare(st, "SELECT id FROM users WHERE id = ? FOR UPDATE", &lock, err);
    if (r < 0)
        return r;
    db_bind_text(lock, 1, user_id);
    int rc = db_step(lock);
    if (rc != DB_ROW && rc != DB_DONE)
        return store_fail(st, rc, "lock user", err);
    _cleanup_stmt_ struct db_stmt *s = NULL;
    if ((r = store_prepare(st, "SELECT count(*) FROM runs WHERE user_id = ? AND status = 'running'",
                           &s, err)) < 0)
        return r;
    db_bind_text(s, 1, user_id);
    if ((rc = db_step(s)) != DB_ROW)
        return store_fail(st, rc, "count runs", err);
    return db_col_int64(s, 0) < (int64_t)limit;
}

/* Whether run id rebuilds an environment snapshot: 1, 0, or < 0. */
static int is_rebuild(struct store *st, const char *id, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT rebuild FROM runs WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    int rc = db_step(s);
    if (rc != DB_ROW && rc != DB_DONE)
        return store_fail(st, rc, "read run", err);
    const char *t = rc == DB_ROW ? db_col_text(s, 0) : NULL;
    return t && *t ? 1 : 0;
}

/* store_run_transition, and more: only from queued (queued_only), and only while the run's user
 * is under a limit of running runs (limit_user set). */
static int run_move(struct store *st, const char *id, const char *status, const char *reason,
                    int64_t at, bool queued_only, const char *limit_user, unsigned limit,
                    struct err *err)
{
    bool final = strcmp(status, "queued") != 0 && strcmp(status, "running") != 0;
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    if (limit_user && (r = under_run_limit(st, limit_user, limit, err)) == 0)
        r = err_set(err, -EBUSY, "the user has %u runs running", limit);
    if (r >= 0) {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        r = store_prepare(
            st,
            "UPDATE runs SET status = ?1, status_reason = ?2, "
            "started_at = CASE WHEN ?1 = 'running' THEN coalesce(started_at, ?3) ELSE started_at "
            "END, finished_at = CASE WHEN ?4 <> 0 THEN ?3 ELSE finished_at END "
            "WHERE id = ?5 AND (status = 'queued' OR (?6 = 0 AND status = 'running'))",
            &s, err);
        if (r == 0) {
            db_bind_text(s, 1, status);
            db_bind_text(s, 2, reason);
            db_bind_int64(s, 3, at);
            db_bind_int64(s, 4, final);
            db_bind_text(s, 5, id);
            db_bind_int64(s, 6, queued_only);
            r = store_step_done(st, s, "update run status", err);
            if (r == 0 && db_changes(st) == 0)
                r = queued_only ? err_set(err, -EALREADY, "run '%s' is no longer queued", id)
                                : err_set(err, -EALREADY, "run '%s' has already ended", id);
        }
    }
    if (r == 0)
        r = add_transition(st, id, status, reason, at, err);
    if (r == 0 && final && (r = is_rebuild(st, id, err)) == 0) {
        /* the run's end and its notification are one write (an environment's rebuild has
         * nobody to tell) */
        char type[32];
        snprintf(type, sizeof(type), "run.%s", status);
        r = store_notify_enqueue(st, type, id, NULL, at, err);
    }
    if (r < 0 || (r = store_exec(st, "COMMIT", err)) < 0) {
        store_exec(st, "ROLLBACK", NULL);
        st->notify_queued = false;
        return r;
    }
    store_notify_committed(st);
    return 0;
}

int store_run_transition(struct store *st, const char *id, const char *status, const char *reason,
                         int64_t at, struct err *err)
{
    return run_move(st, id, status, reason, at, false, NULL, 0, err);
}

int store_run_start(struct store *st, const char *id, const char *user_id, unsigned limit,
                    const char *reason, int64_t at, struct err *err)
{
    return run_move(st, id, "running", reason, at, true, user_id, limit, err);
}

int store_run_end_queued(struct store *st, const char *id, const char *status, const char *reason,
                         int64_t at, struct err *err)
{
    return run_move(st, id, status, reason, at, true, NULL, 0, err);
}

int store_user_runs(struct store *st, const char *user_id, int64_t *running, int64_t *queued,
                    struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT status, count(*) FROM runs WHERE user_id = ? AND status IN "
                          "('queued', 'running') GROUP BY status",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    *running = *queued = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW)
        *(strcmp(db_col_text(s, 0), "running") == 0 ? running : queued) = db_col_int64(s, 1);
    return rc == DB_DONE ? 0 : store_fail(st, rc, "count runs", err);
}

int store_run_set_started(struct store *st, const char *id, const char *workdir, const char *branch,
                          const char *base_commit, int64_t agent_pid, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE runs SET workdir = ?, branch = nullif(?, ''), base_commit = "
                          "nullif(?, ''), agent_pid = nullif(?, 0) WHERE id = ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, workdir);
    db_bind_text(s, 2, branch);
    db_bind_text(s, 3, base_commit);
    db_bind_int64(s, 4, agent_pid);
    db_bind_text(s, 5, id);
    return store_step_done(st, s, "record run start", err);
}

int store_run_set_phase(struct store *st, const char *id, const char *phase, int64_t step,
                        const char *detail, int64_t at, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r =
        store_prepare(st,
                      "UPDATE runs SET phase = ?, phase_step = ?, phase_detail = nullif(?, ''), "
                      "phase_at = ? WHERE id = ?",
                      &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, phase);
    db_bind_int64(s, 2, step);
    db_bind_text(s, 3, detail);
    db_bind_int64(s, 4, at);
    db_bind_text(s, 5, id);
    return store_step_done(st, s, "record run phase", err);
}

int store_run_set_tests(struct store *st, const char *id, const char *outcome, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE runs SET test_outcome = ? WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, outcome);
    db_bind_text(s, 2, id);
    return store_step_done(st, s, "record run tests", err);
}

int store_run_set_outcome(struct store *st, const char *id, int success, const char *summary,
                          const char *error, const char *changes, int exit_code, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE runs SET success = ?, summary = coalesce(?, summary), error = "
                          "coalesce(?, error), changes = ?, "
                          "exit_code = nullif(?, -1) WHERE id = ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, success);
    db_bind_text(s, 2, summary);
    db_bind_text(s, 3, error);
    db_bind_text(s, 4, changes);
    db_bind_int64(s, 5, exit_code);
    db_bind_text(s, 6, id);
    return store_step_done(st, s, "record run outcome", err);
}

int store_run_set_setup_result(struct store *st, const char *id, const char *result,
                               struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE runs SET setup_result = ? WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, result);
    db_bind_text(s, 2, id);
    return store_step_done(st, s, "record run setup", err);
}

int store_run_set_delivery(struct store *st, const char *id, const char *delivery, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE runs SET delivery = ? WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, delivery);
    db_bind_text(s, 2, id);
    return store_step_done(st, s, "record run delivery", err);
}

int store_run_set_diff(struct store *st, const char *id, const char *diff, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE runs SET diff = ? WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, diff);
    db_bind_text(s, 2, id);
    return store_step_done(st, s, "record run diff", err);
}

int store_run_get_diff(struct store *st, const char *id, char **out, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    *out = NULL;
    int r =
        store_find_row(st, "SELECT diff FROM runs WHERE id = ?", NULL, id, NULL, "run", &s, err);
    if (r < 0)
        return r;
    *out = dup_col(s, 0);
    return 0;
}

int store_run_add_events(struct store *st, const char *run_id, const struct store_run_event *ev,
                         size_t n, int64_t new_offset, struct err *err)
{
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    int64_t in = 0, out = 0;
    double cost = 0;
    const char *text = NULL, *error = NULL;
    {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        r = store_prepare(st,
                          "INSERT INTO run_events(run_id, seq, time, type, summary, raw) "
                          "SELECT ?1, event_count + 1, ?2, ?3, ?4, ?5 FROM runs WHERE id = ?1",
                          &s, err);
        _cleanup_stmt_ struct db_stmt *bump = NULL;
        if (r == 0)
            r = store_prepare(st, "UPDATE runs SET event_count = event_count + 1 WHERE id = ?",
                              &bump, err);
        for (size_t i = 0; r == 0 && i < n; i++) {
            db_reset(s);
            db_bind_text(s, 1, run_id);
            db_bind_int64(s, 2, ev[i].time);
            db_bind_text(s, 3, ev[i].type);
            db_bind_text(s, 4, ev[i].summary);
            db_bind_text(s, 5, ev[i].raw);
            r = store_step_done(st, s, "insert run event", err);
            if (r == 0) {
                db_reset(bump);
                db_bind_text(bump, 1, run_id);
                r = store_step_done(st, bump, "count run event", err);
            }
            if (ev[i].text)
                text = ev[i].text;
            if (ev[i].error)
                error = ev[i].error;
            in += ev[i].input_tokens;
            out += ev[i].output_tokens;
            cost += ev[i].cost;
        }
    }
    if (r == 0) {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        r = store_prepare(st,
                          "UPDATE runs SET events_offset = "
                          "CASE WHEN ?1 < 0 THEN events_offset ELSE ?1 END, "
                          "input_tokens = input_tokens + ?, "
                          "output_tokens = output_tokens + ?, cost = cost + ?, summary = "
                          "coalesce(?, summary), error = coalesce(?, error) WHERE id = ?",
                          &s, err);
        if (r == 0) {
            db_bind_int64(s, 1, new_offset);
            db_bind_int64(s, 2, in);
            db_bind_int64(s, 3, out);
            db_bind_double(s, 4, cost);
            db_bind_text(s, 5, text);
            db_bind_text(s, 6, error);
            db_bind_text(s, 7, run_id);
            r = store_step_done(st, s, "advance run offset", err);
        }
    }
    if (r < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    return store_exec(st, "COMMIT", err);
}

int store_run_list(struct store *st, const struct store_run_list_opts *o,
                   void (*fn)(const struct store_run *r, void *ctx), void *ctx, bool *more,
                   struct err *err)
{
    /* One statement per filter, each walking its own index backwards from the cursor. */
    static const char *const sql[] = {
        "SELECT " RUN_COLUMNS " FROM runs INDEXED BY runs_user WHERE user_id = ?1 AND n < ?4 "
        "AND created_at < ?6 AND rebuild = '' ORDER BY n DESC LIMIT ?5",
        "SELECT " RUN_COLUMNS " FROM runs INDEXED BY runs_session WHERE session_id = ?2 AND "
        "user_id = ?1 AND n < ?4 AND created_at < ?6 AND rebuild = '' ORDER BY n DESC LIMIT ?5",
        "SELECT " RUN_COLUMNS " FROM runs INDEXED BY runs_user_status WHERE user_id = ?1 AND "
        "status = ?3 AND n < ?4 AND created_at < ?6 AND rebuild = '' ORDER BY n DESC LIMIT ?5",
        "SELECT " RUN_COLUMNS " FROM runs INDEXED BY runs_session WHERE session_id = ?2 AND "
        "user_id = ?1 AND status = ?3 AND n < ?4 AND created_at < ?6 AND rebuild = '' ORDER BY n "
        "DESC LIMIT ?5",
    };
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, sql[(o->session_id ? 1 : 0) + (o->status ? 2 : 0)], &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, o->user_id);
    db_bind_text(s, 2, o->session_id);
    db_bind_text(s, 3, o->status);
    db_bind_int64(s, 4, o->before > 0 ? o->before : INT64_MAX);
    db_bind_int64(s, 5, (int64_t)o->limit + 1);
    db_bind_int64(s, 6, o->created_before > 0 ? o->created_before : INT64_MAX);
    unsigned seen = 0;
    int rc;
    *more = false;
    while ((rc = db_step(s)) == DB_ROW) {
        if (seen++ == o->limit) {
            *more = true;
            break;
        }
        struct store_run run;
        read_run(s, &run);
        fn(&run, ctx);
        store_run_release(&run);
    }
    return rc == DB_DONE || rc == DB_ROW ? 0 : store_fail(st, rc, "list runs", err);
}

int store_group_runs(struct store *st, const char *user_id, const char *group_id,
                     void (*fn)(const struct store_run *r, void *ctx), void *ctx, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT " RUN_COLUMNS " FROM runs WHERE group_id = ?1 AND group_id <> '' "
                          "AND (?2 IS NULL OR user_id = ?2) ORDER BY n LIMIT 16",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, group_id);
    if (user_id)
        db_bind_text(s, 2, user_id);
    else
        db_bind_null(s, 2);
    int rc, found = 0;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_run run;
        read_run(s, &run);
        fn(&run, ctx);
        store_run_release(&run);
        found++;
    }
    if (rc != DB_DONE)
        return store_fail(st, rc, "list a group's runs", err);
    return found ? 0 : err_set(err, -ENOENT, "no run group '%.64s'", group_id);
}

int store_run_list_active(struct store *st, void (*fn)(const struct store_run *r, void *ctx),
                          void *ctx, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r =
        store_prepare(st,
                      "SELECT " RUN_COLUMNS " FROM runs WHERE status IN ('queued', 'running') "
                      "AND session_id IN (SELECT id FROM sessions WHERE node_id = ?) ORDER BY n",
                      &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, st->node_id);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_run run;
        read_run(s, &run);
        fn(&run, ctx);
        store_run_release(&run);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list active runs", err);
}

/* Events by sql, which binds the run, a seq bound and a limit. */
static int list_events(struct store *st, const char *sql, const char *run_id, int64_t bound,
                       unsigned limit, void (*fn)(const struct store_run_event_row *e, void *ctx),
                       void *ctx, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, sql, &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, run_id);
    db_bind_int64(s, 2, bound);
    db_bind_int64(s, 3, limit);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_run_event_row e = {
            .seq = db_col_int64(s, 0),
            .time = db_col_int64(s, 1),
            .type = db_col_text(s, 2),
            .summary = db_col_text(s, 3),
            .raw = db_col_text(s, 4),
        };
        fn(&e, ctx);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list run events", err);
}

int store_run_events(struct store *st, const char *run_id, int64_t after, unsigned limit,
                     void (*fn)(const struct store_run_event_row *e, void *ctx), void *ctx,
                     struct err *err)
{
    return list_events(st,
                       "SELECT seq, time, type, summary, raw FROM run_events WHERE run_id = ? "
                       "AND seq > ? ORDER BY seq LIMIT ?",
                       run_id, after, limit, fn, ctx, err);
}

int store_run_events_back(struct store *st, const char *run_id, int64_t before, unsigned limit,
                          void (*fn)(const struct store_run_event_row *e, void *ctx), void *ctx,
                          struct err *err)
{
    return list_events(st,
                       "SELECT seq, time, type, summary, '' FROM run_events WHERE run_id = ? "
                       "AND seq < ? ORDER BY seq DESC LIMIT ?",
                       run_id, before > 0 ? before : INT64_MAX, limit, fn, ctx, err);
}

int store_run_transitions(struct store *st, const char *run_id,
                          void (*fn)(int64_t at, const char *status, const char *reason, void *ctx),
                          void *ctx, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st, "SELECT at, status, reason FROM run_transitions WHERE run_id = ? ORDER BY rowid", &s,
        err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, run_id);
    int rc;
    while ((rc = db_step(s)) == DB_ROW)
        fn(db_col_int64(s, 0), db_col_text(s, 1), db_col_text(s, 2), ctx);
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list run transitions", err);
}

int store_view_generation(struct store *st, bool session, const char *id, int64_t *gen,
                          struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_find_row(st,
                           session ? "SELECT view_generation FROM sessions WHERE id = ?"
                                   : "SELECT view_generation FROM runs WHERE id = ?",
                           NULL, id, NULL, session ? "session" : "run", &s, err);
    if (r < 0)
        return r;
    *gen = db_col_int64(s, 0);
    return 0;
}

int store_view_revoke(struct store *st, bool session, const char *id, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        session ? "UPDATE sessions SET view_generation = view_generation + 1 WHERE id = ?"
                : "UPDATE runs SET view_generation = view_generation + 1 WHERE id = ?",
        &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    if ((r = store_step_done(st, s, "revoke view links", err)) < 0)
        return r;
    if (db_changes(st) == 0)
        return err_set(err, -ENOENT, "%s '%s' not found", session ? "session" : "run", id);
    return 0;
}

int store_run_list_active_on(struct store *st, const char *node_id, const char *session_id,
                             void (*fn)(const char *run_id, void *ctx), void *ctx, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          session_id ? "SELECT id FROM runs WHERE status IN ('queued', 'running') "
                                       "AND session_id = ? ORDER BY n"
                                     : "SELECT id FROM runs WHERE status IN ('queued', 'running') "
                                       "AND session_id IN (SELECT id FROM sessions WHERE node_id "
                                       "= ?) ORDER BY n",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, session_id ? session_id : node_id);
    struct buf ids;
    buf_init(&ids, 0);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        const char *id = db_col_text(s, 0);
        buf_append(&ids, id, strlen(id) + 1);
    }
    store_release(s);
    s = NULL;
    for (size_t i = 0; i < ids.len; i += strlen(ids.data + i) + 1)
        fn(ids.data + i, ctx);
    buf_release(&ids);
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list active runs", err);
}

int store_run_list_queued(struct store *st, void (*fn)(const struct store_run *r, void *ctx),
                          void *ctx, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT " RUN_COLUMNS " FROM runs WHERE status = 'queued' AND session_id "
                          "IN (SELECT id FROM sessions WHERE node_id = ?) ORDER BY n",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, st->node_id);
    struct store_run *rows = NULL;
    size_t n = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        rows = xrealloc(rows, (n + 1) * sizeof(*rows));
        read_run(s, &rows[n++]);
    }
    store_release(s);
    s = NULL;
    /* read whole before the calls, which write to the store */
    for (size_t i = 0; i < n; i++) {
        fn(&rows[i], ctx);
        store_run_release(&rows[i]);
    }
    free(rows);
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list queued runs", err);
}

int store_session_run_repository(struct store *st, const char *session_id, char **out,
                                 struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r =
        store_prepare(st,
                      "SELECT repository FROM runs WHERE session_id = ? AND status IN "
                      "('queued', 'running') AND repository IS NOT NULL ORDER BY n DESC LIMIT 1",
                      &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, session_id);
    int rc = db_step(s);
    *out = rc == DB_ROW ? xstrdup(db_col_text(s, 0)) : NULL;
    return rc == DB_ROW || rc == DB_DONE ? 0
                                         : store_fail(st, rc, "find the session's repository", err);
}

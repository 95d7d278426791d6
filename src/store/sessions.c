/* Sessions: a user's line of runs in one sandbox, its agent's conversation, its branch and pull
 * request, its retention, and which node holds it (claimed when it waits for one, taken over
 * from a node that was lost). */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "store/store_internal.h"

#define SESSION_COLUMNS                                                                            \
    "id, user_id, agent, coalesce(agent_session, ''), created_at, last_run_at, "                   \
    "coalesce(cleaned_at, 0), coalesce(repository, ''), coalesce(work_branch, ''), "               \
    "coalesce(base_branch, ''), coalesce(pr_number, 0), coalesce(pr_url, ''), node_id, pr_repo, "  \
    "pr_author, pr_state, fix_ci, ci_head, ci_fixes, poll_cursor, polled_at"

static void read_session(struct db_stmt *s, struct store_session *out)
{
    memset(out, 0, sizeof(*out));
    store_copy_text(out->id, sizeof(out->id), s, 0);
    store_copy_text(out->user_id, sizeof(out->user_id), s, 1);
    store_copy_text(out->agent, sizeof(out->agent), s, 2);
    store_copy_text(out->agent_session, sizeof(out->agent_session), s, 3);
    out->created_at = db_col_int64(s, 4);
    out->last_run_at = db_col_int64(s, 5);
    out->cleaned_at = db_col_int64(s, 6);
    store_copy_text(out->repository, sizeof(out->repository), s, 7);
    store_copy_text(out->work_branch, sizeof(out->work_branch), s, 8);
    store_copy_text(out->base_branch, sizeof(out->base_branch), s, 9);
    out->pr_number = db_col_int64(s, 10);
    store_copy_text(out->pr_url, sizeof(out->pr_url), s, 11);
    store_copy_text(out->node_id, sizeof(out->node_id), s, 12);
    store_copy_text(out->pr_repo, sizeof(out->pr_repo), s, 13);
    store_copy_text(out->pr_author, sizeof(out->pr_author), s, 14);
    store_copy_text(out->pr_state, sizeof(out->pr_state), s, 15);
    out->fix_ci = db_col_int64(s, 16) != 0;
    store_copy_text(out->ci_head, sizeof(out->ci_head), s, 17);
    out->ci_fixes = (unsigned)db_col_int64(s, 18);
    store_copy_text(out->poll_cursor, sizeof(out->poll_cursor), s, 19);
    out->polled_at = db_col_int64(s, 20);
}

int store_session_create(struct store *st, const struct store_session *ses, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "INSERT INTO sessions(id, user_id, agent, agent_session, created_at, "
                          "last_run_at, node_id) VALUES (?, ?, ?, nullif(?, ''), ?, ?, ?)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, ses->id);
    db_bind_text(s, 2, ses->user_id);
    db_bind_text(s, 3, ses->agent);
    db_bind_text(s, 4, ses->agent_session);
    db_bind_int64(s, 5, ses->created_at);
    db_bind_int64(s, 6, ses->last_run_at);
    db_bind_text(s, 7, ses->node_id[0] ? ses->node_id : st->node_id);
    return store_step_done(st, s, "insert session", err);
}

int store_session_get(struct store *st, const char *user_id, const char *id,
                      struct store_session *out, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
#define BY_ID "SELECT " SESSION_COLUMNS " FROM sessions WHERE id = ?"
    int r = store_find_row(st, BY_ID, BY_ID " AND user_id = ?", id, user_id, "session", &s, err);
#undef BY_ID
    if (r < 0)
        return r;
    read_session(s, out);
    return 0;
}

int store_session_update(struct store *st, const char *id, const char *agent_session,
                         const char *repository, int64_t last_run_at, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE sessions SET agent_session = coalesce(nullif(?, ''), "
                          "agent_session), repository = coalesce(nullif(?, ''), repository), "
                          "last_run_at = CASE WHEN last_run_at > ?3 THEN last_run_at ELSE ?3 END "
                          "WHERE id = ?4",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, agent_session ? agent_session : "");
    db_bind_text(s, 2, repository ? repository : "");
    db_bind_int64(s, 3, last_run_at);
    db_bind_text(s, 4, id);
    return store_step_done(st, s, "update session", err);
}

int store_session_set_agent(struct store *st, const char *id, const char *agent, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE sessions SET agent = ?, agent_session = '' WHERE id = ?", &s,
                          err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, agent);
    db_bind_text(s, 2, id);
    return store_step_done(st, s, "record session agent", err);
}

int store_session_set_branch(struct store *st, const char *id, const char *work_branch,
                             const char *base_branch, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE sessions SET work_branch = ?, base_branch = ? WHERE id = ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, work_branch);
    db_bind_text(s, 2, base_branch);
    db_bind_text(s, 3, id);
    return store_step_done(st, s, "record session branch", err);
}

int store_session_set_pull_request(struct store *st, const char *id, int64_t number,
                                   const char *url, const char *repo, const char *author,
                                   struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE sessions SET pr_number = ?, pr_url = ?, pr_repo = lower(?), "
                          "pr_author = ?, pr_state = 'open', poll_cursor = ? WHERE id = ?",
                          &s, err);
    if (r < 0)
        return r;
    /* the poller reads what comes after the pull request was opened, in GitHub's form */
    char now[32];
    time_format_rfc3339(time_now_ms(), now);
    snprintf(now + 19, sizeof(now) - 19, "Z");
    db_bind_int64(s, 1, number);
    db_bind_text(s, 2, url);
    db_bind_text(s, 3, repo);
    db_bind_text(s, 4, author);
    db_bind_text(s, 5, now);
    db_bind_text(s, 6, id);
    return store_step_done(st, s, "record session pull request", err);
}

/* The row s finds into out: 0, or -ENOENT when none (err for the caller to fill). */
static int one_session(struct store *st, struct db_stmt *s, struct store_session *out,
                       struct err *err)
{
    int rc = db_step(s);
    if (rc == DB_ROW) {
        read_session(s, out);
        return 0;
    }
    return rc == DB_DONE ? -ENOENT : store_fail(st, rc, "find a session", err);
}

int store_session_by_pull_request(struct store *st, const char *repo, int64_t number,
                                  struct store_session *out, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT " SESSION_COLUMNS " FROM sessions WHERE pr_repo = lower(?) AND "
                          "pr_number = ? ORDER BY created_at DESC LIMIT 1",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, repo);
    db_bind_int64(s, 2, number);
    if ((r = one_session(st, s, out, err)) == -ENOENT)
        err_set(err, r, "no session has pull request %s#%lld", repo, (long long)number);
    return r;
}

int store_session_by_ci_head(struct store *st, const char *repo, const char *head,
                             struct store_session *out, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT " SESSION_COLUMNS " FROM sessions WHERE pr_repo = lower(?) AND "
                          "ci_head = ? AND pr_number > 0 ORDER BY created_at DESC LIMIT 1",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, repo);
    db_bind_text(s, 2, head);
    if ((r = one_session(st, s, out, err)) == -ENOENT)
        err_set(err, r, "no session pushed %.12s to %s", head, repo);
    return r;
}

int store_session_set_pull_state(struct store *st, const char *id, const char *state,
                                 struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE sessions SET pr_state = ? WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, state);
    db_bind_text(s, 2, id);
    return store_step_done(st, s, "record a pull request's state", err);
}

int store_session_set_fix_ci(struct store *st, const char *id, bool on, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE sessions SET fix_ci = ? WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, on);
    db_bind_text(s, 2, id);
    return store_step_done(st, s, "record whether a session fixes its CI", err);
}

int store_session_set_ci(struct store *st, const char *id, const char *head, unsigned fixes,
                         struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE sessions SET ci_head = coalesce(?, ci_head), ci_fixes = ? "
                          "WHERE id = ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, head);
    db_bind_int64(s, 2, fixes);
    db_bind_text(s, 3, id);
    return store_step_done(st, s, "record a session's CI head", err);
}

int store_session_set_polled(struct store *st, const char *id, const char *cursor, int64_t at,
                             struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r =
        store_prepare(st,
                      "UPDATE sessions SET poll_cursor = coalesce(?, poll_cursor), polled_at = ? "
                      "WHERE id = ?",
                      &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, cursor);
    db_bind_int64(s, 2, at);
    db_bind_text(s, 3, id);
    return store_step_done(st, s, "record a session's poll", err);
}

int store_sessions_to_poll(struct store *st, int64_t active_since, unsigned limit,
                           void (*fn)(const struct store_session *s, void *ctx), void *ctx,
                           struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT " SESSION_COLUMNS " FROM sessions WHERE pr_number > 0 AND "
                          "pr_state = 'open' AND cleaned_at IS NULL AND last_run_at >= ?1 AND "
                          "node_id = ?2 ORDER BY polled_at, id LIMIT ?3",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, active_since);
    db_bind_text(s, 2, st->node_id);
    db_bind_int64(s, 3, limit);
    int rc;
    struct store_session ses;
    while ((rc = db_step(s)) == DB_ROW) {
        read_session(s, &ses);
        fn(&ses, ctx);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list sessions to poll", err);
}

int store_session_list_expired(struct store *st, int64_t before,
                               void (*fn)(const struct store_session *s, void *ctx), void *ctx,
                               struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT " SESSION_COLUMNS " FROM sessions WHERE cleaned_at IS NULL AND "
                          "last_run_at < ?1 AND node_id IN (?2, '" STORE_SESSION_UNCLAIMED "') "
                          "AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.session_id = sessions.id "
                          "AND status IN ('queued', 'running'))",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, before);
    db_bind_text(s, 2, st->node_id);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_session ses;
        read_session(s, &ses);
        fn(&ses, ctx);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list expired sessions", err);
}

int store_session_mark_cleaned(struct store *st, const char *id, int64_t at, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE sessions SET cleaned_at = ? WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, at);
    db_bind_text(s, 2, id);
    return store_step_done(st, s, "mark session cleaned", err);
}

int store_session_take_over(struct store *st, const char *id, const char *from_node,
                            struct err *err)
{
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        if ((r = store_prepare(st, "UPDATE sessions SET node_id = ? WHERE id = ? AND node_id = ?",
                               &s, err)) == 0) {
            db_bind_text(s, 1, st->node_id);
            db_bind_text(s, 2, id);
            db_bind_text(s, 3, from_node);
            r = store_step_done(st, s, "take over session", err);
            if (r == 0 && db_changes(st) != 1)
                r = err_set(err, -ESTALE, "session '%s' moved meanwhile", id);
        }
    }
    if (r == 0 && (r = store_sandboxes_move(st, NULL, id, from_node, err)) > 0)
        r = 0;
    if (r < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    return store_exec(st, "COMMIT", err);
}

/* Whether node (?3) holds a live environment snapshot that may serve session s's user for run
 * r's repository (runs/envs.c): the claim's preference. */
#define ENV_HELD(node_cmp)                                                                         \
    "EXISTS (SELECT 1 FROM envs v WHERE v.node_id " node_cmp " ?3 AND v.dropped = 0 AND "          \
    "v.repository = r.repository AND (v.scope = s.user_id OR v.scope = ''))"

int store_session_claim(struct store *st, unsigned limit, int64_t prefer_before,
                        char session_id[64], struct err *err)
{
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    session_id[0] = '\0';
    {
        /* the oldest waiting run's session; one another node is claiming is passed over, and
         * so, until it has waited since prefer_before, is one whose repository has a snapshot
         * on another node that is up and none here (that node claims it, and starts on it) */
        _cleanup_stmt_ struct db_stmt *s = NULL;
        r = store_prepare(
            st,
            "SELECT s.id FROM sessions s JOIN runs r ON r.session_id = s.id "
            "WHERE s.node_id = '" STORE_SESSION_UNCLAIMED "' AND r.status = 'queued' "
            "AND (SELECT count(*) FROM runs x WHERE x.user_id = s.user_id AND "
            "x.status = 'running') < ?1 AND (r.repository IS NULL OR r.created_at < ?2 "
            "OR " ENV_HELD("=") " OR NOT " ENV_HELD("<>") ") ORDER BY r.n LIMIT 1 "
                                                          "FOR UPDATE OF s SKIP LOCKED",
            &s, err);
        if (r == 0) {
            db_bind_int64(s, 1, limit);
            db_bind_int64(s, 2, prefer_before);
            db_bind_text(s, 3, st->node_id);
            int rc = db_step(s);
            if (rc == DB_ROW)
                store_copy_text(session_id, 64, s, 0);
            else if (rc != DB_DONE)
                r = store_fail(st, rc, "find an unclaimed session", err);
        }
    }
    if (r == 0 && session_id[0]) {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        if ((r = store_prepare(st,
                               "UPDATE sessions SET node_id = ? WHERE id = ? AND node_id = "
                               "'" STORE_SESSION_UNCLAIMED "'",
                               &s, err)) == 0) {
            db_bind_text(s, 1, st->node_id);
            db_bind_text(s, 2, session_id);
            r = store_step_done(st, s, "claim session", err);
            if (r == 0 && db_changes(st) != 1)
                session_id[0] = '\0';
        }
    }
    if (r < 0 || (r = store_exec(st, "COMMIT", err)) < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    return session_id[0] ? 1 : 0;
}

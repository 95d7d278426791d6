/* Sandbox rows: which sandbox belongs to whom, and which init process runs it. */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store/store_internal.h"

#define SANDBOX_COLUMNS                                                                            \
    "id, user_id, coalesce(session_id, ''), template, state, coalesce(init_pid, 0), "              \
    "coalesce(init_start, 0), coalesce(cgroup, ''), created_at, coalesce(started_at, 0), "         \
    "coalesce(last_used_at, 0), coalesce(id_slot, 0), node_id, env"

static void text_col(char *dst, size_t cap, struct db_stmt *s, int col)
{
    const char *t = db_col_text(s, col);
    snprintf(dst, cap, "%s", t ? t : "");
}

static void read_row(struct db_stmt *s, struct store_sandbox *sb)
{
    memset(sb, 0, sizeof(*sb));
    text_col(sb->id, sizeof(sb->id), s, 0);
    text_col(sb->user_id, sizeof(sb->user_id), s, 1);
    text_col(sb->session_id, sizeof(sb->session_id), s, 2);
    text_col(sb->template_name, sizeof(sb->template_name), s, 3);
    const char *state = db_col_text(s, 4);
    sb->running = state && strcmp(state, "running") == 0;
    sb->init_pid = db_col_int64(s, 5);
    sb->init_start = db_col_int64(s, 6);
    text_col(sb->cgroup, sizeof(sb->cgroup), s, 7);
    sb->created_at = db_col_int64(s, 8);
    sb->started_at = db_col_int64(s, 9);
    sb->last_used_at = db_col_int64(s, 10);
    sb->id_slot = (uint32_t)db_col_int64(s, 11);
    text_col(sb->node_id, sizeof(sb->node_id), s, 12);
    text_col(sb->env, sizeof(sb->env), s, 13);
}

int store_sandbox_find(struct store *st, const char *user_id, const char *session_id,
                       struct store_sandbox *out, struct err *err)
{
    bool own = !session_id || !*session_id;
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        own ? "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE user_id = ? AND session_id IS NULL"
            : "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE user_id = ? AND session_id = ?",
        &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    if (!own)
        db_bind_text(s, 2, session_id);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no sandbox");
    if (rc != DB_ROW)
        return store_fail(st, rc, "find sandbox", err);
    read_row(s, out);
    return 0;
}

int store_sandbox_insert(struct store *st, const struct store_sandbox *sb, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "INSERT INTO sandboxes(id, user_id, session_id, template, state, "
                          "created_at, node_id, env) VALUES (?, nullif(?, ''), nullif(?, ''), ?, "
                          "'stopped', ?, ?, ?)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, sb->id);
    db_bind_text(s, 2, sb->user_id);
    db_bind_text(s, 3, sb->session_id);
    db_bind_text(s, 4, sb->template_name);
    db_bind_int64(s, 5, sb->created_at);
    db_bind_text(s, 6, st->node_id);
    db_bind_text(s, 7, sb->env);
    int rc = db_step(s);
    if (rc == DB_CONSTRAINT)
        return err_set(err, -EEXIST, "sandbox already exists");
    if (rc != DB_DONE)
        return store_fail(st, rc, "insert sandbox", err);
    return 0;
}

int store_sandbox_update(struct store *st, const struct store_sandbox *sb, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE sandboxes SET state = ?, init_pid = ?, init_start = ?, "
                          "cgroup = nullif(?, ''), template = ?, started_at = ?, last_used_at = ?, "
                          "env = ? WHERE id = ? AND node_id = ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, sb->running ? "running" : "stopped");
    db_bind_int64(s, 2, sb->init_pid);
    db_bind_int64(s, 3, sb->init_start);
    db_bind_text(s, 4, sb->cgroup);
    db_bind_text(s, 5, sb->template_name);
    db_bind_int64(s, 6, sb->started_at);
    db_bind_int64(s, 7, sb->last_used_at);
    db_bind_text(s, 8, sb->env);
    db_bind_text(s, 9, sb->id);
    db_bind_text(s, 10, st->node_id);
    int rc = db_step(s);
    if (rc != DB_DONE)
        return store_fail(st, rc, "update sandbox", err);
    return 0;
}

int store_sandbox_env_users(struct store *st, const char *env, int64_t *count, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r =
        store_prepare(st, "SELECT count(*) FROM sandboxes WHERE env = ? AND node_id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, env);
    db_bind_text(s, 2, st->node_id);
    int rc = db_step(s);
    if (rc != DB_ROW)
        return store_fail(st, rc, "count a snapshot's sandboxes", err);
    *count = db_col_int64(s, 0);
    return 0;
}

/* Call fn for each row sql (a literal selecting SANDBOX_COLUMNS, of this node's: ?1) gives. */
static int list_rows(struct store *st, const char *sql,
                     void (*fn)(const struct store_sandbox *sb, void *ctx), void *ctx,
                     struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, sql, &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, st->node_id);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_sandbox sb;
        read_row(s, &sb);
        fn(&sb, ctx);
    }
    if (rc != DB_DONE)
        return store_fail(st, rc, "list sandboxes", err);
    return 0;
}

int store_sandbox_list_running(struct store *st,
                               void (*fn)(const struct store_sandbox *sb, void *ctx), void *ctx,
                               struct err *err)
{
    return list_rows(
        st, "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE node_id = ?1 AND state = 'running'",
        fn, ctx, err);
}

int store_sandbox_claim_slot(struct store *st, const char *id, uint32_t max_slot, uint32_t *slot,
                             struct err *err)
{
    /* The lowest free slot of this node's (host id ranges are a host's): 1 when it is free,
     * else the first one above a taken slot. The unique index on (node_id, id_slot) makes both
     * lookups index probes, and a race between two servers on one store ends in a constraint
     * error rather than a shared range. */
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        "UPDATE sandboxes SET id_slot = ("
        "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM sandboxes WHERE node_id = ?2 AND id_slot = 1) "
        "UNION ALL SELECT a.id_slot + 1 FROM sandboxes a WHERE a.node_id = ?2 AND a.id_slot IS "
        "NOT NULL AND NOT EXISTS (SELECT 1 FROM sandboxes b WHERE b.node_id = ?2 AND b.id_slot = "
        "a.id_slot + 1) ORDER BY 1 LIMIT 1) "
        "WHERE id = ?1 AND id_slot IS NULL RETURNING id_slot",
        &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    db_bind_text(s, 2, st->node_id);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "sandbox '%s' not found or already has an id range", id);
    if (rc != DB_ROW)
        return store_fail(st, rc, "claim id range", err);
    int64_t got = db_col_int64(s, 0);
    db_reset(s);
    if (got < 1 || got > (int64_t)max_slot) {
        struct err ignored = {0};
        store_sandbox_release_slot(st, id, &ignored);
        return err_set(err, -ENOSPC,
                       "no free host id range for another sandbox (all %u are held by sandboxes "
                       "whose files exist; raise SANDBOX_UID_RANGES or let retention remove old "
                       "sessions)",
                       max_slot);
    }
    *slot = (uint32_t)got;
    return 0;
}

int store_sandbox_release_slot(struct store *st, const char *id, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE sandboxes SET id_slot = NULL WHERE id = ? AND node_id = ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    db_bind_text(s, 2, st->node_id);
    int rc = db_step(s);
    if (rc != DB_DONE)
        return store_fail(st, rc, "release id range", err);
    return 0;
}

int store_sandbox_list_with_files(struct store *st, const char *user_id,
                                  void (*fn)(const char *id, void *ctx), void *ctx, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st, "SELECT id FROM sandboxes WHERE user_id = ? AND node_id = ? AND id_slot IS NOT NULL",
        &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    db_bind_text(s, 2, st->node_id);
    int rc;
    while ((rc = db_step(s)) == DB_ROW)
        fn(db_col_text(s, 0), ctx);
    if (rc != DB_DONE)
        return store_fail(st, rc, "list sandboxes", err);
    return 0;
}

static int assign_rows(struct store *st, const char *id, const char *user_id,
                       const char *session_id, const char *replaces, struct err *err)
{
    int r;
    if (replaces) {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        if ((r = store_prepare(
                 st, "UPDATE sandboxes SET user_id = NULL, session_id = NULL WHERE id = ?", &s,
                 err)) < 0)
            return r;
        db_bind_text(s, 1, replaces);
        if ((r = store_step_done(st, s, "detach sandbox", err)) < 0)
            return r;
    }
    _cleanup_stmt_ struct db_stmt *s = NULL;
    if ((r = store_prepare(st,
                           "UPDATE sandboxes SET user_id = ?, session_id = nullif(?, '') "
                           "WHERE id = ? AND user_id IS NULL",
                           &s, err)) < 0)
        return r;
    db_bind_text(s, 1, user_id);
    db_bind_text(s, 2, session_id ? session_id : "");
    db_bind_text(s, 3, id);
    int rc = db_step(s);
    if (rc == DB_CONSTRAINT)
        return err_set(err, -EEXIST, "the session already has a sandbox");
    if (rc != DB_DONE)
        return store_fail(st, rc, "assign sandbox", err);
    if (db_changes(st) != 1)
        return err_set(err, -ESTALE, "sandbox '%s' is not unowned", id);
    return 0;
}

int store_sandbox_assign(struct store *st, const char *id, const char *user_id,
                         const char *session_id, const char *replaces, struct err *err)
{
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    if ((r = assign_rows(st, id, user_id, session_id, replaces, err)) < 0 ||
        (r = store_exec(st, "COMMIT", err)) < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    return 0;
}

int store_sandbox_delete(struct store *st, const char *id, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "DELETE FROM sandboxes WHERE id = ? AND node_id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    db_bind_text(s, 2, st->node_id);
    int rc = db_step(s);
    if (rc != DB_DONE)
        return store_fail(st, rc, "delete sandbox", err);
    return 0;
}

int store_sandbox_list_unowned(struct store *st,
                               void (*fn)(const struct store_sandbox *sb, void *ctx), void *ctx,
                               struct err *err)
{
    return list_rows(st,
                     "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE node_id = ?1 AND "
                     "user_id IS NULL",
                     fn, ctx, err);
}

int store_node_adopt_legacy(struct store *st, struct err *err)
{
    int r, taken = 0;
    {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        if ((r = store_prepare(st, "UPDATE sandboxes SET node_id = ? WHERE node_id = ''", &s,
                               err)) < 0)
            return r;
        db_bind_text(s, 1, st->node_id);
        if ((r = store_step_done(st, s, "adopt sandboxes", err)) < 0)
            return r;
        taken += (int)db_changes(st);
    }
    _cleanup_stmt_ struct db_stmt *s = NULL;
    if ((r = store_prepare(st, "UPDATE sessions SET node_id = ? WHERE node_id = ''", &s, err)) < 0)
        return r;
    db_bind_text(s, 1, st->node_id);
    if ((r = store_step_done(st, s, "adopt sessions", err)) < 0)
        return r;
    return taken + (int)db_changes(st);
}

int store_sandboxes_move(struct store *st, const char *id, const char *session_id,
                         const char *from_node, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE sandboxes SET node_id = ?1, state = 'stopped', init_pid = NULL, "
                          "init_start = NULL, cgroup = NULL, id_slot = NULL, started_at = NULL "
                          "WHERE (id = ?2 OR session_id = ?3) AND node_id = ?4",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, st->node_id);
    db_bind_text(s, 2, id);
    db_bind_text(s, 3, session_id);
    db_bind_text(s, 4, from_node);
    if ((r = store_step_done(st, s, "take over sandbox", err)) < 0)
        return r;
    return (int)db_changes(st);
}

int store_sandbox_take_over(struct store *st, const char *id, const char *from_node,
                            struct err *err)
{
    int r = store_sandboxes_move(st, id, NULL, from_node, err);
    if (r < 0)
        return r;
    return r == 1 ? 0 : err_set(err, -ESTALE, "sandbox '%s' moved meanwhile", id);
}

int store_sandbox_list_ids(struct store *st, void (*fn)(const char *id, void *ctx), void *ctx,
                           struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT id FROM sandboxes WHERE node_id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, st->node_id);
    int rc;
    while ((rc = db_step(s)) == DB_ROW)
        fn(db_col_text(s, 0), ctx);
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list sandboxes", err);
}

/* Environment snapshots in the store: one row per snapshot directory of a node (runs/envs.c
 * decides which serves whom; this file keeps the rows). */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store/store_internal.h"

#define ENV_COLUMNS                                                                                \
    "id, key, scope, user_id, repository, template, fingerprint, base, bytes, files, "             \
    "created_at, last_used_at, dropped, uses"

static void read_env(struct db_stmt *s, struct store_env *e)
{
    memset(e, 0, sizeof(*e));
    store_copy_text(e->id, sizeof(e->id), s, 0);
    store_copy_text(e->key, sizeof(e->key), s, 1);
    store_copy_text(e->scope, sizeof(e->scope), s, 2);
    store_copy_text(e->user_id, sizeof(e->user_id), s, 3);
    store_copy_text(e->repository, sizeof(e->repository), s, 4);
    store_copy_text(e->template_name, sizeof(e->template_name), s, 5);
    store_copy_text(e->fingerprint, sizeof(e->fingerprint), s, 6);
    store_copy_text(e->base, sizeof(e->base), s, 7);
    e->bytes = db_col_int64(s, 8);
    e->files = db_col_int64(s, 9);
    e->created_at = db_col_int64(s, 10);
    e->last_used_at = db_col_int64(s, 11);
    e->dropped = db_col_int64(s, 12) != 0;
    e->uses = db_col_int64(s, 13);
}

int store_env_insert(struct store *st, const struct store_env *e, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "INSERT INTO envs(node_id, " ENV_COLUMNS ") VALUES "
                          "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, st->node_id);
    db_bind_text(s, 2, e->id);
    db_bind_text(s, 3, e->key);
    db_bind_text(s, 4, e->scope);
    db_bind_text(s, 5, e->user_id);
    db_bind_text(s, 6, e->repository);
    db_bind_text(s, 7, e->template_name);
    db_bind_text(s, 8, e->fingerprint);
    db_bind_text(s, 9, e->base);
    db_bind_int64(s, 10, e->bytes);
    db_bind_int64(s, 11, e->files);
    db_bind_int64(s, 12, e->created_at);
    db_bind_int64(s, 13, e->last_used_at);
    int rc = db_step(s);
    if (rc == DB_CONSTRAINT)
        return err_set(err, -EEXIST, "snapshot '%s' exists", e->id);
    return rc == DB_DONE ? 0 : store_fail(st, rc, "insert snapshot", err);
}

int store_env_find(struct store *st, const char *key, struct store_env *out, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT " ENV_COLUMNS " FROM envs WHERE node_id = ? AND key = ? AND "
                          "dropped = 0 ORDER BY created_at DESC LIMIT 1",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, st->node_id);
    db_bind_text(s, 2, key);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no snapshot");
    if (rc != DB_ROW)
        return store_fail(st, rc, "find snapshot", err);
    read_env(s, out);
    return 0;
}

/* One statement on a row of this node's, id bound second. */
static int env_exec(struct store *st, const char *sql, const char *id, int64_t v, const char *what,
                    struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, sql, &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, v);
    db_bind_text(s, 2, id);
    db_bind_text(s, 3, st->node_id);
    int rc = db_step(s);
    return rc == DB_DONE ? 0 : store_fail(st, rc, what, err);
}

int store_env_touch(struct store *st, const char *id, int64_t now, struct err *err)
{
    return env_exec(
        st, "UPDATE envs SET last_used_at = ?, uses = uses + 1 WHERE id = ? AND node_id = ?", id,
        now, "use snapshot", err);
}

int store_env_drop(struct store *st, const char *id, struct err *err)
{
    return env_exec(st, "UPDATE envs SET dropped = ? WHERE id = ? AND node_id = ?", id, 1,
                    "drop snapshot", err);
}

int store_env_delete(struct store *st, const char *id, struct err *err)
{
    return env_exec(st, "DELETE FROM envs WHERE dropped = ? AND id = ? AND node_id = ?", id, 1,
                    "delete snapshot", err);
}

int store_env_held(struct store *st, const char *user_id, const char *repository, bool *here,
                   bool *elsewhere, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT coalesce(max(CASE WHEN v.node_id = ?1 THEN 1 ELSE 0 END), 0), "
                          "coalesce(max(CASE WHEN v.node_id <> ?1 AND n.state = 'up' THEN 1 ELSE "
                          "0 END), 0) FROM envs v LEFT JOIN nodes n ON n.id = v.node_id WHERE "
                          "v.dropped = 0 AND v.repository = ?2 AND (v.scope = ?3 OR v.scope = '')",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, st->node_id);
    db_bind_text(s, 2, repository);
    db_bind_text(s, 3, user_id);
    int rc = db_step(s);
    if (rc != DB_ROW)
        return store_fail(st, rc, "look for snapshots", err);
    *here = db_col_int64(s, 0) != 0;
    *elsewhere = db_col_int64(s, 1) != 0;
    return 0;
}

int store_env_list(struct store *st, const struct store_env_filter *f,
                   void (*fn)(const struct store_env *e, void *ctx), void *ctx, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT " ENV_COLUMNS " FROM envs WHERE node_id = ?1 AND "
                          "(?2 = '' OR user_id = ?2 OR scope = ?2) AND "
                          "(?3 = '' OR repository = ?3) ORDER BY last_used_at, id",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, st->node_id);
    db_bind_text(s, 2, f && f->user_id ? f->user_id : "");
    db_bind_text(s, 3, f && f->repository ? f->repository : "");
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_env e;
        read_env(s, &e);
        fn(&e, ctx);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list snapshots", err);
}

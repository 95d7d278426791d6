/* Previews (previews): a sandbox's port at a capability URL (its id and a MAC of it). Opening
 * one counts the sandbox's open previews in the same transaction, so two opened at once on two
 * nodes cannot pass the cap together. The serving side is src/preview. */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"

#define PREVIEW_COLUMNS                                                                            \
    "id, user_id, session_id, sandbox_id, port, run_id, created_at, expires_at, revoked_at"

static void read_preview(struct db_stmt *s, struct store_preview *p)
{
    memset(p, 0, sizeof(*p));
    store_copy_text(p->id, sizeof(p->id), s, 0);
    store_copy_text(p->user_id, sizeof(p->user_id), s, 1);
    store_copy_text(p->session_id, sizeof(p->session_id), s, 2);
    store_copy_text(p->sandbox_id, sizeof(p->sandbox_id), s, 3);
    p->port = (unsigned)db_col_int64(s, 4);
    store_copy_text(p->run_id, sizeof(p->run_id), s, 5);
    p->created_at = db_col_int64(s, 6);
    p->expires_at = db_col_int64(s, 7);
    p->revoked_at = db_col_int64(s, 8);
}

int store_preview_open(struct store *st, const struct store_preview *p, unsigned max_open,
                       int64_t now, struct err *err)
{
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        r = store_prepare(st,
                          "SELECT count(*) FROM previews WHERE sandbox_id = ? AND revoked_at = 0 "
                          "AND expires_at > ?",
                          &s, err);
        if (r == 0) {
            db_bind_text(s, 1, p->sandbox_id);
            db_bind_int64(s, 2, now);
            int rc = db_step(s);
            if (rc != DB_ROW)
                r = store_fail(st, rc, "count previews", err);
            else if (db_col_int64(s, 0) >= max_open)
                r = err_set(err, -EMFILE,
                            "this sandbox has %u previews open, the most it may: revoke one "
                            "(container_preview revoke) or let one expire",
                            max_open);
        }
    }
    if (r == 0) {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        r = store_prepare(st,
                          "INSERT INTO previews(id, user_id, session_id, sandbox_id, port, run_id, "
                          "created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          &s, err);
        if (r == 0) {
            db_bind_text(s, 1, p->id);
            db_bind_text(s, 2, p->user_id);
            db_bind_text(s, 3, p->session_id);
            db_bind_text(s, 4, p->sandbox_id);
            db_bind_int64(s, 5, p->port);
            db_bind_text(s, 6, p->run_id);
            db_bind_int64(s, 7, p->created_at);
            db_bind_int64(s, 8, p->expires_at);
            r = store_step_done(st, s, "insert a preview", err);
        }
    }
    if (r < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    return store_exec(st, "COMMIT", err);
}

int store_preview_get(struct store *st, const char *id, struct store_preview *out, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT " PREVIEW_COLUMNS " FROM previews WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no such preview");
    if (rc != DB_ROW)
        return store_fail(st, rc, "read a preview", err);
    read_preview(s, out);
    return 0;
}

int store_preview_revoke(struct store *st, const char *user_id, const char *id, int64_t now,
                         struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE previews SET revoked_at = ? WHERE id = ? AND user_id = ? AND "
                          "revoked_at = 0",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, now);
    db_bind_text(s, 2, id);
    db_bind_text(s, 3, user_id);
    if ((r = store_step_done(st, s, "revoke a preview", err)) < 0)
        return r;
    return db_changes(st) > 0 ? 0 : err_set(err, -ENOENT, "no open preview '%.64s' of yours", id);
}

int store_preview_list(struct store *st, const char *sandbox_id, const char *run_id, int64_t now,
                       void (*fn)(const struct store_preview *p, void *ctx), void *ctx,
                       struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          run_id ? "SELECT " PREVIEW_COLUMNS " FROM previews WHERE run_id = ? "
                                   "AND revoked_at = 0 AND expires_at > ? ORDER BY created_at "
                                   "LIMIT 16"
                                 : "SELECT " PREVIEW_COLUMNS " FROM previews WHERE sandbox_id = ? "
                                   "AND revoked_at = 0 AND expires_at > ? ORDER BY created_at "
                                   "LIMIT 16",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, run_id ? run_id : sandbox_id);
    db_bind_int64(s, 2, now);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_preview p;
        read_preview(s, &p);
        fn(&p, ctx);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list previews", err);
}

int store_preview_prune(struct store *st, int64_t before, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "DELETE FROM previews WHERE expires_at < ?1 OR (revoked_at > 0 AND "
                          "revoked_at < ?1)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, before);
    return store_step_done(st, s, "prune previews", err);
}

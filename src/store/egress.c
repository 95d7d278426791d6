/* Sandbox network in the store: the users' modes and the counts of what sandboxes tried. */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store/store_internal.h"

int store_user_network_get(struct store *st, const char *user_id, char out[STORE_NETWORK_MAX],
                           struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT coalesce(network, '') FROM users WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no user '%s'", user_id);
    if (rc != DB_ROW)
        return store_fail(st, rc, "read the user's network", err);
    store_copy_text(out, STORE_NETWORK_MAX, s, 0);
    return 0;
}

int store_user_network_set(struct store *st, const char *name, const char *mode, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE users SET network = nullif(?, '') WHERE name = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, mode ? mode : "");
    db_bind_text(s, 2, name);
    if ((r = store_step_done(st, s, "set the user's network", err)) < 0)
        return r;
    return db_changes(st) ? 0 : err_set(err, -ENOENT, "no user named '%s'", name);
}

/* The row's counts grow, if it exists: 1 when it did, 0 when not, or -errno. */
static int egress_grow(struct store *st, const struct store_egress_row *e, const char *host,
                       struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        "UPDATE egress_attempts SET attempts = attempts + ?, bytes_up = bytes_up + ?, "
        "bytes_down = bytes_down + ?, why = ?, addr = ?, "
        "last_at = CASE WHEN last_at > ?6 THEN last_at ELSE ?6 END "
        "WHERE sandbox_id = ?7 AND run_id = ? AND host = ? AND port = ? AND verdict = ? "
        "AND reason = ?",
        &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, e->attempts);
    db_bind_int64(s, 2, e->bytes_up);
    db_bind_int64(s, 3, e->bytes_down);
    db_bind_text(s, 4, e->why);
    db_bind_text(s, 5, e->addr);
    db_bind_int64(s, 6, e->last_at);
    db_bind_text(s, 7, e->sandbox_id);
    db_bind_text(s, 8, e->run_id);
    db_bind_text(s, 9, host);
    db_bind_int64(s, 10, e->port);
    db_bind_text(s, 11, e->verdict);
    db_bind_text(s, 12, e->reason);
    if ((r = store_step_done(st, s, "count an egress attempt", err)) < 0)
        return r;
    return db_changes(st) > 0;
}

static int egress_rows_of(struct store *st, const struct store_egress_row *e, int64_t *n,
                          struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st, "SELECT count(*) FROM egress_attempts WHERE sandbox_id = ? AND run_id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, e->sandbox_id);
    db_bind_text(s, 2, e->run_id);
    int rc = db_step(s);
    if (rc != DB_ROW)
        return store_fail(st, rc, "count egress rows", err);
    *n = db_col_int64(s, 0);
    return 0;
}

static int egress_insert(struct store *st, const struct store_egress_row *e, const char *host,
                         int port, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "INSERT INTO egress_attempts(user_id, sandbox_id, run_id, host, port, "
                          "verdict, reason, why, addr, attempts, bytes_up, bytes_down, first_at, "
                          "last_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, e->user_id);
    db_bind_text(s, 2, e->sandbox_id);
    db_bind_text(s, 3, e->run_id);
    db_bind_text(s, 4, host);
    db_bind_int64(s, 5, port);
    db_bind_text(s, 6, e->verdict);
    db_bind_text(s, 7, e->reason);
    db_bind_text(s, 8, e->why);
    db_bind_text(s, 9, e->addr);
    db_bind_int64(s, 10, e->attempts);
    db_bind_int64(s, 11, e->bytes_up);
    db_bind_int64(s, 12, e->bytes_down);
    db_bind_int64(s, 13, e->first_at);
    db_bind_int64(s, 14, e->last_at);
    return store_step_done(st, s, "record an egress attempt", err);
}

static int egress_add_one(struct store *st, const struct store_egress_row *e, struct err *err)
{
    int r = egress_grow(st, e, e->host, err);
    if (r != 0)
        return r < 0 ? r : 0;
    int64_t n = 0;
    if ((r = egress_rows_of(st, e, &n, err)) < 0)
        return r;
    if (n < STORE_EGRESS_ROWS_MAX - 1)
        return egress_insert(st, e, e->host, e->port, err);
    /* full: the rest is counted together, in the one row kept for it */
    struct store_egress_row other = *e;
    other.port = 0;
    other.why = "";
    other.addr = "";
    if ((r = egress_grow(st, &other, "*", err)) != 0)
        return r < 0 ? r : 0;
    return egress_insert(st, &other, "*", 0, err);
}

int store_egress_add(struct store *st, const struct store_egress_row *rows, size_t n,
                     struct err *err)
{
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n && r == 0; i++)
        r = egress_add_one(st, &rows[i], err);
    if (r < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    return store_exec(st, "COMMIT", err);
}

int store_egress_list(struct store *st, const char *run_id,
                      void (*fn)(const struct store_egress_row *row, void *ctx), void *ctx,
                      struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT user_id, sandbox_id, run_id, host, port, verdict, reason, why, "
                          "addr, attempts, bytes_up, bytes_down, first_at, last_at "
                          "FROM egress_attempts WHERE run_id = ? AND run_id <> '' "
                          "ORDER BY attempts DESC, bytes_down DESC, host, port",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, run_id);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        const char *t[14];
        for (int i = 0; i < 14; i++)
            t[i] = db_col_text(s, i);
        struct store_egress_row row = {
            .user_id = t[0],
            .sandbox_id = t[1],
            .run_id = t[2],
            .host = t[3],
            .port = db_col_int(s, 4),
            .verdict = t[5],
            .reason = t[6],
            .why = t[7],
            .addr = t[8],
            .attempts = db_col_int64(s, 9),
            .bytes_up = db_col_int64(s, 10),
            .bytes_down = db_col_int64(s, 11),
            .first_at = db_col_int64(s, 12),
            .last_at = db_col_int64(s, 13),
        };
        fn(&row, ctx);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list egress attempts", err);
}

int store_egress_prune(struct store *st, int64_t before_ms, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r =
        store_prepare(st, "DELETE FROM egress_attempts WHERE run_id = '' AND last_at < ?", &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, before_ms);
    return store_step_done(st, s, "prune egress attempts", err);
}

/* Nodes sharing the store: who is up, where to reach them, whose heartbeat stopped. */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "store/store_internal.h"

#define NODE_COLUMNS "id, url, max_sandboxes, max_runs, started_at, heartbeat_at, state"

static void read_node(struct db_stmt *s, struct store_node *n)
{
    memset(n, 0, sizeof(*n));
    store_copy_text(n->id, sizeof(n->id), s, 0);
    store_copy_text(n->url, sizeof(n->url), s, 1);
    n->max_sandboxes = db_col_int64(s, 2);
    n->max_runs = db_col_int64(s, 3);
    n->started_at = db_col_int64(s, 4);
    n->heartbeat_at = db_col_int64(s, 5);
    store_copy_text(n->state, sizeof(n->state), s, 6);
}

int store_node_register(struct store *st, const struct store_node *n, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r =
        store_prepare(st,
                      "INSERT INTO nodes(" NODE_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?5, 'up') "
                      "ON CONFLICT (id) DO UPDATE SET url = ?2, max_sandboxes = ?3, "
                      "max_runs = ?4, started_at = ?5, heartbeat_at = ?5, state = 'up'",
                      &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, n->id);
    db_bind_text(s, 2, n->url);
    db_bind_int64(s, 3, n->max_sandboxes);
    db_bind_int64(s, 4, n->max_runs);
    db_bind_int64(s, 5, n->started_at);
    return store_step_done(st, s, "register node", err);
}

int store_node_heartbeat(struct store *st, int64_t now, struct err *err)
{
    int r;
    {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        if ((r = store_prepare(st,
                               "UPDATE nodes SET heartbeat_at = ? WHERE id = ? AND state = 'up'",
                               &s, err)) < 0)
            return r;
        db_bind_int64(s, 1, now);
        db_bind_text(s, 2, st->node_id);
        if ((r = store_step_done(st, s, "node heartbeat", err)) < 0)
            return r;
        if (db_changes(st) == 1)
            return 0;
    }
    /* marked lost by another node while this one could not reach the store */
    _cleanup_stmt_ struct db_stmt *s = NULL;
    if ((r = store_prepare(st, "UPDATE nodes SET heartbeat_at = ?, state = 'up' WHERE id = ?", &s,
                           err)) < 0)
        return r;
    db_bind_int64(s, 1, now);
    db_bind_text(s, 2, st->node_id);
    if ((r = store_step_done(st, s, "node heartbeat", err)) < 0)
        return r;
    return db_changes(st) == 1 ? 1 : err_set(err, -ENOENT, "node '%s' has no row", st->node_id);
}

int store_node_stop(struct store *st, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE nodes SET state = 'stopped' WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, st->node_id);
    return store_step_done(st, s, "stop node", err);
}

int store_node_get(struct store *st, const char *id, struct store_node *out, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT " NODE_COLUMNS " FROM nodes WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no node '%s'", id);
    if (rc != DB_ROW)
        return store_fail(st, rc, "find node", err);
    read_node(s, out);
    return 0;
}

int store_node_list(struct store *st, void (*fn)(const struct store_node *n, void *ctx), void *ctx,
                    struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT " NODE_COLUMNS " FROM nodes ORDER BY id", &s, err);
    if (r < 0)
        return r;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_node n;
        read_node(s, &n);
        fn(&n, ctx);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list nodes", err);
}

int store_node_sweep(struct store *st, int64_t before,
                     void (*fn)(const struct store_node *n, void *ctx), void *ctx, struct err *err)
{
    /* One UPDATE decides: of several nodes sweeping at once, each lost node is marked (and
     * reported) by exactly one. */
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE nodes SET state = 'lost' WHERE state IN ('up', 'stopped') AND "
                          "id <> ?1 AND heartbeat_at < ?2 RETURNING " NODE_COLUMNS,
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, st->node_id);
    db_bind_int64(s, 2, before);
    int rc;
    struct buf lost;
    buf_init(&lost, 0);
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_node n;
        read_node(s, &n);
        buf_append(&lost, &n, sizeof(n));
    }
    store_release(s);
    s = NULL;
    size_t n = lost.len / sizeof(struct store_node);
    for (size_t i = 0; i < n; i++)
        fn((const struct store_node *)lost.data + i, ctx);
    buf_release(&lost);
    return rc == DB_DONE ? (int)n : store_fail(st, rc, "sweep nodes", err);
}

/* The review loop's own rows (src/github): the webhook deliveries it has acted on, so that a
 * redelivery runs nothing twice, kept to a number. */
#include "store/store_internal.h"

int store_github_delivery_add(struct store *st, const char *id, int64_t now, uint64_t keep,
                              struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "INSERT INTO github_deliveries(id, received_at) VALUES (?, ?) "
                          "ON CONFLICT (id) DO NOTHING",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    db_bind_int64(s, 2, now);
    if ((r = store_step_done(st, s, "record a webhook delivery", err)) < 0)
        return r;
    if (db_changes(st) == 0)
        return 0;
    /* the oldest beyond keep go (ties at the boundary stay: at most a few more) */
    _cleanup_stmt_ struct db_stmt *p = NULL;
    if ((r = store_prepare(st,
                           "DELETE FROM github_deliveries WHERE received_at < (SELECT received_at "
                           "FROM github_deliveries ORDER BY received_at DESC LIMIT 1 OFFSET ?)",
                           &p, err)) < 0)
        return r;
    db_bind_int64(p, 1, (int64_t)(keep ? keep - 1 : 0));
    if ((r = store_step_done(st, p, "prune webhook deliveries", err)) < 0)
        return r;
    return 1;
}

int64_t store_github_deliveries_count(struct store *st, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT count(*) FROM github_deliveries", &s, err);
    if (r < 0)
        return r;
    int rc = db_step(s);
    if (rc != DB_ROW)
        return store_fail(st, rc, "count webhook deliveries", err);
    return db_col_int64(s, 0);
}

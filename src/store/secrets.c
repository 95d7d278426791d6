/* How the store keeps a secret in a row, written once for every table that holds one: a
 * single-use secret (a sign-in link, an authorization code, a refresh token) is kept by its hash
 * and spent by one conditional UPDATE ... RETURNING, so that two spends at once cannot both win.
 * Its rule: what a failed spend means (unknown, expired, replayed) is the caller's; this file
 * only runs the spend and hands over the row. */
#include "store/store_internal.h"

int store_spend(struct store *st, const struct store_spend *sp, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, sp->sql, &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, sp->now);
    db_bind_text(s, 2, sp->hash);
    if (sp->bind)
        sp->bind(s, sp->ctx);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return 0;
    if (rc != DB_ROW)
        return store_fail(st, rc, sp->what, err);
    sp->read(s, sp->ctx);
    /* the rest of the rows, if any, and the write ends now rather than at the caller's return */
    while ((rc = db_step(s)) == DB_ROW)
        ;
    return rc == DB_DONE ? 1 : store_fail(st, rc, sp->what, err);
}

/* How the store keeps a secret in a row, written once for every table that holds one: a
 * single-use secret (a sign-in link, an authorization code, a refresh token) is kept by its hash
 * and spent by one conditional UPDATE ... RETURNING, so that two spends at once cannot both win;
 * a secret the server must read back (a user's credential, a notification target's signing
 * secret) is sealed under a label that names its row. Its rule: what a failed spend means
 * (unknown, expired, replayed) is the caller's; this file only runs the spend and hands over
 * the row, and only seals and opens. */
#include "store/store_internal.h"

#include <stdio.h>

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

static void row_label(char *out, size_t cap, const char *kind, const char *owner, const char *name)
{
    snprintf(out, cap, "%s %s %s", kind, owner, name);
}

void store_seal_row(const unsigned char key[SEAL_KEY_BYTES], const char *kind, const char *owner,
                    const char *name, const void *value, size_t n, unsigned char **out,
                    size_t *out_len)
{
    char label[160];
    row_label(label, sizeof(label), kind, owner, name);
    seal(key, value, n, label, out, out_len);
}

int store_unseal_col(struct db_stmt *s, int col, const unsigned char key[SEAL_KEY_BYTES],
                     const char *kind, const char *owner, const char *name, char **value, size_t *n,
                     struct err *err)
{
    char label[160];
    row_label(label, sizeof(label), kind, owner, name);
    size_t len = 0;
    const void *blob = db_col_blob(s, col, &len);
    return unseal(key, blob, len, label, value, n, err);
}

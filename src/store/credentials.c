/* Users' credentials in the store: sealed and opened with the key the caller holds, each bound
 * to its user and service (store_seal_row). */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "store/store_internal.h"

int store_credential_key_load(const char *data_dir, unsigned char key[SEAL_KEY_BYTES],
                              struct err *err)
{
    return seal_key_load(data_dir, STORE_CREDENTIAL_KEY, key, err);
}

const char *store_credential_problem(const char *value, size_t n)
{
    if (n == 0)
        return "the token is empty";
    if (n > STORE_CREDENTIAL_MAX)
        return "the token is longer than 255 characters";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)value[i];
        if (c == ' ')
            return "the token holds a space";
        if (c < ' ' || c >= 0x7f)
            return "the token holds a character that is not printable ASCII";
    }
    return NULL;
}

static int credential_put(struct store *st, const char *user_id, const char *service,
                          const unsigned char *sealed, size_t len, int64_t now, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r =
        store_prepare(st,
                      "INSERT INTO credentials(user_id, service, sealed, created_at, "
                      "updated_at) VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT (user_id, service) "
                      "DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
                      &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    db_bind_text(s, 2, service);
    db_bind_blob(s, 3, sealed, (int)len);
    db_bind_int64(s, 4, now);
    return store_step_done(st, s, "store a credential", err);
}

int store_credential_seal(struct store *st, const unsigned char key[SEAL_KEY_BYTES],
                          const char *user_id, const char *service, const char *value, size_t n,
                          int64_t now, struct err *err)
{
    const char *why = store_credential_problem(value, n);
    if (why)
        return err_set(err, -EINVAL, "%s", why);
    _cleanup_free_ unsigned char *sealed = NULL;
    size_t len = 0;
    store_seal_row(key, "credential", user_id, service, value, n, &sealed, &len);
    return credential_put(st, user_id, service, sealed, len, now, err);
}

int store_credential_open(struct store *st, const unsigned char key[SEAL_KEY_BYTES],
                          const char *user_id, const char *service, char **value, size_t *n,
                          struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT sealed FROM credentials WHERE user_id = ? AND service = ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    db_bind_text(s, 2, service);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no %s credential is set", service);
    if (rc != DB_ROW)
        return store_fail(st, rc, "read a credential", err);
    return store_unseal_col(s, 0, key, "credential", user_id, service, value, n, err);
}

int store_credential_delete(struct store *st, const char *user_id, const char *service,
                            struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "DELETE FROM credentials WHERE user_id = ? AND service = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    db_bind_text(s, 2, service);
    if ((r = store_step_done(st, s, "delete a credential", err)) < 0)
        return r;
    return db_changes(st) ? 0 : err_set(err, -ENOENT, "no %s credential is set", service);
}

int store_credential_list(struct store *st, const char *user_id,
                          void (*fn)(const struct store_credential *c, void *ctx), void *ctx,
                          struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT service, created_at, updated_at FROM credentials "
                          "WHERE user_id = ? ORDER BY service",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_credential c = {0};
        store_copy_text(c.service, sizeof(c.service), s, 0);
        c.created_at = db_col_int64(s, 1);
        c.updated_at = db_col_int64(s, 2);
        fn(&c, ctx);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list credentials", err);
}

/* Users' credentials in the store: sealed blobs, opened only by the caller with the key. */
#include "store/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "store/store_internal.h"

int store_credential_set(struct store *st, const char *user_id, const char *service,
                         const unsigned char *sealed, size_t len, int64_t now, struct err *err)
{
    _cleanup_stmt_ sqlite3_stmt *s = NULL;
    int r =
        store_prepare(st,
                      "INSERT INTO credentials(user_id, service, sealed, created_at, "
                      "updated_at) VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT (user_id, service) "
                      "DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
                      &s, err);
    if (r < 0)
        return r;
    sqlite3_bind_text(s, 1, user_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, service, -1, SQLITE_STATIC);
    sqlite3_bind_blob(s, 3, sealed, (int)len, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, now);
    return store_step_done(st, s, "store a credential", err);
}

int store_credential_get(struct store *st, const char *user_id, const char *service,
                         unsigned char **sealed, size_t *len, struct err *err)
{
    _cleanup_stmt_ sqlite3_stmt *s = NULL;
    int r = store_prepare(st, "SELECT sealed FROM credentials WHERE user_id = ? AND service = ?",
                          &s, err);
    if (r < 0)
        return r;
    sqlite3_bind_text(s, 1, user_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, service, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE)
        return err_set(err, -ENOENT, "no %s credential is set", service);
    if (rc != SQLITE_ROW)
        return store_fail(st, rc, "read a credential", err);
    *len = (size_t)sqlite3_column_bytes(s, 0);
    *sealed = xmalloc(*len ? *len : 1);
    memcpy(*sealed, sqlite3_column_blob(s, 0), *len);
    return 0;
}

int store_credential_delete(struct store *st, const char *user_id, const char *service,
                            struct err *err)
{
    _cleanup_stmt_ sqlite3_stmt *s = NULL;
    int r = store_prepare(st, "DELETE FROM credentials WHERE user_id = ? AND service = ?", &s, err);
    if (r < 0)
        return r;
    sqlite3_bind_text(s, 1, user_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, service, -1, SQLITE_STATIC);
    if ((r = store_step_done(st, s, "delete a credential", err)) < 0)
        return r;
    return sqlite3_changes(st->db) ? 0 : err_set(err, -ENOENT, "no %s credential is set", service);
}

int store_credential_list(struct store *st, const char *user_id,
                          void (*fn)(const struct store_credential *c, void *ctx), void *ctx,
                          struct err *err)
{
    _cleanup_stmt_ sqlite3_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT service, created_at, updated_at FROM credentials "
                          "WHERE user_id = ? ORDER BY service",
                          &s, err);
    if (r < 0)
        return r;
    sqlite3_bind_text(s, 1, user_id, -1, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_credential c = {0};
        store_copy_text(c.service, sizeof(c.service), s, 0);
        c.created_at = sqlite3_column_int64(s, 1);
        c.updated_at = sqlite3_column_int64(s, 2);
        fn(&c, ctx);
    }
    return rc == SQLITE_DONE ? 0 : store_fail(st, rc, "list credentials", err);
}

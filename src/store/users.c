/* Users and API tokens. */
#include "store/store.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/ids.h"
#include "base/util.h"
#include "store/store_internal.h"

static void copy_text(char *dst, size_t cap, struct db_stmt *s, int col)
{
    const char *t = db_col_text(s, col);
    snprintf(dst, cap, "%s", t ? t : "");
}

bool store_user_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > STORE_USER_NAME_MAX || !isalnum((unsigned char)name[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
            return false;
    return true;
}

int store_user_add(struct store *st, const char *name, struct store_user *out, struct err *err)
{
    if (!store_user_name_valid(name))
        return err_set(err, -EINVAL,
                       "invalid user name '%s': use 1..%d letters, digits, '.', '_' or '-', "
                       "starting with a letter or digit",
                       name, STORE_USER_NAME_MAX);
    struct store_user u = {.created_at = time_now_ms()};
    id_new("usr", u.id);
    snprintf(u.name, sizeof(u.name), "%s", name);
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "INSERT INTO users(id, name, created_at) VALUES (?, ?, ?)", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, u.id);
    db_bind_text(s, 2, u.name);
    db_bind_int64(s, 3, u.created_at);
    int rc = db_step(s);
    if (rc == DB_CONSTRAINT)
        return err_set(err, -EEXIST, "user '%s' already exists", name);
    if (rc != DB_DONE)
        return store_fail(st, rc, "insert user", err);
    if (out)
        *out = u;
    return 0;
}

int store_user_find(struct store *st, const char *name, struct store_user *out, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT id, name, created_at FROM users WHERE name = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, name);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no user named '%s'", name);
    if (rc != DB_ROW)
        return store_fail(st, rc, "find user", err);
    copy_text(out->id, sizeof(out->id), s, 0);
    copy_text(out->name, sizeof(out->name), s, 1);
    out->created_at = db_col_int64(s, 2);
    return 0;
}

int store_user_list(struct store *st, void (*fn)(const struct store_user *u, void *ctx), void *ctx,
                    struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT id, name, created_at FROM users ORDER BY name", &s, err);
    if (r < 0)
        return r;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_user u;
        copy_text(u.id, sizeof(u.id), s, 0);
        copy_text(u.name, sizeof(u.name), s, 1);
        u.created_at = db_col_int64(s, 2);
        fn(&u, ctx);
    }
    if (rc != DB_DONE)
        return store_fail(st, rc, "list users", err);
    return 0;
}

int store_user_count(struct store *st, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT count(*) FROM users", &s, err);
    if (r < 0)
        return r;
    if (db_step(s) != DB_ROW)
        return store_fail(st, DB_ERROR, "count users", err);
    return db_col_int(s, 0);
}

int store_token_create(struct store *st, const char *user_id, const char *label,
                       char plain[STORE_TOKEN_LEN + 1], struct store_token *out, struct err *err)
{
    unsigned char raw[32];
    char hash[65];
    struct store_token t = {.created_at = time_now_ms()};
    rand_bytes(raw, sizeof(raw));
    memcpy(plain, "smcp_", 5);
    base64url_encode(raw, sizeof(raw), plain + 5);
    sha256_hex(plain, strlen(plain), hash);
    id_new("tok", t.id);
    snprintf(t.user_id, sizeof(t.user_id), "%s", user_id);
    snprintf(t.prefix, sizeof(t.prefix), "%.12s", plain);
    snprintf(t.label, sizeof(t.label), "%s", label ? label : "");
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "INSERT INTO tokens(id, user_id, hash, prefix, label, created_at) "
                          "VALUES (?, ?, ?, ?, ?, ?)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, t.id);
    db_bind_text(s, 2, t.user_id);
    db_bind_text(s, 3, hash);
    db_bind_text(s, 4, t.prefix);
    db_bind_text(s, 5, t.label);
    db_bind_int64(s, 6, t.created_at);
    int rc = db_step(s);
    if (rc != DB_DONE)
        return store_fail(st, rc, "insert token", err);
    if (out)
        *out = t;
    return 0;
}

int store_token_list(struct store *st, const char *user_name,
                     void (*fn)(const struct store_token *t, void *ctx), void *ctx, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        "SELECT t.id, t.user_id, u.name, t.prefix, t.label, t.created_at, "
        "coalesce(t.last_used_at, 0), coalesce(t.revoked_at, 0) "
        "FROM tokens t JOIN users u ON u.id = t.user_id "
        "WHERE CAST(?1 AS TEXT) IS NULL OR u.name = ?1 ORDER BY t.created_at DESC, t.id",
        &s, err);
    if (r < 0)
        return r;
    if (user_name)
        db_bind_text(s, 1, user_name);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_token t;
        copy_text(t.id, sizeof(t.id), s, 0);
        copy_text(t.user_id, sizeof(t.user_id), s, 1);
        copy_text(t.user_name, sizeof(t.user_name), s, 2);
        copy_text(t.prefix, sizeof(t.prefix), s, 3);
        copy_text(t.label, sizeof(t.label), s, 4);
        t.created_at = db_col_int64(s, 5);
        t.last_used_at = db_col_int64(s, 6);
        t.revoked_at = db_col_int64(s, 7);
        fn(&t, ctx);
    }
    if (rc != DB_DONE)
        return store_fail(st, rc, "list tokens", err);
    return 0;
}

int store_token_revoke(struct store *st, const char *token_id, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st, "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, time_now_ms());
    db_bind_text(s, 2, token_id);
    int rc = db_step(s);
    if (rc != DB_DONE)
        return store_fail(st, rc, "revoke token", err);
    if (db_changes(st) == 0)
        return err_set(err, -ENOENT, "no active token with id '%s'", token_id);
    return 0;
}

int store_token_authenticate(struct store *st, const char *plain, size_t len,
                             struct store_user *out, struct err *err)
{
    char hash[65];
    sha256_hex(plain, len, hash);
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT u.id, u.name, u.created_at, t.id, coalesce(t.last_used_at, 0) "
                          "FROM tokens t JOIN users u ON u.id = t.user_id "
                          "WHERE t.hash = ? AND t.revoked_at IS NULL",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, hash);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "unknown or revoked token");
    if (rc != DB_ROW)
        return store_fail(st, rc, "authenticate", err);
    copy_text(out->id, sizeof(out->id), s, 0);
    copy_text(out->name, sizeof(out->name), s, 1);
    out->created_at = db_col_int64(s, 2);
    char token_id[64];
    copy_text(token_id, sizeof(token_id), s, 3);
    int64_t last = db_col_int64(s, 4), now = time_now_ms();
    db_reset(s);
    if (now - last > 60000) {
        _cleanup_stmt_ struct db_stmt *u = NULL;
        if (store_prepare(st, "UPDATE tokens SET last_used_at = ? WHERE id = ?", &u, NULL) == 0) {
            db_bind_int64(u, 1, now);
            db_bind_text(u, 2, token_id);
            db_step(u); /* best effort: a busy database must not fail the request */
        }
    }
    return 0;
}

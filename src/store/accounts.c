/* Signing in on the web pages: passwords, one-time sign-in links and browser sessions. Link and
 * session tokens are 32 random bytes (43 base64url characters); only their SHA-256 is stored,
 * like API tokens. */
#include "store/store.h"

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

static void read_user(struct store_user *out, struct db_stmt *s, int col)
{
    copy_text(out->id, sizeof(out->id), s, col);
    copy_text(out->name, sizeof(out->name), s, col + 1);
    out->created_at = db_col_int64(s, col + 2);
}

/* A new token into plain (43 characters and a NUL) and its SHA-256 into hash. */
static void new_secret(char plain[44], char hash[65])
{
    unsigned char raw[32];
    rand_bytes(raw, sizeof(raw));
    base64url_encode(raw, sizeof(raw), plain);
    explicit_bzero(raw, sizeof(raw));
    sha256_hex(plain, 43, hash);
}

_Static_assert(STORE_LINK_LEN == 43 && STORE_WEB_SESSION_LEN == 43, "tokens are 32 bytes");

/* --- passwords --- */

int store_user_set_password(struct store *st, const char *user_name, const char *hash,
                            struct err *err)
{
    bool clear = !hash || !hash[0];
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st, "UPDATE users SET password_hash = ?, password_set_at = ? WHERE name = ?", &s, err);
    if (r < 0)
        return r;
    if (clear) {
        db_bind_null(s, 1);
        db_bind_null(s, 2);
    } else {
        db_bind_text(s, 1, hash);
        db_bind_int64(s, 2, time_now_ms());
    }
    db_bind_text(s, 3, user_name);
    if ((r = store_step_done(st, s, "set password", err)) < 0)
        return r;
    if (db_changes(st) == 0)
        return err_set(err, -ENOENT, "no user named '%s'", user_name);
    return 0;
}

int store_user_rehash_password(struct store *st, const char *user_name, const char *old,
                               const char *new, bool *replaced, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st, "UPDATE users SET password_hash = ? WHERE name = ? AND password_hash = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, new);
    db_bind_text(s, 2, user_name);
    db_bind_text(s, 3, old);
    if ((r = store_step_done(st, s, "rehash password", err)) < 0)
        return r;
    *replaced = db_changes(st) > 0;
    return 0;
}

int store_user_password(struct store *st, const char *user_name, struct store_user *out, char *hash,
                        size_t cap, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT id, name, created_at, coalesce(password_hash, '') FROM users "
                          "WHERE name = ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_name);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no user named '%s'", user_name);
    if (rc != DB_ROW)
        return store_fail(st, rc, "find password", err);
    const char *h = db_col_text(s, 3);
    size_t n = h ? strlen(h) : 0;
    if (n >= cap)
        return err_set(err, -EOVERFLOW, "password hash of '%s' is longer than %zu bytes", user_name,
                       cap ? cap - 1 : 0);
    memcpy(hash, h ? h : "", n + 1);
    read_user(out, s, 0);
    return 0;
}

/* --- one-time sign-in links --- */

int store_login_link_create(struct store *st, const char *user_name, int64_t ttl_s,
                            char plain[STORE_LINK_LEN + 1], struct err *err)
{
    if (ttl_s <= 0 || ttl_s > STORE_LINK_TTL_MAX_S)
        return err_set(err, -EINVAL, "a sign-in link lasts 1 second to %d hours",
                       STORE_LINK_TTL_MAX_S / 3600);
    struct store_user u;
    int r = store_user_find(st, user_name, &u, err);
    if (r < 0)
        return r;
    int64_t now = time_now_ms();
    {
        /* links are made by hand, so few: the used and expired ones go whenever one is made */
        _cleanup_stmt_ struct db_stmt *s = NULL;
        if ((r = store_prepare(st,
                               "DELETE FROM login_links WHERE used_at IS NOT NULL OR "
                               "expires_at <= ?",
                               &s, err)) < 0)
            return r;
        db_bind_int64(s, 1, now);
        if ((r = store_step_done(st, s, "prune sign-in links", err)) < 0)
            return r;
    }
    char hash[65];
    new_secret(plain, hash);
    _cleanup_stmt_ struct db_stmt *s = NULL;
    if ((r = store_prepare(st,
                           "INSERT INTO login_links(hash, user_id, created_at, expires_at) "
                           "VALUES (?, ?, ?, ?)",
                           &s, err)) < 0)
        return r;
    db_bind_text(s, 1, hash);
    db_bind_text(s, 2, u.id);
    db_bind_int64(s, 3, now);
    db_bind_int64(s, 4, now + ttl_s * 1000);
    if ((r = store_step_done(st, s, "insert sign-in link", err)) < 0)
        explicit_bzero(plain, STORE_LINK_LEN + 1);
    return r;
}

static void link_user(struct db_stmt *s, void *user_id)
{
    copy_text(user_id, 64, s, 0);
}

int store_login_link_consume(struct store *st, const char *plain, size_t len,
                             struct store_user *out, struct err *err)
{
    if (len != STORE_LINK_LEN)
        return err_set(err, -ENOENT, "unknown, used or expired sign-in link");
    char hash[65];
    sha256_hex(plain, len, hash);
    int64_t now = time_now_ms();
    /* one statement marks it used and names its user, so two uses at once cannot both win */
    char user_id[64];
    struct store_spend sp = {
        .sql = "UPDATE login_links SET used_at = ?1 "
               "WHERE hash = ?2 AND used_at IS NULL AND expires_at > ?1 "
               "RETURNING user_id",
        .what = "use sign-in link",
        .hash = hash,
        .now = now,
        .read = link_user,
        .ctx = user_id,
    };
    int r = store_spend(st, &sp, err);
    if (r < 0)
        return r;
    if (r == 0)
        return err_set(err, -ENOENT, "unknown, used or expired sign-in link");
    _cleanup_stmt_ struct db_stmt *u = NULL;
    if ((r = store_prepare(st, "SELECT id, name, created_at FROM users WHERE id = ?", &u, err)) < 0)
        return r;
    db_bind_text(u, 1, user_id);
    int rc = db_step(u);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "unknown, used or expired sign-in link");
    if (rc != DB_ROW)
        return store_fail(st, rc, "use sign-in link", err);
    read_user(out, u, 0);
    return 0;
}

/* --- browser sessions --- */

int store_web_session_create(struct store *st, const char *user_id, int64_t ttl_s,
                             char plain[STORE_WEB_SESSION_LEN + 1], struct err *err)
{
    if (ttl_s <= 0 || ttl_s > STORE_WEB_SESSION_MAX_AGE_S)
        return err_set(err, -EINVAL, "a session lasts 1 second to %d days",
                       STORE_WEB_SESSION_MAX_AGE_S / 86400);
    int64_t now = time_now_ms();
    int r;
    {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        if ((r = store_prepare(st, "DELETE FROM web_sessions WHERE expires_at <= ?", &s, err)) < 0)
            return r;
        db_bind_int64(s, 1, now);
        if ((r = store_step_done(st, s, "prune sessions", err)) < 0)
            return r;
    }
    char hash[65];
    new_secret(plain, hash);
    {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        if ((r = store_prepare(st,
                               "INSERT INTO web_sessions(hash, user_id, created_at, idle_ms, "
                               "last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                               &s, err)) < 0)
            goto fail;
        db_bind_text(s, 1, hash);
        db_bind_text(s, 2, user_id);
        db_bind_int64(s, 3, now);
        db_bind_int64(s, 4, ttl_s * 1000);
        db_bind_int64(s, 5, now);
        db_bind_int64(s, 6, now + ttl_s * 1000);
        int rc = db_step(s);
        if (rc == DB_CONSTRAINT) {
            r = err_set(err, -ENOENT, "no user with id '%s'", user_id);
            goto fail;
        }
        if (rc != DB_DONE) {
            r = store_fail(st, rc, "insert session", err);
            goto fail;
        }
    }
    {
        /* each sign-in makes a session: keep a user's newest ones only */
        _cleanup_stmt_ struct db_stmt *s = NULL;
        if (store_prepare(st,
                          "DELETE FROM web_sessions WHERE user_id = ?1 AND hash NOT IN "
                          "(SELECT hash FROM web_sessions WHERE user_id = ?1 "
                          "ORDER BY created_at DESC, hash LIMIT ?2)",
                          &s, NULL) == 0) {
            db_bind_text(s, 1, user_id);
            db_bind_int64(s, 2, STORE_WEB_SESSIONS_PER_USER);
            db_step(s); /* best effort: the next sign-in tries again */
        }
    }
    return 0;
fail:
    explicit_bzero(plain, STORE_WEB_SESSION_LEN + 1);
    return r;
}

int store_web_session_get(struct store *st, const char *plain, size_t len, struct store_user *out,
                          struct err *err)
{
    if (len != STORE_WEB_SESSION_LEN)
        return err_set(err, -ENOENT, "unknown or expired session");
    char hash[65];
    sha256_hex(plain, len, hash);
    int64_t now = time_now_ms();
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT u.id, u.name, u.created_at, w.last_seen_at, w.idle_ms, "
                          "w.created_at FROM web_sessions w JOIN users u ON u.id = w.user_id "
                          "WHERE w.hash = ? AND w.expires_at > ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, hash);
    db_bind_int64(s, 2, now);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "unknown or expired session");
    if (rc != DB_ROW)
        return store_fail(st, rc, "find session", err);
    read_user(out, s, 0);
    int64_t last = db_col_int64(s, 3), idle = db_col_int64(s, 4), created = db_col_int64(s, 5);
    db_reset(s);
    if (now - last >= 60000) {
        int64_t end = now + idle, max = created + (int64_t)STORE_WEB_SESSION_MAX_AGE_S * 1000;
        _cleanup_stmt_ struct db_stmt *u = NULL;
        if (store_prepare(st,
                          "UPDATE web_sessions SET last_seen_at = ?, expires_at = ? "
                          "WHERE hash = ?",
                          &u, NULL) == 0) {
            db_bind_int64(u, 1, now);
            db_bind_int64(u, 2, end < max ? end : max);
            db_bind_text(u, 3, hash);
            db_step(u); /* best effort: a busy database must not fail the request */
        }
    }
    return 0;
}

int store_web_session_delete(struct store *st, const char *plain, size_t len, struct err *err)
{
    if (len != STORE_WEB_SESSION_LEN)
        return err_set(err, -ENOENT, "unknown session");
    char hash[65];
    sha256_hex(plain, len, hash);
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "DELETE FROM web_sessions WHERE hash = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, hash);
    if ((r = store_step_done(st, s, "delete session", err)) < 0)
        return r;
    if (db_changes(st) == 0)
        return err_set(err, -ENOENT, "unknown session");
    return 0;
}

int store_web_session_delete_user(struct store *st, const char *user_id, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "DELETE FROM web_sessions WHERE user_id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    if ((r = store_step_done(st, s, "delete sessions", err)) < 0)
        return r;
    return db_changes(st);
}

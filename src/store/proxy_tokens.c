/* Proxy tokens: revocation and usage by JWT id. */
#include "store/store.h"

#include <errno.h>
#include <string.h>

#include "base/util.h"
#include "store/store_internal.h"

int store_proxy_token_add(struct store *st, const struct store_proxy_token *t, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "INSERT INTO proxy_tokens(jti, user_id, run_id, session_id, sandbox_id, "
                          "services, created_at, expires_at) VALUES (?, ?, nullif(?, ''), "
                          "nullif(?, ''), nullif(?, ''), ?, ?, ?)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, t->jti);
    db_bind_text(s, 2, t->user_id);
    db_bind_text(s, 3, t->run_id);
    db_bind_text(s, 4, t->session_id);
    db_bind_text(s, 5, t->sandbox_id);
    db_bind_text(s, 6, t->services);
    db_bind_int64(s, 7, t->created_at);
    db_bind_int64(s, 8, t->expires_at);
    int rc = db_step(s);
    if (rc != DB_DONE)
        return store_fail(st, rc, "insert proxy token", err);
    return 0;
}

static int exec_jti(struct store *st, const char *sql, const char *arg, const char *what,
                    struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, sql, &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, time_now_ms() / 1000);
    db_bind_text(s, 2, arg);
    int rc = db_step(s);
    if (rc != DB_DONE)
        return store_fail(st, rc, what, err);
    return (int)db_changes(st);
}

int store_proxy_token_revoke(struct store *st, const char *jti, struct err *err)
{
    int r =
        exec_jti(st, "UPDATE proxy_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE jti = ?",
                 jti, "revoke proxy token", err);
    if (r == 0)
        return err_set(err, -ENOENT, "no proxy token '%s'", jti);
    return r < 0 ? r : 0;
}

int store_proxy_token_check(struct store *st, const char *jti, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r =
        store_prepare(st, "SELECT revoked_at IS NOT NULL FROM proxy_tokens WHERE jti = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, jti);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "unknown token");
    if (rc != DB_ROW)
        return store_fail(st, rc, "check proxy token", err);
    if (db_col_int(s, 0))
        return err_set(err, -EKEYREVOKED, "token revoked: its run has ended");
    return 0;
}

int store_proxy_token_usage(struct store *st, const struct store_token_usage *u, size_t n,
                            struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE proxy_tokens SET requests = requests + ?, "
                          "input_tokens = input_tokens + ?, output_tokens = output_tokens + ? "
                          "WHERE jti = ?",
                          &s, err);
    if (r < 0 || (r = store_exec(st, "BEGIN IMMEDIATE", err)) < 0)
        return r;
    for (size_t i = 0; i < n && r == 0; i++) {
        db_reset(s);
        db_bind_int64(s, 1, u[i].requests);
        db_bind_int64(s, 2, u[i].input_tokens);
        db_bind_int64(s, 3, u[i].output_tokens);
        db_bind_text(s, 4, u[i].jti);
        r = store_step_done(st, s, "record proxy usage", err);
    }
    if (r < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    return store_exec(st, "COMMIT", err);
}

int store_proxy_token_revoke_run(struct store *st, const char *run_id, struct err *err)
{
    return exec_jti(
        st, "UPDATE proxy_tokens SET revoked_at = ? WHERE run_id = ? AND revoked_at IS NULL",
        run_id, "revoke run tokens", err);
}

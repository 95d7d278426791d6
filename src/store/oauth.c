/* OAuth clients, grants, codes and tokens. Codes and tokens are looked up by their SHA-256; the
 * plaintext leaves this file once, to the client it is issued to. */
#include "store/store_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "base/util.h"

#define GRANT_COLUMNS                                                                              \
    "g.id, g.user_id, u.name, g.client_id, g.client_name, g.redirect_host, g.scope, "              \
    "g.created_at, coalesce(g.last_used_at, 0)"

static void read_grant(struct db_stmt *s, int col, struct store_oauth_grant *g)
{
    store_copy_text(g->id, sizeof(g->id), s, col);
    store_copy_text(g->user_id, sizeof(g->user_id), s, col + 1);
    store_copy_text(g->user_name, sizeof(g->user_name), s, col + 2);
    store_copy_text(g->client_id, sizeof(g->client_id), s, col + 3);
    store_copy_text(g->client_name, sizeof(g->client_name), s, col + 4);
    store_copy_text(g->redirect_host, sizeof(g->redirect_host), s, col + 5);
    store_copy_text(g->scope, sizeof(g->scope), s, col + 6);
    g->created_at = db_col_int64(s, col + 7);
    g->last_used_at = db_col_int64(s, col + 8);
}

/* --- clients --- */

void store_oauth_client_clear(struct store_oauth_client *c)
{
    free(c->redirect_uris);
    c->redirect_uris = NULL;
}

int store_oauth_client_put(struct store *st, const struct store_oauth_client *c, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        "INSERT INTO oauth_clients(id, kind, name, redirect_uris, auth_method, secret_hash, "
        "created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, nullif(?6, ''), ?7, ?8) "
        "ON CONFLICT(id) DO UPDATE SET kind = ?2, name = ?3, redirect_uris = ?4, "
        "auth_method = ?5, secret_hash = nullif(?6, ''), expires_at = ?8",
        &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, c->id);
    db_bind_text(s, 2, c->kind);
    db_bind_text(s, 3, c->name);
    db_bind_text(s, 4, c->redirect_uris ? c->redirect_uris : "[]");
    db_bind_text(s, 5, c->auth_method);
    db_bind_text(s, 6, c->secret_hash);
    db_bind_int64(s, 7, c->created_at ? c->created_at : time_now_ms());
    db_bind_int64(s, 8, c->expires_at);
    int rc = db_step(s);
    return rc == DB_DONE ? 0 : store_fail(st, rc, "save client", err);
}

int store_oauth_client_get(struct store *st, const char *id, struct store_oauth_client *out,
                           struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT id, kind, name, redirect_uris, auth_method, "
                          "coalesce(secret_hash, ''), created_at, expires_at "
                          "FROM oauth_clients WHERE id = ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "unknown client");
    if (rc != DB_ROW)
        return store_fail(st, rc, "find client", err);
    store_copy_text(out->id, sizeof(out->id), s, 0);
    store_copy_text(out->kind, sizeof(out->kind), s, 1);
    store_copy_text(out->name, sizeof(out->name), s, 2);
    out->redirect_uris = xstrdup(db_col_text(s, 3));
    store_copy_text(out->auth_method, sizeof(out->auth_method), s, 4);
    store_copy_text(out->secret_hash, sizeof(out->secret_hash), s, 5);
    out->created_at = db_col_int64(s, 6);
    out->expires_at = db_col_int64(s, 7);
    return 0;
}

int store_oauth_clients_prune(struct store *st, int64_t max_age_ms, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "DELETE FROM oauth_clients WHERE NOT EXISTS "
                          "(SELECT 1 FROM oauth_grants g WHERE g.client_id = oauth_clients.id) "
                          "AND ((kind = 'registered' AND created_at < ?1) "
                          "OR (kind = 'document' AND expires_at < ?2))",
                          &s, err);
    if (r < 0)
        return r;
    int64_t now = time_now_ms();
    db_bind_int64(s, 1, now - max_age_ms);
    db_bind_int64(s, 2, now);
    int rc = db_step(s);
    if (rc != DB_DONE)
        return store_fail(st, rc, "prune clients", err);
    _cleanup_stmt_ struct db_stmt *c = NULL;
    r = store_prepare(st, "SELECT count(*) FROM oauth_clients WHERE approved_at = 0", &c, err);
    if (r < 0)
        return r;
    if (db_step(c) != DB_ROW)
        return store_fail(st, DB_ERROR, "count clients", err);
    return db_col_int(c, 0);
}

int store_oauth_client_evict(struct store *st, char evicted[STORE_OAUTH_CLIENT_ID_MAX + 1],
                             struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "DELETE FROM oauth_clients WHERE id = (SELECT c.id FROM oauth_clients c "
                          "WHERE c.approved_at = 0 AND NOT EXISTS (SELECT 1 FROM oauth_grants g "
                          "WHERE g.client_id = c.id) ORDER BY c.approved_at, c.created_at "
                          "LIMIT 1) RETURNING id",
                          &s, err);
    if (r < 0)
        return r;
    evicted[0] = '\0';
    int rc = db_step(s);
    if (rc == DB_ROW) {
        store_copy_text(evicted, STORE_OAUTH_CLIENT_ID_MAX + 1, s, 0);
        while (rc == DB_ROW)
            rc = db_step(s);
        return rc == DB_DONE ? 1 : store_fail(st, rc, "evict client", err);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "evict client", err);
}

/* --- grants --- */

int store_oauth_grant_find(struct store *st, const char *user_id, const char *client_id,
                           struct store_oauth_grant *out, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT " GRANT_COLUMNS " FROM oauth_grants g JOIN users u "
                          "ON u.id = g.user_id WHERE g.user_id = ? AND g.client_id = ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    db_bind_text(s, 2, client_id);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no grant");
    if (rc != DB_ROW)
        return store_fail(st, rc, "find grant", err);
    read_grant(s, 0, out);
    return 0;
}

int store_oauth_grant_approve(struct store *st, const char *user_id, const char *client_id,
                              const char *client_name, const char *redirect_host, const char *scope,
                              struct store_oauth_grant *out, struct err *err)
{
    char id[64];
    id_new("grt", id);
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "INSERT INTO oauth_grants(id, user_id, client_id, client_name, "
                          "redirect_host, scope, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                          "ON CONFLICT(user_id, client_id) DO UPDATE SET "
                          "client_name = excluded.client_name, "
                          "redirect_host = excluded.redirect_host, scope = excluded.scope",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    db_bind_text(s, 2, user_id);
    db_bind_text(s, 3, client_id);
    db_bind_text(s, 4, client_name);
    db_bind_text(s, 5, redirect_host);
    db_bind_text(s, 6, scope);
    db_bind_int64(s, 7, time_now_ms());
    int rc = db_step(s);
    if (rc != DB_DONE)
        return store_fail(st, rc, "save grant", err);
    store_release(s);
    s = NULL;
    /* from now on the client is never evicted to make room (store_oauth_client_evict) */
    r = store_prepare(st,
                      "UPDATE oauth_clients SET approved_at = ? WHERE id = ? AND approved_at = 0 "
                      "RETURNING id",
                      &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, time_now_ms());
    db_bind_text(s, 2, client_id);
    rc = db_step(s);
    bool first = rc == DB_ROW;
    while (rc == DB_ROW)
        rc = db_step(s);
    if (rc != DB_DONE)
        return store_fail(st, rc, "mark client approved", err);
    store_release(s);
    s = NULL;
    r = store_oauth_grant_find(st, user_id, client_id, out, err);
    return r < 0 ? r : first;
}

int store_oauth_grant_list(struct store *st, const char *user_name,
                           void (*fn)(const struct store_oauth_grant *g, void *ctx), void *ctx,
                           struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT " GRANT_COLUMNS " FROM oauth_grants g JOIN users u "
                          "ON u.id = g.user_id WHERE CAST(?1 AS TEXT) IS NULL OR u.name = ?1 "
                          "ORDER BY g.created_at DESC, g.id",
                          &s, err);
    if (r < 0)
        return r;
    if (user_name)
        db_bind_text(s, 1, user_name);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_oauth_grant g;
        read_grant(s, 0, &g);
        fn(&g, ctx);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list grants", err);
}

int store_oauth_grant_revoke(struct store *st, const char *grant_id, const char *user_id,
                             struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st, "DELETE FROM oauth_grants WHERE id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR user_id = ?2)",
        &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, grant_id);
    if (user_id)
        db_bind_text(s, 2, user_id);
    int rc = db_step(s);
    if (rc != DB_DONE)
        return store_fail(st, rc, "revoke grant", err);
    if (db_changes(st) == 0)
        return err_set(err, -ENOENT, "no grant with id '%s'", grant_id);
    return 0;
}

/* --- codes and tokens --- */

static void new_secret(const char *prefix, char *plain, char hash[65])
{
    unsigned char raw[32];
    rand_bytes(raw, sizeof(raw));
    size_t n = strlen(prefix);
    memcpy(plain, prefix, n);
    base64url_encode(raw, sizeof(raw), plain + n);
    sha256_hex(plain, strlen(plain), hash);
}

/* Delete what has expired: codes at once, tokens a day after (a spent refresh token is kept
 * until its expiry, so that its replay is recognised; its reuses within the rotation overlap
 * are counted on its row). */
static void prune_expired(struct store *st)
{
    _cleanup_stmt_ struct db_stmt *c = NULL, *t = NULL;
    int64_t now = time_now_ms();
    if (store_prepare(st, "DELETE FROM oauth_codes WHERE expires_at < ?", &c, NULL) == 0) {
        db_bind_int64(c, 1, now - 3600 * 1000);
        db_step(c);
    }
    if (store_prepare(st, "DELETE FROM oauth_tokens WHERE expires_at < ?", &t, NULL) == 0) {
        db_bind_int64(t, 1, now - 86400 * 1000);
        db_step(t);
    }
}

int store_oauth_code_create(struct store *st, const char *grant_id, const char *redirect_uri,
                            const char *challenge, const char *resource, const char *scope,
                            int64_t ttl_ms, char plain[STORE_OAUTH_CODE_LEN + 1], struct err *err)
{
    char hash[65];
    new_secret("", plain, hash);
    prune_expired(st);
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "INSERT INTO oauth_codes(hash, grant_id, redirect_uri, challenge, "
                          "resource, scope, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, hash);
    db_bind_text(s, 2, grant_id);
    db_bind_text(s, 3, redirect_uri);
    db_bind_text(s, 4, challenge);
    db_bind_text(s, 5, resource);
    db_bind_text(s, 6, scope);
    db_bind_int64(s, 7, time_now_ms() + ttl_ms);
    int rc = db_step(s);
    return rc == DB_DONE ? 0 : store_fail(st, rc, "save code", err);
}

/* The grant a code or token was issued under (-ENOENT when revoked since). */
static int grant_by_id(struct store *st, const char *id, struct store_oauth_grant *out,
                       struct err *err)
{
    _cleanup_stmt_ struct db_stmt *g = NULL;
    int r = store_prepare(st,
                          "SELECT " GRANT_COLUMNS " FROM oauth_grants g JOIN users u "
                          "ON u.id = g.user_id WHERE g.id = ?",
                          &g, err);
    if (r < 0)
        return r;
    db_bind_text(g, 1, id);
    if (db_step(g) != DB_ROW)
        return err_set(err, -ENOENT, "the grant was revoked");
    read_grant(g, 0, out);
    return 0;
}

static int revoke_family(struct store *st, const char *family, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "DELETE FROM oauth_tokens WHERE family = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, family);
    int rc = db_step(s);
    return rc == DB_DONE ? 0 : store_fail(st, rc, "revoke tokens", err);
}

struct code_row {
    struct store_oauth_code *out;
    char grant_id[64];
};

static void read_code(struct db_stmt *s, void *ctx)
{
    struct code_row *row = ctx;
    store_copy_text(row->grant_id, sizeof(row->grant_id), s, 0);
    store_copy_text(row->out->redirect_uri, sizeof(row->out->redirect_uri), s, 1);
    store_copy_text(row->out->challenge, sizeof(row->out->challenge), s, 2);
    store_copy_text(row->out->resource, sizeof(row->out->resource), s, 3);
    store_copy_text(row->out->scope, sizeof(row->out->scope), s, 4);
}

int store_oauth_code_redeem(struct store *st, const char *plain, size_t len,
                            struct store_oauth_code *out, struct err *err)
{
    if (len != STORE_OAUTH_CODE_LEN)
        return err_set(err, -ENOENT, "unknown code");
    char hash[65];
    sha256_hex(plain, len, hash);
    int64_t now = time_now_ms();
    struct code_row row = {.out = out};
    struct store_spend sp = {
        .sql = "UPDATE oauth_codes SET used_at = ?1 WHERE hash = ?2 AND used_at IS NULL "
               "AND expires_at >= ?1 RETURNING grant_id, redirect_uri, challenge, resource, scope",
        .what = "redeem code",
        .hash = hash,
        .now = now,
        .read = read_code,
        .ctx = &row,
    };
    int r = store_spend(st, &sp, err);
    if (r < 0)
        return r;
    if (r == 1) {
        memcpy(out->family, hash, sizeof(hash));
        return grant_by_id(st, row.grant_id, &out->grant, err);
    }
    /* Not redeemable: presented before (then whatever it issued ends), expired, or unknown. */
    _cleanup_stmt_ struct db_stmt *q = NULL;
    r = store_prepare(st, "SELECT used_at IS NOT NULL FROM oauth_codes WHERE hash = ?", &q, err);
    if (r < 0)
        return r;
    db_bind_text(q, 1, hash);
    if (db_step(q) == DB_ROW && db_col_int(q, 0)) {
        store_release(q);
        q = NULL;
        r = revoke_family(st, hash, err);
        if (r < 0)
            return r;
        return err_set(err, -EALREADY, "the code was used before");
    }
    return err_set(err, -ENOENT, "unknown or expired code");
}

static int insert_token(struct store *st, const char *hash, const char *grant_id,
                        const char *family, const char *kind, const char *scope,
                        const char *resource, int64_t now, int64_t ttl_ms, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "INSERT INTO oauth_tokens(hash, grant_id, family, kind, scope, resource, "
                          "created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, hash);
    db_bind_text(s, 2, grant_id);
    db_bind_text(s, 3, family);
    db_bind_text(s, 4, kind);
    db_bind_text(s, 5, scope);
    db_bind_text(s, 6, resource);
    db_bind_int64(s, 7, now);
    db_bind_int64(s, 8, now + ttl_ms);
    int rc = db_step(s);
    return rc == DB_DONE ? 0 : store_fail(st, rc, "save token", err);
}

int store_oauth_tokens_issue(struct store *st, const char *grant_id, const char *family,
                             const char *scope, const char *resource, int64_t access_ttl_ms,
                             int64_t refresh_ttl_ms, char at[STORE_OAUTH_TOKEN_LEN + 1],
                             char rt[STORE_OAUTH_TOKEN_LEN + 1], struct err *err)
{
    char ah[65], rh[65];
    int64_t now = time_now_ms();
    new_secret(STORE_OAUTH_ACCESS_PREFIX, at, ah);
    rt[0] = '\0';
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    r = insert_token(st, ah, grant_id, family, "access", scope, resource, now, access_ttl_ms, err);
    if (r == 0 && refresh_ttl_ms > 0) {
        new_secret(STORE_OAUTH_REFRESH_PREFIX, rt, rh);
        r = insert_token(st, rh, grant_id, family, "refresh", scope, resource, now, refresh_ttl_ms,
                         err);
    }
    if (r < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    return store_exec(st, "COMMIT", err);
}

#define TOKEN_JOIN                                                                                 \
    "FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id JOIN users u ON u.id = "         \
    "g.user_id "

#define SPENT_RETURNING "RETURNING family, grant_id, scope, resource, expires_at, reuses"

/* The row a spend or a reuse updated, into out; its grant is read after. */
struct spent {
    struct store_oauth_token *out;
    char grant_id[64];
    int reuses;
    const char *client_id;
    int64_t since, max; /* a reuse: spent at or after since, fewer than max reuses so far */
};

static void read_spent(struct db_stmt *s, void *ctx)
{
    struct spent *sp = ctx;
    store_copy_text(sp->out->family, sizeof(sp->out->family), s, 0);
    store_copy_text(sp->grant_id, sizeof(sp->grant_id), s, 1);
    store_copy_text(sp->out->scope, sizeof(sp->out->scope), s, 2);
    store_copy_text(sp->out->resource, sizeof(sp->out->resource), s, 3);
    sp->out->expires_at = db_col_int64(s, 4);
    sp->reuses = db_col_int(s, 5);
}

static void bind_spend(struct db_stmt *s, void *ctx)
{
    db_bind_text(s, 3, ((struct spent *)ctx)->client_id);
}

static void bind_reuse(struct db_stmt *s, void *ctx)
{
    struct spent *sp = ctx;
    db_bind_text(s, 3, sp->client_id);
    db_bind_int64(s, 4, sp->since);
    db_bind_int64(s, 5, sp->max);
}

/* The token, spent and not admitted again: whoever presents it, its grant ends. Each step of a
 * spend is one conditional UPDATE, so a token only moves forward (unspent, spent, reused up to
 * the cap) and concurrent spends on one node or several each see one of those states. */
static int spent_replayed(struct store *st, const char *hash, const char *client_id,
                          const struct store_oauth_reuse *reuse, int64_t now, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *q = NULL;
    int r = store_prepare(st,
                          "SELECT t.grant_id, g.client_id, t.spent_at, t.reuses FROM oauth_tokens "
                          "t JOIN oauth_grants g ON g.id = t.grant_id WHERE t.hash = ? AND "
                          "t.kind = 'refresh' AND t.spent_at IS NOT NULL",
                          &q, err);
    if (r < 0)
        return r;
    db_bind_text(q, 1, hash);
    int rc = db_step(q);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "unknown or expired refresh token");
    if (rc != DB_ROW)
        return store_fail(st, rc, "find refresh token", err);
    char grant_id[64];
    store_copy_text(grant_id, sizeof(grant_id), q, 0);
    bool other = strcmp(db_col_text(q, 1), client_id) != 0;
    bool late = reuse->window_ms <= 0 || db_col_int64(q, 2) < now - reuse->window_ms;
    int reuses = db_col_int(q, 3);
    store_release(q);
    q = NULL;
    r = store_oauth_grant_revoke(st, grant_id, NULL, err);
    if (r < 0 && r != -ENOENT)
        return r;
    if (other)
        return err_set(err, -EALREADY, "the spent refresh token came from another client");
    if (!late && reuses >= reuse->max)
        return err_set(err, -EALREADY, "the refresh token was reused more than %d times",
                       reuse->max);
    return err_set(err, -EALREADY, "the refresh token was used before");
}

int store_oauth_refresh_spend(struct store *st, const char *plain, size_t len,
                              const char *client_id, const struct store_oauth_reuse *reuse,
                              struct store_oauth_token *out, struct err *err)
{
    if (len != STORE_OAUTH_TOKEN_LEN || strncmp(plain, STORE_OAUTH_REFRESH_PREFIX, 8) != 0)
        return err_set(err, -ENOENT, "unknown refresh token");
    char hash[65];
    sha256_hex(plain, len, hash);
    int64_t now = time_now_ms();
    struct spent row = {.out = out, .client_id = client_id};
    struct store_spend sp = {
        .sql = "UPDATE oauth_tokens SET spent_at = ?1 WHERE hash = ?2 AND kind = 'refresh' AND "
               "spent_at IS NULL AND expires_at >= ?1 AND grant_id IN "
               "(SELECT id FROM oauth_grants WHERE client_id = ?3) " SPENT_RETURNING,
        .what = "spend refresh token",
        .hash = hash,
        .now = now,
        .bind = bind_spend,
        .read = read_spent,
        .ctx = &row,
    };
    int r = store_spend(st, &sp, err);
    if (r < 0)
        return r;
    if (r == 1)
        return grant_by_id(st, row.grant_id, &out->grant, err);
    if (reuse->window_ms > 0) {
        /* rotated moments ago: the same client again, within the window and the cap */
        row.since = now - reuse->window_ms;
        row.max = reuse->max;
        struct store_spend again = {
            .sql = "UPDATE oauth_tokens SET reuses = reuses + 1 WHERE hash = ?2 AND kind = "
                   "'refresh' AND spent_at IS NOT NULL AND spent_at >= ?4 AND reuses < ?5 "
                   "AND expires_at >= ?1 AND grant_id IN (SELECT id FROM oauth_grants "
                   "WHERE client_id = ?3) " SPENT_RETURNING,
            .what = "reuse refresh token",
            .hash = hash,
            .now = now,
            .bind = bind_reuse,
            .read = read_spent,
            .ctx = &row,
        };
        r = store_spend(st, &again, err);
        if (r < 0)
            return r;
        if (r == 1) {
            r = grant_by_id(st, row.grant_id, &out->grant, err);
            return r < 0 ? r : row.reuses;
        }
    }
    /* not spendable: an unspent token of another client stays as it is (-ENOENT) */
    return spent_replayed(st, hash, client_id, reuse, now, err);
}

int store_oauth_access_check(struct store *st, const char *plain, size_t len,
                             struct store_user *user, struct store_oauth_token *out,
                             struct err *err)
{
    if (len != STORE_OAUTH_TOKEN_LEN || strncmp(plain, STORE_OAUTH_ACCESS_PREFIX, 8) != 0)
        return err_set(err, -ENOENT, "unknown token");
    char hash[65];
    sha256_hex(plain, len, hash);
    int64_t now = time_now_ms();
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        "SELECT t.family, t.scope, t.resource, t.expires_at, u.created_at, " GRANT_COLUMNS
        " " TOKEN_JOIN "WHERE t.hash = ? AND t.kind = 'access' "
        "AND t.expires_at >= ?",
        &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, hash);
    db_bind_int64(s, 2, now);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "unknown, revoked or expired token");
    if (rc != DB_ROW)
        return store_fail(st, rc, "check token", err);
    store_copy_text(out->family, sizeof(out->family), s, 0);
    store_copy_text(out->scope, sizeof(out->scope), s, 1);
    store_copy_text(out->resource, sizeof(out->resource), s, 2);
    out->expires_at = db_col_int64(s, 3);
    user->created_at = db_col_int64(s, 4);
    read_grant(s, 5, &out->grant);
    snprintf(user->id, sizeof(user->id), "%s", out->grant.user_id);
    snprintf(user->name, sizeof(user->name), "%s", out->grant.user_name);
    store_release(s);
    s = NULL;
    if (now - out->grant.last_used_at > 60000) {
        _cleanup_stmt_ struct db_stmt *u = NULL;
        if (store_prepare(st, "UPDATE oauth_grants SET last_used_at = ? WHERE id = ?", &u, NULL) ==
            0) {
            db_bind_int64(u, 1, now);
            db_bind_text(u, 2, out->grant.id);
            db_step(u); /* best effort, as for API tokens */
        }
    }
    return 0;
}

int store_oauth_token_revoke(struct store *st, const char *plain, size_t len, const char *client_id,
                             struct err *err)
{
    if (len != STORE_OAUTH_TOKEN_LEN)
        return 0;
    char hash[65];
    sha256_hex(plain, len, hash);
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT t.kind, t.family FROM oauth_tokens t JOIN oauth_grants g "
                          "ON g.id = t.grant_id WHERE t.hash = ? AND g.client_id = ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, hash);
    db_bind_text(s, 2, client_id);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return 0;
    if (rc != DB_ROW)
        return store_fail(st, rc, "find token", err);
    char kind[16], family[65];
    store_copy_text(kind, sizeof(kind), s, 0);
    store_copy_text(family, sizeof(family), s, 1);
    store_release(s);
    s = NULL;
    if (strcmp(kind, "refresh") == 0)
        return revoke_family(st, family, err);
    _cleanup_stmt_ struct db_stmt *d = NULL;
    r = store_prepare(st, "DELETE FROM oauth_tokens WHERE hash = ?", &d, err);
    if (r < 0)
        return r;
    db_bind_text(d, 1, hash);
    rc = db_step(d);
    return rc == DB_DONE ? 0 : store_fail(st, rc, "revoke token", err);
}

/* Notification targets and the outbox. An event is queued in the transaction that records it,
 * one row per target of its user; the sender (src/notify) takes due rows, and every row ends
 * delivered or failed. What a user can make wait is bounded: a few targets, and a cap on rows
 * waiting, past which events are dropped and the target says so. */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/ids.h"
#include "base/util.h"
#include "store/store_internal.h"

void store_set_notify_hook(struct store *st, void (*fn)(void *ctx), void *ctx)
{
    st->notify_hook = fn;
    st->notify_ctx = ctx;
}

void store_notify_committed(struct store *st)
{
    bool queued = st->notify_queued;
    st->notify_queued = false;
    if (queued && st->notify_hook)
        st->notify_hook(st->notify_ctx);
}

#define TARGET_COLUMNS                                                                             \
    "t.id, t.user_id, t.kind, t.url, t.created_at, coalesce(t.last_status, ''), "                  \
    "coalesce(t.last_error, ''), coalesce(t.last_at, 0)"

static void read_target(struct db_stmt *s, struct store_notify_target *t)
{
    memset(t, 0, sizeof(*t));
    store_copy_text(t->id, sizeof(t->id), s, 0);
    store_copy_text(t->user_id, sizeof(t->user_id), s, 1);
    store_copy_text(t->kind, sizeof(t->kind), s, 2);
    store_copy_text(t->url, sizeof(t->url), s, 3);
    t->created_at = db_col_int64(s, 4);
    store_copy_text(t->last_status, sizeof(t->last_status), s, 5);
    store_copy_text(t->last_error, sizeof(t->last_error), s, 6);
    t->last_at = db_col_int64(s, 7);
}

static int count_targets(struct store *st, const char *user_id, int *n, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT count(*) FROM notify_targets WHERE user_id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    int rc = db_step(s);
    if (rc != DB_ROW)
        return store_fail(st, rc, "count notification targets", err);
    *n = db_col_int(s, 0);
    return 0;
}

static int insert_target(struct store *st, const struct store_notify_target *t,
                         const unsigned char *sealed, size_t len, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "INSERT INTO notify_targets(id, user_id, kind, url, sealed, created_at) "
                          "VALUES (?, ?, ?, ?, ?, ?)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, t->id);
    db_bind_text(s, 2, t->user_id);
    db_bind_text(s, 3, t->kind);
    db_bind_text(s, 4, t->url);
    if (sealed)
        db_bind_blob(s, 5, sealed, (int)len);
    db_bind_int64(s, 6, t->created_at);
    return store_step_done(st, s, "add a notification target", err);
}

int store_notify_target_add(struct store *st, const unsigned char key[SEAL_KEY_BYTES],
                            const char *user_id, const char *kind, const char *url,
                            const char *secret, struct store_notify_target *out, struct err *err)
{
    if (strlen(url) > STORE_NOTIFY_URL_MAX)
        return err_set(err, -EINVAL, "the URL is longer than %d bytes", STORE_NOTIFY_URL_MAX);
    struct store_notify_target t = {0};
    id_new("ntf", t.id);
    snprintf(t.user_id, sizeof(t.user_id), "%s", user_id);
    snprintf(t.kind, sizeof(t.kind), "%s", kind);
    snprintf(t.url, sizeof(t.url), "%s", url);
    t.created_at = time_now_ms();
    _cleanup_free_ unsigned char *sealed = NULL;
    size_t len = 0;
    if (secret)
        store_seal_row(key, "notify", user_id, t.id, secret, strlen(secret), &sealed, &len);
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    int n = 0;
    r = count_targets(st, user_id, &n, err);
    if (r == 0 && n >= STORE_NOTIFY_TARGETS_MAX)
        r = err_set(err, -EDQUOT,
                    "there are %d notification targets already, the most a user may have; "
                    "remove one first",
                    n);
    if (r == 0)
        r = insert_target(st, &t, sealed, len, err);
    if (r < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    if ((r = store_exec(st, "COMMIT", err)) < 0)
        return r;
    if (out)
        *out = t;
    return 0;
}

int store_notify_target_get(struct store *st, const char *user_id, const char *id,
                            struct store_notify_target *out, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT " TARGET_COLUMNS " FROM notify_targets t WHERE t.id = ?1 "
                          "AND (CAST(?2 AS TEXT) IS NULL OR t.user_id = ?2)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    db_bind_text(s, 2, user_id);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no notification target '%.64s'", id);
    if (rc != DB_ROW)
        return store_fail(st, rc, "read a notification target", err);
    read_target(s, out);
    return 0;
}

int store_notify_target_delete(struct store *st, const char *user_id, const char *id,
                               struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "DELETE FROM notify_targets WHERE id = ? AND user_id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    db_bind_text(s, 2, user_id);
    if ((r = store_step_done(st, s, "delete a notification target", err)) < 0)
        return r;
    return db_changes(st) ? 0 : err_set(err, -ENOENT, "no notification target '%.64s'", id);
}

int store_notify_target_list(struct store *st, const char *user_id,
                             void (*fn)(const struct store_notify_target *t, void *ctx), void *ctx,
                             struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        "SELECT " TARGET_COLUMNS ", (SELECT count(*) FROM notify_outbox o WHERE o.target_id = "
        "t.id AND o.state = 'pending'), (SELECT o.last_error FROM notify_outbox o WHERE "
        "o.target_id = t.id AND o.state = 'pending' AND o.last_error IS NOT NULL ORDER BY o.n "
        "DESC LIMIT 1) FROM notify_targets t WHERE t.user_id = ? ORDER BY t.created_at, t.id",
        &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_notify_target t;
        read_target(s, &t);
        t.pending = db_col_int64(s, 8);
        store_copy_text(t.pending_error, sizeof(t.pending_error), s, 9);
        fn(&t, ctx);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list notification targets", err);
}

int store_notify_target_secret(struct store *st, const unsigned char key[SEAL_KEY_BYTES],
                               const char *id, char **secret, struct err *err)
{
    *secret = NULL;
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT user_id, sealed FROM notify_targets WHERE id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no notification target '%.64s'", id);
    if (rc != DB_ROW)
        return store_fail(st, rc, "read a notification target", err);
    if (db_col_null(s, 1))
        return 0;
    char user_id[64];
    store_copy_text(user_id, sizeof(user_id), s, 0);
    size_t n = 0;
    return store_unseal_col(s, 1, key, "notify", user_id, id, secret, &n, err);
}

/* --- events --- */

void store_notify_event_id(const char *type, const char *subject, char out[64])
{
    char *what = xasprintf("%s\n%s", type, subject);
    char hex[65];
    sha256_hex(what, strlen(what), hex);
    free(what);
    snprintf(out, 64, "evt_%.32s", hex);
}

/* Targets of the run's user that did not get the event (their user had too many rows waiting)
 * say so. */
static int mark_dropped(struct store *st, const char *run_id, const char *event_id, int64_t at,
                        struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        "UPDATE notify_targets SET last_status = 'dropped', last_error = ?1, last_at = ?2 "
        "WHERE user_id = (SELECT user_id FROM runs WHERE id = ?3) AND NOT EXISTS (SELECT 1 "
        "FROM notify_outbox o WHERE o.event_id = ?4 AND o.target_id = notify_targets.id)",
        &s, err);
    if (r < 0)
        return r;
    char why[STORE_NOTIFY_ERROR_MAX + 1];
    snprintf(why, sizeof(why),
             "an event was dropped: %d notifications were waiting to be sent already",
             STORE_NOTIFY_PENDING_MAX);
    db_bind_text(s, 1, why);
    db_bind_int64(s, 2, at);
    db_bind_text(s, 3, run_id);
    db_bind_text(s, 4, event_id);
    return store_step_done(st, s, "mark a dropped notification", err);
}

/* store_notify_enqueue, with the event's id made from subject (what makes it this event and no
 * other: a second event of the same type and subject is the same event, queued once) */
static int enqueue(struct store *st, const char *type, const char *run_id, const char *pr_url,
                   const char *subject, int64_t at, struct err *err)
{
    char event_id[64];
    store_notify_event_id(type, subject, event_id);
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        "INSERT INTO notify_outbox(target_id, user_id, event_id, type, run_id, pr_url, "
        "created_at, state, next_at) SELECT t.id, t.user_id, ?1, ?2, r.id, ?3, ?4, 'pending', ?4 "
        "FROM runs r JOIN notify_targets t ON t.user_id = r.user_id WHERE r.id = ?5 AND (SELECT "
        "count(*) FROM notify_outbox o WHERE o.user_id = r.user_id AND o.state = 'pending') < ?6 "
        "ON CONFLICT DO NOTHING",
        &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, event_id);
    db_bind_text(s, 2, type);
    db_bind_text(s, 3, pr_url);
    db_bind_int64(s, 4, at);
    db_bind_text(s, 5, run_id);
    db_bind_int64(s, 6, STORE_NOTIFY_PENDING_MAX);
    if ((r = store_step_done(st, s, "queue a notification", err)) < 0)
        return r;
    if (db_changes(st) > 0)
        st->notify_queued = true;
    return mark_dropped(st, run_id, event_id, at, err);
}

int store_notify_enqueue(struct store *st, const char *type, const char *run_id, const char *pr_url,
                         int64_t at, struct err *err)
{
    return enqueue(st, type, run_id, pr_url, pr_url ? pr_url : run_id, at, err);
}

/* enqueue in a transaction of its own */
static int enqueue_alone(struct store *st, const char *type, const char *run_id, const char *pr_url,
                         const char *subject, int64_t at, struct err *err)
{
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    if ((r = enqueue(st, type, run_id, pr_url, subject, at, err)) < 0 ||
        (r = store_exec(st, "COMMIT", err)) < 0) {
        store_exec(st, "ROLLBACK", NULL);
        st->notify_queued = false;
        return r;
    }
    store_notify_committed(st);
    return 0;
}

int store_notify_question(struct store *st, const char *run_id, const char *question_id, int64_t at,
                          struct err *err)
{
    return enqueue_alone(st, "run.question", run_id, NULL, question_id, at, err);
}

int store_notify_event(struct store *st, const char *type, const char *run_id, const char *pr_url,
                       int64_t at, struct err *err)
{
    return enqueue_alone(st, type, run_id, pr_url, pr_url ? pr_url : run_id, at, err);
}

static int count_pending(struct store *st, const char *user_id, int *n, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st, "SELECT count(*) FROM notify_outbox WHERE user_id = ? AND state = 'pending'", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    int rc = db_step(s);
    if (rc != DB_ROW)
        return store_fail(st, rc, "count notifications", err);
    *n = db_col_int(s, 0);
    return 0;
}

/* A user who tests again and again keeps only the newest STORE_NOTIFY_ENDED_MAX ended rows. */
static int trim_ended(struct store *st, const char *user_id, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "DELETE FROM notify_outbox WHERE user_id = ?1 AND state <> 'pending' "
                          "AND n NOT IN (SELECT n FROM notify_outbox WHERE user_id = ?1 AND "
                          "state <> 'pending' ORDER BY n DESC LIMIT ?2)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    db_bind_int64(s, 2, STORE_NOTIFY_ENDED_MAX);
    return store_step_done(st, s, "trim notifications", err);
}

static int insert_test(struct store *st, const char *user_id, const char *id, const char *event_id,
                       int64_t at, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "INSERT INTO notify_outbox(target_id, user_id, event_id, type, "
                          "created_at, state, next_at) VALUES (?, ?, ?, 'test', ?4, 'pending', ?4)",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, id);
    db_bind_text(s, 2, user_id);
    db_bind_text(s, 3, event_id);
    db_bind_int64(s, 4, at);
    return store_step_done(st, s, "queue a test notification", err);
}

int store_notify_test(struct store *st, const char *user_id, const char *id, int64_t at,
                      char event_id[64], struct err *err)
{
    char rnd[64];
    id_new("test", rnd);
    store_notify_event_id("test", rnd, event_id);
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    struct store_notify_target t;
    int n = 0;
    r = store_notify_target_get(st, user_id, id, &t, err);
    if (r == 0)
        r = count_pending(st, user_id, &n, err);
    if (r == 0 && n >= STORE_NOTIFY_PENDING_MAX)
        r = err_set(err, -EDQUOT,
                    "%d notifications are waiting to be sent already; try again once they are", n);
    if (r == 0)
        r = trim_ended(st, user_id, err);
    if (r == 0)
        r = insert_test(st, user_id, id, event_id, at, err);
    if (r < 0 || (r = store_exec(st, "COMMIT", err)) < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    st->notify_queued = true;
    store_notify_committed(st);
    return 0;
}

/* --- the outbox --- */

int store_notify_due(struct store *st, int64_t now, unsigned limit, unsigned per_user,
                     void (*fn)(const struct store_notify_row *row, void *ctx), void *ctx,
                     struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        "SELECT n, target_id, user_id, event_id, coalesce(run_id, ''), type, "
        "coalesce(pr_url, ''), payload, attempts, created_at, next_at, coalesce(last_error, '') "
        "FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY next_at, n) AS k "
        "FROM (SELECT * FROM notify_outbox WHERE state = 'pending' AND next_at <= ?1 ORDER BY "
        "next_at, n LIMIT ?2) AS due) AS ranked WHERE k <= ?3 ORDER BY next_at, n LIMIT ?4",
        &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, now);
    db_bind_int64(s, 2, STORE_NOTIFY_DUE_SCAN);
    db_bind_int64(s, 3, (int)per_user);
    db_bind_int64(s, 4, (int)limit);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_notify_row row = {0};
        row.n = db_col_int64(s, 0);
        store_copy_text(row.target_id, sizeof(row.target_id), s, 1);
        store_copy_text(row.user_id, sizeof(row.user_id), s, 2);
        store_copy_text(row.event_id, sizeof(row.event_id), s, 3);
        store_copy_text(row.run_id, sizeof(row.run_id), s, 4);
        store_copy_text(row.type, sizeof(row.type), s, 5);
        store_copy_text(row.pr_url, sizeof(row.pr_url), s, 6);
        const char *p = db_col_text(s, 7);
        row.payload = p ? xstrdup(p) : NULL;
        row.attempts = db_col_int(s, 8);
        row.created_at = db_col_int64(s, 9);
        row.next_at = db_col_int64(s, 10);
        store_copy_text(row.last_error, sizeof(row.last_error), s, 11);
        fn(&row, ctx);
        free(row.payload);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list due notifications", err);
}

int store_notify_next_due(struct store *st, int64_t *at, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st, "SELECT coalesce(min(next_at), 0) FROM notify_outbox WHERE state = 'pending'", &s, err);
    if (r < 0)
        return r;
    int rc = db_step(s);
    if (rc != DB_ROW)
        return store_fail(st, rc, "find the next notification", err);
    *at = db_col_int64(s, 0);
    return 0;
}

int store_notify_claim(struct store *st, int64_t n, int64_t now, int64_t until, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE notify_outbox SET attempts = attempts + 1, next_at = ? WHERE n = "
                          "? AND state = 'pending' AND next_at <= ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, until);
    db_bind_int64(s, 2, n);
    db_bind_int64(s, 3, now);
    if ((r = store_step_done(st, s, "claim a notification", err)) < 0)
        return r;
    return db_changes(st) ? 0
                          : err_set(err, -EALREADY, "notification %lld is not due", (long long)n);
}

int store_notify_set_payload(struct store *st, int64_t n, const char *payload, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "UPDATE notify_outbox SET payload = ? WHERE n = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, payload);
    db_bind_int64(s, 2, n);
    return store_step_done(st, s, "record a notification's payload", err);
}

int store_notify_retry(struct store *st, int64_t n, int64_t next_at, const char *error,
                       struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE notify_outbox SET next_at = ?, last_error = coalesce(?, "
                          "last_error) WHERE n = ? AND state = 'pending'",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, next_at);
    db_bind_text(s, 2, error);
    db_bind_int64(s, 3, n);
    return store_step_done(st, s, "reschedule a notification", err);
}

/* Run sql (a literal) with its parameters state, error, now and the row n. */
static int record_outcome(struct store *st, const char *sql, const char *what, int64_t n,
                          const char *state, const char *error, int64_t now, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, sql, &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, state);
    db_bind_text(s, 2, error);
    db_bind_int64(s, 3, now);
    db_bind_int64(s, 4, n);
    return store_step_done(st, s, what, err);
}

int store_notify_end(struct store *st, int64_t n, bool delivered, const char *error, int64_t now,
                     struct err *err)
{
    const char *state = delivered ? "delivered" : "failed";
    char cut[STORE_NOTIFY_ERROR_MAX + 1];
    snprintf(cut, sizeof(cut), "%s", error ? error : "");
    const char *e = delivered ? NULL : cut;
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    if ((r = record_outcome(st,
                            "UPDATE notify_outbox SET state = ?, last_error = ?, done_at = ? "
                            "WHERE n = ? AND state = 'pending'",
                            "end a notification", n, state, e, now, err)) < 0 ||
        (db_changes(st) > 0 &&
         (r = record_outcome(st,
                             "UPDATE notify_targets SET last_status = ?, last_error = ?, last_at "
                             "= ? WHERE id = (SELECT target_id FROM notify_outbox WHERE n = ?)",
                             "record how a notification went", n, state, e, now, err)) < 0) ||
        (r = store_exec(st, "COMMIT", err)) < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    return 0;
}

int store_notify_prune(struct store *st, int64_t before, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "DELETE FROM notify_outbox WHERE state <> 'pending' AND done_at < ?",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_int64(s, 1, before);
    if ((r = store_step_done(st, s, "prune notifications", err)) < 0)
        return r;
    return db_changes(st);
}

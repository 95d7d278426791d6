/* Questions an agent asks the person who started its run (run_questions): at most one unanswered
 * per run, answered once by a conditional update so that answers arriving at once through two
 * paths (or two nodes) keep the first. The engine's side is runs/ask.c. */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "store/store_internal.h"

#define QUESTION_COLUMNS                                                                           \
    "id, run_id, user_id, kind, text, choices, asked_at, deadline_at, answer, answered_by, "       \
    "answered_at"

static void read_question(struct db_stmt *s, struct store_question *q)
{
    memset(q, 0, sizeof(*q));
    store_copy_text(q->id, sizeof(q->id), s, 0);
    store_copy_text(q->run_id, sizeof(q->run_id), s, 1);
    store_copy_text(q->user_id, sizeof(q->user_id), s, 2);
    store_copy_text(q->kind, sizeof(q->kind), s, 3);
    const char *t = db_col_text(s, 4);
    q->text = xstrdup(t ? t : "");
    t = db_col_text(s, 5);
    q->choices = t && *t ? xstrdup(t) : NULL;
    q->asked_at = db_col_int64(s, 6);
    q->deadline_at = db_col_int64(s, 7);
    t = db_col_text(s, 8);
    q->answer = t ? xstrdup(t) : NULL;
    store_copy_text(q->answered_by, sizeof(q->answered_by), s, 9);
    q->answered_at = db_col_int64(s, 10);
}

void store_question_release(struct store_question *q)
{
    if (!q)
        return;
    free(q->text);
    free(q->choices);
    free(q->answer);
    q->text = q->choices = q->answer = NULL;
}

/* The first row of a query bound to one or two texts, into *out: 0, or -ENOENT. */
static int question_row(struct store *st, const char *sql, const char *a, const char *b,
                        struct store_question *out, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, sql, &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, a);
    if (b)
        db_bind_text(s, 2, b);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no such question");
    if (rc != DB_ROW)
        return store_fail(st, rc, "read a question", err);
    read_question(s, out);
    return 0;
}

int store_question_open(struct store *st, const char *run_id, bool latest,
                        struct store_question *out, struct err *err)
{
    return question_row(st,
                        latest ? "SELECT " QUESTION_COLUMNS " FROM run_questions WHERE run_id = ? "
                                 "ORDER BY asked_at DESC, id DESC LIMIT 1"
                               : "SELECT " QUESTION_COLUMNS " FROM run_questions WHERE run_id = ? "
                                 "AND answered_at = 0 ORDER BY asked_at LIMIT 1",
                        run_id, NULL, out, err);
}

int store_question_last_plan(struct store *st, const char *run_id, struct store_question *out,
                             struct err *err)
{
    return question_row(st,
                        "SELECT " QUESTION_COLUMNS " FROM run_questions WHERE run_id = ? AND "
                        "kind = 'plan' ORDER BY asked_at DESC, id DESC LIMIT 1",
                        run_id, NULL, out, err);
}

int store_question_get(struct store *st, const char *id, struct store_question *out,
                       struct err *err)
{
    return question_row(st, "SELECT " QUESTION_COLUMNS " FROM run_questions WHERE id = ?", id, NULL,
                        out, err);
}

int store_question_ask(struct store *st, const struct store_question *q,
                       struct store_question *open, struct err *err)
{
    int r = store_exec(st, "BEGIN IMMEDIATE", err);
    if (r < 0)
        return r;
    r = store_question_open(st, q->run_id, false, open, err);
    if (r == 0) {
        store_exec(st, "ROLLBACK", NULL);
        return err_set(err, -EEXIST, "the run already waits for an answer");
    }
    if (r != -ENOENT) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    *err = (struct err){0};
    {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        r = store_prepare(st,
                          "INSERT INTO run_questions(id, run_id, user_id, kind, text, choices, "
                          "asked_at, deadline_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          &s, err);
        if (r == 0) {
            db_bind_text(s, 1, q->id);
            db_bind_text(s, 2, q->run_id);
            db_bind_text(s, 3, q->user_id);
            db_bind_text(s, 4, q->kind);
            db_bind_text(s, 5, q->text);
            db_bind_text(s, 6, q->choices ? q->choices : "");
            db_bind_int64(s, 7, q->asked_at);
            db_bind_int64(s, 8, q->deadline_at);
            r = store_step_done(st, s, "insert a question", err);
        }
    }
    if (r < 0) {
        store_exec(st, "ROLLBACK", NULL);
        return r;
    }
    return store_exec(st, "COMMIT", err);
}

int store_question_answer(struct store *st, const char *id, const char *answer, const char *by,
                          int64_t at, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "UPDATE run_questions SET answer = ?, answered_by = ?, answered_at = ? "
                          "WHERE id = ? AND answered_at = 0",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, answer);
    db_bind_text(s, 2, by);
    db_bind_int64(s, 3, at > 0 ? at : 1);
    db_bind_text(s, 4, id);
    if ((r = store_step_done(st, s, "answer a question", err)) < 0)
        return r;
    return db_changes(st) > 0 ? 1 : 0;
}

int store_question_list_due(struct store *st, int64_t now, unsigned limit,
                            void (*fn)(const struct store_question *q, void *ctx), void *ctx,
                            struct err *err)
{
    struct store_question *rows = xcalloc(limit ? limit : 1, sizeof(*rows));
    size_t n = 0;
    int r;
    {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        r = store_prepare(st,
                          "SELECT " QUESTION_COLUMNS " FROM run_questions WHERE answered_at = 0 "
                          "AND deadline_at <= ? ORDER BY deadline_at LIMIT ?",
                          &s, err);
        if (r == 0) {
            db_bind_int64(s, 1, now);
            db_bind_int64(s, 2, limit);
            int rc;
            while (n < limit && (rc = db_step(s)) == DB_ROW)
                read_question(s, &rows[n++]);
            if (n < limit && rc != DB_DONE)
                r = store_fail(st, rc, "list questions due", err);
        }
    }
    /* read whole first: fn writes to the store */
    for (size_t i = 0; i < n; i++) {
        if (r == 0)
            fn(&rows[i], ctx);
        store_question_release(&rows[i]);
    }
    free(rows);
    return r;
}

int store_question_count(struct store *st, const char *run_id, int64_t *n, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "SELECT count(*) FROM run_questions WHERE run_id = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, run_id);
    int rc = db_step(s);
    if (rc != DB_ROW)
        return store_fail(st, rc, "count questions", err);
    *n = db_col_int64(s, 0);
    return 0;
}

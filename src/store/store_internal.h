#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "store/store.h"

struct store {
    sqlite3 *db;
    void (*notify_hook)(void *ctx); /* store_set_notify_hook */
    void *notify_ctx;
    bool notify_queued; /* rows were queued in the transaction under way */
};

/* Prepare sql on st; on failure fill err. sql must be a string that lives as long as the store
 * (a literal): its statement is prepared once, kept, and lent to each caller, who gives it back
 * with store_release (the _cleanup_stmt_ variables do). */
int store_prepare(struct store *st, const char *sql, sqlite3_stmt **out, struct err *err);
/* Give a statement back: one from store_prepare is reset for the next caller (which also ends
 * its read snapshot), any other is finalized. NULL is fine. */
void store_release(sqlite3_stmt *s);

static inline void cleanup_stmtp(sqlite3_stmt **s)
{
    store_release(*s);
}
#define _cleanup_stmt_ __attribute__((cleanup(cleanup_stmtp)))
/* Step s, which must finish without a row: 0, or store_fail naming what. */
int store_step_done(struct store *st, sqlite3_stmt *s, const char *what, struct err *err);
/* Run one statement of sql (a literal, prepared once like store_prepare's): 0, or -errno. */
int store_exec(struct store *st, const char *sql, struct err *err);
/* Map an SQLite result code to a negative errno and fill err. */
int store_fail(struct store *st, int rc, const char *what, struct err *err);

/* Queue notification type for run_id (and pr_url, or NULL) at `at` to every target of the run's
 * user, within the caller's transaction (notify.c). */
int store_notify_enqueue(struct store *st, const char *type, const char *run_id, const char *pr_url,
                         int64_t at, struct err *err);
/* After a commit: tell the hook, once, that rows were queued. */
void store_notify_committed(struct store *st);

/* Copy column col of the current row into dst (cap bytes, truncating; "" for NULL). */
static inline void store_copy_text(char *dst, size_t cap, sqlite3_stmt *s, int col)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    size_t n = t ? (size_t)sqlite3_column_bytes(s, col) : 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, t, n);
    dst[n] = '\0';
}

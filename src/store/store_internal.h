#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "store/store.h"

/* The SQL of the store's files is written once, in the subset both backends understand
 * (numbered ? parameters, ON CONFLICT, RETURNING, CASE rather than iif or a two-argument max);
 * db_pg.c turns it into PostgreSQL's where they differ. Which backend a store speaks to is its
 * be (db_backend.h), and nothing outside db*.c and migrate.c looks at it. */
struct db_backend;

struct store {
    const struct db_backend *be;
    void *conn;                     /* the backend's connection */
    char label[256];                /* how errors name the database: "database '/x.db'" */
    void (*notify_hook)(void *ctx); /* store_set_notify_hook */
    void *notify_ctx;
    bool notify_queued; /* rows were queued in the transaction under way */
    char node_id[64];   /* this node's id: the sandboxes it lists and claims ranges for */
    /* A file database's reserve: a file of STORE_RESERVE_BYTES beside it, removed when the disk
     * fills up so that the store can still record what failed (store_keep_reserve), "" for a
     * database server. */
    char reserve[4096];
    char path[4096]; /* a file database's path, "" for a database server */
    /* store_data_version's watch on a file database: an inotify descriptor on its files (-2 not
     * made yet, -1 none), and the version it last read (-1 none). */
    int watch_fd;
    int64_t watched_version;
};

/* A statement of either backend. Its values are bound with db_bind_* (1-based, as in SQLite),
 * stepped with db_step and read with db_col_* (0-based); store_release gives it back. */
struct db_stmt;

/* db_step's results, and the kinds of failure store_fail maps to errno values. */
enum {
    DB_OK = 0,
    DB_ERROR = 1,
    DB_BUSY = 5,
    DB_FULL = 13,
    DB_CONSTRAINT = 19,
    DB_ROW = 100,
    DB_DONE = 101,
};

/* Prepare sql on st; on failure fill err. sql must be a string that lives as long as the store
 * (a literal): its statement is prepared once, kept, and lent to each caller, who gives it back
 * with store_release (the _cleanup_stmt_ variables do). */
int store_prepare(struct store *st, const char *sql, struct db_stmt **out, struct err *err);
/* Give a statement back: one from store_prepare is reset for the next caller (which also ends
 * its read snapshot), any other is finalized. NULL is fine. */
void store_release(struct db_stmt *s);

static inline void cleanup_stmtp(struct db_stmt **s)
{
    store_release(*s);
}
#define _cleanup_stmt_ __attribute__((cleanup(cleanup_stmtp)))

/* Text values are not copied on SQLite: they must stay as they are until the statement has been
 * stepped (or reset). NULL binds SQL NULL. */
void db_bind_text(struct db_stmt *s, int i, const char *v);
void db_bind_int64(struct db_stmt *s, int i, int64_t v);
void db_bind_double(struct db_stmt *s, int i, double v);
void db_bind_blob(struct db_stmt *s, int i, const void *p, size_t n);
void db_bind_null(struct db_stmt *s, int i);
/* DB_ROW (a row to read), DB_DONE, or a failure (DB_CONSTRAINT, DB_BUSY, DB_FULL, DB_ERROR)
 * whose message db_errmsg gives. */
int db_step(struct db_stmt *s);
/* Ready s to run again with new values. */
void db_reset(struct db_stmt *s);
/* The current row's columns: NULL reads as NULL text, 0 and an empty blob. */
const char *db_col_text(struct db_stmt *s, int col);
int64_t db_col_int64(struct db_stmt *s, int col);
double db_col_double(struct db_stmt *s, int col);
const void *db_col_blob(struct db_stmt *s, int col, size_t *len);
bool db_col_null(struct db_stmt *s, int col);
static inline int db_col_int(struct db_stmt *s, int col)
{
    return (int)db_col_int64(s, col);
}
/* Rows the last INSERT, UPDATE or DELETE on st changed. */
int64_t db_changes(struct store *st);
const char *db_errmsg(struct store *st);

/* Step s, which must finish without a row: 0, or store_fail naming what. */
int store_step_done(struct store *st, struct db_stmt *s, const char *what, struct err *err);
/* Run one statement of sql (a literal, prepared once like store_prepare's): 0, or -errno. */
int store_exec(struct store *st, const char *sql, struct err *err);
/* Map a db_step result to a negative errno and fill err. */
int store_fail(struct store *st, int rc, const char *what, struct err *err);

/* One spend of a single-use secret kept by its hash (secrets.c). sql is an UPDATE ... RETURNING
 * (a literal) that marks spent at ?1 the row whose hash is ?2 while it may still be spent; bind
 * (NULL: none) binds ?3 and above; read takes the spent row's columns. what names the spend in
 * errors. */
struct store_spend {
    const char *sql, *what;
    const char *hash;
    int64_t now;
    void (*bind)(struct db_stmt *s, void *ctx);
    void (*read)(struct db_stmt *s, void *ctx);
    void *ctx;
};
/* 1 when a row was spent (read called, the statement given back), 0 when none could be, or
 * < 0 with err filled (store_fail naming what). */
int store_spend(struct store *st, const struct store_spend *sp, struct err *err);

/* A secret kept in a row, sealed (base/seal.h) under the label "<kind> <owner> <name>", which
 * binds it to that row: a sealed value copied into another row does not open (secrets.c).
 * store_seal_row's *out is malloc'd, bound with db_bind_blob and freed after the step. */
void store_seal_row(const unsigned char key[SEAL_KEY_BYTES], const char *kind, const char *owner,
                    const char *name, const void *value, size_t n, unsigned char **out,
                    size_t *out_len);
/* Open column col of s's current row, sealed by store_seal_row with the same kind, owner and
 * name: as unseal (*value malloc'd), or -EBADMSG. */
int store_unseal_col(struct db_stmt *s, int col, const unsigned char key[SEAL_KEY_BYTES],
                     const char *kind, const char *owner, const char *name, char **value, size_t *n,
                     struct err *err);

/* Queue notification type for run_id (and pr_url, or NULL) at `at` to every target of the run's
 * user, within the caller's transaction (notify.c). */
int store_notify_enqueue(struct store *st, const char *type, const char *run_id, const char *pr_url,
                         int64_t at, struct err *err);
/* After a commit: tell the hook, once, that rows were queued. */
void store_notify_committed(struct store *st);

/* The one row of kind ("run", "session") id, by sql (binding id), or with user_id by
 * sql_by_user (binding id and user_id): 0 with *s on it, or -ENOENT saying "<kind> '<id>' not
 * found". */
int store_find_row(struct store *st, const char *sql, const char *sql_by_user, const char *id,
                   const char *user_id, const char *kind, struct db_stmt **s, struct err *err);

/* Copy column col of the current row into dst (cap bytes, truncating; "" for NULL). */
static inline void store_copy_text(char *dst, size_t cap, struct db_stmt *s, int col)
{
    const char *t = db_col_text(s, col);
    size_t n = t ? strlen(t) : 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, t, n);
    dst[n] = '\0';
}

/* Free every statement of st (db.c), before it closes. */
void db_forget(struct store *st);

/* Make this node's the sandboxes of from_node that are id or session_id's (either may be NULL):
 * stopped, without an id range, their files left on from_node. The number moved, or < 0. */
int store_sandboxes_move(struct store *st, const char *id, const char *session_id,
                         const char *from_node, struct err *err);

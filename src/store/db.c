/* The store's statements, above the backends: the cache of prepared statements, and the db_*
 * calls the entity files make, each handed to the statement's backend (db_backend.h; SQLite's in
 * db_sqlite.c, PostgreSQL's in db_pg.c). Its rule: no backend is named here; what differs
 * between them is behind the interface. */
#include "store/db_backend.h"

#include <stdlib.h>

/* Prepared statements kept for reuse: parsing and planning a statement costs more than running
 * most of ours (a token check, a usage update). Keyed by store and by the address of the SQL
 * text. A statement is lent to one caller at a time; a caller that asks while it is lent (a
 * nested use) gets a statement of its own, finalized when given back. Main thread only, like
 * the store. */
#define STMT_CACHE_MAX 160
static struct db_stmt *stmt_cache[STMT_CACHE_MAX];

int store_prepare(struct store *st, const char *sql, struct db_stmt **out, struct err *err)
{
    int free_slot = -1;
    for (int i = 0; i < STMT_CACHE_MAX; i++) {
        struct db_stmt *c = stmt_cache[i];
        if (c && c->st == st && c->sql == sql && !c->lent) {
            c->lent = true;
            *out = c;
            return 0;
        }
        if (!c && free_slot < 0)
            free_slot = i;
    }
    struct db_stmt *s = st->be->prepare(st, sql, err);
    if (!s)
        return err->code;
    s->be = st->be;
    s->st = st;
    s->sql = sql;
    s->lent = true;
    if (free_slot >= 0) {
        s->cached = true;
        stmt_cache[free_slot] = s;
    }
    *out = s;
    return 0;
}

void store_release(struct db_stmt *s)
{
    if (!s)
        return;
    if (!s->cached) {
        s->be->finalize(s);
        return;
    }
    s->be->clear(s);
    s->lent = false;
}

/* Every statement of st, at its close. */
void db_forget(struct store *st)
{
    for (int i = 0; i < STMT_CACHE_MAX; i++)
        if (stmt_cache[i] && stmt_cache[i]->st == st) {
            st->be->finalize(stmt_cache[i]);
            stmt_cache[i] = NULL;
        }
}

void db_bind_text(struct db_stmt *s, int i, const char *v)
{
    s->be->bind_text(s, i, v);
}

void db_bind_int64(struct db_stmt *s, int i, int64_t v)
{
    s->be->bind_int64(s, i, v);
}

void db_bind_double(struct db_stmt *s, int i, double v)
{
    s->be->bind_double(s, i, v);
}

void db_bind_blob(struct db_stmt *s, int i, const void *p, size_t n)
{
    s->be->bind_blob(s, i, p, n);
}

void db_bind_null(struct db_stmt *s, int i)
{
    s->be->bind_null(s, i);
}

int db_step(struct db_stmt *s)
{
    return s->be->step(s);
}

void db_reset(struct db_stmt *s)
{
    s->be->reset(s);
}

bool db_col_null(struct db_stmt *s, int col)
{
    return s->be->col_null(s, col);
}

const char *db_col_text(struct db_stmt *s, int col)
{
    return s->be->col_text(s, col);
}

int64_t db_col_int64(struct db_stmt *s, int col)
{
    return s->be->col_int64(s, col);
}

double db_col_double(struct db_stmt *s, int col)
{
    return s->be->col_double(s, col);
}

const void *db_col_blob(struct db_stmt *s, int col, size_t *len)
{
    return s->be->col_blob(s, col, len);
}

int64_t db_changes(struct store *st)
{
    return st->be->changes(st);
}

const char *db_errmsg(struct store *st)
{
    return st->be->errmsg(st);
}

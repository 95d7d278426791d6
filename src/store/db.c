/* Statements on either backend: SQLite's own, or PostgreSQL's through libpq (prepared once per
 * connection, run with the values bound, the whole result read at the first step). The cache of
 * prepared statements and the rewriting of the store's SQL for PostgreSQL live here too. */
#include "store/store_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/util.h"

/* The types PostgreSQL is told its parameters have (pg_type.h's oids), so that a value needs no
 * cast in the SQL: text, bigint, double precision, bytea; 0 lets the server choose (NULL). */
#define OID_TEXT 25
#define OID_INT8 20
#define OID_FLOAT8 701
#define OID_BYTEA 17

#define PG_PARAMS_MAX 32

struct db_stmt {
    struct store *st;
    const char *sql; /* the caller's literal: the cache's key */
    bool cached, lent;
    sqlite3_stmt *lite;
    /* PostgreSQL */
    char *pg_sql; /* sql with $N parameters; NULL for a statement run as a simple query */
    int nparams;
    char name[16];
    uint64_t prepared_gen; /* st->pg.gen when prepared; 0 = not yet */
    char *vals[PG_PARAMS_MAX];
    int lens[PG_PARAMS_MAX], fmts[PG_PARAMS_MAX];
    Oid types[PG_PARAMS_MAX];
    PGresult *res;
    int row, nrows;
    unsigned char *blob; /* the last bytea column read, decoded */
};

/* Prepared statements kept for reuse: parsing and planning a statement costs more than running
 * most of ours (a token check, a usage update). Keyed by store and by the address of the SQL
 * text. A statement is lent to one caller at a time; a caller that asks while it is lent (a
 * nested use) gets a statement of its own, finalized when given back. Main thread only, like
 * the store. */
#define STMT_CACHE_MAX 160
static struct db_stmt *stmt_cache[STMT_CACHE_MAX];

/* --- SQL for PostgreSQL --- */

/* "?N" and "?" become "$N" (a bare "?" numbered one above the highest so far, as SQLite does);
 * "INDEXED BY name" goes; BEGIN IMMEDIATE, which takes SQLite's write lock at once, is a plain
 * BEGIN. Quoted text is left alone. Returns the highest parameter number in *nparams, or -1 if over
 * the limit. */
static char *pg_translate(const char *sql, int *nparams)
{
    if (strcmp(sql, "BEGIN IMMEDIATE") == 0) {
        *nparams = 0;
        return xstrdup("BEGIN");
    }
    size_t n = strlen(sql);
    char *out = xmalloc(n * 2 + 1), *o = out;
    int max = 0;
    char quote = 0;
    for (const char *p = sql; *p; p++) {
        if (quote) {
            if (*p == quote)
                quote = 0;
            *o++ = *p;
            continue;
        }
        if (*p == '\'' || *p == '"') {
            quote = *p;
            *o++ = *p;
            continue;
        }
        /* SQLite's "INDEXED BY name" (a plan it is told to use): the planner's choice here */
        if (strncmp(p, " INDEXED BY ", 12) == 0) {
            p += 12;
            while (p[1] && p[1] != ' ')
                p++;
            continue;
        }
        if (*p != '?') {
            *o++ = *p;
            continue;
        }
        int num = 0;
        while (isdigit((unsigned char)p[1]))
            num = num * 10 + (*++p - '0');
        if (!num)
            num = max + 1;
        if (num > max)
            max = num;
        o += sprintf(o, "$%d", num);
    }
    *o = '\0';
    *nparams = max <= PG_PARAMS_MAX ? max : -1;
    return out;
}

/* Statements that take no values and return no rows, run as simple queries: transaction
 * control, which need not be prepared. */
static bool pg_simple(const char *sql)
{
    return strcmp(sql, "BEGIN IMMEDIATE") == 0 || strcmp(sql, "BEGIN") == 0 ||
           strcmp(sql, "COMMIT") == 0 || strcmp(sql, "ROLLBACK") == 0;
}

static void pg_set_error(struct store *st, const char *msg)
{
    snprintf(st->pg.errmsg, sizeof(st->pg.errmsg), "%s", msg && *msg ? msg : "unknown error");
    size_t n = strlen(st->pg.errmsg);
    while (n && (st->pg.errmsg[n - 1] == '\n' || st->pg.errmsg[n - 1] == ' '))
        st->pg.errmsg[--n] = '\0';
}

/* The DB_* kind of a failed result, by its SQLSTATE. A connection found broken is made again
 * (the next statement prepares itself on the new one); this one has failed either way. */
static int pg_failure(struct store *st, PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    pg_set_error(st, res ? PQresultErrorMessage(res) : PQerrorMessage(st->pg.conn));
    if (PQstatus(st->pg.conn) == CONNECTION_BAD) {
        PQreset(st->pg.conn);
        st->pg.gen++;
    }
    if (!state)
        return DB_ERROR;
    if (strncmp(state, "23", 2) == 0)
        return DB_CONSTRAINT;
    if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 || strcmp(state, "55P03") == 0)
        return DB_BUSY;
    if (strcmp(state, "53100") == 0)
        return DB_FULL;
    return DB_ERROR;
}

static void pg_clear_values(struct db_stmt *s)
{
    for (int i = 0; i < s->nparams; i++) {
        free(s->vals[i]);
        s->vals[i] = NULL;
        s->lens[i] = s->fmts[i] = 0;
    }
}

static void pg_reset(struct db_stmt *s)
{
    PQclear(s->res);
    s->res = NULL;
    s->row = -1;
    s->nrows = 0;
    free(s->blob);
    s->blob = NULL;
}

static void pg_bind(struct db_stmt *s, int i, char *v, int len, int fmt, Oid type)
{
    if (i < 1 || i > s->nparams) {
        free(v);
        return;
    }
    free(s->vals[i - 1]);
    s->vals[i - 1] = v;
    s->lens[i - 1] = len;
    s->fmts[i - 1] = fmt;
    /* the first value bound names the type, unless it was a bare NULL */
    if (type && !s->types[i - 1])
        s->types[i - 1] = type;
}

static int pg_step(struct db_stmt *s)
{
    struct store *st = s->st;
    if (!s->res) {
        PGresult *res;
        if (!s->pg_sql) {
            res = PQexec(st->pg.conn, strcmp(s->sql, "BEGIN IMMEDIATE") == 0 ? "BEGIN" : s->sql);
        } else {
            if (s->prepared_gen != st->pg.gen) {
                if (!s->name[0])
                    snprintf(s->name, sizeof(s->name), "s%u", ++st->pg.next_name);
                PGresult *p = PQprepare(st->pg.conn, s->name, s->pg_sql, s->nparams, s->types);
                if (PQresultStatus(p) != PGRES_COMMAND_OK) {
                    int rc = pg_failure(st, p);
                    PQclear(p);
                    return rc;
                }
                PQclear(p);
                s->prepared_gen = st->pg.gen;
            }
            res = PQexecPrepared(st->pg.conn, s->name, s->nparams, (const char *const *)s->vals,
                                 s->lens, s->fmts, 0);
        }
        ExecStatusType status = PQresultStatus(res);
        if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
            int rc = pg_failure(st, res);
            PQclear(res);
            return rc;
        }
        const char *changed = PQcmdTuples(res);
        st->pg.changes = *changed ? strtoll(changed, NULL, 10) : 0;
        s->res = res;
        s->nrows = status == PGRES_TUPLES_OK ? PQntuples(res) : 0;
        s->row = -1;
    }
    free(s->blob);
    s->blob = NULL;
    return ++s->row < s->nrows ? DB_ROW : DB_DONE;
}

/* --- statements --- */

static struct db_stmt *stmt_new(struct store *st, const char *sql, struct err *err)
{
    struct db_stmt *s = xcalloc(1, sizeof(*s));
    s->st = st;
    s->sql = sql;
    s->row = -1;
    if (st->kind == STORE_SQLITE) {
        /* A closing "FOR UPDATE ..." locks rows on PostgreSQL; SQLite's BEGIN IMMEDIATE holds
         * the whole database already. */
        const char *lock = strstr(sql, " FOR UPDATE");
        int rc = sqlite3_prepare_v3(st->db, sql, lock ? (int)(lock - sql) : -1,
                                    SQLITE_PREPARE_PERSISTENT, &s->lite, NULL);
        if (rc != SQLITE_OK) {
            free(s);
            store_fail(st, DB_ERROR, "prepare", err);
            return NULL;
        }
        return s;
    }
    if (!pg_simple(sql)) {
        s->pg_sql = pg_translate(sql, &s->nparams);
        if (s->nparams < 0) {
            free(s->pg_sql);
            free(s);
            err_set(err, -EINVAL, "database prepare: more than %d parameters", PG_PARAMS_MAX);
            return NULL;
        }
    }
    return s;
}

static void stmt_free(struct db_stmt *s)
{
    if (s->lite)
        sqlite3_finalize(s->lite);
    if (s->st->kind == STORE_POSTGRES) {
        if (s->prepared_gen && s->prepared_gen == s->st->pg.gen) {
            char sql[48];
            snprintf(sql, sizeof(sql), "DEALLOCATE %s", s->name);
            PQclear(PQexec(s->st->pg.conn, sql));
        }
        pg_reset(s);
        pg_clear_values(s);
        free(s->pg_sql);
    }
    free(s);
}

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
    struct db_stmt *s = stmt_new(st, sql, err);
    if (!s)
        return err->code;
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
        stmt_free(s);
        return;
    }
    db_reset(s);
    if (s->lite)
        sqlite3_clear_bindings(s->lite);
    else
        pg_clear_values(s);
    s->lent = false;
}

/* Every statement of st, at its close. */
void db_forget(struct store *st)
{
    for (int i = 0; i < STMT_CACHE_MAX; i++)
        if (stmt_cache[i] && stmt_cache[i]->st == st) {
            stmt_free(stmt_cache[i]);
            stmt_cache[i] = NULL;
        }
}

void db_bind_text(struct db_stmt *s, int i, const char *v)
{
    if (s->lite)
        sqlite3_bind_text(s->lite, i, v, -1, SQLITE_STATIC);
    else
        pg_bind(s, i, v ? xstrdup(v) : NULL, 0, 0, OID_TEXT);
}

void db_bind_int64(struct db_stmt *s, int i, int64_t v)
{
    if (s->lite)
        sqlite3_bind_int64(s->lite, i, v);
    else
        pg_bind(s, i, xasprintf("%lld", (long long)v), 0, 0, OID_INT8);
}

void db_bind_double(struct db_stmt *s, int i, double v)
{
    if (s->lite)
        sqlite3_bind_double(s->lite, i, v);
    else
        pg_bind(s, i, xasprintf("%.17g", v), 0, 0, OID_FLOAT8);
}

void db_bind_blob(struct db_stmt *s, int i, const void *p, size_t n)
{
    if (s->lite) {
        sqlite3_bind_blob(s->lite, i, p, (int)n, SQLITE_STATIC);
        return;
    }
    char *copy = xmalloc(n ? n : 1);
    if (n)
        memcpy(copy, p, n);
    pg_bind(s, i, copy, (int)n, 1, OID_BYTEA);
}

void db_bind_null(struct db_stmt *s, int i)
{
    if (s->lite)
        sqlite3_bind_null(s->lite, i);
    else
        pg_bind(s, i, NULL, 0, 0, 0);
}

int db_step(struct db_stmt *s)
{
    if (!s->lite)
        return pg_step(s);
    int rc = sqlite3_step(s->lite);
    switch (rc & 0xff) {
    case SQLITE_ROW: return DB_ROW;
    case SQLITE_DONE: return DB_DONE;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return DB_BUSY;
    case SQLITE_CONSTRAINT: return DB_CONSTRAINT;
    case SQLITE_FULL: return DB_FULL;
    default: return DB_ERROR;
    }
}

void db_reset(struct db_stmt *s)
{
    if (s->lite)
        sqlite3_reset(s->lite);
    else
        pg_reset(s);
}

static bool pg_has_row(struct db_stmt *s, int col)
{
    return s->res && s->row >= 0 && s->row < s->nrows && col >= 0 && col < PQnfields(s->res);
}

bool db_col_null(struct db_stmt *s, int col)
{
    if (s->lite)
        return sqlite3_column_type(s->lite, col) == SQLITE_NULL;
    return !pg_has_row(s, col) || PQgetisnull(s->res, s->row, col);
}

const char *db_col_text(struct db_stmt *s, int col)
{
    if (s->lite)
        return (const char *)sqlite3_column_text(s->lite, col);
    return db_col_null(s, col) ? NULL : PQgetvalue(s->res, s->row, col);
}

int64_t db_col_int64(struct db_stmt *s, int col)
{
    if (s->lite)
        return sqlite3_column_int64(s->lite, col);
    const char *v = db_col_text(s, col);
    if (!v)
        return 0;
    /* a boolean expression comes back as t or f */
    if (v[0] == 't' && !v[1])
        return 1;
    return strtoll(v, NULL, 10);
}

double db_col_double(struct db_stmt *s, int col)
{
    if (s->lite)
        return sqlite3_column_double(s->lite, col);
    const char *v = db_col_text(s, col);
    return v ? strtod(v, NULL) : 0;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

const void *db_col_blob(struct db_stmt *s, int col, size_t *len)
{
    *len = 0;
    if (s->lite) {
        const void *p = sqlite3_column_blob(s->lite, col);
        *len = (size_t)sqlite3_column_bytes(s->lite, col);
        return p;
    }
    /* bytea in text form: "\x" and two hex digits a byte */
    const char *v = db_col_text(s, col);
    if (!v || v[0] != '\\' || v[1] != 'x')
        return NULL;
    size_t n = strlen(v + 2) / 2;
    free(s->blob);
    s->blob = xmalloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        int hi = hex_digit(v[2 + 2 * i]), lo = hex_digit(v[3 + 2 * i]);
        if (hi < 0 || lo < 0)
            return NULL;
        s->blob[i] = (unsigned char)(hi << 4 | lo);
    }
    *len = n;
    return s->blob;
}

int64_t db_changes(struct store *st)
{
    return st->kind == STORE_SQLITE ? sqlite3_changes64(st->db) : st->pg.changes;
}

const char *db_errmsg(struct store *st)
{
    return st->kind == STORE_SQLITE ? sqlite3_errmsg(st->db) : st->pg.errmsg;
}

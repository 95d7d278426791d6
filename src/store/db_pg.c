/* The PostgreSQL backend (db_backend.h), through libpq: the connection, the rewriting of the
 * store's SQL into PostgreSQL's, statements prepared once per connection and run with their
 * values bound (the whole result read at the first step), and the schema version in a table.
 * Its rule: nothing here knows an entity or a table, and nothing here goes through the
 * statement cache (db.c), which sits above it. */
#include "store/db_backend.h"

#include <ctype.h>
#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "base/util.h"

/* The types PostgreSQL is told its parameters have (pg_type.h's oids), so that a value needs no
 * cast in the SQL: text, bigint, double precision, bytea; 0 lets the server choose (NULL). */
#define OID_TEXT 25
#define OID_INT8 20
#define OID_FLOAT8 701
#define OID_BYTEA 17

#define PG_PARAMS_MAX 32

/* Held while one node migrates, so that nodes started together apply each migration once. */
#define PG_MIGRATION_LOCK "7311650183260131"

/* While the database cannot be reached, a statement fails at once, and the connection is made
 * again at most this often (doubling from the first, up to the last): each try blocks the
 * calling thread for at most the connection's connect_timeout. */
#define PG_RETRY_FIRST_MS 250
#define PG_RETRY_MAX_MS 8000

/* A connection. Its prepared statements belong to one connection: gen counts the connections
 * made, and a statement prepared under an earlier one is prepared again. A connection lost is
 * made again by the next statement (PostgreSQL restarted, or a failover behind a multi-host
 * URL); a transaction it cut stays failed until its ROLLBACK, so that none of its statements
 * runs outside it on the new one. */
struct pg {
    PGconn *conn;
    uint64_t gen;
    unsigned next_name;
    int64_t changes;
    bool in_tx;          /* between a BEGIN and its COMMIT or ROLLBACK */
    bool cut;            /* the connection was lost inside a transaction not yet rolled back */
    bool down;           /* the last try to connect failed */
    int64_t next_try_ms; /* monotonic: the next try to connect while down */
    int64_t retry_ms;    /* the wait after the next failed try */
    char errmsg[512];
};

struct pg_stmt {
    struct db_stmt base;
    char *pg_sql; /* sql with $N parameters; NULL for a statement run as a simple query */
    int nparams;
    char name[16];
    uint64_t prepared_gen; /* pg->gen when prepared; 0 = not yet */
    char *vals[PG_PARAMS_MAX];
    int lens[PG_PARAMS_MAX], fmts[PG_PARAMS_MAX];
    Oid types[PG_PARAMS_MAX];
    PGresult *res;
    int row, nrows;
    unsigned char *blob; /* the last bytea column read, decoded */
};

static inline struct pg *pg_of(struct store *st)
{
    return st->conn;
}

static inline struct pg_stmt *pgs(struct db_stmt *s)
{
    return (struct pg_stmt *)s;
}

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

static void pg_set_error(struct pg *pg, const char *msg)
{
    snprintf(pg->errmsg, sizeof(pg->errmsg), "%s", msg && *msg ? msg : "unknown error");
    size_t n = strlen(pg->errmsg);
    while (n && (pg->errmsg[n - 1] == '\n' || pg->errmsg[n - 1] == ' '))
        pg->errmsg[--n] = '\0';
}

/* The DB_* kind of a failed result, by its SQLSTATE. A connection found broken is made again by
 * the next statement (pg_alive); this one has failed either way. */
static int pg_failure(struct pg *pg, PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : NULL;
    pg_set_error(pg, msg && *msg ? msg : PQerrorMessage(pg->conn));
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

/* --- the connection --- */

static void quiet_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message; /* "relation already exists, skipping" and the like */
}

/* The connection, made again if it was lost: false (with the reason in errmsg) while the
 * database cannot be reached, trying again only when the wait since the last try is over,
 * unless now. */
static bool pg_alive(struct pg *pg, bool now)
{
    if (PQstatus(pg->conn) == CONNECTION_OK)
        return true;
    int64_t t = time_mono_ms();
    if (!now && t < pg->next_try_ms) {
        pg_set_error(pg, "PostgreSQL cannot be reached; trying again");
        return false;
    }
    PQreset(pg->conn);
    if (PQstatus(pg->conn) != CONNECTION_OK) {
        char why[512];
        snprintf(why, sizeof(why), "PostgreSQL cannot be reached: %.*s",
                 (int)strcspn(PQerrorMessage(pg->conn), "\n"), PQerrorMessage(pg->conn));
        pg_set_error(pg, why);
        if (!pg->down)
            log_warn("database unreachable err=\"%s\"", pg->errmsg);
        pg->down = true;
        pg->retry_ms = pg->retry_ms ? pg->retry_ms : PG_RETRY_FIRST_MS;
        pg->next_try_ms = t + pg->retry_ms;
        pg->retry_ms = pg->retry_ms * 2 < PG_RETRY_MAX_MS ? pg->retry_ms * 2 : PG_RETRY_MAX_MS;
        return false;
    }
    PQsetNoticeProcessor(pg->conn, quiet_notice, NULL);
    pg->gen++; /* the statements prepare themselves again on the new connection */
    if (pg->down)
        log_info("database reachable again");
    pg->down = false;
    pg->retry_ms = 0;
    return true;
}

/* Run sql (one or more statements, no values) as a simple query: 0, or -EIO with err filled
 * (the first line of the server's message). */
static int pg_script(struct store *st, const char *sql, struct err *err)
{
    struct pg *pg = pg_of(st);
    if (!pg_alive(pg, false))
        return err_set(err, -EIO, "%s", pg->errmsg);
    PGresult *res = PQexec(pg->conn, sql);
    ExecStatusType status = PQresultStatus(res);
    int r = 0;
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
        const char *msg = PQresultErrorMessage(res);
        r = err_set(err, -EIO, "%.*s", (int)strcspn(msg, "\n"), msg);
    }
    PQclear(res);
    return r;
}

static void pg_close(struct store *st)
{
    struct pg *pg = pg_of(st);
    if (!pg)
        return;
    PQfinish(pg->conn);
    free(pg);
    st->conn = NULL;
}

static int pg_open(const char *url, struct store *st, struct err *err)
{
    /* the URL's own settings win over these, which come first: a connection attempt gives up
     * after 2 s (libpq's least) rather than never, and speaks UTF-8, also when made again */
    static const char *const keys[] = {"connect_timeout", "client_encoding", "dbname", NULL};
    const char *const vals[] = {"2", "UTF8", url, NULL};
    PGconn *conn = PQconnectdbParams(keys, vals, 1);
    if (!conn)
        return err_set(err, -ENOMEM, "cannot connect to PostgreSQL: out of memory");
    if (PQstatus(conn) != CONNECTION_OK) {
        /* libpq's message names the server and the failure, never the password */
        const char *msg = PQerrorMessage(conn);
        err_set(err, -EIO, "cannot connect to PostgreSQL: %.*s", (int)strcspn(msg, "\n"), msg);
        PQfinish(conn);
        return -EIO;
    }
    PQsetNoticeProcessor(conn, quiet_notice, NULL);
    struct pg *pg = xcalloc(1, sizeof(*pg));
    pg->conn = conn;
    pg->gen = 1;
    st->conn = pg;
    /* the database's name, never the URL, which may hold a password */
    snprintf(st->label, sizeof(st->label), "PostgreSQL database '%s'", PQdb(conn));
    return 0;
}

/* --- migrations (migrate.c runs them) --- */

static int pg_lock(struct store *st, bool take, struct err *err)
{
    int r = pg_script(st,
                      take ? "SELECT pg_advisory_lock(" PG_MIGRATION_LOCK ")"
                           : "SELECT pg_advisory_unlock(" PG_MIGRATION_LOCK ")",
                      err);
    return r < 0 ? err_wrap(err, take ? "migration lock" : "migration unlock") : 0;
}

static int pg_version(struct store *st, struct err *err)
{
    int r =
        pg_script(st, "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)", err);
    if (r < 0)
        return err_wrap(err, "schema version table");
    PGresult *res = PQexec(pg_of(st)->conn, "SELECT coalesce(max(version), 0) FROM schema_version");
    int v = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1
                ? atoi(PQgetvalue(res, 0, 0))
                : -1;
    if (v < 0) {
        const char *msg = PQresultErrorMessage(res);
        err_set(err, -EIO, "cannot read schema version: %.*s", (int)strcspn(msg, "\n"), msg);
    }
    PQclear(res);
    return v;
}

static int pg_set_version(struct store *st, int version, struct err *err)
{
    char set[96];
    snprintf(set, sizeof(set), "DELETE FROM schema_version; INSERT INTO schema_version VALUES (%d)",
             version);
    return pg_script(st, set, err);
}

/* --- statements --- */

static struct db_stmt *pg_prepare(struct store *st, const char *sql, struct err *err)
{
    struct pg_stmt *s = xcalloc(1, sizeof(*s));
    s->row = -1;
    if (!pg_simple(sql)) {
        s->pg_sql = pg_translate(sql, &s->nparams);
        if (s->nparams < 0) {
            free(s->pg_sql);
            free(s);
            err_set(err, -EINVAL, "database prepare: more than %d parameters", PG_PARAMS_MAX);
            return NULL;
        }
    }
    return &s->base;
}

static void pg_clear_values(struct pg_stmt *s)
{
    for (int i = 0; i < s->nparams; i++) {
        free(s->vals[i]);
        s->vals[i] = NULL;
        s->lens[i] = s->fmts[i] = 0;
    }
}

static void pg_reset(struct db_stmt *base)
{
    struct pg_stmt *s = pgs(base);
    PQclear(s->res);
    s->res = NULL;
    s->row = -1;
    s->nrows = 0;
    free(s->blob);
    s->blob = NULL;
}

static void pg_clear(struct db_stmt *base)
{
    pg_reset(base);
    pg_clear_values(pgs(base));
}

static void pg_finalize(struct db_stmt *base)
{
    struct pg_stmt *s = pgs(base);
    struct pg *pg = pg_of(base->st);
    if (s->prepared_gen && s->prepared_gen == pg->gen) {
        char sql[48];
        snprintf(sql, sizeof(sql), "DEALLOCATE %s", s->name);
        PQclear(PQexec(pg->conn, sql));
    }
    pg_clear(base);
    free(s->pg_sql);
    free(s);
}

static void pg_bind(struct pg_stmt *s, int i, char *v, int len, int fmt, Oid type)
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

static void pg_bind_text(struct db_stmt *s, int i, const char *v)
{
    pg_bind(pgs(s), i, v ? xstrdup(v) : NULL, 0, 0, OID_TEXT);
}

static void pg_bind_int64(struct db_stmt *s, int i, int64_t v)
{
    pg_bind(pgs(s), i, xasprintf("%lld", (long long)v), 0, 0, OID_INT8);
}

static void pg_bind_double(struct db_stmt *s, int i, double v)
{
    pg_bind(pgs(s), i, xasprintf("%.17g", v), 0, 0, OID_FLOAT8);
}

static void pg_bind_blob(struct db_stmt *s, int i, const void *p, size_t n)
{
    char *copy = xmalloc(n ? n : 1);
    if (n)
        memcpy(copy, p, n);
    pg_bind(pgs(s), i, copy, (int)n, 1, OID_BYTEA);
}

static void pg_bind_null(struct db_stmt *s, int i)
{
    pg_bind(pgs(s), i, NULL, 0, 0, 0);
}

/* Run the statement once: its result, or NULL with *rc the failure. */
static PGresult *pg_run(struct pg *pg, struct db_stmt *base, int *rc)
{
    struct pg_stmt *s = pgs(base);
    PGresult *res;
    if (!s->pg_sql) {
        res = PQexec(pg->conn, strcmp(base->sql, "BEGIN IMMEDIATE") == 0 ? "BEGIN" : base->sql);
    } else {
        if (s->prepared_gen != pg->gen) {
            if (!s->name[0])
                snprintf(s->name, sizeof(s->name), "s%u", ++pg->next_name);
            PGresult *p = PQprepare(pg->conn, s->name, s->pg_sql, s->nparams, s->types);
            if (PQresultStatus(p) != PGRES_COMMAND_OK) {
                *rc = pg_failure(pg, p);
                PQclear(p);
                return NULL;
            }
            PQclear(p);
            s->prepared_gen = pg->gen;
        }
        res = PQexecPrepared(pg->conn, s->name, s->nparams, (const char *const *)s->vals, s->lens,
                             s->fmts, 0);
    }
    ExecStatusType status = PQresultStatus(res);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
        *rc = pg_failure(pg, res);
        PQclear(res);
        return NULL;
    }
    return res;
}

/* A statement that changes nothing, which is safe to send again when the connection was lost
 * under it: a transaction's BEGIN, a read outside a transaction. */
static bool pg_repeatable(const char *sql)
{
    return strcmp(sql, "BEGIN IMMEDIATE") == 0 || strcmp(sql, "BEGIN") == 0 ||
           strncmp(sql, "SELECT ", 7) == 0;
}

/* Run the statement (the first step reads its whole result). A connection lost is made again
 * first; one lost under a statement safe to repeat outside a transaction is made again and the
 * statement repeated once; otherwise the statement fails, naming the loss: a COMMIT cut so is
 * reported as of unknown outcome, and a transaction cut fails until its ROLLBACK. */
static int pg_step(struct db_stmt *base)
{
    struct pg_stmt *s = pgs(base);
    struct pg *pg = pg_of(base->st);
    if (!s->res) {
        const char *sql = base->sql;
        bool begin = strcmp(sql, "BEGIN IMMEDIATE") == 0 || strcmp(sql, "BEGIN") == 0;
        bool commit = strcmp(sql, "COMMIT") == 0, rollback = strcmp(sql, "ROLLBACK") == 0;
        if (rollback && (pg->cut || PQstatus(pg->conn) != CONNECTION_OK)) {
            /* nothing is left to roll back: the lost connection took the transaction with it */
            pg->cut = pg->in_tx = false;
            pg->changes = 0;
            s->nrows = 0;
            s->row = -1;
            return DB_DONE;
        }
        if (begin)
            pg->cut = false; /* a new transaction: the cut one was given up */
        if (pg->cut) {
            pg_set_error(pg, "the transaction was cut: the connection to PostgreSQL was lost");
            return DB_ERROR;
        }
        bool again = !pg->in_tx && pg_repeatable(sql);
        if (!pg_alive(pg, false))
            return DB_ERROR;
        int rc = DB_ERROR;
        PGresult *res = pg_run(pg, base, &rc);
        if (!res && PQstatus(pg->conn) == CONNECTION_BAD) {
            char why[400];
            snprintf(why, sizeof(why), "%s", pg->errmsg);
            if (pg->in_tx && commit) {
                snprintf(pg->errmsg, sizeof(pg->errmsg),
                         "the connection to PostgreSQL was lost during COMMIT, which may or may "
                         "not have been applied: %s",
                         why);
                pg->in_tx = false;
            } else if (pg->in_tx) {
                snprintf(pg->errmsg, sizeof(pg->errmsg),
                         "the connection to PostgreSQL was lost in a transaction: %s", why);
                pg->cut = true;
                pg->in_tx = false;
            } else if (again && pg_alive(pg, true)) {
                res = pg_run(pg, base, &rc);
            }
        }
        if (!res)
            return rc;
        if (begin)
            pg->in_tx = true;
        else if (commit || rollback)
            pg->in_tx = false;
        const char *changed = PQcmdTuples(res);
        pg->changes = *changed ? strtoll(changed, NULL, 10) : 0;
        s->res = res;
        s->nrows = PQresultStatus(res) == PGRES_TUPLES_OK ? PQntuples(res) : 0;
        s->row = -1;
    }
    free(s->blob);
    s->blob = NULL;
    return ++s->row < s->nrows ? DB_ROW : DB_DONE;
}

static bool pg_has_row(struct pg_stmt *s, int col)
{
    return s->res && s->row >= 0 && s->row < s->nrows && col >= 0 && col < PQnfields(s->res);
}

static bool pg_col_null(struct db_stmt *base, int col)
{
    struct pg_stmt *s = pgs(base);
    return !pg_has_row(s, col) || PQgetisnull(s->res, s->row, col);
}

static const char *pg_col_text(struct db_stmt *base, int col)
{
    struct pg_stmt *s = pgs(base);
    return pg_col_null(base, col) ? NULL : PQgetvalue(s->res, s->row, col);
}

static int64_t pg_col_int64(struct db_stmt *s, int col)
{
    const char *v = pg_col_text(s, col);
    if (!v)
        return 0;
    /* a boolean expression comes back as t or f */
    if (v[0] == 't' && !v[1])
        return 1;
    return strtoll(v, NULL, 10);
}

static double pg_col_double(struct db_stmt *s, int col)
{
    const char *v = pg_col_text(s, col);
    return v ? strtod(v, NULL) : 0;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static const void *pg_col_blob(struct db_stmt *base, int col, size_t *len)
{
    struct pg_stmt *s = pgs(base);
    *len = 0;
    /* bytea in text form: "\x" and two hex digits a byte */
    const char *v = pg_col_text(base, col);
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

static int64_t pg_changes(struct store *st)
{
    return pg_of(st)->changes;
}

static const char *pg_errmsg(struct store *st)
{
    return pg_of(st)->errmsg;
}

const struct db_backend db_pg = {
    .name = "postgres",
    .shared = true,
    .migrations = embedded_migrations_pg,
    .migrate_begin = "BEGIN",
    /* the position of the server's write-ahead log: it moves with every change any node makes */
    .data_version_sql = "SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint",
    .open = pg_open,
    .close = pg_close,
    .prepare = pg_prepare,
    .finalize = pg_finalize,
    .clear = pg_clear,
    .bind_text = pg_bind_text,
    .bind_int64 = pg_bind_int64,
    .bind_double = pg_bind_double,
    .bind_blob = pg_bind_blob,
    .bind_null = pg_bind_null,
    .step = pg_step,
    .reset = pg_reset,
    .col_null = pg_col_null,
    .col_text = pg_col_text,
    .col_int64 = pg_col_int64,
    .col_double = pg_col_double,
    .col_blob = pg_col_blob,
    .changes = pg_changes,
    .errmsg = pg_errmsg,
    .script = pg_script,
    .lock = pg_lock,
    .version = pg_version,
    .set_version = pg_set_version,
};

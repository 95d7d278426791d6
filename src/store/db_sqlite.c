/* The SQLite backend (db_backend.h): one database file in WAL mode, its statements prepared
 * persistent, its schema version in PRAGMA user_version. Its rule: nothing here knows an entity
 * or a table; it maps SQLite's calls and result codes onto the interface, one to one. */
#include "store/db_backend.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/util.h"

struct lite_stmt {
    struct db_stmt base;
    sqlite3_stmt *s;
};

static inline sqlite3 *lite_db(struct store *st)
{
    return st->conn;
}

static inline sqlite3_stmt *lite(struct db_stmt *s)
{
    return ((struct lite_stmt *)s)->s;
}

static int lite_open(const char *path, struct store *st, struct err *err)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                                 SQLITE_OPEN_EXRESCODE,
                             NULL);
    if (rc != SQLITE_OK) {
        err_set(err, -EIO, "cannot open database '%s': %s", path,
                db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return -EIO;
    }
    sqlite3_busy_timeout(db, 5000);
    char *msg = NULL;
    if (sqlite3_exec(db,
                     "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; "
                     "PRAGMA foreign_keys = ON; PRAGMA trusted_schema = OFF;",
                     NULL, NULL, &msg) != SQLITE_OK) {
        err_set(err, -EIO, "cannot configure database '%s': %s", path, msg ? msg : "");
        sqlite3_free(msg);
        sqlite3_close(db);
        return -EIO;
    }
    st->conn = db;
    snprintf(st->label, sizeof(st->label), "database '%s'", path);
    return 0;
}

static void lite_close(struct store *st)
{
    sqlite3_close_v2(lite_db(st));
    st->conn = NULL;
}

static struct db_stmt *lite_prepare(struct store *st, const char *sql, struct err *err)
{
    struct lite_stmt *s = xcalloc(1, sizeof(*s));
    /* A closing "FOR UPDATE ..." locks rows on PostgreSQL; SQLite's BEGIN IMMEDIATE holds the
     * whole database already. */
    const char *lock = strstr(sql, " FOR UPDATE");
    int rc = sqlite3_prepare_v3(lite_db(st), sql, lock ? (int)(lock - sql) : -1,
                                SQLITE_PREPARE_PERSISTENT, &s->s, NULL);
    if (rc != SQLITE_OK) {
        free(s);
        store_fail(st, DB_ERROR, "prepare", err);
        return NULL;
    }
    return &s->base;
}

static void lite_finalize(struct db_stmt *s)
{
    sqlite3_finalize(lite(s));
    free(s);
}

static void lite_clear(struct db_stmt *s)
{
    sqlite3_reset(lite(s));
    sqlite3_clear_bindings(lite(s));
}

static void lite_bind_text(struct db_stmt *s, int i, const char *v)
{
    sqlite3_bind_text(lite(s), i, v, -1, SQLITE_STATIC);
}

static void lite_bind_int64(struct db_stmt *s, int i, int64_t v)
{
    sqlite3_bind_int64(lite(s), i, v);
}

static void lite_bind_double(struct db_stmt *s, int i, double v)
{
    sqlite3_bind_double(lite(s), i, v);
}

static void lite_bind_blob(struct db_stmt *s, int i, const void *p, size_t n)
{
    sqlite3_bind_blob(lite(s), i, p, (int)n, SQLITE_STATIC);
}

static void lite_bind_null(struct db_stmt *s, int i)
{
    sqlite3_bind_null(lite(s), i);
}

static int lite_step(struct db_stmt *s)
{
    int rc = sqlite3_step(lite(s));
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

static void lite_reset(struct db_stmt *s)
{
    sqlite3_reset(lite(s));
}

static bool lite_col_null(struct db_stmt *s, int col)
{
    return sqlite3_column_type(lite(s), col) == SQLITE_NULL;
}

static const char *lite_col_text(struct db_stmt *s, int col)
{
    return (const char *)sqlite3_column_text(lite(s), col);
}

static int64_t lite_col_int64(struct db_stmt *s, int col)
{
    return sqlite3_column_int64(lite(s), col);
}

static double lite_col_double(struct db_stmt *s, int col)
{
    return sqlite3_column_double(lite(s), col);
}

static const void *lite_col_blob(struct db_stmt *s, int col, size_t *len)
{
    const void *p = sqlite3_column_blob(lite(s), col);
    *len = (size_t)sqlite3_column_bytes(lite(s), col);
    return p;
}

static int64_t lite_changes(struct store *st)
{
    return sqlite3_changes64(lite_db(st));
}

static const char *lite_errmsg(struct store *st)
{
    return sqlite3_errmsg(lite_db(st));
}

static int lite_script(struct store *st, const char *sql, struct err *err)
{
    char *msg = NULL;
    if (sqlite3_exec(lite_db(st), sql, NULL, NULL, &msg) == SQLITE_OK)
        return 0;
    err_set(err, -EIO, "%s", msg ? msg : sqlite3_errmsg(lite_db(st)));
    sqlite3_free(msg);
    return -EIO;
}

static int lite_version(struct store *st, struct err *err)
{
    sqlite3_stmt *s;
    int v = -1;
    if (sqlite3_prepare_v2(lite_db(st), "PRAGMA user_version", -1, &s, NULL) == SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW)
            v = sqlite3_column_int(s, 0);
        sqlite3_finalize(s);
    }
    if (v < 0)
        return err_set(err, -EIO, "cannot read schema version: %s", sqlite3_errmsg(lite_db(st)));
    return v;
}

static int lite_set_version(struct store *st, int version, struct err *err)
{
    char pragma[64];
    snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", version);
    return lite_script(st, pragma, err);
}

/* A migration that rebuilds a table (https://sqlite.org/lang_altertable.html#otheralter) runs
 * with foreign keys off, so that dropping the old table neither fails nor cascades into the
 * tables that refer to it; this is the procedure's check that the references still hold. */
static int lite_migrate_check(struct store *st, struct err *err)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(lite_db(st), "PRAGMA foreign_key_check", -1, &s, NULL) != SQLITE_OK)
        return err_set(err, -EIO, "cannot check foreign keys: %s", sqlite3_errmsg(lite_db(st)));
    int rc = sqlite3_step(s), r = 0;
    if (rc == SQLITE_ROW)
        r = err_set(err, -EPROTO, "a row of table '%s' refers to a missing row of '%s'",
                    (const char *)sqlite3_column_text(s, 0),
                    (const char *)sqlite3_column_text(s, 2));
    else if (rc != SQLITE_DONE)
        r = err_set(err, -EIO, "cannot check foreign keys: %s", sqlite3_errmsg(lite_db(st)));
    sqlite3_finalize(s);
    return r;
}

const struct db_backend db_sqlite = {
    .name = "sqlite",
    .shared = false,
    .migrations = embedded_migrations,
    /* replaying them on a new database made SQLite parse the whole schema again at each of
     * their ALTER TABLEs */
    .schema = embedded_schema,
    /* foreign_keys can change only outside a transaction */
    .migrate_begin = "PRAGMA foreign_keys = OFF; BEGIN IMMEDIATE",
    .migrate_end = "PRAGMA foreign_keys = ON",
    .migrate_check = lite_migrate_check,
    .data_version_sql = "PRAGMA data_version",
    .open = lite_open,
    .close = lite_close,
    .prepare = lite_prepare,
    .finalize = lite_finalize,
    .clear = lite_clear,
    .bind_text = lite_bind_text,
    .bind_int64 = lite_bind_int64,
    .bind_double = lite_bind_double,
    .bind_blob = lite_bind_blob,
    .bind_null = lite_bind_null,
    .step = lite_step,
    .reset = lite_reset,
    .col_null = lite_col_null,
    .col_text = lite_col_text,
    .col_int64 = lite_col_int64,
    .col_double = lite_col_double,
    .col_blob = lite_col_blob,
    .changes = lite_changes,
    .errmsg = lite_errmsg,
    .script = lite_script,
    .lock = NULL,
    .version = lite_version,
    .set_version = lite_set_version,
};

int store_migrate_db(void *sqlite_db, const struct embedded_file *list, struct err *err)
{
    struct store st = {.be = &db_sqlite, .conn = sqlite_db};
    return store_migrate(&st, list, err);
}

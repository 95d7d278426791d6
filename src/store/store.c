#include "store/store.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "store/store_internal.h"

int store_fail(struct store *st, int rc, const char *what, struct err *err)
{
    int code = rc == DB_BUSY         ? -EBUSY
               : rc == DB_CONSTRAINT ? -EEXIST
               : rc == DB_FULL       ? -ENOSPC
                                     : -EIO;
    return err_set(err, code, "database %s: %s", what, db_errmsg(st));
}

int store_step_done(struct store *st, struct db_stmt *s, const char *what, struct err *err)
{
    int rc = db_step(s);
    return rc == DB_DONE ? 0 : store_fail(st, rc, what, err);
}

int store_exec(struct store *st, const char *sql, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, sql, &s, err);
    if (r < 0)
        return r;
    int rc = db_step(s);
    return rc == DB_DONE || rc == DB_ROW ? 0 : store_fail(st, rc, sql, err);
}

static int migration_number(const char *name)
{
    int n = 0, digits = 0;
    for (; name[digits] >= '0' && name[digits] <= '9'; digits++)
        n = n * 10 + (name[digits] - '0');
    return digits == 4 && name[4] == '_' ? n : -1;
}

int store_schema_version_known(void)
{
    int max = 0;
    for (const struct embedded_file *m = embedded_migrations; m->name; m++)
        if (migration_number(m->name) > max)
            max = migration_number(m->name);
    return max;
}

static int user_version(sqlite3 *db)
{
    sqlite3_stmt *s;
    int v = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL) == SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW)
            v = sqlite3_column_int(s, 0);
        sqlite3_finalize(s);
    }
    return v;
}

int store_migrations_check(const struct embedded_file *list, int current, struct err *err)
{
    int known = 0;
    for (const struct embedded_file *m = list; m->name; m++) {
        int n = migration_number(m->name);
        if (n <= known)
            return err_set(err, -EINVAL, "migration '%s' is out of order or misnamed", m->name);
        known = n;
    }
    if (current > known)
        return err_set(err, -EPROTO,
                       "database schema version %d is newer than this binary knows (%d); "
                       "run a newer sandbox-mcp",
                       current, known);
    return known;
}

int store_migrate_db(void *sqlite_db, const struct embedded_file *list, struct err *err)
{
    sqlite3 *db = sqlite_db;
    int current = user_version(db);
    if (current < 0)
        return err_set(err, -EIO, "cannot read schema version: %s", sqlite3_errmsg(db));
    int r = store_migrations_check(list, current, err);
    if (r < 0)
        return r;
    for (const struct embedded_file *m = list; m->name; m++) {
        int n = migration_number(m->name);
        if (n <= current)
            continue;
        char *msg = NULL;
        char pragma[64];
        snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", n);
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, m->data, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, pragma, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
            err_set(err, -EIO, "migration '%s': %s", m->name, msg ? msg : sqlite3_errmsg(db));
            sqlite3_free(msg);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return err->code ? err->code : -EIO;
        }
        current = n;
    }
    return current;
}

bool store_url_is_postgres(const char *url)
{
    return url && (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0);
}

static int sqlite_open(const char *path, struct store **ret, struct err *err)
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
    if (store_migrate_db(db, embedded_migrations, err) < 0) {
        sqlite3_close(db);
        return err_wrap(err, "database '%s'", path);
    }
    struct store *st = xcalloc(1, sizeof(*st));
    st->kind = STORE_SQLITE;
    st->db = db;
    *ret = st;
    return 0;
}

int store_open(const char *where, struct store **ret, struct err *err)
{
    if (!store_url_is_postgres(where))
        return sqlite_open(where, ret, err);
    struct store *st = xcalloc(1, sizeof(*st));
    st->kind = STORE_POSTGRES;
    int r = pg_open(where, st, err);
    if (r < 0) {
        free(st);
        return r;
    }
    *ret = st;
    return 0;
}

void store_close(struct store *st)
{
    if (!st)
        return;
    db_forget(st);
    if (st->kind == STORE_SQLITE)
        sqlite3_close_v2(st->db);
    else
        pg_close(st);
    free(st);
}

bool store_is_shared(const struct store *st)
{
    return st->kind == STORE_POSTGRES;
}

int64_t store_data_version(struct store *st)
{
    if (st->kind == STORE_POSTGRES)
        return pg_data_version(st);
    /* given back at once: a statement left stepped keeps its read snapshot, and with it every
     * later query of this connection would miss what other processes wrote */
    _cleanup_stmt_ struct db_stmt *s = NULL;
    struct err err = {0};
    if (store_prepare(st, "PRAGMA data_version", &s, &err) < 0)
        return -1;
    return db_step(s) == DB_ROW ? db_col_int64(s, 0) : -1;
}

void store_set_node(struct store *st, const char *node_id)
{
    snprintf(st->node_id, sizeof(st->node_id), "%s", node_id);
}

const char *store_node(const struct store *st)
{
    return st->node_id;
}

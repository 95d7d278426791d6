#include "store/store.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "store/store_internal.h"

/* Prepared statements kept for reuse: parsing and planning a statement costs more than running
 * most of ours (a token check, a usage update). Keyed by store and by the address of the SQL
 * text. A statement is lent to one caller at a time; a caller that asks while it is lent (a
 * nested use) gets a statement of its own, finalized when given back. Main thread only, like
 * the store. */
#define STMT_CACHE_MAX 128
static struct {
    struct store *st;
    const char *sql;
    sqlite3_stmt *stmt;
    bool lent;
} stmt_cache[STMT_CACHE_MAX];

int store_prepare(struct store *st, const char *sql, sqlite3_stmt **out, struct err *err)
{
    int free_slot = -1;
    for (int i = 0; i < STMT_CACHE_MAX; i++) {
        if (stmt_cache[i].st == st && stmt_cache[i].sql == sql && !stmt_cache[i].lent) {
            stmt_cache[i].lent = true;
            *out = stmt_cache[i].stmt;
            return 0;
        }
        if (!stmt_cache[i].st && free_slot < 0)
            free_slot = i;
    }
    int rc = sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, out, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "prepare", err);
    if (free_slot >= 0) {
        stmt_cache[free_slot].st = st;
        stmt_cache[free_slot].sql = sql;
        stmt_cache[free_slot].stmt = *out;
        stmt_cache[free_slot].lent = true;
    }
    return 0;
}

void store_release(sqlite3_stmt *s)
{
    if (!s)
        return;
    for (int i = 0; i < STMT_CACHE_MAX; i++)
        if (stmt_cache[i].stmt == s) {
            sqlite3_reset(s);
            sqlite3_clear_bindings(s);
            stmt_cache[i].lent = false;
            return;
        }
    sqlite3_finalize(s);
}

int store_fail(struct store *st, int rc, const char *what, struct err *err)
{
    int code = rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? -EBUSY
               : rc == SQLITE_CONSTRAINT                ? -EEXIST
               : rc == SQLITE_FULL                      ? -ENOSPC
                                                        : -EIO;
    return err_set(err, code, "database %s: %s", what, sqlite3_errmsg(st->db));
}

int store_step_done(struct store *st, sqlite3_stmt *s, const char *what, struct err *err)
{
    int rc = sqlite3_step(s);
    return rc == SQLITE_DONE ? 0 : store_fail(st, rc, what, err);
}

int store_exec(struct store *st, const char *sql, struct err *err)
{
    _cleanup_stmt_ sqlite3_stmt *s = NULL;
    int r = store_prepare(st, sql, &s, err);
    if (r < 0)
        return r;
    int rc = sqlite3_step(s);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : store_fail(st, rc, sql, err);
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

int store_migrate_db(void *sqlite_db, const struct embedded_file *list, struct err *err)
{
    sqlite3 *db = sqlite_db;
    int known = 0, current = user_version(db);
    if (current < 0)
        return err_set(err, -EIO, "cannot read schema version: %s", sqlite3_errmsg(db));
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

int store_open(const char *path, struct store **ret, struct err *err)
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
    st->db = db;
    *ret = st;
    return 0;
}

void store_close(struct store *st)
{
    if (!st)
        return;
    for (int i = 0; i < STMT_CACHE_MAX; i++)
        if (stmt_cache[i].st == st) {
            sqlite3_finalize(stmt_cache[i].stmt);
            memset(&stmt_cache[i], 0, sizeof(stmt_cache[i]));
        }
    sqlite3_close_v2(st->db);
    free(st);
}

int64_t store_data_version(struct store *st)
{
    /* given back at once: a statement left stepped keeps its read snapshot, and with it every
     * later query of this connection would miss what other processes wrote */
    _cleanup_stmt_ sqlite3_stmt *s = NULL;
    struct err err = {0};
    if (store_prepare(st, "PRAGMA data_version", &s, &err) < 0)
        return -1;
    return sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
}

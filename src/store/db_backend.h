#pragma once
/* The interface a database backend gives the store (as crun's cgroup managers and curl's vtls
 * backends): db.c dispatches every statement call through it and keeps the statement cache,
 * migrate.c runs the migrations through it, and db_sqlite.c and db_pg.c are its two instances.
 * store.c chooses one at open. Only these files include this header; the entity files see
 * store_internal.h's db_* calls and never which backend they are on. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store_internal.h"

/* What every backend's statement starts with; the backend's own struct embeds it first. */
struct db_stmt {
    const struct db_backend *be;
    struct store *st;
    const char *sql; /* the caller's literal: the cache's key */
    bool cached, lent;
};

struct db_backend {
    const char *name;
    bool shared; /* a database other nodes may share: store_is_shared */
    /* the migrations of its dialect, the BEGIN a migration runs in, and a script run once its
     * transaction is over, committed or not (NULL: none) */
    const struct embedded_file *migrations;
    const char *migrate_begin;
    const char *migrate_end;
    /* the schema the migrations leave on an empty database, in one script for a new database
     * (a table of one file; NULL: a new database replays every migration) */
    const struct embedded_file *schema;
    /* a statement (a literal, run through the cache) whose one value is store_data_version's */
    const char *data_version_sql;

    /* Connect st to where and configure the connection: 0, or < 0 with err filled and nothing
     * left open. Sets st->conn and st->label. */
    int (*open)(const char *where, struct store *st, struct err *err);
    void (*close)(struct store *st);

    /* A new statement for sql (s->be, st and sql filled), or NULL with err filled. */
    struct db_stmt *(*prepare)(struct store *st, const char *sql, struct err *err);
    void (*finalize)(struct db_stmt *s);
    /* Reset s and forget its values, ready for the next caller. */
    void (*clear)(struct db_stmt *s);
    void (*bind_text)(struct db_stmt *s, int i, const char *v);
    void (*bind_int64)(struct db_stmt *s, int i, int64_t v);
    void (*bind_double)(struct db_stmt *s, int i, double v);
    void (*bind_blob)(struct db_stmt *s, int i, const void *p, size_t n);
    void (*bind_null)(struct db_stmt *s, int i);
    int (*step)(struct db_stmt *s);
    void (*reset)(struct db_stmt *s);
    bool (*col_null)(struct db_stmt *s, int col);
    const char *(*col_text)(struct db_stmt *s, int col);
    int64_t (*col_int64)(struct db_stmt *s, int col);
    double (*col_double)(struct db_stmt *s, int col);
    const void *(*col_blob)(struct db_stmt *s, int col, size_t *len);
    int64_t (*changes)(struct store *st);
    const char *(*errmsg)(struct store *st);

    /* For migrate.c, outside the statement cache. Run sql (statements without values) as a
     * script: 0, or -EIO with the database's message in err. */
    int (*script)(struct store *st, const char *sql, struct err *err);
    /* Take (or give back) the lock that lets one process at a time migrate; NULL when the
     * migration's own transaction is enough. */
    int (*lock)(struct store *st, bool take, struct err *err);
    /* The schema version recorded in the database (0 when none), or < 0 with err filled. */
    int (*version)(struct store *st, struct err *err);
    /* Record version, within the migration's transaction. */
    int (*set_version)(struct store *st, int version, struct err *err);
    /* Check the migrated schema before its transaction commits: 0, or < 0 with err filled; NULL
     * when the backend's own constraints are enough. */
    int (*migrate_check)(struct store *st, struct err *err);
};

extern const struct db_backend db_sqlite, db_pg;

/* Bring st's schema up to date with list (migrate.c): the resulting version, or < 0. */
int store_migrate(struct store *st, const struct embedded_file *list, struct err *err);

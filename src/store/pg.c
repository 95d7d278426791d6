/* The PostgreSQL backend's connection: opening it, its migrations (migrations/postgres/), and
 * the change counter the auth cache watches. Statements are db.c's. */
#include "store/store_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/util.h"

/* Held while one node migrates, so that nodes started together apply each migration once. */
#define PG_MIGRATION_LOCK "7311650183260131"

static void quiet_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message; /* "relation already exists, skipping" and the like */
}

/* Run sql (one or more statements, no values) as a simple query: 0, or -EIO with err filled. */
static int pg_run(struct store *st, const char *sql, const char *what, struct err *err)
{
    PGresult *res = PQexec(st->pg.conn, sql);
    ExecStatusType status = PQresultStatus(res);
    int r = 0;
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
        const char *msg = PQresultErrorMessage(res);
        r = err_set(err, -EIO, "%s: %.*s", what, (int)strcspn(msg, "\n"), msg);
    }
    PQclear(res);
    return r;
}

static int pg_version(struct store *st, struct err *err)
{
    PGresult *res = PQexec(st->pg.conn, "SELECT coalesce(max(version), 0) FROM schema_version");
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

static int migration_number(const char *name)
{
    return atoi(name);
}

static int pg_migrate(struct store *st, struct err *err)
{
    int r = pg_run(st, "SELECT pg_advisory_lock(" PG_MIGRATION_LOCK ")", "migration lock", err);
    if (r < 0)
        return r;
    r = pg_run(st, "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)",
               "schema version table", err);
    int current = r < 0 ? r : pg_version(st, err);
    if (current >= 0)
        r = store_migrations_check(embedded_migrations_pg, current, err);
    else
        r = current;
    for (const struct embedded_file *m = embedded_migrations_pg; r >= 0 && m->name; m++) {
        int n = migration_number(m->name);
        if (n <= current)
            continue;
        char set[96];
        snprintf(set, sizeof(set),
                 "DELETE FROM schema_version; INSERT INTO schema_version "
                 "VALUES (%d)",
                 n);
        char what[160];
        snprintf(what, sizeof(what), "migration '%s'", m->name);
        if ((r = pg_run(st, "BEGIN", what, err)) < 0)
            break;
        if ((r = pg_run(st, m->data, what, err)) < 0 || (r = pg_run(st, set, what, err)) < 0 ||
            (r = pg_run(st, "COMMIT", what, err)) < 0) {
            pg_run(st, "ROLLBACK", what, NULL);
            break;
        }
        current = n;
    }
    struct err ignored = {0};
    pg_run(st, "SELECT pg_advisory_unlock(" PG_MIGRATION_LOCK ")", "migration unlock", &ignored);
    return r < 0 ? r : current;
}

int pg_open(const char *url, struct store *st, struct err *err)
{
    PGconn *conn = PQconnectdb(url);
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
    st->pg.conn = conn;
    st->pg.gen = 1;
    int r = pg_run(st, "SET client_encoding = 'UTF8'", "configure", err);
    if (r == 0)
        r = pg_migrate(st, err);
    if (r < 0) {
        err_wrap(err, "PostgreSQL database '%s'", PQdb(conn));
        PQfinish(conn);
        st->pg.conn = NULL;
        return err->code;
    }
    return 0;
}

void pg_close(struct store *st)
{
    PQfinish(st->pg.conn);
    st->pg.conn = NULL;
}

int64_t pg_data_version(struct store *st)
{
    /* the position of the server's write-ahead log: it moves with every change any node makes */
    _cleanup_stmt_ struct db_stmt *s = NULL;
    struct err err = {0};
    if (store_prepare(st, "SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint", &s, &err) < 0)
        return -1;
    return db_step(s) == DB_ROW ? db_col_int64(s, 0) : -1;
}

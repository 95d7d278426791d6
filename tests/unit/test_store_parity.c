/* The schema exists twice, as SQLite's incremental migrations (migrations/) and PostgreSQL's
 * (migrations/postgres/): this test migrates a database of each and compares what they end with,
 * so that the two cannot drift. Compared: the tables, each table's columns with their type and
 * whether they may be NULL, and the named indexes with their table, columns, uniqueness and
 * whether they are partial.
 *
 * Types are compared by SQLite's type affinity (https://sqlite.org/datatype3.html, 3.1), the
 * only meaning a declared type has there: on PostgreSQL bigint, integer, smallint and boolean
 * are INTEGER; text and varchar TEXT; double precision, real and numeric REAL; bytea BLOB.
 * A primary key's column counts as NOT NULL on both (SQLite allows NULL in a TEXT primary key,
 * but the store never writes one). Indexes that only back a PRIMARY KEY or UNIQUE constraint
 * (sqlite_autoindex_*, PostgreSQL's *_pkey and *_key) are left out: the constraints are the
 * columns' business, and their names differ by design. PostgreSQL's schema_version table stands
 * for SQLite's PRAGMA user_version and is left out too, and a PostgreSQL column named rowid
 * stands for the rowid every SQLite table has without a column (run_transitions orders by it).
 *
 * It needs PostgreSQL: tests/run.sh runs it with SANDBOX_MCP_TEST_DATABASE_URL set (it names
 * test_temp_db), as the store's other tests on PostgreSQL. Without one it checks the SQLite side
 * alone. */
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "harness.h"
#include "store/store.h"

#define LINES_MAX 1024

struct schema {
    char *line[LINES_MAX];
    int n;
};

__attribute__((format(printf, 2, 3))) static void add(struct schema *sc, const char *fmt, ...)
{
    if (sc->n == LINES_MAX)
        abort();
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&sc->line[sc->n], fmt, ap) < 0)
        abort();
    va_end(ap);
    sc->n++;
}

static int cmp_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void schema_free(struct schema *sc)
{
    for (int i = 0; i < sc->n; i++)
        free(sc->line[i]);
    sc->n = 0;
}

/* SQLite's affinity of a declared type, by the rules of datatype3.html 3.1, in their order. */
static const char *affinity(const char *decl)
{
    char up[64];
    size_t i = 0;
    for (; decl[i] && i < sizeof(up) - 1; i++)
        up[i] = (char)(decl[i] >= 'a' && decl[i] <= 'z' ? decl[i] - 32 : decl[i]);
    up[i] = '\0';
    if (strstr(up, "INT"))
        return "INTEGER";
    if (strstr(up, "CHAR") || strstr(up, "CLOB") || strstr(up, "TEXT"))
        return "TEXT";
    if (!*up || strstr(up, "BLOB"))
        return "BLOB";
    if (strstr(up, "REAL") || strstr(up, "FLOA") || strstr(up, "DOUB"))
        return "REAL";
    return "NUMERIC";
}

/* PostgreSQL's types, mapped onto the affinity SQLite gives the type the store declares. */
static const char *pg_affinity(const char *type)
{
    static const char *const map[][2] = {
        {"bigint", "INTEGER"},
        {"integer", "INTEGER"},
        {"smallint", "INTEGER"},
        {"boolean", "INTEGER"},
        {"text", "TEXT"},
        {"character varying", "TEXT"},
        {"double precision", "REAL"},
        {"real", "REAL"},
        {"numeric", "REAL"},
        {"bytea", "BLOB"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(type, map[i][0]) == 0)
            return map[i][1];
    return type; /* unmapped: it shows in the difference as it is */
}

static int lite_rows(sqlite3 *db, const char *q, const char *arg, sqlite3_stmt **s)
{
    if (sqlite3_prepare_v2(db, q, -1, s, NULL) != SQLITE_OK) {
        fprintf(stderr, "  %s: %s\n", q, sqlite3_errmsg(db));
        return -1;
    }
    if (arg)
        sqlite3_bind_text(*s, 1, arg, -1, SQLITE_TRANSIENT);
    return 0;
}

static const char *col(sqlite3_stmt *s, int i)
{
    const char *t = (const char *)sqlite3_column_text(s, i);
    return t ? t : "";
}

static void lite_schema(const char *path, struct schema *sc)
{
    sqlite3 *db = NULL;
    CHECK_INT_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *t;
    if (lite_rows(db,
                  "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE "
                  "'sqlite_%' ORDER BY name",
                  NULL, &t) < 0)
        abort();
    while (sqlite3_step(t) == SQLITE_ROW) {
        const char *table = col(t, 0);
        add(sc, "table %s", table);
        sqlite3_stmt *c;
        if (lite_rows(db, "SELECT name, type, \"notnull\" OR pk > 0 FROM pragma_table_info(?1)",
                      table, &c) < 0)
            abort();
        while (sqlite3_step(c) == SQLITE_ROW)
            add(sc, "column %s.%s %s%s", table, col(c, 0), affinity(col(c, 1)),
                sqlite3_column_int(c, 2) ? " NOT NULL" : "");
        sqlite3_finalize(c);
        sqlite3_stmt *ix;
        if (lite_rows(db,
                      "SELECT l.name, l.\"unique\", l.partial, "
                      "(SELECT group_concat(name, ',') FROM (SELECT name FROM "
                      "pragma_index_info(l.name) ORDER BY seqno)) "
                      "FROM pragma_index_list(?1) l WHERE l.origin = 'c'",
                      table, &ix) < 0)
            abort();
        while (sqlite3_step(ix) == SQLITE_ROW)
            add(sc, "index %s on %s(%s)%s%s", col(ix, 0), table, col(ix, 3),
                sqlite3_column_int(ix, 1) ? " unique" : "",
                sqlite3_column_int(ix, 2) ? " partial" : "");
        sqlite3_finalize(ix);
    }
    sqlite3_finalize(t);
    sqlite3_close(db);
    qsort(sc->line, (size_t)sc->n, sizeof(sc->line[0]), cmp_line);
}

static PGresult *pg_rows(PGconn *c, const char *q)
{
    PGresult *r = PQexec(c, q);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "  %s: %s", q, PQerrorMessage(c));
        abort();
    }
    return r;
}

static void pg_schema(const char *url, struct schema *sc)
{
    PGconn *c = PQconnectdb(url);
    CHECK_INT_EQ(PQstatus(c), CONNECTION_OK);
    PGresult *r = pg_rows(c, "SELECT table_name FROM information_schema.tables "
                             "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' "
                             "AND table_name <> 'schema_version'");
    for (int i = 0; i < PQntuples(r); i++)
        add(sc, "table %s", PQgetvalue(r, i, 0));
    PQclear(r);
    r = pg_rows(c, "SELECT table_name, column_name, data_type, is_nullable = 'NO' "
                   "FROM information_schema.columns WHERE table_schema = current_schema() "
                   "AND table_name <> 'schema_version' AND column_name <> 'rowid'");
    for (int i = 0; i < PQntuples(r); i++)
        add(sc, "column %s.%s %s%s", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
            pg_affinity(PQgetvalue(r, i, 2)),
            strcmp(PQgetvalue(r, i, 3), "t") == 0 ? " NOT NULL" : "");
    PQclear(r);
    /* the indexes made by CREATE INDEX: not those behind a constraint */
    r = pg_rows(c,
                "SELECT ic.relname, tc.relname, "
                "(SELECT string_agg(a.attname, ',' ORDER BY k.n) "
                "   FROM unnest(x.indkey) WITH ORDINALITY k(attnum, n) "
                "   JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum), "
                "x.indisunique, x.indpred IS NOT NULL "
                "FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid "
                "JOIN pg_class tc ON tc.oid = x.indrelid "
                "WHERE tc.relnamespace = current_schema()::regnamespace "
                "AND tc.relname <> 'schema_version' "
                "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid)");
    for (int i = 0; i < PQntuples(r); i++)
        add(sc, "index %s on %s(%s)%s%s", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
            PQgetvalue(r, i, 2), strcmp(PQgetvalue(r, i, 3), "t") == 0 ? " unique" : "",
            strcmp(PQgetvalue(r, i, 4), "t") == 0 ? " partial" : "");
    PQclear(r);
    PQfinish(c);
    qsort(sc->line, (size_t)sc->n, sizeof(sc->line[0]), cmp_line);
}

/* Migrate a new database at where with the store: 0, or -1. */
static int migrate(const char *where)
{
    struct store *st = NULL;
    struct err err = {0};
    int r = store_open(where, &st, &err);
    if (r < 0)
        fprintf(stderr, "  store_open: %s\n", err.msg);
    store_close(st);
    return r < 0 ? -1 : 0;
}

static int count_prefix(const struct schema *sc, const char *prefix)
{
    int n = 0;
    for (int i = 0; i < sc->n; i++)
        n += strncmp(sc->line[i], prefix, strlen(prefix)) == 0;
    return n;
}

TEST(both_migration_sets_end_with_the_same_schema)
{
    char dir[] = "/tmp/smcp-parity-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[sizeof(dir) + 16];
    snprintf(path, sizeof(path), "%s/lite.db", dir);
    CHECK_INT_EQ(migrate(path), 0);
    struct schema lite = {0};
    lite_schema(path, &lite);
    /* the SQLite side is read at all: its tables, columns and indexes */
    CHECK(count_prefix(&lite, "table ") > 10);
    CHECK(count_prefix(&lite, "column ") > 100);
    CHECK(count_prefix(&lite, "index ") > 10);
    CHECK(count_prefix(&lite, "column users.id TEXT NOT NULL") == 1);

    if (test_pg_url()) {
        char *url = test_temp_db();
        CHECK_INT_EQ(migrate(url), 0);
        struct schema pg = {0};
        pg_schema(url, &pg);
        /* a merge of the two sorted lists: each line on one side only is a drift */
        int i = 0, j = 0, drift = 0;
        while (i < lite.n || j < pg.n) {
            int c = i == lite.n ? 1 : j == pg.n ? -1 : strcmp(lite.line[i], pg.line[j]);
            if (c == 0) {
                i++, j++;
                continue;
            }
            fprintf(stderr, "  only on %s: %s\n", c < 0 ? "SQLite" : "PostgreSQL",
                    c < 0 ? lite.line[i++] : pg.line[j++]);
            drift++;
        }
        CHECK_INT_EQ(drift, 0);
        CHECK_INT_EQ(pg.n, lite.n);
        schema_free(&pg);
        free(url);
    } else {
        fprintf(stderr, "  no SANDBOX_MCP_TEST_DATABASE_URL: the SQLite side alone\n");
    }
    schema_free(&lite);
    /* the database, what its write-ahead log left beside it, and the store's reserve */
    static const char *const files[] = {"", "-wal", "-shm", "-reserve"};
    for (size_t k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
        char f[sizeof(path) + 8];
        snprintf(f, sizeof(f), "%s%s", path, files[k]);
        unlink(f);
    }
    CHECK_INT_EQ(rmdir(dir), 0);
}

TEST_MAIN()

#pragma once
/* A one-header test harness: TEST(name) defines a test, CHECK_* report file:line with both
 * values and mark the test failed, TEST_MAIN() runs every test and ends with the line
 * "N passed, N failed". */

#include <dirent.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct test_case {
    const char *name;
    void (*fn)(void);
};

#define TEST_MAX 256
static struct test_case test_cases[TEST_MAX];
static int test_count;
static int test_failed_flag;

#define TEST(name)                                                                                 \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void test_register_##name(void)                            \
    {                                                                                              \
        if (test_count < TEST_MAX)                                                                 \
            test_cases[test_count++] = (struct test_case){#name, test_##name};                     \
    }                                                                                              \
    static void test_##name(void)

#define CHECK_FAIL_(...)                                                                           \
    do {                                                                                           \
        fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);                                          \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        test_failed_flag = 1;                                                                      \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            CHECK_FAIL_("CHECK(%s) failed", #cond);                                                \
    } while (0)

#define CHECK_INT_EQ(a, b)                                                                         \
    do {                                                                                           \
        intmax_t a_ = (intmax_t)(a), b_ = (intmax_t)(b);                                           \
        if (a_ != b_)                                                                              \
            CHECK_FAIL_("%s == %s: %" PRIdMAX " != %" PRIdMAX, #a, #b, a_, b_);                    \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                                         \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                     \
            CHECK_FAIL_("%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)",                  \
                        b_ ? b_ : "(null)");                                                       \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                                            \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        if (!h_ || !strstr(h_, n_))                                                                \
            CHECK_FAIL_("%s contains %s: \"%s\" lacks \"%s\"", #hay, #needle, h_ ? h_ : "(null)",  \
                        n_);                                                                       \
    } while (0)

/* A database for one test. With SANDBOX_MCP_TEST_DATABASE_URL set (a PostgreSQL URL; tests/run.sh
 * runs the store's tests once more with one), a schema of its own in that database, as a URL
 * that selects it; else a SQLite file in a directory of its own under /tmp. Free the string;
 * what it names is removed when the tests end. */
#define TEST_TEMP_MAX 64
static char test_temp_dirs[TEST_TEMP_MAX][sizeof("/tmp/smcp-unit-XXXXXX")];
static int test_temp_count;
static char test_temp_schemas[TEST_TEMP_MAX][32];
static int test_temp_schema_count;

__attribute__((unused)) static const char *test_pg_url(void)
{
    const char *url = getenv("SANDBOX_MCP_TEST_DATABASE_URL");
    return url && *url ? url : NULL;
}

/* Run q on a connection of its own to where (a SQLite path or a PostgreSQL URL); with out, the
 * first column of the first row as an integer (-1 if none). 0, or -1 having said why. */
__attribute__((unused)) static int test_sql_run(const char *where, const char *q, int64_t *out)
{
    if (out)
        *out = -1;
    if (strncmp(where, "postgres", 8) == 0) {
        PGconn *c = PQconnectdb(where);
        PQclear(PQexec(c, "SET client_min_messages = warning"));
        PGresult *r = PQexec(c, q);
        ExecStatusType status = PQresultStatus(r);
        int rc = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK ? 0 : -1;
        if (rc < 0)
            fprintf(stderr, "  %s: %s", q, PQerrorMessage(c));
        else if (out && PQntuples(r) > 0)
            *out = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        PQfinish(c);
        return rc;
    }
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int rc = -1;
    if (sqlite3_open(where, &db) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        sqlite3_exec(db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
        if (sqlite3_prepare_v2(db, q, -1, &s, NULL) == SQLITE_OK) {
            int step = sqlite3_step(s);
            if (step == SQLITE_ROW && out)
                *out = sqlite3_column_int64(s, 0);
            rc = step == SQLITE_ROW || step == SQLITE_DONE ? 0 : -1;
        }
    }
    if (rc < 0)
        fprintf(stderr, "  %s: %s\n", q, db ? sqlite3_errmsg(db) : "cannot open");
    sqlite3_finalize(s);
    sqlite3_close(db);
    return rc;
}

__attribute__((unused)) static char *test_temp_db(void)
{
    const char *url = test_pg_url();
    if (url) {
        if (test_temp_schema_count == TEST_TEMP_MAX)
            abort();
        char *name = test_temp_schemas[test_temp_schema_count++];
        snprintf(name, sizeof(test_temp_schemas[0]), "unit_%d_%d", (int)getpid(),
                 test_temp_schema_count);
        char q[96];
        snprintf(q, sizeof(q), "CREATE SCHEMA %s", name);
        if (test_sql_run(url, q, NULL) < 0)
            abort();
        size_t cap = strlen(url) + 64;
        char *where = malloc(cap);
        if (!where)
            abort();
        snprintf(where, cap, "%s%coptions=-csearch_path%%3D%s", url, strchr(url, '?') ? '&' : '?',
                 name);
        return where;
    }
    char dir[] = "/tmp/smcp-unit-XXXXXX";
    if (test_temp_count == TEST_TEMP_MAX || !mkdtemp(dir))
        abort();
    memcpy(test_temp_dirs[test_temp_count++], dir, sizeof(dir));
    char *path = malloc(sizeof(dir) + sizeof("/test.db"));
    if (!path)
        abort();
    snprintf(path, sizeof(dir) + sizeof("/test.db"), "%s/test.db", dir);
    return path;
}

static void test_temp_remove(void)
{
    for (int i = 0; i < test_temp_schema_count; i++) {
        char q[96];
        snprintf(q, sizeof(q), "DROP SCHEMA %s CASCADE", test_temp_schemas[i]);
        test_sql_run(test_pg_url(), q, NULL);
    }
    for (int i = 0; i < test_temp_count; i++) {
        DIR *d = opendir(test_temp_dirs[i]);
        struct dirent *de;
        char path[sizeof(test_temp_dirs[i]) + 256 + 1];
        while (d && (de = readdir(d)))
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
                snprintf(path, sizeof(path), "%s/%s", test_temp_dirs[i], de->d_name);
                unlink(path);
            }
        if (d)
            closedir(d);
        rmdir(test_temp_dirs[i]);
    }
}

#define TEST_MAIN()                                                                                \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        int passed = 0, failed = 0;                                                                \
        for (int i = 0; i < test_count; i++) {                                                     \
            if (argc > 1 && !strstr(test_cases[i].name, argv[1]))                                  \
                continue;                                                                          \
            test_failed_flag = 0;                                                                  \
            test_cases[i].fn();                                                                    \
            printf("%s %s\n", test_failed_flag ? "FAIL" : "ok  ", test_cases[i].name);             \
            if (test_failed_flag)                                                                  \
                failed++;                                                                          \
            else                                                                                   \
                passed++;                                                                          \
        }                                                                                          \
        test_temp_remove();                                                                        \
        printf("%d passed, %d failed\n", passed, failed);                                          \
        return failed ? 1 : 0;                                                                     \
    }

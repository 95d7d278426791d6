#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "harness.h"
#include "store/store.h"

static char *temp_db(void)
{
    char dir[] = "/tmp/smcp-unit-XXXXXX";
    if (!mkdtemp(dir))
        abort();
    return xasprintf("%s/test.db", dir);
}

TEST(open_applies_migrations_and_reopens)
{
    char *path = temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    CHECK_INT_EQ(store_user_count(st, &err), 0);
    store_close(st);
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    store_close(st);
    sqlite3 *db;
    sqlite3_open(path, &db);
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL);
    sqlite3_step(s);
    CHECK_INT_EQ(sqlite3_column_int(s, 0), store_schema_version_known());
    sqlite3_finalize(s);
    sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL);
    sqlite3_step(s);
    CHECK_STR_EQ((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    sqlite3_exec(db, "PRAGMA user_version = 999", NULL, NULL, NULL);
    sqlite3_close(db);
    CHECK_INT_EQ(store_open(path, &st, &err), -EPROTO);
    CHECK_STR_CONTAINS(err.msg, "newer than this binary knows");
    free(path);
}

TEST(migrations_in_order_each_in_a_transaction)
{
    sqlite3 *db;
    sqlite3_open(":memory:", &db);
    struct err err = {0};
    const struct embedded_file good[] = {
        {"0001_a.sql", "CREATE TABLE a(x);", 18},
        {"0002_b.sql", "CREATE TABLE b(x);", 18},
        {NULL, NULL, 0},
    };
    CHECK_INT_EQ(store_migrate_db(db, good, &err), 2);
    const struct embedded_file broken[] = {
        {"0001_a.sql", "CREATE TABLE a(x);", 18},
        {"0002_b.sql", "CREATE TABLE b(x);", 18},
        {"0003_c.sql", "CREATE TABLE c(x); CREATE TABLE oops(", 37},
        {NULL, NULL, 0},
    };
    CHECK(store_migrate_db(db, broken, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "0003_c.sql");
    /* the failed migration left nothing behind */
    sqlite3_stmt *s;
    CHECK(sqlite3_prepare_v2(db, "SELECT * FROM c", -1, &s, NULL) != SQLITE_OK);
    const struct embedded_file disorder[] = {
        {"0002_b.sql", "", 0},
        {"0001_a.sql", "", 0},
        {NULL, NULL, 0},
    };
    CHECK_INT_EQ(store_migrate_db(db, disorder, &err), -EINVAL);
    sqlite3_close(db);
}

static int listed;
static void count_token(const struct store_token *t, void *ctx)
{
    (void)ctx;
    CHECK(strncmp(t->prefix, "smcp_", 5) == 0);
    CHECK_INT_EQ(strlen(t->prefix), 12);
    listed++;
}

TEST(users_and_tokens)
{
    char *path = temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_user u, found;
    CHECK_INT_EQ(store_user_add(st, "alice", &u, &err), 0);
    CHECK_INT_EQ(store_user_add(st, "alice", NULL, &err), -EEXIST);
    CHECK_INT_EQ(store_user_add(st, "bad name", NULL, &err), -EINVAL);
    CHECK_INT_EQ(store_user_add(st, "-dash", NULL, &err), -EINVAL);
    CHECK_INT_EQ(store_user_find(st, "nobody", &found, &err), -ENOENT);
    char plain[STORE_TOKEN_LEN + 1];
    struct store_token t;
    CHECK_INT_EQ(store_token_create(st, u.id, "laptop", plain, &t, &err), 0);
    CHECK_INT_EQ(strlen(plain), STORE_TOKEN_LEN);
    CHECK_INT_EQ(store_token_authenticate(st, plain, strlen(plain), &found, &err), 0);
    CHECK_STR_EQ(found.name, "alice");
    plain[10] ^= 1;
    CHECK_INT_EQ(store_token_authenticate(st, plain, strlen(plain), &found, &err), -ENOENT);
    plain[10] ^= 1;
    listed = 0;
    CHECK_INT_EQ(store_token_list(st, "alice", count_token, NULL, &err), 0);
    CHECK_INT_EQ(listed, 1);
    CHECK_INT_EQ(store_token_revoke(st, t.id, &err), 0);
    CHECK_INT_EQ(store_token_revoke(st, t.id, &err), -ENOENT);
    CHECK_INT_EQ(store_token_authenticate(st, plain, strlen(plain), &found, &err), -ENOENT);
    store_close(st);
    /* only the hash is stored */
    FILE *f = fopen(path, "rb");
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    CHECK(memmem(buf, n, plain, strlen(plain)) == NULL);
    free(path);
}

TEST_MAIN()

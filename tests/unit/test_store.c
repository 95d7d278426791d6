#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "harness.h"
#include "runs/runs.h"
#include "store/store.h"

TEST(open_applies_migrations_and_reopens)
{
    char *path = test_temp_db();
    bool pg = test_pg_url() != NULL;
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    CHECK_INT_EQ(store_user_count(st, &err), 0);
    CHECK_INT_EQ(store_is_shared(st), pg);
    store_close(st);
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    store_close(st);
    int64_t v;
    CHECK_INT_EQ(
        test_sql_run(path, pg ? "SELECT max(version) FROM schema_version" : "PRAGMA user_version",
                     &v),
        0);
    CHECK_INT_EQ(v, store_schema_version_known());
    if (!pg) {
        sqlite3 *db;
        sqlite3_stmt *s;
        sqlite3_open(path, &db);
        sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL);
        sqlite3_step(s);
        CHECK_STR_EQ((const char *)sqlite3_column_text(s, 0), "wal");
        sqlite3_finalize(s);
        sqlite3_close(db);
    }
    CHECK_INT_EQ(
        test_sql_run(path,
                     pg ? "UPDATE schema_version SET version = 999" : "PRAGMA user_version = 999",
                     NULL),
        0);
    CHECK_INT_EQ(store_open(path, &st, &err), -EPROTO);
    CHECK_STR_CONTAINS(err.msg, "newer than this binary knows");
    free(path);
}

/* Each SQLite migration has its PostgreSQL twin from where PostgreSQL's begin, so both
 * backends know the same schema version. */
TEST(both_dialects_end_at_the_same_migration)
{
    const struct embedded_file *m = embedded_migrations_pg;
    CHECK(m->name != NULL);
    int first = atoi(m->name), last = 0;
    for (; m->name; m++)
        last = atoi(m->name);
    CHECK_INT_EQ(last, store_schema_version_known());
    int twins = 0;
    for (const struct embedded_file *l = embedded_migrations; l->name; l++)
        twins += atoi(l->name) >= first;
    int pgs = 0;
    for (m = embedded_migrations_pg; m->name; m++)
        pgs++;
    CHECK_INT_EQ(pgs, twins);
}

TEST(a_postgres_url_that_cannot_be_reached_is_a_clear_error)
{
    struct store *st = NULL;
    struct err err = {0};
    CHECK(store_url_is_postgres("postgres://h/db"));
    CHECK(store_url_is_postgres("postgresql:///db?host=/run/x"));
    CHECK(!store_url_is_postgres("/var/lib/x.db"));
    CHECK(!store_url_is_postgres(NULL));
    CHECK_INT_EQ(store_open("postgresql://u:hunter2@/db?host=/nonexistent-dir", &st, &err), -EIO);
    CHECK_STR_CONTAINS(err.msg, "cannot connect to PostgreSQL");
    CHECK(strstr(err.msg, "hunter2") == NULL);
    CHECK(st == NULL);
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

static int64_t sql_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* A new database gets the schema its migrations leave in one script (src/store/schema.sh, at
 * build time): the same tables, indexes, views and triggers, each with the same statement, and
 * the same version, as replaying every migration in turn gives. */
TEST(a_new_database_gets_the_schema_its_migrations_leave)
{
    sqlite3 *fresh, *replayed;
    CHECK_INT_EQ(sqlite3_open(":memory:", &fresh), SQLITE_OK);
    CHECK_INT_EQ(sqlite3_open(":memory:", &replayed), SQLITE_OK);
    /* a copy of the list is replayed a migration at a time; the backend's own list, on a new
     * database, is the one script */
    struct embedded_file all[128] = {{0}};
    size_t k = 0;
    for (const struct embedded_file *m = embedded_migrations; m->name && k + 1 < 128; m++)
        all[k++] = *m;
    CHECK(embedded_migrations[k].name == NULL);
    CHECK(embedded_schema[0].name && embedded_schema[0].size > 0);
    struct err err = {0};
    int known = store_schema_version_known();
    CHECK_INT_EQ(store_migrate_db(replayed, all, &err), known);
    CHECK_INT_EQ(store_migrate_db(fresh, embedded_migrations, &err), known);
    CHECK_INT_EQ(sql_int(fresh, "PRAGMA user_version"), known);
    CHECK_INT_EQ(sql_int(fresh, "PRAGMA foreign_keys"), 1);
    /* made in one go, every table comes before every index; replayed, not */
    const char *order = "SELECT (SELECT max(rowid) FROM sqlite_schema WHERE type = 'table') < "
                        "(SELECT min(rowid) FROM sqlite_schema WHERE type = 'index' AND sql "
                        "IS NOT NULL)";
    CHECK_INT_EQ(sql_int(fresh, order), 1);
    CHECK_INT_EQ(sql_int(replayed, order), 0);

    const char *objects = "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name";
    sqlite3_stmt *a, *b;
    CHECK_INT_EQ(sqlite3_prepare_v2(fresh, objects, -1, &a, NULL), SQLITE_OK);
    CHECK_INT_EQ(sqlite3_prepare_v2(replayed, objects, -1, &b, NULL), SQLITE_OK);
    int rows = 0, ra, rb;
    while ((ra = sqlite3_step(a)) == SQLITE_ROW && (rb = sqlite3_step(b)) == SQLITE_ROW) {
        for (int c = 0; c < 4; c++) {
            const char *x = (const char *)sqlite3_column_text(a, c);
            const char *y = (const char *)sqlite3_column_text(b, c);
            CHECK_STR_EQ(x ? x : "(null)", y ? y : "(null)");
        }
        rows++;
    }
    CHECK_INT_EQ(ra, SQLITE_DONE);
    CHECK_INT_EQ(sqlite3_step(b), SQLITE_DONE);
    CHECK(rows > 50);
    sqlite3_finalize(a);
    sqlite3_finalize(b);
    sqlite3_close(fresh);
    sqlite3_close(replayed);
}

/* 0020 rebuilds runs (its phase CHECK gains "setting up"): a database at 0019 keeps its runs,
 * their events still refer to them (a deleted run takes its events along), foreign keys are on
 * again after, and the new phase is accepted where it was refused. */
TEST(a_database_at_0019_keeps_its_runs_through_the_rebuild)
{
    sqlite3 *db;
    CHECK_INT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
    sqlite3_exec(db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
    struct embedded_file upto19[64] = {{0}};
    size_t k = 0;
    for (const struct embedded_file *m = embedded_migrations; m->name && atoi(m->name) <= 19; m++)
        upto19[k++] = *m;
    struct err err = {0};
    CHECK_INT_EQ(store_migrate_db(db, upto19, &err), 19);
    const char *rows =
        "INSERT INTO users (id, name, created_at) VALUES ('u1', 'ann', 1);"
        "INSERT INTO sessions (id, user_id, agent, created_at, last_run_at) "
        "  VALUES ('s1', 'u1', 'opencode', 1, 1);"
        "INSERT INTO runs (id, user_id, session_id, status, task, model, agent, timeout_ms, "
        "  created_at, phase, phase_detail, setup, setup_result, cost) VALUES ('r1', 'u1', 's1', "
        "  'succeeded', 'fix it', 'm', 'opencode', 1000, 5, 'succeeded', 'after 2 steps', "
        "  'make', '{\"failed\":false}', 0.25);"
        "INSERT INTO runs (id, user_id, session_id, status, task, model, agent, timeout_ms, "
        "  created_at) VALUES ('r2', 'u1', 's1', 'queued', 'more', 'm', 'opencode', 1000, 6);"
        "INSERT INTO run_events VALUES ('r1', 1, 7, 'text', 'hello', '{}');"
        "INSERT INTO run_events VALUES ('r2', 1, 8, 'text', 'again', '{}');"
        "INSERT INTO run_transitions VALUES ('r1', 5, 'queued', 'accepted');";
    CHECK_INT_EQ(sqlite3_exec(db, rows, NULL, NULL, NULL), SQLITE_OK);
    CHECK(sqlite3_exec(db, "UPDATE runs SET phase = 'setting up' WHERE id = 'r2'", NULL, NULL,
                       NULL) != SQLITE_OK);

    CHECK_INT_EQ(store_migrate_db(db, embedded_migrations, &err), store_schema_version_known());
    CHECK_INT_EQ(sql_int(db, "PRAGMA foreign_keys"), 1);
    CHECK_INT_EQ(sql_int(db, "SELECT count(*) FROM runs"), 2);
    CHECK_INT_EQ(sql_int(db, "SELECT n FROM runs WHERE id = 'r2'"), 2);
    CHECK_INT_EQ(sql_int(db, "SELECT count(*) FROM runs WHERE id = 'r1' AND phase = 'succeeded' "
                             "AND phase_detail = 'after 2 steps' AND setup = 'make' AND "
                             "setup_result = '{\"failed\":false}' AND cost = 0.25"),
                 1);
    CHECK_INT_EQ(sql_int(db, "SELECT count(*) FROM sqlite_schema WHERE tbl_name = 'runs' AND "
                             "type = 'index'"),
                 6); /* its four, the UNIQUE id's and the groups' (0025) */
    CHECK_INT_EQ(
        sqlite3_exec(db, "UPDATE runs SET phase = 'setting up' WHERE id = 'r2'", NULL, NULL, NULL),
        SQLITE_OK);
    CHECK(sqlite3_exec(db, "UPDATE runs SET phase = 'napping' WHERE id = 'r2'", NULL, NULL, NULL) !=
          SQLITE_OK);
    /* the events and transitions still hang on their runs */
    CHECK_INT_EQ(sqlite3_exec(db, "DELETE FROM runs WHERE id = 'r1'", NULL, NULL, NULL), SQLITE_OK);
    CHECK_INT_EQ(sql_int(db, "SELECT count(*) FROM run_events"), 1);
    CHECK_INT_EQ(sql_int(db, "SELECT count(*) FROM run_transitions"), 0);
    CHECK(sqlite3_exec(db, "INSERT INTO run_events VALUES ('nope', 1, 7, 'text', 'x', '{}')", NULL,
                       NULL, NULL) != SQLITE_OK);
    sqlite3_close(db);
}

static int repos_seen;
static void count_repo(const struct store_repo_setting *rs, void *ctx)
{
    (void)ctx;
    repos_seen++;
}

/* A user's settings per repository: set, replaced, read, listed, deleted; the script's size and
 * the number of repositories capped with a clear error, another user's own cap apart. */
TEST(repo_settings_and_their_caps)
{
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_user ann, bob;
    CHECK_INT_EQ(store_user_add(st, "ann", &ann, &err), 0);
    CHECK_INT_EQ(store_user_add(st, "bob", &bob, &err), 0);
    struct store_repo_setting rs = {0};
    CHECK_INT_EQ(store_repo_setting_get(st, ann.id, "acme/oak", &rs, &err), -ENOENT);
    CHECK_INT_EQ(store_repo_setting_set(st, ann.id, "acme/oak", "make\n", false, 10, &err), 0);
    CHECK_INT_EQ(store_repo_setting_set(st, ann.id, "acme/oak", NULL, true, 11, &err), 0);
    CHECK_INT_EQ(store_repo_setting_get(st, ann.id, "acme/oak", &rs, &err), 0);
    CHECK(rs.setup == NULL);
    CHECK(rs.stop_on_failure);
    CHECK_INT_EQ(rs.updated_at, 11);
    CHECK(!rs.fix_ci);
    CHECK_STR_EQ(rs.steerers, "");
    store_repo_setting_release(&rs);
    CHECK_INT_EQ(store_repo_setting_get(st, bob.id, "acme/oak", &rs, &err), -ENOENT);
    /* fixing CI and who else steers: kept beside, and kept by a later set */
    CHECK_INT_EQ(store_repo_setting_set_fix_ci(st, ann.id, "acme/oak", true, &err), 0);
    CHECK_INT_EQ(store_repo_setting_set_steerers(st, ann.id, "acme/oak", "erin,Fred-2", &err), 0);
    CHECK_INT_EQ(store_repo_setting_set_steerers(st, ann.id, "acme/oak", "erin;rm -rf", &err),
                 -EINVAL);
    CHECK_INT_EQ(store_repo_setting_set_fix_ci(st, bob.id, "acme/oak", true, &err), -ENOENT);
    CHECK_INT_EQ(store_repo_setting_set(st, ann.id, "acme/oak", NULL, true, 11, &err), 0);
    CHECK_INT_EQ(store_repo_setting_get(st, ann.id, "acme/oak", &rs, &err), 0);
    CHECK(rs.fix_ci);
    CHECK_STR_EQ(rs.steerers, "erin,Fred-2");
    store_repo_setting_release(&rs);
    CHECK(store_logins_valid(""));
    CHECK(store_logins_valid("a,b-c,D9"));
    CHECK(!store_logins_valid("a,,b"));
    CHECK(!store_logins_valid("a,"));
    CHECK(!store_logins_valid("a b"));
    CHECK(!store_logins_valid("0123456789012345678901234567890123456789")); /* 40 */
    char many[200] = "a";
    for (int i = 1; i < STORE_STEERERS_MAX + 1; i++)
        strcat(many, ",a");
    CHECK(!store_logins_valid(many));

    char *big = xmalloc(STORE_REPO_SETUP_MAX + 2);
    memset(big, 'x', STORE_REPO_SETUP_MAX + 1);
    big[STORE_REPO_SETUP_MAX + 1] = '\0';
    CHECK_INT_EQ(store_repo_setting_set(st, ann.id, "acme/oak", big, false, 12, &err), -EFBIG);
    CHECK_STR_CONTAINS(err.msg, "the setup script is over 65536 bytes");
    big[STORE_REPO_SETUP_MAX] = '\0';
    CHECK_INT_EQ(store_repo_setting_set(st, ann.id, "acme/oak", big, false, 12, &err), 0);
    free(big);

    for (int i = 1; i < STORE_REPO_SETTINGS_MAX; i++) {
        char name[32];
        snprintf(name, sizeof(name), "acme/r%d", i);
        CHECK_INT_EQ(store_repo_setting_set(st, ann.id, name, "true", false, 13, &err), 0);
    }
    CHECK_INT_EQ(store_repo_setting_set(st, ann.id, "acme/one-more", "true", false, 14, &err),
                 -ENOSPC);
    CHECK_STR_CONTAINS(err.msg, "at most 200 repositories");
    /* at the cap, one already kept can still change, and another user has a cap of their own */
    CHECK_INT_EQ(store_repo_setting_set(st, ann.id, "acme/r7", "false", true, 15, &err), 0);
    CHECK_INT_EQ(store_repo_setting_set(st, bob.id, "acme/one-more", NULL, false, 15, &err), 0);
    repos_seen = 0;
    CHECK_INT_EQ(store_repo_setting_list(st, ann.id, count_repo, NULL, &err), 0);
    CHECK_INT_EQ(repos_seen, STORE_REPO_SETTINGS_MAX);
    CHECK_INT_EQ(store_repo_setting_delete(st, ann.id, "acme/r7", &err), 0);
    CHECK_INT_EQ(store_repo_setting_delete(st, ann.id, "acme/r7", &err), -ENOENT);
    CHECK_INT_EQ(store_repo_setting_set(st, ann.id, "acme/one-more", "true", false, 16, &err), 0);
    store_close(st);
    free(path);
}

static int envs_seen;
static char envs_first[64];
static void count_env(const struct store_env *e, void *ctx)
{
    (void)ctx;
    if (envs_seen++ == 0)
        snprintf(envs_first, sizeof(envs_first), "%s", e->id);
}

/* Environment snapshots' rows: the newest live one of a key, least recently used first, a
 * dropped one out of finding and then deleted, filters by user and repository. */
TEST(environment_snapshots)
{
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_env e = {.bytes = 10, .files = 2, .created_at = 100, .last_used_at = 100};
    snprintf(e.key, sizeof(e.key), "k1");
    snprintf(e.user_id, sizeof(e.user_id), "usr_a");
    snprintf(e.scope, sizeof(e.scope), "usr_a");
    snprintf(e.repository, sizeof(e.repository), "acme/oak");
    snprintf(e.fingerprint, sizeof(e.fingerprint), "abc package-lock.json\n");
    snprintf(e.id, sizeof(e.id), "env-old");
    CHECK_INT_EQ(store_env_insert(st, &e, &err), 0);
    CHECK_INT_EQ(store_env_insert(st, &e, &err), -EEXIST);
    snprintf(e.id, sizeof(e.id), "env-new");
    e.created_at = 200;
    e.last_used_at = 50;
    CHECK_INT_EQ(store_env_insert(st, &e, &err), 0);
    snprintf(e.id, sizeof(e.id), "env-bob");
    snprintf(e.key, sizeof(e.key), "k2");
    snprintf(e.user_id, sizeof(e.user_id), "usr_b");
    snprintf(e.scope, sizeof(e.scope), "usr_b");
    snprintf(e.repository, sizeof(e.repository), "acme/elm");
    CHECK_INT_EQ(store_env_insert(st, &e, &err), 0);

    struct store_env got;
    CHECK_INT_EQ(store_env_find(st, "k1", &got, &err), 0);
    CHECK_STR_EQ(got.id, "env-new");
    CHECK_STR_EQ(got.fingerprint, "abc package-lock.json\n");
    CHECK_INT_EQ(got.bytes, 10);
    CHECK_INT_EQ(store_env_find(st, "k3", &got, &err), -ENOENT);

    envs_seen = 0;
    CHECK_INT_EQ(store_env_list(st, NULL, count_env, NULL, &err), 0);
    CHECK_INT_EQ(envs_seen, 3);
    CHECK_STR_EQ(envs_first, "env-bob"); /* last used at 50, before env-new's id */
    struct store_env_filter f = {.user_id = "usr_a"};
    envs_seen = 0;
    CHECK_INT_EQ(store_env_list(st, &f, count_env, NULL, &err), 0);
    CHECK_INT_EQ(envs_seen, 2);
    f = (struct store_env_filter){.repository = "acme/elm"};
    envs_seen = 0;
    CHECK_INT_EQ(store_env_list(st, &f, count_env, NULL, &err), 0);
    CHECK_INT_EQ(envs_seen, 1);

    CHECK_INT_EQ(store_env_touch(st, "env-bob", 300, &err), 0);
    envs_seen = 0;
    CHECK_INT_EQ(store_env_list(st, NULL, count_env, NULL, &err), 0);
    CHECK_STR_EQ(envs_first, "env-new");

    /* a live row is not deleted; a dropped one is no longer found, then goes */
    CHECK_INT_EQ(store_env_delete(st, "env-new", &err), 0);
    CHECK_INT_EQ(store_env_find(st, "k1", &got, &err), 0);
    CHECK_STR_EQ(got.id, "env-new");
    CHECK_INT_EQ(store_env_drop(st, "env-new", &err), 0);
    CHECK_INT_EQ(store_env_find(st, "k1", &got, &err), 0);
    CHECK_STR_EQ(got.id, "env-old");
    CHECK_INT_EQ(store_env_delete(st, "env-new", &err), 0);
    envs_seen = 0;
    CHECK_INT_EQ(store_env_list(st, NULL, count_env, NULL, &err), 0);
    CHECK_INT_EQ(envs_seen, 2);
    store_close(st);
    free(path);
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
    char *path = test_temp_db();
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
    if (test_pg_url()) {
        char *q = xasprintf("SELECT count(*) FROM tokens t WHERE t::text LIKE '%%%s%%'", plain);
        int64_t n = -1;
        CHECK_INT_EQ(test_sql_run(path, q, &n), 0);
        CHECK_INT_EQ(n, 0);
        free(q);
    } else {
        FILE *f = fopen(path, "rb");
        char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        CHECK(memmem(buf, n, plain, strlen(plain)) == NULL);
    }
    free(path);
}

static void make_run(struct store *st, const char *user, const char *session, int i, char id[64])
{
    struct err err = {0};
    struct store_run r = {0};
    snprintf(r.id, sizeof(r.id), "run_%s_%d", user, i);
    snprintf(r.user_id, sizeof(r.user_id), "%s", user);
    snprintf(r.session_id, sizeof(r.session_id), "%s", session);
    snprintf(r.model, sizeof(r.model), "anthropic/x");
    snprintf(r.agent, sizeof(r.agent), "opencode");
    r.task = (char *)"do it";
    r.status_reason = (char *)"accepted";
    r.timeout_ms = 60000;
    r.created_at = 1000 + i;
    CHECK_INT_EQ(store_run_insert(st, &r, &err), 0);
    snprintf(id, 64, "%s", r.id);
}

static void count_run(const struct store_run *r, void *ctx)
{
    (*(int *)ctx)++;
}

struct page {
    int count;
    int64_t n[8];
    char id[8][64];
};

static void collect_run(const struct store_run *r, void *ctx)
{
    struct page *p = ctx;
    if (p->count < 8) {
        p->n[p->count] = r->n;
        snprintf(p->id[p->count], sizeof(p->id[0]), "%s", r->id);
        p->count++;
    }
}

static void count_transition(int64_t at, const char *status, const char *reason, void *ctx)
{
    (*(int *)ctx)++;
}

static void last_event(const struct store_run_event_row *e, void *ctx)
{
    *(int64_t *)ctx = e->seq;
}

static void count_active(const char *run_id, void *ctx)
{
    (*(int *)ctx)++;
}

TEST(runs_transitions_events_and_pages)
{
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_user a, b;
    CHECK_INT_EQ(store_user_add(st, "alice", &a, &err), 0);
    CHECK_INT_EQ(store_user_add(st, "bob", &b, &err), 0);
    struct store_session ses = {0};
    snprintf(ses.id, sizeof(ses.id), "ses_a");
    snprintf(ses.user_id, sizeof(ses.user_id), "%s", a.id);
    snprintf(ses.agent, sizeof(ses.agent), "opencode");
    CHECK_INT_EQ(store_session_create(st, &ses, &err), 0);
    struct store_session got;
    CHECK_INT_EQ(store_session_get(st, b.id, "ses_a", &got, &err), -ENOENT);
    CHECK_INT_EQ(store_session_get(st, a.id, "ses_a", &got, &err), 0);

    char ids[5][64];
    for (int i = 0; i < 5; i++)
        make_run(st, a.id, "ses_a", i, ids[i]);
    struct store_run r = {0};
    CHECK_INT_EQ(store_run_get(st, b.id, ids[0], &r, &err), -ENOENT);
    CHECK_INT_EQ(store_run_get(st, a.id, ids[0], &r, &err), 0);
    CHECK_STR_EQ(r.status, "queued");
    store_run_release(&r);

    /* a final status is never left */
    CHECK_INT_EQ(store_run_transition(st, ids[0], "running", "go", 2000, &err), 0);
    CHECK_INT_EQ(store_run_transition(st, ids[0], "succeeded", "done", 3000, &err), 0);
    CHECK_INT_EQ(store_run_transition(st, ids[0], "failed", "late", 4000, &err), -EALREADY);
    CHECK_INT_EQ(store_run_get(st, NULL, ids[0], &r, &err), 0);
    CHECK_STR_EQ(r.status, "succeeded");
    CHECK_INT_EQ(r.started_at, 2000);
    CHECK_INT_EQ(r.finished_at, 3000);
    store_run_release(&r);
    int transitions = 0;
    CHECK_INT_EQ(store_run_transitions(st, ids[0], count_transition, &transitions, &err), 0);
    CHECK_INT_EQ(transitions, 3);
    /* the queued and running runs of a session (the ended one left out), and of none */
    int active = 0;
    CHECK_INT_EQ(store_run_list_active_on(st, NULL, "ses_a", count_active, &active, &err), 0);
    CHECK_INT_EQ(active, 4);
    active = 0;
    CHECK_INT_EQ(store_run_list_active_on(st, NULL, "ses_none", count_active, &active, &err), 0);
    CHECK_INT_EQ(active, 0);

    /* events: numbered in order, the offset moves with them, usage adds up */
    struct store_run_event ev[2] = {
        {.time = 1, .type = "text", .summary = "hi", .raw = "{}", .text = "hello"},
        {.time = 2,
         .type = "step_finish",
         .summary = "",
         .raw = "{}",
         .input_tokens = 10,
         .output_tokens = 3,
         .cost = 0.5},
    };
    CHECK_INT_EQ(store_run_add_events(st, ids[1], ev, 2, 120, &err), 0);
    CHECK_INT_EQ(store_run_add_events(st, ids[1], ev + 1, 1, 180, &err), 0);
    CHECK_INT_EQ(store_run_get(st, NULL, ids[1], &r, &err), 0);
    CHECK_INT_EQ(r.event_count, 3);
    CHECK_INT_EQ(r.events_offset, 180);
    CHECK_INT_EQ(r.input_tokens, 20);
    CHECK_INT_EQ(r.output_tokens, 6);
    CHECK_STR_EQ(r.summary, "hello");
    store_run_release(&r);
    int64_t last = 0;
    CHECK_INT_EQ(store_run_events(st, ids[1], 0, 100, last_event, &last, &err), 0);
    CHECK_INT_EQ(last, 3);
    /* an event of the server's own (a refused push) keeps the offset where ingest left it */
    CHECK_INT_EQ(store_run_add_events(st, ids[1], ev, 1, -1, &err), 0);
    CHECK_INT_EQ(store_run_get(st, NULL, ids[1], &r, &err), 0);
    CHECK_INT_EQ(r.event_count, 4);
    CHECK_INT_EQ(r.events_offset, 180);
    CHECK(r.delivery == NULL);
    store_run_release(&r);

    /* delivery: the session's branch and pull request, the run's outcome of it */
    CHECK_INT_EQ(store_session_set_branch(st, "ses_a", "sandbox-mcp/x-y", "main", &err), 0);
    CHECK_INT_EQ(store_session_set_pull_request(st, "ses_a", 7, "https://h/a/b/pull/7",
                                                "Acme/Widget", "alice", &err),
                 0);
    CHECK_INT_EQ(store_session_get(st, a.id, "ses_a", &got, &err), 0);
    CHECK_STR_EQ(got.work_branch, "sandbox-mcp/x-y");
    CHECK_STR_EQ(got.base_branch, "main");
    CHECK_INT_EQ(got.pr_number, 7);
    CHECK_STR_EQ(got.pr_url, "https://h/a/b/pull/7");
    CHECK_STR_EQ(got.pr_repo, "acme/widget");
    CHECK_STR_EQ(got.pr_author, "alice");
    CHECK_STR_EQ(got.pr_state, "open");
    /* the review loop finds it by repository (any case) and number, and records its end */
    CHECK_INT_EQ(store_session_by_pull_request(st, "ACME/widget", 7, &got, &err), 0);
    CHECK_STR_EQ(got.id, "ses_a");
    CHECK_INT_EQ(store_session_by_pull_request(st, "acme/widget", 8, &got, &err), -ENOENT);
    CHECK_INT_EQ(store_session_set_pull_state(st, "ses_a", "merged", &err), 0);
    CHECK_INT_EQ(store_session_get(st, a.id, "ses_a", &got, &err), 0);
    CHECK_STR_EQ(got.pr_state, "merged");
    /* webhook deliveries: each id once, the newest kept */
    CHECK_INT_EQ(store_github_delivery_add(st, "d1", 1000, 2, &err), 1);
    CHECK_INT_EQ(store_github_delivery_add(st, "d1", 1001, 2, &err), 0);
    CHECK_INT_EQ(store_github_delivery_add(st, "d2", 1002, 2, &err), 1);
    CHECK_INT_EQ(store_github_delivery_add(st, "d3", 1003, 2, &err), 1);
    CHECK_INT_EQ(store_github_deliveries_count(st, &err), 2);
    CHECK_INT_EQ(store_github_delivery_add(st, "d3", 1004, 2, &err), 0);
    CHECK_INT_EQ(store_github_delivery_add(st, "d1", 1005, 2, &err), 1); /* pruned: new again */
    CHECK_INT_EQ(store_run_set_delivery(st, ids[1], "{\"status\":\"delivered\"}", &err), 0);
    CHECK_INT_EQ(store_run_get(st, NULL, ids[1], &r, &err), 0);
    CHECK_STR_EQ(r.delivery, "{\"status\":\"delivered\"}");
    store_run_release(&r);

    /* pages, newest first, each run once */
    struct store_run_list_opts o = {.user_id = a.id, .limit = 2};
    struct page seen = {0};
    int pages = 0;
    bool more = true;
    while (more && pages < 5) {
        CHECK_INT_EQ(store_run_list(st, &o, collect_run, &seen, &more, &err), 0);
        o.before = seen.n[seen.count - 1];
        pages++;
    }
    CHECK_INT_EQ(pages, 3);
    CHECK_INT_EQ(seen.count, 5);
    for (int i = 0; i < 5; i++)
        CHECK_STR_EQ(seen.id[i], ids[4 - i]);
    int count = 0;
    o = (struct store_run_list_opts){.user_id = b.id, .limit = 10};
    CHECK_INT_EQ(store_run_list(st, &o, count_run, &count, &more, &err), 0);
    CHECK_INT_EQ(count, 0);
    o = (struct store_run_list_opts){.user_id = a.id, .status = "succeeded", .limit = 10};
    CHECK_INT_EQ(store_run_list(st, &o, count_run, &count, &more, &err), 0);
    CHECK_INT_EQ(count, 1);
    /* created before a time: runs i are created at 1000 + i */
    o = (struct store_run_list_opts){.user_id = a.id, .created_before = 1003, .limit = 2};
    memset(&seen, 0, sizeof(seen));
    CHECK_INT_EQ(store_run_list(st, &o, collect_run, &seen, &more, &err), 0);
    CHECK_INT_EQ(seen.count, 2);
    CHECK_STR_EQ(seen.id[0], ids[2]);
    CHECK_STR_EQ(seen.id[1], ids[1]);
    CHECK(more);

    /* the diff is kept apart: absent until set, then read back whole */
    char *diff = (char *)"x";
    CHECK_INT_EQ(store_run_get_diff(st, ids[2], &diff, &err), 0);
    CHECK(diff == NULL);
    CHECK_INT_EQ(store_run_set_diff(st, ids[2], "{\"files\":[]}", &err), 0);
    CHECK_INT_EQ(store_run_get_diff(st, ids[2], &diff, &err), 0);
    CHECK_STR_EQ(diff, "{\"files\":[]}");
    free(diff);
    CHECK_INT_EQ(store_run_get_diff(st, "run_none", &diff, &err), -ENOENT);
    CHECK(diff == NULL);

    /* run tokens are revoked together */
    struct store_proxy_token t = {0};
    snprintf(t.jti, sizeof(t.jti), "jti_1");
    snprintf(t.user_id, sizeof(t.user_id), "%s", a.id);
    snprintf(t.run_id, sizeof(t.run_id), "%s", ids[1]);
    snprintf(t.services, sizeof(t.services), "anthropic");
    CHECK_INT_EQ(store_proxy_token_add(st, &t, &err), 0);
    CHECK_INT_EQ(store_proxy_token_revoke_run(st, ids[1], &err), 1);
    CHECK_INT_EQ(store_proxy_token_check(st, "jti_1", &err), -EKEYREVOKED);
    store_close(st);
    free(path);
}

static void collect_seq(const struct store_run_event_row *e, void *ctx)
{
    struct page *p = ctx;
    if (p->count < 8)
        p->n[p->count++] = e->seq;
}

TEST(runs_phase_and_latest_events)
{
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_user u;
    CHECK_INT_EQ(store_user_add(st, "alice", &u, &err), 0);
    struct store_session ses = {0};
    snprintf(ses.id, sizeof(ses.id), "ses_p");
    snprintf(ses.user_id, sizeof(ses.user_id), "%s", u.id);
    snprintf(ses.agent, sizeof(ses.agent), "opencode");
    CHECK_INT_EQ(store_session_create(st, &ses, &err), 0);
    char id[64];
    make_run(st, u.id, "ses_p", 0, id);

    /* a new run is queued, since it was made */
    struct store_run r = {0};
    CHECK_INT_EQ(store_run_get(st, NULL, id, &r, &err), 0);
    CHECK_STR_EQ(r.phase, "queued");
    CHECK_INT_EQ(r.phase_at, 1000);
    CHECK_INT_EQ(r.phase_step, 0);
    CHECK(r.phase_detail == NULL);
    store_run_release(&r);
    CHECK_INT_EQ(store_run_set_phase(st, id, "agent", 3, "ran `make`", 4000, &err), 0);
    CHECK_INT_EQ(store_run_get(st, NULL, id, &r, &err), 0);
    CHECK_STR_EQ(r.phase, "agent");
    CHECK_INT_EQ(r.phase_step, 3);
    CHECK_STR_EQ(r.phase_detail, "ran `make`");
    CHECK_INT_EQ(r.phase_at, 4000);
    store_run_release(&r);
    /* no detail is NULL; a phase that is not one is refused */
    CHECK_INT_EQ(store_run_set_phase(st, id, "failed", 3, "", 5000, &err), 0);
    CHECK_INT_EQ(store_run_get(st, NULL, id, &r, &err), 0);
    CHECK(r.phase_detail == NULL);
    store_run_release(&r);
    CHECK(store_run_set_phase(st, id, "bogus", 3, "x", 5000, &err) < 0);

    /* events backwards: newest first, below a bound */
    struct store_run_event ev[] = {
        {.time = 1, .type = "step_start", .summary = "step start", .raw = "{}"},
        {.time = 2, .type = "tool_use", .summary = "write a.txt", .raw = "{}"},
        {.time = 3, .type = "step_finish", .summary = "step finish", .raw = "{}"},
        {.time = 4, .type = "step_start", .summary = "step start", .raw = "{}"},
        {.time = 5, .type = "tool_use", .summary = "bash: Commit", .raw = "{}"},
        {.time = 6, .type = "reasoning", .summary = "hmm", .raw = "{}"},
        {.time = 7, .type = "text", .summary = "Done.", .raw = "{}"},
        {.time = 8, .type = "step_finish", .summary = "step finish", .raw = "{}"},
    };
    CHECK_INT_EQ(store_run_add_events(st, id, ev, ARRAY_SIZE(ev), 100, &err), 0);
    struct page seen = {0};
    CHECK_INT_EQ(store_run_events_back(st, id, 0, 3, collect_seq, &seen, &err), 0);
    CHECK_INT_EQ(seen.count, 3);
    CHECK(seen.n[0] == 8 && seen.n[1] == 7 && seen.n[2] == 6);
    memset(&seen, 0, sizeof(seen));
    CHECK_INT_EQ(store_run_events_back(st, id, 3, 10, collect_seq, &seen, &err), 0);
    CHECK(seen.count == 2 && seen.n[0] == 2 && seen.n[1] == 1);

    /* the latest that tell of the work, oldest first */
    json_t *recent = runs_recent_events(st, id, 2);
    CHECK_INT_EQ(json_array_size(recent), 2);
    CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(recent, 0), "summary")),
                 "bash: Commit");
    CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(recent, 0), "seq")), 5);
    CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(recent, 0), "time")),
                 "1970-01-01T00:00:00.005Z");
    CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(recent, 1), "type")), "text");
    json_decref(recent);
    recent = runs_recent_events(st, id, 5);
    CHECK_INT_EQ(json_array_size(recent), 3);
    CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(recent, 0), "summary")),
                 "write a.txt");
    json_decref(recent);
    recent = runs_recent_events(st, "run_none", 5);
    CHECK_INT_EQ(json_array_size(recent), 0);
    json_decref(recent);
    store_close(st);
    free(path);
}

TEST(sandbox_id_ranges_lowest_free_and_reused)
{
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_user u;
    CHECK_INT_EQ(store_user_add(st, "alice", &u, &err), 0);
    const char *ids[] = {"sbx_a", "sbx_b", "sbx_c", "sbx_d"};
    for (int i = 0; i < 4; i++) {
        struct store_sandbox sb = {0};
        snprintf(sb.id, sizeof(sb.id), "%s", ids[i]);
        snprintf(sb.user_id, sizeof(sb.user_id), "%s", u.id);
        snprintf(sb.session_id, sizeof(sb.session_id), "ses_%d", i);
        snprintf(sb.template_name, sizeof(sb.template_name), "host");
        CHECK_INT_EQ(store_sandbox_insert(st, &sb, &err), 0);
    }
    uint32_t slot = 0;
    CHECK_INT_EQ(store_sandbox_claim_slot(st, "sbx_a", 3, &slot, &err), 0);
    CHECK_INT_EQ(slot, 1);
    CHECK_INT_EQ(store_sandbox_claim_slot(st, "sbx_b", 3, &slot, &err), 0);
    CHECK_INT_EQ(slot, 2);
    CHECK_INT_EQ(store_sandbox_claim_slot(st, "sbx_c", 3, &slot, &err), 0);
    CHECK_INT_EQ(slot, 3);
    /* a second claim for a sandbox that holds one is refused, not a second range */
    CHECK_INT_EQ(store_sandbox_claim_slot(st, "sbx_a", 3, &slot, &err), -ENOENT);
    /* every range held: a clear error, and the sandbox stays without one */
    CHECK_INT_EQ(store_sandbox_claim_slot(st, "sbx_d", 3, &slot, &err), -ENOSPC);
    CHECK_STR_CONTAINS(err.msg, "SANDBOX_UID_RANGES");
    struct store_sandbox found;
    CHECK_INT_EQ(store_sandbox_find(st, u.id, "ses_3", &found, &err), 0);
    CHECK_INT_EQ(found.id_slot, 0);
    /* a released range is the next one given */
    CHECK_INT_EQ(store_sandbox_release_slot(st, "sbx_b", &err), 0);
    CHECK_INT_EQ(store_sandbox_claim_slot(st, "sbx_d", 3, &slot, &err), 0);
    CHECK_INT_EQ(slot, 2);
    CHECK_INT_EQ(store_sandbox_find(st, u.id, "ses_3", &found, &err), 0);
    CHECK_INT_EQ(found.id_slot, 2);
    CHECK_INT_EQ(store_sandbox_release_slot(st, "sbx_a", &err), 0);
    CHECK_INT_EQ(store_sandbox_claim_slot(st, "sbx_b", 3, &slot, &err), 0);
    CHECK_INT_EQ(slot, 1);
    store_close(st);
    free(path);
}

struct egress_seen {
    int rows;
    int64_t attempts, up, down;
    char star[16];
    int64_t star_attempts;
};

static void see_egress(const struct store_egress_row *row, void *ctx)
{
    struct egress_seen *s = ctx;
    s->rows++;
    s->attempts += row->attempts;
    s->up += row->bytes_up;
    s->down += row->bytes_down;
    if (strcmp(row->host, "*") == 0) {
        snprintf(s->star, sizeof(s->star), "%s", row->host);
        s->star_attempts = row->attempts;
    }
}

TEST(egress_counts_grow_per_destination_and_stay_bounded)
{
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_user a;
    CHECK_INT_EQ(store_user_add(st, "alice", &a, &err), 0);
    char mine[STORE_NETWORK_MAX];
    CHECK_INT_EQ(store_user_network_get(st, a.id, mine, &err), 0);
    CHECK_STR_EQ(mine, "");
    CHECK_INT_EQ(store_user_network_set(st, "alice", "none", &err), 0);
    CHECK_INT_EQ(store_user_network_get(st, a.id, mine, &err), 0);
    CHECK_STR_EQ(mine, "none");
    CHECK(store_user_network_set(st, "alice", "everything", &err) < 0);
    CHECK_INT_EQ(store_user_network_set(st, "nobody", "none", &err), -ENOENT);
    CHECK_INT_EQ(store_user_network_set(st, "alice", NULL, &err), 0);
    CHECK_INT_EQ(store_user_network_get(st, a.id, mine, &err), 0);
    CHECK_STR_EQ(mine, "");

    /* the same destination and outcome adds to one row; another outcome is a row of its own */
    struct store_egress_row e = {.user_id = a.id,
                                 .sandbox_id = "sbx_1",
                                 .run_id = "run_1",
                                 .host = "pypi.org",
                                 .port = 443,
                                 .verdict = "allowed",
                                 .reason = "ok",
                                 .why = "",
                                 .addr = "192.0.2.1",
                                 .attempts = 2,
                                 .bytes_up = 10,
                                 .bytes_down = 100,
                                 .first_at = 1,
                                 .last_at = 2};
    struct store_egress_row more[2] = {e, e};
    more[1].verdict = "denied";
    more[1].reason = "port";
    more[1].bytes_up = more[1].bytes_down = 0;
    CHECK_INT_EQ(store_egress_add(st, &e, 1, &err), 0);
    CHECK_INT_EQ(store_egress_add(st, more, 2, &err), 0);
    struct egress_seen seen = {0};
    CHECK_INT_EQ(store_egress_list(st, "run_1", see_egress, &seen, &err), 0);
    CHECK_INT_EQ(seen.rows, 2);
    CHECK_INT_EQ(seen.attempts, 6);
    CHECK_INT_EQ(seen.down, 200);

    /* a run trying thousands of names keeps a bounded number of rows, counting every attempt */
    char host[64];
    for (int i = 0; i < 3 * STORE_EGRESS_ROWS_MAX; i++) {
        snprintf(host, sizeof(host), "h%d.example", i);
        struct store_egress_row x = e;
        x.run_id = "run_2";
        x.host = host;
        x.attempts = 1;
        CHECK_INT_EQ(store_egress_add(st, &x, 1, &err), 0);
    }
    memset(&seen, 0, sizeof(seen));
    CHECK_INT_EQ(store_egress_list(st, "run_2", see_egress, &seen, &err), 0);
    CHECK_INT_EQ(seen.rows, STORE_EGRESS_ROWS_MAX);
    CHECK_INT_EQ(seen.attempts, 3 * STORE_EGRESS_ROWS_MAX);
    CHECK_STR_EQ(seen.star, "*");
    CHECK_INT_EQ(seen.star_attempts, 2 * STORE_EGRESS_ROWS_MAX + 1);

    /* rows outside runs are pruned by age; a run's stay with the run */
    struct store_egress_row old = e;
    old.run_id = "";
    CHECK_INT_EQ(store_egress_add(st, &old, 1, &err), 0);
    CHECK_INT_EQ(store_egress_prune(st, 100, &err), 0);
    memset(&seen, 0, sizeof(seen));
    CHECK_INT_EQ(store_egress_list(st, "run_1", see_egress, &seen, &err), 0);
    CHECK_INT_EQ(seen.rows, 2);
    memset(&seen, 0, sizeof(seen));
    CHECK_INT_EQ(store_egress_list(st, "", see_egress, &seen, &err), 0);
    CHECK_INT_EQ(seen.rows, 0);
    store_close(st);
    free(path);
}

static int lost_seen;
static char lost_id[64];
static void on_lost(const struct store_node *n, void *ctx)
{
    (void)ctx;
    lost_seen++;
    snprintf(lost_id, sizeof(lost_id), "%s", n->id);
}

/* Two handles on one store, as nodes "node-a" and "node-b" (two servers would have two). */
static bool open_two_nodes(const char *path, struct store **a, struct store **b)
{
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, a, &err), 0);
    CHECK_INT_EQ(store_open(path, b, &err), 0);
    if (!*a || !*b)
        return false;
    store_set_node(*a, "node-a");
    store_set_node(*b, "node-b");
    return true;
}

/* Two nodes on one store (two handles, as two servers would have): each sees its own sandboxes,
 * host id ranges are per node, a silent node is marked lost once, and its sandboxes move only
 * when taken over, after which its writes no longer touch them. */
TEST(nodes_own_their_sandboxes_beat_and_are_marked_lost_once)
{
    char *path = test_temp_db();
    struct store *a = NULL, *b = NULL;
    struct err err = {0};
    if (!open_two_nodes(path, &a, &b))
        return;
    struct store_node na = {.max_sandboxes = 8, .max_runs = 2, .started_at = 1000};
    snprintf(na.id, sizeof(na.id), "node-a");
    snprintf(na.url, sizeof(na.url), "http://127.0.0.1:18001");
    struct store_node nb = na;
    snprintf(nb.id, sizeof(nb.id), "node-b");
    snprintf(nb.url, sizeof(nb.url), "http://127.0.0.1:18002");
    CHECK_INT_EQ(store_node_register(a, &na, &err), 0);
    CHECK_INT_EQ(store_node_register(b, &nb, &err), 0);
    struct store_user u;
    CHECK_INT_EQ(store_user_add(a, "alice", &u, &err), 0);
    struct store_sandbox sb = {0};
    snprintf(sb.user_id, sizeof(sb.user_id), "%s", u.id);
    snprintf(sb.template_name, sizeof(sb.template_name), "host");
    snprintf(sb.id, sizeof(sb.id), "sbx_on_a");
    CHECK_INT_EQ(store_sandbox_insert(a, &sb, &err), 0);
    snprintf(sb.id, sizeof(sb.id), "sbx_on_b");
    snprintf(sb.session_id, sizeof(sb.session_id), "ses_1");
    CHECK_INT_EQ(store_sandbox_insert(b, &sb, &err), 0);
    /* a range per node: both get slot 1 */
    uint32_t slot = 0;
    CHECK_INT_EQ(store_sandbox_claim_slot(a, "sbx_on_a", 4, &slot, &err), 0);
    CHECK_INT_EQ(slot, 1);
    CHECK_INT_EQ(store_sandbox_claim_slot(b, "sbx_on_b", 4, &slot, &err), 0);
    CHECK_INT_EQ(slot, 1);
    struct store_sandbox found;
    CHECK_INT_EQ(store_sandbox_find(b, u.id, NULL, &found, &err), 0);
    CHECK_STR_EQ(found.node_id, "node-a");
    /* b beats; a falls silent; of two sweeps the first marks a lost, the second finds nothing */
    CHECK_INT_EQ(store_node_heartbeat(b, 50000, &err), 0);
    lost_seen = 0;
    CHECK_INT_EQ(store_node_sweep(b, 20000, on_lost, NULL, &err), 1);
    CHECK_INT_EQ(lost_seen, 1);
    CHECK_STR_EQ(lost_id, "node-a");
    CHECK_INT_EQ(store_node_sweep(b, 20000, on_lost, NULL, &err), 0);
    CHECK_INT_EQ(lost_seen, 1);
    struct store_node got;
    CHECK_INT_EQ(store_node_get(b, "node-a", &got, &err), 0);
    CHECK_STR_EQ(got.state, "lost");
    /* b takes a's sandbox over: it is b's now, stopped and without a range; a's writes to it
     * change nothing, and a second take-over from a is stale */
    CHECK_INT_EQ(store_sandbox_take_over(b, "sbx_on_a", "node-a", &err), 0);
    CHECK_INT_EQ(store_sandbox_take_over(b, "sbx_on_a", "node-a", &err), -ESTALE);
    CHECK_INT_EQ(store_sandbox_find(a, u.id, NULL, &found, &err), 0);
    CHECK_STR_EQ(found.node_id, "node-b");
    CHECK_INT_EQ(found.id_slot, 0);
    CHECK_INT_EQ(store_sandbox_delete(a, "sbx_on_a", &err), 0);
    CHECK_INT_EQ(store_sandbox_find(b, u.id, NULL, &found, &err), 0);
    /* a comes back: its heartbeat says it had been marked lost, once */
    CHECK_INT_EQ(store_node_heartbeat(a, 60000, &err), 1);
    CHECK_INT_EQ(store_node_heartbeat(a, 61000, &err), 0);
    CHECK_INT_EQ(store_node_stop(a, &err), 0);
    CHECK_INT_EQ(store_node_get(b, "node-a", &got, &err), 0);
    CHECK_STR_EQ(got.state, "stopped");
    store_close(a);
    store_close(b);
    free(path);
}

static void new_session(struct store *st, const char *id, const char *user, const char *node)
{
    struct err err = {0};
    struct store_session ses = {.created_at = 1000, .last_run_at = 1000};
    snprintf(ses.id, sizeof(ses.id), "%s", id);
    snprintf(ses.user_id, sizeof(ses.user_id), "%s", user);
    snprintf(ses.agent, sizeof(ses.agent), "opencode");
    snprintf(ses.node_id, sizeof(ses.node_id), "%s", node);
    CHECK_INT_EQ(store_session_create(st, &ses, &err), 0);
}

struct queued {
    int count;
    char id[4][64];
};

static void on_queued(const struct store_run *r, void *ctx)
{
    struct queued *q = ctx;
    if (q->count < 4)
        snprintf(q->id[q->count], sizeof(q->id[0]), "%s", r->id);
    q->count++;
}

/* Runs that wait in a shared store for a node: an unclaimed session is claimed by one node, the
 * one with the oldest waiting run first, never by two; only its node lists its queued runs; a
 * start counts the user's runs running on every node; a run ends in the store from queued only
 * while it is queued. */
TEST(waiting_sessions_are_claimed_once_and_run_limits_count_every_node)
{
    char *path = test_temp_db();
    struct store *a = NULL, *b = NULL;
    struct err err = {0};
    if (!open_two_nodes(path, &a, &b))
        return;
    struct store_user alice, bob;
    CHECK_INT_EQ(store_user_add(a, "alice", &alice, &err), 0);
    CHECK_INT_EQ(store_user_add(a, "bob", &bob, &err), 0);
    new_session(a, "ses_1", alice.id, STORE_SESSION_UNCLAIMED);
    new_session(b, "ses_2", bob.id, STORE_SESSION_UNCLAIMED);
    new_session(a, "ses_3", alice.id, STORE_SESSION_UNCLAIMED);
    new_session(a, "ses_4", bob.id, "");
    char r1[64], r2[64], r3[64], r4[64];
    make_run(a, alice.id, "ses_1", 1, r1);
    make_run(b, bob.id, "ses_2", 2, r2);
    make_run(a, alice.id, "ses_3", 3, r3);
    make_run(a, bob.id, "ses_4", 4, r4);
    struct store_session got;
    CHECK_INT_EQ(store_session_get(a, NULL, "ses_4", &got, &err), 0);
    CHECK_STR_EQ(got.node_id, "node-a");

    /* oldest first, one node each; nothing of b's in a's queue, nor the other way */
    char sid[64];
    CHECK_INT_EQ(store_session_claim(a, 1, 0, sid, &err), 1);
    CHECK_STR_EQ(sid, "ses_1");
    CHECK_INT_EQ(store_session_claim(b, 1, 0, sid, &err), 1);
    CHECK_STR_EQ(sid, "ses_2");
    struct queued qa = {0}, qb = {0};
    CHECK_INT_EQ(store_run_list_queued(a, on_queued, &qa, &err), 0);
    CHECK_INT_EQ(store_run_list_queued(b, on_queued, &qb, &err), 0);
    CHECK_INT_EQ(qa.count, 2);
    CHECK_STR_EQ(qa.id[0], r1);
    CHECK_STR_EQ(qa.id[1], r4);
    CHECK_INT_EQ(qb.count, 1);
    CHECK_STR_EQ(qb.id[0], r2);

    /* alice runs on a: with a limit of one, b neither claims nor starts another of hers */
    CHECK_INT_EQ(store_run_start(a, r1, alice.id, 1, "go", 2000, &err), 0);
    CHECK_INT_EQ(store_session_claim(b, 1, 0, sid, &err), 0);
    CHECK_INT_EQ(store_session_claim(b, 2, 0, sid, &err), 1);
    CHECK_STR_EQ(sid, "ses_3");
    CHECK_INT_EQ(store_session_claim(a, 2, 0, sid, &err), 0);
    CHECK_INT_EQ(store_run_start(b, r3, alice.id, 1, "go", 2001, &err), -EBUSY);
    int64_t running = -1, queued = -1;
    CHECK_INT_EQ(store_user_runs(b, alice.id, &running, &queued, &err), 0);
    CHECK_INT_EQ(running, 1);
    CHECK_INT_EQ(queued, 1);

    /* cancelled while it waits: ended once, and then it cannot start */
    CHECK_INT_EQ(store_run_end_queued(a, r3, "cancelled", "cancelled by the user", 2002, &err), 0);
    CHECK_INT_EQ(store_run_end_queued(a, r3, "cancelled", "again", 2003, &err), -EALREADY);
    CHECK_INT_EQ(store_run_start(b, r3, alice.id, 2, "go", 2004, &err), -EALREADY);
    /* a running run is not ended as queued */
    CHECK_INT_EQ(store_run_end_queued(b, r1, "cancelled", "late", 2005, &err), -EALREADY);
    struct store_run row = {0};
    CHECK_INT_EQ(store_run_get(a, NULL, r1, &row, &err), 0);
    CHECK_STR_EQ(row.status, "running");
    store_run_release(&row);
    CHECK_INT_EQ(store_user_runs(b, alice.id, &running, &queued, &err), 0);
    CHECK_INT_EQ(running, 1);
    CHECK_INT_EQ(queued, 0);
    store_close(a);
    store_close(b);
    free(path);
}

/* A group's attempts start from the commit the first to ask records; the others are told it */
TEST(a_groups_start_and_pick_are_the_first_ones)
{
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    char got[64] = "";
    static const char first[] = "1111111111111111111111111111111111111111";
    static const char later[] = "2222222222222222222222222222222222222222";
    CHECK_INT_EQ(store_group_base(st, "grp_a", first, got, &err), 0);
    CHECK_STR_EQ(got, first);
    CHECK_INT_EQ(store_group_base(st, "grp_a", later, got, &err), 0);
    CHECK_STR_EQ(got, first);
    CHECK_INT_EQ(store_group_base(st, "grp_b", later, got, &err), 0);
    CHECK_STR_EQ(got, later);
    /* one pick, by compare-and-set: a second one expecting none finds the first's */
    CHECK_INT_EQ(store_group_pick(st, "grp_a", "", "run_x", got, &err), 1);
    CHECK_STR_EQ(got, "run_x");
    CHECK_INT_EQ(store_group_pick(st, "grp_a", "", "run_y", got, &err), 0);
    CHECK_STR_EQ(got, "run_x");
    /* over a pick whose delivery failed, when that is the one expected */
    CHECK_INT_EQ(store_group_pick(st, "grp_a", "run_x", "run_y", got, &err), 1);
    CHECK_STR_EQ(got, "run_y");
    CHECK_INT_EQ(store_group_pick(st, "grp_nope", "", "run_y", got, &err), -ENOENT);
    store_close(st);
    free(path);
}

TEST_MAIN()

/* The store's passwords, one-time sign-in links and browser sessions. Times are moved by
 * editing rows through a second connection, so nothing sleeps. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "harness.h"
#include "store/store.h"

struct fixture {
    char *path;
    struct store *st;
    struct store_user alice, bob;
};

static void setup(struct fixture *f)
{
    f->path = test_temp_db();
    struct err err = {0};
    CHECK_INT_EQ(store_open(f->path, &f->st, &err), 0);
    CHECK_INT_EQ(store_user_add(f->st, "alice", &f->alice, &err), 0);
    CHECK_INT_EQ(store_user_add(f->st, "bob", &f->bob, &err), 0);
}

static void teardown(struct fixture *f)
{
    store_close(f->st);
    free(f->path);
}

/* Through a second connection, to look at and age rows. */
static void sql(struct fixture *f, const char *q)
{
    if (test_sql_run(f->path, q, NULL) < 0)
        CHECK_FAIL_("%s failed", q);
}

static int64_t sql_int(struct fixture *f, const char *q)
{
    int64_t v;
    if (test_sql_run(f->path, q, &v) < 0)
        CHECK_FAIL_("%s failed", q);
    return v;
}

/* Every byte of the database and its WAL; on PostgreSQL, all the test's schema holds, dumped. */
static bool db_contains(struct fixture *f, const char *needle)
{
    bool found = false;
    static char buf[4 << 20];
    if (test_pg_url()) {
        const char *schema = strstr(f->path, "search_path%3D");
        char *cmd = xasprintf("pg_dump --data-only --schema=%s '%s'", schema + 14, test_pg_url());
        FILE *dump = popen(cmd, "r");
        free(cmd);
        size_t n = dump ? fread(buf, 1, sizeof(buf), dump) : 0;
        CHECK(dump && pclose(dump) == 0 && n > 0);
        return memmem(buf, n, needle, strlen(needle)) != NULL;
    }
    for (int i = 0; i < 2 && !found; i++) {
        char *p = xasprintf("%s%s", f->path, i ? "-wal" : "");
        FILE *file = fopen(p, "rb");
        free(p);
        if (!file)
            continue;
        size_t n = fread(buf, 1, sizeof(buf), file);
        fclose(file);
        found = memmem(buf, n, needle, strlen(needle)) != NULL;
    }
    return found;
}

TEST(password_set_read_and_clear)
{
    struct fixture f;
    setup(&f);
    struct err err = {0};
    struct store_user u;
    char hash[128];
    CHECK_INT_EQ(store_user_password(f.st, "alice", &u, hash, sizeof(hash), &err), 0);
    CHECK_STR_EQ(hash, "");
    CHECK_STR_EQ(u.name, "alice");
    CHECK_STR_EQ(u.id, f.alice.id);
    const char *h = "$argon2id$v=19$m=65536,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNo";
    CHECK_INT_EQ(store_user_set_password(f.st, "alice", h, &err), 0);
    CHECK_INT_EQ(store_user_password(f.st, "alice", &u, hash, sizeof(hash), &err), 0);
    CHECK_STR_EQ(hash, h);
    /* bob is untouched */
    CHECK_INT_EQ(store_user_password(f.st, "bob", &u, hash, sizeof(hash), &err), 0);
    CHECK_STR_EQ(hash, "");
    CHECK_STR_EQ(u.name, "bob");
    /* too small a buffer is an error, not a cut hash */
    char small[16];
    CHECK_INT_EQ(store_user_password(f.st, "alice", &u, small, sizeof(small), &err), -EOVERFLOW);
    CHECK_INT_EQ(store_user_set_password(f.st, "alice", "", &err), 0);
    CHECK_INT_EQ(store_user_password(f.st, "alice", &u, hash, sizeof(hash), &err), 0);
    CHECK_STR_EQ(hash, "");
    CHECK_INT_EQ(sql_int(&f, "SELECT count(*) FROM users WHERE password_set_at IS NOT NULL"), 0);
    CHECK_INT_EQ(store_user_set_password(f.st, "nobody", h, &err), -ENOENT);
    CHECK_STR_EQ(err.msg, "no user named 'nobody'");
    CHECK_INT_EQ(store_user_password(f.st, "nobody", &u, hash, sizeof(hash), &err), -ENOENT);
    teardown(&f);
}

/* A rehash replaces the hash it was made from, keeps the password's time, and loses to a password
 * set meanwhile. */
TEST(a_rehash_replaces_only_the_hash_it_came_from)
{
    struct fixture f;
    setup(&f);
    struct err err = {0};
    struct store_user u;
    char hash[128];
    const char *old = "$argon2id$v=19$m=65536,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNo";
    const char *anew = "$argon2id$v=19$m=19456,t=2,p=1$bmV3c2FsdG5ld3M$bmV3aGFzaG5ld2g";
    const char *other = "$argon2id$v=19$m=65536,t=2,p=1$b3RoZXJzYWx0eHg$b3RoZXJoYXNoeHg";
    CHECK_INT_EQ(store_user_set_password(f.st, "alice", old, &err), 0);
    int64_t set_at = sql_int(&f, "SELECT password_set_at FROM users WHERE name = 'alice'");
    CHECK(set_at > 0);
    bool replaced = false;
    CHECK_INT_EQ(store_user_rehash_password(f.st, "alice", old, anew, &replaced, &err), 0);
    CHECK(replaced);
    CHECK_INT_EQ(store_user_password(f.st, "alice", &u, hash, sizeof(hash), &err), 0);
    CHECK_STR_EQ(hash, anew);
    CHECK(sql_int(&f, "SELECT password_set_at FROM users WHERE name = 'alice'") == set_at);
    /* set again meanwhile: the rehash of the earlier hash changes nothing */
    CHECK_INT_EQ(store_user_set_password(f.st, "alice", other, &err), 0);
    CHECK_INT_EQ(store_user_rehash_password(f.st, "alice", anew, old, &replaced, &err), 0);
    CHECK(!replaced);
    CHECK_INT_EQ(store_user_password(f.st, "alice", &u, hash, sizeof(hash), &err), 0);
    CHECK_STR_EQ(hash, other);
    CHECK_INT_EQ(store_user_rehash_password(f.st, "bob", "", anew, &replaced, &err), 0);
    CHECK(!replaced);
    CHECK_INT_EQ(store_user_rehash_password(f.st, "nobody", old, anew, &replaced, &err), 0);
    CHECK(!replaced);
    teardown(&f);
}

TEST(login_link_is_single_use)
{
    struct fixture f;
    setup(&f);
    struct err err = {0};
    struct store_user u;
    char a[STORE_LINK_LEN + 1], b[STORE_LINK_LEN + 1];
    CHECK_INT_EQ(store_login_link_create(f.st, "alice", 900, a, &err), 0);
    CHECK_INT_EQ(strlen(a), STORE_LINK_LEN);
    CHECK_INT_EQ(strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
                 STORE_LINK_LEN);
    /* a second link for the same user does not spend the first */
    CHECK_INT_EQ(store_login_link_create(f.st, "alice", 900, b, &err), 0);
    CHECK(strcmp(a, b) != 0);
    CHECK_INT_EQ(store_login_link_consume(f.st, a, strlen(a), &u, &err), 0);
    CHECK_STR_EQ(u.name, "alice");
    CHECK_STR_EQ(u.id, f.alice.id);
    CHECK_INT_EQ(store_login_link_consume(f.st, a, strlen(a), &u, &err), -ENOENT);
    CHECK_STR_EQ(err.msg, "unknown, used or expired sign-in link");
    CHECK_INT_EQ(store_login_link_consume(f.st, b, strlen(b), &u, &err), 0);
    CHECK_INT_EQ(store_login_link_consume(f.st, b, strlen(b), &u, &err), -ENOENT);
    teardown(&f);
}

TEST(login_link_wrong_expired_or_unknown_user)
{
    struct fixture f;
    setup(&f);
    struct err err = {0};
    struct store_user u;
    char a[STORE_LINK_LEN + 1];
    CHECK_INT_EQ(store_login_link_create(f.st, "nobody", 900, a, &err), -ENOENT);
    CHECK_INT_EQ(store_login_link_create(f.st, "alice", 0, a, &err), -EINVAL);
    CHECK_INT_EQ(store_login_link_create(f.st, "alice", STORE_LINK_TTL_MAX_S + 1, a, &err),
                 -EINVAL);
    CHECK_INT_EQ(store_login_link_create(f.st, "alice", 900, a, &err), 0);
    /* only the hash is stored */
    CHECK(!db_contains(&f, a));
    CHECK_INT_EQ(sql_int(&f, "SELECT count(*) FROM login_links WHERE length(hash) = 64"), 1);
    /* one character off, a prefix, a longer string, an empty one */
    char wrong[STORE_LINK_LEN + 1];
    memcpy(wrong, a, sizeof(wrong));
    wrong[20] = wrong[20] == 'A' ? 'B' : 'A';
    CHECK_INT_EQ(store_login_link_consume(f.st, wrong, strlen(wrong), &u, &err), -ENOENT);
    CHECK_INT_EQ(store_login_link_consume(f.st, a, STORE_LINK_LEN - 1, &u, &err), -ENOENT);
    char longer[4096];
    memset(longer, 'x', sizeof(longer));
    memcpy(longer, a, STORE_LINK_LEN);
    CHECK_INT_EQ(store_login_link_consume(f.st, longer, sizeof(longer), &u, &err), -ENOENT);
    CHECK_INT_EQ(store_login_link_consume(f.st, "", 0, &u, &err), -ENOENT);
    /* none of that spent it */
    sql(&f, "UPDATE login_links SET expires_at = 1");
    CHECK_INT_EQ(store_login_link_consume(f.st, a, strlen(a), &u, &err), -ENOENT);
    teardown(&f);
}

TEST(login_links_used_and_expired_are_pruned)
{
    struct fixture f;
    setup(&f);
    struct err err = {0};
    struct store_user u;
    char a[STORE_LINK_LEN + 1], b[STORE_LINK_LEN + 1], c[STORE_LINK_LEN + 1];
    CHECK_INT_EQ(store_login_link_create(f.st, "alice", 900, a, &err), 0);
    CHECK_INT_EQ(store_login_link_create(f.st, "bob", 900, b, &err), 0);
    CHECK_INT_EQ(store_login_link_consume(f.st, a, strlen(a), &u, &err), 0);
    sql(&f, "UPDATE login_links SET expires_at = 1 WHERE used_at IS NULL");
    CHECK_INT_EQ(sql_int(&f, "SELECT count(*) FROM login_links"), 2);
    CHECK_INT_EQ(store_login_link_create(f.st, "alice", 60, c, &err), 0);
    CHECK_INT_EQ(sql_int(&f, "SELECT count(*) FROM login_links"), 1);
    CHECK_INT_EQ(
        sql_int(&f, "SELECT (expires_at - created_at) FROM login_links WHERE used_at IS NULL"),
        60000);
    CHECK_INT_EQ(store_login_link_consume(f.st, c, strlen(c), &u, &err), 0);
    teardown(&f);
}

TEST(sessions_get_delete_and_wrong_tokens)
{
    struct fixture f;
    setup(&f);
    struct err err = {0};
    struct store_user u;
    char s1[STORE_WEB_SESSION_LEN + 1], s2[STORE_WEB_SESSION_LEN + 1];
    CHECK_INT_EQ(store_web_session_create(f.st, f.alice.id, 3600, s1, &err), 0);
    CHECK_INT_EQ(strlen(s1), STORE_WEB_SESSION_LEN);
    CHECK(!db_contains(&f, s1));
    CHECK_INT_EQ(store_web_session_create(f.st, f.bob.id, 3600, s2, &err), 0);
    CHECK_INT_EQ(store_web_session_get(f.st, s1, strlen(s1), &u, &err), 0);
    CHECK_STR_EQ(u.name, "alice");
    CHECK_INT_EQ(store_web_session_get(f.st, s2, strlen(s2), &u, &err), 0);
    CHECK_STR_EQ(u.name, "bob");
    /* and again: reading does not spend it */
    CHECK_INT_EQ(store_web_session_get(f.st, s1, strlen(s1), &u, &err), 0);
    char wrong[STORE_WEB_SESSION_LEN + 1];
    memcpy(wrong, s1, sizeof(wrong));
    wrong[0] = wrong[0] == 'A' ? 'B' : 'A';
    CHECK_INT_EQ(store_web_session_get(f.st, wrong, strlen(wrong), &u, &err), -ENOENT);
    CHECK_STR_EQ(err.msg, "unknown or expired session");
    CHECK_INT_EQ(store_web_session_get(f.st, s1, STORE_WEB_SESSION_LEN + 1, &u, &err), -ENOENT);
    CHECK_INT_EQ(store_web_session_get(f.st, "", 0, &u, &err), -ENOENT);
    CHECK_INT_EQ(store_web_session_create(f.st, "usr_nobody", 3600, s2, &err), -ENOENT);
    CHECK_INT_EQ(store_web_session_create(f.st, f.alice.id, 0, s2, &err), -EINVAL);
    CHECK_INT_EQ(
        store_web_session_create(f.st, f.alice.id, STORE_WEB_SESSION_MAX_AGE_S + 1, s2, &err),
        -EINVAL);
    CHECK_INT_EQ(store_web_session_delete(f.st, s1, strlen(s1), &err), 0);
    CHECK_INT_EQ(store_web_session_get(f.st, s1, strlen(s1), &u, &err), -ENOENT);
    CHECK_INT_EQ(store_web_session_delete(f.st, s1, strlen(s1), &err), -ENOENT);
    teardown(&f);
}

TEST(sessions_expire_and_slide)
{
    struct fixture f;
    setup(&f);
    struct err err = {0};
    struct store_user u;
    char s1[STORE_WEB_SESSION_LEN + 1], s2[STORE_WEB_SESSION_LEN + 1];
    CHECK_INT_EQ(store_web_session_create(f.st, f.alice.id, 3600, s1, &err), 0);
    CHECK_INT_EQ(store_web_session_create(f.st, f.alice.id, 3600, s2, &err), 0);
    /* within a minute of the last use nothing is written */
    sql(&f, "UPDATE web_sessions SET last_seen_at = last_seen_at - 30000, "
            "expires_at = expires_at - 30000");
    int64_t before = sql_int(&f, "SELECT max(expires_at) FROM web_sessions");
    CHECK_INT_EQ(store_web_session_get(f.st, s1, strlen(s1), &u, &err), 0);
    CHECK_INT_EQ(sql_int(&f, "SELECT max(expires_at) FROM web_sessions"), before);
    /* later, a use moves the end along: an hour past now */
    sql(&f, "UPDATE web_sessions SET created_at = created_at - 7200000, "
            "last_seen_at = last_seen_at - 3000000, expires_at = expires_at - 3000000");
    int64_t t0 = time_now_ms();
    CHECK_INT_EQ(store_web_session_get(f.st, s1, strlen(s1), &u, &err), 0);
    int64_t seen = sql_int(&f, "SELECT max(last_seen_at) FROM web_sessions");
    int64_t end = sql_int(&f, "SELECT max(expires_at) FROM web_sessions");
    CHECK(seen >= t0 && seen <= time_now_ms());
    CHECK_INT_EQ(end - seen, 3600000);
    /* but never past the maximum age */
    char q[256];
    snprintf(q, sizeof(q),
             "UPDATE web_sessions SET created_at = %lld, last_seen_at = last_seen_at - 120000",
             (long long)(time_now_ms() - (int64_t)STORE_WEB_SESSION_MAX_AGE_S * 1000 + 600000));
    sql(&f, q);
    CHECK_INT_EQ(store_web_session_get(f.st, s1, strlen(s1), &u, &err), 0);
    CHECK_INT_EQ(sql_int(&f, "SELECT max(expires_at - created_at) FROM web_sessions"),
                 (int64_t)STORE_WEB_SESSION_MAX_AGE_S * 1000);
    /* an expired session is no session, and the next one made clears it away */
    sql(&f, "UPDATE web_sessions SET expires_at = 1");
    CHECK_INT_EQ(store_web_session_get(f.st, s1, strlen(s1), &u, &err), -ENOENT);
    CHECK_INT_EQ(store_web_session_get(f.st, s2, strlen(s2), &u, &err), -ENOENT);
    CHECK_INT_EQ(store_web_session_create(f.st, f.bob.id, 60, s1, &err), 0);
    CHECK_INT_EQ(sql_int(&f, "SELECT count(*) FROM web_sessions"), 1);
    teardown(&f);
}

TEST(sessions_sign_out_everywhere_and_cap)
{
    struct fixture f;
    setup(&f);
    struct err err = {0};
    struct store_user u;
    char first[STORE_WEB_SESSION_LEN + 1], s[STORE_WEB_SESSION_LEN + 1],
        bobs[STORE_WEB_SESSION_LEN + 1];
    CHECK_INT_EQ(store_web_session_create(f.st, f.bob.id, 3600, bobs, &err), 0);
    CHECK_INT_EQ(store_web_session_create(f.st, f.alice.id, 3600, first, &err), 0);
    sql(&f, "UPDATE web_sessions SET created_at = created_at - 1000");
    for (int i = 0; i < STORE_WEB_SESSIONS_PER_USER + 5; i++)
        CHECK_INT_EQ(store_web_session_create(f.st, f.alice.id, 3600, s, &err), 0);
    /* alice keeps her newest sessions only; bob's is not hers to lose */
    char q[128];
    snprintf(q, sizeof(q), "SELECT count(*) FROM web_sessions WHERE user_id = '%s'", f.alice.id);
    CHECK_INT_EQ(sql_int(&f, q), STORE_WEB_SESSIONS_PER_USER);
    CHECK_INT_EQ(store_web_session_get(f.st, first, strlen(first), &u, &err), -ENOENT);
    CHECK_INT_EQ(store_web_session_get(f.st, s, strlen(s), &u, &err), 0);
    CHECK_INT_EQ(store_web_session_get(f.st, bobs, strlen(bobs), &u, &err), 0);
    CHECK_INT_EQ(store_web_session_delete_user(f.st, f.alice.id, &err),
                 STORE_WEB_SESSIONS_PER_USER);
    CHECK_INT_EQ(store_web_session_get(f.st, s, strlen(s), &u, &err), -ENOENT);
    CHECK_INT_EQ(store_web_session_get(f.st, bobs, strlen(bobs), &u, &err), 0);
    CHECK_INT_EQ(store_web_session_delete_user(f.st, f.alice.id, &err), 0);
    teardown(&f);
}

TEST(a_deleted_user_takes_links_and_sessions_along)
{
    struct fixture f;
    setup(&f);
    struct err err = {0};
    char l[STORE_LINK_LEN + 1], s[STORE_WEB_SESSION_LEN + 1];
    CHECK_INT_EQ(store_login_link_create(f.st, "alice", 900, l, &err), 0);
    CHECK_INT_EQ(store_web_session_create(f.st, f.alice.id, 3600, s, &err), 0);
    CHECK_INT_EQ(store_login_link_create(f.st, "bob", 900, l, &err), 0);
    sql(&f, "DELETE FROM users WHERE name = 'alice'");
    CHECK_INT_EQ(sql_int(&f, "SELECT count(*) FROM login_links"), 1);
    CHECK_INT_EQ(sql_int(&f, "SELECT count(*) FROM web_sessions"), 0);
    teardown(&f);
}

TEST_MAIN()

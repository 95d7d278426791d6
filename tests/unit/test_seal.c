#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/seal.h"
#include "base/util.h"
#include "harness.h"
#include "store/store.h"

TEST(sealed_values_open_only_with_their_key_and_label)
{
    CHECK(sodium_init() >= 0);
    unsigned char key[SEAL_KEY_BYTES], other[SEAL_KEY_BYTES];
    randombytes_buf(key, sizeof(key));
    randombytes_buf(other, sizeof(other));
    unsigned char *a, *b;
    size_t alen, blen;
    seal(key, "github_pat_secret", 17, "credential usr_1 github", &a, &alen);
    seal(key, "github_pat_secret", 17, "credential usr_1 github", &b, &blen);
    CHECK_INT_EQ(alen, blen);
    CHECK(memcmp(a, b, alen) != 0); /* a fresh nonce each time */
    CHECK(memmem(a, alen, "github_pat", 10) == NULL);
    char *plain = NULL;
    size_t n = 0;
    struct err err = {0};
    CHECK_INT_EQ(unseal(key, a, alen, "credential usr_1 github", &plain, &n, &err), 0);
    CHECK_INT_EQ(n, 17);
    CHECK_STR_EQ(plain, "github_pat_secret");
    free(plain);
    /* another user's row, another key, a flipped byte, a cut value: none opens */
    CHECK_INT_EQ(unseal(key, a, alen, "credential usr_2 github", &plain, &n, &err), -EBADMSG);
    CHECK_INT_EQ(unseal(other, a, alen, "credential usr_1 github", &plain, &n, &err), -EBADMSG);
    a[alen - 1] ^= 1;
    CHECK_INT_EQ(unseal(key, a, alen, "credential usr_1 github", &plain, &n, &err), -EBADMSG);
    CHECK_INT_EQ(unseal(key, a, 10, "credential usr_1 github", &plain, &n, &err), -EBADMSG);
    free(a);
    free(b);
}

TEST(the_key_is_made_once_private_and_read_back)
{
    CHECK(sodium_init() >= 0);
    char dir[] = "/tmp/smcp-seal-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    unsigned char k1[SEAL_KEY_BYTES], k2[SEAL_KEY_BYTES];
    struct err err = {0};
    CHECK_INT_EQ(seal_key_load(dir, "credentials.key", k1, &err), 0);
    CHECK_INT_EQ(seal_key_load(dir, "credentials.key", k2, &err), 0);
    CHECK(memcmp(k1, k2, sizeof(k1)) == 0);
    char *path = xasprintf("%s/secrets/credentials.key", dir);
    struct stat st;
    CHECK_INT_EQ(stat(path, &st), 0);
    CHECK_INT_EQ(st.st_mode & 0777, 0600);
    CHECK_INT_EQ(st.st_size, SEAL_KEY_BYTES);
    char *sdir = xasprintf("%s/secrets", dir);
    CHECK_INT_EQ(stat(sdir, &st), 0);
    CHECK_INT_EQ(st.st_mode & 0777, 0700);
    /* a file that is not a key is an error, never replaced */
    FILE *f = fopen(path, "w");
    fputs("short", f);
    fclose(f);
    CHECK_INT_EQ(seal_key_load(dir, "credentials.key", k2, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "does not hold a key");
    unlink(path);
    rmdir(sdir);
    rmdir(dir);
    free(path);
    free(sdir);
}

TEST(what_a_token_may_be_is_checked_in_one_place)
{
    char longest[STORE_CREDENTIAL_MAX + 2];
    memset(longest, 'a', sizeof(longest));
    CHECK(store_credential_problem("ghp_abc", 7) == NULL);
    CHECK(store_credential_problem("!~", 2) == NULL);
    CHECK(store_credential_problem(longest, STORE_CREDENTIAL_MAX) == NULL);
    CHECK_STR_CONTAINS(store_credential_problem(longest, STORE_CREDENTIAL_MAX + 1), "longer");
    CHECK_STR_CONTAINS(store_credential_problem("", 0), "empty");
    CHECK_STR_CONTAINS(store_credential_problem("two words", 9), "space");
    CHECK_STR_CONTAINS(store_credential_problem("tab\there", 8), "not printable");
    CHECK_STR_CONTAINS(store_credential_problem("del\x7f", 4), "not printable");
    CHECK_STR_CONTAINS(store_credential_problem("caf\xc3\xa9", 5), "not printable");
    CHECK_STR_CONTAINS(store_credential_problem("nul\0x", 5), "not printable");
}

/* A credential set through the store opens to what was set, for its user alone, with the
 * server's key alone; a replaced one opens to the new value. */
TEST(credentials_are_sealed_per_user_and_open_only_there)
{
    CHECK(sodium_init() >= 0);
    char dir[] = "/tmp/smcp-seal-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_user alice, bob;
    CHECK_INT_EQ(store_user_add(st, "alice", &alice, &err), 0);
    CHECK_INT_EQ(store_user_add(st, "bob", &bob, &err), 0);
    unsigned char key[SEAL_KEY_BYTES], other[SEAL_KEY_BYTES];
    CHECK_INT_EQ(store_credential_key_load(dir, key, &err), 0);
    randombytes_buf(other, sizeof(other));

    char *value = NULL;
    size_t n = 0;
    CHECK_INT_EQ(store_credential_open(st, key, alice.id, "github", &value, &n, &err), -ENOENT);
    CHECK_INT_EQ(store_credential_seal(st, key, alice.id, "github", "ghp_first", 9, 1000, &err), 0);
    CHECK_INT_EQ(store_credential_open(st, key, alice.id, "github", &value, &n, &err), 0);
    CHECK_INT_EQ(n, 9);
    CHECK_STR_EQ(value, "ghp_first");
    free(value);
    CHECK_INT_EQ(
        store_credential_seal(st, key, alice.id, "github", "ghs_second_one", 14, 2000, &err), 0);
    CHECK_INT_EQ(store_credential_open(st, key, alice.id, "github", &value, &n, &err), 0);
    CHECK_STR_EQ(value, "ghs_second_one");
    free(value);
    CHECK_INT_EQ(store_credential_open(st, other, alice.id, "github", &value, &n, &err), -EBADMSG);

    /* a value the rule refuses is not stored, and says why without quoting it */
    CHECK_INT_EQ(store_credential_seal(st, key, bob.id, "github", "ghp secret", 10, 3000, &err),
                 -EINVAL);
    CHECK(strstr(err.msg, "secret") == NULL);
    CHECK_INT_EQ(store_credential_open(st, key, bob.id, "github", &value, &n, &err), -ENOENT);

    /* alice's sealed value copied onto bob's row does not open there */
    char *sql = xasprintf("INSERT INTO credentials SELECT '%s', service, sealed, created_at, "
                          "updated_at FROM credentials WHERE user_id = '%s'",
                          bob.id, alice.id);
    CHECK_INT_EQ(test_sql_run(path, sql, NULL), 0);
    free(sql);
    CHECK_INT_EQ(store_credential_open(st, key, bob.id, "github", &value, &n, &err), -EBADMSG);
    CHECK_INT_EQ(store_credential_delete(st, bob.id, "github", &err), 0);
    CHECK_INT_EQ(store_credential_delete(st, bob.id, "github", &err), -ENOENT);
    CHECK_INT_EQ(store_credential_open(st, key, alice.id, "github", &value, &n, &err), 0);
    CHECK_STR_EQ(value, "ghs_second_one");
    free(value);
    store_close(st);
    char *rm = xasprintf("rm -rf '%s'", dir);
    CHECK_INT_EQ(system(rm), 0);
    free(rm);
    free(path);
}

/* Secrets for runs: names, values and patterns checked; sealed per user and name; the caps on
 * their number and total size; a listing without the key never opens one. */
struct secret_seen {
    int n;
    char names[512];
    char values[512];
};

static void on_secret(const struct store_secret *s, const char *value, size_t n, void *ctx)
{
    struct secret_seen *seen = ctx;
    seen->n++;
    size_t len = strlen(seen->names);
    snprintf(seen->names + len, sizeof(seen->names) - len, "%s:%s:%d ", s->name, s->repos,
             s->agent);
    len = strlen(seen->values);
    snprintf(seen->values + len, sizeof(seen->values) - len, "%.*s ", value ? (int)n : 1,
             value ? value : "-");
}

TEST(secrets_are_checked_sealed_and_capped)
{
    CHECK(sodium_init() >= 0);
    CHECK(store_secret_name_problem("NPM_TOKEN") == NULL);
    CHECK(store_secret_name_problem("_X1") == NULL);
    CHECK_STR_CONTAINS(store_secret_name_problem(""), "empty");
    CHECK_STR_CONTAINS(store_secret_name_problem("1X"), "not an environment variable");
    CHECK_STR_CONTAINS(store_secret_name_problem("npm"), "not an environment variable");
    CHECK_STR_CONTAINS(store_secret_name_problem("HOME"), "sets itself");
    CHECK_STR_CONTAINS(store_secret_name_problem("LD_LIBRARY_PATH"), "begins like");
    CHECK_STR_CONTAINS(store_secret_name_problem("GIT_AUTHOR_NAME"), "begins like");
    CHECK(store_secret_value_problem("v", 1) == NULL);
    CHECK_STR_CONTAINS(store_secret_value_problem("a\0b", 3), "NUL");
    CHECK_STR_CONTAINS(store_secret_value_problem("\xff", 1), "UTF-8");
    char repos[STORE_SECRET_REPOS_TEXT];
    struct err err = {0};
    CHECK_INT_EQ(store_secret_repos_normalize(NULL, repos, &err), 0);
    CHECK_STR_EQ(repos, "*");
    CHECK_INT_EQ(store_secret_repos_normalize(" acme/web-*, Octo/x ", repos, &err), 0);
    CHECK_STR_EQ(repos, "acme/web-* Octo/x");
    CHECK_INT_EQ(store_secret_repos_normalize("acme/*/x", repos, &err), -EINVAL);
    CHECK_INT_EQ(store_secret_repos_normalize("*/x", repos, &err), -EINVAL);
    CHECK_INT_EQ(store_secret_repos_normalize("a/1 a/2 a/3 a/4 a/5 a/6 a/7 a/8 a/9", repos, &err),
                 -EINVAL);
    CHECK(store_secret_applies("*", NULL));
    CHECK(store_secret_applies("acme/web-* octo/x", "ACME/web-site"));
    CHECK(store_secret_applies("acme/web-* octo/x", "octo/x"));
    CHECK(!store_secret_applies("acme/web-* octo/x", "octo/xy"));
    CHECK(!store_secret_applies("acme/web-*", "acme/api"));
    CHECK(!store_secret_applies("acme/*", NULL));
    CHECK(!store_secret_applies("acme/*", ""));

    char dir[] = "/tmp/smcp-seal-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *path = test_temp_db();
    struct store *st = NULL;
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_user alice, bob;
    CHECK_INT_EQ(store_user_add(st, "alice", &alice, &err), 0);
    CHECK_INT_EQ(store_user_add(st, "bob", &bob, &err), 0);
    unsigned char key[SEAL_KEY_BYTES], other[SEAL_KEY_BYTES];
    CHECK_INT_EQ(store_credential_key_load(dir, key, &err), 0);
    randombytes_buf(other, sizeof(other));
    struct store_secret s = {.name = "NPM_TOKEN", .repos = "acme/*", .agent = true};
    CHECK_INT_EQ(store_secret_seal(st, key, alice.id, &s, "npm-value", 9, 1000, &err), 0);
    struct store_secret t = {.name = "HOME"};
    CHECK_INT_EQ(store_secret_seal(st, key, alice.id, &t, "npm-value", 9, 1000, &err), -EINVAL);
    CHECK(strstr(err.msg, "npm-value") == NULL);
    struct secret_seen seen = {0};
    CHECK_INT_EQ(store_secret_list(st, NULL, alice.id, on_secret, &seen, &err), 0);
    CHECK_STR_EQ(seen.names, "NPM_TOKEN:acme/*:1 ");
    CHECK_STR_EQ(seen.values, "- ");
    memset(&seen, 0, sizeof(seen));
    CHECK_INT_EQ(store_secret_list(st, key, alice.id, on_secret, &seen, &err), 0);
    CHECK_STR_EQ(seen.values, "npm-value ");
    CHECK_INT_EQ(store_secret_list(st, other, alice.id, on_secret, &seen, &err), -EBADMSG);
    /* alice's sealed value copied onto bob's row does not open there */
    char *sql = xasprintf("INSERT INTO user_secrets SELECT '%s', name, repos, agent, size, sealed, "
                          "created_at, updated_at FROM user_secrets WHERE user_id = '%s'",
                          bob.id, alice.id);
    CHECK_INT_EQ(test_sql_run(path, sql, NULL), 0);
    free(sql);
    CHECK_INT_EQ(store_secret_list(st, key, bob.id, on_secret, &seen, &err), -EBADMSG);
    CHECK_INT_EQ(store_secret_delete(st, bob.id, "NPM_TOKEN", &err), 0);
    CHECK_INT_EQ(store_secret_delete(st, bob.id, "NPM_TOKEN", &err), -ENOENT);

    /* the caps: the total size, then the number */
    char *big = xmalloc(STORE_SECRET_VALUE_MAX + 1);
    memset(big, 'b', STORE_SECRET_VALUE_MAX + 1);
    big[STORE_SECRET_VALUE_MAX] = '\0';
    struct store_secret b = {.repos = "*"};
    CHECK_INT_EQ(store_secret_seal(st, key, bob.id, &b, big, STORE_SECRET_VALUE_MAX + 1, 1, &err),
                 -EINVAL);
    int i = 0;
    for (; i < STORE_SECRETS_TOTAL_MAX / STORE_SECRET_VALUE_MAX; i++) {
        snprintf(b.name, sizeof(b.name), "BIG_%d", i);
        CHECK_INT_EQ(store_secret_seal(st, key, bob.id, &b, big, STORE_SECRET_VALUE_MAX, 1, &err),
                     0);
    }
    snprintf(b.name, sizeof(b.name), "BIG_%d", i);
    CHECK_INT_EQ(store_secret_seal(st, key, bob.id, &b, "tiny", 4, 1, &err), -ENOSPC);
    CHECK_STR_CONTAINS(err.msg, "bytes of values in all");
    snprintf(b.name, sizeof(b.name), "BIG_0"); /* a replaced value counts without the old one */
    CHECK_INT_EQ(store_secret_seal(st, key, bob.id, &b, "tiny", 4, 1, &err), 0);
    for (i = 1; i < STORE_SECRETS_MAX; i++) {
        snprintf(b.name, sizeof(b.name), "BIG_%d", i);
        CHECK_INT_EQ(store_secret_seal(st, key, bob.id, &b, "tiny", 4, 1, &err), 0);
    }
    snprintf(b.name, sizeof(b.name), "ONE_MORE");
    CHECK_INT_EQ(store_secret_seal(st, key, bob.id, &b, "tiny", 4, 1, &err), -ENOSPC);
    CHECK_STR_CONTAINS(err.msg, "at most 100 secrets");
    free(big);
    store_close(st);
    char *rm = xasprintf("rm -rf '%s'", dir);
    CHECK_INT_EQ(system(rm), 0);
    free(rm);
    free(path);
}

TEST_MAIN()

/* The bearer-token check (src/http/bearer.c): API tokens against a store, and when a remembered
 * answer stops being trusted (a revocation in this process, or a write by another). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/auth.h"
#include "harness.h"
#include "http/bearer.h"
#include "store/store.h"

#define URL "https://mcp.example"

struct fixture {
    char *path;
    struct store *st;
    struct store_user alice;
    struct store_token tok;
    char plain[STORE_TOKEN_LEN + 1];
};

static void setup(struct fixture *f)
{
    f->path = test_temp_db();
    struct err err = {0};
    CHECK_INT_EQ(store_open(f->path, &f->st, &err), 0);
    CHECK_INT_EQ(store_user_add(f->st, "alice", &f->alice, &err), 0);
    CHECK_INT_EQ(store_token_create(f->st, f->alice.id, "laptop", f->plain, &f->tok, &err), 0);
    http_bearer_cache_flush();
    http_bearer_after_loop();
}

static void teardown(struct fixture *f)
{
    store_close(f->st);
    free(f->path);
}

static int check(struct fixture *f, const char *tok, struct store_user *user, unsigned *scopes)
{
    struct err err = {0};
    return http_bearer_check(f->st, URL, tok, strlen(tok), user, scopes, &err);
}

TEST(bearer_api_token_has_every_scope)
{
    struct fixture f;
    setup(&f);
    struct store_user u;
    unsigned scopes = 0;
    CHECK_INT_EQ(check(&f, f.plain, &u, &scopes), 0);
    CHECK_STR_EQ(u.id, f.alice.id);
    CHECK_INT_EQ(scopes, SCOPES_ALL);
    /* the answer remembered is the same answer */
    scopes = 0;
    CHECK_INT_EQ(check(&f, f.plain, &u, &scopes), 0);
    CHECK_STR_EQ(u.id, f.alice.id);
    CHECK_INT_EQ(scopes, SCOPES_ALL);
    /* scopes may be NULL */
    CHECK_INT_EQ(check(&f, f.plain, &u, NULL), 0);
    teardown(&f);
}

TEST(bearer_spaces_around_the_token_are_ignored)
{
    struct fixture f;
    setup(&f);
    char padded[STORE_TOKEN_LEN + 8];
    snprintf(padded, sizeof(padded), "  %s ", f.plain);
    struct store_user u;
    CHECK_INT_EQ(check(&f, padded, &u, NULL), 0);
    CHECK_STR_EQ(u.id, f.alice.id);
    teardown(&f);
}

TEST(bearer_unknown_empty_and_oversized_tokens_are_refused)
{
    struct fixture f;
    setup(&f);
    struct store_user u;
    char other[STORE_TOKEN_LEN + 1];
    memcpy(other, f.plain, sizeof(other));
    other[STORE_TOKEN_LEN - 1] = other[STORE_TOKEN_LEN - 1] == 'A' ? 'B' : 'A';
    CHECK_INT_EQ(check(&f, other, &u, NULL), -ENOENT);
    CHECK_INT_EQ(check(&f, "", &u, NULL), -ENOENT);
    CHECK_INT_EQ(check(&f, "   ", &u, NULL), -ENOENT);
    char big[400];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CHECK_INT_EQ(check(&f, big, &u, NULL), -ENOENT);
    /* an OAuth access token's shape goes to the OAuth check, which knows none */
    char oauth[STORE_OAUTH_TOKEN_LEN + 1];
    memset(oauth, 'x', sizeof(oauth) - 1);
    memcpy(oauth, STORE_OAUTH_ACCESS_PREFIX, 8);
    oauth[sizeof(oauth) - 1] = '\0';
    CHECK_INT_EQ(check(&f, oauth, &u, NULL), -ENOENT);
    teardown(&f);
}

TEST(bearer_revocation_here_is_seen_after_a_flush)
{
    struct fixture f;
    setup(&f);
    struct store_user u;
    struct err err = {0};
    CHECK_INT_EQ(check(&f, f.plain, &u, NULL), 0);
    CHECK_INT_EQ(store_token_revoke(f.st, f.tok.id, &err), 0);
    http_bearer_cache_flush();
    CHECK_INT_EQ(check(&f, f.plain, &u, NULL), -ENOENT);
    teardown(&f);
}

TEST(bearer_revocation_by_another_process_is_seen_the_next_turn)
{
    struct fixture f;
    setup(&f);
    struct store_user u;
    /* quiet turns first: on a file database the version is then taken from the watch on its
     * files, without a query */
    for (int i = 0; i < 3; i++) {
        CHECK_INT_EQ(check(&f, f.plain, &u, NULL), 0);
        http_bearer_after_loop();
    }
    char q[200];
    snprintf(q, sizeof(q), "UPDATE tokens SET revoked_at = 1 WHERE id = '%s'", f.tok.id);
    if (test_sql_run(f.path, q, NULL) < 0)
        CHECK_FAIL_("%s failed", q);
    http_bearer_after_loop();
    CHECK_INT_EQ(check(&f, f.plain, &u, NULL), -ENOENT);
    teardown(&f);
}

TEST_MAIN()

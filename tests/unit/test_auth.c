/* The authorization server's pure parts (form decoding, redirect URIs, scopes) and its store:
 * codes single use, refresh rotation, its overlap and replay, grants and revocation. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth/auth_internal.h"
#include "auth/cimd.h"
#include "base/util.h"
#include "harness.h"
#include "store/store.h"

TEST(form_decodes_and_refuses_repeats_and_bad_escapes)
{
    struct form f;
    struct err err = {0};
    CHECK_INT_EQ(form_parse("a=1&b=x+y%21&c=&d", 17, &f, &err), 0);
    CHECK_STR_EQ(form_get(&f, "a"), "1");
    CHECK_STR_EQ(form_get(&f, "b"), "x y!");
    CHECK_STR_EQ(form_get(&f, "c"), "");
    CHECK_STR_EQ(form_get(&f, "d"), "");
    CHECK(form_get(&f, "e") == NULL);
    form_release(&f);
    CHECK_INT_EQ(form_parse("a=1&a=2", 7, &f, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "repeated");
    CHECK_INT_EQ(form_parse("a=%4", 4, &f, &err), -EINVAL);
    CHECK_INT_EQ(form_parse("a=%zz", 5, &f, &err), -EINVAL);
    CHECK_INT_EQ(form_parse("a=%00", 5, &f, &err), -EINVAL);
    CHECK_INT_EQ(form_parse("a=%41", 5, &f, &err), 0);
    CHECK_STR_EQ(form_get(&f, "a"), "A");
    form_release(&f);
    CHECK_INT_EQ(form_parse("", 0, &f, &err), 0);
    CHECK_INT_EQ((int)f.n, 0);
    char many[40 * 6 + 1] = "";
    for (int i = 0; i < 40; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%sk%02d=1", i ? "&" : "", i);
    CHECK_INT_EQ(form_parse(many, strlen(many), &f, &err), -EINVAL);
}

static bool registrable(const char *uri)
{
    struct err err = {0};
    return auth_redirect_uri_check(uri, strlen(uri), 0, &err) == 0;
}

TEST(redirect_uris_registrable)
{
    CHECK(registrable("https://claude.ai/api/mcp/auth_callback"));
    CHECK(registrable("https://chatgpt.com/connector_platform_oauth_redirect"));
    CHECK(registrable("http://127.0.0.1:33418/callback"));
    CHECK(registrable("http://[::1]/cb"));
    CHECK(registrable("http://localhost:6274/oauth/callback"));
    CHECK(registrable("com.example.app:/oauth2redirect"));
    CHECK(!registrable("http://example.com/cb"));
    CHECK(!registrable("http://127.0.0.1.evil.example/cb"));
    CHECK(!registrable("http://localhost.evil.example/cb"));
    CHECK(!registrable("https://example.com/cb#frag"));
    CHECK(!registrable("https://user@example.com/cb"));
    CHECK(!registrable("javascript:alert(1)"));
    CHECK(!registrable("https:///nohost"));
    CHECK(!registrable("https://exa mple.com/"));
    CHECK(!registrable(""));
}

TEST(redirect_uris_match_exactly_or_by_loopback_port)
{
    const char *reg = "[\"https://app.example/cb\",\"http://127.0.0.1/callback\"]";
    CHECK(auth_redirect_uri_match(reg, "https://app.example/cb"));
    CHECK(!auth_redirect_uri_match(reg, "https://app.example/cb/"));
    CHECK(!auth_redirect_uri_match(reg, "https://app.example/cb?x=1"));
    CHECK(!auth_redirect_uri_match(reg, "https://APP.example/cb"));
    CHECK(auth_redirect_uri_match(reg, "http://127.0.0.1:5555/callback"));
    CHECK(auth_redirect_uri_match(reg, "http://127.0.0.1/callback"));
    CHECK(!auth_redirect_uri_match(reg, "http://127.0.0.1:5555/other"));
    CHECK(!auth_redirect_uri_match(reg, "http://127.0.0.1:55x/callback"));
    CHECK(!auth_redirect_uri_match(reg, "http://127.0.0.2:5555/callback"));
    CHECK(!auth_redirect_uri_match("not json", "https://app.example/cb"));
    char host[64];
    auth_uri_host("https://claude.ai:443/api/cb", host, sizeof(host));
    CHECK_STR_EQ(host, "claude.ai");
    auth_uri_host("http://[::1]:80/x", host, sizeof(host));
    CHECK_STR_EQ(host, "[::1]");
}

static bool same(const char *registered, const char *requested)
{
    return auth_redirect_uri_same(registered, requested);
}

/* RFC 8252 7.3 and what real native clients do: Claude Code's and Codex's documents list
 * http://localhost/callback and http://127.0.0.1/callback and they send a port of the moment;
 * VS Code's lists http://127.0.0.1:33418/ and may be sent another port. */
TEST(redirect_loopback_port_varies_for_localhost_and_loopback_addresses)
{
    CHECK(same("http://localhost/callback", "http://localhost:54012/callback"));
    CHECK(same("http://localhost/callback", "http://localhost/callback"));
    CHECK(same("http://localhost:3118/callback", "http://localhost/callback"));
    CHECK(same("http://localhost:3118/callback", "http://localhost:3119/callback"));
    CHECK(same("http://127.0.0.1/callback", "http://127.0.0.1:65535/callback"));
    CHECK(same("http://127.0.0.1:33418/", "http://127.0.0.1:50123/"));
    CHECK(same("http://127.1.2.3/cb", "http://127.1.2.3:1/cb"));
    CHECK(same("http://[::1]/cb", "http://[::1]:8080/cb"));
    CHECK(same("http://localhost/cb?x=1", "http://localhost:9/cb?x=1"));
    CHECK(same("http://localhost", "http://localhost:9"));
    /* the host's case does not matter, the scheme's neither; nothing else differs */
    CHECK(same("http://localhost/cb", "http://LOCALHOST:9/cb"));
    CHECK(same("http://LocalHost/cb", "http://localhost:9/cb"));
    CHECK(same("HTTP://localhost/cb", "http://localhost:9/cb"));
}

TEST(redirect_loopback_everything_but_the_port_must_match)
{
    /* another loopback host, even one that names the same machine */
    CHECK(!same("http://localhost/callback", "http://127.0.0.1:5/callback"));
    CHECK(!same("http://127.0.0.1/callback", "http://localhost:5/callback"));
    CHECK(!same("http://127.0.0.1/callback", "http://127.0.0.2:5/callback"));
    CHECK(!same("http://127.0.0.1/callback", "http://[::1]:5/callback"));
    /* path and query byte for byte */
    CHECK(!same("http://localhost/callback", "http://localhost:5/callback/"));
    CHECK(!same("http://localhost/callback", "http://localhost:5/Callback"));
    CHECK(!same("http://localhost/callback", "http://localhost:5/callback?x=1"));
    CHECK(!same("http://localhost/cb?x=1", "http://localhost:5/cb?x=2"));
    CHECK(!same("http://localhost/cb?x=1", "http://localhost:5/cb"));
    CHECK(!same("http://127.0.0.1:33418/", "http://127.0.0.1:50123"));
    CHECK(!same("http://localhost/callback", "http://localhost:5/call%62ack"));
    CHECK(!same("http://localhost/callback", "http://localhost:5/%63allback"));
    CHECK(!same("http://localhost/a/b", "http://localhost:5/a%2Fb"));
    /* https on a loopback host is an ordinary https URI: exact */
    CHECK(same("https://localhost/cb", "https://localhost/cb"));
    CHECK(!same("https://localhost/cb", "https://localhost:8443/cb"));
    CHECK(!same("http://localhost/cb", "https://localhost:5/cb"));
    CHECK(!same("https://localhost/cb", "http://localhost:5/cb"));
    CHECK(!same("https://127.0.0.1/cb", "https://127.0.0.1:5/cb"));
    /* names that only look like loopback */
    CHECK(!same("http://localhost/cb", "http://localhost.evil.example:5/cb"));
    CHECK(!same("http://localhost/cb", "http://localhost.:5/cb"));
    CHECK(!same("http://localhost/cb", "http://local%68ost:5/cb"));
    CHECK(!same("http://127.0.0.1/cb", "http://127.0.0.1.evil.example:5/cb"));
    CHECK(!same("http://127.0.0.1/cb", "http://127.1:5/cb"));
    CHECK(!same("http://127.0.0.1/cb", "http://0x7f.0.0.1:5/cb"));
    CHECK(!same("http://127.0.0.1/cb", "http://2130706433:5/cb"));
    CHECK(!same("http://127.0.0.1/cb", "http://127.000.000.001:5/cb"));
    CHECK(!same("http://[::1]/cb", "http://[0:0:0:0:0:0:0:1]:5/cb"));
    /* a user name makes the host another one */
    CHECK(!same("http://localhost/cb", "http://localhost@evil.example/cb"));
    CHECK(!same("http://localhost/cb", "http://localhost:5@evil.example/cb"));
    CHECK(!same("http://localhost/cb", "http://x@localhost:5/cb"));
    /* fragments, bad ports, bad characters */
    CHECK(!same("http://localhost/cb", "http://localhost:5/cb#x"));
    CHECK(!same("http://localhost/cb", "http://localhost:0/cb"));
    CHECK(!same("http://localhost/cb", "http://localhost:65536/cb"));
    CHECK(!same("http://localhost/cb", "http://localhost:/cb"));
    CHECK(!same("http://localhost/cb", "http://localhost:5x/cb"));
    CHECK(!same("http://localhost/cb", "http://localhost:123456/cb"));
    CHECK(!same("http://localhost/cb", "http://localhost:5/cb x"));
    CHECK(!same("http://localhost/cb", "http://localhost:5/cb\n"));
    /* other URIs match only exactly */
    CHECK(same("com.example.app:/cb", "com.example.app:/cb"));
    CHECK(!same("com.example.app:/cb", "com.example.app:/cb2"));
    CHECK(!same("https://app.example/cb", "https://app.example:443/cb"));
}

TEST(redirect_loopback_registrable)
{
    CHECK(registrable("http://localhost/callback"));
    CHECK(registrable("http://localhost:3118/callback"));
    CHECK(registrable("http://LOCALHOST/callback"));
    CHECK(registrable("http://127.0.0.1/callback"));
    CHECK(registrable("http://127.1.2.3/callback"));
    CHECK(registrable("http://127.255.255.255:65535/callback"));
    CHECK(registrable("http://[::1]:1/cb"));
    CHECK(registrable("http://127.0.0.1:33418/"));
    CHECK(registrable("https://localhost/cb"));
    CHECK(!registrable("http://localhost./callback"));
    CHECK(!registrable("http://localhost.evil.example/callback"));
    CHECK(!registrable("http://127.0.0.1.evil.example/callback"));
    CHECK(!registrable("http://local%68ost/callback"));
    CHECK(!registrable("http://localhost@evil.example/callback"));
    CHECK(!registrable("http://user:pw@localhost/callback"));
    CHECK(!registrable("http://128.0.0.1/callback"));
    CHECK(!registrable("http://127.1/callback"));
    CHECK(!registrable("http://127.0.0.01/callback"));
    CHECK(!registrable("http://127.0.0.256/callback"));
    CHECK(!registrable("http://127.0.0.1.1/callback"));
    CHECK(!registrable("http://[::2]/callback"));
    CHECK(!registrable("http://[::1/callback"));
    CHECK(!registrable("http://localhost:0/callback"));
    CHECK(!registrable("http://localhost:65536/callback"));
    CHECK(!registrable("http://localhost:/callback"));
    CHECK(!registrable("http://localhost/callback#frag"));
    CHECK(!registrable("http:///callback"));
    struct err err = {0};
    CHECK_INT_EQ(auth_redirect_uri_check("http://localhost./cb", 19, 3, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg,
                       "redirect_uris[3] 'http://localhost./cb' is http:// on a host other "
                       "than localhost, 127.x.x.x or [::1]; use https://");
    CHECK_INT_EQ(auth_redirect_uri_check("http://localhost@evil.example/cb", 32, 0, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "must not carry a user name or password");
    /* a NUL inside (a JSON string may hold one) is not a URI character */
    CHECK_INT_EQ(auth_redirect_uri_check("http://localhost\0.evil/cb", 25, 0, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "holds characters a URI may not");
}

TEST(scopes_parse_format_and_tools)
{
    unsigned s;
    struct err err = {0};
    CHECK_INT_EQ(scopes_parse("runs  sandbox", &s, &err), 0);
    CHECK_INT_EQ(s, SCOPES_TOOLS);
    CHECK_INT_EQ(scopes_parse("sandbox admin", &s, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "admin");
    CHECK_INT_EQ(scopes_parse("", &s, &err), 0);
    CHECK_INT_EQ(s, 0);
    char out[64];
    scopes_format(SCOPE_OFFLINE | SCOPE_SANDBOX, out, sizeof(out));
    CHECK_STR_EQ(out, "sandbox offline_access");
    CHECK_INT_EQ(auth_tool_scope("container_exec"), SCOPE_SANDBOX);
    CHECK_INT_EQ(auth_tool_scope("run_task"), SCOPE_RUNS);
    CHECK_INT_EQ(auth_tool_scope("deliver_run"), SCOPE_RUNS);
    CHECK_INT_EQ(auth_tool_scope("opencode_list_runs"), SCOPE_RUNS);
    CHECK_INT_EQ(auth_tool_scope("server_info"), 0);
}

/* No rotation overlap (OAUTH_REFRESH_REUSE_SECONDS=0): a spent refresh token never comes back. */
static const struct store_oauth_reuse NO_OVERLAP = {.window_ms = 0, .max = 1};

TEST(store_codes_tokens_rotation_and_replay)
{
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_user u, who;
    CHECK_INT_EQ(store_user_add(st, "alice", &u, &err), 0);
    struct store_oauth_client c = {.created_at = 1};
    snprintf(c.id, sizeof(c.id), "cli_test");
    snprintf(c.kind, sizeof(c.kind), "registered");
    snprintf(c.name, sizeof(c.name), "Test app");
    snprintf(c.auth_method, sizeof(c.auth_method), "none");
    c.redirect_uris = xstrdup("[\"https://app.example/cb\"]");
    CHECK_INT_EQ(store_oauth_client_put(st, &c, &err), 0);
    store_oauth_client_clear(&c);
    CHECK_INT_EQ(store_oauth_client_get(st, "cli_test", &c, &err), 0);
    CHECK_STR_EQ(c.redirect_uris, "[\"https://app.example/cb\"]");
    store_oauth_client_clear(&c);

    struct store_oauth_grant g;
    /* 1: the client's first approval (it stops counting as unapproved) */
    CHECK_INT_EQ(store_oauth_grant_approve(st, u.id, "cli_test", "Test app", "app.example",
                                           "sandbox offline_access", &g, &err),
                 1);
    char code[STORE_OAUTH_CODE_LEN + 1], at[STORE_OAUTH_TOKEN_LEN + 1],
        rt[STORE_OAUTH_TOKEN_LEN + 1];
    CHECK_INT_EQ(store_oauth_code_create(st, g.id, "https://app.example/cb", "chal",
                                         "https://x/mcp", "sandbox offline_access", 60000, code,
                                         &err),
                 0);
    struct store_oauth_code k;
    CHECK_INT_EQ(store_oauth_code_redeem(st, code, strlen(code), &k, &err), 0);
    CHECK_STR_EQ(k.grant.user_name, "alice");
    CHECK_STR_EQ(k.challenge, "chal");
    CHECK_INT_EQ(store_oauth_tokens_issue(st, g.id, k.family, k.scope, k.resource, 60000, 600000,
                                          at, rt, &err),
                 0);
    CHECK(strncmp(at, "smcp_at_", 8) == 0 && strlen(at) == STORE_OAUTH_TOKEN_LEN);
    CHECK(strncmp(rt, "smcp_rt_", 8) == 0);
    struct store_oauth_token t;
    CHECK_INT_EQ(store_oauth_access_check(st, at, strlen(at), &who, &t, &err), 0);
    CHECK_STR_EQ(who.name, "alice");
    CHECK_STR_EQ(t.resource, "https://x/mcp");

    /* the code again: refused, and what it issued is revoked */
    CHECK_INT_EQ(store_oauth_code_redeem(st, code, strlen(code), &k, &err), -EALREADY);
    CHECK_INT_EQ(store_oauth_access_check(st, at, strlen(at), &who, &t, &err), -ENOENT);
    CHECK_INT_EQ(store_oauth_refresh_spend(st, rt, strlen(rt), "cli_test", &NO_OVERLAP, &t, &err),
                 -ENOENT);

    /* a fresh chain: rotation, then the spent refresh token replayed ends the grant */
    CHECK_INT_EQ(store_oauth_code_create(st, g.id, "https://app.example/cb", "chal",
                                         "https://x/mcp", "sandbox offline_access", 60000, code,
                                         &err),
                 0);
    CHECK_INT_EQ(store_oauth_code_redeem(st, code, strlen(code), &k, &err), 0);
    CHECK_INT_EQ(store_oauth_tokens_issue(st, g.id, k.family, k.scope, k.resource, 60000, 600000,
                                          at, rt, &err),
                 0);
    char rt1[STORE_OAUTH_TOKEN_LEN + 1];
    memcpy(rt1, rt, sizeof(rt1));
    /* another client cannot spend it (and does not use it up) */
    CHECK_INT_EQ(
        store_oauth_refresh_spend(st, rt1, strlen(rt1), "cli_other", &NO_OVERLAP, &t, &err),
        -ENOENT);
    CHECK_INT_EQ(store_oauth_refresh_spend(st, rt1, strlen(rt1), "cli_test", &NO_OVERLAP, &t, &err),
                 0);
    CHECK_INT_EQ(store_oauth_tokens_issue(st, g.id, t.family, t.scope, t.resource, 60000, 600000,
                                          at, rt, &err),
                 0);
    CHECK_INT_EQ(store_oauth_access_check(st, at, strlen(at), &who, &t, &err), 0);
    CHECK_INT_EQ(store_oauth_refresh_spend(st, rt1, strlen(rt1), "cli_test", &NO_OVERLAP, &t, &err),
                 -EALREADY);
    CHECK_INT_EQ(store_oauth_access_check(st, at, strlen(at), &who, &t, &err), -ENOENT);
    CHECK_INT_EQ(store_oauth_refresh_spend(st, rt, strlen(rt), "cli_test", &NO_OVERLAP, &t, &err),
                 -ENOENT);
    /* the replay revoked the whole grant: the user approves again */
    CHECK_INT_EQ(store_oauth_grant_find(st, u.id, "cli_test", &g, &err), -ENOENT);
    CHECK_INT_EQ(store_oauth_grant_approve(st, u.id, "cli_test", "Test app", "app.example",
                                           "sandbox", &g, &err),
                 0);

    /* revoking the grant ends everything under it */
    CHECK_INT_EQ(store_oauth_code_create(st, g.id, "https://app.example/cb", "chal",
                                         "https://x/mcp", "sandbox", 60000, code, &err),
                 0);
    CHECK_INT_EQ(store_oauth_code_redeem(st, code, strlen(code), &k, &err), 0);
    CHECK_INT_EQ(
        store_oauth_tokens_issue(st, g.id, k.family, k.scope, k.resource, 60000, 0, at, rt, &err),
        0);
    CHECK_STR_EQ(rt, "");
    CHECK_INT_EQ(store_oauth_grant_revoke(st, g.id, "usr_other", &err), -ENOENT);
    CHECK_INT_EQ(store_oauth_grant_revoke(st, g.id, u.id, &err), 0);
    CHECK_INT_EQ(store_oauth_access_check(st, at, strlen(at), &who, &t, &err), -ENOENT);
    /* an expired code is not redeemable */
    CHECK_INT_EQ(store_oauth_grant_approve(st, u.id, "cli_test", "Test app", "app.example",
                                           "sandbox", &g, &err),
                 0);
    CHECK_INT_EQ(store_oauth_code_create(st, g.id, "https://app.example/cb", "chal",
                                         "https://x/mcp", "sandbox", -1, code, &err),
                 0);
    CHECK_INT_EQ(store_oauth_code_redeem(st, code, strlen(code), &k, &err), -ENOENT);
    store_close(st);
    free(path);
}

/* A user's approval of client and the first pair of a new chain under it: rt gets its refresh
 * token. */
static void new_chain(struct store *st, const char *user_id, const char *client,
                      char rt[STORE_OAUTH_TOKEN_LEN + 1])
{
    struct err err = {0};
    struct store_oauth_grant g;
    char code[STORE_OAUTH_CODE_LEN + 1], at[STORE_OAUTH_TOKEN_LEN + 1];
    CHECK(store_oauth_grant_approve(st, user_id, client, "App", "app.example",
                                    "sandbox offline_access", &g, &err) >= 0);
    CHECK_INT_EQ(store_oauth_code_create(st, g.id, "https://app.example/cb", "chal",
                                         "https://x/mcp", "sandbox offline_access", 60000, code,
                                         &err),
                 0);
    struct store_oauth_code k;
    CHECK_INT_EQ(store_oauth_code_redeem(st, code, strlen(code), &k, &err), 0);
    CHECK_INT_EQ(store_oauth_tokens_issue(st, g.id, k.family, k.scope, k.resource, 60000, 600000,
                                          at, rt, &err),
                 0);
}

/* A spend and the pair a token endpoint issues for it: at and rt get the pair. */
static int spend_and_issue(struct store *st, const char *spent, const char *client,
                           const struct store_oauth_reuse *reuse, char family[65],
                           char at[STORE_OAUTH_TOKEN_LEN + 1], char rt[STORE_OAUTH_TOKEN_LEN + 1])
{
    struct err err = {0};
    struct store_oauth_token t;
    int r = store_oauth_refresh_spend(st, spent, strlen(spent), client, reuse, &t, &err);
    if (r < 0)
        return r;
    memcpy(family, t.family, 65);
    CHECK_INT_EQ(store_oauth_tokens_issue(st, t.grant.id, t.family, t.scope, t.resource, 60000,
                                          600000, at, rt, &err),
                 0);
    return r;
}

static bool access_ok(struct store *st, const char *at)
{
    struct err err = {0};
    struct store_user who;
    struct store_oauth_token t;
    return store_oauth_access_check(st, at, strlen(at), &who, &t, &err) == 0;
}

/* The rotation overlap: a token rotated moments ago is honoured again, by its own client, for a
 * fresh pair in its family, up to the cap; past the cap, after the window or from another
 * client, the grant ends with every fork. */
TEST(store_refresh_overlap_within_the_window_up_to_the_cap)
{
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_user u;
    CHECK_INT_EQ(store_user_add(st, "alice", &u, &err), 0);
    const struct store_oauth_reuse reuse = {.window_ms = 60000, .max = 3};
    char rt0[STORE_OAUTH_TOKEN_LEN + 1], at[4][STORE_OAUTH_TOKEN_LEN + 1],
        rt[4][STORE_OAUTH_TOKEN_LEN + 1], fam0[65], fam[65];
    struct store_oauth_token t;

    /* one rotation, then three reuses: four live pairs, one family */
    new_chain(st, u.id, "cli_a", rt0);
    CHECK_INT_EQ(spend_and_issue(st, rt0, "cli_a", &reuse, fam0, at[0], rt[0]), 0);
    for (int i = 1; i <= 3; i++) {
        CHECK_INT_EQ(spend_and_issue(st, rt0, "cli_a", &reuse, fam, at[i], rt[i]), i);
        CHECK_STR_EQ(fam, fam0);
        CHECK(strcmp(rt[i], rt[i - 1]) != 0);
    }
    for (int i = 0; i < 4; i++)
        CHECK(access_ok(st, at[i]));
    /* a fork is a chain of its own: it rotates as usual */
    char at5[STORE_OAUTH_TOKEN_LEN + 1], rt5[STORE_OAUTH_TOKEN_LEN + 1];
    CHECK_INT_EQ(spend_and_issue(st, rt[2], "cli_a", &reuse, fam, at5, rt5), 0);
    CHECK_STR_EQ(fam, fam0);
    /* the fourth reuse is one too many: refused, and the grant ends with all its forks */
    CHECK_INT_EQ(store_oauth_refresh_spend(st, rt0, strlen(rt0), "cli_a", &reuse, &t, &err),
                 -EALREADY);
    CHECK(strstr(err.msg, "more than 3 times") != NULL);
    for (int i = 0; i < 4; i++) {
        CHECK(!access_ok(st, at[i]));
        CHECK_INT_EQ(store_oauth_refresh_spend(st, rt[i], strlen(rt[i]), "cli_a", &reuse, &t, &err),
                     -ENOENT);
    }
    CHECK(!access_ok(st, at5));
    struct store_oauth_grant g;
    CHECK_INT_EQ(store_oauth_grant_find(st, u.id, "cli_a", &g, &err), -ENOENT);

    /* after the window (its rotation moved two minutes back): a replay, the grant ends */
    new_chain(st, u.id, "cli_a", rt0);
    CHECK_INT_EQ(spend_and_issue(st, rt0, "cli_a", &reuse, fam0, at[0], rt[0]), 0);
    CHECK_INT_EQ(spend_and_issue(st, rt0, "cli_a", &reuse, fam, at[1], rt[1]), 1);
    char q[256];
    snprintf(q, sizeof(q),
             "UPDATE oauth_tokens SET spent_at = spent_at - 120000 WHERE kind = "
             "'refresh' AND spent_at IS NOT NULL");
    CHECK_INT_EQ(test_sql_run(path, q, NULL), 0);
    CHECK_INT_EQ(store_oauth_refresh_spend(st, rt0, strlen(rt0), "cli_a", &reuse, &t, &err),
                 -EALREADY);
    CHECK(strstr(err.msg, "used before") != NULL);
    CHECK(!access_ok(st, at[0]) && !access_ok(st, at[1]));
    CHECK_INT_EQ(store_oauth_grant_find(st, u.id, "cli_a", &g, &err), -ENOENT);

    /* another client presenting it within the window: refused, and the grant ends; an unspent
     * token of another client's stays unspent */
    new_chain(st, u.id, "cli_a", rt0);
    CHECK_INT_EQ(store_oauth_refresh_spend(st, rt0, strlen(rt0), "cli_b", &reuse, &t, &err),
                 -ENOENT);
    CHECK_INT_EQ(spend_and_issue(st, rt0, "cli_a", &reuse, fam0, at[0], rt[0]), 0);
    CHECK_INT_EQ(store_oauth_refresh_spend(st, rt0, strlen(rt0), "cli_b", &reuse, &t, &err),
                 -EALREADY);
    CHECK(strstr(err.msg, "another client") != NULL);
    CHECK(!access_ok(st, at[0]));
    CHECK_INT_EQ(store_oauth_grant_find(st, u.id, "cli_a", &g, &err), -ENOENT);

    /* revoking one fork's refresh token (RFC 7009) ends the family, every fork with it */
    new_chain(st, u.id, "cli_a", rt0);
    CHECK_INT_EQ(spend_and_issue(st, rt0, "cli_a", &reuse, fam0, at[0], rt[0]), 0);
    CHECK_INT_EQ(spend_and_issue(st, rt0, "cli_a", &reuse, fam, at[1], rt[1]), 1);
    CHECK_INT_EQ(store_oauth_token_revoke(st, rt[1], strlen(rt[1]), "cli_a", &err), 0);
    CHECK(!access_ok(st, at[0]) && !access_ok(st, at[1]));
    CHECK_INT_EQ(store_oauth_refresh_spend(st, rt[0], strlen(rt[0]), "cli_a", &reuse, &t, &err),
                 -ENOENT);
    store_close(st);
    free(path);
}

/* In a child: open the store, wait for the start, spend rt, write the result to out. */
__attribute__((noreturn)) static void spend_in_child(const char *path, const char *rt, int start,
                                                     int out)
{
    struct store *st = NULL;
    struct err err = {0};
    int r = store_open(path, &st, &err);
    char go;
    if (r == 0 && read(start, &go, 1) < 0)
        r = -EIO;
    if (r == 0) {
        const struct store_oauth_reuse reuse = {.window_ms = 60000, .max = 5};
        struct store_oauth_token t;
        r = store_oauth_refresh_spend(st, rt, strlen(rt), "cli_a", &reuse, &t, &err);
    }
    if (write(out, &r, sizeof(r)) != sizeof(r))
        _exit(1);
    _exit(0);
}

/* Two refreshes with one token at the same moment, each on a connection of its own (two
 * processes, as two nodes or two requests of one node would be): exactly one rotates it, the
 * other takes the overlap, on either backend. */
TEST(store_refresh_two_at_once_one_rotates_the_other_reuses)
{
    char *path = test_temp_db();
    struct err err = {0};
    struct store_user u = {0};
    for (int round = 0; round < 6; round++) {
        struct store *st = NULL;
        CHECK_INT_EQ(store_open(path, &st, &err), 0);
        if (!st)
            break;
        if (round == 0)
            CHECK_INT_EQ(store_user_add(st, "alice", &u, &err), 0);
        char rt0[STORE_OAUTH_TOKEN_LEN + 1];
        new_chain(st, u.id, "cli_a", rt0);
        /* no connection of the parent's lives on in the children */
        store_close(st);
        int start[2], out[2];
        CHECK_INT_EQ(pipe(start), 0);
        CHECK_INT_EQ(pipe(out), 0);
        pid_t kids[2];
        for (int i = 0; i < 2; i++) {
            kids[i] = fork();
            if (kids[i] == 0) {
                close(start[1]);
                close(out[0]);
                spend_in_child(path, rt0, start[0], out[1]);
            }
            CHECK(kids[i] > 0);
        }
        close(start[0]);
        close(out[1]);
        close(start[1]); /* both go at once: their read sees the end of the pipe */
        int got[2] = {-1, -1};
        for (int i = 0; i < 2; i++)
            CHECK_INT_EQ(read(out[0], &got[i], sizeof(int)), (int)sizeof(int));
        close(out[0]);
        for (int i = 0; i < 2; i++) {
            int status = -1;
            CHECK_INT_EQ(waitpid(kids[i], &status, 0), kids[i]);
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        CHECK_INT_EQ(got[0] + got[1], 1);
        CHECK(got[0] == 0 || got[1] == 0);
        /* the grant stands: the same user and client still hold one */
        CHECK_INT_EQ(store_open(path, &st, &err), 0);
        struct store_oauth_grant g;
        CHECK_INT_EQ(store_oauth_grant_find(st, u.id, "cli_a", &g, &err), 0);
        store_close(st);
    }
    free(path);
}

static void put_client(struct store *st, const char *id, int64_t created_at)
{
    struct err err = {0};
    struct store_oauth_client c = {.created_at = created_at};
    snprintf(c.id, sizeof(c.id), "%s", id);
    snprintf(c.kind, sizeof(c.kind), "registered");
    snprintf(c.name, sizeof(c.name), "%s", id);
    snprintf(c.auth_method, sizeof(c.auth_method), "none");
    c.redirect_uris = xstrdup("[\"https://app.example/cb\"]");
    CHECK_INT_EQ(store_oauth_client_put(st, &c, &err), 0);
    store_oauth_client_clear(&c);
}

/* A registration flood reached the 10,000-client cap in 92 s and every real client was refused
 * for a day: now the oldest unapproved client makes room, found by an index (not a scan), and a
 * client a user approved is never the one. */
TEST(store_evicts_the_oldest_unapproved_client_never_an_approved_one)
{
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &st, &err), 0);
    struct store_user u;
    CHECK_INT_EQ(store_user_add(st, "alice", &u, &err), 0);
    int64_t now = time_now_ms();
    put_client(st, "cli_approved", now - 3000); /* the oldest, but approved */
    put_client(st, "cli_old", now - 2000);
    put_client(st, "cli_new", now - 1000);
    CHECK_INT_EQ(store_oauth_clients_prune(st, 3600000, &err), 3);
    struct store_oauth_grant g;
    CHECK_INT_EQ(store_oauth_grant_approve(st, u.id, "cli_approved", "A", "app.example", "sandbox",
                                           &g, &err),
                 1);
    CHECK_INT_EQ(
        store_oauth_grant_approve(st, u.id, "cli_approved", "A", "app.example", "runs", &g, &err),
        0);
    CHECK_INT_EQ(store_oauth_clients_prune(st, 3600000, &err), 2);
    char evicted[STORE_OAUTH_CLIENT_ID_MAX + 1];
    CHECK_INT_EQ(store_oauth_client_evict(st, evicted, &err), 1);
    CHECK_STR_EQ(evicted, "cli_old");
    CHECK_INT_EQ(store_oauth_client_evict(st, evicted, &err), 1);
    CHECK_STR_EQ(evicted, "cli_new");
    CHECK_INT_EQ(store_oauth_client_evict(st, evicted, &err), 0);
    CHECK_STR_EQ(evicted, "");
    /* not even once its grant is revoked: only the daily prune forgets it then */
    CHECK_INT_EQ(store_oauth_grant_revoke(st, g.id, u.id, &err), 0);
    CHECK_INT_EQ(store_oauth_client_evict(st, evicted, &err), 0);
    struct store_oauth_client c;
    CHECK_INT_EQ(store_oauth_client_get(st, "cli_approved", &c, &err), 0);
    store_oauth_client_clear(&c);
    CHECK_INT_EQ(store_oauth_client_get(st, "cli_old", &c, &err), -ENOENT);
    CHECK_INT_EQ(store_oauth_clients_prune(st, 3600000, &err), 0);
    store_close(st);
    free(path);
}

TEST_MAIN()

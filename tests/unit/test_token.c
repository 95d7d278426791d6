#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "harness.h"
#include "proxy/token.h"

static const char key[] = "0123456789abcdef0123456789abcdef";

static struct proxy_claims sample(void)
{
    struct proxy_claims c = {0};
    strcpy(c.user, "usr_1");
    strcpy(c.run, "run_1");
    strcpy(c.session, "ses_1");
    strcpy(c.sandbox, "sbx_1");
    strcpy(c.services[0], "anthropic");
    strcpy(c.services[1], "github");
    c.nservices = 2;
    c.iat = 1000;
    c.exp = 2000;
    strcpy(c.jti, "jti_1");
    return c;
}

static char *mint(const struct proxy_claims *c)
{
    char *tok = NULL;
    struct err err = {0};
    CHECK_INT_EQ(proxy_token_mint(key, strlen(key), c, &tok, &err), 0);
    return tok;
}

TEST(token_round_trip)
{
    struct proxy_claims c = sample(), out;
    char *tok = mint(&c);
    struct err err = {0};
    CHECK_INT_EQ(proxy_token_verify(key, strlen(key), tok, strlen(tok), 1500, &out, &err), 0);
    CHECK_STR_EQ(out.user, "usr_1");
    CHECK_STR_EQ(out.run, "run_1");
    CHECK_STR_EQ(out.session, "ses_1");
    CHECK_STR_EQ(out.sandbox, "sbx_1");
    CHECK_STR_EQ(out.jti, "jti_1");
    CHECK_INT_EQ(out.nservices, 2);
    CHECK(proxy_claims_grant(&out, "github"));
    CHECK(!proxy_claims_grant(&out, "openai"));
    CHECK_INT_EQ(out.exp, 2000);
    CHECK_STR_EQ(out.repo, "");
    CHECK_STR_EQ(out.branch, "");
    free(tok);
}

/* The repository and the one branch a token may push survive the round trip; a token without
 * them names none. */
TEST(token_repo_and_push_branch)
{
    struct proxy_claims c = sample(), out;
    strcpy(c.repo, "acme/widget");
    strcpy(c.branch, "sandbox-mcp/abcd1234-add-hello");
    char *tok = mint(&c);
    struct err err = {0};
    CHECK_INT_EQ(proxy_token_verify(key, strlen(key), tok, strlen(tok), 1500, &out, &err), 0);
    CHECK_STR_EQ(out.repo, "acme/widget");
    CHECK_STR_EQ(out.branch, "sandbox-mcp/abcd1234-add-hello");
    free(tok);
}

TEST(token_warm_claim)
{
    struct proxy_claims c = sample(), out;
    char *tok = mint(&c);
    struct err err = {0};
    CHECK_INT_EQ(proxy_token_verify(key, strlen(key), tok, strlen(tok), 1500, &out, &err), 0);
    CHECK(!out.warm); /* a run's token */
    free(tok);
    c.run[0] = '\0';
    c.warm = true;
    tok = mint(&c);
    CHECK_STR_CONTAINS(tok, ".");
    CHECK_INT_EQ(proxy_token_verify(key, strlen(key), tok, strlen(tok), 1500, &out, &err), 0);
    CHECK(out.warm);
    CHECK_STR_EQ(out.run, "");
    CHECK_STR_EQ(out.sandbox, "sbx_1");
    free(tok);
}

/* A pooled agent's key: the sandbox's, under the server's key, and no other's. */
TEST(token_sandbox_key)
{
    char a[PROXY_SANDBOX_KEY_LEN + 1], b[PROXY_SANDBOX_KEY_LEN + 1];
    proxy_sandbox_key(key, strlen(key), "sbx_1", a);
    CHECK_INT_EQ(strlen(a), PROXY_SANDBOX_KEY_LEN);
    CHECK(strncmp(a, PROXY_SANDBOX_KEY_PREFIX, strlen(PROXY_SANDBOX_KEY_PREFIX)) == 0);
    proxy_sandbox_key(key, strlen(key), "sbx_1", b);
    CHECK_STR_EQ(a, b); /* no state: the same after a restart */
    CHECK(proxy_sandbox_key_is(key, strlen(key), "sbx_1", a, strlen(a)));
    proxy_sandbox_key(key, strlen(key), "sbx_2", b);
    CHECK(strcmp(a, b) != 0);
    CHECK(!proxy_sandbox_key_is(key, strlen(key), "sbx_2", a, strlen(a)));
    proxy_sandbox_key("another key", 11, "sbx_1", b);
    CHECK(strcmp(a, b) != 0);
    CHECK(!proxy_sandbox_key_is("another key", 11, "sbx_1", a, strlen(a)));
    CHECK(!proxy_sandbox_key_is(key, strlen(key), "sbx_1", a, strlen(a) - 1));
    CHECK(!proxy_sandbox_key_is(key, strlen(key), "", a, strlen(a)));
    a[PROXY_SANDBOX_KEY_LEN - 1] ^= 1;
    CHECK(!proxy_sandbox_key_is(key, strlen(key), "sbx_1", a, strlen(a)));
}

TEST(token_expired_and_wrong_key)
{
    struct proxy_claims c = sample(), out;
    char *tok = mint(&c);
    struct err err = {0};
    CHECK_INT_EQ(proxy_token_verify(key, strlen(key), tok, strlen(tok), 2000, &out, &err), -EACCES);
    CHECK_STR_EQ(err.msg, "token expired");
    CHECK_INT_EQ(proxy_token_verify("other-key-other-key-other-key-00", 32, tok, strlen(tok), 1500,
                                    &out, &err),
                 -EACCES);
    CHECK_STR_EQ(err.msg, "bad token signature");
    free(tok);
}

/* Build header.payload.signature from JSON texts (signature given as is). */
static char *forge(const char *header, const char *payload, const char *sig)
{
    char h[512], p[512];
    base64url_encode(header, strlen(header), h);
    base64url_encode(payload, strlen(payload), p);
    size_t n = strlen(h) + strlen(p) + strlen(sig) + 3;
    char *t = malloc(n);
    snprintf(t, n, "%s.%s.%s", h, p, sig);
    return t;
}

TEST(token_refuses_other_algorithms)
{
    struct proxy_claims out;
    struct err err = {0};
    static const char payload[] =
        "{\"user\":\"usr_1\",\"iat\":1000,\"exp\":2000,\"jti\":\"j\",\"svc\":[\"anthropic\"]}";
    static const char *const headers[] = {
        "{\"alg\":\"none\",\"typ\":\"JWT\"}",
        "{\"alg\":\"HS512\"}",
        "{\"alg\":\"RS256\"}",
        "{\"alg\":\"hs256\"}",
        "{}",
        "[]",
        "not json",
    };
    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
        char *t = forge(headers[i], payload, "");
        CHECK_INT_EQ(proxy_token_verify(key, strlen(key), t, strlen(t), 1500, &out, &err), -EACCES);
        CHECK_STR_EQ(err.msg, "token algorithm must be HS256");
        free(t);
    }
}

TEST(token_tampered_payload_fails_signature)
{
    struct proxy_claims c = sample(), out;
    char *tok = mint(&c);
    /* swap the payload for one granting more, keep header and signature */
    char *dot1 = strchr(tok, '.'), *dot2 = strchr(dot1 + 1, '.');
    char p[512];
    const char *payload = "{\"user\":\"usr_1\",\"iat\":1000,\"exp\":9999999999,\"jti\":\"j\","
                          "\"svc\":[\"anthropic\",\"openai\"]}";
    base64url_encode(payload, strlen(payload), p);
    size_t n = (size_t)(dot1 - tok) + strlen(p) + strlen(dot2) + 2;
    char *t = malloc(n);
    snprintf(t, n, "%.*s.%s%s", (int)(dot1 - tok), tok, p, dot2);
    struct err err = {0};
    CHECK_INT_EQ(proxy_token_verify(key, strlen(key), t, strlen(t), 1500, &out, &err), -EACCES);
    CHECK_STR_EQ(err.msg, "bad token signature");
    free(t);
    free(tok);
}

TEST(token_malformed_inputs)
{
    struct proxy_claims out;
    struct err err = {0};
    static const char *const bad[] = {"", "abc", "a.b", "a.b.c", "....", "eyJhbGciOiJIUzI1NiJ9"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_INT_EQ(proxy_token_verify(key, strlen(key), bad[i], strlen(bad[i]), 1500, &out, &err),
                     -EACCES);
    char big[PROXY_TOKEN_MAX + 2];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CHECK_INT_EQ(proxy_token_verify(key, strlen(key), big, strlen(big), 1500, &out, &err), -EACCES);
    /* an embedded NUL: length says more than the string holds */
    CHECK_INT_EQ(proxy_token_verify(key, strlen(key), "a\0b", 3, 1500, &out, &err), -EACCES);
}

TEST_MAIN()

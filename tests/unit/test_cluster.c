/* The internal channel's signatures: what a node signs, another with the same secret accepts,
 * and nothing else. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cluster/cluster.h"
#include "harness.h"

static const char SECRET[] = "0123456789abcdef0123456789abcdef-cluster";
static const char BODY[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}";

static void sign(const struct cluster_key *k, int64_t t, char *out, size_t cap)
{
    struct cluster_claims cl = {.scopes = 3, .time = t};
    snprintf(cl.node, sizeof(cl.node), "node1");
    snprintf(cl.user_id, sizeof(cl.user_id), "usr_alice");
    snprintf(cl.user_name, sizeof(cl.user_name), "alice");
    CHECK_INT_EQ(cluster_sign(k, &cl, "/internal/mcp", BODY, strlen(BODY), out, cap), 0);
}

TEST(a_signed_call_verifies_with_the_same_secret_and_names_the_user)
{
    struct cluster_key k;
    cluster_key_init(&k, SECRET);
    char h[512];
    sign(&k, 1000, h, sizeof(h));
    struct cluster_claims cl;
    struct err err = {0};
    CHECK_INT_EQ(
        cluster_verify(&k, h, strlen(h), "/internal/mcp", BODY, strlen(BODY), 1030, &cl, &err), 0);
    CHECK_STR_EQ(cl.user_id, "usr_alice");
    CHECK_STR_EQ(cl.user_name, "alice");
    CHECK_STR_EQ(cl.node, "node1");
    CHECK_INT_EQ(cl.scopes, 3);
}

TEST(anything_changed_is_refused)
{
    struct cluster_key k, other;
    cluster_key_init(&k, SECRET);
    cluster_key_init(&other, "another secret, just as long as the first one");
    char h[512];
    sign(&k, 1000, h, sizeof(h));
    struct cluster_claims cl;
    struct err err = {0};
    /* another body, another path, another key */
    CHECK_INT_EQ(cluster_verify(&k, h, strlen(h), "/internal/mcp", "{}", 2, 1000, &cl, &err),
                 -EACCES);
    CHECK_STR_CONTAINS(err.msg, "bad signature");
    CHECK_INT_EQ(cluster_verify(&k, h, strlen(h), "/mcp", BODY, strlen(BODY), 1000, &cl, &err),
                 -EACCES);
    CHECK_INT_EQ(
        cluster_verify(&other, h, strlen(h), "/internal/mcp", BODY, strlen(BODY), 1000, &cl, &err),
        -EACCES);
    /* each claim: the user, the scopes, the time */
    const char *const edits[][2] = {{"u=usr_alice", "u=usr_bobby"},
                                    {"s=3", "s=7"},
                                    {"t=1000", "t=1001"},
                                    {"m=alice", "m=admin"}};
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        char t[512];
        snprintf(t, sizeof(t), "%s", h);
        char *at = strstr(t, edits[i][0]);
        CHECK(at != NULL);
        if (!at)
            continue;
        memcpy(at, edits[i][1], strlen(edits[i][1]));
        CHECK_INT_EQ(
            cluster_verify(&k, t, strlen(t), "/internal/mcp", BODY, strlen(BODY), 1000, &cl, &err),
            -EACCES);
    }
    /* no key here at all */
    struct cluster_key none;
    cluster_key_init(&none, NULL);
    CHECK_INT_EQ(
        cluster_verify(&none, h, strlen(h), "/internal/mcp", BODY, strlen(BODY), 1000, &cl, &err),
        -EACCES);
    CHECK_STR_CONTAINS(err.msg, "no CLUSTER_SECRET");
    CHECK_INT_EQ(cluster_sign(&none, &cl, "/internal/mcp", BODY, strlen(BODY), h, sizeof(h)),
                 -EINVAL);
}

TEST(a_signature_over_a_minute_old_or_ahead_is_refused)
{
    struct cluster_key k;
    cluster_key_init(&k, SECRET);
    char h[512];
    sign(&k, 1000, h, sizeof(h));
    struct cluster_claims cl;
    struct err err = {0};
    CHECK_INT_EQ(
        cluster_verify(&k, h, strlen(h), "/internal/mcp", BODY, strlen(BODY), 1061, &cl, &err),
        -ETIMEDOUT);
    CHECK_INT_EQ(
        cluster_verify(&k, h, strlen(h), "/internal/mcp", BODY, strlen(BODY), 939, &cl, &err),
        -ETIMEDOUT);
    CHECK_INT_EQ(
        cluster_verify(&k, h, strlen(h), "/internal/mcp", BODY, strlen(BODY), 1060, &cl, &err), 0);
}

TEST(malformed_headers_and_fields_that_would_forge_others_are_refused)
{
    struct cluster_key k;
    cluster_key_init(&k, SECRET);
    struct cluster_claims cl = {.time = 1000};
    snprintf(cl.node, sizeof(cl.node), "node1");
    snprintf(cl.user_id, sizeof(cl.user_id), "usr_a,u=usr_b");
    char h[512];
    CHECK_INT_EQ(cluster_sign(&k, &cl, "/internal/mcp", "", 0, h, sizeof(h)), -EINVAL);
    snprintf(cl.user_id, sizeof(cl.user_id), "usr_a");
    snprintf(cl.user_name, sizeof(cl.user_name), "a\nb");
    CHECK_INT_EQ(cluster_sign(&k, &cl, "/internal/mcp", "", 0, h, sizeof(h)), -EINVAL);
    struct err err = {0};
    const char *bad[] = {"", "t=1000", "t=x,n=a,u=b,m=c,s=1,v1=" /* no digits */,
                         "t=1000,n=a,u=,m=c,s=1,v1=00", "garbage without fields"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_INT_EQ(
            cluster_verify(&k, bad[i], strlen(bad[i]), "/internal/mcp", "", 0, 1000, &cl, &err),
            -EACCES);
}

TEST(the_head_proof_holds_only_for_the_key_and_a_minute)
{
    struct cluster_key k, other;
    cluster_key_init(&k, SECRET);
    cluster_key_init(&other, "another secret, just as long as the first one");
    char h[200];
    CHECK_INT_EQ(cluster_head_sign(&k, "node1", 1000, h, sizeof(h)), 0);
    CHECK(cluster_head_ok(&k, h, strlen(h), 1030));
    CHECK(!cluster_head_ok(&other, h, strlen(h), 1030));
    CHECK(!cluster_head_ok(&k, h, strlen(h), 1061));
    char t[200];
    snprintf(t, sizeof(t), "%s", h);
    memcpy(strstr(t, "n=node1"), "n=node2", 7);
    CHECK(!cluster_head_ok(&k, t, strlen(t), 1000));
    CHECK(!cluster_head_ok(&k, "t=1000,n=node1,v1=", 18, 1000));
    struct cluster_key none;
    cluster_key_init(&none, NULL);
    CHECK(!cluster_head_ok(&none, h, strlen(h), 1000));
    CHECK_INT_EQ(cluster_head_sign(&none, "node1", 1000, h, sizeof(h)), -EINVAL);
}

TEST_MAIN()

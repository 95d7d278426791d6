/* The internal channel's signatures: what a node signs, another with the same secret accepts,
 * and nothing else. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "store/store.h"
#include "harness.h"

static const char SECRET[] = "0123456789abcdef0123456789abcdef-cluster";
static const char BODY[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}";

/* cluster_verify with a set of nonces of its own, so that each check sees the header fresh */
static int verify(const struct cluster_key *k, const char *h, size_t hlen, const char *path,
                  const void *body, size_t len, int64_t now_s, struct cluster_claims *cl,
                  struct err *err)
{
    struct cluster_nonces *seen = cluster_nonces_new(1024);
    int r = cluster_verify(k, seen, h, hlen, "POST", path, body, len, now_s, cl, err);
    cluster_nonces_free(seen);
    return r;
}

static void sign(const struct cluster_key *k, int64_t t, char *out, size_t cap)
{
    struct cluster_claims cl = {.scopes = 3, .time = t};
    snprintf(cl.node, sizeof(cl.node), "node1");
    snprintf(cl.user_id, sizeof(cl.user_id), "usr_alice");
    snprintf(cl.user_name, sizeof(cl.user_name), "alice");
    CHECK_INT_EQ(cluster_sign(k, &cl, "POST", "/internal/mcp", BODY, strlen(BODY), out, cap), 0);
}

TEST(a_signed_call_verifies_with_the_same_secret_and_names_the_user)
{
    struct cluster_key k;
    cluster_key_init(&k, SECRET);
    char h[512];
    sign(&k, 1000, h, sizeof(h));
    struct cluster_claims cl;
    struct err err = {0};
    CHECK_INT_EQ(verify(&k, h, strlen(h), "/internal/mcp", BODY, strlen(BODY), 1030, &cl, &err), 0);
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
    CHECK_INT_EQ(verify(&k, h, strlen(h), "/internal/mcp", "{}", 2, 1000, &cl, &err), -EACCES);
    CHECK_STR_CONTAINS(err.msg, "bad signature");
    CHECK_INT_EQ(verify(&k, h, strlen(h), "/mcp", BODY, strlen(BODY), 1000, &cl, &err), -EACCES);
    CHECK_INT_EQ(verify(&other, h, strlen(h), "/internal/mcp", BODY, strlen(BODY), 1000, &cl, &err),
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
        CHECK_INT_EQ(verify(&k, t, strlen(t), "/internal/mcp", BODY, strlen(BODY), 1000, &cl, &err),
                     -EACCES);
    }
    /* no key here at all */
    struct cluster_key none;
    cluster_key_init(&none, NULL);
    CHECK_INT_EQ(verify(&none, h, strlen(h), "/internal/mcp", BODY, strlen(BODY), 1000, &cl, &err),
                 -EACCES);
    CHECK_STR_CONTAINS(err.msg, "no CLUSTER_SECRET");
    CHECK_INT_EQ(
        cluster_sign(&none, &cl, "POST", "/internal/mcp", BODY, strlen(BODY), h, sizeof(h)),
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
    CHECK_INT_EQ(verify(&k, h, strlen(h), "/internal/mcp", BODY, strlen(BODY), 1061, &cl, &err),
                 -ETIMEDOUT);
    CHECK_INT_EQ(verify(&k, h, strlen(h), "/internal/mcp", BODY, strlen(BODY), 939, &cl, &err),
                 -ETIMEDOUT);
    CHECK_INT_EQ(verify(&k, h, strlen(h), "/internal/mcp", BODY, strlen(BODY), 1060, &cl, &err), 0);
}

TEST(malformed_headers_and_fields_that_would_forge_others_are_refused)
{
    struct cluster_key k;
    cluster_key_init(&k, SECRET);
    struct cluster_claims cl = {.time = 1000};
    snprintf(cl.node, sizeof(cl.node), "node1");
    snprintf(cl.user_id, sizeof(cl.user_id), "usr_a,u=usr_b");
    char h[512];
    CHECK_INT_EQ(cluster_sign(&k, &cl, "POST", "/internal/mcp", "", 0, h, sizeof(h)), -EINVAL);
    snprintf(cl.user_id, sizeof(cl.user_id), "usr_a");
    snprintf(cl.user_name, sizeof(cl.user_name), "a\nb");
    CHECK_INT_EQ(cluster_sign(&k, &cl, "POST", "/internal/mcp", "", 0, h, sizeof(h)), -EINVAL);
    struct err err = {0};
    const char *bad[] = {"", "t=1000", "t=x,n=a,u=b,m=c,s=1,v1=" /* no digits */,
                         "t=1000,n=a,u=,m=c,s=1,v1=00", "garbage without fields"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_INT_EQ(verify(&k, bad[i], strlen(bad[i]), "/internal/mcp", "", 0, 1000, &cl, &err),
                     -EACCES);
}

static int head_check(const struct cluster_key *k, struct cluster_nonces *seen, const char *h,
                      const char *method, const char *path, size_t len, int64_t now_s)
{
    return cluster_head_check(k, seen, h, strlen(h), method, strlen(method), path, strlen(path),
                              len, now_s);
}

TEST(the_head_proof_holds_only_for_the_key_and_a_minute)
{
    struct cluster_key k, other;
    cluster_key_init(&k, SECRET);
    cluster_key_init(&other, "another secret, just as long as the first one");
    struct cluster_nonces *seen = cluster_nonces_new(1024);
    char h[200];
    CHECK_INT_EQ(cluster_head_sign(&k, "node1", "POST", "/internal/mcp", 5000, 1000, h, sizeof(h)),
                 0);
    CHECK_INT_EQ(head_check(&other, seen, h, "POST", "/internal/mcp", 5000, 1030), -EACCES);
    CHECK_INT_EQ(head_check(&k, seen, h, "POST", "/internal/mcp", 5000, 1061), -ETIMEDOUT);
    char t[200];
    snprintf(t, sizeof(t), "%s", h);
    memcpy(strstr(t, "n=node1"), "n=node2", 7);
    CHECK_INT_EQ(head_check(&k, seen, t, "POST", "/internal/mcp", 5000, 1000), -EACCES);
    CHECK_INT_EQ(head_check(&k, seen, "t=1000,n=node1,v1=", "POST", "/internal/mcp", 5000, 1000),
                 -EACCES);
    struct cluster_key none;
    cluster_key_init(&none, NULL);
    CHECK_INT_EQ(head_check(&none, seen, h, "POST", "/internal/mcp", 5000, 1000), -EACCES);
    CHECK_INT_EQ(cluster_head_sign(&none, "node1", "POST", "/internal/mcp", 0, 1000, h, sizeof(h)),
                 -EINVAL);
    cluster_nonces_free(seen);
}

/* Issue 32, point 14: a proof over the time and the node alone, accepted on any path, let 40
 * unauthenticated 4 MiB bodies in (RSS 20 -> 183 MiB against a 16 MiB pre-auth total). It now
 * holds for one method, path and length, once. */
TEST(a_head_proof_admits_one_request_of_its_path_and_length_once)
{
    struct cluster_key k;
    cluster_key_init(&k, SECRET);
    struct cluster_nonces *seen = cluster_nonces_new(1024);
    char h[200];
    CHECK_INT_EQ(
        cluster_head_sign(&k, "node1", "POST", "/internal/mcp", 4 << 20, 1000, h, sizeof(h)), 0);
    /* another path, length or method: refused, and the nonce is not spent by them */
    CHECK_INT_EQ(head_check(&k, seen, h, "POST", "/mcp", 4 << 20, 1000), -EACCES);
    CHECK_INT_EQ(head_check(&k, seen, h, "POST", "/oauth/token", 4 << 20, 1000), -EACCES);
    CHECK_INT_EQ(head_check(&k, seen, h, "POST", "/internal/mcp", (4 << 20) + 1, 1000), -EACCES);
    CHECK_INT_EQ(head_check(&k, seen, h, "POST", "/internal/mcp", 100, 1000), -EACCES);
    CHECK_INT_EQ(head_check(&k, seen, h, "PUT", "/internal/mcp", 4 << 20, 1000), -EACCES);
    /* its own: once */
    CHECK_INT_EQ(head_check(&k, seen, h, "POST", "/internal/mcp", 4 << 20, 1010), 0);
    CHECK_INT_EQ(head_check(&k, seen, h, "POST", "/internal/mcp", 4 << 20, 1011), -EALREADY);
    CHECK_INT_EQ(head_check(&k, seen, h, "POST", "/internal/mcp", 4 << 20, 1060), -EALREADY);
    /* the nonce is bound: another one in its place does not verify */
    char t[200];
    snprintf(t, sizeof(t), "%s", h);
    char *r = strstr(t, "r=");
    CHECK(r != NULL);
    if (r)
        r[2] = r[2] == '0' ? '1' : '0';
    CHECK_INT_EQ(head_check(&k, seen, t, "POST", "/internal/mcp", 4 << 20, 1010), -EACCES);
    /* two proofs for the same request are two nonces: each admits one */
    char h2[200];
    CHECK_INT_EQ(
        cluster_head_sign(&k, "node1", "POST", "/internal/mcp", 4 << 20, 1000, h2, sizeof(h2)), 0);
    CHECK(strcmp(h, h2) != 0);
    CHECK_INT_EQ(head_check(&k, seen, h2, "POST", "/internal/mcp", 4 << 20, 1010), 0);
    cluster_nonces_free(seen);
}

/* Issue 32, point 13: a signed call was accepted again within its window (one forwarded
 * container_exec ran three times). */
TEST(a_replayed_signed_call_is_refused_and_a_fresh_one_served)
{
    struct cluster_key k;
    cluster_key_init(&k, SECRET);
    struct cluster_nonces *seen = cluster_nonces_new(1024);
    char h[512], h2[512];
    sign(&k, 1000, h, sizeof(h));
    sign(&k, 1000, h2, sizeof(h2));
    CHECK(strcmp(h, h2) != 0); /* each signature has a nonce of its own */
    struct cluster_claims cl;
    struct err err = {0};
    CHECK_INT_EQ(cluster_verify(&k, seen, h, strlen(h), "POST", "/internal/mcp", BODY, strlen(BODY),
                                1000, &cl, &err),
                 0);
    for (int64_t now = 1001; now <= 1060; now += 59) {
        CHECK_INT_EQ(cluster_verify(&k, seen, h, strlen(h), "POST", "/internal/mcp", BODY,
                                    strlen(BODY), now, &cl, &err),
                     -EALREADY);
        CHECK_STR_CONTAINS(err.msg, "replayed");
    }
    /* past the window it is refused by its time, the nonce forgotten or not */
    CHECK_INT_EQ(cluster_verify(&k, seen, h, strlen(h), "POST", "/internal/mcp", BODY, strlen(BODY),
                                1061, &cl, &err),
                 -ETIMEDOUT);
    CHECK_INT_EQ(cluster_verify(&k, seen, h2, strlen(h2), "POST", "/internal/mcp", BODY,
                                strlen(BODY), 1030, &cl, &err),
                 0);
    /* the method and the nonce are signed */
    char t[512];
    sign(&k, 1000, t, sizeof(t));
    CHECK_INT_EQ(cluster_verify(&k, seen, t, strlen(t), "GET", "/internal/mcp", BODY, strlen(BODY),
                                1000, &cl, &err),
                 -EACCES);
    char *r = strstr(t, "r=");
    CHECK(r != NULL);
    if (r)
        r[2] = r[2] == '0' ? '1' : '0';
    CHECK_INT_EQ(cluster_verify(&k, seen, t, strlen(t), "POST", "/internal/mcp", BODY, strlen(BODY),
                                1000, &cl, &err),
                 -EACCES);
    /* no nonce, or not 32 hex digits */
    const char *const bad[] = {"r=", "r=0123", "r=0123456789ABCDEF0123456789abcdef"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sign(&k, 1000, t, sizeof(t));
        char u[600], *at = strstr(t, "r=");
        CHECK(at != NULL);
        if (!at)
            continue;
        snprintf(u, sizeof(u), "%.*s%s%s", (int)(at - t), t, bad[i], at + 2 + 32);
        CHECK_INT_EQ(cluster_verify(&k, seen, u, strlen(u), "POST", "/internal/mcp", BODY,
                                    strlen(BODY), 1000, &cl, &err),
                     -EACCES);
        CHECK_STR_CONTAINS(err.msg, "malformed");
    }
    cluster_nonces_free(seen);
}

/* The set of nonces, under CLUSTER_NONCE_CACHE: every nonce spent within twice the window is
 * refused again, however many came (the set grows past its first allocation and keeps them);
 * full, it refuses new ones rather than forget; once their time is past, their room is free. */
TEST(the_nonce_set_remembers_every_nonce_of_the_window_and_refuses_when_full)
{
    struct cluster_key k;
    cluster_key_init(&k, SECRET);
    enum { MAX = 1500 };
    struct cluster_nonces *seen = cluster_nonces_new(MAX);
    static char hs[MAX][200];
    for (size_t i = 0; i < MAX; i++) {
        /* signed at times spread over 100 s, so that they leave out of order */
        int64_t t = 1000 + (int64_t)(i % 100);
        CHECK_INT_EQ(cluster_head_sign(&k, "node1", "POST", "/internal/mcp", i, t, hs[i], 200), 0);
        CHECK_INT_EQ(
            head_check(&k, seen, hs[i], "POST", "/internal/mcp", i, 1040 + (int64_t)i / 75), 0);
    }
    for (size_t i = 0; i < MAX; i++)
        CHECK_INT_EQ(head_check(&k, seen, hs[i], "POST", "/internal/mcp", i, 1060), -EALREADY);
    char h[200], s[512];
    CHECK_INT_EQ(cluster_head_sign(&k, "node1", "POST", "/internal/mcp", 1, 1100, h, sizeof(h)), 0);
    CHECK_INT_EQ(head_check(&k, seen, h, "POST", "/internal/mcp", 1, 1060), -EBUSY);
    sign(&k, 1100, s, sizeof(s));
    struct cluster_claims cl;
    struct err err = {0};
    CHECK_INT_EQ(cluster_verify(&k, seen, s, strlen(s), "POST", "/internal/mcp", BODY, strlen(BODY),
                                1060, &cl, &err),
                 -EBUSY);
    CHECK_STR_CONTAINS(err.msg, "CLUSTER_NONCE_CACHE");
    /* the first ones signed leave two windows after their time, so there is room */
    CHECK_INT_EQ(head_check(&k, seen, h, "POST", "/internal/mcp", 1, 1135), 0);
    CHECK_INT_EQ(head_check(&k, seen, h, "POST", "/internal/mcp", 1, 1136), -EALREADY);
    CHECK_INT_EQ(cluster_verify(&k, seen, s, strlen(s), "POST", "/internal/mcp", BODY, strlen(BODY),
                                1136, &cl, &err),
                 0);
    /* those still in their window are still refused, and more than a window after they were
     * signed, whatever the clock says */
    for (size_t i = 0; i < MAX; i++)
        if (1000 + (int64_t)(i % 100) + 60 >= 1136)
            CHECK_INT_EQ(head_check(&k, seen, hs[i], "POST", "/internal/mcp", i, 1136), -EALREADY);
    CHECK_INT_EQ(head_check(&k, seen, hs[99], "POST", "/internal/mcp", 99, 1130), -EALREADY);
    /* and when all have left, the set takes as many again */
    for (size_t i = 0; i < MAX; i++) {
        CHECK_INT_EQ(cluster_head_sign(&k, "node1", "POST", "/internal/mcp", i, 3000, hs[i], 200),
                     0);
        CHECK_INT_EQ(head_check(&k, seen, hs[i], "POST", "/internal/mcp", i, 3000), 0);
    }
    cluster_nonces_free(seen);
}

static char taken[64];
static int taken_calls;

static void on_taken(void *ctx, const char *session_id)
{
    snprintf(taken, sizeof(taken), "%s", session_id);
    taken_calls++;
}

/* A call for a session whose node has been silent past the lost timeout, before any node has
 * marked it lost, takes the session over here, and says so (the runs engine ends its runs:
 * the sweep that marks the node lost later no longer finds them by their session). */
TEST(a_session_taken_over_from_a_silent_node_is_reported)
{
    char *path = test_temp_db();
    struct store *a = NULL, *b = NULL;
    struct err err = {0};
    CHECK_INT_EQ(store_open(path, &a, &err), 0);
    CHECK_INT_EQ(store_open(path, &b, &err), 0);
    if (!a || !b)
        return;
    store_set_node(a, "node-a");
    store_set_node(b, "node-b");
    /* node-a last beat long ago, and no node has swept it yet */
    struct store_node na = {.max_sandboxes = 8, .max_runs = 2, .started_at = 1000};
    snprintf(na.id, sizeof(na.id), "node-a");
    snprintf(na.url, sizeof(na.url), "http://127.0.0.1:18001");
    CHECK_INT_EQ(store_node_register(a, &na, &err), 0);
    struct store_user u;
    CHECK_INT_EQ(store_user_add(a, "alice", &u, &err), 0);
    struct store_session ses = {0};
    snprintf(ses.id, sizeof(ses.id), "ses_on_a");
    snprintf(ses.user_id, sizeof(ses.user_id), "%s", u.id);
    snprintf(ses.agent, sizeof(ses.agent), "opencode");
    CHECK_INT_EQ(store_session_create(a, &ses, &err), 0);
    struct cluster_config cc = {.node_id = "node-b",
                                .node_url = "http://127.0.0.1:18002",
                                .heartbeat_ms = 1000,
                                .lost_ms = 3000,
                                .max_sandboxes = 8,
                                .max_runs = 2,
                                .max_nonces = 16};
    struct cluster *c = NULL;
    CHECK_INT_EQ(cluster_new(&cc, b, &c, &err), 0);
    cluster_on_taken(c, on_taken, NULL);
    char url[256], node[64];
    CHECK_INT_EQ(cluster_route_session(c, u.id, "ses_on_a", url, node, &err), 0);
    CHECK_INT_EQ(taken_calls, 1);
    CHECK_STR_EQ(taken, "ses_on_a");
    struct store_session got;
    CHECK_INT_EQ(store_session_get(b, u.id, "ses_on_a", &got, &err), 0);
    CHECK_STR_EQ(got.node_id, "node-b");
    /* served here from now on: nothing more is taken */
    CHECK_INT_EQ(cluster_route_session(c, u.id, "ses_on_a", url, node, &err), 0);
    CHECK_INT_EQ(taken_calls, 1);
    cluster_free(c);
    store_close(a);
    store_close(b);
    unlink(path);
    free(path);
}

TEST_MAIN()

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "harness.h"
#include "mcp/request_state.h"

static unsigned char key[SEAL_KEY_BYTES], other_key[SEAL_KEY_BYTES];
static const struct mcp_state_scope scope = {"usr_alice", "tools/call", "deploy"};
#define NOW 1700000000000LL
#define TTL 60000

static void keys(void)
{
    CHECK(sodium_init() >= 0);
    randombytes_buf(key, sizeof(key));
    randombytes_buf(other_key, sizeof(other_key));
}

/* Seal {"step":"confirm"} for scope at NOW. */
static char *sealed_state(void)
{
    json_t *state = json_pack("{s:s, s:i}", "step", "confirm", "run", 42);
    char *text = NULL;
    struct err err = {0};
    CHECK_INT_EQ(mcp_state_seal(key, &scope, state, NOW, TTL, &text, &err), 0);
    json_decref(state);
    return text;
}

static int open_as(const unsigned char *k, const struct mcp_state_scope *sc, const char *text,
                   size_t len, int64_t now, char *msg)
{
    json_t *state = NULL;
    struct err err = {0};
    int r = mcp_state_open(k, sc, text, len, now, &state, &err);
    if (r == 0) {
        CHECK_STR_EQ(json_string_value(json_object_get(state, "step")), "confirm");
        CHECK_INT_EQ(json_integer_value(json_object_get(state, "run")), 42);
        json_decref(state);
    } else if (msg) {
        strcpy(msg, err.msg);
    }
    return r;
}

TEST(request_state_opens_for_its_user_request_and_time)
{
    keys();
    char *text = sealed_state();
    CHECK(strlen(text) <= MCP_REQUEST_STATE_MAX);
    /* sealed: neither the state nor whom it is for can be read */
    CHECK(strstr(text, "confirm") == NULL);
    for (const char *p = text; *p; p++)
        CHECK(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *p));
    CHECK_INT_EQ(open_as(key, &scope, text, strlen(text), NOW, NULL), 0);
    CHECK_INT_EQ(open_as(key, &scope, text, strlen(text), NOW + TTL - 1, NULL), 0);
    /* a fresh nonce each time: two states for the same thing differ */
    char *again = sealed_state();
    CHECK(strcmp(text, again) != 0);
    free(again);
    free(text);
}

TEST(request_state_refuses_another_user_request_or_tool)
{
    keys();
    char *text = sealed_state();
    char msg[256];
    struct mcp_state_scope bob = {"usr_bob", "tools/call", "deploy"};
    CHECK_INT_EQ(open_as(key, &bob, text, strlen(text), NOW, msg), -EPERM);
    CHECK(strstr(msg, "another user") != NULL);
    struct mcp_state_scope tool_b = {"usr_alice", "tools/call", "delete"};
    CHECK_INT_EQ(open_as(key, &tool_b, text, strlen(text), NOW, msg), -EXDEV);
    CHECK(strstr(msg, "another request") != NULL);
    struct mcp_state_scope prompt = {"usr_alice", "prompts/get", "deploy"};
    CHECK_INT_EQ(open_as(key, &prompt, text, strlen(text), NOW, msg), -EXDEV);
    free(text);
}

TEST(request_state_expires)
{
    keys();
    char *text = sealed_state();
    char msg[256];
    CHECK_INT_EQ(open_as(key, &scope, text, strlen(text), NOW + TTL, msg), -ETIME);
    CHECK(strstr(msg, "expired") != NULL);
    CHECK_INT_EQ(open_as(key, &scope, text, strlen(text), NOW + 10 * TTL, msg), -ETIME);
    free(text);
}

TEST(request_state_refuses_what_it_did_not_seal)
{
    keys();
    char *text = sealed_state();
    size_t n = strlen(text);
    char msg[256];
    /* another server's key */
    CHECK_INT_EQ(open_as(other_key, &scope, text, n, NOW, msg), -EBADMSG);
    CHECK(strstr(msg, "not one this server issued") != NULL);
    /* every character changed in turn */
    for (size_t i = 0; i < n; i++) {
        char *t = xstrdup(text);
        t[i] = t[i] == 'A' ? 'B' : 'A';
        CHECK_INT_EQ(open_as(key, &scope, t, n, NOW, NULL), -EBADMSG);
        free(t);
    }
    /* cut, extended (as the conformance suite does), other spellings of base64 */
    CHECK_INT_EQ(open_as(key, &scope, text, n - 1, NOW, NULL), -EBADMSG);
    CHECK_INT_EQ(open_as(key, &scope, text, 10, NOW, NULL), -EBADMSG);
    char *longer = xasprintf("%s-TAMPERED", text);
    CHECK_INT_EQ(open_as(key, &scope, longer, strlen(longer), NOW, NULL), -EBADMSG);
    free(longer);
    char *padded = xasprintf("%s=", text);
    CHECK_INT_EQ(open_as(key, &scope, padded, strlen(padded), NOW, NULL), -EBADMSG);
    free(padded);
    char *spaced = xasprintf(" %s", text);
    CHECK_INT_EQ(open_as(key, &scope, spaced, strlen(spaced), NOW, NULL), -EBADMSG);
    free(spaced);
    CHECK_INT_EQ(open_as(key, &scope, "", 0, NOW, NULL), -EBADMSG);
    CHECK_INT_EQ(open_as(key, &scope, "not base64!", 11, NOW, NULL), -EBADMSG);
    free(text);
}

TEST(request_state_size_is_capped_both_ways)
{
    keys();
    /* a state that would not fit is not issued */
    char *big = xmalloc(MCP_REQUEST_STATE_MAX + 1);
    memset(big, 'x', MCP_REQUEST_STATE_MAX);
    big[MCP_REQUEST_STATE_MAX] = '\0';
    json_t *state = json_pack("{s:s}", "blob", big);
    char *text = NULL;
    struct err err = {0};
    CHECK_INT_EQ(mcp_state_seal(key, &scope, state, NOW, TTL, &text, &err), -E2BIG);
    CHECK(text == NULL);
    json_decref(state);
    /* the largest that fits is issued and opens */
    json_t *fits = json_pack("{s:s#}", "blob", big, (size_t)2800);
    CHECK_INT_EQ(mcp_state_seal(key, &scope, fits, NOW, TTL, &text, &err), 0);
    CHECK(text && strlen(text) <= MCP_REQUEST_STATE_MAX);
    json_t *out = NULL;
    CHECK_INT_EQ(mcp_state_open(key, &scope, text, strlen(text), NOW, &out, &err), 0);
    CHECK_INT_EQ(json_string_length(json_object_get(out, "blob")), 2800);
    json_decref(out);
    json_decref(fits);
    free(text);
    /* a longer text from a client is refused before anything is decoded */
    CHECK_INT_EQ(mcp_state_open(key, &scope, big, MCP_REQUEST_STATE_MAX + 1, NOW, &out, &err),
                 -E2BIG);
    CHECK(strstr(err.msg, "longer than") != NULL);
    free(big);
}

TEST_MAIN()

/* Throttling of sign-in guesses, on an injected clock. */
#include <sodium.h>
#include <stdio.h>

#include "auth/throttle.h"
#include "harness.h"

#define MIN (60 * 1000)

static void reset(void)
{
    if (sodium_init() < 0)
        CHECK_FAIL_("sodium_init failed");
    throttle_reset();
}

/* Fail n times for user from addr at t, each as soon as allowed; returns the time after. */
static int64_t fail_n(const char *user, const char *addr, int64_t t, int n)
{
    for (int i = 0; i < n; i++) {
        t += throttle_wait_ms(user, addr, t);
        throttle_failure(user, addr, t);
    }
    return t;
}

TEST(free_failures_then_a_doubling_wait)
{
    reset();
    int64_t t = 1000000;
    for (int i = 0; i < THROTTLE_FREE; i++) {
        CHECK_INT_EQ(throttle_wait_ms("alice", "192.0.2.1", t), 0);
        throttle_failure("alice", "192.0.2.1", t);
        t += 10;
    }
    CHECK_INT_EQ(throttle_wait_ms("alice", "192.0.2.1", t), 0);
    throttle_failure("alice", "192.0.2.1", t); /* the sixth */
    CHECK_INT_EQ(throttle_wait_ms("alice", "192.0.2.1", t), 1000);
    CHECK_INT_EQ(throttle_wait_ms("alice", "192.0.2.1", t + 400), 600);
    CHECK_INT_EQ(throttle_wait_ms("alice", "192.0.2.1", t + 1000), 0);
    int64_t expect = 2000;
    for (int i = 0; i < 14; i++) {
        t += throttle_wait_ms("alice", "192.0.2.1", t);
        throttle_failure("alice", "192.0.2.1", t);
        CHECK_INT_EQ(throttle_wait_ms("alice", "192.0.2.1", t), expect);
        expect = expect * 2 > THROTTLE_MAX_WAIT_MS ? THROTTLE_MAX_WAIT_MS : expect * 2;
    }
    /* capped at 15 minutes, however many more */
    t = fail_n("alice", "192.0.2.1", t, 100);
    CHECK_INT_EQ(throttle_wait_ms("alice", "192.0.2.1", t), THROTTLE_MAX_WAIT_MS);
    CHECK_INT_EQ(THROTTLE_MAX_WAIT_MS, 15 * MIN);
}

TEST(names_and_addresses_count_on_their_own)
{
    reset();
    int64_t t = 5000;
    t = fail_n("alice", "192.0.2.1", t, THROTTLE_FREE + 1);
    /* alice from anywhere waits; so does anyone from that address */
    CHECK_INT_EQ(throttle_wait_ms("alice", "198.51.100.7", t), 1000);
    CHECK_INT_EQ(throttle_wait_ms("bob", "192.0.2.1", t), 1000);
    CHECK_INT_EQ(throttle_wait_ms("alice", NULL, t), 1000);
    CHECK_INT_EQ(throttle_wait_ms(NULL, "192.0.2.1", t), 1000);
    /* others do not */
    CHECK_INT_EQ(throttle_wait_ms("bob", "198.51.100.7", t), 0);
    CHECK_INT_EQ(throttle_wait_ms("", "", t), 0);
    CHECK_INT_EQ(throttle_wait_ms(NULL, NULL, t), 0);
    /* a name is not an address: an address that spells a user name is counted apart */
    CHECK_INT_EQ(throttle_wait_ms("192.0.2.1", "alice", t), 0);
    /* one address guessing many names is slowed down for all of them */
    reset();
    char name[32];
    for (int i = 0; i < THROTTLE_FREE + 3; i++) {
        snprintf(name, sizeof(name), "user%d", i);
        t += throttle_wait_ms(name, "203.0.113.9", t);
        throttle_failure(name, "203.0.113.9", t);
    }
    CHECK_INT_EQ(throttle_wait_ms("someone-new", "203.0.113.9", t), 4000);
    CHECK_INT_EQ(throttle_wait_ms("user0", "198.51.100.1", t), 0);
}

TEST(success_forgets_the_name_not_the_address)
{
    reset();
    int64_t t = 0;
    t = fail_n("alice", "192.0.2.1", t, THROTTLE_FREE + 2);
    CHECK_INT_EQ(throttle_wait_ms("alice", "198.51.100.7", t), 2000);
    t += 2000;
    throttle_success("alice", "192.0.2.1", t);
    CHECK_INT_EQ(throttle_wait_ms("alice", "198.51.100.7", t), 0);
    /* the address had its failures: its next one waits at once */
    throttle_failure("bob", "192.0.2.1", t);
    CHECK_INT_EQ(throttle_wait_ms("carol", "192.0.2.1", t), 4000);
    /* and alice starts again from nothing */
    throttle_failure("alice", "198.51.100.7", t);
    CHECK_INT_EQ(throttle_wait_ms("alice", "198.51.100.7", t), 0);
    throttle_success(NULL, "192.0.2.1", t);
    CHECK_INT_EQ(throttle_wait_ms(NULL, "192.0.2.1", t), 4000);
}

TEST(forgotten_after_a_quiet_while)
{
    reset();
    int64_t t = 0;
    t = fail_n("alice", NULL, t, THROTTLE_FREE);
    /* five failures, then quiet just short of the time: the sixth still waits after it */
    throttle_failure("alice", NULL, t + THROTTLE_FORGET_MS - 1);
    CHECK_INT_EQ(throttle_wait_ms("alice", NULL, t + THROTTLE_FORGET_MS - 1), 1000);
    reset();
    t = fail_n("alice", NULL, 0, THROTTLE_FREE);
    t += THROTTLE_FORGET_MS;
    t = fail_n("alice", NULL, t, THROTTLE_FREE);
    CHECK_INT_EQ(throttle_wait_ms("alice", NULL, t), 0);
    /* a wait counts as quiet only once it is over */
    t = fail_n("alice", NULL, t, 20);
    int64_t w = throttle_wait_ms("alice", NULL, t);
    CHECK_INT_EQ(w, THROTTLE_MAX_WAIT_MS);
    throttle_failure("alice", NULL, t + w + THROTTLE_FORGET_MS - 1);
    CHECK_INT_EQ(throttle_wait_ms("alice", NULL, t + w + THROTTLE_FORGET_MS - 1),
                 THROTTLE_MAX_WAIT_MS);
    t += w + THROTTLE_FORGET_MS - 1 + THROTTLE_MAX_WAIT_MS + THROTTLE_FORGET_MS;
    CHECK_INT_EQ(throttle_wait_ms("alice", NULL, t), 0);
    throttle_failure("alice", NULL, t);
    CHECK_INT_EQ(throttle_wait_ms("alice", NULL, t), 0);
}

TEST(a_flood_of_names_does_not_free_a_guessed_one)
{
    reset();
    int64_t t = 0;
    t = fail_n("alice", NULL, t, THROTTLE_FREE + 4);
    int64_t w = throttle_wait_ms("alice", NULL, t);
    CHECK_INT_EQ(w, 8000);
    /* far more names than the table holds, each failing twice, from many addresses */
    char name[32], addr[32];
    int n = 20 * THROTTLE_ENTRIES;
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "flood%d", i);
        snprintf(addr, sizeof(addr), "10.%d.%d.%d", (i >> 16) & 255, (i >> 8) & 255, i & 255);
        throttle_failure(name, addr, t + i / 100);
        throttle_failure(name, addr, t + i / 100);
    }
    t += n / 100;
    CHECK_INT_EQ(throttle_wait_ms("alice", NULL, t), w - n / 100);
    /* the table did not grow: the oldest flood names were pushed out (four more failures make
     * six for a name still counted, and a wait), the newest are still there */
    t = fail_n("flood0", NULL, t, 4);
    CHECK_INT_EQ(throttle_wait_ms("flood0", NULL, t), 0);
    snprintf(name, sizeof(name), "flood%d", n - 1);
    t = fail_n(name, NULL, t, 4);
    CHECK_INT_EQ(throttle_wait_ms(name, NULL, t), 1000);
}

TEST_MAIN()

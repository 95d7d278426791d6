/* The egress proxy's limits per sandbox. The bandwidth cap's token bucket (src/egress/rate.c), on
 * an injected clock: it starts full, refills at the rate without losing fractions of a byte, never
 * holds more than its burst, and says how long to wait for a given amount. The count of name
 * lookups alive (src/egress/resolve.c): per owner and in all. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "egress/egress.h"
#include "harness.h"

#define MiB (1024 * 1024)

TEST(starts_full_with_a_quarter_second_of_burst)
{
    struct egress_rate b;
    egress_rate_init(&b, 4 * MiB, 1000);
    CHECK_INT_EQ(b.burst, MiB);
    CHECK_INT_EQ(egress_rate_available(&b, 1000), MiB);
    /* a low rate still lets a whole read through at once */
    egress_rate_init(&b, 65536, 1000);
    CHECK_INT_EQ(b.burst, EGRESS_RATE_BURST_MIN);
    CHECK_INT_EQ(egress_rate_available(&b, 1000), EGRESS_RATE_BURST_MIN);
}

TEST(take_then_refill_at_the_rate)
{
    struct egress_rate b;
    egress_rate_init(&b, MiB, 0);
    egress_rate_take(&b, 200000);
    CHECK_INT_EQ(egress_rate_available(&b, 0), 256 * 1024 - 200000);
    egress_rate_take(&b, 256 * 1024 - 200000);
    CHECK_INT_EQ(egress_rate_available(&b, 0), 0);
    /* 100 ms at 1 MiB/s is 104857.6 bytes */
    CHECK_INT_EQ(egress_rate_available(&b, 100), 104857);
    CHECK_INT_EQ(egress_rate_available(&b, 100), 104857);
    egress_rate_take(&b, 104857);
    /* the 0.6 byte left over is kept: 0.6 + 0.4 makes the next whole byte */
    CHECK_INT_EQ(egress_rate_available(&b, 100), 0);
    CHECK_INT_EQ(egress_rate_available(&b, 200), 104858);
}

TEST(refills_a_millisecond_at_a_time_lose_nothing)
{
    struct egress_rate b;
    egress_rate_init(&b, 262147, 0); /* 262.147 bytes a millisecond */
    egress_rate_take(&b, UINT64_MAX);
    CHECK_INT_EQ(egress_rate_available(&b, 0), 0);
    for (int t = 1; t <= 200; t++)
        egress_rate_available(&b, t);
    CHECK_INT_EQ(egress_rate_available(&b, 200), 52429);
}

TEST(never_more_than_the_burst)
{
    struct egress_rate b;
    egress_rate_init(&b, 8 * MiB, 0);
    egress_rate_take(&b, MiB);
    CHECK_INT_EQ(egress_rate_available(&b, 0), MiB);
    CHECK_INT_EQ(egress_rate_available(&b, 1000), 2 * MiB);
    /* a day idle at the largest rate: full, not overflowed */
    egress_rate_init(&b, (uint64_t)1 << 40, 0);
    egress_rate_take(&b, 5);
    CHECK_INT_EQ(egress_rate_available(&b, 86400000), (uint64_t)1 << 38);
    egress_rate_take(&b, UINT64_MAX);
    CHECK_INT_EQ(egress_rate_available(&b, 86400000), 0);
    CHECK_INT_EQ(egress_rate_available(&b, INT64_MAX), (uint64_t)1 << 38);
}

TEST(a_clock_that_goes_back_adds_nothing)
{
    struct egress_rate b;
    egress_rate_init(&b, MiB, 5000);
    egress_rate_take(&b, UINT64_MAX);
    CHECK_INT_EQ(egress_rate_available(&b, 4000), 0);
    CHECK_INT_EQ(egress_rate_available(&b, 5000), 0);
    CHECK_INT_EQ(egress_rate_available(&b, 5010), 10485);
}

TEST(wait_for_an_amount)
{
    struct egress_rate b;
    egress_rate_init(&b, MiB, 0);
    CHECK_INT_EQ(egress_rate_wait_ms(&b, 65536, 0), 0);
    egress_rate_take(&b, UINT64_MAX);
    /* 64 KiB at 1 MiB/s: 62.5 ms, rounded up */
    CHECK_INT_EQ(egress_rate_wait_ms(&b, 65536, 0), 63);
    CHECK_INT_EQ(egress_rate_wait_ms(&b, 65536, 62), 1);
    CHECK_INT_EQ(egress_rate_wait_ms(&b, 65536, 63), 0);
    CHECK(egress_rate_available(&b, 63) >= 65536);
    /* more than the bucket holds is the burst: a quarter of a second from empty */
    egress_rate_take(&b, UINT64_MAX);
    CHECK_INT_EQ(egress_rate_wait_ms(&b, 100 * MiB, 63), 250);
    CHECK_INT_EQ(egress_rate_wait_ms(&b, 1, 63), 1);
}

TEST(rate_zero_is_no_cap)
{
    struct egress_rate b;
    egress_rate_init(&b, 0, 0);
    CHECK(egress_rate_available(&b, 0) == UINT64_MAX);
    egress_rate_take(&b, UINT64_MAX);
    CHECK(egress_rate_available(&b, 0) == UINT64_MAX);
    CHECK_INT_EQ(egress_rate_wait_ms(&b, 100 * MiB, 0), 0);
}

/* claim for a user (server false) or the server's own fetch with cause key */
static int claim(struct egress_lookups *t, bool server, const char *key, int max, struct err *err)
{
    const struct egress_owner o = {.server = server, .key = key, .max = max};
    return egress_lookups_claim(t, &o, EGRESS_LOOKUPS_RESERVED, err);
}

static void release(struct egress_lookups *t, bool server, const char *key)
{
    const struct egress_owner o = {.server = server, .key = key};
    egress_lookups_release(t, &o);
}

TEST(lookups_per_user_and_in_all)
{
    static struct egress_lookups t;
    struct err err = {0};
    for (int i = 0; i < 8; i++)
        CHECK_INT_EQ(claim(&t, false, "usr_a", 8, &err), 0);
    CHECK_INT_EQ(claim(&t, false, "usr_a", 8, &err), -EAGAIN);
    CHECK_STR_CONTAINS(err.msg, "8 name lookups of this user's sandboxes and runs are under way");
    /* another user, the server's own fetch with the same key, and lookups of nobody's, are not
     * held back by a's */
    CHECK_INT_EQ(claim(&t, false, "usr_b", 8, &err), 0);
    CHECK_INT_EQ(claim(&t, true, "usr_a", 2, &err), 0);
    CHECK_INT_EQ(claim(&t, false, NULL, 8, &err), 0);
    CHECK_INT_EQ(t.total, 11);
    CHECK_INT_EQ(t.users, 10);
    /* one of a's ends: a may start one more, and no more */
    release(&t, false, "usr_a");
    CHECK_INT_EQ(claim(&t, false, "usr_a", 8, &err), 0);
    CHECK_INT_EQ(claim(&t, false, "usr_a", 8, &err), -EAGAIN);
    release(&t, true, "usr_a");
    release(&t, false, NULL);
    release(&t, false, "usr_b");
    for (int i = 0; i < 8; i++)
        release(&t, false, "usr_a");
    CHECK_INT_EQ(t.total, 0);
    CHECK_INT_EQ(t.users, 0);
    for (int i = 0; i < EGRESS_LOOKUPS_MAX; i++)
        CHECK_INT_EQ(t.slot[i].n, 0);
}

/* Issue 32, point 11: one user's four sandboxes on names that never answer took all 32 lookups,
 * and other users and the server's own fetches (client metadata, notifications) got none. Now
 * the user is one owner whatever their sandboxes, and users together leave the reserve. */
TEST(lookups_users_leave_the_reserve_to_the_server)
{
    static struct egress_lookups t;
    struct err err = {0};
    /* four sandboxes of one user, eight hung names each: the user gets eight in all */
    int got = 0;
    for (int sbx = 0; sbx < 4; sbx++)
        for (int i = 0; i < 8; i++)
            got += claim(&t, false, "usr_greedy", 8, &err) == 0;
    CHECK_INT_EQ(got, 8);
    /* other users fill what users may have together: all but the reserve */
    char user[32];
    for (int users = 0; users < 100; users++) {
        snprintf(user, sizeof(user), "usr_%d", users / 8);
        if (claim(&t, false, user, 8, &err) < 0)
            break;
    }
    CHECK_INT_EQ(t.users, EGRESS_LOOKUPS_MAX - EGRESS_LOOKUPS_RESERVED);
    CHECK_STR_CONTAINS(err.msg, "(8 are kept for the server's own)");
    CHECK_INT_EQ(claim(&t, false, "usr_new", 8, &err), -EAGAIN);
    /* the server's own fetches still get the reserve, each cause its share of it */
    CHECK_INT_EQ(claim(&t, true, "192.0.2.1", 2, &err), 0);
    CHECK_INT_EQ(claim(&t, true, "192.0.2.1", 2, &err), 0);
    CHECK_INT_EQ(claim(&t, true, "192.0.2.1", 2, &err), -EAGAIN);
    CHECK_STR_CONTAINS(err.msg, "2 name lookups on behalf of '192.0.2.1' are under way");
    for (int i = 0; i < EGRESS_LOOKUPS_RESERVED - 2; i++)
        CHECK_INT_EQ(claim(&t, true, NULL, 2, &err), 0);
    /* the pool is full: nobody gets one */
    CHECK_INT_EQ(claim(&t, true, "192.0.2.2", 2, &err), -EAGAIN);
    CHECK_STR_CONTAINS(err.msg, "32 name lookups are under way");
    /* a user's ends: a user's may start again, and a server's ending frees one for the server
     * only as long as users are at their part */
    release(&t, false, "usr_greedy");
    CHECK_INT_EQ(claim(&t, false, "usr_new", 8, &err), 0);
    release(&t, true, "192.0.2.1");
    CHECK_INT_EQ(claim(&t, false, "usr_new", 8, &err), -EAGAIN);
    CHECK_INT_EQ(claim(&t, true, "192.0.2.2", 2, &err), 0);
    /* with no reserve, users may take the whole pool */
    static struct egress_lookups u;
    const struct egress_owner o = {.key = NULL, .max = 8};
    for (int i = 0; i < EGRESS_LOOKUPS_MAX; i++)
        CHECK_INT_EQ(egress_lookups_claim(&u, &o, 0, &err), 0);
    CHECK_INT_EQ(u.users, EGRESS_LOOKUPS_MAX);
}

TEST_MAIN()

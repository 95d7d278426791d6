/* Token buckets for pacing requests (src/base/bucket.c): the burst, the refill, the wait, and a
 * key's slot taken over by another key. */
#include <string.h>

#include "base/bucket.h"
#include "harness.h"

TEST(burst_then_pace)
{
    struct bucket b = {0};
    /* 2 a second, bursts of 3: three at once, then a wait of half a second */
    for (int i = 0; i < 3; i++)
        CHECK_INT_EQ(bucket_take(&b, 2, 3, 1000), 0);
    int64_t wait = bucket_take(&b, 2, 3, 1000);
    CHECK(wait > 0 && wait <= 501);
    CHECK(bucket_take(&b, 2, 3, 1200) > 0);
    CHECK_INT_EQ(bucket_take(&b, 2, 3, 1501), 0);
    /* a long quiet time fills it to the burst, no more */
    for (int i = 0; i < 3; i++)
        CHECK_INT_EQ(bucket_take(&b, 2, 3, 100000), 0);
    CHECK(bucket_take(&b, 2, 3, 100000) > 0);
    /* a clock that goes back adds nothing */
    CHECK(bucket_take(&b, 2, 3, 50000) > 0);
}

TEST(keys_have_buckets_of_their_own)
{
    static struct keyed_bucket t[1]; /* one slot: every key shares it */
    struct bucket *a = bucket_of(t, 1, "alice", 5);
    CHECK_INT_EQ(bucket_take(a, 1, 1, 10), 0);
    CHECK(bucket_take(bucket_of(t, 1, "alice", 5), 1, 1, 10) > 0);
    /* another key takes the slot over, full; alice then starts afresh */
    CHECK_INT_EQ(bucket_take(bucket_of(t, 1, "bob", 3), 1, 1, 10), 0);
    CHECK_INT_EQ(bucket_take(bucket_of(t, 1, "alice", 5), 1, 1, 10), 0);
    static struct keyed_bucket many[64];
    char key[BUCKET_KEY_MAX + 10];
    memset(key, 'k', sizeof(key));
    CHECK_INT_EQ(bucket_take(bucket_of(many, 64, key, sizeof(key)), 1, 1, 10), 0);
    CHECK(bucket_take(bucket_of(many, 64, key, sizeof(key)), 1, 1, 10) > 0);
}

TEST_MAIN()

/* Password hashes, and their checks on worker threads answered on the loop. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "auth/password.h"
#include "base/loop.h"
#include "base/util.h"
#include "harness.h"

static const char good[] = "correct horse battery staple";

static void init(void)
{
    if (sodium_init() < 0)
        CHECK_FAIL_("sodium_init failed");
}

/* Run the loop until *n reaches want and no check is left (a minute at most). */
static void run_until(const int *n, int want)
{
    int64_t end = time_mono_ms() + 60000;
    while ((*n < want || password_checks_outstanding() > 0) && time_mono_ms() < end)
        h2o_evloop_run(loop_get(), 100);
    if (*n < want || password_checks_outstanding() > 0)
        CHECK_FAIL_("timed out: %d of %d answers, %d checks outstanding", *n, want,
                    password_checks_outstanding());
}

TEST(acceptable_counts_characters_and_caps_bytes)
{
    struct err err = {0};
    CHECK_INT_EQ(password_acceptable("123456789", 9, &err), -EINVAL);
    CHECK_STR_EQ(err.msg, "the password must be at least 10 characters long");
    CHECK_INT_EQ(password_acceptable("1234567890", 10, &err), 0);
    /* nine characters of two bytes each are still nine characters */
    const char *e9 = "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";
    CHECK_INT_EQ(password_acceptable(e9, strlen(e9), &err), -EINVAL);
    char big[PASSWORD_MAX_BYTES + 1];
    memset(big, 'a', sizeof(big));
    CHECK_INT_EQ(password_acceptable(big, PASSWORD_MAX_BYTES, &err), 0);
    CHECK_INT_EQ(password_acceptable(big, sizeof(big), &err), -EINVAL);
    CHECK_STR_EQ(err.msg, "the password is longer than 1024 bytes");
}

TEST(hash_and_verify)
{
    init();
    struct err err = {0};
    char a[crypto_pwhash_STRBYTES], b[crypto_pwhash_STRBYTES];
    CHECK_INT_EQ(password_hash(good, strlen(good), a, &err), 0);
    CHECK(strncmp(a, "$argon2id$", 10) == 0);
    CHECK(strstr(a, good) == NULL);
    CHECK(!password_needs_rehash(a));
    /* salted: the same password hashes differently each time */
    CHECK_INT_EQ(password_hash(good, strlen(good), b, &err), 0);
    CHECK(strcmp(a, b) != 0);
    CHECK_INT_EQ(password_verify(a, good, strlen(good)), 0);
    CHECK_INT_EQ(password_verify(b, good, strlen(good)), 0);
    CHECK_INT_EQ(password_verify(a, good, strlen(good) - 1), -EACCES);
    CHECK_INT_EQ(password_verify(a, "correct horse battery stapLe", strlen(good)), -EACCES);
    /* no password, or no user: the dummy never matches */
    CHECK_INT_EQ(password_verify(NULL, good, strlen(good)), -EACCES);
    CHECK_INT_EQ(password_verify("", "", 0), -EACCES);
    CHECK_INT_EQ(password_hash("short", 5, a, &err), -EINVAL);
}

/* New hashes take SIGNIN_PASSWORD_MEMORY_MB (64 MiB unless set); a hash keeps the memory it was
 * made with, so one made before a change still checks, and asks to be made again. */
TEST(new_hashes_take_the_memory_set_and_old_ones_still_check)
{
    init();
    struct err err = {0};
    char dflt[crypto_pwhash_STRBYTES], small[crypto_pwhash_STRBYTES];
    CHECK_INT_EQ(password_hash(good, strlen(good), dflt, &err), 0);
    CHECK_STR_CONTAINS(dflt, "$m=65536,t=2,p=1$");
    password_set_memory_mb(19);
    CHECK_INT_EQ(password_hash(good, strlen(good), small, &err), 0);
    CHECK_STR_CONTAINS(small, "$m=19456,t=2,p=1$");
    CHECK(!password_needs_rehash(small));
    CHECK(password_needs_rehash(dflt));
    CHECK_INT_EQ(password_verify(dflt, good, strlen(good)), 0);
    CHECK_INT_EQ(password_verify(small, good, strlen(good)), 0);
    CHECK_INT_EQ(password_verify(small, good, strlen(good) - 1), -EACCES);
    password_set_memory_mb(64);
    CHECK(password_needs_rehash(small));
    CHECK(!password_needs_rehash(dflt));
}

TEST(verify_tells_a_broken_hash_from_a_mismatch)
{
    init();
    CHECK_INT_EQ(password_verify("$argon2id$v=19$m=65536,t=2,p=1$!!!", good, strlen(good)),
                 -EINVAL);
    /* weaker limits than ours: it still checks, and asks to be hashed again */
    char weak[crypto_pwhash_STRBYTES];
    CHECK_INT_EQ(crypto_pwhash_str(weak, good, strlen(good), crypto_pwhash_OPSLIMIT_MIN,
                                   crypto_pwhash_MEMLIMIT_MIN),
                 0);
    CHECK_INT_EQ(password_verify(weak, good, strlen(good)), 0);
    CHECK(password_needs_rehash(weak));
    CHECK(password_needs_rehash("not a hash"));
}

struct answer {
    int n;
    int result[32];
    char rehash[32][crypto_pwhash_STRBYTES]; /* "" for none */
    bool on_loop_thread;
};
static pthread_t main_thread;

static void on_answer(void *ctx, int result, const char *rehash)
{
    struct answer *a = ctx;
    if (!pthread_equal(pthread_self(), main_thread))
        a->on_loop_thread = false;
    if (a->n < 32) {
        a->result[a->n] = result;
        snprintf(a->rehash[a->n], sizeof(a->rehash[a->n]), "%s", rehash ? rehash : "");
    }
    a->n++;
}

struct slot {
    int i;
};
static int slot_results[32];
static int slot_calls;
static void on_slot(void *ctx, int result, const char *rehash)
{
    (void)rehash;
    struct slot *s = ctx;
    slot_results[s->i] = result;
    slot_calls++;
}

TEST(async_answers_on_the_loop)
{
    init();
    main_thread = pthread_self();
    struct err err = {0};
    char h[crypto_pwhash_STRBYTES];
    CHECK_INT_EQ(password_hash(good, strlen(good), h, &err), 0);
    /* the caller's copies may go at once */
    char pw[64], stored[crypto_pwhash_STRBYTES];
    memcpy(stored, h, sizeof(h));
    snprintf(pw, sizeof(pw), "%s", good);
    static struct slot slots[4];
    slot_calls = 0;
    for (int i = 0; i < 4; i++)
        slots[i] = (struct slot){i};
    struct password_check *c[4];
    c[0] = password_verify_async(stored, pw, strlen(pw), false, on_slot, &slots[0], &err);
    c[1] = password_verify_async(stored, "wrong password", 14, false, on_slot, &slots[1], &err);
    c[2] = password_verify_async(NULL, pw, strlen(pw), false, on_slot, &slots[2], &err);
    c[3] = password_verify_async("", pw, strlen(pw), false, on_slot, &slots[3], &err);
    for (int i = 0; i < 4; i++)
        CHECK(c[i] != NULL);
    memset(pw, 0, sizeof(pw));
    memset(stored, 0, sizeof(stored));
    CHECK_INT_EQ(slot_calls, 0); /* never from within the call */
    run_until(&slot_calls, 4);
    CHECK_INT_EQ(slot_calls, 4);
    CHECK_INT_EQ(slot_results[0], 0);
    CHECK_INT_EQ(slot_results[1], -EACCES);
    CHECK_INT_EQ(slot_results[2], -EACCES);
    CHECK_INT_EQ(slot_results[3], -EACCES);

    /* a password too long to be anyone's fails like a wrong one (they may answer in any order) */
    slot_calls = 0;
    char longer[PASSWORD_MAX_BYTES + 10];
    memset(longer, 'x', sizeof(longer));
    CHECK(password_verify_async(h, longer, sizeof(longer), false, on_slot, &slots[0], &err) !=
          NULL);
    CHECK(password_verify_async(h, good, strlen(good), false, on_slot, &slots[1], &err) != NULL);
    run_until(&slot_calls, 2);
    CHECK_INT_EQ(slot_results[0], -EACCES);
    CHECK_INT_EQ(slot_results[1], 0);

    struct answer a = {.on_loop_thread = true};
    CHECK(password_verify_async(h, good, strlen(good), false, on_answer, &a, &err) != NULL);
    run_until(&a.n, 1);
    CHECK(a.on_loop_thread);
    CHECK_INT_EQ(a.result[0], 0);

    char toolong[crypto_pwhash_STRBYTES + 1];
    memset(toolong, '$', sizeof(toolong) - 1);
    toolong[sizeof(toolong) - 1] = '\0';
    CHECK(password_verify_async(toolong, good, strlen(good), false, on_answer, &a, &err) == NULL);
    CHECK_INT_EQ(err.code, -EINVAL);
}

/* A password that matches a hash made with other limits comes back hashed with the current ones,
 * for the caller to store; a wrong one, or a hash already current, does not. */
TEST(a_check_against_an_older_hash_gives_the_password_hashed_anew)
{
    init();
    main_thread = pthread_self();
    struct err err = {0};
    char old[crypto_pwhash_STRBYTES];
    password_set_memory_mb(64);
    CHECK_INT_EQ(password_hash(good, strlen(good), old, &err), 0);
    password_set_memory_mb(19);
    static struct answer a = {.on_loop_thread = true};
    /* one at a time: two threads may answer in either order */
    CHECK(password_verify_async(old, good, strlen(good), false, on_answer, &a, &err) != NULL);
    run_until(&a.n, 1);
    CHECK(password_verify_async(old, "wrong password", 14, false, on_answer, &a, &err) != NULL);
    run_until(&a.n, 2);
    CHECK_INT_EQ(a.result[0], 0);
    CHECK_STR_CONTAINS(a.rehash[0], "$m=19456,t=2,p=1$");
    CHECK_INT_EQ(password_verify(a.rehash[0], good, strlen(good)), 0);
    CHECK_INT_EQ(a.result[1], -EACCES);
    CHECK_STR_EQ(a.rehash[1], "");
    char current[crypto_pwhash_STRBYTES];
    snprintf(current, sizeof(current), "%s", a.rehash[0]);
    CHECK(password_verify_async(current, good, strlen(good), false, on_answer, &a, &err) != NULL);
    run_until(&a.n, 3);
    CHECK_INT_EQ(a.result[2], 0);
    CHECK_STR_EQ(a.rehash[2], "");
    password_set_memory_mb(64);
}

TEST(at_most_so_many_checks_and_cancel)
{
    init();
    struct err err = {0};
    struct answer a = {.on_loop_thread = true};
    enum { MAX = PASSWORD_RUNNING_MAX + PASSWORD_WAITING_MAX };
    struct password_check *c[MAX];
    for (int i = 0; i < MAX; i++) {
        c[i] = password_verify_async(NULL, good, strlen(good), false, on_answer, &a, &err);
        CHECK(c[i] != NULL);
    }
    err_clear(&err);
    CHECK(password_verify_async(NULL, good, strlen(good), false, on_answer, &a, &err) == NULL);
    CHECK_INT_EQ(err.code, -EBUSY);
    CHECK_STR_CONTAINS(err.msg, "busy");
    CHECK_INT_EQ(password_checks_outstanding(), MAX);
    /* cancelled ones, waiting or (c[1], most likely) running, never answer */
    for (int i = 1; i < MAX; i++)
        password_check_cancel(c[i]);
    password_check_cancel(NULL);
    CHECK(password_checks_outstanding() >= 1 && password_checks_outstanding() <= 2);
    /* room again at once: the waiting ones are gone */
    struct password_check *more =
        password_verify_async(NULL, good, strlen(good), false, on_answer, &a, &err);
    CHECK(more != NULL);
    run_until(&a.n, 2);
    CHECK_INT_EQ(a.n, 2);
    CHECK(a.on_loop_thread);
    for (int i = 0; i < 2; i++)
        CHECK_INT_EQ(a.result[i], -EACCES);
    CHECK_INT_EQ(password_checks_outstanding(), 0);
}

static int order_n, order[PASSWORD_QUEUE_MAX];
static void on_order(void *ctx, int result, const char *rehash)
{
    (void)rehash;
    (void)result;
    if (order_n < PASSWORD_QUEUE_MAX)
        order[order_n] = (int)(intptr_t)ctx;
    order_n++;
}

/* The review's flood: strangers' guesses filled the one queue, and a real user's correct
 * password got 503 eight times of eight. Places kept for priority checks stay free of ordinary
 * ones, and priority checks are taken first. */
TEST(reserved_places_are_for_priority_checks_which_go_first)
{
    init();
    struct err err = {0};
    enum { KEEP = 6, ORDINARY = PASSWORD_QUEUE_MAX - KEEP };
    password_set_reserved(KEEP);
    order_n = 0;
    for (int i = 0; i < ORDINARY; i++)
        CHECK(password_verify_async(NULL, good, strlen(good), false, on_order, (void *)(intptr_t)i,
                                    &err) != NULL);
    err_clear(&err);
    CHECK(password_verify_async(NULL, good, strlen(good), false, on_order, NULL, &err) == NULL);
    CHECK_INT_EQ(err.code, -EBUSY);
    for (int i = 0; i < KEEP; i++)
        CHECK(password_verify_async(NULL, good, strlen(good), true, on_order,
                                    (void *)(intptr_t)(100 + i), &err) != NULL);
    err_clear(&err);
    CHECK(password_verify_async(NULL, good, strlen(good), true, on_order, NULL, &err) == NULL);
    CHECK_INT_EQ(err.code, -EBUSY);
    run_until(&order_n, PASSWORD_QUEUE_MAX);
    /* the priority checks are taken before the ordinary ones that waited with them: only the
     * ordinary checks the two threads took before the priority ones came (two, unless this
     * machine stalled the test for as long as several checks take) are answered before them;
     * in order of asking, the last answer would be a priority one */
    int ordinary_after = 0;
    for (int i = PASSWORD_QUEUE_MAX - 1; i >= 0 && order[i] < 100; i--)
        ordinary_after++;
    CHECK(ordinary_after >= 1);
    password_set_reserved(0);
    CHECK_INT_EQ(password_checks_outstanding(), 0);
}

/* Each answer cancels the other check if it has not answered yet: whether that one is still
 * running, or finished and about to be answered in the same turn of the loop, it must not
 * answer. */
static struct {
    struct password_check *c[2];
    bool gone[2];
    int calls;
} pair;

static void on_pair(void *ctx, int result, const char *rehash)
{
    (void)rehash;
    int i = ctx == &pair.c[0] ? 0 : 1;
    pair.gone[i] = true;
    pair.calls++;
    if (!pair.gone[1 - i]) {
        password_check_cancel(pair.c[1 - i]);
        pair.gone[1 - i] = true;
    }
}

TEST(cancel_from_a_callback)
{
    init();
    struct err err = {0};
    memset(&pair, 0, sizeof(pair));
    pair.c[0] = password_verify_async(NULL, good, strlen(good), false, on_pair, &pair.c[0], &err);
    pair.c[1] = password_verify_async(NULL, good, strlen(good), false, on_pair, &pair.c[1], &err);
    CHECK(pair.c[0] && pair.c[1]);
    run_until(&pair.calls, 1);
    CHECK_INT_EQ(pair.calls, 1);
}

TEST_MAIN()

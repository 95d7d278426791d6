/* Push checks on worker threads: one at a time per token, a back-off after refusals that
 * doubles up to a cap, a full pool refusing newcomers, and a forgotten check (its client left)
 * ending without its callback. */
#include <errno.h>
#include <string.h>

#include "base/loop.h"
#include "base/util.h"
#include "harness.h"
#include "proxy/proxy_internal.h"

#define ID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

struct answer {
    int calls, result;
    uint64_t held_ms;
    char why[256];
};

static bool on_answer(void *ctx, int result, const char *why, uint64_t held_ms)
{
    struct answer *a = ctx;
    a->calls++;
    a->result = result;
    a->held_ms = held_ms;
    snprintf(a->why, sizeof(a->why), "%s", why);
    return true;
}

/* A check that passes (tip equals ancestor) or is refused (a pack that is not one). */
static struct push_check *start(struct push_checks *pc, const char *jti, bool pass,
                                struct answer *a, unsigned *retry_s, struct err *err)
{
    static const unsigned char junk[] = "not a pack";
    struct push_check_args args = {.jti = jti,
                                   .who = "user=u run=-",
                                   .tip = pass ? ID_A : ID_B,
                                   .ancestor = ID_A,
                                   .pack = junk,
                                   .len = sizeof(junk),
                                   .inflate_max = 1 << 20};
    return push_check_start(pc, &args, on_answer, a, retry_s, err);
}

/* Wait for answer a of the check whose handle is *h, then forget the handle. */
static void wait_answer(struct answer *a, struct push_check **h)
{
    int before = a->calls;
    int64_t end = time_mono_ms() + 60000;
    while (a->calls == before && time_mono_ms() < end)
        h2o_evloop_run(loop_get(), 50);
    if (a->calls == before)
        CHECK_FAIL_("no answer within a minute");
    *h = NULL;
}

TEST(backoff_doubles_up_to_its_cap)
{
    struct push_limits lim = {.threads = 1, .backoff_ms = 1000, .backoff_max_ms = 60000};
    CHECK_INT_EQ(push_backoff_ms(&lim, 0), 0);
    CHECK_INT_EQ(push_backoff_ms(&lim, 1), 1000);
    CHECK_INT_EQ(push_backoff_ms(&lim, 2), 2000);
    CHECK_INT_EQ(push_backoff_ms(&lim, 3), 4000);
    CHECK_INT_EQ(push_backoff_ms(&lim, 6), 32000);
    CHECK_INT_EQ(push_backoff_ms(&lim, 7), 60000);
    CHECK_INT_EQ(push_backoff_ms(&lim, 4000000000u), 60000);
    lim.backoff_ms = 0; /* off */
    CHECK_INT_EQ(push_backoff_ms(&lim, 5), 0);
}

TEST(one_check_at_a_time_per_token_then_held_back_after_a_refusal)
{
    struct push_limits lim = {
        .threads = 2, .waiting = 4, .backoff_ms = 30000, .backoff_max_ms = 120000};
    struct push_checks *pc = push_checks_new(&lim);
    struct answer a = {0}, b = {0}, c = {0};
    unsigned retry = 0;
    struct err err = {0};
    struct push_check *h = start(pc, "jti_one", false, &a, &retry, &err);
    CHECK(h != NULL);
    /* a second push of the same token while the first is checked */
    CHECK(start(pc, "jti_one", true, &b, &retry, &err) == NULL);
    CHECK_INT_EQ(err.code, -EALREADY);
    CHECK_STR_CONTAINS(err.msg, "another push with this token is being checked");
    CHECK_INT_EQ(retry, 1);
    /* another token is not held up */
    struct push_check *h2 = start(pc, "jti_two", true, &c, &retry, &err);
    CHECK(h2 != NULL);
    wait_answer(&a, &h);
    CHECK_INT_EQ(a.result, -EINVAL);
    CHECK_INT_EQ(a.held_ms, 30000);
    if (c.calls == 0)
        wait_answer(&c, &h2);
    CHECK_INT_EQ(c.result, 1);
    CHECK_INT_EQ(c.held_ms, 0);
    CHECK_INT_EQ(b.calls, 0);
    /* refused: the token's next push is held back without a check, and told why */
    CHECK(start(pc, "jti_one", true, &b, &retry, &err) == NULL);
    CHECK_INT_EQ(err.code, -EAGAIN);
    CHECK_STR_CONTAINS(err.msg, "held back for 30 s after a refused push (the wait doubles with "
                                "each refused push, up to 120 s)");
    CHECK_STR_CONTAINS(err.msg, "the last was refused: ");
    CHECK(retry >= 29 && retry <= 30);
    /* the token that passed goes on */
    h2 = start(pc, "jti_two", true, &c, &retry, &err);
    CHECK(h2 != NULL);
    wait_answer(&c, &h2);
    CHECK_INT_EQ(c.result, 1);
    push_checks_free(pc);
}

TEST(a_full_pool_refuses_the_newcomer)
{
    struct push_limits lim = {.threads = 1, .waiting = 1, .backoff_ms = 0, .backoff_max_ms = 0};
    struct push_checks *pc = push_checks_new(&lim);
    struct answer a[3] = {0};
    unsigned retry = 0;
    struct err err = {0};
    struct push_check *h[3] = {0};
    h[0] = start(pc, "jti_p0", true, &a[0], &retry, &err);
    h[1] = start(pc, "jti_p1", true, &a[1], &retry, &err);
    CHECK(h[0] && h[1]);
    h[2] = start(pc, "jti_p2", true, &a[2], &retry, &err);
    CHECK(h[2] == NULL);
    CHECK_INT_EQ(err.code, -EBUSY);
    CHECK_STR_CONTAINS(err.msg, "busy: ");
    /* the refused one holds no slot: once the others end it is checked */
    for (int i = 0; i < 2; i++)
        if (a[i].calls == 0)
            wait_answer(&a[i], &h[i]);
    h[2] = start(pc, "jti_p2", true, &a[2], &retry, &err);
    CHECK(h[2] != NULL);
    wait_answer(&a[2], &h[2]);
    CHECK_INT_EQ(a[2].result, 1);
    push_checks_free(pc);
}

TEST(a_forgotten_check_ends_without_its_callback)
{
    struct push_limits lim = {.threads = 1, .waiting = 4, .backoff_ms = 0, .backoff_max_ms = 0};
    struct push_checks *pc = push_checks_new(&lim);
    struct answer a = {0}, b = {0};
    unsigned retry = 0;
    struct err err = {0};
    struct push_check *h = start(pc, "jti_gone", false, &a, &retry, &err);
    CHECK(h != NULL);
    push_check_forget(h); /* its client left: nothing may touch a */
    /* the token stays busy until the check has ended */
    CHECK(start(pc, "jti_gone", true, &b, &retry, &err) == NULL);
    CHECK_INT_EQ(err.code, -EALREADY);
    /* freed while a check is under way: freed when it ends */
    push_checks_free(pc);
    int64_t end = time_mono_ms() + 60000;
    while (push_checks_pending() > 0 && time_mono_ms() < end)
        h2o_evloop_run(loop_get(), 50);
    CHECK_INT_EQ(push_checks_pending(), 0);
    CHECK_INT_EQ(a.calls, 0);
}

TEST_MAIN()

/* The arithmetic of the sandboxes' bandwidth cap: a token bucket that fills at the rate up to its
 * burst, on a clock the caller gives. Tokens are kept in thousandths of a byte, so that a refill
 * every millisecond at a rate that is not a multiple of 1000 loses nothing to rounding. */
#include "egress/egress.h"

void egress_rate_init(struct egress_rate *b, uint64_t rate, int64_t now_ms)
{
    b->rate = rate;
    b->burst = rate / 4 > EGRESS_RATE_BURST_MIN ? rate / 4 : EGRESS_RATE_BURST_MIN;
    b->milli = b->burst * 1000;
    b->last_ms = now_ms;
}

static void refill(struct egress_rate *b, int64_t now_ms)
{
    if (now_ms <= b->last_ms)
        return; /* the same millisecond, or a clock that went back: nothing to add */
    uint64_t elapsed = (uint64_t)(now_ms - b->last_ms);
    uint64_t full = b->burst * 1000, room = full - b->milli;
    b->last_ms = now_ms;
    /* rate is in bytes a second, which is thousandths of a byte a millisecond; comparing before
     * multiplying keeps a long idle time from overflowing */
    if (elapsed > room / b->rate)
        b->milli = full;
    else
        b->milli += elapsed * b->rate;
}

uint64_t egress_rate_available(struct egress_rate *b, int64_t now_ms)
{
    if (b->rate == 0)
        return UINT64_MAX;
    refill(b, now_ms);
    return b->milli / 1000;
}

void egress_rate_take(struct egress_rate *b, uint64_t n)
{
    if (b->rate == 0)
        return;
    if (n > b->milli / 1000)
        b->milli = 0;
    else
        b->milli -= n * 1000;
}

uint64_t egress_rate_wait_ms(struct egress_rate *b, uint64_t need, int64_t now_ms)
{
    if (b->rate == 0)
        return 0;
    refill(b, now_ms);
    if (need > b->burst)
        need = b->burst;
    uint64_t want = need * 1000;
    if (b->milli >= want)
        return 0;
    return (want - b->milli + b->rate - 1) / b->rate;
}

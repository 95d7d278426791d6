/* The fast-forward check of a push (rp_descends), off the loop. Its cost is the pusher's to
 * choose (a few MiB of pack may inflate to 16 times the request limit), so it runs on a few
 * worker threads, never on the loop; a token has one check under way at a time; and a token
 * whose push was refused has its next ones refused at once for a while that doubles with each
 * refusal, so that re-sending a refused push costs the server almost nothing.
 *
 * A check owns a copy of the pack: the request it came with may be gone before it ends. The
 * token's entry in the table stays busy until the check ends, whoever still waits for it, so a
 * client that leaves and asks again does not get a second check running. */
#include "proxy/proxy_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "base/work.h"
#include "proxy/receive_pack.h"

/* Tokens remembered: more than can have checks under way (threads and waiting, at most 64 +
 * 256), so that a busy entry is never the one a newcomer takes. */
#define PUSH_TOKENS 512

struct push_token {
    char jti[64]; /* "" when free */
    bool checking;
    unsigned refusals; /* checks refused in a row */
    int64_t until_ms;  /* held back until then (monotonic) */
    uint64_t held_ms;  /* for how long, from the last refusal */
    char why[200];     /* the last refusal's reason */
};

struct push_checks {
    struct push_limits lim;
    struct push_token tokens[PUSH_TOKENS];
    unsigned inflight;
    bool freed; /* push_checks_free() came while checks were under way */
};

struct push_check {
    struct work work;
    struct push_checks *pc;
    struct push_token *tok;
    atomic_bool forgotten; /* nobody waits for the answer */
    push_check_cb cb;
    void *ctx;
    char who[160]; /* "user=... run=..." for the log */
    char tip[41], ancestor[41];
    uint64_t inflate_max;
    unsigned char *pack;
    size_t len;
    int64_t t0;
    int result;
    struct err err;
};

static struct work_pool pool = WORK_POOL_INIT("push check");

uint64_t push_backoff_ms(const struct push_limits *lim, unsigned refusals)
{
    if (!refusals || !lim->backoff_ms)
        return 0;
    uint64_t ms = lim->backoff_ms;
    for (unsigned i = 1; i < refusals && ms < lim->backoff_max_ms; i++)
        ms *= 2;
    return ms < lim->backoff_max_ms ? ms : lim->backoff_max_ms;
}

struct push_checks *push_checks_new(const struct push_limits *lim)
{
    struct push_checks *pc = xcalloc(1, sizeof(*pc));
    pc->lim = *lim;
    work_pool_limit(&pool, lim->threads, lim->waiting);
    return pc;
}

void push_checks_free(struct push_checks *pc)
{
    if (!pc)
        return;
    if (pc->inflight)
        pc->freed = true; /* the last check to end frees it */
    else
        free(pc);
}

/* The token's entry, or a new one: a free entry, else one whose hold has long run out, else the
 * one held back the least. NULL only when every entry has a check under way. */
static struct push_token *token_entry(struct push_checks *pc, const char *jti, int64_t now_ms)
{
    struct push_token *spare = NULL;
    bool spare_stale = false;
    for (size_t i = 0; i < PUSH_TOKENS; i++) {
        struct push_token *t = &pc->tokens[i];
        if (strcmp(t->jti, jti) == 0)
            return t;
        if (t->checking)
            continue;
        bool stale = !t->jti[0] || now_ms >= t->until_ms + (int64_t)pc->lim.backoff_max_ms;
        if (!spare || (stale && !spare_stale) ||
            (!stale && !spare_stale && t->until_ms < spare->until_ms)) {
            spare = t;
            spare_stale = stale;
        }
    }
    if (spare) {
        memset(spare, 0, sizeof(*spare));
        snprintf(spare->jti, sizeof(spare->jti), "%s", jti);
    }
    return spare;
}

static void check_run(struct work *w)
{
    struct push_check *c = container_of(w, struct push_check, work);
    if (atomic_load(&c->forgotten)) {
        c->result = err_set(&c->err, -ECANCELED, "the client went away");
        return;
    }
    c->result = rp_descends(c->pack, c->len, c->tip, c->ancestor, c->inflate_max, &c->err);
}

static void check_done(struct work *w)
{
    struct push_check *c = container_of(w, struct push_check, work);
    struct push_checks *pc = c->pc;
    struct push_token *t = c->tok;
    int64_t now = time_mono_ms();
    t->checking = false;
    uint64_t held = 0;
    if (c->result == 1) {
        t->refusals = 0;
        t->until_ms = 0;
    } else if (c->result != -ECANCELED) {
        /* a hold that ran out long ago starts over */
        if (now >= t->until_ms + (int64_t)pc->lim.backoff_max_ms)
            t->refusals = 0;
        t->refusals++;
        held = push_backoff_ms(&pc->lim, t->refusals);
        t->held_ms = held;
        t->until_ms = now + (int64_t)held;
        if (c->result == 0)
            snprintf(t->why, sizeof(t->why), "%.12s does not descend from %.12s", c->tip,
                     c->ancestor);
        else
            snprintf(t->why, sizeof(t->why), "%s", c->err.msg);
    }
    pc->inflight--;
    /* a client that left since the watch last looked is found gone by the callback */
    if (atomic_load(&c->forgotten) ||
        !c->cb(c->ctx, c->result, c->result < 0 ? c->err.msg : "", held))
        log_info("proxy push check dropped %s jti=%s reason=client-gone result=%d ms=%ld", c->who,
                 t->jti, c->result, (long)(now - c->t0));
    free(c->pack);
    free(c);
    if (pc->freed && !pc->inflight)
        free(pc);
}

struct push_check *push_check_start(struct push_checks *pc, const struct push_check_args *a,
                                    push_check_cb cb, void *ctx, unsigned *retry_s, struct err *err)
{
    int64_t now = time_mono_ms();
    *retry_s = 0;
    struct push_token *t = token_entry(pc, a->jti, now);
    if (!t) {
        *retry_s = 1;
        err_set(err, -EBUSY, "busy: too many pushes are being checked; retry in a moment");
        return NULL;
    }
    if (t->checking) {
        *retry_s = 1;
        err_set(err, -EALREADY,
                "another push with this token is being checked: retry once it is answered");
        return NULL;
    }
    if (now < t->until_ms) {
        *retry_s = (unsigned)((t->until_ms - now + 999) / 1000);
        err_set(err, -EAGAIN,
                "pushes with this token are held back for %llu s after a refused push (the wait "
                "doubles with each refused push, up to %llu s): retry in %u s; the last was "
                "refused: %s",
                (unsigned long long)(t->held_ms / 1000),
                (unsigned long long)(pc->lim.backoff_max_ms / 1000), *retry_s, t->why);
        return NULL;
    }
    struct push_check *c = xcalloc(1, sizeof(*c));
    c->work.run = check_run;
    c->work.done = check_done;
    c->pc = pc;
    c->tok = t;
    atomic_init(&c->forgotten, false);
    c->cb = cb;
    c->ctx = ctx;
    snprintf(c->who, sizeof(c->who), "%s", a->who);
    snprintf(c->tip, sizeof(c->tip), "%s", a->tip);
    snprintf(c->ancestor, sizeof(c->ancestor), "%s", a->ancestor);
    c->inflate_max = a->inflate_max;
    c->len = a->len;
    c->pack = xmalloc(a->len ? a->len : 1);
    if (a->len)
        memcpy(c->pack, a->pack, a->len);
    c->t0 = now;
    if (work_submit(&pool, &c->work, err) < 0) {
        err->code = -EBUSY; /* no thread free, or none to be had: the server's trouble */
        *retry_s = 1;
        free(c->pack);
        free(c);
        return NULL;
    }
    t->checking = true;
    pc->inflight++;
    log_info("proxy push check queued %s jti=%s bytes=%zu", c->who, t->jti, c->len);
    return c;
}

unsigned push_checks_pending(void)
{
    return work_pool_pending(&pool);
}

void push_check_forget(struct push_check *c)
{
    if (c)
        atomic_store(&c->forgotten, true);
}

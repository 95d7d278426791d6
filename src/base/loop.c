#include "base/loop.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* h2o 2.2 timeouts are lists of a fixed duration, so keep one list per duration in use. */
struct duration {
    uint64_t ms;
    h2o_timeout_t timeout;
};

static h2o_loop_t *the_loop;
static struct duration *durations[64];
static size_t ndurations;

h2o_loop_t *loop_get(void)
{
    if (!the_loop)
        the_loop = h2o_evloop_create();
    return the_loop;
}

h2o_timeout_t *loop_timeout(uint64_t ms)
{
    for (size_t i = 0; i < ndurations; i++)
        if (durations[i]->ms == ms)
            return &durations[i]->timeout;
    if (ndurations == sizeof(durations) / sizeof(durations[0]))
        abort(); /* durations come from code, not from clients */
    struct duration *d = xcalloc(1, sizeof(*d));
    d->ms = ms;
    h2o_timeout_init(loop_get(), &d->timeout, ms);
    durations[ndurations++] = d;
    return &d->timeout;
}

static void on_timeout(h2o_timeout_entry_t *entry)
{
    struct loop_timer *t = (struct loop_timer *)entry;
    t->cb(t);
}

void loop_timer_start(struct loop_timer *t, uint64_t ms, void (*cb)(struct loop_timer *t))
{
    loop_timer_stop(t);
    t->cb = cb;
    t->entry.cb = on_timeout;
    h2o_timeout_link(loop_get(), loop_timeout(ms), &t->entry);
}

void loop_timer_stop(struct loop_timer *t)
{
    if (h2o_timeout_is_linked(&t->entry))
        h2o_timeout_unlink(&t->entry);
}

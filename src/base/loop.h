#pragma once
/* The process's one event loop (h2o evloop) and one-shot timers on it. Main thread only. */

#include <h2o.h>
#include <stdint.h>

/* Create the loop once; later calls return the same loop. */
h2o_loop_t *loop_get(void);

struct loop_timer {
    h2o_timeout_entry_t entry; /* private */
    void (*cb)(struct loop_timer *t);
};

/* Arm t to call cb once after ms milliseconds (re-arming an armed timer restarts it). */
void loop_timer_start(struct loop_timer *t, uint64_t ms, void (*cb)(struct loop_timer *t));
void loop_timer_stop(struct loop_timer *t);

/* The loop's list of timeouts of ms milliseconds, for h2o APIs that take one (h2o 2.2 keeps a
 * list per duration). It lives as long as the loop. */
h2o_timeout_t *loop_timeout(uint64_t ms);

#pragma once
/* Work whose cost a caller chooses (inflating a pack a stranger sent, say), run on a bounded pool
 * of worker threads and answered on the loop. A pool is a static object of the module that uses
 * it and lives as long as the process; its threads start at the first work, and each ends after
 * idle_ms (WORK_IDLE_MS unless set) without work, the pipe with the last, so that a pool at rest
 * holds no thread and no descriptor.
 *
 *     static struct work_pool pool = WORK_POOL_INIT("push check");
 *     work_pool_limit(&pool, 2, 16);
 *     w->run = check_run; w->done = check_done;
 *     if (work_submit(&pool, w, &err) < 0) ...   (-EBUSY: full)
 *
 * run() goes on a worker thread and must touch only what the work owns (copies, never a request's
 * memory); done() comes on the loop thread after run() has returned, always, and may free the
 * work. A caller that no longer wants the answer (its client left) keeps its own flag for done()
 * to read; run() may read an atomic one to skip what nobody waits for. */

#include <h2o.h>
#include <pthread.h>
#include <stdbool.h>

#include "base/err.h"

struct work {
    void (*run)(struct work *w);  /* on a worker thread */
    void (*done)(struct work *w); /* on the loop thread, once run() has returned */
    struct work *next;            /* private */
};

struct work_pool {
    const char *name; /* in error messages */
    unsigned threads_max, waiting_max;
    unsigned idle_ms; /* how long a thread waits for work before it ends; 0: WORK_IDLE_MS */
    /* private, under lock */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct work *waiting, **waiting_tail; /* oldest first */
    struct work *done, **done_tail;
    unsigned threads;
    int wfd; /* the threads' end of the pipe the loop watches */
    /* private, loop thread */
    h2o_socket_t *sock;
    unsigned pending;
};

#define WORK_IDLE_MS 10000

#define WORK_POOL_INIT(pool_name)                                                                  \
    {                                                                                              \
        .name = pool_name, .threads_max = 1, .lock = PTHREAD_MUTEX_INITIALIZER,                    \
        .wake = PTHREAD_COND_INITIALIZER, .wfd = -1                                                \
    }

/* Set how many works run at once (at least 1) and how many more may wait for a thread. Raising
 * the first starts no thread until the next work; lowering it stops none. Loop thread only. */
void work_pool_limit(struct work_pool *p, unsigned threads, unsigned waiting);

/* Queue w (its run and done set). Returns 0, -EBUSY when threads_max + waiting_max works are
 * pending, whose done() has not yet run (w untouched, done() will not be called), or -EAGAIN when
 * no thread or pipe could be had; err says which, naming the pool. Loop thread only. */
int work_submit(struct work_pool *p, struct work *w, struct err *err);

/* Works submitted whose done() has not yet returned. Loop thread only. */
unsigned work_pool_pending(const struct work_pool *p);
/* Threads running now (for tests). */
unsigned work_pool_threads(struct work_pool *p);

/* Worker pools (src/base/work.c): works run on the pool's threads and are answered on the loop;
 * an idle pool's threads end and its pipe closes, and the next work starts both again. */
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/work.h"
#include "harness.h"

struct job {
    struct work w;
    atomic_bool ran;
    bool done;
};

static void job_run(struct work *w)
{
    atomic_store(&((struct job *)w)->ran, true);
}

static void job_done(struct work *w)
{
    ((struct job *)w)->done = true;
}

static int open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            n++;
    return n;
}

/* Run the loop until cond holds, or give up after many turns. */
#define RUN_UNTIL(cond)                                                                            \
    for (int turns_ = 0; !(cond) && turns_ < 2000; turns_++)                                       \
    h2o_evloop_run(loop_get(), 10)

TEST(idle_pool_gives_back_its_threads_and_pipe)
{
    static struct work_pool pool = WORK_POOL_INIT("test");
    pool.idle_ms = 30;
    work_pool_limit(&pool, 2, 4);
    loop_get();
    int fds0 = open_fds();
    for (int round = 0; round < 2; round++) {
        struct job a = {.w = {.run = job_run, .done = job_done}};
        struct job b = {.w = {.run = job_run, .done = job_done}};
        struct err err = {0};
        CHECK_INT_EQ(work_submit(&pool, &a.w, &err), 0);
        CHECK_INT_EQ(work_submit(&pool, &b.w, &err), 0);
        CHECK(work_pool_threads(&pool) == 2);
        CHECK(open_fds() == fds0 + 2); /* the pipe */
        RUN_UNTIL(a.done && b.done);
        CHECK(a.done && b.done && atomic_load(&a.ran) && atomic_load(&b.ran));
        /* idle: the threads end, and the loop closes the pipe after the last */
        RUN_UNTIL(work_pool_threads(&pool) == 0 && pool.sock == NULL);
        CHECK_INT_EQ(work_pool_threads(&pool), 0);
        CHECK(pool.sock == NULL);
        CHECK_INT_EQ(open_fds(), fds0);
        CHECK_INT_EQ(work_pool_pending(&pool), 0);
    }
}

TEST_MAIN()

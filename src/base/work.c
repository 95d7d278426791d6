/* Worker threads for costly work, answered on the loop (work.h). A thread that finishes a work
 * puts it on the done list and writes a byte to a pipe the loop watches; the loop takes the list
 * and calls the done() callbacks. A thread that waits idle_ms for work ends; the last one to end
 * wakes the loop too, which then closes the pipe, so that an idle pool holds nothing. Every field
 * shared with the threads is under the lock. */
#include "base/work.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "base/loop.h"

void work_pool_limit(struct work_pool *p, unsigned threads, unsigned waiting)
{
    pthread_mutex_lock(&p->lock);
    p->threads_max = threads ? threads : 1;
    p->waiting_max = waiting;
    pthread_mutex_unlock(&p->lock);
}

static void *worker(void *arg)
{
    struct work_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->waiting) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            uint64_t ns =
                (uint64_t)until.tv_nsec + (p->idle_ms ? p->idle_ms : WORK_IDLE_MS) * 1000000ull;
            until.tv_sec += (time_t)(ns / 1000000000ull);
            until.tv_nsec = (long)(ns % 1000000000ull);
            if (pthread_cond_clockwait(&p->wake, &p->lock, CLOCK_MONOTONIC, &until) == ETIMEDOUT &&
                !p->waiting) {
                if (--p->threads == 0) { /* the loop may close the pipe */
                    ssize_t n = write(p->wfd, "", 1);
                    (void)n;
                }
                pthread_mutex_unlock(&p->lock);
                return NULL;
            }
        }
        struct work *w = p->waiting;
        p->waiting = w->next;
        if (!p->waiting)
            p->waiting_tail = &p->waiting;
        w->next = NULL;
        pthread_mutex_unlock(&p->lock);

        w->run(w);

        pthread_mutex_lock(&p->lock);
        *p->done_tail = w;
        p->done_tail = &w->next;
        /* a full pipe already holds a wake-up for the loop, so a failed write loses nothing */
        ssize_t n = write(p->wfd, "", 1);
        (void)n;
    }
    return NULL;
}

static void on_done(h2o_socket_t *sock, const char *errstr)
{
    (void)errstr;
    struct work_pool *p = sock->data;
    h2o_buffer_consume(&sock->input, sock->input->size);
    pthread_mutex_lock(&p->lock);
    struct work *list = p->done;
    p->done = NULL;
    p->done_tail = &p->done;
    pthread_mutex_unlock(&p->lock);
    while (list) {
        struct work *w = list;
        list = w->next;
        p->pending--;
        w->done(w); /* may free w */
    }
    /* the last thread has ended (and done() started no other): the pipe goes too, and the next
     * work makes both again */
    pthread_mutex_lock(&p->lock);
    bool idle = p->threads == 0 && !p->waiting && !p->done && p->pending == 0;
    pthread_mutex_unlock(&p->lock);
    if (idle) {
        h2o_socket_close(p->sock);
        p->sock = NULL;
        close(p->wfd);
        p->wfd = -1;
    }
}

/* The pipe at the first work, and threads up to threads_max. */
static int pool_start(struct work_pool *p, struct err *err)
{
    if (!p->sock) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
            return err_set(err, -EAGAIN, "cannot run the %s: pipe: %s", p->name, strerror(errno));
        p->waiting_tail = &p->waiting;
        p->done_tail = &p->done;
        p->wfd = fds[1];
        p->sock = h2o_evloop_socket_create(loop_get(), fds[0], 0);
        p->sock->data = p;
        h2o_socket_read_start(p->sock, on_done);
    }
    /* the threads take no signals: the loop's signalfd is for the main thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_mutex_lock(&p->lock);
    while (p->threads < p->threads_max) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t th;
        int rc = pthread_create(&th, &attr, worker, p);
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
        p->threads++;
    }
    unsigned threads = p->threads;
    pthread_mutex_unlock(&p->lock);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (threads == 0)
        return err_set(err, -EAGAIN, "cannot run the %s: no worker thread could start", p->name);
    return 0;
}

int work_submit(struct work_pool *p, struct work *w, struct err *err)
{
    /* threads end on their own: read under the lock, but only this thread adds any */
    pthread_mutex_lock(&p->lock);
    bool start = p->threads < p->threads_max || !p->sock;
    pthread_mutex_unlock(&p->lock);
    if (start && pool_start(p, err) < 0)
        return err->code;
    /* counted until done() has run: a work holds what it owns until then */
    if (p->pending >= p->threads_max + p->waiting_max)
        return err_set(err, -EBUSY, "busy: %u %ss under way or waiting; retry in a moment",
                       p->pending, p->name);
    pthread_mutex_lock(&p->lock);
    w->next = NULL;
    *p->waiting_tail = w;
    p->waiting_tail = &w->next;
    p->pending++;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

unsigned work_pool_pending(const struct work_pool *p)
{
    return p->pending;
}

unsigned work_pool_threads(struct work_pool *p)
{
    pthread_mutex_lock(&p->lock);
    unsigned n = p->threads;
    pthread_mutex_unlock(&p->lock);
    return n;
}

/* Child processes on the event loop: a pipe per child, read until the child closes it, then the
 * child is reaped. */
#include "base/proc_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/loop.h"
#include "base/util.h"

static pid_t reap_list[256];
static size_t reap_count;

void proc_reap_later(pid_t pid)
{
    /* Reap whatever has exited by now, then remember pid if it has not. */
    size_t j = 0;
    for (size_t i = 0; i < reap_count; i++)
        if (waitpid(reap_list[i], NULL, WNOHANG) == 0)
            reap_list[j++] = reap_list[i];
    reap_count = j;
    if (pid > 0 && waitpid(pid, NULL, WNOHANG) == 0) {
        if (reap_count < ARRAY_SIZE(reap_list))
            reap_list[reap_count++] = pid;
    }
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    struct proc_watch *w = sock->data;
    h2o_buffer_t *in = sock->input;
    if (in->size > 0) {
        size_t take = in->size;
        if (w->len + take > w->max) {
            take = w->max > w->len ? w->max - w->len : 0;
            w->overflow = true;
        }
        if (w->len + take + 1 > w->cap) {
            w->cap = (w->len + take + 1) * 2;
            w->data = xrealloc(w->data, w->cap);
        }
        memcpy(w->data + w->len, in->bytes, take);
        w->len += take;
        w->data[w->len] = '\0';
        h2o_buffer_consume(&sock->input, in->size);
    }
    if (!err && !(w->whole && w->data && w->whole(w->data, w->len)))
        return;
    h2o_socket_read_stop(sock);
    w->sock = NULL;
    int status = 0;
    /* The child closes the pipe as it exits, so this wait is short. */
    while (w->pid > 0 && waitpid(w->pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!w->data) {
        w->data = xmalloc(1);
        w->data[0] = '\0';
    }
    /* closed once done has answered (which may free w): the answer does not wait for it */
    w->done(w, status);
    h2o_socket_close(sock);
}

void proc_watch_start(struct proc_watch *w, pid_t pid, int fd, size_t max,
                      void (*done)(struct proc_watch *w, int wait_status))
{
    w->pid = pid;
    w->max = max;
    w->done = done;
    w->data = NULL;
    w->len = w->cap = 0;
    w->overflow = false;
    w->whole = NULL;
    w->sock = h2o_evloop_socket_create(loop_get(), fd, 0); /* which makes fd non-blocking */
    w->sock->data = w;
    h2o_socket_read_start(w->sock, on_read);
}

void proc_watch_abandon(struct proc_watch *w)
{
    if (w->sock) {
        h2o_socket_read_stop(w->sock);
        h2o_socket_close(w->sock);
        w->sock = NULL;
    }
    if (w->pid > 0)
        proc_reap_later(w->pid);
    free(w->data);
    w->data = NULL;
}

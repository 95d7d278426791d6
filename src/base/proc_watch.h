#pragma once
/* Child processes on the event loop: a pipe per child (its report channel or its output), read
 * until the child closes it, after which the child is reaped. Main loop thread only. */

#include <h2o.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A channel watched by the loop; done is called once with every byte written to it (capped, NUL
 * terminated) after it closed, and the child pid (when > 0) is reaped. */
struct proc_watch {
    pid_t pid;
    h2o_socket_t *sock;
    char *data;
    size_t len, cap, max;
    bool overflow;
    void (*done)(struct proc_watch *w, int wait_status);
    /* Optional, set after start: whether what came so far is all the channel will say, so that
     * done need not wait for the close (one turn of the loop fewer). */
    bool (*whole)(const char *data, size_t len);
};
/* Take ownership of fd (the read end) and start watching; max caps what is kept. */
void proc_watch_start(struct proc_watch *w, pid_t pid, int fd, size_t max,
                      void (*done)(struct proc_watch *w, int wait_status));
/* Stop watching without calling done (the child is still reaped in the background). */
void proc_watch_abandon(struct proc_watch *w);
/* Reap pid in the background when it exits (non-blocking, checked on each call). */
void proc_reap_later(pid_t pid);

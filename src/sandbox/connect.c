/* Connections from the server into a running sandbox's network namespace, to one of its ports
 * on its own loopback (a preview of what it serves). The socket's namespace is fixed when it is
 * made, so a thread of its own enters the sandbox's namespace, makes and connects the socket and
 * ends: no thread of the server's ever changes its namespace, and a loopback of the sandbox is
 * all such a socket can reach. A socket may also be had unconnected, for a client that connects
 * it without blocking (curl). The thread runs from a bounded work pool, so a sandbox whose
 * listener never accepts costs a worker for CONNECT_TIMEOUT_S at most, never the loop. */
#include "sandbox/sandbox_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "base/work.h"

#define CONNECT_TIMEOUT_S 3
#define CONNECT_THREADS 2
#define CONNECT_WAITING 64

struct sandbox_connect {
    struct work w;
    int pidfd;     /* a copy of the sandbox's init's */
    uint16_t port; /* 0: the socket only, not connected */
    int fd;        /* the socket, or -1 */
    int rc;        /* 0, or a negative errno */
    char what[64];
    sandbox_connect_fn cb;
    void *ctx;
    bool cancelled;
};

static struct work_pool connect_pool = WORK_POOL_INIT("sandbox connect");

static void *connect_thread(void *arg)
{
    struct sandbox_connect *c = arg;
    if (setns(c->pidfd, CLONE_NEWNET) < 0) {
        c->rc = -errno;
        snprintf(c->what, sizeof(c->what), "enter the sandbox's network");
        return NULL;
    }
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        c->rc = -errno;
        snprintf(c->what, sizeof(c->what), "socket");
        return NULL;
    }
    if (c->port == 0) {
        c->fd = s; /* its user connects it, on its own loop */
        return NULL;
    }
    struct timeval tv = {.tv_sec = CONNECT_TIMEOUT_S};
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(c->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        c->rc = errno == EINPROGRESS ? -ETIMEDOUT : -errno;
        snprintf(c->what, sizeof(c->what), "connect to port %u", (unsigned)c->port);
        close(s);
        return NULL;
    }
    tv.tv_sec = 0;
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int fl = fcntl(s, F_GETFL);
    if (fl < 0 || fcntl(s, F_SETFL, fl | O_NONBLOCK) < 0) {
        c->rc = -errno;
        snprintf(c->what, sizeof(c->what), "fcntl");
        close(s);
        return NULL;
    }
    c->fd = s;
    return NULL;
}

static void connect_run(struct work *w)
{
    struct sandbox_connect *c = container_of(w, struct sandbox_connect, w);
    pthread_t t;
    int r = pthread_create(&t, NULL, connect_thread, c);
    if (r != 0) {
        c->rc = -r;
        snprintf(c->what, sizeof(c->what), "pthread_create");
        return;
    }
    pthread_join(t, NULL);
}

static void connect_done(struct work *w)
{
    struct sandbox_connect *c = container_of(w, struct sandbox_connect, w);
    close(c->pidfd);
    if (c->cancelled) {
        if (c->fd >= 0)
            close(c->fd);
    } else if (c->fd >= 0) {
        c->cb(c->ctx, c->fd, NULL);
    } else {
        struct err err = {0};
        err_set(&err, c->rc,
                c->rc == -ECONNREFUSED ? "nothing listens on port %u in the sandbox"
                : c->rc == -ESRCH      ? "the sandbox stopped (port %u)"
                                       : "cannot reach port %u in the sandbox",
                (unsigned)c->port);
        if (c->rc != -ECONNREFUSED && c->rc != -ESRCH)
            snprintf(err.msg + strlen(err.msg), sizeof(err.msg) - strlen(err.msg), ": %s: %s",
                     c->what, strerror(-c->rc));
        c->cb(c->ctx, -1, &err);
    }
    free(c);
}

struct sandbox_connect *sandbox_connect(struct sandbox_manager *m, const char *id,
                                        const char *user_id, uint16_t port, sandbox_connect_fn cb,
                                        void *ctx, struct err *err)
{
    struct sandbox *sbx = NULL;
    for (struct sandbox *s = m->all; s; s = s->next)
        if (s->state == SBX_RUNNING && strcmp(s->id, id) == 0 && strcmp(s->user_id, user_id) == 0)
            sbx = s;
    if (!sbx || sbx->pidfd < 0 || sbx->net_deferred) {
        err_set(err, -ENOENT, "the sandbox is not running: start it (any container_* tool)");
        return NULL;
    }
    work_pool_limit(&connect_pool, CONNECT_THREADS, CONNECT_WAITING);
    struct sandbox_connect *c = xcalloc(1, sizeof(*c));
    c->pidfd = fcntl(sbx->pidfd, F_DUPFD_CLOEXEC, 3);
    c->port = port;
    c->fd = -1;
    c->cb = cb;
    c->ctx = ctx;
    c->w.run = connect_run;
    c->w.done = connect_done;
    if (c->pidfd < 0) {
        err_set(err, -errno, "dup: %s", strerror(errno));
        free(c);
        return NULL;
    }
    if (work_submit(&connect_pool, &c->w, err) < 0) {
        close(c->pidfd);
        free(c);
        return NULL;
    }
    sbx->last_used = time_mono_ms(); /* a look at it counts as a use */
    return c;
}

void sandbox_connect_cancel(struct sandbox_connect *c)
{
    if (c)
        c->cancelled = true;
}

/* Name resolution off the loop: getaddrinfo may wait seconds for a DNS server, so each lookup
 * runs on a thread of its own, which writes one byte to a pipe the loop watches when it is done.
 * The lookup is shared by the thread and the loop (two references); whoever lets go last frees
 * it, so a cancelled lookup needs no waiting for its thread. The threads alive are counted, in all
 * and per owner, until each thread ends: a cancelled lookup still holds its thread, and a sandbox
 * that asks and hangs up again and again must not take them all. */
#include "egress/egress.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/util.h"

struct egress_lookup {
    char host[256];
    char owner[64]; /* "" for nobody's */
    struct egress_addr addrs[EGRESS_ADDRS_MAX];
    int n;
    int gai; /* getaddrinfo's result */
    int wfd; /* the thread's end of the pipe */
    h2o_socket_t *sock;
    egress_resolved_fn cb;
    void *ctx;
    bool cancelled;
    atomic_int refs;
};

/* Lookup threads alive, cancelled ones included (a resolver may take seconds to give up):
 * past the caps a lookup is refused rather than a thread more started. */
static struct egress_lookups alive;
static pthread_mutex_t alive_lock = PTHREAD_MUTEX_INITIALIZER;

static int slot_of(const struct egress_lookups *t, const char *owner)
{
    for (int i = 0; i < EGRESS_LOOKUPS_MAX; i++)
        if (t->slot[i].n > 0 && strcmp(t->slot[i].owner, owner) == 0)
            return i;
    return -1;
}

int egress_lookups_claim(struct egress_lookups *t, const char *owner, int per_owner,
                         struct err *err)
{
    int i = owner && owner[0] ? slot_of(t, owner) : -1;
    if (i >= 0 && t->slot[i].n >= per_owner)
        return err_set(err, -EAGAIN,
                       "%d name lookups of this sandbox are under way, the most it may have at "
                       "once; retry when one has ended",
                       per_owner);
    if (t->total >= EGRESS_LOOKUPS_MAX)
        return err_set(err, -EAGAIN, "%d name lookups are under way; retry later",
                       EGRESS_LOOKUPS_MAX);
    t->total++;
    if (!owner || !owner[0])
        return 0;
    if (i < 0) {
        /* a free slot exists: no more owners than lookups alive */
        for (i = 0; t->slot[i].n > 0; i++)
            ;
        snprintf(t->slot[i].owner, sizeof(t->slot[i].owner), "%s", owner);
    }
    t->slot[i].n++;
    return 0;
}

void egress_lookups_release(struct egress_lookups *t, const char *owner)
{
    t->total--;
    int i = owner && owner[0] ? slot_of(t, owner) : -1;
    if (i >= 0 && --t->slot[i].n == 0)
        t->slot[i].owner[0] = '\0';
}

static void release(const char *owner)
{
    pthread_mutex_lock(&alive_lock);
    egress_lookups_release(&alive, owner);
    pthread_mutex_unlock(&alive_lock);
}

static void unref(struct egress_lookup *l)
{
    if (atomic_fetch_sub(&l->refs, 1) == 1)
        free(l);
}

static void add_addr(struct egress_lookup *l, const struct egress_addr *a)
{
    for (int i = 0; i < l->n; i++)
        if (memcmp(&l->addrs[i], a, sizeof(*a)) == 0)
            return;
    if (l->n < EGRESS_ADDRS_MAX)
        l->addrs[l->n++] = *a;
}

static void *lookup_thread(void *arg)
{
    struct egress_lookup *l = arg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    l->gai = getaddrinfo(l->host, NULL, &hints, &res);
    for (struct addrinfo *ai = res; l->gai == 0 && ai; ai = ai->ai_next) {
        struct egress_addr a = {{0}};
        if (ai->ai_family == AF_INET) {
            const struct sockaddr_in *s = (const struct sockaddr_in *)ai->ai_addr;
            a.b[10] = a.b[11] = 0xff;
            memcpy(a.b + 12, &s->sin_addr, 4);
        } else if (ai->ai_family == AF_INET6) {
            const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ai->ai_addr;
            memcpy(a.b, &s->sin6_addr, 16);
        } else {
            continue;
        }
        add_addr(l, &a);
    }
    if (res)
        freeaddrinfo(res);
    /* the loop may have gone (cancelled): then this write fails with EPIPE, which is fine */
    ssize_t w = write(l->wfd, "", 1);
    (void)w;
    close(l->wfd);
    release(l->owner);
    unref(l);
    return NULL;
}

static void on_done(h2o_socket_t *sock, const char *errstr)
{
    struct egress_lookup *l = sock->data;
    h2o_socket_read_stop(sock);
    h2o_socket_close(sock);
    l->sock = NULL;
    if (!l->cancelled) {
        struct err err = {0};
        if (l->gai != 0)
            err_set(&err, l->gai == EAI_NONAME || l->gai == EAI_NODATA ? -ENOENT : -EHOSTUNREACH,
                    "cannot resolve '%s': %s", l->host, gai_strerror(l->gai));
        else if (l->n == 0)
            err_set(&err, -ENOENT, "'%s' has no IPv4 or IPv6 address", l->host);
        l->cb(l->ctx, l->addrs, l->n, err.code ? &err : NULL);
    }
    unref(l);
}

struct egress_lookup *egress_resolve_for(const char *host, const char *owner, egress_resolved_fn cb,
                                         void *ctx, struct err *err)
{
    pthread_mutex_lock(&alive_lock);
    int r = egress_lookups_claim(&alive, owner, EGRESS_LOOKUPS_PER_OWNER, err);
    pthread_mutex_unlock(&alive_lock);
    if (r < 0) {
        err_wrap(err, "cannot resolve '%s' now", host);
        return NULL;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        err_set(err, -errno, "cannot resolve '%s': pipe: %s", host, strerror(errno));
        release(owner);
        return NULL;
    }
    struct egress_lookup *l = xcalloc(1, sizeof(*l));
    snprintf(l->host, sizeof(l->host), "%s", host);
    snprintf(l->owner, sizeof(l->owner), "%s", owner ? owner : "");
    l->cb = cb;
    l->ctx = ctx;
    atomic_init(&l->refs, 2);
    l->wfd = fds[1];
    l->sock = h2o_evloop_socket_create(loop_get(), fds[0], 0);
    l->sock->data = l;
    h2o_socket_read_start(l->sock, on_done);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    if (pthread_create(&th, &attr, lookup_thread, l) != 0) {
        /* no thread: answer "cannot resolve" through the same path */
        release(l->owner);
        l->gai = EAI_AGAIN;
        close(l->wfd);
        unref(l);
    }
    pthread_attr_destroy(&attr);
    return l;
}

struct egress_lookup *egress_resolve(const char *host, egress_resolved_fn cb, void *ctx,
                                     struct err *err)
{
    return egress_resolve_for(host, NULL, cb, ctx, err);
}

void egress_lookup_cancel(struct egress_lookup *l)
{
    if (!l)
        return;
    l->cancelled = true;
    if (l->sock) {
        h2o_socket_read_stop(l->sock);
        h2o_socket_close(l->sock);
        l->sock = NULL;
    }
    unref(l);
}

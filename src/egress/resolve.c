/* Name resolution off the loop: getaddrinfo may wait seconds for a DNS server, so each lookup
 * runs on a thread of its own, which writes one byte to a pipe the loop watches when it is done.
 * The lookup is shared by the thread and the loop (two references); whoever lets go last frees
 * it, so a cancelled lookup needs no waiting for its thread.
 *
 * getaddrinfo cannot be stopped, so the pool is bounded by counting threads, not callers: a
 * lookup is charged to its owner from its claim until its thread really ends, and is refused,
 * rather than a thread more started, past the owner's share or the pool's. Its caller waits at
 * most the deadline (egress_resolve_configure): then it is answered -ETIMEDOUT, and the thread,
 * still charged, finishes on its own. So a user whose names never answer holds at most their
 * own share for as long as the resolver takes to give up, a sandbox that asks and hangs up again
 * and again cannot take more, and the last `reserved` threads are only ever the server's own. */
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

#include "base/cleanup.h"
#include "base/loop.h"
#include "base/util.h"

struct egress_lookup {
    char host[256];
    char owner[64]; /* "" for nobody's */
    bool server;    /* the server's own fetch (owner: its cause) rather than a user's */
    struct egress_addr addrs[EGRESS_ADDRS_MAX];
    int n;
    int gai; /* getaddrinfo's result */
    int wfd; /* the thread's end of the pipe */
    h2o_socket_t *sock;
    egress_resolved_fn cb;
    void *ctx;
    bool cancelled;
    struct loop_timer deadline; /* the loop's: its caller is answered by then */
    int64_t timeout_ms;
    atomic_int refs;
};

/* Lookup threads alive, cancelled and overdue ones included (a resolver may take seconds to give
 * up): past the caps a lookup is refused rather than a thread more started. */
static struct egress_lookups alive;
static pthread_mutex_t alive_lock = PTHREAD_MUTEX_INITIALIZER;
static int reserved = EGRESS_LOOKUPS_RESERVED; /* set on the loop before any lookup */
static int64_t timeout_ms = EGRESS_LOOKUP_TIMEOUT_MS;

static bool has_key(const struct egress_owner *o)
{
    return o->key && o->key[0];
}

static int slot_of(const struct egress_lookups *t, const struct egress_owner *o)
{
    for (int i = 0; i < EGRESS_LOOKUPS_MAX; i++)
        if (t->slot[i].n > 0 && t->slot[i].server == o->server &&
            strcmp(t->slot[i].owner, o->key) == 0)
            return i;
    return -1;
}

int egress_lookups_claim(struct egress_lookups *t, const struct egress_owner *o, int reserve,
                         struct err *err)
{
    int i = has_key(o) ? slot_of(t, o) : -1;
    if (i >= 0 && t->slot[i].n >= o->max)
        return o->server ? err_set(err, -EAGAIN,
                                   "%d name lookups on behalf of '%s' are under way, the most it "
                                   "may have at once; retry when one has ended",
                                   o->max, o->key)
                         : err_set(err, -EAGAIN,
                                   "%d name lookups of this user's sandboxes and runs are under "
                                   "way, the most one user may have at once; retry when one has "
                                   "ended",
                                   o->max);
    if (t->total >= EGRESS_LOOKUPS_MAX)
        return err_set(err, -EAGAIN, "%d name lookups are under way; retry later",
                       EGRESS_LOOKUPS_MAX);
    if (!o->server && t->users >= EGRESS_LOOKUPS_MAX - reserve)
        return err_set(err, -EAGAIN,
                       "%d name lookups of users are under way, the most they may have together "
                       "(%d are kept for the server's own); retry later",
                       t->users, reserve);
    t->total++;
    t->users += !o->server;
    if (!has_key(o))
        return 0;
    if (i < 0) {
        /* a free slot exists: no more owners than lookups alive */
        for (i = 0; t->slot[i].n > 0; i++)
            ;
        snprintf(t->slot[i].owner, sizeof(t->slot[i].owner), "%s", o->key);
        t->slot[i].server = o->server;
    }
    t->slot[i].n++;
    return 0;
}

void egress_lookups_release(struct egress_lookups *t, const struct egress_owner *o)
{
    t->total--;
    t->users -= !o->server;
    int i = has_key(o) ? slot_of(t, o) : -1;
    if (i >= 0 && --t->slot[i].n == 0)
        t->slot[i].owner[0] = '\0';
}

void egress_resolve_configure(int reserve, int64_t deadline_ms)
{
    pthread_mutex_lock(&alive_lock);
    reserved = reserve;
    timeout_ms = deadline_ms;
    pthread_mutex_unlock(&alive_lock);
}

static void release(const struct egress_lookup *l)
{
    const struct egress_owner o = {.server = l->server, .key = l->owner};
    pthread_mutex_lock(&alive_lock);
    egress_lookups_release(&alive, &o);
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
    release(l);
    unref(l);
    return NULL;
}

/* The loop lets go of l: its callback will not run (the thread may still). */
static void let_go(struct egress_lookup *l)
{
    l->cancelled = true;
    loop_timer_stop(&l->deadline);
    if (l->sock) {
        h2o_socket_read_stop(l->sock);
        h2o_socket_close(l->sock);
        l->sock = NULL;
    }
    unref(l);
}

static void on_deadline(struct loop_timer *t)
{
    struct egress_lookup *l = container_of(t, struct egress_lookup, deadline);
    struct err err = {0};
    err_set(&err, -ETIMEDOUT, "cannot resolve '%s' within %lld ms", l->host,
            (long long)l->timeout_ms);
    egress_resolved_fn cb = l->cb;
    void *ctx = l->ctx;
    let_go(l);
    cb(ctx, NULL, 0, &err);
}

static void on_done(h2o_socket_t *sock, const char *errstr)
{
    struct egress_lookup *l = sock->data;
    h2o_socket_read_stop(sock);
    h2o_socket_close(sock);
    l->sock = NULL;
    loop_timer_stop(&l->deadline);
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

static struct egress_lookup *resolve(const char *host, const struct egress_owner *o,
                                     egress_resolved_fn cb, void *ctx, struct err *err)
{
    pthread_mutex_lock(&alive_lock);
    int r = egress_lookups_claim(&alive, o, reserved, err);
    int64_t ms = timeout_ms;
    pthread_mutex_unlock(&alive_lock);
    if (r < 0) {
        err_wrap(err, "cannot resolve '%s' now", host);
        return NULL;
    }
    struct egress_lookup *l = xcalloc(1, sizeof(*l));
    snprintf(l->host, sizeof(l->host), "%s", host);
    snprintf(l->owner, sizeof(l->owner), "%s", o->key ? o->key : "");
    l->server = o->server;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        err_set(err, -errno, "cannot resolve '%s': pipe: %s", host, strerror(errno));
        release(l);
        free(l);
        return NULL;
    }
    l->cb = cb;
    l->ctx = ctx;
    l->timeout_ms = ms;
    atomic_init(&l->refs, 2);
    l->wfd = fds[1];
    l->sock = h2o_evloop_socket_create(loop_get(), fds[0], 0);
    l->sock->data = l;
    h2o_socket_read_start(l->sock, on_done);
    loop_timer_start(&l->deadline, (uint64_t)ms, on_deadline);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    if (pthread_create(&th, &attr, lookup_thread, l) != 0) {
        /* no thread: answer "cannot resolve" through the same path */
        release(l);
        l->gai = EAI_AGAIN;
        close(l->wfd);
        unref(l);
    }
    pthread_attr_destroy(&attr);
    return l;
}

struct egress_lookup *egress_resolve_for(const char *host, const char *user_id,
                                         egress_resolved_fn cb, void *ctx, struct err *err)
{
    const struct egress_owner o = {.key = user_id, .max = EGRESS_LOOKUPS_PER_USER};
    return resolve(host, &o, cb, ctx, err);
}

struct egress_lookup *egress_resolve(const char *host, const char *cause, int per_cause,
                                     egress_resolved_fn cb, void *ctx, struct err *err)
{
    const struct egress_owner o = {.server = true, .key = cause, .max = per_cause};
    return resolve(host, &o, cb, ctx, err);
}

void egress_lookup_cancel(struct egress_lookup *l)
{
    if (l)
        let_go(l);
}

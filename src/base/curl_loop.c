/* libcurl's multi-socket interface on the h2o loop. curl's sockets and its timeout (a timerfd)
 * live in a private epoll set; that epoll descriptor is one h2o socket, readable whenever any of
 * them is ready. No threads, and no transfer waits for another.
 *
 * Setting a timerfd is a system call, and a costly one in a virtual machine, while curl moves
 * its timeout several times per transfer: to "now" when a transfer is added, to its stall check
 * a second later, to "none" when it ends. So "now" is a zero-length timer on the loop, which
 * runs before the loop next waits, and the timerfd is only ever moved earlier: a later timeout
 * is remembered and the timerfd, firing early, is set again for it.
 *
 * curl also takes a connection's socket out of its set when a transfer ends and puts it back for
 * the next transfer on that connection, two epoll_ctl calls per request on a kept connection.
 * So a connection's socket waiting for input stays registered when curl lets it go, and is
 * taken out only when it turns ready with nobody wanting it (the upstream closed it) or when curl
 * closes it. Only sockets curl made for a connection are kept that way: curl tells their birth
 * (its sockopt callback) and their close (its closesocket callback); its other sockets (the
 * resolver's) are closed without a word, so they are taken out as curl asks. */
#include "base/curl_loop.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/loop.h"
#include "base/util.h"

/* A descriptor as epfd has it. */
struct watched {
    uint8_t events; /* EPOLLIN | EPOLLOUT registered, 0 when not */
    bool wanted;    /* curl watches it now */
    bool conn;      /* a connection's socket: curl closes it through close_socket */
};

struct curl_loop {
    CURLM *multi;
    struct watched *fds; /* by descriptor */
    size_t nfds;
    int epfd, tfd;
    h2o_socket_t *watch;
    void (*done)(CURL *easy, CURLcode rc);
    struct loop_timer now; /* curl asked to be called at once */
    int64_t want_ms;       /* when curl last asked to be called (monotonic), or -1 */
    int64_t armed_ms;      /* when the timerfd fires, or -1 */
};

static struct watched *watched(struct curl_loop *cl, curl_socket_t s)
{
    if ((size_t)s >= cl->nfds) {
        size_t n = cl->nfds ? cl->nfds : 64;
        while (n <= (size_t)s)
            n *= 2;
        cl->fds = xrealloc(cl->fds, n * sizeof(*cl->fds));
        memset(cl->fds + cl->nfds, 0, (n - cl->nfds) * sizeof(*cl->fds));
        cl->nfds = n;
    }
    return &cl->fds[s];
}

static void unwatch(struct curl_loop *cl, struct watched *w, curl_socket_t s)
{
    if (w->events)
        epoll_ctl(cl->epfd, EPOLL_CTL_DEL, s, NULL);
    w->events = 0;
}

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    struct curl_loop *cl = userp;
    struct watched *w = watched(cl, s);
    if (what == CURL_POLL_REMOVE) {
        w->wanted = false;
        if (!(w->conn && w->events == EPOLLIN))
            unwatch(cl, w, s);
        return 0;
    }
    uint8_t events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    w->wanted = true;
    if (w->events == events)
        return 0;
    struct epoll_event ev = {.events = events, .data.fd = s};
    if (epoll_ctl(cl->epfd, w->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &ev) < 0)
        epoll_ctl(cl->epfd, errno == EEXIST ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &ev);
    w->events = events;
    return 0;
}

/* A connection's socket is new: nothing of an earlier socket with its number is registered. */
static int on_sockopt(void *userp, curl_socket_t s, curlsocktype purpose)
{
    struct curl_loop *cl = userp;
    if (purpose == CURLSOCKTYPE_IPCXN)
        *watched(cl, s) = (struct watched){.conn = true};
    return CURL_SOCKOPT_OK;
}

/* curl closes a connection's socket; closing takes it out of epfd too. */
static int on_close_socket(void *userp, curl_socket_t s)
{
    struct curl_loop *cl = userp;
    *watched(cl, s) = (struct watched){0};
    return close(s);
}

static void arm(struct curl_loop *cl, int64_t now, int64_t due)
{
    int64_t ms = due > now ? due - now : 1; /* an all-zero it_value would disarm the timer */
    struct itimerspec its = {.it_value = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000}};
    timerfd_settime(cl->tfd, 0, &its, NULL);
    cl->armed_ms = due;
}

static void check_done(struct curl_loop *cl);

static void on_now(struct loop_timer *t)
{
    struct curl_loop *cl = container_of(t, struct curl_loop, now);
    int running;
    curl_multi_socket_action(cl->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(cl);
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
    struct curl_loop *cl = userp;
    if (timeout_ms < 0) {
        cl->want_ms = -1; /* an armed timerfd that fires finds nothing wanted */
        return 0;
    }
    int64_t now = time_mono_ms();
    cl->want_ms = now + timeout_ms;
    if (timeout_ms == 0)
        loop_timer_start(&cl->now, 0, on_now);
    else if (cl->armed_ms < 0 || cl->armed_ms > cl->want_ms)
        arm(cl, now, cl->want_ms);
    return 0;
}

/* The timerfd fired: curl's timeout is due, or it was moved later and the timerfd is set again. */
static void on_timerfd(struct curl_loop *cl)
{
    uint64_t ticks;
    if (read(cl->tfd, &ticks, sizeof(ticks)) < 0)
        return; /* spurious: nothing expired */
    cl->armed_ms = -1;
    if (cl->want_ms < 0)
        return;
    int64_t now = time_mono_ms();
    if (cl->want_ms > now) {
        arm(cl, now, cl->want_ms);
        return;
    }
    int running;
    curl_multi_socket_action(cl->multi, CURL_SOCKET_TIMEOUT, 0, &running);
}

static void check_done(struct curl_loop *cl)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(cl->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *easy = msg->easy_handle;
        CURLcode rc = msg->data.result;
        curl_multi_remove_handle(cl->multi, easy);
        cl->done(easy, rc);
    }
}

static void on_ready(h2o_socket_t *sock, const char *err)
{
    struct curl_loop *cl = sock->data;
    struct epoll_event evs[64];
    int n = epoll_wait(cl->epfd, evs, 64, 0);
    int running;
    for (int i = 0; i < n; i++) {
        if (evs[i].data.fd == cl->tfd) {
            on_timerfd(cl);
            continue;
        }
        struct watched *w = watched(cl, evs[i].data.fd);
        if (!w->wanted) {
            unwatch(cl, w, evs[i].data.fd); /* a kept connection's socket, closed by its peer */
            continue;
        }
        int flags = 0;
        if (evs[i].events & EPOLLIN)
            flags |= CURL_CSELECT_IN;
        if (evs[i].events & EPOLLOUT)
            flags |= CURL_CSELECT_OUT;
        if (evs[i].events & (EPOLLERR | EPOLLHUP))
            flags |= CURL_CSELECT_ERR;
        curl_multi_socket_action(cl->multi, evs[i].data.fd, flags, &running);
    }
    check_done(cl);
}

struct curl_loop *curl_loop_new(void (*done)(CURL *easy, CURLcode rc))
{
    struct curl_loop *cl = xcalloc(1, sizeof(*cl));
    cl->done = done;
    cl->want_ms = cl->armed_ms = -1;
    cl->multi = curl_multi_init();
    cl->epfd = epoll_create1(EPOLL_CLOEXEC);
    cl->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (!cl->multi || cl->epfd < 0 || cl->tfd < 0)
        abort(); /* out of memory or descriptors at start: nothing sensible to do */
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = cl->tfd};
    epoll_ctl(cl->epfd, EPOLL_CTL_ADD, cl->tfd, &ev);
    curl_multi_setopt(cl->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(cl->multi, CURLMOPT_SOCKETDATA, cl);
    curl_multi_setopt(cl->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(cl->multi, CURLMOPT_TIMERDATA, cl);
    cl->watch = h2o_evloop_socket_create(loop_get(), cl->epfd, H2O_SOCKET_FLAG_DONT_READ);
    cl->watch->data = cl;
    h2o_socket_read_start(cl->watch, on_ready);
    return cl;
}

void curl_loop_free(struct curl_loop *cl)
{
    if (!cl)
        return;
    loop_timer_stop(&cl->now);
    h2o_socket_read_stop(cl->watch);
    h2o_socket_close(cl->watch); /* closes epfd */
    curl_multi_cleanup(cl->multi);
    close(cl->tfd);
    free(cl->fds);
    free(cl);
}

void curl_loop_add(struct curl_loop *cl, CURL *easy)
{
    curl_easy_setopt(easy, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
    curl_easy_setopt(easy, CURLOPT_SOCKOPTDATA, cl);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETDATA, cl);
    curl_multi_add_handle(cl->multi, easy);
}

void curl_loop_remove(struct curl_loop *cl, CURL *easy)
{
    curl_multi_remove_handle(cl->multi, easy);
}

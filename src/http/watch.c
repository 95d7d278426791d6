/* Watches of clients whose requests are still unanswered (watch.h): one list, one timer that
 * runs only while the list is not empty. */
#include "http/watch.h"

#include <errno.h>
#include <sys/socket.h>

#include "base/loop.h"

#define WATCH_INTERVAL_MS 1000

static struct http_watch *watched;
static struct loop_timer timer;

/* A request waiting for its answer sends nothing more, so its socket reads either nothing
 * (EAGAIN: still there), a next pipelined request (still there), or end of file or an error. */
static bool client_gone(int fd)
{
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void on_tick(struct loop_timer *t)
{
    (void)t;
    /* First take the clients that left off the list, then tell each: telling one may end its
     * request and free its watch, but no other. */
    struct http_watch *left = NULL;
    for (struct http_watch *w = watched, *next; w; w = next) {
        next = w->next;
        if (client_gone(w->fd)) {
            http_watch_stop(w);
            w->next = left;
            left = w;
        }
    }
    while (left) {
        struct http_watch *w = left;
        left = w->next;
        w->next = NULL;
        w->gone(w);
    }
    if (watched)
        loop_timer_start(&timer, WATCH_INTERVAL_MS, on_tick);
}

bool http_watch_start(struct http_watch *w, h2o_req_t *req, void (*gone)(struct http_watch *w))
{
    h2o_socket_t *sock =
        req->conn->callbacks->get_socket ? req->conn->callbacks->get_socket(req->conn) : NULL;
    if (!sock)
        return false;
    w->gone = gone;
    w->fd = h2o_socket_get_fd(sock);
    w->next = watched;
    if (watched)
        watched->pprev = &w->next;
    w->pprev = &watched;
    watched = w;
    if (!h2o_timeout_is_linked(&timer.entry))
        loop_timer_start(&timer, WATCH_INTERVAL_MS, on_tick);
    return true;
}

void http_watch_stop(struct http_watch *w)
{
    if (!w->pprev)
        return;
    *w->pprev = w->next;
    if (w->next)
        w->next->pprev = w->pprev;
    w->next = NULL;
    w->pprev = NULL;
    if (!watched)
        loop_timer_stop(&timer);
}

bool http_watch_poll(struct http_watch *w)
{
    if (!w->pprev || !client_gone(w->fd))
        return false;
    http_watch_stop(w);
    w->gone(w);
    return true;
}

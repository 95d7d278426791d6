#pragma once
/* Noticing a client that leaves before its request is answered. HTTP/1 reads nothing more from
 * a connection while its request is being answered, so h2o learns that the client closed it
 * only when the answer is written, which for a long command or a model's first token may be
 * minutes later. A watched request has its client's socket peeked once a second, and gone()
 * runs once when the client has closed it. Main thread only. */

#include <h2o.h>
#include <stdbool.h>

struct http_watch {
    void (*gone)(struct http_watch *w); /* should answer or end the request */
    int fd;                             /* private */
    struct http_watch *next, **pprev;   /* private */
};

/* Watch req's client until http_watch_stop(). Returns false (and watches nothing) when the
 * request's socket is unknown. */
bool http_watch_start(struct http_watch *w, h2o_req_t *req, void (*gone)(struct http_watch *w));
/* Stop watching: when the answer starts, or the request is disposed of. Safe to repeat, and on a
 * watch never started if it was zeroed. */
void http_watch_stop(struct http_watch *w);
/* Whether the client has left, asked now rather than at the next tick: when it has, the watch
 * stops and gone() runs before this returns, as at a tick. false for a watch that is stopped. */
bool http_watch_poll(struct http_watch *w);

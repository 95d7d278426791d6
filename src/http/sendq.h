#pragma once
/* A response body written while h2o may still be sending the previous piece (sendq.c): what is
 * written goes to pending; a flush hands pending to h2o as one piece, which stays valid until
 * h2o's proceed callback, and what is written meanwhile waits in pending for the next flush. So
 * writers never wait and never block, and at most one piece is in h2o's hands. The streaming
 * bodies (stream.c), the relay (relay.c) and the proxy's forward send through it; the owner keeps
 * its own reasons not to send (stopped, not started) and its own cap on pending (pending.len, read
 * directly). Main loop thread only. */

#include <h2o.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"

struct http_sendq {
    h2o_req_t *req;
    struct buf pending;  /* written, not yet handed to h2o */
    struct buf inflight; /* handed to h2o, valid until its proceed callback */
    bool sending;        /* inflight is in h2o's hands */
    bool final_sent;     /* the last piece has been handed over: nothing more goes */
};

/* An empty queue for req's response (h2o_start_response is the owner's to call). */
void http_sendq_init(struct http_sendq *q, h2o_req_t *req);
/* Free the buffers (from the request pool's dispose: after h2o is done with inflight). */
void http_sendq_release(struct http_sendq *q);
/* Queue len bytes (copied) for the next flush. */
void http_sendq_write(struct http_sendq *q, const void *data, size_t len);
/* Hand what is pending to h2o with state (H2O_SEND_STATE_FINAL or _ERROR make it the last
 * piece), unless a piece is in h2o's hands already, the last one has gone, or there is nothing
 * to send and state is H2O_SEND_STATE_IN_PROGRESS. Returns whether a piece was handed over. */
bool http_sendq_flush(struct http_sendq *q, h2o_send_state_t state);
/* From the generator's proceed callback: h2o is done with inflight. The owner flushes again. */
void http_sendq_proceed(struct http_sendq *q);
/* End the response as failed (H2O_SEND_STATE_ERROR) without what is pending, unless a piece is
 * in h2o's hands or the last has gone. Returns whether it was ended. */
bool http_sendq_fail(struct http_sendq *q);

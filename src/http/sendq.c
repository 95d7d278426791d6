/* Queue-while-sending for response bodies (see sendq.h): two buffers that trade places, pending
 * filling while inflight is in h2o's hands. Nothing here decides when a response starts or stops;
 * the owner does. */
#include "http/sendq.h"

void http_sendq_init(struct http_sendq *q, h2o_req_t *req)
{
    *q = (struct http_sendq){.req = req};
    buf_init(&q->pending, 0);
    buf_init(&q->inflight, 0);
}

void http_sendq_release(struct http_sendq *q)
{
    buf_release(&q->pending);
    buf_release(&q->inflight);
}

void http_sendq_write(struct http_sendq *q, const void *data, size_t len)
{
    buf_append(&q->pending, data, len);
}

bool http_sendq_flush(struct http_sendq *q, h2o_send_state_t state)
{
    bool final = !h2o_send_state_is_in_progress(state);
    if (q->sending || q->final_sent)
        return false;
    if (q->pending.len == 0 && !final)
        return false;
    struct buf t = q->inflight;
    q->inflight = q->pending;
    q->pending = t;
    buf_reset(&q->pending);
    q->sending = true;
    if (final)
        q->final_sent = true;
    h2o_iovec_t v = h2o_iovec_init(q->inflight.data, q->inflight.len);
    h2o_send(q->req, &v, v.len ? 1 : 0, state);
    return true;
}

void http_sendq_proceed(struct http_sendq *q)
{
    q->sending = false;
    buf_reset(&q->inflight);
}

bool http_sendq_fail(struct http_sendq *q)
{
    if (q->sending || q->final_sent)
        return false;
    q->final_sent = true;
    h2o_send(q->req, NULL, 0, H2O_SEND_STATE_ERROR);
    return true;
}

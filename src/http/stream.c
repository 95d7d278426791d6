/* Streaming response bodies: bytes written while h2o is still sending the previous chunk are
 * queued and go out on the next proceed callback, so writers never wait and never block. */
#include "http/http_internal.h"

#include <string.h>

#include "base/buf.h"

struct http_stream {
    h2o_generator_t gen;
    h2o_req_t *req;
    struct buf pending;  /* written, not yet handed to h2o */
    struct buf inflight; /* handed to h2o, valid until proceed */
    bool sending;
    bool end_requested;
    bool final_sent;
    bool closed;
    void (*on_close)(void *ctx);
    void *ctx;
};

static void flush(struct http_stream *s)
{
    if (s->sending || s->closed || s->final_sent)
        return;
    if (s->pending.len == 0 && !s->end_requested)
        return;
    struct buf t = s->inflight;
    s->inflight = s->pending;
    s->pending = t;
    buf_reset(&s->pending);
    s->sending = true;
    bool final = s->end_requested;
    if (final)
        s->final_sent = true;
    h2o_iovec_t v = h2o_iovec_init(s->inflight.data, s->inflight.len);
    h2o_send(s->req, &v, v.len ? 1 : 0, final ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
}

static void on_proceed(h2o_generator_t *gen, h2o_req_t *req)
{
    (void)req;
    struct http_stream *s = (struct http_stream *)gen;
    s->sending = false;
    buf_reset(&s->inflight);
    flush(s);
}

static void on_stop(h2o_generator_t *gen, h2o_req_t *req)
{
    (void)req;
    struct http_stream *s = (struct http_stream *)gen;
    if (s->closed)
        return;
    s->closed = true;
    if (!s->final_sent && s->on_close)
        s->on_close(s->ctx);
}

static void on_dispose(void *p)
{
    /* h2o calls stop before it clears the pool, so only memory is left to free here. */
    struct http_stream *s = p;
    buf_release(&s->pending);
    buf_release(&s->inflight);
}

struct http_stream *http_stream_start(h2o_req_t *req, int status, const char *content_type,
                                      void (*on_close)(void *ctx), void *ctx)
{
    struct http_stream *s = h2o_mem_alloc_shared(&req->pool, sizeof(*s), on_dispose);
    memset(s, 0, sizeof(*s));
    s->gen.proceed = on_proceed;
    s->gen.stop = on_stop;
    s->req = req;
    s->on_close = on_close;
    s->ctx = ctx;
    buf_init(&s->pending, 0);
    buf_init(&s->inflight, 0);
    req->res.status = status;
    req->res.reason = http_status_reason(status);
    http_add_header(req, H2O_TOKEN_CONTENT_TYPE, content_type);
    http_add_header(req, H2O_TOKEN_CACHE_CONTROL, "no-cache, no-transform");
    http_add_header_str(req, "x-accel-buffering", "no");
    h2o_start_response(req, &s->gen);
    return s;
}

void http_stream_write(struct http_stream *s, const void *data, size_t len)
{
    if (s->closed || s->end_requested)
        return;
    buf_append(&s->pending, data, len);
    flush(s);
}

void http_stream_end(struct http_stream *s)
{
    if (s->closed || s->end_requested)
        return;
    s->end_requested = true;
    flush(s);
}

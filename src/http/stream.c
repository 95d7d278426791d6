/* Streaming response bodies: bytes written while h2o is still sending the previous chunk are
 * queued (sendq.c) and go out on the next proceed callback, so writers never wait and never
 * block. */
#include "http/http_internal.h"

#include <string.h>

#include "http/sendq.h"

struct http_stream {
    h2o_generator_t gen;
    struct http_sendq q;
    bool end_requested;
    bool closed;
    void (*on_close)(void *ctx);
    void *ctx;
};

static void flush(struct http_stream *s)
{
    if (!s->closed)
        http_sendq_flush(&s->q,
                         s->end_requested ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
}

static void on_proceed(h2o_generator_t *gen, h2o_req_t *req)
{
    (void)req;
    struct http_stream *s = (struct http_stream *)gen;
    http_sendq_proceed(&s->q);
    flush(s);
}

static void on_stop(h2o_generator_t *gen, h2o_req_t *req)
{
    (void)req;
    struct http_stream *s = (struct http_stream *)gen;
    if (s->closed)
        return;
    s->closed = true;
    if (!s->q.final_sent && s->on_close)
        s->on_close(s->ctx);
}

static void on_dispose(void *p)
{
    /* h2o calls stop before it clears the pool, so only memory is left to free here. */
    struct http_stream *s = p;
    http_sendq_release(&s->q);
}

struct http_stream *http_stream_start(h2o_req_t *req, int status, const char *content_type,
                                      void (*on_close)(void *ctx), void *ctx)
{
    struct http_stream *s = h2o_mem_alloc_shared(&req->pool, sizeof(*s), on_dispose);
    memset(s, 0, sizeof(*s));
    s->gen.proceed = on_proceed;
    s->gen.stop = on_stop;
    s->on_close = on_close;
    s->ctx = ctx;
    http_sendq_init(&s->q, req);
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
    http_sendq_write(&s->q, data, len);
    flush(s);
}

void http_stream_end(struct http_stream *s)
{
    if (s->closed || s->end_requested)
        return;
    s->end_requested = true;
    flush(s);
}

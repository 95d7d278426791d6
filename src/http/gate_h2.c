/* The gate's view of an unauthenticated HTTP/2 connection (see gate.c for the whole design):
 * its frames followed across reads, each charged as its header arrives, and its header blocks
 * decoded with an HPACK table of the gate's own kept in step with h2o's, to find a credential
 * before h2o buffers the streams' bodies. It never changes what h2o reads. */
#include "http/gate_internal.h"

#include "http/h2o_shim.h"

#include <h2o/http2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/util.h"

/* HTTP/2 framing (RFC 9113 section 4.1) and the frames the gate looks into */
#define H2_PREFACE_LEN 24
#define H2_FRAME_HEAD 9
#define H2_MAX_FRAME 16384 /* h2o's SETTINGS_MAX_FRAME_SIZE: larger frames end the connection */
#define H2_HEADERS 0x1
#define H2_WINDOW_UPDATE 0x8
#define H2_CONTINUATION 0x9
#define H2_END_HEADERS 0x4
#define H2_PADDED 0x8
#define H2_PRIORITY 0x20

/* An HTTP/2 connection not yet authenticated: where the gate is in its frames, what it has
 * charged, and the header block being received. */
struct h2_watch {
    h2o_linklist_t link; /* in watched_h2 */
    struct http_conn *conn;
    size_t preface_left; /* bytes of the client preface still to come */
    uint8_t head[H2_FRAME_HEAD];
    size_t head_len;     /* bytes of the current frame header seen */
    size_t payload_left; /* bytes of the current frame's payload still to come */
    uint8_t type, flags;
    bool collect;     /* the payload goes to block */
    size_t frame_at;  /* where the current frame's payload starts in block */
    bool in_block;    /* a header block awaits its CONTINUATION */
    bool hpack_lost;  /* the decoder lost step with h2o's: credentials are not looked for */
    struct buf block; /* HEADERS and CONTINUATION payloads of the block being received */
    h2o_hpack_header_table_t table;
    size_t received; /* bytes charged */
};

static h2o_linklist_t watched_h2 = {&watched_h2, &watched_h2};

void gate_h2_watch(struct http_conn *c)
{
    struct h2_watch *w = xcalloc(1, sizeof(*w));
    w->conn = c;
    w->preface_left = H2_PREFACE_LEN;
    buf_init(&w->block, H2O_MAX_REQLEN);
    w->table.hpack_capacity = w->table.hpack_max_capacity =
        H2O_HTTP2_SETTINGS_DEFAULT.header_table_size;
    h2o_linklist_insert(&watched_h2, &w->link);
    c->h2 = w;
}

void gate_h2_unwatch(struct http_conn *c)
{
    struct h2_watch *w = c->h2;
    if (!w)
        return;
    h2o_linklist_unlink(&w->link);
    buf_release(&w->block);
    h2o_hpack_dispose_header_table(&w->table);
    free(w);
    c->h2 = NULL;
}

/* A header block is complete: decode it with the connection's own HPACK table, as h2o will
 * with its table, and say whether it carries a credential the main listener accepts. */
static bool h2_block_authorized(struct http_conn *c)
{
    struct h2_watch *w = c->h2;
    /* the request the decoder fills (its pool and headers); the loop's thread only */
    static h2o_req_t req;
    memset(&req, 0, sizeof(req));
    h2o_mem_init_pool(&req.pool);
    int pseudo = 0;
    size_t content_length;
    const char *err_desc = NULL;
    int r = h2o_hpack_parse_headers(&req, &w->table, (const uint8_t *)w->block.data, w->block.len,
                                    &pseudo, &content_length, NULL, &err_desc);
    bool ok = false;
    if (r != 0 && r != H2O_HTTP2_ERROR_INVALID_HEADER_CHAR) {
        w->hpack_lost = true; /* and h2o ends the connection */
    } else {
        ssize_t a = h2o_find_header(&req.headers, H2O_TOKEN_AUTHORIZATION, -1);
        ssize_t k = h2o_find_header_by_str(&req.headers, H2O_STRLIT("x-api-key"), -1);
        h2o_iovec_t auth = a >= 0 ? req.headers.entries[a].value : h2o_iovec_init(NULL, 0);
        h2o_iovec_t key = k >= 0 ? req.headers.entries[k].value : h2o_iovec_init(NULL, 0);
        ok = gate_credential_ok(c->pool, auth, key);
    }
    h2o_mem_clear_pool(&req.pool);
    return ok;
}

/* The current frame's payload is all there. Returns true when it completed a header block
 * with a valid credential. */
static bool h2_frame_end(struct http_conn *c)
{
    struct h2_watch *w = c->h2;
    if ((w->type == H2_HEADERS || w->type == H2_CONTINUATION) && (w->flags & H2_END_HEADERS))
        gate_head_arrived(c);
    if (!w->collect)
        return false;
    w->collect = false;
    if (w->block.overflowed) {
        w->hpack_lost = true; /* h2o refuses the stream without decoding the block */
        return false;
    }
    if (w->type == H2_HEADERS) {
        /* the header block fragment lies between the pad length and priority fields and the
         * padding */
        size_t len = w->block.len - w->frame_at;
        uint8_t *f = (uint8_t *)w->block.data + w->frame_at;
        size_t front = 0, pad = 0;
        if (w->flags & H2_PADDED) {
            pad = len ? f[0] : 0;
            front = 1;
        }
        if (w->flags & H2_PRIORITY)
            front += 5;
        if (front + pad > len) {
            w->hpack_lost = true; /* a protocol error: h2o ends the connection */
            return false;
        }
        memmove(f, f + front, len - front - pad);
        w->block.len = w->frame_at + len - front - pad;
    }
    if (!(w->flags & H2_END_HEADERS)) {
        w->in_block = true;
        return false;
    }
    w->in_block = false;
    bool ok = h2_block_authorized(c);
    buf_reset(&w->block);
    return ok;
}

/* A frame header is complete: charge the frame and decide whether its payload is kept. */
static const char *h2_frame_begin(struct http_conn *c)
{
    struct h2_watch *w = c->h2;
    const uint8_t *h = w->head;
    size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
    w->type = h[3];
    w->flags = h[4];
    w->head_len = 0;
    w->payload_left = len;
    if (len > H2_MAX_FRAME)
        return "http2 frame larger than allowed"; /* h2o would end the connection too */
    if (w->type != H2_WINDOW_UPDATE)
        w->received += H2_FRAME_HEAD + len;
    /* a header block is one HEADERS and the CONTINUATION frames right after it */
    if (w->in_block && w->type != H2_CONTINUATION)
        w->hpack_lost = true;
    w->collect = !w->hpack_lost && (w->type == H2_HEADERS || w->type == H2_CONTINUATION);
    if (w->collect && w->type == H2_CONTINUATION && !w->in_block)
        w->collect = false, w->hpack_lost = true;
    if (w->collect)
        w->frame_at = w->block.len;
    return NULL;
}

/* Follow the n bytes that have just arrived at p. Returns NULL, or an error for h2o to close
 * the connection with; c->h2 is NULL once the connection is authenticated. */
static const char *h2_follow(struct http_conn *c, const uint8_t *p, size_t n)
{
    struct h2_watch *w = c->h2;
    size_t limit = c->pool->srv->cfg->preauth_request_bytes;
    while (n) {
        size_t take;
        if (w->preface_left) {
            take = n < w->preface_left ? n : w->preface_left;
            w->preface_left -= take;
            w->received += take;
        } else if (w->payload_left) {
            take = n < w->payload_left ? n : w->payload_left;
            if (w->collect)
                buf_append(&w->block, p, take);
            w->payload_left -= take;
            if (!w->payload_left && h2_frame_end(c)) {
                gate_authenticate(c);
                return NULL;
            }
        } else {
            take = H2_FRAME_HEAD - w->head_len;
            take = n < take ? n : take;
            memcpy(w->head + w->head_len, p, take);
            w->head_len += take;
            if (w->head_len == H2_FRAME_HEAD) {
                const char *err = h2_frame_begin(c);
                if (err)
                    return err;
                if (!w->payload_left && h2_frame_end(c)) {
                    gate_authenticate(c);
                    return NULL;
                }
            }
        }
        p += take;
        n -= take;
        if (w->received > limit) {
            gate_note_refusal(c->pool, "unauthorized");
            return "unauthenticated http2 connection over its allowance";
        }
    }
    if (!gate_charge(c, w->received)) {
        gate_note_refusal(c->pool, "busy");
        return "too many unauthenticated requests in progress";
    }
    return NULL;
}

/* On every read of an unauthenticated HTTP/2 connection: follow what arrived. When the
 * connection is refused, what h2o has not parsed yet is dropped, and the error has h2o close
 * it. */
const char *gate_h2_check(struct http_conn *c)
{
    h2o_buffer_t *in = c->sock->input;
    size_t n = c->sock->bytes_read < in->size ? c->sock->bytes_read : in->size;
    const char *err = h2_follow(c, (const uint8_t *)in->bytes + in->size - n, n);
    if (err) {
        gate_h2_unwatch(c);
        gate_charge(c, 0);
        c->gated = false;
        h2o_buffer_consume(&c->sock->input, c->sock->input->size);
    }
    return err;
}

void http_gate_after_loop(void)
{
    for (h2o_linklist_t *l = watched_h2.next; l != &watched_h2; l = l->next) {
        struct http_conn *c = H2O_STRUCT_FROM_MEMBER(struct h2_watch, link, l)->conn;
        if (h2o_shim_read_cb(c->sock) == c->h2o_read)
            gate_hook(c);
    }
}

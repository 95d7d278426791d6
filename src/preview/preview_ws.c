/* A preview's WebSockets: the client's upgrade request is sent on to the app in the sandbox
 * (over the connection sandbox_connect made), the app's 101 answered to the client through h2o's
 * HTTP/1 upgrade, then bytes are relayed both ways. Each direction holds at most what one read
 * brought in until it is written (a side is not read while the other is written to), so a
 * WebSocket holds a bounded number of bytes whichever side is slow. A WebSocket ends with its
 * preview (revoked, expired), and one whose app does not answer its handshake in
 * HANDSHAKE_MS is refused. */
#include "preview/preview_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "base/picohttp.h"
#include "base/util.h"
#include "http/http_internal.h"

#include <h2o/http1.h>

#define HANDSHAKE_MS 10000
#define HEAD_MAX (16 * 1024) /* bytes of the app's answer to the handshake */

struct ws_conn {
    struct previews *pv;
    struct ws_conn *next;
    struct pending *pd; /* the request, until it is upgraded or gone */
    struct preview_slot *slot;
    h2o_socket_t *up;                  /* the app */
    h2o_socket_t *client;              /* once upgraded */
    char *head;                        /* the handshake as sent to the app */
    size_t up_pending, client_pending; /* bytes of each side's input being written to the other */
    int64_t handshake_until;           /* monotonic ms, 0 once upgraded */
    bool upgrading, closed;
};

static void ws_free(struct ws_conn *c)
{
    for (struct ws_conn **pp = &c->pv->tunnels; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    preview_slot_release(c->slot);
    free(c->head);
    free(c);
}

static void ws_close(struct ws_conn *c)
{
    if (c->closed)
        return;
    c->closed = true;
    if (c->up) {
        c->up->data = NULL;
        h2o_socket_close(c->up);
        c->up = NULL;
    }
    if (c->client) {
        c->client->data = NULL;
        h2o_socket_close(c->client);
        c->client = NULL;
    }
    if (c->pd) {
        c->pd->wsc = NULL;
        c->pd = NULL;
    }
    ws_free(c);
}

/* The handshake failed: the client is told why, when it still waits. */
static void ws_fail(struct ws_conn *c, int status, const char *msg)
{
    if (c->pd && c->pd->req && !c->upgrading)
        http_respond_error(c->pd->req, status, status == 504 ? "upstream_timeout" : "bad_gateway",
                           msg);
    log_info("preview websocket refused id=%s why=\"%s\"", c->slot ? c->slot->preview : "-", msg);
    ws_close(c);
}

/* --- relaying --- */

static void on_read(h2o_socket_t *sock, const char *err);

static void forward(struct ws_conn *c, h2o_socket_t *src);

static void on_written(h2o_socket_t *dst, const char *err)
{
    struct ws_conn *c = dst->data;
    if (!c)
        return;
    if (err) {
        ws_close(c);
        return;
    }
    h2o_socket_t *src = dst == c->up ? c->client : c->up;
    size_t *pending = src == c->up ? &c->up_pending : &c->client_pending;
    h2o_buffer_consume(&src->input, *pending);
    *pending = 0;
    forward(c, src);
}

/* What src has read goes to the other side; src is read again once it is written. */
static void forward(struct ws_conn *c, h2o_socket_t *src)
{
    if (src->input->size == 0) {
        h2o_socket_read_start(src, on_read);
        return;
    }
    h2o_socket_t *dst = src == c->up ? c->client : c->up;
    h2o_socket_read_stop(src);
    size_t *pending = src == c->up ? &c->up_pending : &c->client_pending;
    *pending = src->input->size;
    h2o_iovec_t b = h2o_iovec_init(src->input->bytes, *pending);
    h2o_socket_write(dst, &b, 1, on_written);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    struct ws_conn *c = sock->data;
    if (!c)
        return;
    if (err) {
        ws_close(c);
        return;
    }
    forward(c, sock);
}

static void on_upgraded(void *ctx, h2o_socket_t *sock, size_t reqsize)
{
    struct ws_conn *c = ctx;
    c->upgrading = false;
    if (c->pd) {
        c->pd->wsc = NULL;
        c->pd = NULL;
    }
    if (!sock) {
        ws_close(c);
        return;
    }
    c->client = sock;
    sock->data = c;
    h2o_buffer_consume(&sock->input, reqsize);
    c->handshake_until = 0;
    log_info("preview websocket open id=%s", c->slot->preview);
    /* what either side sent already goes first */
    forward(c, c->up);
    if (!c->closed)
        forward(c, c->client);
}

/* --- the handshake --- */

static bool copied(const char *name, size_t len)
{
    static const char *const keep[] = {"sec-websocket-accept", "sec-websocket-protocol",
                                       "sec-websocket-extensions"};
    for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
        if (strlen(keep[i]) == len && strncasecmp(keep[i], name, len) == 0)
            return true;
    return false;
}

static void on_app_answer(h2o_socket_t *sock, const char *err)
{
    struct ws_conn *c = sock->data;
    if (!c)
        return;
    if (err) {
        ws_fail(c, 502, "the app closed the connection before it answered the WebSocket");
        return;
    }
    struct phr_header headers[64];
    size_t nh = ARRAY_SIZE(headers), msglen;
    int minor, status;
    const char *msg;
    int n = phr_parse_response(sock->input->bytes, sock->input->size, &minor, &status, &msg,
                               &msglen, headers, &nh, 0);
    if (n == -2 && sock->input->size < HEAD_MAX)
        return; /* more to come */
    if (n < 0) {
        ws_fail(c, 502, "the app's answer to the WebSocket is not HTTP");
        return;
    }
    if (status != 101) {
        char why[128];
        snprintf(why, sizeof(why), "the app answered the WebSocket's upgrade with status %d",
                 status);
        ws_fail(c, 502, why);
        return;
    }
    if (!c->pd || !c->pd->req) {
        ws_close(c);
        return;
    }
    h2o_req_t *req = c->pd->req;
    for (size_t i = 0; i < nh; i++)
        if (copied(headers[i].name, headers[i].name_len)) {
            h2o_iovec_t name = h2o_strdup(&req->pool, headers[i].name, headers[i].name_len);
            h2o_strtolower(name.base, name.len);
            h2o_iovec_t v = h2o_strdup(&req->pool, headers[i].value, headers[i].value_len);
            h2o_add_header_by_str(&req->pool, &req->res.headers, name.base, name.len, 0, NULL,
                                  v.base, v.len);
        }
    preview_answer_headers(req, c->pd->prefix);
    req->res.status = 101;
    req->res.reason = "Switching Protocols";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_UPGRADE, NULL, H2O_STRLIT("websocket"));
    h2o_buffer_consume(&sock->input, (size_t)n);
    h2o_socket_read_stop(sock);
    c->upgrading = true;
    h2o_http1_upgrade(req, NULL, 0, on_upgraded, c);
}

static void on_head_sent(h2o_socket_t *sock, const char *err)
{
    struct ws_conn *c = sock->data;
    if (c && err)
        ws_fail(c, 502, "the WebSocket's handshake could not be sent to the app");
}

static bool skipped(const char *name, size_t len)
{
    static const char *const skip[] = {"connection",
                                       "upgrade",
                                       "host",
                                       "cookie",
                                       "keep-alive",
                                       "proxy-connection",
                                       "te",
                                       "transfer-encoding",
                                       "content-length",
                                       "forwarded",
                                       "x-forwarded-for",
                                       "x-forwarded-host",
                                       "x-forwarded-proto",
                                       "x-forwarded-prefix"};
    for (size_t i = 0; i < ARRAY_SIZE(skip); i++)
        if (strlen(skip[i]) == len && strncasecmp(skip[i], name, len) == 0)
            return true;
    return false;
}

void preview_ws_start(struct pending *pd, int fd)
{
    struct previews *pv = pd->pv;
    struct ws_conn *c = xcalloc(1, sizeof(*c));
    c->pv = pv;
    c->pd = pd;
    c->slot = pd->slot;
    pd->slot = NULL;
    pd->wsc = c;
    c->handshake_until = time_mono_ms() + HANDSHAKE_MS;
    c->next = pv->tunnels;
    pv->tunnels = c;
    c->up = h2o_evloop_socket_create(loop_get(), fd, 0);
    c->up->data = c;
    h2o_req_t *req = pd->req;
    struct buf b;
    buf_init(&b, 1024);
    buf_printf(&b,
               "GET %.*s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nX-Forwarded-Prefix: %s\r\n",
               (int)(req->path.len - pd->rest_at), req->path.base + pd->rest_at, pd->p.port,
               pd->prefix);
    for (size_t i = 0; i < req->headers.size; i++) {
        const h2o_header_t *e = &req->headers.entries[i];
        if (!skipped(e->name->base, e->name->len))
            buf_printf(&b, "%.*s: %.*s\r\n", (int)e->name->len, e->name->base, (int)e->value.len,
                       e->value.base);
    }
    buf_puts(&b, "\r\n");
    size_t len;
    c->head = buf_steal(&b, &len);
    h2o_iovec_t head = h2o_iovec_init(c->head, len);
    h2o_socket_write(c->up, &head, 1, on_head_sent);
    h2o_socket_read_start(c->up, on_app_answer);
}

void preview_ws_req_gone(struct ws_conn *c)
{
    c->pd = NULL;
    if (!c->upgrading && c->handshake_until)
        ws_close(c); /* gone before its upgrade */
}

void preview_ws_close(struct previews *pv, const char *preview_id)
{
    for (struct ws_conn *c = pv->tunnels, *next; c; c = next) {
        next = c->next;
        if (strcmp(c->slot->preview, preview_id) == 0 && !c->upgrading)
            ws_close(c);
    }
}

void preview_ws_expire(struct previews *pv, int64_t now)
{
    int64_t mono = time_mono_ms();
    for (struct ws_conn *c = pv->tunnels, *next; c; c = next) {
        next = c->next;
        if (c->upgrading)
            continue;
        struct store_preview p;
        struct err err = {0};
        if (c->handshake_until && mono >= c->handshake_until)
            ws_fail(c, 504, "the app did not answer the WebSocket's handshake in time");
        else if (c->slot->expires_at <= now)
            ws_close(c);
        else if (store_preview_get(pv->st, c->slot->preview, &p, &err) == 0 &&
                 (p.revoked_at || p.expires_at <= now))
            ws_close(c); /* revoked through another node, or its end moved */
    }
}

void preview_ws_close_all(struct previews *pv)
{
    while (pv->tunnels) {
        struct ws_conn *c = pv->tunnels;
        if (c->pd) {
            c->pd->wsc = NULL;
            c->pd = NULL;
        }
        c->upgrading = false;
        ws_close(c);
    }
}

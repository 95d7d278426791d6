/* Admission: how many connections a listener holds and how many bytes their requests may buffer
 * before a token is checked. h2o 2.2 reads a whole request body into the socket's input before
 * any handler runs, so a handler's 401 comes too late to protect memory. The gate therefore sits
 * between the event loop and h2o's own read callback for a connection's first request: it parses
 * the request head as it arrives, and when the head announces a body larger than a small
 * pre-authentication allowance without a valid credential, it answers 401 itself and has h2o
 * close the connection, before any of the body is read.
 *
 * Every accepted socket gets a record here (its pool, what it is charged); the record is found
 * from the socket through on_close, which h2o leaves to the application on server sockets.
 *
 * A connection whose first request the gate saw authenticated (main listener) leaves the gate and
 * may carry further requests. Any other connection serves one request: h2o sets its own read
 * callback again before a second request, so later heads would pass unseen. Every connection on
 * a sandbox's listener is of the second kind, so the gate charges each of that sandbox's requests
 * (the announced body, or the largest allowed for a chunked one) to the sandbox's budget until
 * the connection closes, whether the token is valid or not.
 *
 * HTTP/2 is not offered (see http_server_new): h2o 2.2 buffers up to 100 streams of
 * MAX_REQUEST_BYTES each per connection, in frames the gate could not attribute. */
#include "http/http_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "base/log.h"
#include "base/util.h"
#include "proxy/proxy.h"
#include "store/store.h"

/* picohttpparser, as built into libh2o, which installs no header for it */
struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};
int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len,
                      const char **path, size_t *path_len, int *minor_version,
                      struct phr_header *headers, size_t *num_headers, size_t last_len);

/* What may arrive beyond the announced request (a client pipelining) before the connection is
 * closed; h2o discards it anyway, since gated connections serve one request. */
#define GATE_SLACK (64 * 1024)

struct http_pool {
    struct http_server *srv;
    size_t conns, max_conns;
    size_t bytes, max_bytes; /* charged by connections the gate still watches */
    unsigned refs;           /* the listener's, and one per connection */
    int64_t warned_ms;       /* refusals are logged at most once a second per pool */
    unsigned long refused;   /* since the last warning */
    char sandbox[64];        /* "" for the main listener */
};

struct http_conn {
    struct http_pool *pool;
    h2o_socket_t *sock;
    h2o_socket_cb h2o_read; /* h2o's read callback, called after the gate's */
    size_t charged;         /* bytes charged to the pool */
    size_t allowed;         /* input the request may fill, once its head is known */
    size_t scanned;         /* input already searched for the end of the head */
    size_t drain_left;      /* after a refusal: bytes still read and dropped before closing */
    bool head_done;
    bool authenticated; /* its first request carried a valid credential (main listener) */
    bool gated;
    bool draining; /* refused: h2o sees nothing more, the client's body is read and dropped */
};

static struct {
    size_t conns; /* on every listener */
    size_t bytes; /* charged on every listener */
} totals;

struct http_pool *http_pool_new(struct http_server *srv, const char *sandbox)
{
    struct http_pool *p = xcalloc(1, sizeof(*p));
    p->srv = srv;
    p->refs = 1;
    if (sandbox) {
        snprintf(p->sandbox, sizeof(p->sandbox), "%s", sandbox);
        p->max_conns = srv->cfg->sandbox_connections;
        p->max_bytes = srv->cfg->sandbox_bytes;
    } else {
        p->max_conns = srv->cfg->max_connections;
        p->max_bytes = srv->cfg->preauth_total_bytes;
    }
    return p;
}

void http_pool_release(struct http_pool *p)
{
    if (p && --p->refs == 0)
        free(p);
}

static void note_refusal(struct http_pool *p, const char *why)
{
    p->refused++;
    int64_t now = time_mono_ms();
    if (now - p->warned_ms < 1000)
        return;
    log_warn("http refused reason=%s sbx=%s count=%lu conns=%zu bytes=%zu", why,
             p->sandbox[0] ? p->sandbox : "-", p->refused, p->conns, p->bytes);
    p->warned_ms = now;
    p->refused = 0;
}

static bool charge(struct http_conn *c, size_t n)
{
    struct http_pool *p = c->pool;
    if (n > c->charged && p->bytes + (n - c->charged) > p->max_bytes)
        return false;
    p->bytes = p->bytes - c->charged + n;
    totals.bytes = totals.bytes - c->charged + n;
    c->charged = n;
    return true;
}

static void conn_closed(void *data)
{
    struct http_conn *c = data;
    charge(c, 0);
    c->pool->conns--;
    totals.conns--;
    http_pool_release(c->pool);
    free(c);
}

static struct http_conn *conn_of(h2o_req_t *req)
{
    if (!req->conn->callbacks->get_socket)
        return NULL;
    h2o_socket_t *sock = req->conn->callbacks->get_socket(req->conn);
    return sock && sock->on_close.cb == conn_closed ? sock->on_close.data : NULL;
}

const char *http_sandbox_of(h2o_req_t *req)
{
    struct http_conn *c = conn_of(req);
    return c && c->pool->sandbox[0] ? c->pool->sandbox : NULL;
}

bool http_conn_may_persist(h2o_req_t *req)
{
    struct http_conn *c = conn_of(req);
    return c && c->authenticated;
}

void http_gate_counts(size_t *conns, size_t *gated_bytes)
{
    *conns = totals.conns;
    *gated_bytes = totals.bytes;
}

/* Answer on the socket directly (h2o has no request yet) and end the connection's sending side.
 * A few hundred bytes into a socket that has sent nothing yet: the send buffer has room. A
 * client that goes on sending its body would see a reset, not the answer, if the socket were
 * closed with its data unread, so the connection stays open while the body arrives, each read
 * dropped at once, up to the largest body h2o would take; then, or at the client's close or at
 * h2o's request timeout (which is not cleared, h2o never having seen the head), it closes. */
static const char *refuse(struct http_conn *c, int status, const char *extra, const char *code,
                          const char *message)
{
    char body[256], head[512];
    int blen = snprintf(body, sizeof(body), "{\"error\":\"%s\",\"code\":\"%s\"}", message, code);
    int hlen =
        snprintf(head, sizeof(head),
                 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n%sConnection: close\r\n"
                 "Content-Length: %d\r\n\r\n",
                 status, http_status_reason(status), extra, blen);
    int fd = h2o_socket_get_fd(c->sock);
    struct iovec iov[2] = {{head, (size_t)hlen}, {body, (size_t)blen}};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
    (void)sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    note_refusal(c->pool, code);
    charge(c, 0);
    c->draining = true;
    c->drain_left = c->pool->srv->cfg->max_request_bytes + GATE_SLACK;
    return NULL;
}

static const char *drain(struct http_conn *c)
{
    size_t n = c->sock->input->size;
    h2o_buffer_consume(&c->sock->input, n);
    if (n > c->drain_left)
        return "refused request drained";
    c->drain_left -= n;
    return NULL;
}

static bool name_is(const struct phr_header *h, const char *name)
{
    size_t n = strlen(name);
    return h->name_len == n && strncasecmp(h->name, name, n) == 0;
}

/* Whether the head carries a credential the listener accepts: a user's bearer token or a proxy
 * token on the main listener, a proxy token of this sandbox on a sandbox's listener. */
static bool head_authorized(struct http_pool *p, const struct phr_header *hs, size_t n)
{
    h2o_iovec_t auth = {NULL, 0}, key = {NULL, 0};
    for (size_t i = 0; i < n; i++) {
        if (name_is(&hs[i], "authorization"))
            auth = h2o_iovec_init(hs[i].value, hs[i].value_len);
        else if (name_is(&hs[i], "x-api-key"))
            key = h2o_iovec_init(hs[i].value, hs[i].value_len);
    }
    if (!auth.len && !key.len)
        return false;
    if (!p->sandbox[0] && auth.len > 7 && strncasecmp(auth.base, "Bearer ", 7) == 0) {
        struct store_user user;
        struct err err = {0};
        if (http_token_check(p->srv, auth.base + 7, auth.len - 7, &user, NULL, &err) == 0)
            return true;
    }
    return p->srv->proxy && proxy_head_authorized(p->srv->proxy, key, auth, p->sandbox);
}

/* The first request's head has arrived (len bytes): let it through (authenticated or not), or
 * refuse it (c->draining). Returns NULL, as refuse() does. */
static const char *judge_head(struct http_conn *c, size_t len, const struct phr_header *hs,
                              size_t n)
{
    struct http_pool *p = c->pool;
    const struct config *cfg = p->srv->cfg;
    bool chunked = false;
    size_t body = 0;
    for (size_t i = 0; i < n; i++) {
        if (name_is(&hs[i], "transfer-encoding")) {
            chunked = true;
        } else if (name_is(&hs[i], "content-length") && !body) {
            body = h2o_strtosize(hs[i].value, hs[i].value_len);
            if (body == SIZE_MAX)
                body = 0; /* h2o answers 400 */
        }
    }
    if (chunked || body > cfg->max_request_bytes)
        body = cfg->max_request_bytes; /* the most h2o reads before it answers 413 */
    bool authorized = (chunked || len + body > cfg->preauth_request_bytes || !p->sandbox[0]) &&
                      head_authorized(p, hs, n);
    if (authorized && !p->sandbox[0]) {
        c->authenticated = true;
        c->gated = false;
        charge(c, 0);
        return NULL;
    }
    if (!authorized && (chunked || len + body > cfg->preauth_request_bytes)) {
        if (p->sandbox[0])
            return refuse(c, 401, "", "missing_token",
                          "a valid proxy token is required before a request body larger than "
                          "the unauthenticated allowance is read");
        return refuse(c, 401, "WWW-Authenticate: Bearer realm=\"sandbox-mcp\"\r\n", "unauthorized",
                      "a valid token is required before a request body larger than the "
                      "unauthenticated allowance is read");
    }
    c->allowed = len + body;
    if (!charge(c, c->allowed > c->sock->input->size ? c->allowed : c->sock->input->size))
        return refuse(c, 503, "Retry-After: 1\r\n", "busy",
                      p->sandbox[0] ? "this sandbox has too many requests in progress"
                                    : "too many unauthenticated requests in progress");
    return NULL;
}

/* On every read while the gate watches: NULL to go on (c->draining when the request was
 * refused), or an error for h2o to close the connection with. */
static const char *gate_check(struct http_conn *c)
{
    const struct config *cfg = c->pool->srv->cfg;
    size_t in = c->sock->input->size;
    if (c->head_done) {
        /* h2o may be reading the body: close rather than answer beside it */
        if (in > c->allowed + GATE_SLACK) {
            note_refusal(c->pool, "excess_data");
            return "more data than the request announced";
        }
        return NULL;
    }
    /* as much of the input as h2o parses as a head */
    size_t scan = in < H2O_MAX_REQLEN ? in : H2O_MAX_REQLEN;
    const char *method, *path;
    size_t mlen, plen, n = H2O_MAX_HEADERS;
    int minor;
    struct phr_header hs[H2O_MAX_HEADERS];
    int r = phr_parse_request(c->sock->input->bytes, scan, &method, &mlen, &path, &plen, &minor, hs,
                              &n, c->scanned);
    c->scanned = scan;
    if (r > 0) {
        c->head_done = true;
        return judge_head(c, (size_t)r, hs, n);
    }
    if (r == -2 && in > cfg->preauth_request_bytes)
        return refuse(c, 431, "", "head_too_large", "the request head is too large");
    /* incomplete, or not HTTP/1 (h2o answers 400) */
    if (!charge(c, in))
        return refuse(c, 503, "Retry-After: 1\r\n", "busy",
                      c->pool->sandbox[0] ? "this sandbox has too many requests in progress"
                                          : "too many unauthenticated requests in progress");
    return NULL;
}

static void gate_on_read(h2o_socket_t *sock, const char *err)
{
    struct http_conn *c = sock->on_close.data;
    h2o_socket_cb next = c->h2o_read;
    if (!err && !c->draining)
        err = gate_check(c);
    if (!err && c->draining && !(err = drain(c)))
        return; /* h2o sees nothing of a refused connection */
    if (!c->gated)
        sock->_cb.read = next;
    /* may close the socket, and free c */
    next(sock, err);
}

void http_gate_accept(struct http_pool *p, h2o_accept_ctx_t *actx, h2o_socket_t *sock)
{
    if (p->conns >= p->max_conns) {
        note_refusal(p, "connections");
        h2o_socket_close(sock);
        return;
    }
    struct http_conn *c = xcalloc(1, sizeof(*c));
    c->pool = p;
    c->sock = sock;
    c->gated = true;
    p->refs++;
    p->conns++;
    totals.conns++;
    sock->on_close.cb = conn_closed;
    sock->on_close.data = c;
    h2o_accept(actx, sock);
    /* h2o's HTTP/1 connection reads with its own callback from now on; the gate goes first */
    c->h2o_read = sock->_cb.read;
    sock->_cb.read = gate_on_read;
}

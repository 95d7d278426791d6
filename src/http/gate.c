/* Admission: how many connections a listener holds and how many bytes their requests may buffer
 * before a token is checked. h2o 2.2 reads a whole request body into memory before any handler
 * runs, so a handler's 401 comes too late to protect memory. The gate therefore sits between the
 * event loop and h2o's own read callback and reads what a client sends before h2o does.
 *
 * Every accepted socket gets a record here (its pool, what it is charged); the record is found
 * from the socket through on_close, which h2o leaves to the application on server sockets.
 *
 * Connection slots (main listener): until a connection has sent a whole first request head (on
 * HTTP/2 a whole header block; a TLS handshake comes first) it is waiting, and is closed when
 * PREAUTH_HEAD_SECONDS pass. A newcomer to a full listener closes a waiting connection, the
 * oldest of its own address if it has one (an address opening connection after connection
 * replaces its own), else the oldest of all; authenticated connections and requests under way
 * are never closed for it, and when only they are left the newcomer is refused. And an address
 * (IPv4, or IPv6 /64: gate_peers.c) holds at most PREAUTH_ADDRESS_CONNECTIONS unauthenticated
 * connections; past it, its newcomer is refused at accept, before it could close anyone's.
 *
 * HTTP/1 (plain, and over TLS alike): the gate parses the first request's head as it arrives,
 * and when the head announces a body larger than a small pre-authentication allowance without a
 * valid credential, it answers 401 itself and has h2o close the connection, before any of the
 * body is read. A connection whose first request the gate saw authenticated (main listener)
 * leaves the gate and may carry further requests. Any other connection serves one request: h2o
 * sets its own read callback again before a second request, so later heads would pass unseen.
 * Every connection on a sandbox's listener is of the second kind, so the gate charges each of
 * that sandbox's requests (the announced body, or the largest allowed for a chunked one) to the
 * sandbox's budget until the connection closes, whether the token is valid or not.
 *
 * TLS (main listener only): the gate runs the handshake itself, with h2o's handshake timeout,
 * and hands the connection to h2o's HTTP/1 or HTTP/2 side by ALPN (as h2o_accept would), with
 * the input that came with the end of the handshake held back until the gate is in front.
 *
 * HTTP/2 (only over TLS; h2c is off; gate_h2.c): h2o opens up to 100 streams per connection with a
 * 16 MiB window each and buffers every stream's body before a handler sees it. So until a
 * connection is authenticated the gate follows its frames (9-byte headers after the 24-byte
 * preface, across reads) and charges every frame as its header arrives, payload announced included,
 * except WINDOW_UPDATE (which h2o only counts): at most PREAUTH_REQUEST_BYTES per connection,
 * and against the listener's PREAUTH_TOTAL_BYTES. Past either, the connection is closed. The
 * charge is not given back when a stream ends: an ended request still holds its body while it
 * waits behind the 16 h2o runs at once and its response waits for the client to read it, and
 * the allowance is then also what bounds how many requests an unauthenticated connection makes.
 * A connection is authenticated by a valid credential in a request's header block, which the
 * gate decodes with an HPACK table of its own kept in step with h2o's (so a large first request
 * with a token passes, as on HTTP/1), or by a handler that accepted a credential
 * (http_conn_authenticated); from then on it is not charged, its user being accountable.
 * h2o stops reading a connection whose output piles up and starts again with its own callback
 * when it drains; that happens inside a turn of the loop, and a socket is read only after the
 * next poll, so putting the gate back after every turn (http_gate_after_loop) loses nothing. */
#include "http/gate_internal.h"

#include "http/bearer.h"
#include "http/h2o_shim.h"

#include <errno.h>
#include <fcntl.h>
#include <h2o/http1.h>
#include <h2o/http2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/picohttp.h"
#include "base/util.h"
#include "cluster/cluster.h"
#include "store/store.h"

/* What may arrive beyond the announced request (a client pipelining) before the connection is
 * closed; h2o discards it anyway, since gated connections serve one request. */
#define GATE_SLACK (64 * 1024)

/* A connection closed by h2o with the client still sending: its socket, read and dropped
 * until the client stops, or at most LINGER_SECONDS and a byte count. */
#define LINGER_SECONDS 10
/* Lingering sockets have left the connection caps: at most this many at once, so a client that
 * repeats oversized requests cannot pile up descriptors; past it the socket closes at once. */
#define LINGER_MAX 64
static size_t nlingering;
struct lingering {
    h2o_linklist_t link; /* in lingering, which keeps them reachable */
    h2o_socket_t *sock;
    struct loop_timer timer;
    size_t left;
};

static struct {
    size_t conns; /* on every listener */
    size_t bytes; /* charged on every listener */
} totals;

static h2o_linklist_t lingering = {&lingering, &lingering};

struct http_pool *http_pool_new(struct http_server *srv, const char *sandbox)
{
    struct http_pool *p = xcalloc(1, sizeof(*p));
    p->srv = srv;
    p->refs = 1;
    h2o_linklist_init_anchor(&p->waiting);
    if (sandbox) {
        snprintf(p->sandbox, sizeof(p->sandbox), "%s", sandbox);
        p->max_conns = srv->cfg->sandbox_connections;
        p->max_bytes = srv->cfg->sandbox_bytes;
    } else {
        p->max_conns = srv->cfg->max_connections;
        p->max_bytes = srv->cfg->preauth_total_bytes;
        p->peers = http_peers_new(p->max_conns);
    }
    return p;
}

void http_pool_release(struct http_pool *p)
{
    if (p && --p->refs == 0) {
        http_peers_free(p->peers);
        free(p);
    }
}

void gate_note_refusal(struct http_pool *p, const char *why)
{
    struct refusals *r = &p->refusals[0];
    for (size_t i = 0; i < REFUSAL_REASONS; i++) {
        r = &p->refusals[i];
        if (!r->why || strcmp(r->why, why) == 0)
            break; /* the last entry is shared when there are more reasons */
    }
    r->why = why;
    r->count++;
    int64_t now = time_mono_ms();
    if (r->warned_ms && now - r->warned_ms < 1000)
        return;
    log_warn("http refused reason=%s sbx=%s count=%lu conns=%zu bytes=%zu", why,
             p->sandbox[0] ? p->sandbox : "-", r->count, p->conns, p->bytes);
    r->warned_ms = now;
    r->count = 0;
}

bool gate_charge(struct http_conn *c, size_t n)
{
    struct http_pool *p = c->pool;
    if (n > c->charged && p->bytes + (n - c->charged) > p->max_bytes)
        return false;
    p->bytes = p->bytes - c->charged + n;
    totals.bytes = totals.bytes - c->charged + n;
    c->charged = n;
    return true;
}

/* The connection has sent a whole first request head (on HTTP/2, a whole header block), or has
 * been answered by the gate: the head deadline is over, and a newcomer does not close it. */
void gate_head_arrived(struct http_conn *c)
{
    if (h2o_linklist_is_linked(&c->waiting))
        h2o_linklist_unlink(&c->waiting);
    if (h2o_linklist_is_linked(&c->peer_waiting))
        h2o_linklist_unlink(&c->peer_waiting);
    h2o_timeout_unlink(&c->head_deadline);
}

/* The connection no longer counts against its address's cap of unauthenticated connections. */
static void peer_leave(struct http_conn *c)
{
    if (c->peer)
        http_peers_release(c->pool->peers, c->peer);
    c->peer = NULL;
}

/* The connection's user is known: the gate charges it no more. */
void gate_authenticate(struct http_conn *c)
{
    gate_head_arrived(c);
    peer_leave(c);
    gate_h2_unwatch(c);
    c->authenticated = true;
    c->gated = false;
    gate_charge(c, 0);
}

static void linger_end(struct lingering *l)
{
    loop_timer_stop(&l->timer);
    h2o_linklist_unlink(&l->link);
    h2o_socket_close(l->sock);
    free(l);
    nlingering--;
}

static void linger_timed_out(struct loop_timer *t)
{
    linger_end(H2O_STRUCT_FROM_MEMBER(struct lingering, timer, t));
}

static void linger_on_read(h2o_socket_t *sock, const char *err)
{
    struct lingering *l = sock->data;
    size_t n = sock->input->size;
    h2o_buffer_consume(&sock->input, n);
    if (err || n >= l->left) {
        linger_end(l);
        return;
    }
    l->left -= n;
}

/* h2o has written its answer and closed its descriptor: end the sending side, then read what
 * the client still sends until it closes too. */
static void linger_start(struct http_conn *c)
{
    int fd = c->linger_fd;
    c->linger_fd = -1;
    shutdown(fd, SHUT_WR);
    struct lingering *l = xcalloc(1, sizeof(*l));
    size_t max = c->pool->srv->cfg->max_request_bytes;
    l->left = 4 * max > (16 << 20) ? 4 * max : 16 << 20;
    l->sock = h2o_evloop_socket_create(loop_get(), fd, H2O_SOCKET_FLAG_DONT_READ);
    l->sock->data = l;
    h2o_linklist_insert(&lingering, &l->link);
    h2o_socket_read_start(l->sock, linger_on_read);
    loop_timer_start(&l->timer, LINGER_SECONDS * 1000, linger_timed_out);
}

static void conn_closed(void *data)
{
    struct http_conn *c = data;
    if (c->linger_fd >= 0)
        linger_start(c);
    gate_h2_unwatch(c);
    h2o_timeout_unlink(&c->handshake);
    gate_head_arrived(c);
    peer_leave(c);
    SSL_CTX_free(c->ssl_ctx);
    gate_charge(c, 0);
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

void http_conn_linger(h2o_req_t *req)
{
    struct http_conn *c = conn_of(req);
    if (!c || c->linger_fd >= 0 || req->version >= 0x200 || nlingering >= LINGER_MAX)
        return;
    c->linger_fd = fcntl(h2o_socket_get_fd(c->sock), F_DUPFD_CLOEXEC, 3);
    if (c->linger_fd >= 0)
        nlingering++;
}

void http_conn_authenticated(h2o_req_t *req)
{
    struct http_conn *c = conn_of(req);
    if (c && c->h2)
        gate_authenticate(c);
}

void http_gate_counts(size_t *conns, size_t *gated_bytes)
{
    *conns = totals.conns;
    *gated_bytes = totals.bytes;
}

static void refusal_sent(h2o_socket_t *sock, const char *err)
{
    if (!err)
        shutdown(h2o_socket_get_fd(sock), SHUT_WR);
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
    if (c->sock->ssl) {
        /* encrypted into h2o's buffers at once; the sending side ends once it is out */
        h2o_iovec_t bufs[2] = {h2o_iovec_init(head, (size_t)hlen),
                               h2o_iovec_init(body, (size_t)blen)};
        h2o_socket_write(c->sock, bufs, 2, refusal_sent);
    } else {
        int fd = h2o_socket_get_fd(c->sock);
        struct iovec iov[2] = {{head, (size_t)hlen}, {body, (size_t)blen}};
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
        (void)sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        shutdown(fd, SHUT_WR);
    }
    gate_note_refusal(c->pool, code);
    gate_head_arrived(c);
    gate_charge(c, 0);
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

/* Whether the Authorization and X-API-Key values (either may be empty) carry a credential the
 * listener accepts: a user's bearer token or a proxy token on the main listener, a proxy token
 * of this sandbox on a sandbox's listener (proxy tokens by the head check the wiring set,
 * http_server_set_head_check). */
bool gate_credential_ok(struct http_pool *p, h2o_iovec_t auth, h2o_iovec_t key)
{
    if (!auth.len && !key.len)
        return false;
    if (!p->sandbox[0] && auth.len > 7 && strncasecmp(auth.base, "Bearer ", 7) == 0) {
        struct store_user user;
        struct err err = {0};
        if (http_bearer_check(p->srv->store, p->srv->cfg->public_url, auth.base + 7, auth.len - 7,
                              &user, NULL, &err) == 0)
            return true;
    }
    return p->srv->head_check && p->srv->head_check(p->srv->head_check_ctx, key, auth, p->sandbox);
}

static bool head_authorized(struct http_pool *p, const struct phr_header *hs, size_t n)
{
    h2o_iovec_t auth = {NULL, 0}, key = {NULL, 0};
    for (size_t i = 0; i < n; i++) {
        if (name_is(&hs[i], "authorization"))
            auth = h2o_iovec_init(hs[i].value, hs[i].value_len);
        else if (name_is(&hs[i], "x-api-key"))
            key = h2o_iovec_init(hs[i].value, hs[i].value_len);
    }
    return gate_credential_ok(p, auth, key);
}

/* Another node's proof for this one request (cluster.h), bound to its method, path, announced
 * length and a nonce it spends: 0, -ENOENT without one, or cluster_head_check's error. */
static int node_proof(struct http_pool *p, const char *method, size_t mlen, const char *path,
                      size_t plen, size_t length, const struct phr_header *hs, size_t n)
{
    if (p->sandbox[0] || !p->srv->cluster)
        return -ENOENT;
    for (size_t i = 0; i < n; i++)
        if (name_is(&hs[i], CLUSTER_NODE_HEADER))
            return cluster_head_check(cluster_key(p->srv->cluster), cluster_nonces(p->srv->cluster),
                                      hs[i].value, hs[i].value_len, method, mlen, path, plen,
                                      length, time_now_ms() / 1000);
    return -ENOENT;
}

/* What an unauthenticated request may bring: the allowance, or more for a signed body's route
 * (http_allow_signed_body) when the head is a POST to it with its signature header. */
static size_t signed_allowance(const struct http_pool *p, const char *method, size_t mlen,
                               const char *path, size_t plen, const struct phr_header *hs, size_t n)
{
    const struct http_server *srv = p->srv;
    size_t plain = srv->cfg->preauth_request_bytes;
    if (p->sandbox[0] || !srv->signed_path[0] || mlen != 4 || memcmp(method, "POST", 4) != 0 ||
        plen != strlen(srv->signed_path) || memcmp(path, srv->signed_path, plen) != 0)
        return plain;
    for (size_t i = 0; i < n; i++)
        if (name_is(&hs[i], srv->signed_header))
            return srv->signed_max > plain ? srv->signed_max : plain;
    return plain;
}

/* The first request's head has arrived (len bytes): let it through (authenticated or not), or
 * refuse it (c->draining). Returns NULL, as refuse() does. */
static const char *judge_head(struct http_conn *c, size_t len, const char *method, size_t mlen,
                              const char *path, size_t plen, const struct phr_header *hs, size_t n)
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
    /* a forwarded call: its body is let in uncharged, and checked against the full signature at
     * the route; the connection is not authenticated, so it serves this request alone */
    int proof = chunked ? -ENOENT : node_proof(p, method, mlen, path, plen, body, hs, n);
    if (proof == -EBUSY)
        return refuse(c, 503, "Retry-After: 1\r\n", "busy",
                      "too many forwarded calls in the last two minutes");
    if (chunked || body > cfg->max_request_bytes)
        body = cfg->max_request_bytes; /* the most h2o reads before it answers 413 */
    if (proof == 0) {
        c->allowed = len + body;
        gate_charge(c, 0);
        return NULL;
    }
    size_t allowance = signed_allowance(p, method, mlen, path, plen, hs, n);
    bool authorized =
        (chunked || len + body > allowance || !p->sandbox[0]) && head_authorized(p, hs, n);
    if (authorized && !p->sandbox[0]) {
        peer_leave(c);
        c->authenticated = true;
        c->gated = false;
        gate_charge(c, 0);
        return NULL;
    }
    if (!authorized && (chunked || len + body > allowance)) {
        if (p->sandbox[0])
            return refuse(c, 401, "", "missing_token",
                          "a valid proxy token is required before a request body larger than "
                          "the unauthenticated allowance is read");
        return refuse(c, 401, "WWW-Authenticate: Bearer realm=\"sandbox-mcp\"\r\n", "unauthorized",
                      "a valid token is required before a request body larger than the "
                      "unauthenticated allowance is read");
    }
    c->allowed = len + body;
    if (!gate_charge(c, c->allowed > c->sock->input->size ? c->allowed : c->sock->input->size))
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
            gate_note_refusal(c->pool, "excess_data");
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
        gate_head_arrived(c);
        return judge_head(c, (size_t)r, method, mlen, path, plen, hs, n);
    }
    if (r == -2 && in > cfg->preauth_request_bytes)
        return refuse(c, 431, "", "head_too_large", "the request head is too large");
    /* incomplete, or not HTTP/1 (h2o answers 400) */
    if (!gate_charge(c, in))
        return refuse(c, 503, "Retry-After: 1\r\n", "busy",
                      c->pool->sandbox[0] ? "this sandbox has too many requests in progress"
                                          : "too many unauthenticated requests in progress");
    return NULL;
}

static void gate_on_read(h2o_socket_t *sock, const char *err)
{
    struct http_conn *c = sock->on_close.data;
    h2o_socket_cb next = c->h2o_read;
    if (!err && c->h2)
        err = gate_h2_check(c);
    else if (!err && c->gated && !c->draining)
        err = gate_check(c);
    if (!err && c->draining && !(err = drain(c)))
        return; /* h2o sees nothing of a refused connection */
    if (!c->gated)
        h2o_shim_set_read_cb(sock, next);
    /* may close the socket, and free c */
    next(sock, err);
}

/* Put the gate in front of h2o's read callback. */
void gate_hook(struct http_conn *c)
{
    c->h2o_read = h2o_shim_read_cb(c->sock);
    h2o_shim_set_read_cb(c->sock, gate_on_read);
}

/* Close a connection that has not sent its first head: through h2o's read callback, as for a
 * client gone, once h2o has it; during its TLS handshake, its socket. c is freed at once, or
 * with TLS once the close is sent (it has left pool->waiting). */
static void drop(struct http_conn *c, const char *why)
{
    gate_head_arrived(c);
    if (c->h2o_read)
        c->h2o_read(c->sock, why);
    else
        h2o_socket_close(c->sock);
}

static void head_timed_out(h2o_timeout_entry_t *entry)
{
    struct http_conn *c = H2O_STRUCT_FROM_MEMBER(struct http_conn, head_deadline, entry);
    gate_note_refusal(c->pool, "head_timeout");
    drop(c, "no request head in time");
}

static void handshake_timed_out(h2o_timeout_entry_t *entry)
{
    struct http_conn *c = H2O_STRUCT_FROM_MEMBER(struct http_conn, handshake, entry);
    h2o_socket_close(c->sock); /* frees c */
}

/* The TLS handshake is over: hand the connection to h2o's side for the protocol chosen, with
 * the gate in front before h2o sees any input. */
static void handshake_done(h2o_socket_t *sock, const char *err)
{
    struct http_conn *c = sock->on_close.data;
    h2o_timeout_unlink(&c->handshake);
    if (err) {
        h2o_socket_close(sock);
        return;
    }
    /* h2o's accept functions handle the input already there at once */
    h2o_buffer_t *early = sock->input;
    h2o_buffer_init(&sock->input, &h2o_socket_buffer_prototype);
    bool h2 = http_tls_selected_h2(sock);
    log_debug("http tls-handshake protocol=%s", h2 ? "h2" : "http/1.1");
    if (h2) {
        gate_h2_watch(c);
        h2o_http2_accept(c->actx, sock, c->connected_at);
    } else {
        h2o_http1_accept(c->actx, sock, c->connected_at);
    }
    gate_hook(c);
    h2o_buffer_dispose(&sock->input);
    sock->input = early;
    if (early->size) {
        sock->bytes_read = early->size;
        gate_on_read(sock, NULL);
    }
}

/* Whether the address of sock may open another unauthenticated connection: true, with *peer
 * its count (NULL when its address is not known). A trusted proxy (TRUSTED_PROXIES) carries
 * everyone's connections and is not capped: it sends a request on only once its head is whole. */
static bool peer_admit(struct http_pool *p, h2o_socket_t *sock, struct http_peer **peer)
{
    *peer = NULL;
    struct sockaddr_storage ss;
    struct http_peer_key key;
    if (!p->peers || !h2o_socket_getpeername(sock, (struct sockaddr *)&ss) ||
        http_peer_key((struct sockaddr *)&ss, &key) < 0)
        return true;
    size_t max = p->srv->preauth_per_address;
    if (max && http_peer_trusted((struct sockaddr *)&ss))
        max = 0;
    *peer = http_peers_hold(p->peers, &key, max ? max : SIZE_MAX);
    return *peer != NULL;
}

/* The connection a newcomer from peer to a full listener closes: the oldest of those its own
 * address has that have not sent a head, so that an address opening connection after connection
 * takes the place of its own; else the oldest of any address. NULL when there is none. */
static struct http_conn *evictable(struct http_pool *p, struct http_peer *peer)
{
    h2o_linklist_t *own = peer ? http_peer_waiting(peer) : NULL;
    if (own && !h2o_linklist_is_empty(own))
        return H2O_STRUCT_FROM_MEMBER(struct http_conn, peer_waiting, own->next);
    if (!h2o_linklist_is_empty(&p->waiting))
        return H2O_STRUCT_FROM_MEMBER(struct http_conn, waiting, p->waiting.next);
    return NULL;
}

void http_gate_accept(struct http_pool *p, h2o_accept_ctx_t *actx, h2o_socket_t *sock)
{
    /* the address's own newcomer is refused past its cap, before it could close anyone's */
    struct http_peer *peer;
    if (!peer_admit(p, sock, &peer)) {
        gate_note_refusal(p, "address");
        h2o_socket_close(sock);
        return;
    }
    if (p->conns >= p->max_conns) {
        /* authenticated connections and requests under way keep their place */
        struct http_conn *old = evictable(p, peer);
        if (!old) {
            gate_note_refusal(p, "connections");
            if (peer)
                http_peers_release(p->peers, peer);
            h2o_socket_close(sock);
            return;
        }
        gate_note_refusal(p, "evicted");
        drop(old, "closed for a newer connection");
    }
    struct http_conn *c = xcalloc(1, sizeof(*c));
    c->pool = p;
    c->peer = peer;
    c->sock = sock;
    c->actx = actx;
    c->gated = true;
    c->linger_fd = -1;
    c->handshake.cb = handshake_timed_out;
    c->head_deadline.cb = head_timed_out;
    if (!p->sandbox[0]) {
        h2o_linklist_insert(&p->waiting, &c->waiting);
        if (peer)
            h2o_linklist_insert(http_peer_waiting(peer), &c->peer_waiting);
        h2o_timeout_link(actx->ctx->loop, loop_timeout(p->srv->cfg->preauth_head_ms),
                         &c->head_deadline);
    }
    p->refs++;
    p->conns++;
    totals.conns++;
    sock->on_close.cb = conn_closed;
    sock->on_close.data = c;
    SSL_CTX *tls = p->sandbox[0] ? NULL : p->srv->ssl_ctx;
    if (tls) {
        /* the context may be swapped by a reload before the handshake makes its SSL object */
        SSL_CTX_up_ref(tls);
        c->ssl_ctx = tls;
        c->connected_at = *h2o_get_timestamp(actx->ctx, NULL, NULL);
        h2o_timeout_link(actx->ctx->loop, &actx->ctx->handshake_timeout, &c->handshake);
        h2o_socket_ssl_handshake(sock, tls, NULL, handshake_done);
        return;
    }
    h2o_accept(actx, sock);
    /* h2o's HTTP/1 connection reads with its own callback from now on; the gate goes first */
    gate_hook(c);
}

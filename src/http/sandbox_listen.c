/* The proxy listeners inside sandboxes: each sandbox's 127.0.0.1:8788 is a listening socket the
 * sandbox manager opened in its network namespace and handed here, and its Unix socket
 * (SANDBOX_SERVER_SOCKET) one it made in the sandbox's own directory; both serve alike. Connections
 * on it are served by a host configuration with only the sandbox routes (http_add_sandbox_route:
 * the proxy's), and every request knows the sandbox it came from by its connection, whose record
 * (gate.c) names the sandbox's pool. Each sandbox has its own pool: a cap on its connections and on
 * the bytes its requests buffer. */
#include "http/http_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"

struct sbx_listener {
    struct sbx_listener *next;
    struct http_server *srv;
    struct http_pool *pool;  /* its connections, which may outlive it */
    h2o_socket_t *sock;      /* the port, or NULL */
    h2o_socket_t *unix_sock; /* the socket, or NULL */
    char id[64];
};

static struct sbx_listener *listeners;
static bool stop_hooked;

static void listener_free(struct sbx_listener *l);

static void listeners_close(void *ctx)
{
    (void)ctx;
    while (listeners) {
        struct sbx_listener *l = listeners;
        listeners = l->next;
        listener_free(l);
    }
}

static void accept_sandbox(h2o_socket_t *sock, void *ctx)
{
    struct sbx_listener *l = ctx;
    http_gate_accept(l->pool, &l->srv->sandbox_accept_ctx, sock);
}

static void on_sandbox_accept(h2o_socket_t *listener, const char *err)
{
    http_accept_each(listener, err, accept_sandbox);
}

static void sock_close(h2o_socket_t **sock)
{
    if (!*sock)
        return;
    h2o_socket_read_stop(*sock);
    h2o_socket_close(*sock);
    *sock = NULL;
}

static void listener_free(struct sbx_listener *l)
{
    sock_close(&l->sock);
    sock_close(&l->unix_sock);
    http_pool_release(l->pool);
    free(l);
}

/* The sandbox's record, made when it has none (fd >= 0), else NULL. */
static struct sbx_listener *listener_of(struct http_server *srv, const char *sandbox_id, int fd)
{
    for (struct sbx_listener *l = listeners; l; l = l->next)
        if (strcmp(l->id, sandbox_id) == 0)
            return l;
    if (fd < 0)
        return NULL;
    if (!stop_hooked) {
        /* they stop accepting when the server does */
        http_server_on_stop(srv, listeners_close, NULL);
        stop_hooked = true;
    }
    struct sbx_listener *l = xcalloc(1, sizeof(*l));
    l->srv = srv;
    snprintf(l->id, sizeof(l->id), "%s", sandbox_id);
    l->pool = http_pool_new(srv, sandbox_id);
    l->next = listeners;
    listeners = l;
    return l;
}

static void listener_remove(struct sbx_listener *l)
{
    for (struct sbx_listener **pp = &listeners; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    listener_free(l);
}

static h2o_socket_t *watch(struct http_server *srv, struct sbx_listener *l, int fd)
{
    h2o_socket_t *sock = h2o_evloop_socket_create(srv->loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    sock->data = l;
    h2o_socket_read_start(sock, on_sandbox_accept);
    return sock;
}

void http_sandbox_listener(struct http_server *srv, const char *sandbox_id, int fd)
{
    struct sbx_listener *l = listener_of(srv, sandbox_id, fd);
    if (!l)
        return;
    if (fd < 0) { /* the sandbox stopped: both go */
        listener_remove(l);
        return;
    }
    sock_close(&l->sock);
    l->sock = watch(srv, l, fd);
}

void http_sandbox_socket(struct http_server *srv, const char *sandbox_id, int fd)
{
    struct sbx_listener *l = listener_of(srv, sandbox_id, fd);
    if (!l)
        return;
    sock_close(&l->unix_sock);
    if (fd >= 0)
        l->unix_sock = watch(srv, l, fd);
    else if (!l->sock)
        listener_remove(l);
}

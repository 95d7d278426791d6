/* The proxy listeners inside sandboxes: each sandbox's 127.0.0.1:8788 is a listening socket the
 * sandbox manager opened in its network namespace and handed here. Connections on it are served
 * by a host configuration with only the sandbox routes (http_add_sandbox_route: the proxy's), and
 * every request knows the sandbox it came from by its connection, whose record (gate.c) names the
 * sandbox's pool. Each sandbox has its own pool: a cap on its connections and on the bytes its
 * requests buffer. */
#include "http/http_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"

struct sbx_listener {
    struct sbx_listener *next;
    struct http_server *srv;
    struct http_pool *pool; /* its connections, which may outlive it */
    h2o_socket_t *sock;
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

static void listener_free(struct sbx_listener *l)
{
    h2o_socket_read_stop(l->sock);
    h2o_socket_close(l->sock);
    http_pool_release(l->pool);
    free(l);
}

void http_sandbox_listener(struct http_server *srv, const char *sandbox_id, int fd)
{
    for (struct sbx_listener **pp = &listeners; *pp; pp = &(*pp)->next) {
        struct sbx_listener *l = *pp;
        if (strcmp(l->id, sandbox_id) != 0)
            continue;
        *pp = l->next;
        listener_free(l);
        break;
    }
    if (fd < 0)
        return;
    if (!stop_hooked) {
        /* they stop accepting when the server does */
        http_server_on_stop(srv, listeners_close, NULL);
        stop_hooked = true;
    }
    struct sbx_listener *l = xcalloc(1, sizeof(*l));
    l->srv = srv;
    snprintf(l->id, sizeof(l->id), "%s", sandbox_id);
    l->pool = http_pool_new(srv, sandbox_id);
    l->sock = h2o_evloop_socket_create(srv->loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    l->sock->data = l;
    h2o_socket_read_start(l->sock, on_sandbox_accept);
    l->next = listeners;
    listeners = l;
}

/* The proxy listeners inside sandboxes: each sandbox's 127.0.0.1:8788 is a listening socket the
 * sandbox manager opened in its network namespace and handed here. Connections on it are served
 * by a host configuration with only /proxy, and every request knows the sandbox it came from by
 * its connection's socket, which is registered at accept and forgotten at close. */
#include "http/http_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "proxy/proxy.h"

struct sbx_listener {
    struct sbx_listener *next;
    struct http_server *srv;
    h2o_socket_t *sock;
    char id[64];
};

struct sbx_conn {
    struct sbx_conn *next;
    h2o_socket_t *sock;
    char id[64];
};

static struct sbx_listener *listeners;
static struct sbx_conn *conns;

static void forget_conn(void *data)
{
    struct sbx_conn *c = data;
    for (struct sbx_conn **pp = &conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    free(c);
}

static void accept_sandbox(h2o_socket_t *sock, void *ctx)
{
    struct sbx_listener *l = ctx;
    struct sbx_conn *c = xcalloc(1, sizeof(*c));
    c->sock = sock;
    snprintf(c->id, sizeof(c->id), "%s", l->id);
    c->next = conns;
    conns = c;
    sock->on_close.cb = forget_conn;
    sock->on_close.data = c;
    h2o_accept(&l->srv->sandbox_accept_ctx, sock);
}

static void on_sandbox_accept(h2o_socket_t *listener, const char *err)
{
    http_accept_each(listener, err, accept_sandbox);
}

const char *http_sandbox_of(h2o_req_t *req)
{
    if (!req->conn->callbacks->get_socket)
        return NULL;
    h2o_socket_t *sock = req->conn->callbacks->get_socket(req->conn);
    for (struct sbx_conn *c = conns; c; c = c->next)
        if (c->sock == sock)
            return c->id;
    return NULL;
}

void http_sandbox_listener(struct http_server *srv, const char *sandbox_id, int fd)
{
    for (struct sbx_listener **pp = &listeners; *pp; pp = &(*pp)->next) {
        struct sbx_listener *l = *pp;
        if (strcmp(l->id, sandbox_id) != 0)
            continue;
        *pp = l->next;
        h2o_socket_read_stop(l->sock);
        h2o_socket_close(l->sock);
        free(l);
        break;
    }
    if (fd < 0)
        return;
    struct sbx_listener *l = xcalloc(1, sizeof(*l));
    l->srv = srv;
    snprintf(l->id, sizeof(l->id), "%s", sandbox_id);
    l->sock = h2o_evloop_socket_create(srv->loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    l->sock->data = l;
    h2o_socket_read_start(l->sock, on_sandbox_accept);
    l->next = listeners;
    listeners = l;
}

void http_sandbox_listeners_close(void)
{
    while (listeners) {
        struct sbx_listener *l = listeners;
        listeners = l->next;
        h2o_socket_read_stop(l->sock);
        h2o_socket_close(l->sock);
        free(l);
    }
}

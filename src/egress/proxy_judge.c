/* The egress proxy's middle stages (see proxy.c): the judgement of a connection's target under
 * its sandbox's mode (the policy on the name, then on every address it resolves to, resolved
 * on a thread), and the connection to the checked addresses in turn. The decision itself is
 * the policy's (netpolicy.c, pure); this file only asks it and acts on the answer. */
#include "egress/proxy_internal.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "base/loop.h"

/* --- connect --- */

static void try_connect(struct conn *c);

static void on_connected(h2o_socket_t *sock, const char *err)
{
    struct conn *c = sock->data;
    if (err) {
        h2o_socket_close(c->upstream);
        c->upstream = NULL;
        try_connect(c);
        return;
    }
    /* each end coalesces its own writes; what the relay holds back waiting for an ACK (Nagle)
     * would only delay a TLS handshake's next flight by the peer's delayed ACK, 40 ms */
    int one = 1;
    setsockopt(h2o_socket_get_fd(c->upstream), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(h2o_socket_get_fd(c->client), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    egress_relay_start(c);
}

static void try_connect(struct conn *c)
{
    while (c->next_addr < c->naddrs) {
        const struct egress_addr *a = &c->addrs[c->next_addr++];
        egress_addr_format(a, c->addr);
        struct sockaddr_storage ss = {0};
        socklen_t len;
        if (egress_addr_is_v4(a)) {
            struct sockaddr_in *s = (struct sockaddr_in *)&ss;
            s->sin_family = AF_INET;
            s->sin_port = htons(c->port);
            memcpy(&s->sin_addr, a->b + 12, 4);
            len = sizeof(*s);
        } else {
            struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
            s->sin6_family = AF_INET6;
            s->sin6_port = htons(c->port);
            memcpy(&s->sin6_addr, a->b, 16);
            len = sizeof(*s);
        }
        c->upstream = h2o_socket_connect(loop_get(), (struct sockaddr *)&ss, len, on_connected);
        if (!c->upstream)
            continue;
        h2o_socket_dont_read(c->upstream, 1);
        c->upstream->data = c;
        return;
    }
    char why[400];
    snprintf(why, sizeof(why), "cannot connect to '%s' port %u", c->host, (unsigned)c->port);
    egress_conn_answer(c, 502, "allowed", "unreachable", why);
}

/* --- judge --- */

/* The sandbox's mode, and into user the user whose share of lookups it draws on. */
static enum egress_mode mode_of(struct conn *c, char user[64])
{
    struct egress_proxy *p = c->sbx->p;
    if (p->mode_fn)
        return p->mode_fn(p->mode_ctx, c->sbx->id, user);
    snprintf(user, 64, "%s", c->sbx->id);
    return egress_policy_mode(p->policy);
}

static void judge_addrs(struct conn *c, const struct egress_addr *addrs, int n)
{
    struct err why = {0};
    enum egress_reason r =
        egress_policy_check_addrs(c->sbx->p->policy, c->host, addrs, n, c->port, &why);
    if (r != EGRESS_OK) {
        if (n > 0)
            egress_addr_format(&addrs[0], c->addr);
        egress_conn_answer(c, 403, "denied", egress_reason_name(r), why.msg);
        return;
    }
    c->naddrs = n < EGRESS_ADDRS_MAX ? n : EGRESS_ADDRS_MAX;
    memcpy(c->addrs, addrs, (size_t)c->naddrs * sizeof(*addrs));
    c->stage = ST_CONNECT;
    loop_timer_start(&c->timer, CONNECT_MS, egress_conn_on_timeout);
    try_connect(c);
}

static void on_resolved(void *ctx, const struct egress_addr *addrs, int n, const struct err *err)
{
    struct conn *c = ctx;
    c->lookup = NULL;
    if (err && err->code == -ETIMEDOUT) {
        egress_conn_answer(c, 504, "allowed", "timeout", err->msg);
        return;
    }
    if (err) {
        egress_conn_answer(c, 502, "denied", egress_reason_name(EGRESS_DENY_UNRESOLVED), err->msg);
        return;
    }
    judge_addrs(c, addrs, n);
}

void egress_judge(struct conn *c)
{
    c->stage = ST_JUDGE;
    struct err why = {0};
    char user[64] = "";
    c->mode = mode_of(c, user);
    enum egress_reason r =
        egress_policy_check_name(c->sbx->p->policy, c->mode, c->host, c->port, &why);
    if (r != EGRESS_OK) {
        egress_conn_answer(c, 403, "denied", egress_reason_name(r), why.msg);
        return;
    }
    c->sniff = c->is_connect && egress_policy_needs_sni(c->sbx->p->policy, c->mode, c->host);
    struct egress_addr lit;
    if (egress_addr_parse(c->host, &lit) == 0) {
        judge_addrs(c, &lit, 1);
        return;
    }
    struct err err = {0};
    c->lookup = egress_resolve_for(c->host, user, on_resolved, c, &err);
    if (!c->lookup)
        egress_conn_answer(c, 503, "allowed", "busy", err.msg);
}

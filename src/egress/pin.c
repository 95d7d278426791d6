/* Requests the server makes to a URL a user gave: public addresses only, and a curl transfer held
 * to the addresses that were checked for its name (egress.h). */
#include "egress/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int egress_public_only(const char *host, uint16_t port, bool allow_own_address,
                       const struct egress_addr *a, int n, struct err *err)
{
    struct egress_rules rules = {0};
    struct egress_addr lit;
    bool literal = egress_addr_parse(host, &lit) == 0;
    if (allow_own_address && literal) {
        rules.n = 1;
        rules.rule[0].net = lit;
        rules.rule[0].prefix = 128;
        rules.rule[0].port = port;
    }
    bool by_rule;
    struct err e = {0};
    if (egress_check(&rules, host, a, n, port, &by_rule, &e) == 0) {
        /* A public address can still be one of this host's own (a public interface, one gained
         * after start): asked of the kernel at the moment of the check, as the egress proxy
         * does, and refused, since what listens there answers the server as a neighbour. */
        for (int i = 0; i < n && !(allow_own_address && literal); i++) {
            if (egress_local_init(&e) == 0 && !egress_addr_is_local(&a[i]))
                continue;
            char text[EGRESS_ADDR_TEXT_MAX];
            egress_addr_format(&a[i], text);
            if (literal)
                return err_set(err, -EACCES, "%s is this host's own address", text);
            return err_set(err, -EACCES, "'%s' resolves to %s, this host's own address", host,
                           text);
        }
        return 0;
    }
    for (int i = 0; e.code == -EACCES && i < n; i++) {
        if (egress_decide(&rules, host, &a[i], port) != EGRESS_DENIED)
            continue;
        char text[EGRESS_ADDR_TEXT_MAX];
        egress_addr_format(&a[i], text);
        const char *cls = egress_class_name(egress_classify(&a[i]));
        if (literal)
            return err_set(err, -EACCES, "%s is %s", text, cls);
        return err_set(err, -EACCES, "'%s' resolves to %s, %s", host, text, cls);
    }
    return err_set(err, e.code, "%s", e.msg);
}

/* curl is about to connect: only to an address that was checked, on the checked port. */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *sa)
{
    struct egress_pin *p = clientp;
    struct egress_addr a = {{0}};
    uint16_t port;
    if (purpose != CURLSOCKTYPE_IPCXN)
        return CURL_SOCKET_BAD;
    if (sa->family == AF_INET && sa->addrlen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&sa->addr;
        a.b[10] = a.b[11] = 0xff;
        memcpy(a.b + 12, &in->sin_addr, 4);
        port = ntohs(in->sin_port);
    } else if (sa->family == AF_INET6 && sa->addrlen >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&sa->addr;
        memcpy(a.b, &in6->sin6_addr, 16);
        port = ntohs(in6->sin6_port);
    } else {
        p->refused = true;
        return CURL_SOCKET_BAD;
    }
    bool checked = false;
    for (int i = 0; i < p->n && !checked; i++)
        checked = memcmp(&p->addrs[i], &a, sizeof(a)) == 0;
    if (!checked || port != p->port) {
        p->refused = true;
        return CURL_SOCKET_BAD;
    }
    return socket(sa->family, sa->socktype | SOCK_CLOEXEC, sa->protocol);
}

void egress_pin_apply(struct egress_pin *p, CURL *easy, const char *host, uint16_t port,
                      const struct egress_addr *addrs, int n)
{
    memset(p, 0, sizeof(*p));
    p->n = n < EGRESS_ADDRS_MAX ? n : EGRESS_ADDRS_MAX;
    memcpy(p->addrs, addrs, sizeof(*addrs) * (size_t)p->n);
    p->port = port;
    p->share = curl_share_init();
    if (!p->share)
        abort(); /* out of memory */
    curl_share_setopt(p->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    struct egress_addr lit;
    if (egress_addr_parse(host, &lit) < 0) {
        char pin[300 + EGRESS_ADDRS_MAX * (EGRESS_ADDR_TEXT_MAX + 3)];
        size_t k = (size_t)snprintf(pin, sizeof(pin), "%s:%u:", host, (unsigned)port);
        for (int i = 0; i < p->n; i++) {
            char text[EGRESS_ADDR_TEXT_MAX];
            egress_addr_format(&p->addrs[i], text);
            bool v4 = egress_addr_is_v4(&p->addrs[i]);
            k += (size_t)snprintf(pin + k, sizeof(pin) - k, "%s%s%s%s", i ? "," : "", v4 ? "" : "[",
                                  text, v4 ? "" : "]");
        }
        p->resolve = curl_slist_append(NULL, pin);
    }
    curl_easy_setopt(easy, CURLOPT_SHARE, p->share);
    if (p->resolve)
        curl_easy_setopt(easy, CURLOPT_RESOLVE, p->resolve);
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, p);
    curl_easy_setopt(easy, CURLOPT_PROXY, ""); /* none, whatever the environment says */
}

void egress_pin_release(struct egress_pin *p)
{
    if (p->share) {
        curl_share_cleanup(p->share);
        p->share = NULL;
    }
    curl_slist_free_all(p->resolve);
    p->resolve = NULL;
}

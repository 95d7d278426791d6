/* Unauthenticated connections counted by client address, for the gate's per-address cap (the
 * address itself, behind TRUSTED_PROXIES or not, is peer.c's business). One
 * host commonly holds a whole IPv6 /64, so an IPv6 address counts by its first 64 bits; an IPv4
 * address (also as ::ffff:a.b.c.d) counts alone. The table's chains are keyed with a random
 * SipHash key, so that a client choosing its addresses cannot make them long. */
#include "http/gate_internal.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

struct http_peer {
    struct http_peer *next; /* in its bucket */
    uint64_t hash;
    struct http_peer_key key;
    size_t conns;
    h2o_linklist_t waiting;
};

struct http_peers {
    struct http_peer **buckets;
    size_t mask;
    unsigned char hash_key[crypto_shorthash_KEYBYTES];
};

int http_peer_key(const struct sockaddr *sa, struct http_peer_key *key)
{
    memset(key, 0, sizeof(*key));
    if (sa->sa_family == AF_INET) {
        key->b[10] = key->b[11] = 0xff;
        memcpy(key->b + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family != AF_INET6)
        return -EAFNOSUPPORT;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    /* an IPv4 client of a dual-stack listener: its address, as on an IPv4 listener */
    memcpy(key->b, a->s6_addr, IN6_IS_ADDR_V4MAPPED(a) ? 16 : 8);
    return 0;
}

struct http_peers *http_peers_new(size_t conns)
{
    struct http_peers *t = xcalloc(1, sizeof(*t));
    size_t n = 64;
    while (n < conns && n < (1u << 20))
        n <<= 1;
    t->buckets = xcalloc(n, sizeof(*t->buckets));
    t->mask = n - 1;
    randombytes_buf(t->hash_key, sizeof(t->hash_key));
    return t;
}

void http_peers_free(struct http_peers *t)
{
    if (!t)
        return;
    for (size_t i = 0; i <= t->mask; i++) {
        while (t->buckets[i]) {
            struct http_peer *p = t->buckets[i];
            t->buckets[i] = p->next;
            free(p);
        }
    }
    free(t->buckets);
    free(t);
}

struct http_peer *http_peers_hold(struct http_peers *t, const struct http_peer_key *key, size_t max)
{
    unsigned char h[crypto_shorthash_BYTES];
    crypto_shorthash(h, key->b, sizeof(key->b), t->hash_key);
    uint64_t hash;
    memcpy(&hash, h, sizeof(hash));
    struct http_peer **at = &t->buckets[hash & t->mask];
    for (struct http_peer *p = *at; p; p = p->next) {
        if (p->hash == hash && memcmp(&p->key, key, sizeof(*key)) == 0) {
            if (p->conns >= max)
                return NULL;
            p->conns++;
            return p;
        }
    }
    if (!max)
        return NULL;
    struct http_peer *p = xcalloc(1, sizeof(*p));
    p->hash = hash;
    p->key = *key;
    p->conns = 1;
    h2o_linklist_init_anchor(&p->waiting);
    p->next = *at;
    *at = p;
    return p;
}

h2o_linklist_t *http_peer_waiting(struct http_peer *peer)
{
    return &peer->waiting;
}

void http_peers_release(struct http_peers *t, struct http_peer *peer)
{
    if (--peer->conns)
        return;
    assert(h2o_linklist_is_empty(&peer->waiting));
    for (struct http_peer **at = &t->buckets[peer->hash & t->mask]; *at; at = &(*at)->next) {
        if (*at == peer) {
            *at = peer->next;
            free(peer);
            return;
        }
    }
}

size_t http_peers_count(const struct http_peers *t)
{
    size_t n = 0;
    for (size_t i = 0; i <= t->mask; i++)
        for (const struct http_peer *p = t->buckets[i]; p; p = p->next)
            n++;
    return n;
}

#pragma once
/* Trusted proxies and the client behind them: a pure leaf (no I/O, no allocation) under
 * http_client_addr (http_internal.h), reached by unit tests and a fuzz target.
 *
 * A proxy in TRUSTED_PROXIES connects on behalf of clients and names them in X-Forwarded-For,
 * appending the address it took the connection from, so the list reads "client, proxy1, ...":
 * its right end was written by the nearest proxy, its left end by whoever sent the request
 * first, who may have written anything. The walk starts at the right and takes the first
 * address that is not itself a trusted proxy; so a client can add entries but never make one
 * of them count, and a client that is not a trusted proxy is counted by its own address. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/err.h"

#define HTTP_TRUST_MAX 64       /* entries of TRUSTED_PROXIES */
#define HTTP_XFF_MAX_BYTES 4096 /* of X-Forwarded-For examined, from the right */
#define HTTP_XFF_MAX_HOPS 32    /* its entries examined */

/* One address range: family AF_INET or AF_INET6, addr in network order (4 or 16 bytes used),
 * bits of it that must match; the rest of addr is zero. */
struct http_cidr {
    uint8_t family;
    uint8_t bits;
    uint8_t addr[16];
};

struct http_trust {
    struct http_cidr e[HTTP_TRUST_MAX];
    size_t n;
};

/* Parse a comma-separated list of addresses and CIDRs ("127.0.0.1, 10.0.0.0/8, ::1,
 * fd00::/8"); blanks around entries and empty entries are skipped, host bits of a CIDR are
 * dropped, an IPv4-mapped IPv6 range counts as the IPv4 one. 0 and out filled, or -EINVAL
 * with err naming the entry (out then holds nothing). text NULL or blank: an empty list. */
int http_trust_parse(const char *text, struct http_trust *out, struct err *err);

/* Whether sa (AF_INET or AF_INET6; an IPv4-mapped address as IPv4) is in t. */
bool http_trust_contains(const struct http_trust *t, const struct sockaddr *sa);

/* One header value, not NUL-terminated. */
struct http_text {
    const char *base;
    size_t len;
};

/* The client a request came from: peer (the TCP peer, AF_INET or AF_INET6), unless it is in t;
 * then the X-Forwarded-For values xff[0..n) (the request's headers of that name in order, as
 * one list) are walked from the right, skipping addresses in t, and the first one not in t is
 * the client. An entry that is not an address (IPv4, IPv6, each with a port or IPv6 in
 * brackets allowed), and the end of HTTP_XFF_MAX_BYTES or HTTP_XFF_MAX_HOPS, stop the walk:
 * the client is then the last trusted hop, never an address the walk did not reach.
 * An IPv4-mapped IPv6 address comes out as IPv4; a forwarded one with port 0. */
void http_trust_client(const struct http_trust *t, const struct sockaddr *peer,
                       const struct http_text *xff, size_t n, struct sockaddr_storage *out);

/* An X-Forwarded-For entry (blanks around it allowed) as an address: true and out filled
 * (port 0), or false. */
bool http_xff_entry(const char *s, size_t len, struct sockaddr_storage *out);

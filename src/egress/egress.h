#pragma once
/* Egress: where the server may connect on a user's behalf. Whatever it fetches for a user (a
 * run's repository today) comes only from public addresses, unless the operator's allow list
 * (FETCH_ALLOW) names more. The policy is a pure function of (rules, host name, resolved address,
 * port), applied to every address a name resolves to; the caller then connects only to the
 * addresses it checked, so a name that resolves differently a moment later (DNS rebinding) gets
 * nowhere. */

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

/* An IP address. IPv4 addresses are held as IPv4-mapped IPv6 addresses (::ffff:a.b.c.d), so an
 * IPv4 address and its mapped form are one address to the policy. */
struct egress_addr {
    uint8_t b[16];
};

#define EGRESS_ADDR_TEXT_MAX 46 /* INET6_ADDRSTRLEN */

/* Parse a numeric IPv4 (dotted quad) or IPv6 address. Returns 0, or -EINVAL. */
int egress_addr_parse(const char *text, struct egress_addr *out);
/* The address as text: dotted quad for IPv4 (mapped ones too), RFC 5952 form for IPv6. */
void egress_addr_format(const struct egress_addr *a, char out[EGRESS_ADDR_TEXT_MAX]);
bool egress_addr_is_v4(const struct egress_addr *a);

enum egress_class {
    EGRESS_PUBLIC,
    EGRESS_LOOPBACK,      /* 127/8, ::1 */
    EGRESS_PRIVATE,       /* 10/8, 172.16/12, 192.168/16 (RFC 1918) */
    EGRESS_SHARED,        /* 100.64/10, carrier-grade NAT (RFC 6598) */
    EGRESS_LINK_LOCAL,    /* 169.254/16 (cloud metadata lives there), fe80::/10 */
    EGRESS_UNIQUE_LOCAL,  /* fc00::/7, and the deprecated site-local fec0::/10 */
    EGRESS_MULTICAST,     /* 224/4, ff00::/8 */
    EGRESS_UNSPECIFIED,   /* 0/8 ("this network"), :: */
    EGRESS_DOCUMENTATION, /* 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20 */
    EGRESS_BENCHMARK,     /* 198.18/15, 2001:2::/48 */
    EGRESS_RESERVED,      /* 240/4 and broadcast, IETF and other special ranges, IPv6 outside
                             global unicast, tunnels whose far end is not the address itself */
};

/* The class of an address. IPv4-mapped, NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses
 * are classed by the IPv4 address they carry. Pure. */
enum egress_class egress_classify(const struct egress_addr *a);
/* "a loopback address", "a private address (RFC 1918)", ... for messages. */
const char *egress_class_name(enum egress_class c);

/* The operator's allow list: comma-separated entries, each an address (127.0.0.1, ::1), a
 * network (10.0.0.0/8, fd00::/8) or a host name (git.internal), optionally with a port
 * (127.0.0.1:8080, [::1]:443, git.internal:443; a network takes no port). An address or network
 * entry allows the addresses in it; a host name entry allows whatever that name (exactly as the
 * user wrote it) resolves to. */
#define EGRESS_RULES_MAX 64
struct egress_rule {
    bool is_host;
    char host[254];         /* is_host: lowercase name */
    struct egress_addr net; /* otherwise */
    int prefix;             /* bits of net that must match (0..128, IPv4 ones counted as mapped) */
    uint16_t port;          /* 0: any port */
};
struct egress_rules {
    int n;
    struct egress_rule rule[EGRESS_RULES_MAX];
};

/* Parse spec (NULL or "" is the empty list) into *out. Returns 0, or -EINVAL naming the entry. */
int egress_rules_parse(const char *spec, struct egress_rules *out, struct err *err);
/* The same, for a list read from the configuration key key (named in the messages). */
int egress_rules_parse_key(const char *spec, const char *key, struct egress_rules *out,
                           struct err *err);

enum egress_verdict {
    EGRESS_DENIED,
    EGRESS_ALLOWED_PUBLIC,  /* a public address */
    EGRESS_ALLOWED_BY_RULE, /* an entry of the operator's list matches (whatever its class) */
};

/* Whether the server may connect to a (which host resolved to) on port. host is the name the
 * user gave, or the address itself. Pure. */
enum egress_verdict egress_decide(const struct egress_rules *rules, const char *host,
                                  const struct egress_addr *a, uint16_t port);

/* egress_decide over every address host resolved to: 0 when all are allowed (*by_rule tells
 * whether an entry of the list allowed any of them), else -EACCES with a message naming the
 * address and its class, e.g. "'x' resolves to 127.0.0.1, a loopback address, which this server
 * does not fetch from; an operator may allow it with FETCH_ALLOW". n == 0 is -EHOSTUNREACH. */
int egress_check(const struct egress_rules *rules, const char *host, const struct egress_addr *a,
                 int n, uint16_t port, bool *by_rule, struct err *err);

/* --- resolution on a thread, answered on the loop (resolve.c) --- */

#define EGRESS_ADDRS_MAX 16
#define EGRESS_LOOKUPS_MAX 32 /* lookup threads alive at once */

struct egress_lookup;
/* addrs (n of them, duplicates removed) are valid during the call only; err is NULL on
 * success. */
typedef void (*egress_resolved_fn)(void *ctx, const struct egress_addr *addrs, int n,
                                   const struct err *err);

/* Resolve host (a name, or a numeric address) for TCP with the system's resolver (getaddrinfo,
 * so /etc/hosts counts) on a thread of its own, and call cb on the loop with what it found.
 * Returns a handle for egress_lookup_cancel, valid until cb has run; or NULL with err set (cb
 * never called) when EGRESS_LOOKUPS_MAX lookups are alive or no pipe could be made. Main loop
 * thread only. */
struct egress_lookup *egress_resolve(const char *host, egress_resolved_fn cb, void *ctx,
                                     struct err *err);
/* cb will not be called; the thread finishes on its own. */
void egress_lookup_cancel(struct egress_lookup *l);

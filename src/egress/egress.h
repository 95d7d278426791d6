#pragma once
/* Egress: where the server may connect on a user's behalf. Whatever it fetches for a user (a
 * run's repository today) comes only from public addresses, unless the operator's allow list
 * (FETCH_ALLOW) names more. The policy is a pure function of (rules, host name, resolved address,
 * port), applied to every address a name resolves to; the caller then connects only to the
 * addresses it checked, so a name that resolves differently a moment later (DNS rebinding) gets
 * nowhere. */

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
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
    EGRESS_HOST_SERVICE,  /* public-looking addresses a cloud's hosts serve to their VMs: Azure's
                             WireServer 168.63.129.16, IBM Cloud's service network 161.26/16
                             (addr.c lists every metadata address and its source) */
};

/* Whether a is an address of this host now, as the kernel routes it (local.c): a route lookup
 * whose answer is a local route, which covers every address on the host's interfaces (those it
 * gained since it started included), all of 127.0.0.0/8 and prefixes routed to the host itself.
 * A lookup that fails counts as local. Needs egress_local_init first. Any thread. */
bool egress_addr_is_local(const struct egress_addr *a);
/* Open the netlink socket egress_addr_is_local asks on (once per process): 0, or a negative errno
 * with err set. */
int egress_local_init(struct err *err);

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

/* --- the sandboxes' network policy (netpolicy.c) ---
 * A sandbox reaches the network only through the server's HTTP proxy, which asks two questions
 * of every request: may this name and port be asked for at all (stage 1, before resolving), and
 * may each address the name resolved to be connected to (stage 2). The policy is built once from
 * the operator's configuration, is immutable afterwards, and its checks are pure: any thread. */

struct config;

/* How much network a sandbox has, from none to every public address. A deployment sets one, a
 * user or a run may only narrow it. */
enum egress_mode { EGRESS_MODE_NONE, EGRESS_MODE_ALLOWLIST, EGRESS_MODE_PUBLIC };
/* "none" | "allowlist" | "public" -> 0, or -EINVAL (text NULL included). */
int egress_mode_parse(const char *text, enum egress_mode *out);
/* Whether s (lowercase, no trailing dot) is a host name: dot-separated labels of 1..63 letters,
 * digits, '-' (not first) or '_', at most 253 bytes, and nothing the C library would read as an
 * IPv4 address (127.1, 0x7f000001: getaddrinfo accepts inet_aton's forms). Pure. */
bool egress_name_valid(const char *s);
/* "none", "allowlist" or "public". */
const char *egress_mode_name(enum egress_mode m);
/* The narrower of two modes (none < allowlist < public). */
enum egress_mode egress_mode_narrow(enum egress_mode a, enum egress_mode b);

/* Host patterns of SANDBOX_NETWORK_ALLOW: at most this many, each name at most 253 bytes. */
#define EGRESS_PATTERNS_MAX 256

/* The operator's policy: mode, host patterns, explicit address rules, the host's own addresses. */
struct egress_policy;
/* From cfg: SANDBOX_NETWORK (the mode, default allowlist); SANDBOX_NETWORK_ALLOW (comma-separated
 * host patterns: "pypi.org", "*.example.org" (deeper names only), "host:port"; case-insensitive,
 * a trailing dot ignored; added to the built-in list); SANDBOX_NETWORK_DEFAULTS (1 keeps the
 * built-in list of package registries and git hosts, 0 drops it); SANDBOX_NETWORK_ADDRS
 * (addresses, networks and host names that may be reached although not public, in FETCH_ALLOW's
 * syntax). Whether an address is the host's own is asked of the kernel at every check
 * (egress_addr_is_local), so an address the host gains later counts. Returns 0 and *out (free
 * with egress_policy_free), or -EINVAL with a message naming the key and the bad entry, or the
 * error of egress_local_init. */
int egress_policy_new(const struct config *cfg, struct egress_policy **out, struct err *err);
/* The same with the host's own addresses given (n_own of them, copied) instead of asked of the
 * kernel, so tests do not depend on the machine. */
int egress_policy_new_with_own(const struct config *cfg, const struct egress_addr *own, int n_own,
                               struct egress_policy **out, struct err *err);
void egress_policy_free(struct egress_policy *p);
/* The deployment's mode: the widest any sandbox of this server may have. */
enum egress_mode egress_policy_mode(const struct egress_policy *p);

enum egress_reason {
    EGRESS_OK,
    EGRESS_DENY_MODE_NONE,  /* the sandbox has no network */
    EGRESS_DENY_NOT_LISTED, /* the name (or an address given as the host) is not allowed */
    EGRESS_DENY_PORT,       /* the name is allowed, this port is not */
    EGRESS_DENY_ADDRESS,    /* it resolves to an address that is not public */
    EGRESS_DENY_SELF,       /* it resolves to an address of this server's host */
    EGRESS_DENY_UNRESOLVED, /* it resolves to nothing */
    EGRESS_DENY_SNI, /* a tunnel's TLS ClientHello does not name the host it was opened for */
};
/* Stage 1, the name alone: may host:port be asked for under mode (narrowed by the policy's own,
 * so a caller cannot widen it)? host is a name or an address (an IPv6 one with or without
 * brackets), as the request gave it. allowlist: a name must match a pattern, on ports 80 and 443
 * unless the pattern names its port; an address only when SANDBOX_NETWORK_ADDRS names it. public:
 * any name or address, any port. What is not a host name (a name the C library would read as an
 * address, such as 127.1 or 0x7f000001, bytes outside letters, digits, '-', '_' and '.') is
 * refused in every mode. EGRESS_OK, or the reason with a message in *why (may be NULL). Pure. */
enum egress_reason egress_policy_check_name(const struct egress_policy *p, enum egress_mode mode,
                                            const char *host, uint16_t port, struct err *why);
/* Stage 2, every address host resolved to (n of them): each must be public and not one of the
 * host's own addresses, or named in SANDBOX_NETWORK_ADDRS (an own address only by an entry that
 * is exactly that address, or the name host itself). n == 0 is EGRESS_DENY_UNRESOLVED. The first
 * refused address decides: EGRESS_OK, or the reason with a message naming host, port, address and
 * class in *why (may be NULL). Pure given the policy and, for a policy of egress_policy_new, the
 * kernel's local routes of the moment. */
enum egress_reason egress_policy_check_addrs(const struct egress_policy *p, const char *host,
                                             const struct egress_addr *a, int n, uint16_t port,
                                             struct err *why);
/* "ok", "mode_none", "not_listed", "port", "address", "self", "unresolved", "sni", for records. */
const char *egress_reason_name(enum egress_reason r);

/* --- the name a TLS ClientHello asks for (tlshello.c) --- */

/* The most bytes of a tunnel's beginning read for its ClientHello: records of 16 KiB at most hold
 * it, and today's hellos (post-quantum key shares included) take under 2 KiB. */
#define EGRESS_HELLO_MAX (16 * 1024)

struct egress_hello {
    bool has_sni;  /* it names a host (server_name, of type host_name) */
    bool ech;      /* it carries encrypted_client_hello (or encrypted_server_name): the name
                      that counts is then not the one it shows */
    char sni[254]; /* has_sni: lowercase, letters, digits, '-', '.' and '_' only */
};
/* Read the TLS ClientHello at the start of buf (len bytes, the first a client sent; the hello may
 * be split across several handshake records): 0 with *out filled once it is whole; -EAGAIN while
 * it is not (then len < EGRESS_HELLO_MAX); -EPROTO when the bytes are not a ClientHello or break
 * its format (two server_name extensions or host names, a name with other bytes); -EMSGSIZE when
 * it would take more than EGRESS_HELLO_MAX bytes. Reads nothing past len. Pure. */
int egress_hello_parse(const uint8_t *buf, size_t len, struct egress_hello *out);

/* Stage 3, a CONNECT tunnel's first bytes: whether host (as asked for, under mode) must show
 * itself in its TLS ClientHello: in allowlist mode, when host is a name (an address in
 * SANDBOX_NETWORK_ADDRS is allowed whatever name a client then gives it). Pure. */
bool egress_policy_needs_sni(const struct egress_policy *p, enum egress_mode mode,
                             const char *host);
/* The tunnel's ClientHello (NULL: its first bytes were not one) against host: EGRESS_OK when no
 * check is needed or its server name is host (case and a trailing dot aside); else
 * EGRESS_DENY_SNI with a message in *why (may be NULL) saying what it lacked: a ClientHello, a
 * server name, a name not hidden by encrypted_client_hello, the name host. Pure. */
enum egress_reason egress_policy_check_sni(const struct egress_policy *p, enum egress_mode mode,
                                           const char *host, const struct egress_hello *hello,
                                           struct err *why);

/* --- resolution on a thread, answered on the loop (resolve.c) --- */

#define EGRESS_ADDRS_MAX 16
#define EGRESS_LOOKUPS_MAX 32     /* lookup threads alive at once */
#define EGRESS_LOOKUPS_PER_USER 8 /* of them for one user: all their sandboxes and runs */
#define EGRESS_LOOKUPS_RESERVED 8 /* of them only the server's own fetches may take, by default */
#define EGRESS_LOOKUP_TIMEOUT_MS 10000 /* a caller waits this long at most, by default */

struct egress_lookup;
/* addrs (n of them, duplicates removed) are valid during the call only; err is NULL on
 * success. */
typedef void (*egress_resolved_fn)(void *ctx, const struct egress_addr *addrs, int n,
                                   const struct err *err);

/* Resolve host (a name, or a numeric address) for TCP with the system's resolver (getaddrinfo,
 * so /etc/hosts counts) on a thread of its own, on behalf of user_id (a user's sandbox or run, at
 * most 63 bytes; NULL: counted in the totals only), and call cb on the loop with what it found:
 * the addresses, or an error (-ENOENT: no such name or no address; -EHOSTUNREACH: the resolver
 * failed; -ETIMEDOUT: no answer within the deadline, when the thread goes on alone and stays
 * counted until it ends). Returns a handle for egress_lookup_cancel, valid until cb has run; or
 * NULL with err set (cb never called): -EAGAIN with the reason when user_id has
 * EGRESS_LOOKUPS_PER_USER lookups alive (cancelled and overdue ones whose thread has not ended
 * included, so that one user cannot hold every thread), when users' lookups together fill all
 * but the reserve, or when EGRESS_LOOKUPS_MAX are alive; or when no pipe could be made. Main
 * loop thread only. */
struct egress_lookup *egress_resolve_for(const char *host, const char *user_id,
                                         egress_resolved_fn cb, void *ctx, struct err *err);
/* The same for the server's own fetches (client metadata documents, notifications), which may
 * also take the reserve: on behalf of cause (who made the server fetch: a client's address, a
 * user; at most 63 bytes; NULL: nobody's), which may have per_cause lookups alive at once. */
struct egress_lookup *egress_resolve(const char *host, const char *cause, int per_cause,
                                     egress_resolved_fn cb, void *ctx, struct err *err);
/* cb will not be called; the thread finishes on its own. */
void egress_lookup_cancel(struct egress_lookup *l);
/* Of the EGRESS_LOOKUPS_MAX lookups, reserve (0..EGRESS_LOOKUPS_MAX - EGRESS_LOOKUPS_PER_USER)
 * are kept for the server's own fetches (NAME_LOOKUPS_RESERVED); a caller is answered within
 * deadline_ms (NAME_LOOKUP_TIMEOUT_SECONDS). For lookups started after the call. Main loop
 * thread only. */
void egress_resolve_configure(int reserve, int64_t deadline_ms);

/* The count of lookups alive, in all, of users and per owner, that the resolver keeps (under a
 * lock of its own). Pure; the caller serializes. */
struct egress_lookups {
    int total;
    int users; /* of them, on behalf of users rather than the server's own */
    struct {
        char owner[64]; /* "" when the slot is free */
        bool server;
        int n;
    } slot[EGRESS_LOOKUPS_MAX];
};
/* Whom a lookup is for. */
struct egress_owner {
    bool server;     /* the server's own fetch, which may take the reserve; else a user's */
    const char *key; /* the user, or the server fetch's cause; NULL or "": totals only */
    int max;         /* lookups alive at once with this key */
};
/* Count one more lookup for o: 0, or -EAGAIN with a message when o->key has o->max alive, when
 * EGRESS_LOOKUPS_MAX are alive, or, for a user's, when users' fill EGRESS_LOOKUPS_MAX - reserve. */
int egress_lookups_claim(struct egress_lookups *t, const struct egress_owner *o, int reserve,
                         struct err *err);
/* One of o's lookups (a claim that succeeded) has ended. */
void egress_lookups_release(struct egress_lookups *t, const struct egress_owner *o);

/* --- requests to a URL a user gave (pin.c) --- */

/* Whether the server may connect to addrs (n of them: what host resolved to, or host itself when
 * it is an address) on port for a user, with no operator allow list: 0 when every one is public
 * and none is this host's own (egress_addr_is_local, asked of the kernel now), or is host itself
 * when host is an address and allow_own_address (the loopback URLs of tests); else -EACCES with
 * a message naming the first address refused and its class ("10.0.0.1 is a private address (RFC
 * 1918)" when host is that address, "'h' resolves to 127.0.0.1, a loopback address" when it is
 * a name, "'h' resolves to 203.0.113.9, this host's own address"), or -EHOSTUNREACH when n is 0.
 * Any thread. */
int egress_public_only(const char *host, uint16_t port, bool allow_own_address,
                       const struct egress_addr *a, int n, struct err *err);

/* Holding a curl transfer to checked addresses: whatever the server fetches from a name a user gave
 * goes only to the addresses that were checked: CURLOPT_RESOLVE pins the name in a DNS cache of the
 * transfer's own (a share handle), so curl never asks the resolver and no pin outlives the
 * transfer, and the open-socket callback refuses any address or port that was not checked, whatever
 * curl thinks the name is. Proxies from the environment are not used. */
struct egress_pin {
    struct egress_addr addrs[EGRESS_ADDRS_MAX];
    int n;
    uint16_t port;
    bool refused; /* curl was about to connect elsewhere: the transfer failed */
    CURLSH *share;
    struct curl_slist *resolve;
};
/* Hold easy to addrs (n of them; at most EGRESS_ADDRS_MAX are kept) for host (a name, or an
 * address: then nothing is pinned, the socket check alone holds) and port. p must stay where it
 * is until the transfer has ended and egress_pin_release has run. */
void egress_pin_apply(struct egress_pin *p, CURL *easy, const char *host, uint16_t port,
                      const struct egress_addr *addrs, int n);
/* Free what egress_pin_apply made, after curl_easy_cleanup of its transfer. */
void egress_pin_release(struct egress_pin *p);

/* --- the sandboxes' bandwidth cap (rate.c) ---
 * A token bucket: bytes pass while it holds tokens, which it gains at rate bytes a second up to
 * its burst (a quarter of a second's worth, at least EGRESS_RATE_BURST_MIN). Pure: the caller
 * gives the time, in milliseconds of a monotonic clock. */
#define EGRESS_RATE_BURST_MIN (64 * 1024)
struct egress_rate {
    uint64_t rate;  /* bytes a second; 0: no cap */
    uint64_t burst; /* most bytes the bucket holds */
    uint64_t milli; /* tokens held, in thousandths of a byte */
    int64_t last_ms;
};
/* A full bucket for rate (0: no cap) at now_ms. */
void egress_rate_init(struct egress_rate *b, uint64_t rate, int64_t now_ms);
/* Whole bytes that may pass now (UINT64_MAX without a cap). */
uint64_t egress_rate_available(struct egress_rate *b, int64_t now_ms);
/* n bytes passed (more than are available empties the bucket). */
void egress_rate_take(struct egress_rate *b, uint64_t n);
/* Milliseconds until need bytes (at most the burst) are available, 0 when they are now. */
uint64_t egress_rate_wait_ms(struct egress_rate *b, uint64_t need, int64_t now_ms);

/* --- the egress proxy (proxy.c): a sandbox's only way out --- */

/* Each running sandbox has a listener at 127.0.0.1:3128 inside its network namespace, served
 * here on the main loop: an HTTP/1.1 proxy for CONNECT host:port (TLS is not intercepted) and
 * absolute-form plain HTTP requests (GET http://host/path), each judged by the operator's
 * policy (the name first, then every address it resolves to outside the sandbox), connected
 * only to a checked address, then relayed both ways through bounded buffers. In allowlist mode a
 * tunnel to a name must begin with a TLS ClientHello naming it (egress_policy_check_sni), and a
 * plain request's Host is the authority judged, so that an allowed name on a shared front
 * reaches no other site there. */
struct egress_proxy;
struct egress_policy;
struct config;

/* One attempt, as it ended: verdict "allowed" or "denied", reason the policy's reason name for a
 * denial, or "ok", "unreachable", "timeout", "busy", "bad_request" for the rest. addr is "" when
 * no address was chosen. Strings are valid during the call only. */
struct egress_attempt {
    const char *sandbox_id;
    const char *method; /* "CONNECT", "GET", ... ("" when no head was read) */
    const char *host;
    uint16_t port;
    const char *addr;
    const char *verdict;
    const char *reason;
    const char *why;          /* the one-line reason the sandbox was answered, "" when none */
    int status;               /* what the sandbox was answered, 0 when the upstream answered */
    uint64_t up, down;        /* bytes sandbox -> upstream, upstream -> sandbox */
    int64_t start_ms, end_ms; /* wall clock */
};
typedef void (*egress_recorder_fn)(void *ctx, const struct egress_attempt *a);
/* The mode a sandbox's requests are judged under, and into user_id the user it belongs to, on
 * whose share its name lookups are counted ("" when it has none). */
typedef enum egress_mode (*egress_mode_fn)(void *ctx, const char *sandbox_id, char user_id[64]);

/* Create the proxy under policy (borrowed; it must outlive the proxy). Takes from cfg
 * SANDBOX_EGRESS_CONNECTIONS (connections of one sandbox at once) and SANDBOX_EGRESS_RATE (bytes
 * a second one sandbox's connections may relay, each way, 0 for no cap). A sandbox's name
 * lookups are counted as its user's (egress_resolve_for), whom egress_mode_fn names. Until
 * egress_proxy_set_mode says otherwise, every sandbox is judged under the policy's own mode (and
 * its lookups counted as its own). Returns 0 or -EINVAL with err set. Main
 * loop only. */
int egress_proxy_new(const struct config *cfg, const struct egress_policy *policy,
                     struct egress_proxy **out, struct err *err);
/* Close every listener and connection (recording the connections) and free the proxy. */
void egress_proxy_free(struct egress_proxy *p);
void egress_proxy_set_mode(struct egress_proxy *p, egress_mode_fn fn, void *ctx);
/* fn is called once for every connection when it ends, denied ones included. */
void egress_proxy_set_recorder(struct egress_proxy *p, egress_recorder_fn fn, void *ctx);
/* Serve a sandbox's listening socket (fd owned from now on); fd -1 closes the sandbox's listener
 * and its connections. Matches sandbox_listener_fn with p as ctx. */
void egress_proxy_listener(void *p, const char *sandbox_id, int fd);
/* Connections open through the proxy, over every sandbox. */
size_t egress_proxy_connections(const struct egress_proxy *p);

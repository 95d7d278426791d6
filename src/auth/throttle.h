#pragma once
/* Throttling of sign-in attempts (passwords, one-time codes), in memory.
 *
 * An attempt is judged by one of three keys, by who makes it:
 * - a browser with a valid device cookie for the name (one set at its last sign-in as that
 *   user): by that device's own count, and nothing else;
 * - a client in a network from which the name signed in before (its IPv4 /24 or IPv6 /48,
 *   within throttle_limits.known_ms): by the count of that name from that network;
 * - anyone else (a stranger): by the count of the name, and by the count of its address (an
 *   IPv4 address or an IPv6 /64); and at most so many of a stranger's attempts may be under way
 *   at once per address and per network.
 * So a stranger's guesses slow down strangers guessing that name, never the user's own browsers
 * or network. Each count is of attempts, taken when the attempt starts (throttle_begin), so that
 * a burst of attempts at once is judged as the same attempts one by one would be. The first
 * THROTTLE_FREE cost nothing; each one after that makes the next wait, 1 s doubling up to
 * THROTTLE_MAX_WAIT_MS. This slows guessing to a crawl without locking anyone out. A count is
 * forgotten THROTTLE_FORGET_MS after its last wait ended without another attempt, and the key
 * that judged an attempt when it succeeds (an address keeps its earlier attempts: one address
 * guessing many names is what that count catches).
 *
 * The tables are fixed (THROTTLE_ENTRIES counts, THROTTLE_KNOWN_ENTRIES known networks), so
 * strangers cannot grow them; where a set is full, a new count takes the place of one with the
 * fewest attempts, and a known network the place of the one least recently signed in from. Only
 * keyed hashes are kept, never a name or an address.
 *
 * The clock is the caller's (now_ms, any monotonic milliseconds), so tests need not sleep. Loop
 * thread only. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define THROTTLE_ENTRIES 4096
#define THROTTLE_KNOWN_ENTRIES 4096
#define THROTTLE_FREE 5
#define THROTTLE_FIRST_WAIT_MS 1000
#define THROTTLE_MAX_WAIT_MS (15 * 60 * 1000)
#define THROTTLE_FORGET_MS (15 * 60 * 1000)
/* What of a device cookie names the device: its random id. */
#define THROTTLE_DEVICE_ID_BYTES 8

/* A client's address as the throttle counts it: addr, the IPv4 address or the IPv6 /64
 * ("2001:db8:1:2::/64"); net, the IPv4 /24 or the IPv6 /48 ("192.0.2.0/24"). An IPv4-mapped
 * IPv6 address counts as the IPv4 one. */
struct throttle_peer {
    char addr[64];
    char net[64];
};

/* sa NULL or of another family: both "?" (everyone unknown counts together). */
void throttle_peer_of(const struct sockaddr *sa, struct throttle_peer *out);

struct throttle_limits {
    unsigned inflight_per_addr; /* a stranger's attempts under way at once per address */
    unsigned inflight_per_net;  /* per network */
    int64_t known_ms;           /* a network is known this long after a sign-in from it */
};

/* Set the limits (defaults: 2, 4, 365 days). */
void throttle_configure(const struct throttle_limits *l);

/* Who attempts: name (NULL or "" for a one-time code) from peer, with device, the id
 * (THROTTLE_DEVICE_ID_BYTES) of a device cookie valid for name, or NULL. */
struct throttle_who {
    const char *name;
    const struct throttle_peer *peer;
    const unsigned char *device;
};

/* One attempt, from throttle_begin to throttle_end. The caller owns it; it holds no pointers. */
struct throttle_attempt {
    uint64_t judge, addr, known; /* keys: what judged it, the address counted, name+network */
    uint64_t held[2];            /* in-flight places held (address, network), 0 when none */
    int64_t started;             /* when it was counted */
    int64_t before[2];           /* the judge's and the address's last count before it */
    bool trusted;                /* judged by a device or a known network, not as a stranger */
    bool open;
};

/* May who start an attempt now? 0: yes, and it is counted (and, for a stranger, held in
 * flight) until throttle_end(at). -EAGAIN with *wait_ms (> 0): not before that long, nothing
 * counted. -EBUSY: a stranger with too many attempts under way from its address or network;
 * counted against the address. at->trusted says which way it was judged, whatever the answer. */
int throttle_begin(const struct throttle_who *who, int64_t now_ms, struct throttle_attempt *at,
                   int64_t *wait_ms);

/* How long before who may start an attempt (0: now); nothing is counted. */
int64_t throttle_wait_ms(const struct throttle_who *who, int64_t now_ms);

enum throttle_outcome {
    THROTTLE_SUCCEEDED, /* forget the judging key's count; remember the network as known */
    THROTTLE_FAILED,    /* the attempt stays counted */
    THROTTLE_UNCHECKED, /* refused before it was checked (no room): counted against the address
                         * only */
};

/* The end of an attempt throttle_begin let start: lets go of its places in flight. Once per
 * attempt; a closed or zeroed at is ignored. */
void throttle_end(struct throttle_attempt *at, enum throttle_outcome outcome, int64_t now_ms);

/* Forget everything and go back to the default limits (for tests). */
void throttle_reset(void);

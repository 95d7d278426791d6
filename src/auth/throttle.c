/* The throttle's tables. Counts: THROTTLE_ENTRIES entries in sets of WAYS; a key lives in the
 * set its keyed hash picks, so a lookup reads one set, and since the hash key is random nobody
 * can choose names that crowd out a given user's entry. Known networks: a table of the same
 * shape. Attempts in flight: a short list, since a stranger's attempt is in flight only while
 * its password check is queued or running, and that queue is short. An entry holds only a hash,
 * never a name or an address. */
#include "auth/throttle.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define WAYS 8
#define SETS (THROTTLE_ENTRIES / WAYS)
#define KNOWN_SETS (THROTTLE_KNOWN_ENTRIES / WAYS)
/* Two keys for each password check the queue can hold, with room to spare; when full, a
 * stranger's attempt is refused as crowded. */
#define INFLIGHT_SLOTS 128

enum kind { NAME, ADDR, NET, DEVICE, NAME_NET, KNOWN, KINDS };

struct entry {
    uint64_t key;    /* 0: free */
    uint32_t count;  /* attempts since it was last forgotten */
    int64_t last;    /* when the last one was counted */
    int64_t next_ok; /* when the next may start */
};

struct known {
    uint64_t key;  /* 0: free */
    int64_t until; /* trusted until then */
};

struct inflight {
    uint64_t key; /* 0: free */
    unsigned n;
};

/* a macro, as a const object is no constant initializer for clang (the fuzz build) */
#define DEFAULT_LIMITS                                                                             \
    {                                                                                              \
        .inflight_per_addr = 2, .inflight_per_net = 4, .known_ms = 365LL * 86400 * 1000            \
    }

static const struct throttle_limits defaults = DEFAULT_LIMITS;
static struct throttle_limits limits = DEFAULT_LIMITS;
static struct entry table[SETS][WAYS];
static struct known known_table[KNOWN_SETS][WAYS];
static struct inflight inflight[INFLIGHT_SLOTS];
static unsigned char hash_keys[KINDS][crypto_shorthash_KEYBYTES];
static bool keyed;

void throttle_peer_of(const struct sockaddr *sa, struct throttle_peer *out)
{
    snprintf(out->addr, sizeof(out->addr), "?");
    snprintf(out->net, sizeof(out->net), "?");
    if (!sa)
        return;
    struct in_addr v4;
    if (sa->sa_family == AF_INET) {
        v4 = ((const struct sockaddr_in *)sa)->sin_addr;
    } else if (sa->sa_family == AF_INET6) {
        struct in6_addr a = ((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&a)) {
            memcpy(&v4, a.s6_addr + 12, 4);
        } else {
            /* one host commonly holds a whole /64, one site a /48 */
            char text[INET6_ADDRSTRLEN];
            memset(a.s6_addr + 8, 0, 8);
            inet_ntop(AF_INET6, &a, text, sizeof(text));
            snprintf(out->addr, sizeof(out->addr), "%s/64", text);
            memset(a.s6_addr + 6, 0, 2);
            inet_ntop(AF_INET6, &a, text, sizeof(text));
            snprintf(out->net, sizeof(out->net), "%s/48", text);
            return;
        }
    } else {
        return;
    }
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &v4, out->addr, sizeof(out->addr));
    ((unsigned char *)&v4)[3] = 0;
    inet_ntop(AF_INET, &v4, text, sizeof(text));
    snprintf(out->net, sizeof(out->net), "%s/24", text);
}

void throttle_configure(const struct throttle_limits *l)
{
    limits = *l;
}

static uint64_t key_of(enum kind kind, const void *s, size_t n)
{
    if (!keyed) {
        randombytes_buf(hash_keys, sizeof(hash_keys));
        keyed = true;
    }
    unsigned char h[crypto_shorthash_BYTES];
    crypto_shorthash(h, s, n, hash_keys[kind]);
    uint64_t k;
    memcpy(&k, h, sizeof(k));
    return k ? k : 1;
}

static uint64_t key_of_str(enum kind kind, const char *s)
{
    return s && s[0] ? key_of(kind, s, strlen(s)) : 0;
}

static bool forgotten(const struct entry *e, int64_t now)
{
    return e->key == 0 || now >= e->next_ok + THROTTLE_FORGET_MS;
}

static struct entry *find(uint64_t key, int64_t now)
{
    struct entry *set = table[(key >> 32) % SETS];
    for (int i = 0; i < WAYS; i++)
        if (set[i].key == key) {
            if (!forgotten(&set[i], now))
                return &set[i];
            set[i] = (struct entry){0};
            return NULL;
        }
    return NULL;
}

/* A place for key: a free or forgotten one, else the one with the fewest attempts (and of
 * those, the one whose wait ends first). */
static struct entry *place(uint64_t key, int64_t now)
{
    struct entry *set = table[(key >> 32) % SETS], *best = &set[0];
    for (int i = 0; i < WAYS; i++) {
        struct entry *e = &set[i];
        if (forgotten(e, now)) {
            best = e;
            break;
        }
        if (e->count < best->count || (e->count == best->count && e->next_ok < best->next_ok))
            best = e;
    }
    *best = (struct entry){.key = key};
    return best;
}

static int64_t wait_of(uint64_t key, int64_t now)
{
    if (!key)
        return 0;
    const struct entry *e = find(key, now);
    return e && e->next_ok > now ? e->next_ok - now : 0;
}

/* When the next attempt may start after e's count. */
static void set_next(struct entry *e)
{
    int64_t wait = 0;
    if (e->count > THROTTLE_FREE) {
        uint32_t doublings = e->count - THROTTLE_FREE - 1;
        wait =
            doublings >= 30 ? THROTTLE_MAX_WAIT_MS : (int64_t)THROTTLE_FIRST_WAIT_MS << doublings;
        if (wait > THROTTLE_MAX_WAIT_MS)
            wait = THROTTLE_MAX_WAIT_MS;
    }
    e->next_ok = e->last + wait;
}

/* Count an attempt against key at now; returns when the one before it was counted. */
static int64_t count(uint64_t key, int64_t now)
{
    if (!key)
        return 0;
    struct entry *e = find(key, now);
    if (!e)
        e = place(key, now);
    int64_t before = e->last;
    if (e->count < UINT32_MAX)
        e->count++;
    e->last = now;
    set_next(e);
    return before;
}

/* Take back the attempt counted against key at started, whose count before it was at before:
 * as if it had not been, unless others were counted since. */
static void uncount(uint64_t key, int64_t started, int64_t before, int64_t now)
{
    struct entry *e = key ? find(key, now) : NULL;
    if (!e || e->count == 0)
        return;
    e->count--;
    if (e->last == started)
        e->last = before;
    set_next(e);
}

static void forget(uint64_t key, int64_t now)
{
    struct entry *e = key ? find(key, now) : NULL;
    if (e)
        *e = (struct entry){0};
}

static bool is_known(uint64_t key, int64_t now)
{
    struct known *set = known_table[(key >> 32) % KNOWN_SETS];
    for (int i = 0; i < WAYS; i++)
        if (set[i].key == key)
            return now < set[i].until;
    return false;
}

static void remember(uint64_t key, int64_t now)
{
    struct known *set = known_table[(key >> 32) % KNOWN_SETS], *best = &set[0];
    for (int i = 0; i < WAYS; i++) {
        if (set[i].key == key) {
            best = &set[i];
            break;
        }
        if (set[i].until < best->until)
            best = &set[i];
    }
    *best = (struct known){.key = key, .until = now + limits.known_ms};
}

static struct inflight *inflight_find(uint64_t key)
{
    for (int i = 0; i < INFLIGHT_SLOTS; i++)
        if (inflight[i].key == key)
            return &inflight[i];
    return NULL;
}

static unsigned inflight_count(uint64_t key)
{
    const struct inflight *f = inflight_find(key);
    return f ? f->n : 0;
}

/* Hold a place in flight for key; false when the list is full. */
static bool inflight_hold(uint64_t key)
{
    struct inflight *f = inflight_find(key);
    if (!f)
        f = inflight_find(0);
    if (!f)
        return false;
    f->key = key;
    f->n++;
    return true;
}

static void inflight_release(uint64_t key)
{
    struct inflight *f = key ? inflight_find(key) : NULL;
    if (f && --f->n == 0)
        f->key = 0;
}

/* Which keys judge who's attempt; the wait they ask for. */
static int64_t judge(const struct throttle_who *who, int64_t now_ms, struct throttle_attempt *at)
{
    *at = (struct throttle_attempt){0};
    const struct throttle_peer *p = who->peer;
    bool named = who->name && who->name[0];
    char name_net[256] = "";
    if (named)
        snprintf(name_net, sizeof(name_net), "%s\n%s", who->name, p->net);
    at->known = named ? key_of_str(KNOWN, name_net) : 0;
    if (named && who->device) {
        at->judge = key_of(DEVICE, who->device, THROTTLE_DEVICE_ID_BYTES);
        at->trusted = true;
    } else if (named && is_known(at->known, now_ms)) {
        at->judge = key_of_str(NAME_NET, name_net);
        at->trusted = true;
    } else {
        at->judge = named ? key_of_str(NAME, who->name) : 0;
        at->addr = key_of_str(ADDR, p->addr);
    }
    int64_t wj = wait_of(at->judge, now_ms), wa = wait_of(at->addr, now_ms);
    return wj > wa ? wj : wa;
}

int64_t throttle_wait_ms(const struct throttle_who *who, int64_t now_ms)
{
    struct throttle_attempt at;
    return judge(who, now_ms, &at);
}

int throttle_begin(const struct throttle_who *who, int64_t now_ms, struct throttle_attempt *at,
                   int64_t *wait_ms)
{
    *wait_ms = judge(who, now_ms, at);
    if (*wait_ms > 0)
        return -EAGAIN;
    if (!at->trusted) {
        uint64_t net = key_of_str(NET, who->peer->net);
        if (inflight_count(at->addr) >= limits.inflight_per_addr ||
            inflight_count(net) >= limits.inflight_per_net || !inflight_hold(at->addr)) {
            count(at->addr, now_ms);
            return -EBUSY;
        }
        if (!inflight_hold(net)) {
            inflight_release(at->addr);
            count(at->addr, now_ms);
            return -EBUSY;
        }
        at->held[0] = at->addr;
        at->held[1] = net;
    }
    at->started = now_ms;
    at->before[0] = count(at->judge, now_ms);
    at->before[1] = count(at->addr, now_ms);
    at->open = true;
    return 0;
}

void throttle_end(struct throttle_attempt *at, enum throttle_outcome outcome, int64_t now_ms)
{
    if (!at->open)
        return;
    at->open = false;
    inflight_release(at->held[0]);
    inflight_release(at->held[1]);
    at->held[0] = at->held[1] = 0;
    switch (outcome) {
    case THROTTLE_SUCCEEDED:
        forget(at->judge, now_ms);
        uncount(at->addr, at->started, at->before[1], now_ms);
        if (at->known)
            remember(at->known, now_ms);
        break;
    case THROTTLE_FAILED: break;
    case THROTTLE_UNCHECKED: uncount(at->judge, at->started, at->before[0], now_ms); break;
    }
}

void throttle_reset(void)
{
    memset(table, 0, sizeof(table));
    memset(known_table, 0, sizeof(known_table));
    memset(inflight, 0, sizeof(inflight));
    limits = defaults;
}

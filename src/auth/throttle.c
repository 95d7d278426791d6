/* The throttle's table: THROTTLE_ENTRIES entries in sets of WAYS. A name or address lives in
 * the set its keyed hash picks, so a lookup reads one set, and since the key is random nobody
 * can choose names that crowd out a given user's entry. An entry holds only the hash, never the
 * name or address itself. */
#include "auth/throttle.h"

#include <sodium.h>
#include <stdbool.h>
#include <string.h>

#define WAYS 8
#define SETS (THROTTLE_ENTRIES / WAYS)

struct entry {
    uint64_t key;    /* 0: free */
    uint32_t fails;  /* since it was last forgotten */
    int64_t next_ok; /* when the next guess may be tried */
};

static struct entry table[SETS][WAYS];
static unsigned char keys[2][crypto_shorthash_KEYBYTES]; /* user names, addresses */
static bool keyed;

static uint64_t key_of(int kind, const char *s)
{
    if (!keyed) {
        randombytes_buf(keys, sizeof(keys));
        keyed = true;
    }
    unsigned char h[crypto_shorthash_BYTES];
    crypto_shorthash(h, (const unsigned char *)s, strlen(s), keys[kind]);
    uint64_t k;
    memcpy(&k, h, sizeof(k));
    return k ? k : 1;
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

/* A place for key: a free or forgotten one, else the one with the fewest failures (and of
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
        if (e->fails < best->fails || (e->fails == best->fails && e->next_ok < best->next_ok))
            best = e;
    }
    *best = (struct entry){.key = key};
    return best;
}

static int64_t wait_of(int kind, const char *s, int64_t now)
{
    if (!s || !s[0])
        return 0;
    const struct entry *e = find(key_of(kind, s), now);
    return e && e->next_ok > now ? e->next_ok - now : 0;
}

static void fail(int kind, const char *s, int64_t now)
{
    if (!s || !s[0])
        return;
    uint64_t key = key_of(kind, s);
    struct entry *e = find(key, now);
    if (!e)
        e = place(key, now);
    if (e->fails < UINT32_MAX)
        e->fails++;
    int64_t wait = 0;
    if (e->fails > THROTTLE_FREE) {
        uint32_t doublings = e->fails - THROTTLE_FREE - 1;
        wait =
            doublings >= 30 ? THROTTLE_MAX_WAIT_MS : (int64_t)THROTTLE_FIRST_WAIT_MS << doublings;
        if (wait > THROTTLE_MAX_WAIT_MS)
            wait = THROTTLE_MAX_WAIT_MS;
    }
    e->next_ok = now + wait;
}

int64_t throttle_wait_ms(const char *user, const char *addr, int64_t now_ms)
{
    int64_t u = wait_of(0, user, now_ms), a = wait_of(1, addr, now_ms);
    return u > a ? u : a;
}

void throttle_failure(const char *user, const char *addr, int64_t now_ms)
{
    fail(0, user, now_ms);
    fail(1, addr, now_ms);
}

void throttle_success(const char *user, const char *addr, int64_t now_ms)
{
    (void)addr;
    if (!user || !user[0])
        return;
    struct entry *e = find(key_of(0, user), now_ms);
    if (e)
        *e = (struct entry){0};
}

void throttle_reset(void)
{
    memset(table, 0, sizeof(table));
}

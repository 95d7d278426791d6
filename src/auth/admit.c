/* Room for new clients: registrations (/register) and metadata documents cached the first time.
 * Each address (an IPv4 address, an IPv6 /64) may add OAUTH_REGISTER_PER_ADDRESS clients an hour;
 * the store keeps at most OAUTH_CLIENTS_MAX clients no user approved, and when it is full the
 * oldest of them makes room for the newcomer: a flood pushes out only unapproved registrations
 * (its own, mostly), never a client a user approved, and never refuses the next real client.
 *
 * The count of unapproved clients is kept here rather than counted per registration: read from
 * the store at start and after each prune (every AUTH_PRUNE_EVERY_MS, on a timer, not on a
 * request), raised by each new client and lowered by each first approval. On several nodes each
 * also counts only its own newcomers between prunes; the table may then pass the cap by what the
 * others added meanwhile, until the next prune reads the true count.
 *
 * The per-address table is fixed (QUOTA_SETS * QUOTA_WAYS) and keyed with a random key, as the
 * sign-in throttle's (throttle.c): strangers cannot grow it nor pick addresses that crowd out a
 * given one. Where a set is full, the entry whose hour began first gives way. */
#include "auth/auth_internal.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/util.h"

#define QUOTA_WAYS 8
#define QUOTA_SETS 512

struct quota_entry {
    uint64_t key;  /* 0: free */
    int64_t since; /* when its hour began (monotonic ms) */
    uint32_t n;    /* clients added in that hour */
};

struct auth_admit {
    struct auth *a;
    struct loop_timer prune;
    int64_t unapproved; /* clients no user approved, as last read plus those added since */
    unsigned char key[crypto_shorthash_KEYBYTES];
    struct quota_entry table[QUOTA_SETS][QUOTA_WAYS];
};

static uint64_t key_of(struct auth_admit *m, const char *addr)
{
    unsigned char h[crypto_shorthash_BYTES];
    crypto_shorthash(h, (const unsigned char *)addr, strlen(addr), m->key);
    uint64_t k;
    memcpy(&k, h, sizeof(k));
    return k ? k : 1;
}

static bool current(const struct quota_entry *e, int64_t now)
{
    return e->key != 0 && now - e->since < AUTH_REGISTER_WINDOW_MS;
}

/* addr's entry for this hour, or NULL (place: make one, giving way as the header says). */
static struct quota_entry *entry(struct auth_admit *m, const char *addr, int64_t now, bool place)
{
    uint64_t key = key_of(m, addr);
    struct quota_entry *set = m->table[(key >> 32) % QUOTA_SETS], *best = &set[0];
    for (int i = 0; i < QUOTA_WAYS; i++)
        if (set[i].key == key && current(&set[i], now))
            return &set[i];
    if (!place)
        return NULL;
    for (int i = 0; i < QUOTA_WAYS; i++) {
        if (!current(&set[i], now)) {
            best = &set[i];
            break;
        }
        if (set[i].since < best->since)
            best = &set[i];
    }
    *best = (struct quota_entry){.key = key, .since = now};
    return best;
}

static int prune(struct auth_admit *m, struct err *err)
{
    int left = store_oauth_clients_prune(m->a->store, AUTH_UNUSED_CLIENT_MS, err);
    if (left >= 0)
        m->unapproved = left;
    return left;
}

static void on_prune(struct loop_timer *t)
{
    struct auth_admit *m = container_of(t, struct auth_admit, prune);
    struct err err = {0};
    if (prune(m, &err) < 0)
        log_error("oauth clients-prune-failed reason=\"%s\"", err.msg);
    loop_timer_start(&m->prune, AUTH_PRUNE_EVERY_MS, on_prune);
}

void auth_admit_init(struct auth *a)
{
    struct auth_admit *m = xcalloc(1, sizeof(*m));
    m->a = a;
    randombytes_buf(m->key, sizeof(m->key));
    a->admit = m;
    struct err err = {0};
    if (prune(m, &err) < 0)
        log_error("oauth clients-prune-failed reason=\"%s\"", err.msg);
    loop_timer_start(&m->prune, AUTH_PRUNE_EVERY_MS, on_prune);
}

void auth_admit_release(struct auth *a)
{
    if (!a->admit)
        return;
    loop_timer_stop(&a->admit->prune);
    free(a->admit);
    a->admit = NULL;
}

int64_t auth_admit_wait_s(struct auth *a, const char *addr)
{
    int64_t now = time_mono_ms();
    const struct quota_entry *e = entry(a->admit, addr, now, false);
    if (!e || e->n < (uint32_t)a->conf.register_per_address)
        return 0;
    return (e->since + AUTH_REGISTER_WINDOW_MS - now + 999) / 1000;
}

int auth_admit(struct auth *a, const char *addr, struct err *err)
{
    struct auth_admit *m = a->admit;
    entry(m, addr, time_mono_ms(), true)->n++;
    if (m->unapproved < a->conf.clients_max) {
        m->unapproved++;
        return 0;
    }
    char evicted[STORE_OAUTH_CLIENT_ID_MAX + 1];
    int r = store_oauth_client_evict(a->store, evicted, err);
    if (r < 0)
        return r;
    if (r == 0) /* none left to evict: the count was stale */
        m->unapproved = 1;
    else
        log_info("oauth client-evicted client=\"%.200s\" unapproved=%lld max=%d", evicted,
                 (long long)m->unapproved, a->conf.clients_max);
    return 0;
}

void auth_admit_approved(struct auth *a)
{
    if (a->admit->unapproved > 0)
        a->admit->unapproved--;
}

#include "cluster/cluster.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/util.h"

#define KEY_CLUSTER "cluster-forward v1"
#define SIGNATURE_SKEW_S CLUSTER_SIGNATURE_SKEW_S
#define NONCE_BYTES 16
#define NONCES_FIRST 256 /* entries allocated at first; doubled up to the cap */

struct cluster {
    struct store *st;
    char node_id[64];
    char url[256];
    struct cluster_key key;
    struct cluster_nonces *nonces;
    uint64_t heartbeat_ms, lost_ms;
    struct loop_timer beat;
    void (*on_lost)(void *ctx, const char *node_id);
    void *on_lost_ctx;
    void (*on_back)(void *ctx);
    void *on_back_ctx;
    void (*on_taken)(void *ctx, const char *session_id);
    void *on_taken_ctx;
};

static void report_lost(const struct store_node *n, void *ctx)
{
    struct cluster *c = ctx;
    log_warn("node lost node=%s url=%s silent_ms=%lld", n->id, n->url,
             (long long)(time_now_ms() - n->heartbeat_at));
    if (c->on_lost)
        c->on_lost(c->on_lost_ctx, n->id);
}

static void on_beat(struct loop_timer *t)
{
    struct cluster *c = container_of(t, struct cluster, beat);
    struct err err = {0};
    int64_t now = time_now_ms();
    int r = store_node_heartbeat(c->st, now, &err);
    if (r < 0)
        log_error("node heartbeat failed node=%s err=\"%s\"", c->node_id, err.msg);
    else if (r == 1)
        log_warn("node back node=%s note=\"another node had marked this one lost: its runs then "
                 "ended and its users' next calls started their sandboxes elsewhere\"",
                 c->node_id);
    if (r == 1 && c->on_back)
        c->on_back(c->on_back_ctx);
    /* Only a node that has just written its own heartbeat judges the others': one cut off from
     * the store marks nobody lost. */
    if (r >= 0 && store_node_sweep(c->st, now - (int64_t)c->lost_ms, report_lost, c, &err) < 0)
        log_error("node sweep failed node=%s err=\"%s\"", c->node_id, err.msg);
    loop_timer_start(&c->beat, c->heartbeat_ms, on_beat);
}

int cluster_new(const struct cluster_config *cfg, struct store *st, struct cluster **ret,
                struct err *err)
{
    struct cluster *c = xcalloc(1, sizeof(*c));
    c->st = st;
    snprintf(c->node_id, sizeof(c->node_id), "%s", cfg->node_id);
    snprintf(c->url, sizeof(c->url), "%s", cfg->node_url);
    c->heartbeat_ms = cfg->heartbeat_ms;
    c->lost_ms = cfg->lost_ms;
    cluster_key_init(&c->key, cfg->secret);
    if (c->key.have)
        c->nonces = cluster_nonces_new(cfg->max_nonces);
    struct store_node n = {.max_sandboxes = cfg->max_sandboxes,
                           .max_runs = cfg->max_runs,
                           .started_at = time_now_ms()};
    snprintf(n.id, sizeof(n.id), "%s", c->node_id);
    snprintf(n.url, sizeof(n.url), "%s", c->url);
    int r = store_node_register(st, &n, err);
    if (r < 0) {
        cluster_nonces_free(c->nonces);
        free(c);
        return r;
    }
    log_info("node up node=%s url=%s store=%s forwarding=%s heartbeat_ms=%llu lost_ms=%llu",
             c->node_id, c->url, store_is_shared(st) ? "postgres" : "sqlite",
             c->key.have ? "on" : "off", (unsigned long long)c->heartbeat_ms,
             (unsigned long long)c->lost_ms);
    loop_timer_start(&c->beat, c->heartbeat_ms, on_beat);
    *ret = c;
    return 0;
}

void cluster_free(struct cluster *c)
{
    if (!c)
        return;
    loop_timer_stop(&c->beat);
    struct err err = {0};
    if (store_node_stop(c->st, &err) < 0)
        log_warn("node stop not recorded node=%s err=\"%s\"", c->node_id, err.msg);
    OPENSSL_cleanse(&c->key, sizeof(c->key));
    cluster_nonces_free(c->nonces);
    free(c);
}

void cluster_on_back(struct cluster *c, void (*fn)(void *ctx), void *ctx)
{
    c->on_back = fn;
    c->on_back_ctx = ctx;
}

const char *cluster_node_id(const struct cluster *c)
{
    return c->node_id;
}

void cluster_on_taken(struct cluster *c, void (*fn)(void *ctx, const char *session_id), void *ctx)
{
    c->on_taken = fn;
    c->on_taken_ctx = ctx;
}

void cluster_on_lost(struct cluster *c, void (*fn)(void *ctx, const char *node_id), void *ctx)
{
    c->on_lost = fn;
    c->on_lost_ctx = ctx;
}

/* Where a thing owned by node owner_id is served: 0 here (it is this node's), 1 on that node
 * (url and node filled), 2 nowhere (its node is lost, or silent for the lost timeout: the caller
 * takes it over), -EAGAIN while the node is stopped for less than that (a restart), or
 * -EHOSTUNREACH when it is up but this node cannot forward. */
static int route(struct cluster *c, const char *owner_id, char url[256], char node[64],
                 char state[16], struct err *err)
{
    if (strcmp(owner_id, c->node_id) == 0)
        return 0;
    struct store_node owner = {0};
    int r = store_node_get(c->st, owner_id, &owner, err);
    if (r < 0 && r != -ENOENT)
        return r;
    snprintf(state, 16, "%s", r == 0 ? owner.state : "unknown");
    if (r < 0 || strcmp(owner.state, "lost") == 0 ||
        owner.heartbeat_at < time_now_ms() - (int64_t)c->lost_ms)
        return 2;
    /* stopped cleanly a moment ago: a restart, after which it re-adopts its sandboxes */
    if (strcmp(owner.state, "stopped") == 0)
        return err_set(err, -EAGAIN,
                       "node '%s', which holds this, is restarting; retry in a few seconds",
                       owner.id);
    if (!c->key.have)
        return err_set(err, -EHOSTUNREACH,
                       "this lives on node '%s', and this node has no CLUSTER_SECRET to forward "
                       "the call there with",
                       owner.id);
    snprintf(url, 256, "%s", owner.url);
    snprintf(node, 64, "%s", owner.id);
    return 1;
}

static int route_session(struct cluster *c, const char *user_id, const char *session_id, bool claim,
                         char url[256], char node[64], struct err *err);

int cluster_route_sandbox(struct cluster *c, const char *user_id, const char *session_id,
                          char url[256], char node[64], struct err *err)
{
    if (session_id)
        return route_session(c, user_id, session_id, true, url, node, err);
    struct store_sandbox row;
    int r = store_sandbox_find(c->st, user_id, NULL, &row, err);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    char state[16];
    if ((r = route(c, row.node_id, url, node, state, err)) != 2)
        return r;
    /* Its node is gone (or stopped): the sandbox is this node's now, and starts afresh. */
    if ((r = store_sandbox_take_over(c->st, row.id, row.node_id, err)) < 0)
        return r == -ESTALE ? cluster_route_sandbox(c, user_id, NULL, url, node, err) : r;
    log_warn("sandbox taken over sbx=%s user=%s from=%s state=%s note=\"its files stay on that "
             "node; the user's next command starts a fresh sandbox here\"",
             row.id, user_id, row.node_id, state);
    return 0;
}

/* cluster_route_session; a session no node has claimed yet is claimed here when the call needs
 * its sandbox (claim), else the call is answered here from the store. */
static int route_session(struct cluster *c, const char *user_id, const char *session_id, bool claim,
                         char url[256], char node[64], struct err *err)
{
    struct store_session ses;
    int r = store_session_get(c->st, user_id, session_id, &ses, err);
    if (r == -ENOENT)
        return 0; /* answered here, as not found */
    if (r < 0)
        return r;
    const char *owner = ses.node_id; /* read with the session, as this user's */
    if (strcmp(owner, STORE_SESSION_UNCLAIMED) == 0) {
        if (!claim)
            return 0;
        if ((r = store_session_take_over(c->st, session_id, owner, err)) < 0)
            return r == -ESTALE ? route_session(c, user_id, session_id, claim, url, node, err) : r;
        log_info("session claimed session=%s user=%s note=\"for its sandbox\"", session_id,
                 user_id);
        return 0;
    }
    char state[16];
    if ((r = route(c, owner, url, node, state, err)) != 2)
        return r;
    if ((r = store_session_take_over(c->st, session_id, owner, err)) < 0)
        return r == -ESTALE ? route_session(c, user_id, session_id, claim, url, node, err) : r;
    log_warn("session taken over session=%s user=%s from=%s state=%s note=\"its workspace stays "
             "on that node; its next run starts in a fresh sandbox here\"",
             session_id, user_id, owner, state);
    if (c->on_taken)
        c->on_taken(c->on_taken_ctx, session_id);
    return 0;
}

int cluster_route_session(struct cluster *c, const char *user_id, const char *session_id,
                          char url[256], char node[64], struct err *err)
{
    return route_session(c, user_id, session_id, false, url, node, err);
}

void cluster_key_init(struct cluster_key *k, const char *secret)
{
    memset(k, 0, sizeof(*k));
    if (secret && *secret) {
        key_derive(secret, strlen(secret), KEY_CLUSTER, k->key);
        k->have = true;
    }
}

const struct cluster_key *cluster_key(const struct cluster *c)
{
    return &c->key;
}

struct cluster_nonces *cluster_nonces(const struct cluster *c)
{
    return c->nonces;
}

/* The nonces in the order they came: a ring of entries, and an open-addressing index of their
 * positions (linear probing, deletion by backward shift). Entries leave from the ring's head
 * once expired; one behind a longer-lived head waits for it, which keeps it at most three
 * windows after it came. */
struct nonce {
    unsigned char id[NONCE_BYTES];
    int64_t until; /* its signature's time plus twice the window */
};

struct cluster_nonces {
    size_t max;         /* the cap */
    size_t cap;         /* entries in ring */
    size_t head, n;     /* the oldest entry, and how many */
    struct nonce *ring; /* cap entries */
    uint32_t *slots;    /* nslots: 0 empty, else a position in ring plus one */
    size_t nslots;      /* a power of two, at least twice cap */
};

static size_t nonce_hash(const unsigned char id[NONCE_BYTES])
{
    /* random bytes already, from a node that holds the key: any eight of them spread well */
    uint64_t h;
    memcpy(&h, id, sizeof(h));
    return (size_t)h;
}

static void nonces_index(struct cluster_nonces *s, size_t pos)
{
    size_t mask = s->nslots - 1, i = nonce_hash(s->ring[pos].id) & mask;
    while (s->slots[i])
        i = (i + 1) & mask;
    s->slots[i] = (uint32_t)pos + 1;
}

static void nonces_alloc(struct cluster_nonces *s, size_t cap)
{
    struct nonce *ring = xcalloc(cap, sizeof(*ring));
    for (size_t i = 0; i < s->n; i++)
        ring[i] = s->ring[(s->head + i) % s->cap];
    free(s->ring);
    free(s->slots);
    s->ring = ring;
    s->cap = cap;
    s->head = 0;
    for (s->nslots = 4; s->nslots < 2 * cap; s->nslots *= 2)
        ;
    s->slots = xcalloc(s->nslots, sizeof(*s->slots));
    for (size_t i = 0; i < s->n; i++)
        nonces_index(s, i);
}

struct cluster_nonces *cluster_nonces_new(size_t max)
{
    struct cluster_nonces *s = xcalloc(1, sizeof(*s));
    s->max = max ? max : 1;
    nonces_alloc(s, s->max < NONCES_FIRST ? s->max : NONCES_FIRST);
    return s;
}

void cluster_nonces_free(struct cluster_nonces *s)
{
    if (!s)
        return;
    free(s->ring);
    free(s->slots);
    free(s);
}

/* The index slot of the nonce at ring position pos, or of id (pos SIZE_MAX); SIZE_MAX if none. */
static size_t nonces_find(const struct cluster_nonces *s, const unsigned char *id, size_t pos)
{
    size_t mask = s->nslots - 1;
    for (size_t i = nonce_hash(pos == SIZE_MAX ? id : s->ring[pos].id) & mask; s->slots[i];
         i = (i + 1) & mask) {
        size_t at = s->slots[i] - 1;
        if (pos == SIZE_MAX ? memcmp(s->ring[at].id, id, NONCE_BYTES) == 0 : at == pos)
            return i;
    }
    return SIZE_MAX;
}

/* Drop the oldest entry, and close the gap it leaves in the index. */
static void nonces_pop(struct cluster_nonces *s)
{
    size_t mask = s->nslots - 1, i = nonces_find(s, NULL, s->head);
    s->slots[i] = 0;
    for (size_t j = (i + 1) & mask; s->slots[j]; j = (j + 1) & mask) {
        size_t home = nonce_hash(s->ring[s->slots[j] - 1].id) & mask;
        /* an entry may move back to i unless its home lies cyclically in (i, j] */
        if (i <= j ? home <= i || home > j : home <= i && home > j) {
            s->slots[i] = s->slots[j];
            s->slots[j] = 0;
            i = j;
        }
    }
    s->head = (s->head + 1) % s->cap;
    s->n--;
}

/* Spend id, good until until: 0, -EALREADY (spent before) or -EBUSY (full). */
static int nonces_spend(struct cluster_nonces *s, const unsigned char id[NONCE_BYTES],
                        int64_t until, int64_t now_s)
{
    while (s->n && s->ring[s->head].until < now_s)
        nonces_pop(s);
    if (nonces_find(s, id, SIZE_MAX) != SIZE_MAX)
        return -EALREADY;
    if (s->n == s->cap) {
        if (s->cap == s->max)
            return -EBUSY;
        nonces_alloc(s, s->cap < s->max / 2 ? 2 * s->cap : s->max);
    }
    size_t pos = (s->head + s->n) % s->cap;
    memcpy(s->ring[pos].id, id, NONCE_BYTES);
    s->ring[pos].until = until;
    s->n++;
    nonces_index(s, pos);
    return 0;
}

static void nonce_new(char hex[2 * NONCE_BYTES + 1])
{
    unsigned char id[NONCE_BYTES];
    rand_bytes(id, sizeof(id));
    hex_encode(id, sizeof(id), hex);
}

/* The nonce's bytes from its 32 lowercase hex digits; false when it is not that. */
static bool nonce_parse(const char *hex, unsigned char id[NONCE_BYTES])
{
    if (strlen(hex) != 2 * NONCE_BYTES)
        return false;
    for (size_t i = 0; i < 2 * NONCE_BYTES; i++) {
        char ch = hex[i];
        int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (v < 0)
            return false;
        if (i % 2 == 0)
            id[i / 2] = (unsigned char)(v << 4);
        else
            id[i / 2] |= (unsigned char)v;
    }
    return true;
}

/* Spend a checked signature's nonce: 0, or the error. */
static int spend(struct cluster_nonces *seen, const unsigned char id[NONCE_BYTES], int64_t t,
                 int64_t now_s, struct err *err)
{
    /* refused by its time after t + SKEW; kept a window longer, so that a clock set back by up
     * to a window does not forget it while its signature is good again */
    int r = nonces_spend(seen, id, t + 2 * SIGNATURE_SKEW_S, now_s);
    if (r == -EALREADY)
        return err_set(err, r, "nonce already used: a replayed call");
    if (r == -EBUSY)
        return err_set(err, r,
                       "too many forwarded calls in the last %d s to remember them all "
                       "(CLUSTER_NONCE_CACHE %zu)",
                       2 * SIGNATURE_SKEW_S, seen->max);
    return r;
}

/* HMAC of the signed text: the claims, the nonce, the method, the path, the body's length and
 * digest. */
static void mac(const struct cluster_key *k, const struct cluster_claims *cl, const char *nonce,
                const char *method, const char *path, const void *body, size_t len, char hex[65])
{
    char digest[65];
    sha256_hex(body, len, digest);
    char *text = xasprintf("sandbox-mcp forward v2\n%lld\n%s\n%s\n%s\n%s\n%u\n%s\n%s\n%zu\n%s",
                           (long long)cl->time, nonce, cl->node, cl->user_id, cl->user_name,
                           cl->scopes, method, path, len, digest);
    unsigned char md[32];
    unsigned int mdlen = sizeof(md);
    HMAC(EVP_sha256(), k->key, sizeof(k->key), (const unsigned char *)text, strlen(text), md,
         &mdlen);
    free(text);
    hex_encode(md, sizeof(md), hex);
}

static bool field_ok(const char *s)
{
    return !strpbrk(s, ",\r\n");
}

int cluster_sign(const struct cluster_key *k, const struct cluster_claims *cl, const char *method,
                 const char *path, const void *body, size_t len, char *out, size_t cap)
{
    if (!k->have || !field_ok(cl->node) || !field_ok(cl->user_id) || !field_ok(cl->user_name))
        return -EINVAL;
    char hex[65], nonce[2 * NONCE_BYTES + 1];
    nonce_new(nonce);
    mac(k, cl, nonce, method, path, body, len, hex);
    int n = snprintf(out, cap, "t=%lld,r=%s,n=%s,u=%s,m=%s,s=%u,v1=%s", (long long)cl->time, nonce,
                     cl->node, cl->user_id, cl->user_name, cl->scopes, hex);
    return n > 0 && (size_t)n < cap ? 0 : -ENOSPC;
}
/* The value of "<key>=" in a "k=v,k=v" header into out; false when absent or too long. */
static bool field(const char *h, size_t hlen, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    for (size_t i = 0; i < hlen;) {
        size_t end = i;
        while (end < hlen && h[end] != ',')
            end++;
        if (end - i > klen && memcmp(h + i, key, klen) == 0 && h[i + klen] == '=') {
            size_t vlen = end - i - klen - 1;
            if (vlen >= cap || memchr(h + i + klen + 1, '\0', vlen))
                return false;
            memcpy(out, h + i + klen + 1, vlen);
            out[vlen] = '\0';
            return true;
        }
        i = end + 1;
    }
    return false;
}

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

int cluster_verify(const struct cluster_key *k, struct cluster_nonces *seen, const char *header,
                   size_t hlen, const char *method, const char *path, const void *body, size_t len,
                   int64_t now_s, struct cluster_claims *cl, struct err *err)
{
    if (!k->have || !seen)
        return err_set(err, -EACCES, "this node takes no forwarded calls (no CLUSTER_SECRET)");
    char t[24], s[16], sig[72], nonce[2 * NONCE_BYTES + 1];
    unsigned char id[NONCE_BYTES];
    memset(cl, 0, sizeof(*cl));
    if (!field(header, hlen, "t", t, sizeof(t)) ||
        !field(header, hlen, "r", nonce, sizeof(nonce)) ||
        !field(header, hlen, "n", cl->node, 64) || !field(header, hlen, "u", cl->user_id, 64) ||
        !field(header, hlen, "m", cl->user_name, 128) || !field(header, hlen, "s", s, sizeof(s)) ||
        !field(header, hlen, "v1", sig, sizeof(sig)) || strlen(sig) != 64 || !cl->user_id[0] ||
        !all_digits(t) || !all_digits(s) || strlen(t) > 18 || strlen(s) > 9 ||
        !nonce_parse(nonce, id))
        return err_set(err, -EACCES, "malformed %s header", CLUSTER_SIGNATURE_HEADER);
    cl->time = strtoll(t, NULL, 10);
    cl->scopes = (unsigned)strtoul(s, NULL, 10);
    char want[65];
    mac(k, cl, nonce, method, path, body, len, want);
    if (CRYPTO_memcmp(want, sig, 64) != 0)
        return err_set(
            err, -EACCES,
            "bad signature (is CLUSTER_SECRET the same on every node, and the version?)");
    if (cl->time < now_s - SIGNATURE_SKEW_S || cl->time > now_s + SIGNATURE_SKEW_S)
        return err_set(err, -ETIMEDOUT, "signed %lld s from now: more than %d s apart",
                       (long long)(cl->time - now_s), SIGNATURE_SKEW_S);
    return spend(seen, id, cl->time, now_s, err);
}

/* The head's proof: an HMAC over what the admission gate knows before the body arrives (the
 * body is checked by cluster_verify once it has). The path is at most what fits the text, which
 * is far more than any path a node signs. */
#define HEAD_PATH_MAX 256
static void head_mac(const struct cluster_key *k, int64_t t, const char *nonce, const char *node,
                     const char *method, size_t mlen, const char *path, size_t plen, size_t len,
                     char hex[65])
{
    char text[512];
    int n = snprintf(text, sizeof(text), "sandbox-mcp node v2\n%lld\n%s\n%s\n%.*s\n%.*s\n%zu",
                     (long long)t, nonce, node, (int)mlen, method, (int)plen, path, len);
    unsigned char md[32];
    unsigned int mdlen = sizeof(md);
    HMAC(EVP_sha256(), k->key, sizeof(k->key), (const unsigned char *)text,
         n > 0 && (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1, md, &mdlen);
    hex_encode(md, sizeof(md), hex);
}

int cluster_head_sign(const struct cluster_key *k, const char *node, const char *method,
                      const char *path, size_t len, int64_t now_s, char *out, size_t cap)
{
    size_t mlen = strlen(method), plen = strlen(path);
    if (!k->have || !field_ok(node) || strlen(node) >= 64 || mlen > 16 || plen > HEAD_PATH_MAX)
        return -EINVAL;
    char hex[65], nonce[2 * NONCE_BYTES + 1];
    nonce_new(nonce);
    head_mac(k, now_s, nonce, node, method, mlen, path, plen, len, hex);
    int n = snprintf(out, cap, "t=%lld,r=%s,n=%s,v1=%s", (long long)now_s, nonce, node, hex);
    return n > 0 && (size_t)n < cap ? 0 : -ENOSPC;
}

int cluster_head_check(const struct cluster_key *k, struct cluster_nonces *seen, const char *header,
                       size_t hlen, const char *method, size_t mlen, const char *path, size_t plen,
                       size_t len, int64_t now_s)
{
    char t[24], node[64], sig[72], want[65], nonce[2 * NONCE_BYTES + 1];
    unsigned char id[NONCE_BYTES];
    if (!k->have || !seen)
        return -EACCES;
    if (!field(header, hlen, "t", t, sizeof(t)) || !all_digits(t) || strlen(t) > 18 ||
        !field(header, hlen, "r", nonce, sizeof(nonce)) || !nonce_parse(nonce, id) ||
        !field(header, hlen, "n", node, sizeof(node)) ||
        !field(header, hlen, "v1", sig, sizeof(sig)) || strlen(sig) != 64 || mlen > 16 ||
        plen > HEAD_PATH_MAX)
        return -EACCES;
    int64_t at = strtoll(t, NULL, 10);
    head_mac(k, at, nonce, node, method, mlen, path, plen, len, want);
    if (CRYPTO_memcmp(want, sig, 64) != 0)
        return -EACCES;
    if (at < now_s - SIGNATURE_SKEW_S || at > now_s + SIGNATURE_SKEW_S)
        return -ETIMEDOUT;
    struct err err = {0};
    return spend(seen, id, at, now_s, &err);
}

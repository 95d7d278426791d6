/* Receive-pack request bodies, the packfile side: whether the pack after a push's commands shows
 * one commit to descend from another (rp_descends). The pack is inflated once, front to back,
 * keeping only commits and the deltas that may turn out to be commits; what a walk over parent
 * links needs is there, and trees and blobs pass through a scratch buffer. Its rule: the pack is
 * hostile, so the work is linear in it (plus sorting) and what is inflated is capped. */
#include "proxy/receive_pack.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZLIB_CONST
#include <openssl/evp.h>
#include <zlib.h>

#include "base/cleanup.h"
#include "base/util.h"

#define HEXSZ 40
#define RAWSZ 20

/* Either case, as git reads ids inside objects. */
static bool hex_to_raw(const unsigned char *hex, unsigned char raw[RAWSZ])
{
    for (int i = 0; i < RAWSZ; i++) {
        int hi = hex_value((unsigned char)hex[2 * i]),
            lo = hex_value((unsigned char)hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        raw[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}

static void raw_to_hex(const unsigned char raw[RAWSZ], char hex[HEXSZ + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < RAWSZ; i++) {
        hex[2 * i] = digits[raw[i] >> 4];
        hex[2 * i + 1] = digits[raw[i] & 15];
    }
    hex[HEXSZ] = '\0';
}

/* --- the packfile --- */

enum {
    OBJ_COMMIT = 1,
    OBJ_TREE = 2,
    OBJ_BLOB = 3,
    OBJ_TAG = 4,
    OBJ_OFS_DELTA = 6,
    OBJ_REF_DELTA = 7,
};

/* The smallest entry: a one-byte header and an empty zlib stream (2 + 2 + 4 bytes). */
#define ENTRY_MIN 9

struct entry { /* every object of the pack, in pack order */
    uint64_t off;
    uint32_t obj; /* 1 + its index in objs if kept, else 0 */
    uint8_t type; /* a delta's is its base's; 0 while unknown */
};

struct obj {             /* a commit, or a delta that may turn out to be one */
    unsigned char *data; /* the commit, or the delta until it is resolved; NULL once given up */
    size_t len;
    const unsigned char *base_id; /* REF_DELTA: its base's id, inside the pack */
    uint32_t entry, base;         /* its entry; OFS_DELTA: its base's entry */
    unsigned char id[RAWSZ];      /* once a commit */
    uint8_t depth;                /* deltas between it and an object stored whole */
    bool commit, seen;
};

/* A sort key: an id, or for OFS_DELTA a base entry number (big-endian, so that memcmp orders). */
struct key {
    unsigned char k[RAWSZ];
    uint32_t obj;
};

struct pack {
    const unsigned char *buf;
    size_t end; /* where the trailer starts */
    uint64_t budget, inflate_max;
    struct entry *entries;
    struct obj *objs;
    uint32_t nobjs, objcap;
    struct key *commits; /* every commit, by id */
    uint32_t ncommits;
    z_stream zs;
    bool zs_ready;
    EVP_MD_CTX *md;
};

static int key_cmp(const void *a, const void *b)
{
    return memcmp(a, b, RAWSZ);
}

/* The first of keys[0..n) not below k. */
static size_t key_lower(const struct key *keys, size_t n, const unsigned char *k)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (memcmp(keys[mid].k, k, RAWSZ) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void entry_key(uint32_t entry, unsigned char k[RAWSZ])
{
    memset(k, 0, RAWSZ);
    k[0] = (unsigned char)(entry >> 24);
    k[1] = (unsigned char)(entry >> 16);
    k[2] = (unsigned char)(entry >> 8);
    k[3] = (unsigned char)entry;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int too_big(struct pack *p, struct err *err)
{
    return err_set(err, -E2BIG, "pack inflates to more than %llu bytes",
                   (unsigned long long)p->inflate_max);
}

static int commit_id(struct pack *p, struct obj *o, struct err *err)
{
    char hdr[32];
    int n = snprintf(hdr, sizeof(hdr), "commit %zu", o->len);
    unsigned int mdlen = 0;
    if (!EVP_DigestInit_ex(p->md, EVP_sha1(), NULL) ||
        !EVP_DigestUpdate(p->md, hdr, (size_t)n + 1) || !EVP_DigestUpdate(p->md, o->data, o->len) ||
        !EVP_DigestFinal_ex(p->md, o->id, &mdlen) || mdlen != RAWSZ)
        return err_set(err, -ENOMEM, "cannot compute a sha-1");
    o->commit = true;
    return 0;
}

/* An entry's header at *pos: its type and inflated size, 7 bits a byte after the first 4. */
static int read_header(struct pack *p, size_t *pos, unsigned *type, uint64_t *size, struct err *err)
{
    size_t at = *pos;
    unsigned c = p->buf[at++];
    *type = (c >> 4) & 7;
    *size = c & 15;
    for (unsigned shift = 4; c & 0x80; shift += 7) {
        if (at == p->end || shift > 57)
            return err_set(err, -EINVAL, "object at offset %zu has a bad header", *pos);
        c = p->buf[at++];
        *size |= (uint64_t)(c & 0x7f) << shift;
    }
    *pos = at;
    return 0;
}

/* An OFS_DELTA's distance back to its base, each continuation byte adding one more 2^7 step. */
static int read_ofs(struct pack *p, size_t *pos, uint64_t *dist, struct err *err)
{
    size_t at = *pos;
    if (at == p->end)
        return err_set(err, -EINVAL, "delta at offset %zu is truncated", at);
    unsigned c = p->buf[at++];
    uint64_t d = c & 0x7f;
    while (c & 0x80) {
        if (at == p->end || d >= (UINT64_C(1) << 56))
            return err_set(err, -EINVAL, "delta at offset %zu has a bad base offset", *pos);
        c = p->buf[at++];
        d = ((d + 1) << 7) | (c & 0x7f);
    }
    *pos = at;
    *dist = d;
    return 0;
}

/* Inflate the zlib stream at *pos, which must come to exactly `size` bytes, into *out (grown as
 * it fills, so that a header cannot make us allocate what the stream does not hold), or nowhere
 * when out is NULL; *pos moves past the stream. */
static int inflate_entry(struct pack *p, size_t at, size_t *pos, uint64_t size, unsigned char **out,
                         struct err *err)
{
    unsigned char scratch[16384];
    size_t cap = 0, left = p->end - *pos;
    uint64_t got = 0;
    z_stream *zs = &p->zs;
    if (inflateReset(zs) != Z_OK)
        return err_set(err, -ENOMEM, "cannot reset zlib");
    zs->next_in = p->buf + *pos;
    zs->avail_in = 0;
    for (;;) {
        if (zs->avail_in == 0 && left) {
            zs->avail_in = left > UINT_MAX ? UINT_MAX : (uInt)left;
            left -= zs->avail_in;
        }
        zs->next_out = scratch;
        zs->avail_out = sizeof(scratch);
        int zr = inflate(zs, Z_NO_FLUSH);
        size_t made = sizeof(scratch) - zs->avail_out;
        if (made > size - got)
            return err_set(err, -EINVAL, "object at offset %zu inflates past its size %llu", at,
                           (unsigned long long)size);
        if (out && made) {
            if (got + made > cap) {
                cap = cap ? cap : 4096;
                while (cap < got + made)
                    cap *= 2;
                if (cap > size)
                    cap = size;
                *out = xrealloc(*out, cap);
            }
            memcpy(*out + got, scratch, made);
        }
        got += made;
        if (zr == Z_STREAM_END)
            break;
        if (zr == Z_BUF_ERROR && zs->avail_in == 0 && !left)
            return err_set(err, -EINVAL, "object at offset %zu is truncated", at);
        if (zr != Z_OK)
            return err_set(err, -EINVAL, "object at offset %zu has a bad zlib stream", at);
    }
    if (got != size)
        return err_set(err, -EINVAL, "object at offset %zu inflates to %llu bytes, not %llu", at,
                       (unsigned long long)got, (unsigned long long)size);
    *pos = p->end - left - zs->avail_in;
    return 0;
}

static uint32_t add_obj(struct pack *p, uint32_t entry)
{
    if (p->nobjs == p->objcap) {
        p->objcap = p->objcap ? p->objcap * 2 : 64;
        p->objs = xrealloc(p->objs, (size_t)p->objcap * sizeof(*p->objs));
    }
    p->objs[p->nobjs] = (struct obj){.entry = entry};
    p->entries[entry].obj = p->nobjs + 1;
    return p->nobjs++;
}

/* A delta's sizes: 7 bits a byte, least significant first. */
static bool delta_size(const unsigned char **s, const unsigned char *end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0;; shift += 7) {
        if (*s == end || shift > 56)
            return false;
        unsigned c = *(*s)++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return true;
    }
}

/* Apply delta d to its base b, a commit, making d the commit it encodes. Every copy is checked
 * against the base and the result, and the result counts against the budget: a few bytes of
 * copy instructions can describe megabytes. */
static int apply_delta(struct pack *p, uint32_t di, uint32_t bi, struct err *err)
{
    struct obj *d = &p->objs[di];
    const struct obj *b = &p->objs[bi];
    uint64_t at = p->entries[d->entry].off;
    if (b->depth >= RP_DELTA_DEPTH_MAX) {
        free(d->data); /* too deep to follow: left out, as if its base were missing */
        d->data = NULL;
        return 0;
    }
    const unsigned char *s = d->data, *end = d->data + d->len;
    uint64_t src, dst;
    if (!delta_size(&s, end, &src) || !delta_size(&s, end, &dst))
        return err_set(err, -EINVAL, "delta at offset %llu has bad sizes", (unsigned long long)at);
    if (src != b->len)
        return err_set(err, -EINVAL, "delta at offset %llu is for a %llu-byte base, not %zu",
                       (unsigned long long)at, (unsigned long long)src, b->len);
    if (dst > p->budget)
        return too_big(p, err);
    p->budget -= dst;
    _cleanup_free_ unsigned char *res = xmalloc(dst ? dst : 1);
    uint64_t o = 0;
    while (s < end) {
        unsigned c = *s++;
        if (c & 0x80) {
            uint64_t off = 0, n = 0;
            for (unsigned k = 0; k < 4; k++)
                if (c & (1u << k)) {
                    if (s == end)
                        goto bad;
                    off |= (uint64_t)*s++ << (8 * k);
                }
            for (unsigned k = 0; k < 3; k++)
                if (c & (0x10u << k)) {
                    if (s == end)
                        goto bad;
                    n |= (uint64_t)*s++ << (8 * k);
                }
            if (n == 0)
                n = 0x10000;
            if (off > b->len || n > b->len - off || n > dst - o)
                goto bad;
            memcpy(res + o, b->data + off, n);
            o += n;
        } else if (c) {
            if (c > (size_t)(end - s) || c > dst - o)
                goto bad;
            memcpy(res + o, s, c);
            s += c;
            o += c;
        } else {
            goto bad;
        }
    }
    if (o != dst)
        goto bad;
    free(d->data);
    d->data = TAKE_PTR(res);
    d->len = dst;
    d->depth = (uint8_t)(b->depth + 1);
    p->entries[d->entry].type = OBJ_COMMIT;
    return commit_id(p, d, err);
bad:
    return err_set(err, -EINVAL, "delta at offset %llu is corrupt", (unsigned long long)at);
}

/* The entry among entries[0..i) that starts at off, or -1. */
static int64_t entry_at(const struct pack *p, uint32_t i, uint64_t off)
{
    uint32_t lo = 0, hi = i;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->entries[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < i && p->entries[lo].off == off ? (int64_t)lo : -1;
}

/* Entry i at *pos. Commits are kept; so are deltas that may be commits: those against a commit
 * (resolved at once, since OFS_DELTA bases come first), against a base whose type is not known
 * yet, or named by id (REF_DELTA). Everything else is inflated into nothing. */
static int read_entry(struct pack *p, uint32_t i, size_t *pos, struct err *err)
{
    struct entry *e = &p->entries[i];
    size_t at = *pos;
    unsigned type;
    uint64_t size;
    int64_t base = -1;
    const unsigned char *base_id = NULL;
    if (at == p->end)
        return err_set(err, -EINVAL, "pack ends before object %u", i + 1);
    e->off = at;
    int r = read_header(p, pos, &type, &size, err);
    if (r < 0)
        return r;
    bool keep = false;
    switch (type) {
    case OBJ_COMMIT:
        keep = true;
        e->type = OBJ_COMMIT;
        break;
    case OBJ_TREE:
    case OBJ_BLOB:
    case OBJ_TAG: e->type = (uint8_t)type; break;
    case OBJ_OFS_DELTA: {
        uint64_t dist = 0;
        if ((r = read_ofs(p, pos, &dist, err)) < 0)
            return r;
        if (dist == 0 || dist > at || (base = entry_at(p, i, at - dist)) < 0)
            return err_set(err, -EINVAL, "delta at offset %zu has no base entry", at);
        e->type = p->entries[base].type;
        keep = e->type == 0 || e->type == OBJ_COMMIT;
        break;
    }
    case OBJ_REF_DELTA:
        if (p->end - *pos < RAWSZ)
            return err_set(err, -EINVAL, "delta at offset %zu is truncated", at);
        base_id = p->buf + *pos;
        *pos += RAWSZ;
        keep = true;
        break;
    default: return err_set(err, -EINVAL, "object at offset %zu has type %u", at, type);
    }
    if (size > p->budget)
        return too_big(p, err);
    p->budget -= size;
    _cleanup_free_ unsigned char *data = NULL;
    if ((r = inflate_entry(p, at, pos, size, keep ? &data : NULL, err)) < 0)
        return r;
    if (!keep)
        return 0;
    uint32_t oi = add_obj(p, i);
    struct obj *o = &p->objs[oi];
    o->data = TAKE_PTR(data);
    o->len = size;
    if (!o->data)
        o->data = xmalloc(1); /* empty, but present */
    if (type == OBJ_COMMIT)
        return commit_id(p, o, err);
    o->base_id = base_id;
    if (base >= 0) {
        o->base = (uint32_t)base;
        if (p->entries[base].type == OBJ_COMMIT)
            return apply_delta(p, oi, p->entries[base].obj - 1, err);
    }
    return 0;
}

/* Deltas waiting for a base, sorted by what names it. */
struct waiting {
    struct key *keys;
    bool *done; /* by the first key of each run: that run was resolved */
    size_t n;
};

static void waiting_init(struct waiting *w, size_t cap)
{
    w->keys = xmalloc((cap + 1) * sizeof(*w->keys));
    w->done = xcalloc(cap + 1, sizeof(*w->done));
    w->n = 0;
}

static void waiting_release(struct waiting *w)
{
    free(w->keys);
    free(w->done);
}

/* Resolve the deltas of w keyed k against commit c, queueing those that become commits. A run
 * is resolved once: a pack may carry the same commit many times, and must not make us walk the
 * same deltas again for each copy. */
static int resolve_run(struct pack *p, struct waiting *w, const unsigned char *k, uint32_t c,
                       uint32_t *queue, size_t *qn, struct err *err)
{
    size_t j = key_lower(w->keys, w->n, k);
    if (j == w->n || memcmp(w->keys[j].k, k, RAWSZ) != 0 || w->done[j])
        return 0;
    w->done[j] = true;
    for (; j < w->n && memcmp(w->keys[j].k, k, RAWSZ) == 0; j++) {
        uint32_t d = w->keys[j].obj;
        if (p->objs[d].commit || !p->objs[d].data)
            continue;
        int r = apply_delta(p, d, c, err);
        if (r < 0)
            return r;
        if (p->objs[d].commit)
            queue[(*qn)++] = d;
    }
    return 0;
}

/* Resolve the deltas left waiting: those against a commit named by id, and whatever builds on
 * them. Each commit, as it becomes known, looks up its dependents in two sorted lists (by base
 * id, by base entry); every delta is resolved at most once, so there is no recursion and no
 * repeated scan. */
static int resolve_waiting(struct pack *p, struct err *err)
{
    struct waiting by_id, by_entry;
    waiting_init(&by_id, p->nobjs);
    waiting_init(&by_entry, p->nobjs);
    _cleanup_free_ uint32_t *queue = xmalloc(((size_t)p->nobjs + 1) * sizeof(*queue));
    size_t qn = 0;
    for (uint32_t i = 0; i < p->nobjs; i++) {
        const struct obj *o = &p->objs[i];
        if (o->commit) {
            queue[qn++] = i;
        } else if (o->data && o->base_id) {
            memcpy(by_id.keys[by_id.n].k, o->base_id, RAWSZ);
            by_id.keys[by_id.n++].obj = i;
        } else if (o->data) {
            entry_key(o->base, by_entry.keys[by_entry.n].k);
            by_entry.keys[by_entry.n++].obj = i;
        }
    }
    qsort(by_id.keys, by_id.n, sizeof(*by_id.keys), key_cmp);
    qsort(by_entry.keys, by_entry.n, sizeof(*by_entry.keys), key_cmp);
    int r = 0;
    for (size_t qi = 0; qi < qn && r == 0 && by_id.n + by_entry.n; qi++) {
        uint32_t c = queue[qi];
        unsigned char ek[RAWSZ];
        entry_key(p->objs[c].entry, ek);
        r = resolve_run(p, &by_id, p->objs[c].id, c, queue, &qn, err);
        if (r == 0)
            r = resolve_run(p, &by_entry, ek, c, queue, &qn, err);
    }
    waiting_release(&by_id);
    waiting_release(&by_entry);
    return r;
}

static int pack_read(struct pack *p, const unsigned char *buf, size_t len, struct err *err)
{
    if (len < 12 + RAWSZ)
        return err_set(err, -EINVAL, "pack is %zu bytes, too short", len);
    if (memcmp(buf, "PACK", 4) != 0)
        return err_set(err, -EINVAL, "pack does not start with PACK");
    uint32_t version = be32(buf + 4), n = be32(buf + 8);
    if (version != 2 && version != 3)
        return err_set(err, -EINVAL, "pack version %u is not 2 or 3", version);
    unsigned char sum[EVP_MAX_MD_SIZE];
    unsigned int sumlen = 0;
    if (!EVP_Digest(buf, len - RAWSZ, sum, &sumlen, EVP_sha1(), NULL) || sumlen != RAWSZ)
        return err_set(err, -ENOMEM, "cannot compute a sha-1");
    if (memcmp(sum, buf + len - RAWSZ, RAWSZ) != 0)
        return err_set(err, -EINVAL, "pack checksum does not match its contents");
    p->buf = buf;
    p->end = len - RAWSZ;
    if (n > (p->end - 12) / ENTRY_MIN)
        return err_set(err, -EINVAL, "pack claims %u objects in %zu bytes", n, len);
    p->entries = xcalloc(n ? n : 1, sizeof(*p->entries));
    size_t pos = 12;
    for (uint32_t i = 0; i < n; i++) {
        int r = read_entry(p, i, &pos, err);
        if (r < 0)
            return r;
    }
    if (pos != p->end)
        return err_set(err, -EINVAL, "pack has %zu bytes after its last object", p->end - pos);
    return resolve_waiting(p, err);
}

/* The next "parent" line of a commit, read as git's parse_commit_buffer reads them (the same
 * bounds: a parent line must be followed by something): 1 with its id, 0 past the last. */
static int next_parent(const struct obj *c, size_t *pos, unsigned char id[RAWSZ], struct err *err)
{
    char hex[HEXSZ + 1];
    if (*pos == 0) {
        if (c->len <= 46 || memcmp(c->data, "tree ", 5) != 0 || c->data[45] != '\n' ||
            !hex_to_raw(c->data + 5, id))
            goto bad;
        *pos = 46;
    }
    size_t left = c->len - *pos;
    const unsigned char *s = c->data + *pos;
    if (left < 48 || memcmp(s, "parent ", 7) != 0)
        return 0;
    if (left == 48 || s[47] != '\n' || !hex_to_raw(s + 7, id))
        goto bad;
    *pos += 48;
    return 1;
bad:
    raw_to_hex(c->id, hex);
    return err_set(err, -EINVAL, "commit %s is malformed", hex);
}

static struct obj *find_commit(struct pack *p, const unsigned char id[RAWSZ])
{
    size_t i = key_lower(p->commits, p->ncommits, id);
    if (i == p->ncommits || memcmp(p->commits[i].k, id, RAWSZ) != 0)
        return NULL;
    return &p->objs[p->commits[i].obj];
}

static void index_commits(struct pack *p)
{
    p->commits = xmalloc(((size_t)p->nobjs + 1) * sizeof(*p->commits));
    for (uint32_t i = 0; i < p->nobjs; i++)
        if (p->objs[i].commit) {
            memcpy(p->commits[p->ncommits].k, p->objs[i].id, RAWSZ);
            p->commits[p->ncommits++].obj = i;
        }
    qsort(p->commits, p->ncommits, sizeof(*p->commits), key_cmp);
}

/* Breadth-first from tip through the commits of the pack, each once. */
static int walk(struct pack *p, const unsigned char tip[RAWSZ], const unsigned char stop[RAWSZ],
                struct err *err)
{
    index_commits(p);
    struct obj *start = find_commit(p, tip);
    if (!start)
        return 0;
    _cleanup_free_ struct obj **queue = xmalloc(((size_t)p->ncommits + 1) * sizeof(*queue));
    size_t qn = 0;
    start->seen = true;
    queue[qn++] = start;
    for (size_t qi = 0; qi < qn; qi++) {
        unsigned char parent[RAWSZ];
        size_t pos = 0;
        int r;
        while ((r = next_parent(queue[qi], &pos, parent, err)) == 1) {
            if (memcmp(parent, stop, RAWSZ) == 0)
                return 1;
            struct obj *next = find_commit(p, parent);
            if (next && !next->seen) {
                next->seen = true;
                queue[qn++] = next;
            }
        }
        if (r < 0)
            return r;
    }
    return 0;
}

static void pack_release(struct pack *p)
{
    for (uint32_t i = 0; i < p->nobjs; i++)
        free(p->objs[i].data);
    free(p->objs);
    free(p->entries);
    free(p->commits);
    if (p->zs_ready)
        inflateEnd(&p->zs);
    EVP_MD_CTX_free(p->md);
}

static bool id_arg(const char *hex, unsigned char raw[RAWSZ])
{
    return hex && strnlen(hex, HEXSZ + 1) == HEXSZ &&
           rp_is_lower_hex((const unsigned char *)hex, HEXSZ) &&
           hex_to_raw((const unsigned char *)hex, raw);
}

int rp_descends(const unsigned char *pack, size_t len, const char *tip, const char *ancestor,
                uint64_t inflate_max, struct err *err)
{
    unsigned char want[RAWSZ], stop[RAWSZ];
    if (!id_arg(tip, want) || !id_arg(ancestor, stop))
        return err_set(err, -EINVAL, "commit ids must be 40 lowercase hex digits");
    if (memcmp(want, stop, RAWSZ) == 0)
        return 1;
    if (!pack || !len)
        return 0;
    struct pack p = {.budget = inflate_max, .inflate_max = inflate_max};
    p.md = EVP_MD_CTX_new();
    int r = p.md ? 0 : err_set(err, -ENOMEM, "cannot allocate a digest");
    if (r == 0 && inflateInit(&p.zs) != Z_OK)
        r = err_set(err, -ENOMEM, "cannot initialize zlib");
    p.zs_ready = r == 0;
    if (r == 0)
        r = pack_read(&p, pack, len, err);
    if (r == 0)
        r = walk(&p, want, stop, err);
    pack_release(&p);
    return r;
}

/* The file worker's request (fsop_worker_request in fsops.h): the server encodes it, the worker
 * decodes it after it has started in the sandbox's cgroups. Fields in order, numbers as the host
 * stores them (server and worker are one build), every string counted and NUL-terminated. The
 * data of a write comes last, so that the server writes it into the request's memfd straight
 * from where it is, after the rest (fsop_worker_encode_head), instead of copying it first.
 * Pure: bytes in, bytes out. The decoder takes any bytes without reading outside them and
 * accepts only what the encoder makes (fuzz_fsreq). */
#include "sandbox/fsops.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"

#define WORKER_MAGIC 0x31534653u /* "SFS1" */
#define NO_STRING 0xffffffffu

struct wbuf {
    unsigned char *p;
    size_t len, cap;
};

static void wput(struct wbuf *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        unsigned char *np = realloc(b->p, b->cap);
        if (!np)
            abort();
        b->p = np;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void wput_u32(struct wbuf *b, uint32_t v)
{
    wput(b, &v, sizeof(v));
}

static void wput_u64(struct wbuf *b, uint64_t v)
{
    wput(b, &v, sizeof(v));
}

/* NULL is NO_STRING; anything else its length, its bytes and a NUL */
static void wput_str(struct wbuf *b, const char *s, size_t n)
{
    if (!s) {
        wput_u32(b, NO_STRING);
        return;
    }
    wput_u32(b, (uint32_t)n);
    wput(b, s, n);
    wput(b, "", 1);
}

void *fsop_worker_encode_head(const struct fsop_worker_request *w, size_t *len)
{
    const struct fsop_request *op = &w->op;
    struct wbuf b = {0};
    wput_u32(&b, WORKER_MAGIC);
    wput_u32(&b, (uint32_t)w->ncg);
    for (int i = 0; i < w->ncg; i++)
        wput_str(&b, w->cg_procs[i], strlen(w->cg_procs[i]));
    wput_u32(&b, (uint32_t)w->nfilters);
    for (int i = 0; i < w->nfilters; i++) {
        wput_u32(&b, w->filter_len[i]);
        wput(&b, w->filter[i], (size_t)w->filter_len[i] * sizeof(struct sock_filter));
    }
    wput_u32(&b, (uint32_t)op->kind);
    wput_str(&b, op->path, op->path_len);
    wput_str(&b, op->cwd, op->cwd ? strlen(op->cwd) : 0);
    wput_u32(&b, op->append ? 1 : 0);
    wput_u32(&b, (uint32_t)op->mode);
    wput_u64(&b, op->keep);
    wput_u64(&b, op->offset);
    wput_u64(&b, op->max_bytes);
    wput_u32(&b, op->recursive ? 1 : 0);
    wput_u64(&b, op->max_entries);
    uint32_t nprot = 0;
    while (nprot < FSOP_PROTECTED_MAX && op->protected_paths[nprot])
        nprot++;
    wput_u32(&b, nprot);
    for (uint32_t i = 0; i < nprot; i++)
        wput_str(&b, op->protected_paths[i], strlen(op->protected_paths[i]));
    /* the data's count; its bytes and NUL follow (none when it is NULL) */
    wput_u32(&b, op->data ? (uint32_t)op->data_len : NO_STRING);
    *len = b.len;
    return b.p;
}

void *fsop_worker_encode(const struct fsop_worker_request *w, size_t *len)
{
    const struct fsop_request *op = &w->op;
    struct wbuf b = {0};
    b.p = fsop_worker_encode_head(w, &b.len);
    b.cap = b.len;
    if (op->data) {
        wput(&b, op->data, op->data_len);
        wput(&b, "", 1);
    }
    *len = b.len;
    return b.p;
}

struct rbuf {
    const unsigned char *p;
    size_t len, off;
    bool bad;
};

static const void *rget(struct rbuf *b, size_t n)
{
    if (b->bad || n > b->len - b->off) {
        b->bad = true;
        return NULL;
    }
    const void *at = b->p + b->off;
    b->off += n;
    return at;
}

static uint32_t rget_u32(struct rbuf *b)
{
    uint32_t v = 0;
    const void *at = rget(b, sizeof(v));
    if (at)
        memcpy(&v, at, sizeof(v));
    return v;
}

static bool rget_bool(struct rbuf *b)
{
    uint32_t v = rget_u32(b);
    if (v > 1)
        b->bad = true;
    return v == 1;
}

static uint64_t rget_u64(struct rbuf *b)
{
    uint64_t v = 0;
    const void *at = rget(b, sizeof(v));
    if (at)
        memcpy(&v, at, sizeof(v));
    return v;
}

/* A counted string; without n (a C string) it may not hold a NUL of its own. */
static const char *rget_str(struct rbuf *b, size_t *n)
{
    uint32_t len = rget_u32(b);
    if (n)
        *n = 0;
    if (b->bad || len == NO_STRING)
        return NULL;
    const char *s = rget(b, (size_t)len + 1);
    if (!s || s[len] != '\0' || (!n && memchr(s, '\0', len))) {
        b->bad = true;
        return NULL;
    }
    if (n)
        *n = len;
    return s;
}

int fsop_worker_decode(const void *buf, size_t len, struct fsop_worker_request *w)
{
    struct rbuf b = {.p = buf, .len = len};
    struct fsop_request *op = &w->op;
    memset(w, 0, sizeof(*w));
    if (rget_u32(&b) != WORKER_MAGIC)
        return -EINVAL;
    uint32_t ncg = rget_u32(&b);
    if (ncg > ARRAY_SIZE(w->cg_procs))
        return -EINVAL;
    w->ncg = (int)ncg;
    for (uint32_t i = 0; i < ncg; i++)
        if (!(w->cg_procs[i] = rget_str(&b, NULL)))
            return -EINVAL;
    uint32_t nf = rget_u32(&b);
    if (nf > ARRAY_SIZE(w->filter))
        return -EINVAL;
    w->nfilters = (int)nf;
    for (uint32_t i = 0; i < nf; i++) {
        uint32_t flen = rget_u32(&b);
        /* the kernel takes 1 to 4096 instructions */
        if (flen < 1 || flen > 4096)
            return -EINVAL;
        w->filter_len[i] = (unsigned short)flen;
        if (!(w->filter[i] = rget(&b, (size_t)flen * sizeof(struct sock_filter))))
            return -EINVAL;
    }
    uint32_t kind = rget_u32(&b);
    if (kind > FSOP_DELETE)
        return -EINVAL;
    op->kind = (enum fsop_kind)kind;
    op->path = rget_str(&b, &op->path_len);
    op->cwd = rget_str(&b, NULL);
    op->append = rget_bool(&b);
    op->mode = (int)rget_u32(&b);
    op->keep = (size_t)rget_u64(&b);
    op->offset = rget_u64(&b);
    op->max_bytes = (size_t)rget_u64(&b);
    op->recursive = rget_bool(&b);
    op->max_entries = (size_t)rget_u64(&b);
    uint32_t nprot = rget_u32(&b);
    if (nprot > FSOP_PROTECTED_MAX)
        return -EINVAL;
    for (uint32_t i = 0; i < nprot; i++)
        if (!(op->protected_paths[i] = rget_str(&b, NULL)))
            return -EINVAL;
    op->data = (const unsigned char *)rget_str(&b, &op->data_len);
    return b.bad || b.off != b.len ? -EINVAL : 0;
}

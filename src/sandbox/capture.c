/* A command's output kept within a cap (capture.h). */
#include "sandbox/capture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "base/util.h"

void capture_init(struct capture *c, size_t cap)
{
    memset(c, 0, sizeof(*c));
    c->head_cap = cap;
    c->tail_cap = cap - cap / 2;
}

/* n bytes more in the head: checked while they are fresh in the cache, and while the command
 * still runs, rather than all at its end. */
static void capture_grew(struct capture *c, size_t n)
{
    c->head_len += n;
    if (c->clean + 4 >= c->head_len - n) /* not stopped for good at a bad byte */
        c->clean += utf8_clean_prefix(c->head + c->clean, c->head_len - c->clean);
}

void capture_add(struct capture *c, const char *data, size_t len)
{
    c->total += len;
    size_t h = c->head_cap - c->head_len;
    if (h > len)
        h = len;
    if (c->head_len + h > c->head_alloc) {
        size_t n = c->head_alloc ? c->head_alloc : 4096;
        while (n < c->head_len + h)
            n *= 2;
        if (n > c->head_cap)
            n = c->head_cap;
        c->head = xrealloc(c->head, n);
        c->head_alloc = n;
    }
    if (h)
        memcpy(c->head + c->head_len, data, h);
    capture_grew(c, h);
    data += h;
    len -= h;
    if (len && !c->tail) {
        /* past the cap: the head keeps the first half, the rest of it begins the tail */
        size_t keep = c->head_cap - c->tail_cap;
        c->tail = xmalloc(c->tail_cap);
        memcpy(c->tail, c->head + keep, c->head_len - keep);
        c->tail_len = c->head_len - keep;
        c->head_len = c->head_cap = c->head_alloc = keep;
        c->clean = c->clean < keep ? c->clean : keep;
        c->head = xrealloc(c->head, keep ? keep : 1);
    }
    if (len >= c->tail_cap) {
        data += len - c->tail_cap;
        len = c->tail_cap;
    }
    /* Append to the ring in at most two copies; when it overflows, the oldest bytes go. */
    while (len > 0) {
        size_t end = (c->tail_start + c->tail_len) % c->tail_cap;
        size_t n = c->tail_cap - end < len ? c->tail_cap - end : len;
        memcpy(c->tail + end, data, n);
        data += n;
        len -= n;
        size_t over = c->tail_len + n > c->tail_cap ? c->tail_len + n - c->tail_cap : 0;
        c->tail_len += n - over;
        c->tail_start = (c->tail_start + over) % c->tail_cap;
    }
}

void capture_took(struct capture *c, size_t n)
{
    capture_grew(c, n);
    c->total += n;
}

/* Where the next bytes read may go straight into the head (*room of them, the head grown as
 * it fills), or NULL when nothing has come yet or the head is full. */
char *capture_room(struct capture *c, size_t *room)
{
    if (!c->head_alloc || c->head_len == c->head_cap || c->tail)
        return NULL;
    if (c->head_len == c->head_alloc) {
        size_t n = c->head_alloc * 2 < c->head_cap ? c->head_alloc * 2 : c->head_cap;
        c->head = xrealloc(c->head, n);
        c->head_alloc = n;
    }
    *room = c->head_alloc - c->head_len;
    return c->head + c->head_len;
}

/* Head, marker and tail as one valid UTF-8 string. Output that fit the cap is the result as it
 * is, not copied. */
char *capture_finish(struct capture *c, size_t *len, bool *truncated)
{
    size_t n = c->head_len + c->tail_len;
    *truncated = c->total > (uint64_t)n;
    if (!c->tail_len && !*truncated && c->head) {
        char *raw = xrealloc(c->head, c->head_len + 1);
        size_t hl = c->head_len;
        size_t clean = c->clean;
        c->head = NULL;
        c->head_len = c->head_alloc = c->clean = 0;
        return utf8_sanitize_take_from(raw, hl, clean, len);
    }
    char *raw = xmalloc(n + 128);
    size_t hl = c->head_len, pos = 0;
    if (*truncated)
        hl = utf8_boundary(c->head, hl);
    if (hl)
        memcpy(raw, c->head, hl);
    pos = hl;
    size_t skip = 0;
    if (*truncated) {
        /* begin the tail on a character boundary */
        while (skip < c->tail_len && skip < 4 &&
               (c->tail[(c->tail_start + skip) % c->tail_cap] & 0xC0) == 0x80)
            skip++;
        pos += (size_t)snprintf(raw + pos, 128, "\n[... %llu bytes omitted ...]\n",
                                (unsigned long long)(c->total - hl - (c->tail_len - skip)));
    }
    /* the ring from skip on, in at most two pieces */
    for (size_t i = skip; i < c->tail_len;) {
        size_t at = (c->tail_start + i) % c->tail_cap;
        size_t piece = c->tail_len - i < c->tail_cap - at ? c->tail_len - i : c->tail_cap - at;
        memcpy(raw + pos, c->tail + at, piece);
        pos += piece;
        i += piece;
    }
    return utf8_sanitize_take(raw, pos, len); /* raw has room for the NUL */
}

void capture_release(struct capture *c)
{
    free(c->head);
    free(c->tail);
}

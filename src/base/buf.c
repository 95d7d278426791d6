#include "base/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

void buf_init(struct buf *b, size_t max)
{
    memset(b, 0, sizeof(*b));
    b->max = max;
}

void buf_release(struct buf *b)
{
    free(b->data);
    size_t max = b->max;
    buf_init(b, max);
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    b->overflowed = false;
    if (b->data)
        b->data[0] = '\0';
}

static void reserve(struct buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

size_t buf_append(struct buf *b, const void *data, size_t len)
{
    if (b->max && b->len + len > b->max) {
        len = b->max - b->len;
        b->overflowed = true;
    }
    reserve(b, len);
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return len;
}

size_t buf_puts(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

size_t buf_printf(struct buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return 0;
    if ((size_t)n < sizeof(small))
        return buf_append(b, small, (size_t)n);
    char *big = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    size_t taken = buf_append(b, big, (size_t)n);
    free(big);
    return taken;
}

char *buf_steal(struct buf *b, size_t *len)
{
    reserve(b, 0);
    char *p = b->data;
    if (len)
        *len = b->len;
    size_t max = b->max;
    buf_init(b, max);
    return p;
}

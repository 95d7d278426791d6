#pragma once
/* A growable byte buffer with an optional hard cap. Always NUL-terminated for convenience. */

#include <stdbool.h>
#include <stddef.h>

struct buf {
    char *data;
    size_t len;
    size_t cap;
    size_t max;      /* 0 = unbounded (only for sizes the program itself controls) */
    bool overflowed; /* set once an append was cut at max */
};

void buf_init(struct buf *b, size_t max);
void buf_release(struct buf *b);
void buf_reset(struct buf *b);
/* Append bytes; beyond max the tail is dropped and overflowed is set. Returns bytes taken. */
size_t buf_append(struct buf *b, const void *data, size_t len);
size_t buf_puts(struct buf *b, const char *s);
size_t buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Take the data out (caller frees) and reset the buffer. */
char *buf_steal(struct buf *b, size_t *len);

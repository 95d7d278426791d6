#pragma once
/* Allocation that aborts on exhaustion (every client-controlled size is capped before it gets
 * here), and small string and time helpers. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* Allocate a formatted string. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Write all of buf to fd, going on after short writes and EINTR. Returns 0, or a negative
 * errno (-EIO when the descriptor takes nothing). */
int write_full(int fd, const void *buf, size_t len);
/* Read exactly len bytes of fd from offset off, going on after short reads and EINTR. Returns 0,
 * or a negative errno (-EIO at the end of the file). */
int pread_full(int fd, void *buf, size_t len, off_t off);

/* Milliseconds since the epoch / since an arbitrary monotonic origin. */
int64_t time_now_ms(void);
int64_t time_mono_ms(void);
/* The same clock in microseconds. */
int64_t time_mono_us(void);
/* Format an epoch-milliseconds time as RFC 3339 UTC ("2026-01-02T03:04:05.678Z") into out[32]. */
void time_format_rfc3339(int64_t ms, char out[32]);
/* A byte count as people write it into out[32], and exactly: "8 MiB", "1.5 GiB", "512 KiB"
 * (binary units, at most one decimal, none for whole units), else "1000 bytes". */
void format_bytes(uint64_t n, char out[32]);
/* A duration in milliseconds the same way: "60 s", "1.5 min", "4 h", else "61234 ms". */
void format_span_ms(uint64_t ms, char out[32]);

/* Compare two byte strings in constant time for equal lengths; false if lengths differ. */
bool str_equal_ct(const char *a, size_t alen, const char *b, size_t blen);
/* Case-insensitive equality of a counted string with a C string. */
bool str_ieq(const char *a, size_t alen, const char *b);
/* The value of a hexadecimal digit (either case), or -1. */
int hex_value(unsigned char c);

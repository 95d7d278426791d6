#include "base/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static void oom(size_t n)
{
    fprintf(stderr, "out of memory allocating %zu bytes\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom(n * size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    char *p = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

int write_full(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int pread_full(int fd, void *buf, size_t len, off_t off)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO;
        p += n;
        off += n;
        len -= (size_t)n;
    }
    return 0;
}

int64_t time_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t time_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t time_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void time_format_rfc3339(int64_t ms, char out[32])
{
    /* Round towards minus infinity so times before 1970 (file mtimes can be) stay well-formed. */
    int64_t frac = ms % 1000;
    if (frac < 0)
        frac += 1000;
    time_t secs = (time_t)((ms - frac) / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    snprintf(out, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac);
}

/* value/unit with one decimal, dropped when it is 0; false (out untouched) when one decimal
 * would not be exact */
static bool format_scaled(uint64_t value, uint64_t unit, const char *name, char out[32])
{
    if (value * 10 % unit != 0)
        return false;
    uint64_t tenths = value * 10 / unit;
    if (tenths % 10 == 0)
        snprintf(out, 32, "%llu %s", (unsigned long long)(tenths / 10), name);
    else
        snprintf(out, 32, "%llu.%llu %s", (unsigned long long)(tenths / 10),
                 (unsigned long long)(tenths % 10), name);
    return true;
}

void format_bytes(uint64_t n, char out[32])
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (n < 1024) {
        snprintf(out, 32, "%llu bytes", (unsigned long long)n);
        return;
    }
    int u = 0;
    uint64_t unit = 1024;
    while (u < 3 && n >= unit * 1024) {
        unit *= 1024;
        u++;
    }
    if (!format_scaled(n, unit, units[u], out))
        snprintf(out, 32, "%llu bytes", (unsigned long long)n);
}

void format_span_ms(uint64_t ms, char out[32])
{
    bool done = false;
    if (ms >= 2 * 3600000)
        done = format_scaled(ms, 3600000, "h", out);
    if (!done && ms >= 120000)
        done = format_scaled(ms, 60000, "min", out);
    if (!done && ms >= 1000)
        done = format_scaled(ms, 1000, "s", out);
    if (!done)
        snprintf(out, 32, "%llu ms", (unsigned long long)ms);
}

bool str_equal_ct(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen)
        return false;
    unsigned char d = 0;
    for (size_t i = 0; i < alen; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

bool str_ieq(const char *a, size_t alen, const char *b)
{
    return strlen(b) == alen && strncasecmp(a, b, alen) == 0;
}

int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#include "base/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* Look at the sequence starting at s[0] (n >= 1). Returns its length (1-4) when it is
 * well-formed; otherwise minus the length of its maximal ill-formed subpart (the longest prefix
 * that could still have started a well-formed sequence, at least 1 byte). */
static int utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    int len;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong below U+0800 */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates U+D800..U+DFFF */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong below U+10000 */
        else if (c == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else {
        return -1; /* continuation byte, C0/C1 (always overlong) or F5..FF */
    }
    if (n < 2 || s[1] < lo || s[1] > hi)
        return -1;
    for (int i = 2; i < len; i++) {
        if ((size_t)i >= n || (s[i] & 0xC0) != 0x80)
            return -i;
    }
    return len;
}

bool utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        int r = utf8_seq(p + i, n - i);
        if (r < 0)
            return false;
        i += (size_t)r;
    }
    return true;
}

/* How long a prefix of s[0..n) is valid UTF-8 without NUL: eight bytes at a time while they are
 * ASCII and none is zero (most output), a character at a time otherwise. */
static size_t clean_prefix(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (!(w & 0x8080808080808080ull) &&
                !((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        if (p[i] == 0)
            return i;
        int r = utf8_seq(p + i, n - i);
        if (r <= 0)
            return i;
        i += (size_t)r;
    }
    return n;
}

char *utf8_sanitize(const char *s, size_t n, size_t *out_len)
{
    static const char replacement[] = "\xEF\xBF\xBD";
    const unsigned char *p = (const unsigned char *)s;
    size_t clean = clean_prefix(p, n);
    if (clean == n) {
        /* valid already: one copy */
        char *out = xmalloc(n + 1);
        memcpy(out, s, n);
        out[n] = '\0';
        if (out_len)
            *out_len = n;
        return out;
    }
    /* Each input byte turns into at most 3 output bytes. */
    char *out = xmalloc(3 * n + 1);
    memcpy(out, s, clean);
    size_t i = clean, o = clean;
    while (i < n) {
        if (p[i] == 0) {
            memcpy(out + o, replacement, 3);
            o += 3;
            i++;
            continue;
        }
        int r = utf8_seq(p + i, n - i);
        if (r > 0) {
            memcpy(out + o, p + i, (size_t)r);
            o += (size_t)r;
            i += (size_t)r;
        } else {
            memcpy(out + o, replacement, 3);
            o += 3;
            i += (size_t)-r;
        }
    }
    out[o] = '\0';
    if (out_len)
        *out_len = o;
    return out;
}

size_t utf8_boundary(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    /* A character is at most 4 bytes, so only a lead byte among the last 3 can be cut off. */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        size_t start = n - back;
        if ((p[start] & 0xC0) == 0x80)
            continue; /* continuation byte: keep looking for the lead */
        int r = utf8_seq(p + start, back);
        /* Cut only when the tail is a well-formed prefix that ran out of bytes. */
        if (r == -(int)back && p[start] >= 0xC2 && p[start] <= 0xF4)
            return start;
        return n;
    }
    return n;
}

size_t utf8_clean_prefix(const char *s, size_t n)
{
    return clean_prefix((const unsigned char *)s, n);
}

char *utf8_sanitize_take(char *s, size_t n, size_t *out_len)
{
    return utf8_sanitize_take_from(s, n, 0, out_len);
}

char *utf8_sanitize_take_from(char *s, size_t n, size_t clean, size_t *out_len)
{
    if (clean > n)
        clean = n;
    if (clean + clean_prefix((const unsigned char *)s + clean, n - clean) == n) {
        s[n] = '\0';
        if (out_len)
            *out_len = n;
        return s;
    }
    char *out = utf8_sanitize(s, n, out_len);
    free(s);
    return out;
}

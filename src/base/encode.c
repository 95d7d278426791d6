/* Randomness and encodings (declared in ids.h): plain libc, so the static sandbox helper links
 * this file too. */
#include "base/ids.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

void rand_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            perror("getrandom");
            abort();
        }
        p += r;
        n -= (size_t)r;
    }
}

void hex_encode(const void *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = in;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static size_t base64_encode_with(const char *alphabet, bool pad, const void *in, size_t n,
                                 char *out)
{
    const unsigned char *p = in;
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        out[o++] = alphabet[v >> 6 & 63];
        out[o++] = alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        if (pad) {
            out[o++] = '=';
            out[o++] = '=';
        }
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        out[o++] = alphabet[v >> 6 & 63];
        if (pad)
            out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

size_t base64url_encode(const void *in, size_t n, char *out)
{
    return base64_encode_with("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
                              false, in, n, out);
}

size_t base64_encode(const void *in, size_t n, char *out)
{
    return base64_encode_with("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
                              true, in, n, out);
}

/* A digit's value, or -1; the URL-safe alphabet's '-' and '_' only when not strict. */
static int b64_value(unsigned char c, bool strict)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || (!strict && c == '-'))
        return 62;
    if (c == '/' || (!strict && c == '_'))
        return 63;
    return -1;
}

static ssize_t b64_decode(const char *in, size_t n, unsigned char *out, bool strict)
{
    /* With no whitespace skipped, whole quanta and at most two '=' after the last digit leave
     * exactly the padded forms: 2 digits and "==", or 3 and "=". */
    if (strict && n % 4)
        return -1;
    uint32_t acc = 0;
    int bits = 0;
    size_t len = 0, pad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (!strict && (c == ' ' || c == '\n' || c == '\r' || c == '\t'))
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64_value(c, strict);
        if (v < 0 || pad)
            return -1; /* a bad character, or data after padding */
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[len++] = (unsigned char)(acc >> bits);
        }
    }
    /* Leftover bits must be zero padding of a 2- or 3-character final group. */
    if (bits >= 6 || pad > 2 || (acc & ((1u << bits) - 1)))
        return -1;
    return (ssize_t)len;
}

ssize_t base64_decode(const char *in, size_t n, unsigned char *out)
{
    return b64_decode(in, n, out, false);
}

ssize_t base64_decode_strict(const char *in, size_t n, unsigned char *out)
{
    return b64_decode(in, n, out, true);
}

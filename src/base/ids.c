#include "base/ids.h"

#include <errno.h>
#include <stdbool.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
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

static EVP_MD *sha256_md;

static void sha256_fetch(void)
{
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

void sha256_hex(const void *data, size_t len, char out[65])
{
    /* Fetched once: OpenSSL 3 otherwise looks the algorithm up by name on every digest, a
     * third of the cost of hashing a token. */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sha256_fetch);
    unsigned char md[32];
    unsigned int mdlen = 0;
    if (!sha256_md || !EVP_Digest(data, len, md, &mdlen, sha256_md, NULL) || mdlen != 32)
        abort();
    hex_encode(md, 32, out);
}

void key_derive(const void *secret, size_t len, const char *purpose, unsigned char out[32])
{
    char label[128];
    int n = snprintf(label, sizeof(label), "sandbox-mcp %s", purpose);
    unsigned int outlen = 32;
    if (n <= 0 || (size_t)n >= sizeof(label) ||
        !HMAC(EVP_sha256(), secret, (int)len, (const unsigned char *)label, (size_t)n, out,
              &outlen) ||
        outlen != 32)
        abort();
}

void id_new(const char *prefix, char out[64])
{
    static const char alphabet[] = "0123456789abcdefghjkmnpqrstvwxyz";
    unsigned char raw[16];
    char body[27];
    rand_bytes(raw, sizeof(raw));
    /* 128 bits -> 26 base32 characters (the last carries 3 bits). */
    unsigned acc = 0, bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < sizeof(raw); i++) {
        acc = acc << 8 | raw[i];
        bits += 8;
        while (bits >= 5) {
            body[o++] = alphabet[acc >> (bits - 5) & 31];
            bits -= 5;
        }
    }
    if (bits)
        body[o++] = alphabet[acc << (5 - bits) & 31];
    body[o] = '\0';
    snprintf(out, 64, "%s_%s", prefix, body);
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

ssize_t base64_decode(const char *in, size_t n, unsigned char *out)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t len = 0, pad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64_value(c);
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

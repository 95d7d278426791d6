/* Digests and ids (declared in ids.h), on OpenSSL; the encodings they use are in encode.c. */
#include "base/ids.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static EVP_MD *sha256_md;

static void sha256_fetch(void)
{
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static unsigned char token_key[crypto_shorthash_siphashx24_KEYBYTES];

static void token_key_draw(void)
{
    if (sodium_init() < 0)
        abort();
    randombytes_buf(token_key, sizeof(token_key));
}

void token_digest(const void *tok, size_t len, unsigned char out[TOKEN_DIGEST_BYTES])
{
    _Static_assert(TOKEN_DIGEST_BYTES == crypto_shorthash_siphashx24_BYTES, "SipHash-128");
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, token_key_draw);
    crypto_shorthash_siphashx24(out, tok, len, token_key);
}

void sha256_bytes(const void *data, size_t len, unsigned char out[32])
{
    /* Fetched once: OpenSSL 3 otherwise looks the algorithm up by name on every digest, a
     * third of the cost of hashing a token. */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sha256_fetch);
    unsigned int mdlen = 0;
    if (!sha256_md || !EVP_Digest(data, len, out, &mdlen, sha256_md, NULL) || mdlen != 32)
        abort();
}

void sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    sha256_bytes(data, len, md);
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

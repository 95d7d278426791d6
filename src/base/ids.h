#pragma once
/* Randomness, encodings and digests used for ids, tokens and secrets. The randomness and
 * encodings are in encode.c (libc only), the digests and ids in ids.c (OpenSSL). */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Fill buf with n bytes from the kernel CSPRNG; aborts if the kernel refuses (never on Linux
 * >= 3.17 once the pool is initialised). */
void rand_bytes(void *buf, size_t n);

/* Lowercase hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void hex_encode(const void *in, size_t n, char *out);

/* Unpadded base64url of n bytes into out (at least 4*ceil(n/3)+1 bytes); returns length. */
size_t base64url_encode(const void *in, size_t n, char *out);

/* Padded standard base64 (RFC 4648 section 4) of n bytes into out (at least 4*ceil(n/3)+1
 * bytes); returns length. */
size_t base64_encode(const void *in, size_t n, char *out);

/* SHA-256 of data as 64 hex digits plus NUL. */
void sha256_hex(const void *data, size_t len, char out[65]);
/* The same digest as 32 bytes. */
void sha256_bytes(const void *data, size_t len, unsigned char out[32]);

/* A token's digest for the caches of tokens already checked (the token check of /mcp, the
 * proxy's): its SipHash-128 under a key drawn at the first call, which nobody outside the
 * process knows, so that no one can choose two tokens that collide. A tenth of the cost of a
 * SHA-256 through OpenSSL's EVP, and on the path of every request. */
#define TOKEN_DIGEST_BYTES 16
void token_digest(const void *tok, size_t len, unsigned char out[TOKEN_DIGEST_BYTES]);

/* A key for one purpose, derived from a secret: HMAC-SHA256(secret, "sandbox-mcp " purpose),
 * 32 bytes into out. Keys of different purposes are independent: one of them, leaked or
 * misused, is no use for the others or the secret. */
#define KEY_PROXY_JWT "proxy-jwt v1"
#define KEY_VIEW_TOKEN "view-token v1"
#define KEY_DEVICE_COOKIE "signin-device v1"
#define KEY_MCP_REQUEST_STATE "mcp-request-state v1"
#define KEY_PREVIEW "preview-url v1"
void key_derive(const void *secret, size_t len, const char *purpose, unsigned char out[32]);

/* A new random id "<prefix>_<26 base32 chars>" (128 bits) into out[64]. */
void id_new(const char *prefix, char out[64]);

/* Decode standard or URL-safe base64 (padding optional, ASCII whitespace ignored) of n chars
 * into out (at least n/4*3+3 bytes). Returns the decoded length, or -1 when the input is not
 * base64. */
ssize_t base64_decode(const char *in, size_t n, unsigned char *out);

/* Decode strict base64 (RFC 4648 section 4) of n chars into out (at least n/4*3 bytes): the
 * standard alphabet only, whole quanta of 4 characters, '=' only as the last one or two, the
 * bits the padding leaves over zero, and no whitespace, so that one value has one encoding.
 * Returns the decoded length, or -1 when the input is not strict base64. */
ssize_t base64_decode_strict(const char *in, size_t n, unsigned char *out);

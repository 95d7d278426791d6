#pragma once
/* Secrets at rest: a key of the server's own in DATA_DIR/secrets, and values sealed with it
 * (XChaCha20-Poly1305 from libsodium, a random nonce each time). A sealed value is bound to a
 * label (the user and what it is for), so one copied onto another row does not open there.
 * sodium_init() must have run. */

#include <stddef.h>

#include "base/err.h"

#define SEAL_KEY_BYTES 32

/* The key in DATA_DIR/secrets/<name>: read, or made (32 random bytes, mode 0600, in a 0700
 * directory) when the file does not exist. A file of another size is an error. */
int seal_key_load(const char *data_dir, const char *name, unsigned char key[SEAL_KEY_BYTES],
                  struct err *err);

/* Seal n bytes of plain under key and label: *out (malloc'd) holds the nonce, the ciphertext
 * and the tag, *out_len bytes. */
void seal(const unsigned char key[SEAL_KEY_BYTES], const void *plain, size_t n, const char *label,
          unsigned char **out, size_t *out_len);
/* Open what seal made: *plain (malloc'd, NUL-terminated, *plain_len bytes before the NUL), or
 * -EBADMSG when the key, the label or a byte of it is not what sealed it. */
int unseal(const unsigned char key[SEAL_KEY_BYTES], const unsigned char *in, size_t n,
           const char *label, char **plain, size_t *plain_len, struct err *err);

#include "base/seal.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"

#define NONCE crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
#define TAG crypto_aead_xchacha20poly1305_ietf_ABYTES

int seal_key_load(const char *data_dir, const char *name, unsigned char key[SEAL_KEY_BYTES],
                  struct err *err)
{
    _cleanup_free_ char *dir = xasprintf("%s/secrets", data_dir);
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return err_set(err, -errno, "cannot create '%s': %s", dir, strerror(errno));
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        unsigned char extra;
        ssize_t n = read(fd, key, SEAL_KEY_BYTES);
        if (n != SEAL_KEY_BYTES || read(fd, &extra, 1) != 0)
            return err_set(err, -EINVAL, "'%s' does not hold a key of %d bytes", path,
                           SEAL_KEY_BYTES);
        return 0;
    }
    if (errno != ENOENT)
        return err_set(err, -errno, "cannot read '%s': %s", path, strerror(errno));
    randombytes_buf(key, SEAL_KEY_BYTES);
    _cleanup_free_ char *tmp = xasprintf("%s.tmp", path);
    _cleanup_close_ int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0 || write(out, key, SEAL_KEY_BYTES) != SEAL_KEY_BYTES || fsync(out) < 0)
        return err_set(err, -EIO, "cannot write '%s': %s", tmp, strerror(errno));
    /* another process may have made one meanwhile: link, which does not replace, decides */
    if (link(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        if (e == EEXIST)
            return seal_key_load(data_dir, name, key, err);
        return err_set(err, -e, "cannot create '%s': %s", path, strerror(e));
    }
    unlink(tmp);
    return 0;
}

void seal(const unsigned char key[SEAL_KEY_BYTES], const void *plain, size_t n, const char *label,
          unsigned char **out, size_t *out_len)
{
    unsigned char *buf = xmalloc(NONCE + n + TAG);
    randombytes_buf(buf, NONCE);
    unsigned long long clen;
    crypto_aead_xchacha20poly1305_ietf_encrypt(
        buf + NONCE, &clen, plain, n, (const unsigned char *)label, strlen(label), NULL, buf, key);
    *out = buf;
    *out_len = NONCE + (size_t)clen;
}

int unseal(const unsigned char key[SEAL_KEY_BYTES], const unsigned char *in, size_t n,
           const char *label, char **plain, size_t *plain_len, struct err *err)
{
    if (n < NONCE + TAG)
        return err_set(err, -EBADMSG, "a sealed value is too short");
    char *buf = xmalloc(n - NONCE - TAG + 1);
    unsigned long long len;
    if (crypto_aead_xchacha20poly1305_ietf_decrypt((unsigned char *)buf, &len, NULL, in + NONCE,
                                                   n - NONCE, (const unsigned char *)label,
                                                   strlen(label), in, key) < 0) {
        free(buf);
        return err_set(err, -EBADMSG,
                       "a sealed value does not open with this server's key (was DATA_DIR/secrets "
                       "replaced?)");
    }
    buf[len] = '\0';
    *plain = buf;
    *plain_len = (size_t)len;
    return 0;
}

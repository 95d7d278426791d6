#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/seal.h"
#include "base/util.h"
#include "harness.h"

TEST(sealed_values_open_only_with_their_key_and_label)
{
    CHECK(sodium_init() >= 0);
    unsigned char key[SEAL_KEY_BYTES], other[SEAL_KEY_BYTES];
    randombytes_buf(key, sizeof(key));
    randombytes_buf(other, sizeof(other));
    unsigned char *a, *b;
    size_t alen, blen;
    seal(key, "github_pat_secret", 17, "credential usr_1 github", &a, &alen);
    seal(key, "github_pat_secret", 17, "credential usr_1 github", &b, &blen);
    CHECK_INT_EQ(alen, blen);
    CHECK(memcmp(a, b, alen) != 0); /* a fresh nonce each time */
    CHECK(memmem(a, alen, "github_pat", 10) == NULL);
    char *plain = NULL;
    size_t n = 0;
    struct err err = {0};
    CHECK_INT_EQ(unseal(key, a, alen, "credential usr_1 github", &plain, &n, &err), 0);
    CHECK_INT_EQ(n, 17);
    CHECK_STR_EQ(plain, "github_pat_secret");
    free(plain);
    /* another user's row, another key, a flipped byte, a cut value: none opens */
    CHECK_INT_EQ(unseal(key, a, alen, "credential usr_2 github", &plain, &n, &err), -EBADMSG);
    CHECK_INT_EQ(unseal(other, a, alen, "credential usr_1 github", &plain, &n, &err), -EBADMSG);
    a[alen - 1] ^= 1;
    CHECK_INT_EQ(unseal(key, a, alen, "credential usr_1 github", &plain, &n, &err), -EBADMSG);
    CHECK_INT_EQ(unseal(key, a, 10, "credential usr_1 github", &plain, &n, &err), -EBADMSG);
    free(a);
    free(b);
}

TEST(the_key_is_made_once_private_and_read_back)
{
    CHECK(sodium_init() >= 0);
    char dir[] = "/tmp/smcp-seal-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    unsigned char k1[SEAL_KEY_BYTES], k2[SEAL_KEY_BYTES];
    struct err err = {0};
    CHECK_INT_EQ(seal_key_load(dir, "credentials.key", k1, &err), 0);
    CHECK_INT_EQ(seal_key_load(dir, "credentials.key", k2, &err), 0);
    CHECK(memcmp(k1, k2, sizeof(k1)) == 0);
    char *path = xasprintf("%s/secrets/credentials.key", dir);
    struct stat st;
    CHECK_INT_EQ(stat(path, &st), 0);
    CHECK_INT_EQ(st.st_mode & 0777, 0600);
    CHECK_INT_EQ(st.st_size, SEAL_KEY_BYTES);
    char *sdir = xasprintf("%s/secrets", dir);
    CHECK_INT_EQ(stat(sdir, &st), 0);
    CHECK_INT_EQ(st.st_mode & 0777, 0700);
    /* a file that is not a key is an error, never replaced */
    FILE *f = fopen(path, "w");
    fputs("short", f);
    fclose(f);
    CHECK_INT_EQ(seal_key_load(dir, "credentials.key", k2, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "does not hold a key");
    unlink(path);
    rmdir(sdir);
    rmdir(dir);
    free(path);
    free(sdir);
}

TEST_MAIN()

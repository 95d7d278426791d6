/* libFuzzer target: client path normalization. The first byte picks the cwd, the rest is the
 * path; every accepted path must come out absolute, canonical and idempotent. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/fsops.h"

static void check_canonical(const char *p)
{
    size_t n = strlen(p);
    if (p[0] != '/' || n > FSOP_PATH_MAX || (n > 1 && p[n - 1] == '/'))
        abort();
    if (strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../"))
        abort();
    if ((n >= 2 && strcmp(p + n - 2, "/.") == 0) || (n >= 3 && strcmp(p + n - 3, "/..") == 0))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const cwds[] = {"/workspace", "/", "/a/b/../c", "relative", NULL};
    if (size == 0)
        return 0;
    const char *cwd = cwds[data[0] % 5];
    const char *path = (const char *)data + 1;
    size_t len = size - 1;
    char *out = NULL;
    struct err err = {0};
    int r = fsop_path_normalize(cwd, path, len, &out, &err);
    if (r < 0) {
        if ((r != -EINVAL && r != -ENAMETOOLONG) || out || err.code != r)
            abort();
        return 0;
    }
    check_canonical(out);
    char *again = NULL;
    if (fsop_path_normalize("/elsewhere", out, strlen(out), &again, NULL) < 0 ||
        strcmp(again, out) != 0)
        abort();
    free(again);
    free(out);
    return 0;
}

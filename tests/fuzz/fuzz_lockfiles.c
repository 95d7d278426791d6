/* libFuzzer target: the lock files read from what `git ls-tree -z` prints of a repository's
 * root (src/runs/mirror.c), where the names are the repository's own: never more than asked
 * for, each a lock file name without a slash, each blob id 40 or 64 hex digits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runs/runs_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mirror_lockfile v[4];
    size_t n = mirror_lockfiles_parse((const char *)data, size, v, 4);
    if (n > 4)
        abort();
    for (size_t i = 0; i < n; i++) {
        size_t k = strlen(v[i].blob);
        if (!mirror_lockfile_name(v[i].path) || strchr(v[i].path, '/') || (k != 40 && k != 64) ||
            strspn(v[i].blob, "0123456789abcdef") != k)
            abort();
    }
    return 0;
}

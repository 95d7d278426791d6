/* libFuzzer target: UTF-8 validation, sanitizing and boundary cutting agree with each other. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    bool valid = utf8_valid(s, size);
    size_t len;
    char *clean = utf8_sanitize(s, size, &len);
    if (!utf8_valid(clean, len) || memchr(clean, '\0', len) || clean[len] != '\0')
        abort();
    /* well-formed input without NULs passes through unchanged */
    if (valid && !memchr(s, '\0', size) && (len != size || memcmp(clean, s, size) != 0))
        abort();
    free(clean);
    for (size_t k = size > 64 ? size - 64 : 0; k <= size; k++) {
        size_t m = utf8_boundary(s, k);
        if (m > k || k - m > 3)
            abort();
        /* a prefix of valid text cut at the boundary stays valid */
        if (valid && !utf8_valid(s, m))
            abort();
    }
    return 0;
}

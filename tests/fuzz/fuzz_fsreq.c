/* libFuzzer target: the file worker's request parser takes any bytes without reading outside
 * them, and whatever it accepts encodes back to the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/fsops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes, so any read past the end is caught */
    unsigned char *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    struct fsop_worker_request w;
    if (fsop_worker_decode(copy, size, &w) == 0) {
        size_t len;
        void *again = fsop_worker_encode(&w, &len);
        if (len != size || memcmp(again, copy, size) != 0)
            abort();
        free(again);
    }
    free(copy);
    return 0;
}

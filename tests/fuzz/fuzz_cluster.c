/* The internal channel's signature header, as a node reads it from a request anyone can send:
 * no input may crash it, and none may verify without the key. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cluster/cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct cluster_key k;
    if (!k.have)
        cluster_key_init(&k, "fuzzing secret, long enough to be a real one");
    struct cluster_claims cl;
    struct err err = {0};
    /* the header is the input; the body is its first half again */
    if (cluster_verify(&k, (const char *)data, size, "/internal/mcp", data, size / 2, 1000, &cl,
                       &err) == 0)
        abort();
    return 0;
}

/* The internal channel's signature header, as a node reads it from a request anyone can send:
 * no input may crash it, and none may verify without the key; nor may the head proof. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cluster/cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct cluster_key k;
    static struct cluster_nonces *seen;
    if (!k.have) {
        cluster_key_init(&k, "fuzzing secret, long enough to be a real one");
        seen = cluster_nonces_new(1024);
    }
    struct cluster_claims cl;
    struct err err = {0};
    /* the header is the input; the body is its first half again */
    if (cluster_verify(&k, seen, (const char *)data, size, "POST", "/internal/mcp", data, size / 2,
                       1000, &cl, &err) == 0)
        abort();
    /* and as the head proof the admission gate reads before a body */
    if (cluster_head_check(&k, seen, (const char *)data, size, "POST", 4, "/internal/mcp", 13, size,
                           1000) == 0)
        abort();
    return 0;
}

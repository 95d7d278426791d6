/* Fuzz the proxy's usage reader: arbitrary provider output, streamed (SSE, fed in random-sized
 * pieces) or whole, for both formats. It must never crash, and counts are never negative. */
#include <stdint.h>
#include <string.h>

#include "proxy/proxy_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    enum usage_kind kind = data[0] & 1 ? USAGE_OPENAI : USAGE_ANTHROPIC;
    bool sse = data[0] & 2;
    size_t step = (size_t)data[1] % 64 + 1;
    data += 2;
    size -= 2;
    struct usage_parser u;
    usage_init(&u, kind, sse);
    for (size_t off = 0; off < size; off += step)
        usage_feed(&u, (const char *)data + off, size - off < step ? size - off : step);
    usage_finish(&u);
    if (u.input < 0 || u.output < 0)
        __builtin_trap();
    return 0;
}

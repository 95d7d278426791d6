/* Fuzz the egress proxy's reading of a request's target (egress_parse_authority in
 * src/egress/proxy_head.c), which a sandbox writes. Input: the authority, as a CONNECT or a URL
 * gives it. Nothing may crash or read past it, and what it accepts is a non-empty name that fits,
 * lower case, of printable ASCII without '/', '@', '\\' or '%', with a port from 1 to 65535 (the
 * default when none is written). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/proxy_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes, so that a read past them is caught */
    char *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    static const uint16_t defaults[] = {0, 80};
    for (size_t i = 0; i < 2; i++) {
        char host[64];
        uint16_t port = 0;
        if (egress_parse_authority(copy, size, defaults[i], host, sizeof(host), &port) < 0)
            continue;
        size_t n = strnlen(host, sizeof(host));
        if (n == 0 || n == sizeof(host) || port == 0)
            abort();
        for (size_t k = 0; k < n; k++) {
            unsigned char c = (unsigned char)host[k];
            if (c <= ' ' || c >= 0x7f || c == '/' || c == '@' || c == '\\' || c == '%' ||
                (c >= 'A' && c <= 'Z'))
                abort();
        }
    }
    free(copy);
    return 0;
}

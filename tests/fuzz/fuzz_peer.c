/* libFuzzer target: TRUSTED_PROXIES and the X-Forwarded-For walk (src/http/peer.h). The input is
 * a trust list, a newline, then header values one a line; the client the walk names must be the
 * peer or an address of the headers, and come out as an address. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/peer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data, *end = s + size;
    const char *nl = memchr(s, '\n', size);
    size_t first = nl ? (size_t)(nl - s) : size;
    char *list = malloc(first + 1);
    memcpy(list, s, first);
    list[first] = '\0';
    struct http_trust t;
    struct err err = {0};
    if (memchr(list, '\0', first) == NULL && http_trust_parse(list, &t, &err) < 0)
        t.n = 0;
    else if (memchr(list, '\0', first))
        t.n = 0;
    free(list);
    if (t.n > HTTP_TRUST_MAX)
        __builtin_trap();

    struct http_text v[64];
    size_t n = 0;
    for (const char *p = nl ? nl + 1 : end; p < end && n < 64;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e)
            e = end;
        v[n++] = (struct http_text){p, (size_t)(e - p)};
        p = e + 1;
    }
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(1)};
    peer.sin_addr.s_addr = htonl(0x7f000001);
    struct sockaddr_storage out;
    http_trust_client(&t, (struct sockaddr *)&peer, v, n, &out);
    if (out.ss_family != AF_INET && out.ss_family != AF_INET6)
        __builtin_trap();
    /* the peer itself (its port kept), or a forwarded address (port 0) */
    bool is_peer = out.ss_family == AF_INET &&
                   ((struct sockaddr_in *)&out)->sin_addr.s_addr == peer.sin_addr.s_addr &&
                   ((struct sockaddr_in *)&out)->sin_port == peer.sin_port;
    if (!is_peer && !http_trust_contains(&t, (struct sockaddr *)&peer))
        __builtin_trap();

    /* an entry taken as an address reads back as the same address */
    struct sockaddr_storage a, b;
    if (http_xff_entry(s, size, &a)) {
        char text[INET6_ADDRSTRLEN];
        const void *raw = a.ss_family == AF_INET
                              ? (const void *)&((struct sockaddr_in *)&a)->sin_addr
                              : (const void *)&((struct sockaddr_in6 *)&a)->sin6_addr;
        if (!inet_ntop(a.ss_family, raw, text, sizeof(text)) ||
            !http_xff_entry(text, strlen(text), &b) || memcmp(&a, &b, sizeof(a)) != 0)
            __builtin_trap();
    }
    return 0;
}

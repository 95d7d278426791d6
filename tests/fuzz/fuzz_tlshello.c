/* Fuzz the TLS ClientHello reader (src/egress/tlshello.c), which reads the first bytes a sandbox
 * sends into a CONNECT tunnel. Input: those bytes. Nothing may crash or read past them, and: the
 * answer is one of the four; a name read is non-empty, lowercase and of host-name bytes only;
 * "more bytes" comes only under EGRESS_HELLO_MAX, and then of every shorter beginning too; a
 * whole hello stays whole whatever follows it; the policy's verdict on it carries a message when
 * it refuses. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "egress/egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct egress_policy *allowlist(void)
{
    static struct egress_policy *p;
    if (!p) {
        struct config cfg = {0};
        config_set(&cfg, "SANDBOX_NETWORK", "allowlist");
        config_set(&cfg, "SANDBOX_NETWORK_DEFAULTS", "0");
        config_set(&cfg, "SANDBOX_NETWORK_ALLOW", "allowed.example");
        struct err err = {0};
        if (egress_policy_new_with_own(&cfg, NULL, 0, &p, &err) < 0)
            abort();
        config_release(&cfg);
    }
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct egress_hello h;
    /* a copy of exactly size bytes, so that a read past them is caught */
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    int r = egress_hello_parse(copy, size, &h);
    if (r != 0 && r != -EAGAIN && r != -EPROTO && r != -EMSGSIZE)
        abort();
    if (r == -EAGAIN) {
        struct egress_hello h2;
        if (size >= EGRESS_HELLO_MAX || egress_hello_parse(copy, size / 2, &h2) != -EAGAIN)
            abort();
    }
    if (r == 0 && h.has_sni) {
        size_t n = strlen(h.sni);
        if (n == 0 || n >= sizeof(h.sni))
            abort();
        for (size_t i = 0; i < n; i++) {
            char c = h.sni[i];
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                  c == '_'))
                abort();
        }
    }
    if (r == 0) {
        uint8_t *more = malloc(size + 7);
        memcpy(more, copy, size);
        memcpy(more + size, "\x17\x03\x03\x00\x02xy", 7);
        struct egress_hello h2;
        if (egress_hello_parse(more, size + 7, &h2) != 0 || memcmp(&h, &h2, sizeof(h)) != 0)
            abort();
        free(more);
    }
    struct err why = {0};
    enum egress_reason v = egress_policy_check_sni(allowlist(), EGRESS_MODE_ALLOWLIST,
                                                   "allowed.example", r == 0 ? &h : NULL, &why);
    if (v != EGRESS_OK && (v != EGRESS_DENY_SNI || !why.msg[0]))
        abort();
    if (v == EGRESS_OK && (r != 0 || !h.has_sni || h.ech || strcmp(h.sni, "allowed.example")))
        abort();
    free(copy);
    return 0;
}

/* Fuzz the sandboxes' network policy (src/egress/netpolicy.c). Input: 2 bytes of port, 16 bytes
 * of address, then SANDBOX_NETWORK_ALLOW, a newline and a host. Nothing may crash, and:
 * every entry of an accepted list allows what it names (checked by a parser of its own here);
 * a host the allow list lets through is a name or an address, and passes in any case, with a
 * trailing dot, and under public mode (narrowing never widens); refusals carry a message; stage 2
 * lets an address through exactly when it is public. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "egress/egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct egress_policy *policy(const char *mode, const char *allow)
{
    struct config cfg = {0};
    config_set(&cfg, "SANDBOX_NETWORK", mode);
    config_set(&cfg, "SANDBOX_NETWORK_DEFAULTS", "0");
    config_set(&cfg, "SANDBOX_NETWORK_ALLOW", allow);
    struct egress_policy *p = NULL;
    struct err err = {0};
    int r = egress_policy_new_with_own(&cfg, NULL, 0, &p, &err);
    config_release(&cfg);
    if ((r == 0) != (p != NULL) || (r < 0 && !err.msg[0]))
        abort();
    return p;
}

static enum egress_reason check(const struct egress_policy *p, enum egress_mode m, const char *host,
                                uint16_t port)
{
    struct err why = {0};
    enum egress_reason r = egress_policy_check_name(p, m, host, port, &why);
    if (r != EGRESS_OK && (!why.msg[0] || why.code >= 0))
        abort();
    if (r == EGRESS_OK && why.msg[0])
        abort();
    return r;
}

/* Each entry of an accepted list, as this test reads it, must allow what it names. */
static void entries_allow_themselves(const struct egress_policy *p, const char *spec)
{
    char *copy = strdup(spec), *save;
    for (char *e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*e))
            e++;
        size_t n = strlen(e);
        while (n > 0 && isspace((unsigned char)e[n - 1]))
            e[--n] = '\0';
        if (n == 0)
            continue;
        uint16_t ports[2] = {80, 443};
        char *colon = strchr(e, ':');
        if (colon) {
            *colon = '\0';
            ports[0] = ports[1] = (uint16_t)atoi(colon + 1);
        }
        char host[300];
        if (strncmp(e, "*.", 2) == 0)
            snprintf(host, sizeof(host), "x.%s", e + 2);
        else
            snprintf(host, sizeof(host), "%s", e);
        /* "x." + a name of 252 bytes or more is too long to be a name: not this entry's fault */
        if (strlen(host) > 254 || (strlen(host) == 254 && host[253] != '.'))
            continue;
        for (int i = 0; i < 2; i++)
            if (check(p, EGRESS_MODE_ALLOWLIST, host, ports[i]) != EGRESS_OK)
                abort();
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 18 || size > 8192)
        return 0;
    uint16_t port = (uint16_t)(data[0] << 8 | data[1]);
    struct egress_addr addr;
    memcpy(addr.b, data + 2, 16);
    char *text = strndup((const char *)data + 18, size - 18);
    char *nl = strchr(text, '\n');
    const char *host = nl ? nl + 1 : "";
    if (nl)
        *nl = '\0';

    struct egress_policy *list = policy("allowlist", text);
    struct egress_policy *pub = policy("public", text);
    if (!list != !pub) /* the mode does not change what a list may hold */
        abort();
    if (list) {
        entries_allow_themselves(list, text);
        enum egress_reason r = check(list, EGRESS_MODE_ALLOWLIST, host, port);
        if (r != EGRESS_OK && r != EGRESS_DENY_NOT_LISTED && r != EGRESS_DENY_PORT)
            abort();
        if (check(list, EGRESS_MODE_NONE, host, port) != EGRESS_DENY_MODE_NONE)
            abort();
        if (check(list, EGRESS_MODE_PUBLIC, host, port) != r) /* narrowed to allowlist */
            abort();
        if (r == EGRESS_OK) {
            size_t n = strlen(host);
            for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)host[i]) && !strchr("-_.:[]", host[i]))
                    abort();
            char *upper = strdup(host);
            for (size_t i = 0; i < n; i++)
                upper[i] = (char)toupper((unsigned char)upper[i]);
            if (check(list, EGRESS_MODE_ALLOWLIST, upper, port) != EGRESS_OK)
                abort();
            free(upper);
            if (n < 253 && host[n - 1] != '.' && !strchr(host, ':')) {
                char dotted[256];
                snprintf(dotted, sizeof(dotted), "%s.", host);
                if (check(list, EGRESS_MODE_ALLOWLIST, dotted, port) != EGRESS_OK)
                    abort();
            }
            if (check(pub, EGRESS_MODE_PUBLIC, host, port) != EGRESS_OK)
                abort();
        }
        struct err why = {0};
        enum egress_reason s = egress_policy_check_addrs(pub, host, &addr, 1, port, &why);
        if ((s == EGRESS_OK) != (egress_classify(&addr) == EGRESS_PUBLIC))
            abort();
        if (s != EGRESS_OK && (s != EGRESS_DENY_ADDRESS || !why.msg[0]))
            abort();
    }
    egress_policy_free(list);
    egress_policy_free(pub);
    free(text);
    return 0;
}

/* Scope names, parsed and formatted. */
#include "base/scopes.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    unsigned bit;
} scopes[] = {
    {"sandbox", SCOPE_SANDBOX},
    {"runs", SCOPE_RUNS},
    {"offline_access", SCOPE_OFFLINE},
};

int scopes_parse(const char *text, unsigned *out, struct err *err)
{
    *out = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " ");
        if (!n)
            break;
        size_t i;
        for (i = 0; i < sizeof(scopes) / sizeof(scopes[0]); i++)
            if (strlen(scopes[i].name) == n && strncmp(p, scopes[i].name, n) == 0)
                break;
        if (i == sizeof(scopes) / sizeof(scopes[0]))
            return err_set(err, -EINVAL, "unknown scope '%.*s'; this server knows %s",
                           (int)(n > 64 ? 64 : n), p, SCOPES_TEXT);
        *out |= scopes[i].bit;
        p += n;
    }
    return 0;
}

void scopes_format(unsigned bits, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(scopes) / sizeof(scopes[0]); i++)
        if (bits & scopes[i].bit)
            len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%s", len ? " " : "",
                                    scopes[i].name);
}

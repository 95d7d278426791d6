/* Redirect URIs: whether a request's matches a registered one (which may be registered is
 * cimd_redirect_uri_check's rule). */
#include "auth/auth_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool loopback_literal(const char *host, size_t n)
{
    return (n > 4 && strncmp(host, "127.", 4) == 0 && strspn(host, "0123456789.") == n) ||
           (n == 5 && strncmp(host, "[::1]", 5) == 0);
}

/* Split "scheme://authority/rest": scheme length, authority start and length, host length
 * (authority without its port). False when the URI has no such shape. */
static bool split(const char *uri, size_t *scheme, const char **auth, size_t *alen, size_t *hlen)
{
    const char *sep = strstr(uri, "://");
    if (!sep || sep == uri)
        return false;
    *scheme = (size_t)(sep - uri);
    *auth = sep + 3;
    *alen = strcspn(*auth, "/?#");
    if (**auth == '[') {
        const char *close = memchr(*auth, ']', *alen);
        if (!close)
            return false;
        *hlen = (size_t)(close - *auth) + 1;
    } else {
        const char *colon = memchr(*auth, ':', *alen);
        *hlen = colon ? (size_t)(colon - *auth) : *alen;
    }
    return true;
}

/* Equal, or both http on the same loopback literal, differing in the port only. */
static bool same(const char *reg, const char *req)
{
    if (strcmp(reg, req) == 0)
        return true;
    if (strncmp(reg, "http://", 7) != 0 || strncmp(req, "http://", 7) != 0)
        return false;
    size_t s1, s2, a1, a2, h1, h2;
    const char *au1, *au2;
    if (!split(reg, &s1, &au1, &a1, &h1) || !split(req, &s2, &au2, &a2, &h2))
        return false;
    if (!loopback_literal(au1, h1) || h1 != h2 || strncmp(au1, au2, h1) != 0)
        return false;
    /* the ports may differ; each must be digits */
    if (a2 > h2 && (au2[h2] != ':' || strspn(au2 + h2 + 1, "0123456789") != a2 - h2 - 1))
        return false;
    return strcmp(au1 + a1, au2 + a2) == 0;
}

bool auth_redirect_uri_match(const char *registered_json, const char *requested)
{
    json_t *list = json_loads(registered_json, 0, NULL);
    bool ok = false;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (json_is_string(v) && same(json_string_value(v), requested)) {
            ok = true;
            break;
        }
    }
    json_decref(list);
    return ok;
}

void auth_uri_host(const char *uri, char *out, size_t cap)
{
    size_t scheme, alen, hlen;
    const char *auth;
    if (!split(uri, &scheme, &auth, &alen, &hlen)) {
        snprintf(out, cap, "%.*s", (int)strcspn(uri, ":"), uri);
        return;
    }
    snprintf(out, cap, "%.*s", (int)hlen, auth);
}

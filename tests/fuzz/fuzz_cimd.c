/* Fuzz the client metadata checks (src/auth/cimd.c) and the redirect URI rule
 * (src/auth/redirect.c). The first byte picks the target: a client_id URL (with or without the
 * loopback test mode), a document fetched from a fixed URL, a Cache-Control value, a Content-Type
 * value, or a registered and a requested redirect URI (split at the first newline). Nothing may
 * crash, and whatever is accepted must have the shape the checks promise. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth/cimd.h"
#include "auth/redirect.h"
#include "base/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char URL[] = "https://client.example/oauth/client.json";

static void check_url(const char *url)
{
    bool strict_ok = cimd_url_check(url, false, NULL) == 0;
    bool loose_ok = cimd_url_check(url, true, NULL) == 0;
    if (strict_ok && !loose_ok) /* the test mode only adds */
        abort();
    if (!loose_ok)
        return;
    size_t n = strlen(url);
    if (n > CIMD_URL_MAX || strchr(url, '#') || strchr(url, '\\'))
        abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)url[i] <= ' ' || (unsigned char)url[i] >= 0x7f)
            abort();
    const char *a;
    if (strncmp(url, "https://", 8) == 0)
        a = url + 8;
    else if (!strict_ok &&
             (strncmp(url, "http://127.0.0.1", 16) == 0 || strncmp(url, "http://[::1]", 12) == 0))
        a = url + 7;
    else
        abort();
    size_t alen = strcspn(a, "/?");
    if (alen == 0 || memchr(a, '@', alen) || a[alen] != '/' || (a[alen + 1] == '\0') ||
        a[alen + 1] == '?')
        abort();
    char path[CIMD_URL_MAX + 2];
    size_t plen = strcspn(a + alen, "?");
    memcpy(path, a + alen, plen);
    memcpy(path + plen, "/", 2);
    if (strstr(path, "/./") || strstr(path, "/../"))
        abort();
}

static void check_document(const char *body, size_t len)
{
    static struct cimd_client c;
    if (cimd_document_parse(URL, body, len, &c, NULL) < 0)
        return;
    if (strcmp(c.client_id, URL) != 0 || c.n_redirect_uris < 1 ||
        c.n_redirect_uris > CIMD_REDIRECT_URIS_MAX)
        abort();
    size_t nl = strlen(c.client_name);
    if (nl == 0 || nl > CIMD_NAME_MAX || !utf8_valid(c.client_name, nl) ||
        c.client_name[0] == ' ' || c.client_name[nl - 1] == ' ')
        abort();
    for (size_t i = 0; i < nl; i++)
        if ((unsigned char)c.client_name[i] < ' ' || c.client_name[i] == 0x7f)
            abort();
    for (int i = 0; i < c.n_redirect_uris; i++) {
        const char *u = c.redirect_uris[i];
        size_t n = strlen(u);
        if (n == 0 || n > CIMD_URI_MAX || strchr(u, '#') || !strchr(u, ':'))
            abort();
        for (size_t k = 0; k < n; k++)
            if ((unsigned char)u[k] <= ' ' || (unsigned char)u[k] >= 0x7f)
                abort();
    }
    if ((c.client_uri[0] && strncmp(c.client_uri, "https://", 8) != 0) ||
        (c.logo_uri[0] && strncmp(c.logo_uri, "https://", 8) != 0))
        abort();
}

static bool starts_http(const char *s)
{
    return strncasecmp(s, "http://", 7) == 0;
}

/* A match other than byte for byte is a loopback one: both URIs pass the rule, both are http://
 * without a user name or fragment; and matching is symmetric. */
static void check_redirect(char *s)
{
    char *nl = strchr(s, '\n');
    const char *reg = s, *req = "";
    if (nl) {
        *nl = '\0';
        req = nl + 1;
    }
    bool same = auth_redirect_uri_same(reg, req);
    if (same != auth_redirect_uri_same(req, reg))
        abort();
    if (auth_redirect_uri_check(req, strlen(req), 0, NULL) == 0 &&
        !auth_redirect_uri_same(req, req))
        abort();
    if (!same || strcmp(reg, req) == 0)
        return;
    if (auth_redirect_uri_check(reg, strlen(reg), 0, NULL) < 0 ||
        auth_redirect_uri_check(req, strlen(req), 0, NULL) < 0 || !starts_http(reg) ||
        !starts_http(req) || strchr(req, '@') || strchr(req, '#'))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > CIMD_BODY_MAX + 1)
        return 0;
    char *s = malloc(size);
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    switch (data[0] % 6) {
    case 0:
    case 4: check_url(s); break;
    case 1: check_document(s, size - 1); break;
    case 2: {
        int64_t v = cimd_max_age(s);
        if (v != 0 && (v < CIMD_MAX_AGE_MIN || v > CIMD_MAX_AGE_MAX))
            abort();
        break;
    }
    case 3: cimd_content_type_ok(s); break;
    case 5: check_redirect(s); break;
    }
    free(s);
    return 0;
}

/* Redirect URIs: which may be registered, and whether a request's matches a registered one. The
 * rule and why localhost is loopback: redirect.h. */
#include "auth/redirect.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define SHOWN 200 /* bytes of a URI a message repeats */

static bool is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* RFC 3986: unreserved, reserved and '%'. */
static bool uri_char(unsigned char c)
{
    return is_alpha(c) || is_digit(c) || (c && strchr("-._~:/?#[]@!$&'()*+,;=%", c));
}

bool auth_uri_chars_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!uri_char((unsigned char)s[i]))
            return false;
        if (s[i] == '%' &&
            (i + 2 >= n || !is_hex((unsigned char)s[i + 1]) || !is_hex((unsigned char)s[i + 2])))
            return false;
    }
    return true;
}

/* The scheme of a URI reference: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":". Returns its
 * length (without ':'), 0 when there is none. */
static size_t scheme_len(const char *s, size_t n)
{
    if (n == 0 || !is_alpha((unsigned char)s[0]))
        return 0;
    for (size_t i = 1; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ':')
            return i;
        if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.')
            return 0;
    }
    return 0;
}

enum kind { KIND_HTTPS, KIND_LOOPBACK, KIND_PRIVATE };
enum loopback { LOOPBACK_NAME, LOOPBACK_V4, LOOPBACK_V6 };

/* A redirect URI taken apart as far as matching needs. */
struct uri {
    enum kind kind;
    enum loopback loopback; /* KIND_LOOPBACK: which host */
    const char *host;       /* KIND_LOOPBACK: the host as written, without the port */
    size_t host_len;
    const char *rest; /* KIND_LOOPBACK: the path and query, after the authority (maybe empty) */
    size_t rest_len;
};

/* An address in 127.0.0.0/8 as four decimal numbers, each at most 255 without a leading zero:
 * the one spelling every resolver reads the same way (127.1, 0x7f.0.0.1 and 2130706433 are not
 * taken). */
static bool loopback_v4(const char *h, size_t n)
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0) {
            if (i >= n || h[i] != '.')
                return false;
            i++;
        }
        size_t start = i;
        unsigned v = 0;
        while (i < n && i - start < 3 && is_digit((unsigned char)h[i]))
            v = v * 10 + (unsigned)(h[i++] - '0');
        if (i == start || v > 255 || (i - start > 1 && h[start] == '0') || (part == 0 && v != 127))
            return false;
    }
    return i == n;
}

/* The authority of an http:// URI (n bytes, no '@' in it): a loopback host, then nothing or a
 * port 1..65535. Fills the host part of *u. */
static bool loopback_authority(const char *a, size_t n, struct uri *u)
{
    size_t hl;
    if (n > 0 && a[0] == '[') {
        hl = n >= 5 && memcmp(a, "[::1]", 5) == 0 ? 5 : 0;
        if (hl == 0)
            return false;
        u->loopback = LOOPBACK_V6;
    } else {
        const char *colon = memchr(a, ':', n);
        hl = colon ? (size_t)(colon - a) : n;
        if (hl == 9 && strncasecmp(a, "localhost", 9) == 0)
            u->loopback = LOOPBACK_NAME;
        else if (loopback_v4(a, hl))
            u->loopback = LOOPBACK_V4;
        else
            return false;
    }
    if (hl < n) {
        size_t pl = n - hl - 1;
        unsigned port = 0;
        if (a[hl] != ':' || pl == 0 || pl > 5)
            return false;
        for (size_t i = hl + 1; i < n; i++) {
            if (!is_digit((unsigned char)a[i]))
                return false;
            port = port * 10 + (unsigned)(a[i] - '0');
        }
        if (port == 0 || port > 65535)
            return false;
    }
    u->host = a;
    u->host_len = hl;
    return true;
}

/* Bytes of s[0..n) before the first of any of stop (n when none). */
static size_t span_until(const char *s, size_t n, const char *stop)
{
    size_t i = 0;
    while (i < n && !strchr(stop, s[i]))
        i++;
    return i;
}

static int parse(const char *s, size_t n, size_t i, struct uri *u, struct err *err)
{
    memset(u, 0, sizeof(*u));
    if (n == 0)
        return err_set(err, -EINVAL, "redirect_uris[%zu] is empty", i);
    if (n > AUTH_REDIRECT_URI_MAX)
        return err_set(err, -EINVAL, "redirect_uris[%zu] is longer than %d bytes", i,
                       AUTH_REDIRECT_URI_MAX);
    if (!auth_uri_chars_ok(s, n))
        return err_set(err, -EINVAL,
                       "redirect_uris[%zu] '%.*s' holds characters a URI may not (spaces, "
                       "controls, non-ASCII, \"<>\\^`{|} or a '%%' without two hex digits)",
                       i, SHOWN, s);
    if (memchr(s, '#', n))
        return err_set(err, -EINVAL, "redirect_uris[%zu] '%.*s' must not have a fragment", i, SHOWN,
                       s);
    size_t sl = scheme_len(s, n);
    bool https = sl == 5 && strncasecmp(s, "https", 5) == 0;
    bool http = sl == 4 && strncasecmp(s, "http", 4) == 0;
    if (https || http) {
        size_t at = sl + 3;
        if (n < at || memcmp(s + sl, "://", 3) != 0)
            return err_set(err, -EINVAL, "redirect_uris[%zu] '%.*s' is not an %s://host URL", i,
                           SHOWN, s, https ? "https" : "http");
        size_t alen = span_until(s + at, n - at, "/?");
        if (memchr(s + at, '@', alen))
            return err_set(err, -EINVAL,
                           "redirect_uris[%zu] '%.*s' must not carry a user name or password", i,
                           SHOWN, s);
        if (https) {
            if (alen == 0 || s[at] == ':')
                return err_set(err, -EINVAL, "redirect_uris[%zu] '%.*s' has no host", i, SHOWN, s);
            u->kind = KIND_HTTPS;
            return 0;
        }
        if (!loopback_authority(s + at, alen, u))
            return err_set(err, -EINVAL,
                           "redirect_uris[%zu] '%.*s' is http:// on a host other than localhost, "
                           "127.x.x.x or [::1]; use https://",
                           i, SHOWN, s);
        u->kind = KIND_LOOPBACK;
        u->rest = s + at + alen;
        u->rest_len = n - at - alen;
        return 0;
    }
    if (sl > 0 && memchr(s, '.', sl)) {
        /* a private-use scheme, named after a domain the app's maker holds */
        u->kind = KIND_PRIVATE;
        return 0;
    }
    return err_set(err, -EINVAL,
                   "redirect_uris[%zu] '%.*s' must be an https:// URL, an http:// URL on a "
                   "loopback host, or a private-use scheme with a dot in it (com.example.app:/cb)",
                   i, SHOWN, s);
}

int auth_redirect_uri_check(const char *s, size_t n, size_t i, struct err *err)
{
    struct uri u;
    return parse(s, n, i, &u, err);
}

bool auth_redirect_uri_same(const char *registered, const char *requested)
{
    if (strcmp(registered, requested) == 0)
        return true;
    struct uri a, b;
    if (parse(registered, strlen(registered), 0, &a, NULL) < 0 ||
        parse(requested, strlen(requested), 0, &b, NULL) < 0)
        return false;
    if (a.kind != KIND_LOOPBACK || b.kind != KIND_LOOPBACK || a.loopback != b.loopback)
        return false;
    /* the hosts are the same spelling of one loopback host: only localhost has a case */
    if (a.host_len != b.host_len || strncasecmp(a.host, b.host, a.host_len) != 0)
        return false;
    return a.rest_len == b.rest_len && memcmp(a.rest, b.rest, a.rest_len) == 0;
}

bool auth_redirect_uri_match(const char *registered_json, const char *requested)
{
    json_t *list = json_loads(registered_json, 0, NULL);
    bool ok = false;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (json_is_string(v) && auth_redirect_uri_same(json_string_value(v), requested)) {
            ok = true;
            break;
        }
    }
    json_decref(list);
    return ok;
}

void auth_uri_host(const char *uri, char *out, size_t cap)
{
    const char *sep = strstr(uri, "://");
    if (!sep || sep == uri) {
        snprintf(out, cap, "%.*s", (int)strcspn(uri, ":"), uri);
        return;
    }
    const char *a = sep + 3;
    size_t alen = strcspn(a, "/?#"), hlen;
    if (a[0] == '[') {
        const char *close = memchr(a, ']', alen);
        if (!close) {
            snprintf(out, cap, "%.*s", (int)(sep - uri), uri);
            return;
        }
        hlen = (size_t)(close - a) + 1;
    } else {
        const char *colon = memchr(a, ':', alen);
        hlen = colon ? (size_t)(colon - a) : alen;
    }
    snprintf(out, cap, "%.*s", (int)hlen, a);
}

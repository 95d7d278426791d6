/* Client ID Metadata Documents: the URL and document checks (pure), and the fetch.
 *
 * A fetch is a request the server makes to wherever a stranger's client_id points, so it goes
 * the way a run's clone does: the server resolves the name itself, every address must be public
 * (the egress policy with an empty allow list), and curl connects to those addresses only
 * (egress_pin_apply: the name pinned in a DNS cache of the fetch's own, every socket checked).
 * Redirects are not followed, proxies from the environment are not used, and the whole fetch,
 * resolution included, has a few seconds and 64 KiB.
 *
 * A stranger chooses the URL, so a fetch's cost is a stranger's to choose: a document that never
 * answers holds its slot for the whole deadline. So the slots are shared out: a few per
 * requester (the address that asked) and per host, and a URL whose fetch failed is answered with
 * that failure for a while (a table of CIMD_FAILURES_KEPT, keyed by the URL's SHA-256) rather
 * than fetched again. The name lookup is the resolver's, charged to the requester there until
 * its thread ends, even past the fetch's deadline.
 *
 * This file holds the checks, pure (client_id URLs, documents, response headers, addresses),
 * which unit tests and fuzz_cimd reach without a network; the fetch is in cimd_fetch.c. */
#include "auth/cimd.h"
#include "auth/cimd_internal.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cleanup.h"
#include "base/utf8.h"
#include "base/util.h"
#include "egress/egress.h"

_Static_assert(CIMD_URI_MAX == AUTH_REDIRECT_URI_MAX, "a document's redirect URIs are the rule's");

static bool is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* --- client_id URLs --- */

/* A segment that is "." or "..", also when its dots are percent-encoded. */
static bool dot_segment(const char *s, size_t n)
{
    size_t dots = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] == '.') {
            i++;
        } else if (n - i >= 3 && s[i] == '%' && s[i + 1] == '2' && (s[i + 2] | 0x20) == 'e') {
            i += 3;
        } else {
            return false;
        }
        dots++;
    }
    return dots == 1 || dots == 2;
}

int cimd_url_parse(const char *url, bool allow_loopback_http, struct client_url *u, struct err *err)
{
    memset(u, 0, sizeof(*u));
    size_t n = strlen(url);
    if (n == 0)
        return err_set(err, -EINVAL, "client_id is empty");
    if (n > CIMD_URL_MAX)
        return err_set(err, -EINVAL, "client_id is longer than %d bytes", CIMD_URL_MAX);
    if (!auth_uri_chars_ok(url, n))
        return err_set(err, -EINVAL,
                       "client_id '%.*s' holds characters a URL may not (spaces, controls, "
                       "non-ASCII, \"<>\\^`{|} or a '%%' without two hex digits)",
                       SHOWN, url);
    if (strchr(url, '#'))
        return err_set(err, -EINVAL, "client_id '%.*s' must not have a fragment", SHOWN, url);
    const char *a;
    if (strncmp(url, "https://", 8) == 0) {
        a = url + 8;
        u->port = 443;
    } else if (allow_loopback_http && strncmp(url, "http://", 7) == 0) {
        a = url + 7;
        u->http = true;
        u->port = 80;
    } else {
        return err_set(err, -EINVAL, "client_id '%.*s' must be an https:// URL", SHOWN, url);
    }
    size_t alen = strcspn(a, "/?");
    if (memchr(a, '@', alen))
        return err_set(err, -EINVAL, "client_id '%.*s' must not carry a user name or password",
                       SHOWN, url);
    const char *port = NULL;
    size_t hl;
    if (alen > 0 && a[0] == '[') {
        const char *close = memchr(a, ']', alen);
        if (!close || (close + 1 < a + alen && close[1] != ':'))
            return err_set(err, -EINVAL, "client_id '%.*s' has a malformed host", SHOWN, url);
        hl = (size_t)(close - a - 1);
        struct egress_addr addr;
        if (hl >= sizeof(u->host))
            return err_set(err, -EINVAL, "client_id '%.*s' has a malformed host", SHOWN, url);
        memcpy(u->host, a + 1, hl);
        if (!strchr(u->host, ':') || egress_addr_parse(u->host, &addr) < 0)
            return err_set(err, -EINVAL, "client_id '%.*s' has a malformed IPv6 address", SHOWN,
                           url);
        port = close + 1 < a + alen ? close + 2 : NULL;
        memcpy(u->shown_host, a, hl + 2);
    } else {
        const char *colon = memchr(a, ':', alen);
        hl = colon ? (size_t)(colon - a) : alen;
        port = colon ? colon + 1 : NULL;
        if (hl == 0)
            return err_set(err, -EINVAL, "client_id '%.*s' has no host", SHOWN, url);
        if (hl > 253)
            return err_set(err, -EINVAL, "client_id '%.*s' has a host longer than 253 bytes", SHOWN,
                           url);
        bool ok = a[0] != '.' && a[0] != '-' && a[hl - 1] != '.';
        for (size_t i = 0; ok && i < hl; i++) {
            unsigned char c = (unsigned char)a[i];
            ok =
                is_alpha(c) || is_digit(c) || c == '-' || c == '_' || (c == '.' && a[i + 1] != '.');
        }
        if (!ok)
            return err_set(err, -EINVAL, "client_id '%.*s' has a malformed host", SHOWN, url);
        memcpy(u->host, a, hl);
        memcpy(u->shown_host, a, hl);
    }
    if (port) {
        size_t pl = (size_t)(a + alen - port);
        unsigned v = 0;
        for (size_t i = 0; i < pl; i++)
            v = is_digit((unsigned char)port[i]) && v < 65536 ? v * 10 + (unsigned)(port[i] - '0')
                                                              : 70000;
        if (pl == 0 || v == 0 || v > 65535)
            return err_set(err, -EINVAL, "client_id '%.*s' has a malformed port", SHOWN, url);
        u->port = (uint16_t)v;
    }
    if (u->http && strcmp(u->host, "127.0.0.1") != 0 && strcmp(u->host, "::1") != 0)
        return err_set(err, -EINVAL,
                       "client_id '%.*s' must be an https:// URL (http:// is for 127.0.0.1 and "
                       "[::1] in tests)",
                       SHOWN, url);
    const char *path = a + alen;
    size_t plen = strcspn(path, "?");
    if (plen == 0 || (plen == 1 && path[0] == '/'))
        return err_set(err, -EINVAL, "client_id '%.*s' must have a path other than /", SHOWN, url);
    for (size_t i = 1; i <= plen;) {
        size_t sl = strcspn(path + i, "/?");
        if (i + sl > plen)
            sl = plen - i;
        if (dot_segment(path + i, sl))
            return err_set(err, -EINVAL, "client_id '%.*s' must not have . or .. path segments",
                           SHOWN, url);
        i += sl + 1;
    }
    return 0;
}

int cimd_url_check(const char *url, bool allow_loopback_http, struct err *err)
{
    struct client_url u;
    return cimd_url_parse(url, allow_loopback_http, &u, err);
}

/* --- documents --- */

/* One code point of valid UTF-8 at s: its value, and its length in *len. */
static uint32_t utf8_next(const unsigned char *s, size_t *len)
{
    if (s[0] < 0x80) {
        *len = 1;
        return s[0];
    }
    if (s[0] < 0xe0) {
        *len = 2;
        return (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
    }
    if (s[0] < 0xf0) {
        *len = 3;
        return (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
    }
    *len = 4;
    return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
           (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
}

/* Characters that reorder the text around them, which a consent page must not show: a name
 * could make itself read as another one. */
static bool bidi_format(uint32_t c)
{
    return c == 0x061c || c == 0x200e || c == 0x200f || (c >= 0x202a && c <= 0x202e) ||
           (c >= 0x2066 && c <= 0x2069);
}

/* The name as shown: controls become spaces, bidirectional formatting goes, spaces at either
 * end go, and at most CIMD_NAME_MAX bytes stay, cut at a character boundary. in is valid UTF-8
 * (jansson checks it). */
static void name_clean(const char *in, size_t n, char out[CIMD_NAME_MAX + 1])
{
    char tmp[CIMD_NAME_MAX + 8];
    size_t k = 0;
    for (size_t i = 0; i < n && k < CIMD_NAME_MAX + 4;) {
        size_t len;
        uint32_t c = utf8_next((const unsigned char *)in + i, &len);
        if (i + len > n)
            break;
        if (c < 0x20 || (c >= 0x7f && c < 0xa0) || c == 0x2028 || c == 0x2029) {
            if (k > 0 && tmp[k - 1] != ' ')
                tmp[k++] = ' ';
        } else if (!bidi_format(c)) {
            memcpy(tmp + k, in + i, len);
            k += len;
        }
        i += len;
    }
    if (k > CIMD_NAME_MAX)
        k = utf8_boundary(tmp, CIMD_NAME_MAX);
    size_t start = 0;
    while (start < k && tmp[start] == ' ')
        start++;
    while (k > start && tmp[k - 1] == ' ')
        k--;
    memcpy(out, tmp + start, k - start);
    out[k - start] = '\0';
}

/* An optional display URL: kept when it is an https:// URL of at most CIMD_URI_MAX bytes, else
 * left empty (the client still works without a logo). */
static int display_uri(json_t *doc, const char *field, char out[CIMD_URI_MAX + 1], struct err *err)
{
    out[0] = '\0';
    json_t *v = json_object_get(doc, field);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return err_set(err, -EINVAL, "%s must be a string", field);
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n <= CIMD_URI_MAX && n > 8 && strncmp(s, "https://", 8) == 0 && auth_uri_chars_ok(s, n) &&
        !memchr(s, '#', n))
        memcpy(out, s, n + 1);
    return 0;
}

int cimd_document_parse(const char *url, const char *body, size_t len, struct cimd_client *out,
                        struct err *err)
{
    struct client_url u;
    int r = cimd_url_parse(url, true, &u, err);
    if (r < 0)
        return r;
    if (len > CIMD_BODY_MAX)
        return err_set(err, -EFBIG, "the document is larger than %d bytes", CIMD_BODY_MAX);
    json_error_t jerr;
    json_auto_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!doc)
        return err_set(err, -EINVAL, "the document is not JSON: %s (line %d)", jerr.text,
                       jerr.line);
    if (!json_is_object(doc))
        return err_set(err, -EINVAL, "the document is not a JSON object");
    memset(out, 0, sizeof(*out));

    json_t *id = json_object_get(doc, "client_id");
    if (!id)
        return err_set(err, -EINVAL, "client_id is missing");
    if (!json_is_string(id))
        return err_set(err, -EINVAL, "client_id must be a string");
    if (json_string_length(id) != strlen(url) || strcmp(json_string_value(id), url) != 0)
        return err_set(err, -EINVAL, "client_id '%.*s' is not the document's URL '%.*s'", SHOWN,
                       json_string_value(id), SHOWN, url);
    memcpy(out->client_id, url, strlen(url) + 1);

    const char *key;
    json_t *v;
    json_object_foreach(doc, key, v)
    {
        if (strncmp(key, "client_secret", 13) == 0)
            return err_set(err, -EINVAL,
                           "%.*s must not be in a client metadata document: its clients are "
                           "public clients",
                           SHOWN, key);
    }
    v = json_object_get(doc, "token_endpoint_auth_method");
    if (v && (!json_is_string(v) || strcmp(json_string_value(v), "none") != 0))
        return err_set(err, -EINVAL,
                       "token_endpoint_auth_method must be \"none\": a client metadata document "
                       "describes a public client, which authenticates with PKCE alone");

    v = json_object_get(doc, "redirect_uris");
    if (!v)
        return err_set(err, -EINVAL, "redirect_uris is missing");
    if (!json_is_array(v))
        return err_set(err, -EINVAL, "redirect_uris must be an array of strings");
    size_t nuris = json_array_size(v);
    if (nuris == 0)
        return err_set(err, -EINVAL, "redirect_uris is empty");
    if (nuris > CIMD_REDIRECT_URIS_MAX)
        return err_set(err, -EINVAL, "redirect_uris has more than %d entries",
                       CIMD_REDIRECT_URIS_MAX);
    for (size_t i = 0; i < nuris; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e))
            return err_set(err, -EINVAL, "redirect_uris[%zu] must be a string", i);
        size_t n = json_string_length(e);
        if ((r = auth_redirect_uri_check(json_string_value(e), n, i, err)) < 0)
            return r;
        memcpy(out->redirect_uris[i], json_string_value(e), n + 1);
    }
    out->n_redirect_uris = (int)nuris;

    v = json_object_get(doc, "client_name");
    if (v && !json_is_null(v) && !json_is_string(v))
        return err_set(err, -EINVAL, "client_name must be a string");
    if (json_is_string(v))
        name_clean(json_string_value(v), json_string_length(v), out->client_name);
    if (!out->client_name[0])
        snprintf(out->client_name, sizeof(out->client_name), "%s", u.shown_host);

    if ((r = display_uri(doc, "client_uri", out->client_uri, err)) < 0 ||
        (r = display_uri(doc, "logo_uri", out->logo_uri, err)) < 0)
        return r;
    return 0;
}

/* --- response headers --- */

/* A directive's value: digits, perhaps quoted. Returns -1 when it is not a number. */
int64_t cimd_delta_seconds(const char *s, size_t n)
{
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        s++;
        n -= 2;
    }
    if (n == 0)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit((unsigned char)s[i]))
            return -1;
        if (v < INT64_C(1) << 40)
            v = v * 10 + (s[i] - '0');
    }
    return v;
}

int64_t cimd_max_age(const char *cc)
{
    if (!cc)
        return CIMD_MAX_AGE_DEFAULT;
    bool no_store = false;
    int64_t max_age = -1, s_maxage = -1;
    for (const char *p = cc; *p;) {
        size_t len = strcspn(p, ",");
        const char *s = p, *e = p + len;
        p += len + (p[len] == ',');
        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        const char *eq = memchr(s, '=', (size_t)(e - s));
        const char *ne = eq ? eq : e;
        while (ne > s && (ne[-1] == ' ' || ne[-1] == '\t'))
            ne--;
        const char *val = eq ? eq + 1 : e;
        while (val < e && (*val == ' ' || *val == '\t'))
            val++;
        size_t nl = (size_t)(ne - s);
        if ((nl == 8 && strncasecmp(s, "no-store", 8) == 0) ||
            (nl == 8 && strncasecmp(s, "no-cache", 8) == 0)) {
            no_store = true;
        } else if (eq && ((nl == 7 && strncasecmp(s, "max-age", 7) == 0) ||
                          (nl == 8 && strncasecmp(s, "s-maxage", 8) == 0))) {
            int64_t v = cimd_delta_seconds(val, (size_t)(e - val));
            int64_t *slot = nl == 7 ? &max_age : &s_maxage;
            if (v >= 0 && (*slot < 0 || v < *slot)) /* given twice: the shorter */
                *slot = v;
        }
    }
    if (no_store)
        return 0;
    int64_t v = s_maxage >= 0 ? s_maxage : max_age;
    if (v < 0)
        return CIMD_MAX_AGE_DEFAULT;
    return v < CIMD_MAX_AGE_MIN ? CIMD_MAX_AGE_MIN : v > CIMD_MAX_AGE_MAX ? CIMD_MAX_AGE_MAX : v;
}

bool cimd_content_type_ok(const char *ct)
{
    if (!ct)
        return true;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    if (n == 0)
        return true;
    if ((n == 16 && strncasecmp(ct, "application/json", 16) == 0) ||
        (n == 10 && strncasecmp(ct, "text/plain", 10) == 0))
        return true;
    const char *slash = memchr(ct, '/', n);
    return slash && slash > ct && ct + n - slash > 6 && strncasecmp(ct + n - 5, "+json", 5) == 0;
}

/* --- addresses --- */

/* Every address must be public; an http:// test URL's own loopback address is allowed. */
int cimd_url_addrs_check(const char *url, const struct client_url *u, const struct egress_addr *a,
                         int n, struct err *err)
{
    struct err e = {0};
    int r = egress_public_only(u->host, u->port, u->http, a, n, &e);
    if (r == -EACCES)
        return err_set(err, r,
                       "client metadata '%.*s': %s; client metadata is fetched from public "
                       "addresses only",
                       SHOWN, url, e.msg);
    return r < 0 ? err_set(err, r, "client metadata '%.*s': %s", SHOWN, url, e.msg) : 0;
}

int cimd_addrs_check(const char *url, bool allow_loopback_http, const struct egress_addr *addrs,
                     int n, struct err *err)
{
    struct client_url u;
    int r = cimd_url_parse(url, allow_loopback_http, &u, err);
    return r < 0 ? r : cimd_url_addrs_check(url, &u, addrs, n, err);
}

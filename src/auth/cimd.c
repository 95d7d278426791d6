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
 * its thread ends, even past the fetch's deadline. */
#include "auth/cimd.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cleanup.h"
#include "base/curl_loop.h"
#include "base/ids.h"
#include "base/loop.h"
#include "base/utf8.h"
#include "base/util.h"
#include "egress/egress.h"
#include "version.h"

#define SHOWN 200 /* bytes of a URL or value a message repeats */

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

struct client_url {
    bool http;            /* the loopback test form */
    char host[254];       /* without brackets: a name or an address */
    char shown_host[256]; /* as the URL writes it ([::1] with brackets) */
    uint16_t port;
};

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

static int url_parse(const char *url, bool allow_loopback_http, struct client_url *u,
                     struct err *err)
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
    return url_parse(url, allow_loopback_http, &u, err);
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
    int r = url_parse(url, true, &u, err);
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
static int64_t delta_seconds(const char *s, size_t n)
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
            int64_t v = delta_seconds(val, (size_t)(e - val));
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
static int addrs_check(const char *url, const struct client_url *u, const struct egress_addr *a,
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
    int r = url_parse(url, allow_loopback_http, &u, err);
    return r < 0 ? r : addrs_check(url, &u, addrs, n, err);
}

/* --- fetching --- */

/* A fetch that failed, given again until until_ms. */
struct failure {
    unsigned char key[32];   /* SHA-256 of the URL */
    int64_t at_ms, until_ms; /* monotonic; until_ms 0: empty */
    struct err err;
};

struct cimd {
    bool allow_loopback_http;
    struct curl_loop *cl;
    long connect_ms, total_ms;
    int fetches, per_requester, per_host;
    int64_t failure_ms;
    int n; /* fetches under way */
    struct cimd_fetch *head;
    struct failure failures[CIMD_FAILURES_KEPT];
};

enum stop { STOP_NONE, STOP_STATUS, STOP_TYPE, STOP_SIZE, STOP_ADDRESS };

struct cimd_fetch {
    struct cimd *c;
    struct cimd_fetch *prev, *next;
    cimd_fetched_fn cb;
    void *ctx;
    char url[CIMD_URL_MAX + 1];
    unsigned char key[32]; /* SHA-256 of url */
    struct client_url u;
    char host[256];     /* u.host, lower case, or an address as egress_addr_format writes it */
    char requester[64]; /* "" when none was given */
    struct egress_lookup *lookup;
    struct loop_timer deadline; /* while resolving; curl keeps time after that */
    int64_t deadline_ms;        /* monotonic: the whole fetch ends by then */
    struct egress_pin pin;      /* the checked addresses: curl connects to no other */
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    size_t body_len;
    long status;
    int64_t content_length; /* -1: not given */
    bool has_type, has_cache;
    char content_type[128];
    char cache_control[512];
    char location[SHOWN + 1];
    enum stop stopped;
    char errbuf[CURL_ERROR_SIZE];
    struct cimd_client client;
};

static void on_done(CURL *easy, CURLcode rc);

struct cimd *cimd_new(bool allow_loopback_http)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct cimd *c = xcalloc(1, sizeof(*c));
    c->allow_loopback_http = allow_loopback_http;
    c->connect_ms = CIMD_CONNECT_TIMEOUT_MS;
    c->total_ms = CIMD_TOTAL_TIMEOUT_MS;
    c->fetches = CIMD_FETCHES_DEFAULT;
    c->per_requester = CIMD_PER_REQUESTER_DEFAULT;
    c->per_host = CIMD_PER_HOST_DEFAULT;
    c->failure_ms = CIMD_FAILURE_MS_DEFAULT;
    c->cl = curl_loop_new(on_done);
    return c;
}

void cimd_set_limits(struct cimd *c, const struct cimd_limits *lim)
{
    c->fetches = lim->fetches;
    c->per_requester = lim->per_requester;
    c->per_host = lim->per_host;
    c->total_ms = lim->total_ms;
    c->connect_ms =
        CIMD_CONNECT_TIMEOUT_MS < lim->total_ms ? CIMD_CONNECT_TIMEOUT_MS : lim->total_ms;
    c->failure_ms = lim->failure_ms;
}

void cimd_set_timeouts(struct cimd *c, long connect_ms, long total_ms)
{
    c->connect_ms = connect_ms;
    c->total_ms = total_ms;
}

/* --- failures remembered --- */

static struct failure *failure_slot(struct cimd *c, const unsigned char key[32])
{
    return &c->failures[((size_t)key[0] << 8 | key[1]) % CIMD_FAILURES_KEPT];
}

static void failure_keep(struct cimd_fetch *f, const struct err *err)
{
    struct cimd *c = f->c;
    if (c->failure_ms <= 0)
        return;
    struct failure *x = failure_slot(c, f->key);
    memcpy(x->key, f->key, sizeof(x->key));
    x->at_ms = time_mono_ms();
    x->until_ms = x->at_ms + c->failure_ms;
    x->err = *err;
}

/* The failure remembered for the URL of key, into err: true when there is one. */
static bool failure_find(struct cimd *c, const unsigned char key[32], struct err *err)
{
    struct failure *x = failure_slot(c, key);
    int64_t now = time_mono_ms();
    if (x->until_ms <= now || memcmp(x->key, key, sizeof(x->key)) != 0)
        return false;
    err_set(err, x->err.code,
            "%s (the answer of a fetch %lld s ago: it is not fetched again for %lld s)", x->err.msg,
            (long long)((now - x->at_ms) / 1000), (long long)((x->until_ms - now + 999) / 1000));
    return true;
}

static void release(struct cimd_fetch *f)
{
    if (f->easy) {
        curl_easy_cleanup(f->easy);
        f->easy = NULL;
    }
    egress_pin_release(&f->pin);
    curl_slist_free_all(f->headers);
    f->headers = NULL;
    free(f->body);
    f->body = NULL;
}

static void unlink_fetch(struct cimd_fetch *f)
{
    struct cimd *c = f->c;
    if (f->prev)
        f->prev->next = f->next;
    else
        c->head = f->next;
    if (f->next)
        f->next->prev = f->prev;
    c->n--;
}

/* The end of a fetch: the slot is free before cb runs, so cb may start another. */
static void finish(struct cimd_fetch *f, const struct cimd_client *client, int64_t max_age,
                   const struct err *err)
{
    if (err)
        failure_keep(f, err);
    loop_timer_stop(&f->deadline);
    unlink_fetch(f);
    release(f);
    f->cb(f->ctx, client, max_age, err);
    free(f);
}

void cimd_fetch_cancel(struct cimd_fetch *f)
{
    if (!f)
        return;
    loop_timer_stop(&f->deadline);
    egress_lookup_cancel(f->lookup);
    f->lookup = NULL;
    if (f->easy)
        curl_loop_remove(f->c->cl, f->easy);
    unlink_fetch(f);
    release(f);
    free(f);
}

void cimd_free(struct cimd *c)
{
    if (!c)
        return;
    while (c->head)
        cimd_fetch_cancel(c->head);
    curl_loop_free(c->cl);
    free(c);
    curl_global_cleanup();
}

static bool header_is(const char *h, size_t n, const char *name, const char **value, size_t *vlen)
{
    size_t nl = strlen(name);
    if (n <= nl || h[nl] != ':' || strncasecmp(h, name, nl) != 0)
        return false;
    const char *v = h + nl + 1, *e = h + n;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *value = v;
    *vlen = (size_t)(e - v);
    return true;
}

/* Headers one line at a time. At their end the answer is judged before any of the body is
 * read: a status other than 200, a type that is not JSON or a length over the cap stops it. */
static size_t on_header(char *data, size_t size, size_t nitems, void *userdata)
{
    struct cimd_fetch *f = userdata;
    size_t n = size * nitems;
    const char *v;
    size_t vl;
    if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) { /* a new answer: 1xx ones come first */
        f->has_type = f->has_cache = false;
        f->content_type[0] = f->cache_control[0] = f->location[0] = '\0';
        f->content_length = -1;
    } else if (n <= 2 && (data[0] == '\r' || data[0] == '\n')) {
        long code = 0;
        curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 100 && code < 200)
            return n;
        f->status = code;
        if (code != 200)
            f->stopped = STOP_STATUS;
        else if (!cimd_content_type_ok(f->has_type ? f->content_type : NULL))
            f->stopped = STOP_TYPE;
        else if (f->content_length > CIMD_BODY_MAX)
            f->stopped = STOP_SIZE;
        return f->stopped ? 0 : n;
    } else if (header_is(data, n, "content-type", &v, &vl)) {
        f->has_type = true;
        snprintf(f->content_type, sizeof(f->content_type), "%.*s", (int)vl, v);
    } else if (header_is(data, n, "cache-control", &v, &vl)) {
        size_t have = strlen(f->cache_control);
        snprintf(f->cache_control + have, sizeof(f->cache_control) - have, "%s%.*s",
                 f->has_cache ? ", " : "", (int)vl, v);
        f->has_cache = true;
    } else if (header_is(data, n, "content-length", &v, &vl)) {
        int64_t len = delta_seconds(v, vl);
        f->content_length = len >= 0 && v[0] != '"' ? len : -1;
    } else if (header_is(data, n, "location", &v, &vl)) {
        snprintf(f->location, sizeof(f->location), "%.*s", (int)vl, v);
    }
    return n;
}

/* The body, counted as it arrives whatever Content-Length said. */
static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct cimd_fetch *f = userdata;
    size_t n = size * nmemb;
    if (n > CIMD_BODY_MAX - f->body_len) {
        f->stopped = STOP_SIZE;
        return 0;
    }
    if (!f->body)
        f->body = xmalloc(CIMD_BODY_MAX + 1);
    memcpy(f->body + f->body_len, data, n);
    f->body_len += n;
    return n;
}

static void on_done(CURL *easy, CURLcode rc)
{
    struct cimd_fetch *f = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&f);
    struct err e = {0};
    const char *why = f->errbuf[0] ? f->errbuf : curl_easy_strerror(rc);
    if (f->stopped == STOP_SIZE || rc == CURLE_FILESIZE_EXCEEDED)
        err_set(&e, -EFBIG, "the document is larger than %d bytes", CIMD_BODY_MAX);
    else if (f->stopped == STOP_ADDRESS || f->pin.refused)
        err_set(&e, -EACCES, "curl was about to connect to an address that was not checked");
    else if (f->stopped == STOP_STATUS && f->status >= 300 && f->status < 400)
        err_set(&e, -EPROTO,
                "the answer is a redirect (HTTP %ld%s%s), which is not followed: a client_id "
                "must be the document's own URL",
                f->status, f->location[0] ? " to " : "", f->location);
    else if (f->stopped == STOP_STATUS)
        err_set(&e, -EPROTO, "the answer is HTTP %ld, not 200", f->status);
    else if (f->stopped == STOP_TYPE)
        err_set(&e, -EPROTO, "the answer's content type '%s' is not JSON", f->content_type);
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        err_set(&e, -ETIMEDOUT, "no complete answer within %ld ms of the start", f->c->total_ms);
    else if (rc == CURLE_COULDNT_CONNECT)
        err_set(&e, -ECONNREFUSED, "cannot connect: %s", why);
    else if (rc == CURLE_COULDNT_RESOLVE_HOST)
        err_set(&e, -EHOSTUNREACH, "cannot connect: %s", why);
    else if (rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_PEER_FAILED_VERIFICATION ||
             rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_CERTPROBLEM ||
             rc == CURLE_SSL_CIPHER || rc == CURLE_UNSUPPORTED_PROTOCOL)
        err_set(&e, -EPROTO, "%s", why);
    else if (rc == CURLE_URL_MALFORMAT)
        err_set(&e, -EINVAL, "%s", why);
    else if (rc != CURLE_OK)
        err_set(&e, -EIO, "%s", why);
    else if (f->status != 200)
        err_set(&e, -EPROTO, "the answer is HTTP %ld, not 200", f->status);
    else
        cimd_document_parse(f->url, f->body ? f->body : "", f->body_len, &f->client, &e);
    if (e.code) {
        err_wrap(&e, "client metadata '%.*s'", SHOWN, f->url);
        finish(f, NULL, 0, &e);
        return;
    }
    finish(f, &f->client, cimd_max_age(f->has_cache ? f->cache_control : NULL), NULL);
}

static void start_transfer(struct cimd_fetch *f, const struct egress_addr *addrs, int n)
{
    struct cimd *c = f->c;
    f->content_length = -1;
    CURL *e = f->easy = curl_easy_init();
    if (!e)
        abort(); /* out of memory */
    egress_pin_apply(&f->pin, e, f->u.host, f->u.port, addrs, n);
    f->headers = curl_slist_append(NULL, "Accept: application/json");
    curl_easy_setopt(e, CURLOPT_URL, f->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, f);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, f->u.http ? "http" : "https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    /* what resolution left of the whole fetch's time (at least 1 ms: 0 would mean none) */
    long left = (long)(f->deadline_ms - time_mono_ms());
    left = left < 1 ? 1 : left;
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, c->connect_ms < left ? c->connect_ms : left);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, left);
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)CIMD_BODY_MAX);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->headers);
    curl_easy_setopt(e, CURLOPT_USERAGENT,
                     "sandbox-mcp/" SANDBOX_MCP_VERSION " (OAuth client metadata)");
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, f);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, f->errbuf);
    curl_loop_add(c->cl, e);
}

static void on_resolve_timeout(struct loop_timer *t)
{
    struct cimd_fetch *f = container_of(t, struct cimd_fetch, deadline);
    egress_lookup_cancel(f->lookup); /* the thread finishes on its own */
    f->lookup = NULL;
    struct err e = {0};
    err_set(&e, -ETIMEDOUT, "client metadata '%.*s': cannot resolve '%s' within %ld ms", SHOWN,
            f->url, f->u.host, f->c->total_ms);
    finish(f, NULL, 0, &e);
}

static void on_resolved(void *ctx, const struct egress_addr *addrs, int n, const struct err *err)
{
    struct cimd_fetch *f = ctx;
    f->lookup = NULL;
    loop_timer_stop(&f->deadline);
    struct err e = {0};
    if (err) {
        e = *err;
        err_wrap(&e, "client metadata '%.*s'", SHOWN, f->url);
        finish(f, NULL, 0, &e);
        return;
    }
    if (addrs_check(f->url, &f->u, addrs, n, &e) < 0) {
        finish(f, NULL, 0, &e);
        return;
    }
    start_transfer(f, addrs, n);
}

/* Fetches under way for requester and to host: -EBUSY with a message when either, or all of
 * them, is at its limit. */
static int slot_check(struct cimd *c, const char *url, const char *requester, const char *host,
                      struct err *err)
{
    if (c->n >= c->fetches)
        return err_set(err, -EBUSY,
                       "cannot fetch client metadata '%.*s' now: %d fetches are under way; retry "
                       "later",
                       SHOWN, url, c->fetches);
    int of_requester = 0, of_host = 0;
    for (const struct cimd_fetch *f = c->head; f; f = f->next) {
        of_requester += requester[0] && strcmp(f->requester, requester) == 0;
        of_host += strcmp(f->host, host) == 0;
    }
    if (of_requester >= c->per_requester)
        return err_set(err, -EBUSY,
                       "cannot fetch client metadata '%.*s' now: %d fetches asked for from this "
                       "address are under way, the most one address may have; retry later",
                       SHOWN, url, of_requester);
    if (of_host >= c->per_host)
        return err_set(err, -EBUSY,
                       "cannot fetch client metadata '%.*s' now: %d fetches from '%s' are under "
                       "way, the most one host may have; retry later",
                       SHOWN, url, of_host, host);
    return 0;
}

struct cimd_fetch *cimd_fetch(struct cimd *c, const char *url, const char *requester,
                              cimd_fetched_fn cb, void *ctx, struct err *err)
{
    struct client_url u;
    if (url_parse(url, c->allow_loopback_http, &u, err) < 0)
        return NULL;
    unsigned char key[32];
    sha256_bytes(url, strlen(url), key);
    if (failure_find(c, key, err))
        return NULL;
    char host[256];
    struct egress_addr lit;
    bool is_addr = egress_addr_parse(u.host, &lit) == 0;
    if (is_addr) {
        egress_addr_format(&lit, host);
    } else {
        for (size_t i = 0; i <= strlen(u.host); i++)
            host[i] = (char)tolower((unsigned char)u.host[i]);
    }
    if (!requester)
        requester = "";
    if (slot_check(c, url, requester, host, err) < 0)
        return NULL;
    struct cimd_fetch *f = xcalloc(1, sizeof(*f));
    f->c = c;
    f->cb = cb;
    f->ctx = ctx;
    f->u = u;
    memcpy(f->url, url, strlen(url) + 1);
    memcpy(f->key, key, sizeof(key));
    snprintf(f->host, sizeof(f->host), "%s", host);
    snprintf(f->requester, sizeof(f->requester), "%s", requester);
    f->next = c->head;
    if (c->head)
        c->head->prev = f;
    c->head = f;
    c->n++;
    f->deadline_ms = time_mono_ms() + c->total_ms;
    if (is_addr) {
        if (addrs_check(f->url, &f->u, &lit, 1, err) < 0) {
            cimd_fetch_cancel(f);
            return NULL;
        }
        start_transfer(f, &lit, 1);
        return f;
    }
    f->lookup = egress_resolve(u.host, f->requester, c->per_requester, on_resolved, f, err);
    if (!f->lookup) {
        err_wrap(err, "client metadata '%.*s'", SHOWN, url);
        cimd_fetch_cancel(f);
        return NULL;
    }
    loop_timer_start(&f->deadline, (uint64_t)c->total_ms, on_resolve_timeout);
    return f;
}

/* Client ID Metadata Documents: the fetch (see cimd.h and the top of cimd.c). A fetch is a
 * request the server makes to wherever a stranger's client_id points: the name resolved by the
 * server, every address public, curl pinned to them, no redirects, a few seconds and 64 KiB, a
 * few slots per requester and per host, and failures remembered. The checks of what comes back
 * are cimd.c's, pure. Everything here runs on the loop. */
#include "auth/cimd.h"
#include "auth/cimd_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cleanup.h"
#include "base/curl_loop.h"
#include "base/ids.h"
#include "base/loop.h"
#include "base/util.h"
#include "version.h"

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
        int64_t len = cimd_delta_seconds(v, vl);
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
    if (cimd_url_addrs_check(f->url, &f->u, addrs, n, &e) < 0) {
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
    if (cimd_url_parse(url, c->allow_loopback_http, &u, err) < 0)
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
        if (cimd_url_addrs_check(f->url, &f->u, &lit, 1, err) < 0) {
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

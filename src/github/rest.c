/* GitHub's REST API from the server: a call is one libcurl easy handle on the loop's multi
 * handle (base/curl_loop.c), its answer read into a buffer of a bounded size, parsed as JSON
 * unless it is text, and handed to the caller's callback.
 *
 * A call GitHub refused for now is made again, up to github_rest_set_retries' count and wait:
 * a 429, a 403 that is a rate limit (a secondary one by its message, or Retry-After, or no
 * requests left), and a connection never made are refusals of a request GitHub did not act on;
 * a 5xx or a cut connection may have been acted on, so only a call that is safe to repeat
 * (GET and the like, or one its caller marked idempotent) is made again after one. The wait is
 * what GitHub asks (Retry-After, or until the rate limit's reset), else a backoff doubling from
 * the base with jitter; a wait past what is left of the budget ends the call with the refusal. */
#include "github/rest.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/curl_loop.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/util.h"

#define REST_TIMEOUT_MS 30000
#define REST_MAX_DEFAULT (1u << 20)

struct github_call {
    struct github_rest *g;
    struct github_call *next;
    github_rest_fn fn;
    void *ctx;
    CURL *easy;
    struct curl_slist *headers;
    char *post;
    char *what; /* "GET /repos/..." for the log */
    char *data; /* the answer: a ring of max bytes when tail, else a prefix */
    size_t len, max, total;
    bool tail, overflow;
    char etag[128];
    long rate_remaining, rate_reset;
    long retry_after; /* Retry-After in seconds, -1 when not said */
    bool repeatable;  /* safe to make again after a 5xx or a cut connection */
    unsigned attempts;
    uint64_t waited_ms;
    struct loop_timer again; /* the next attempt, while waiting */
};

struct github_rest {
    struct curl_loop *cl;
    struct github_call *calls;
    unsigned retries;
    uint64_t base_ms, budget_ms;
};

static void on_done(CURL *easy, CURLcode rc);

struct github_rest *github_rest_new(void)
{
    struct github_rest *g = xcalloc(1, sizeof(*g));
    g->cl = curl_loop_new(on_done);
    g->retries = GITHUB_RETRIES_DEFAULT;
    g->base_ms = GITHUB_RETRY_BASE_MS_DEFAULT;
    g->budget_ms = GITHUB_RETRY_BUDGET_MS_DEFAULT;
    return g;
}

void github_rest_set_retries(struct github_rest *g, unsigned retries, uint64_t base_ms,
                             uint64_t budget_ms)
{
    g->retries = retries;
    g->base_ms = base_ms ? base_ms : 1;
    g->budget_ms = budget_ms;
}

static void call_free(struct github_call *c)
{
    loop_timer_stop(&c->again);
    curl_easy_cleanup(c->easy);
    for (struct curl_slist *h = c->headers; h; h = h->next) /* the credential's line */
        explicit_bzero(h->data, strlen(h->data));
    curl_slist_free_all(c->headers);
    free(c->post);
    free(c->what);
    free(c->data);
    free(c);
}

static void unlink_call(struct github_call *c)
{
    for (struct github_call **pp = &c->g->calls; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
}

void github_rest_free(struct github_rest *g)
{
    if (!g)
        return;
    while (g->calls) {
        struct github_call *c = g->calls;
        g->calls = c->next;
        curl_loop_remove(g->cl, c->easy);
        call_free(c);
    }
    curl_loop_free(g->cl);
    free(g);
}

void github_rest_cancel(struct github_call *c)
{
    if (!c)
        return;
    unlink_call(c);
    curl_loop_remove(c->g->cl, c->easy);
    call_free(c);
}

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    struct github_call *c = ctx;
    size_t len = size * n;
    c->total += len;
    if (!c->tail) {
        if (c->len + len > c->max) {
            c->overflow = true;
            return 0;
        }
        memcpy(c->data + c->len, data, len);
        c->len += len;
        return len;
    }
    /* keep the last max bytes: slide what is kept down, then append */
    if (len >= c->max) {
        memcpy(c->data, data + len - c->max, c->max);
        c->len = c->max;
    } else {
        if (c->len + len > c->max) {
            size_t drop = c->len + len - c->max;
            memmove(c->data, c->data + drop, c->len - drop);
            c->len -= drop;
        }
        memcpy(c->data + c->len, data, len);
        c->len += len;
    }
    return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
    struct github_call *c = ctx;
    size_t len = size * n;
    if (len > 22 && strncasecmp(data, "x-ratelimit-remaining:", 22) == 0)
        c->rate_remaining = strtol(data + 22, NULL, 10);
    else if (len > 18 && strncasecmp(data, "x-ratelimit-reset:", 18) == 0)
        c->rate_reset = strtol(data + 18, NULL, 10);
    else if (len > 12 && strncasecmp(data, "retry-after:", 12) == 0)
        c->retry_after = strtol(data + 12, NULL, 10);
    if (len > 5 && strncasecmp(data, "etag:", 5) == 0) {
        size_t k = 5;
        while (k < len && (data[k] == ' ' || data[k] == '\t'))
            k++;
        size_t e = len;
        while (e > k && (data[e - 1] == '\r' || data[e - 1] == '\n' || data[e - 1] == ' '))
            e--;
        snprintf(c->etag, sizeof(c->etag), "%.*s", (int)(e - k), data + k);
    }
    return len;
}

struct github_call *github_rest_call(struct github_rest *g, const struct github_request *rq,
                                     github_rest_fn fn, void *ctx)
{
    struct github_call *c = xcalloc(1, sizeof(*c));
    c->g = g;
    c->fn = fn;
    c->ctx = ctx;
    c->max = rq->max ? rq->max : REST_MAX_DEFAULT;
    c->rate_remaining = -1;
    c->retry_after = -1;
    c->repeatable = rq->idempotent || strcmp(rq->method, "POST") != 0;
    c->tail = rq->tail != 0;
    c->data = xmalloc(c->max + 1);
    c->what = xasprintf("%s %s", rq->method, rq->path);
    CURL *e = c->easy = curl_easy_init();
    char *auth = xasprintf("Authorization: Bearer %s", rq->credential);
    c->headers = curl_slist_append(c->headers, auth);
    explicit_bzero(auth, strlen(auth));
    free(auth);
    c->headers = curl_slist_append(c->headers, "Accept: application/vnd.github+json");
    c->headers = curl_slist_append(c->headers, "X-GitHub-Api-Version: 2022-11-28");
    c->headers = curl_slist_append(c->headers, "User-Agent: sandbox-mcp");
    c->headers = curl_slist_append(c->headers, "Expect:");
    if (rq->etag && *rq->etag) {
        char *inm = xasprintf("If-None-Match: %s", rq->etag);
        c->headers = curl_slist_append(c->headers, inm);
        free(inm);
    }
    if (rq->body) {
        c->post = json_dumps(rq->body, JSON_COMPACT);
        c->headers = curl_slist_append(c->headers, "Content-Type: application/json");
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->post);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(c->post));
    }
    char *url = xasprintf("%s%s", rq->api, rq->path);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, rq->method);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, c);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    /* libcurl sends a header-set Authorization to the first host only */
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, rq->follow ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 2L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, REST_TIMEOUT_MS);
    free(url);
    c->next = g->calls;
    g->calls = c;
    curl_loop_add(g->cl, e);
    return c;
}

static void on_again(struct loop_timer *t)
{
    struct github_call *c = container_of(t, struct github_call, again);
    curl_loop_add(c->g->cl, c->easy);
}

/* Whether GitHub refused the call for now, without acting on it (or, for a call safe to repeat,
 * may not have finished it): worth making again. */
static bool refused_for_now(const struct github_call *c, CURLcode rc, long status, const json_t *j)
{
    if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)
        return true; /* never sent */
    if (rc != CURLE_OK)
        return c->repeatable && !c->overflow;
    if (status == 429)
        return true;
    const char *msg = json_string_value(json_object_get(j, "message"));
    if (status == 403 &&
        (c->retry_after >= 0 || c->rate_remaining == 0 || (msg && strcasestr(msg, "rate limit"))))
        return true;
    return c->repeatable && (status == 500 || status == 502 || status == 503 || status == 504);
}

/* How long to wait before the next attempt (ms). */
static uint64_t wait_for(const struct github_call *c)
{
    const struct github_rest *g = c->g;
    if (c->retry_after >= 0)
        return (uint64_t)c->retry_after * 1000;
    int64_t now = time_now_ms() / 1000;
    if (c->rate_remaining == 0 && c->rate_reset > now)
        return (uint64_t)(c->rate_reset - now + 1) * 1000;
    uint64_t d = g->base_ms << (c->attempts < 16 ? c->attempts : 16), r;
    rand_bytes(&r, sizeof(r));
    return d + r % (d / 2 + 1);
}

/* Make c again later, when GitHub refused it for now and the budget allows: true when it will. */
static bool again_later(struct github_call *c, CURLcode rc, long status, const json_t *j)
{
    struct github_rest *g = c->g;
    if (c->attempts >= g->retries || !refused_for_now(c, rc, status, j))
        return false;
    uint64_t wait = wait_for(c);
    if (c->waited_ms + wait > g->budget_ms) {
        log_warn("github call not retried call=\"%s\" status=%ld wait_ms=%llu budget_ms=%llu",
                 c->what, status, (unsigned long long)wait,
                 (unsigned long long)(g->budget_ms - c->waited_ms));
        return false;
    }
    c->attempts++;
    c->waited_ms += wait;
    log_info("github retry call=\"%s\" status=%ld attempt=%u wait_ms=%llu", c->what, status,
             c->attempts, (unsigned long long)wait);
    /* what the refused attempt brought is forgotten */
    c->len = c->total = 0;
    c->overflow = false;
    c->etag[0] = '\0';
    c->rate_remaining = c->retry_after = -1;
    c->rate_reset = 0;
    c->next = g->calls;
    g->calls = c;
    loop_timer_start(&c->again, wait, on_again);
    return true;
}

static void on_done(CURL *easy, CURLcode rc)
{
    struct github_call *c = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&c);
    unlink_call(c);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    c->data[c->len] = '\0';
    const char *type = NULL;
    curl_easy_getinfo(easy, CURLINFO_CONTENT_TYPE, &type);
    bool is_json = type && strstr(type, "json");
    json_t *j = rc == CURLE_OK && is_json ? json_loadb(c->data, c->len, 0, NULL) : NULL;
    if (again_later(c, rc, status, j)) {
        json_decref(j);
        return;
    }
    char why[400] = "";
    if (rc != CURLE_OK) {
        snprintf(why, sizeof(why), "cannot reach GitHub's API: %s",
                 c->overflow ? "its answer was too large" : curl_easy_strerror(rc));
        status = 0;
    } else if (status >= 300 && status != 304) {
        const char *msg = json_string_value(json_object_get(j, "message"));
        snprintf(why, sizeof(why), "HTTP %ld%s%.300s", status, msg ? ": " : "", msg ? msg : "");
        for (char *p = why; *p; p++)
            if ((unsigned char)*p < ' ')
                *p = ' ';
    }
    if (why[0])
        log_warn("github call failed call=\"%s\" err=\"%s\"", c->what, why);
    struct github_answer a = {.status = status,
                              .json = j,
                              .text = is_json ? NULL : c->data,
                              .text_len = is_json ? 0 : c->len,
                              .etag = c->etag,
                              .why = why,
                              .rate_remaining = c->rate_remaining,
                              .rate_reset = c->rate_reset};
    if (c->fn)
        c->fn(c->ctx, &a);
    json_decref(j);
    call_free(c);
}

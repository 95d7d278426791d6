/* /proxy/<service>/<path>: check the agent's token, swap in the real key, forward, and stream
 * the answer back as it arrives. One transfer per request, owned by the request's pool: h2o calls
 * stop() before it frees the pool when the client goes away, and stop() aborts the upstream
 * transfer, which the upstream sees as a closed connection. h2o notices a client that went away
 * only when it writes to it, so while nothing has been sent yet (a model thinking for minutes)
 * a once-a-second look at the client's socket does the noticing. */
#include "proxy/proxy_internal.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/seal.h"
#include "base/ids.h"
#include "base/loop.h"
#include "base/log.h"
#include "base/util.h"
#include "http/watch.h"
#include "proxy/receive_pack.h"
#include "proxy/token.h"
#include "store/store.h"

#define PENDING_MAX (1 << 20) /* response bytes buffered before the upstream is paused */

#define USAGE_FLUSH_MS 1000
#define USAGE_PENDING_MAX 64

struct proxy {
    struct store *store;
    unsigned char *key;
    size_t keylen;
    struct provider *providers;
    size_t nproviders;
    struct curl_loop *cl;
    uint64_t max_request_bytes;
    uint64_t stall_seconds;
    char *names;            /* "anthropic, github, openai" */
    struct proxy_llm *llms; /* the providers with an "agent" object, pointing into providers */
    size_t nllms;
    unsigned char seal_key[SEAL_KEY_BYTES];
    bool have_seal_key;
    /* Usage not yet written. A row update for every request would be a transaction for every
     * request (file locks and a WAL write, several times the system calls of the request
     * itself), so requests add to this and the rows are written together: within
     * USAGE_FLUSH_MS, at once when USAGE_PENDING_MAX tokens are waiting, and when the proxy
     * stops. */
    struct store_token_usage usage[USAGE_PENDING_MAX];
    size_t nusage;
    struct loop_timer usage_timer;
    proxy_run_lookup_fn run_lookup; /* for warm tokens */
    void *run_lookup_ctx;
};

static struct proxy *the_proxy; /* for curl's completion callback */

static void on_client_gone(struct http_watch *w);

/* Verified tokens, by SHA-256 of the token text: an agent sends the same token with every
 * request, so the signature check and claim parsing run once, and the revocation lookup at most
 * once a second per token. Expiry is checked on every use. */
#define TOKEN_CACHE_SIZE 256
#define REVOCATION_RECHECK_MS 1000
struct token_cache_entry {
    unsigned char hash[32];
    bool used;
    struct proxy_claims claims;
    int64_t checked_ms; /* monotonic time of the last revocation lookup */
};
static struct token_cache_entry token_cache[TOKEN_CACHE_SIZE];

struct transfer {
    h2o_generator_t gen;
    struct proxy *p;
    h2o_req_t *req;
    const struct provider *prov;
    CURL *easy;
    struct curl_slist *headers;
    char *url;
    char jti[64];
    char user[64];
    char run[64];
    int status;
    bool headers_done; /* upstream's final status and headers received */
    bool started;      /* h2o response started */
    bool sending, final_sent, stopped, paused, curl_done, sse;
    struct buf pending, inflight;
    struct usage_parser usage;
    int64_t t0;
    uint64_t bytes;
    struct http_watch watch; /* the client, until the response starts */
    struct loop_timer flush_soon;
};

static const char *const hop_by_hop[] = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
};

static bool is_hop(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(hop_by_hop) / sizeof(hop_by_hop[0]); i++)
        if (strlen(hop_by_hop[i]) == len && strncasecmp(hop_by_hop[i], name, len) == 0)
            return true;
    return false;
}

static void respond_error(h2o_req_t *req, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void respond_error(h2o_req_t *req, int status, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *body = json_pack("{s:s, s:s}", "error", msg, "code", code);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    static const char *const reasons[] = {
        [400] = "Bad Request", [401] = "Unauthorized",        [403] = "Forbidden",
        [404] = "Not Found",   [405] = "Method Not Allowed",  [413] = "Payload Too Large",
        [502] = "Bad Gateway", [503] = "Service Unavailable", [504] = "Gateway Timeout"};
    req->res.status = status;
    req->res.reason = status < 505 && reasons[status] ? reasons[status] : "Error";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                   H2O_STRLIT("application/json"));
    size_t n = strlen(text);
    h2o_iovec_t v = h2o_strdup(&req->pool, text, n);
    free(text);
    req->res.content_length = n;
    h2o_send_inline(req, v.base, v.len);
}

/* --- response side --- */

static void flush(struct transfer *t)
{
    if (t->sending || t->final_sent || t->stopped || !t->started)
        return;
    bool final = t->curl_done;
    if (t->pending.len == 0 && !final)
        return;
    struct buf tmp = t->inflight;
    t->inflight = t->pending;
    t->pending = tmp;
    buf_reset(&t->pending);
    t->sending = true;
    if (final)
        t->final_sent = true;
    h2o_iovec_t v = h2o_iovec_init(t->inflight.data, t->inflight.len);
    h2o_send(t->req, &v, v.len ? 1 : 0, final ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
}

/* What curl hands over in one go (every chunk of a chunked reply that one read brought, and
 * its end) leaves in one write: the flush waits until the loop has handled what is ready. */
static void on_flush_soon(struct loop_timer *lt)
{
    flush(container_of(lt, struct transfer, flush_soon));
}

static void on_proceed(h2o_generator_t *gen, h2o_req_t *req)
{
    struct transfer *t = (struct transfer *)gen;
    t->sending = false;
    buf_reset(&t->inflight);
    /* Sending the final chunk lets h2o dispose of the request, and t with it. */
    bool done = t->curl_done;
    flush(t);
    if (done)
        return;
    if (t->paused && !t->curl_done && t->pending.len < PENDING_MAX / 2) {
        t->paused = false;
        curl_easy_pause(t->easy, CURLPAUSE_CONT);
    }
}

static void release_curl(struct transfer *t)
{
    if (t->easy) {
        curl_easy_cleanup(t->easy);
        t->easy = NULL;
    }
    curl_slist_free_all(t->headers);
    t->headers = NULL;
    free(t->url);
    t->url = NULL;
}

static void on_stop(h2o_generator_t *gen, h2o_req_t *req)
{
    struct transfer *t = (struct transfer *)gen;
    t->stopped = true;
    if (!t->curl_done && t->easy) {
        /* The client went away: abort the upstream transfer, closing its connection. */
        curl_loop_remove(t->p->cl, t->easy);
        log_info("proxy aborted service=%s user=%s run=%s reason=client-gone bytes=%llu",
                 t->prov->name, t->user, t->run[0] ? t->run : "-", (unsigned long long)t->bytes);
        t->curl_done = true;
    }
    release_curl(t);
}

static void on_dispose(void *ptr)
{
    struct transfer *t = ptr;
    http_watch_stop(&t->watch);
    loop_timer_stop(&t->flush_soon);
    release_curl(t);
    buf_release(&t->pending);
    buf_release(&t->inflight);
    usage_finish(&t->usage);
}

static void start_response(struct transfer *t)
{
    if (t->started)
        return;
    t->started = true;
    http_watch_stop(&t->watch);
    t->req->res.status = t->status ? t->status : 502;
    t->req->res.reason = "";
    h2o_start_response(t->req, &t->gen);
}

static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
    struct transfer *t = ctx;
    size_t len = size * n;
    if (t->stopped)
        return 0;
    if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        /* a new status line (after a 1xx, a fresh set of headers follows) */
        const char *sp = memchr(data, ' ', len);
        t->status = sp ? atoi(sp + 1) : 502;
        t->req->res.headers = (h2o_headers_t){NULL};
        t->req->res.content_length = SIZE_MAX;
        return len;
    }
    size_t l = len;
    while (l && (data[l - 1] == '\n' || data[l - 1] == '\r'))
        l--;
    if (l == 0) {
        if (t->status >= 200)
            t->headers_done = true;
        return len;
    }
    const char *colon = memchr(data, ':', l);
    if (!colon || t->status < 200)
        return len;
    size_t nlen = (size_t)(colon - data);
    const char *v = colon + 1;
    size_t vlen = l - nlen - 1;
    while (vlen && (*v == ' ' || *v == '\t'))
        v++, vlen--;
    if (nlen == 14 && strncasecmp(data, "content-length", 14) == 0) {
        /* The body is passed on unchanged, so its length is known: the client then has the
         * whole reply with its last byte, rather than after a terminating chunk that h2o can
         * only send once the write of the body has completed. curl ends the transfer at this
         * length, and an upstream that sends less fails it, which cuts the client off. */
        size_t length = 0, i = 0;
        while (i < vlen && i < 15 && isdigit((unsigned char)v[i]))
            length = length * 10 + (size_t)(v[i++] - '0');
        if (i > 0 && i == vlen)
            t->req->res.content_length = length;
        return len;
    }
    if (is_hop(data, nlen))
        return len;
    if (nlen == 12 && strncasecmp(data, "content-type", 12) == 0 && vlen >= 17 &&
        strncasecmp(v, "text/event-stream", 17) == 0)
        t->sse = true;
    h2o_iovec_t name = h2o_strdup(&t->req->pool, data, nlen);
    h2o_strtolower(name.base, name.len);
    h2o_iovec_t value = h2o_strdup(&t->req->pool, v, vlen);
    h2o_add_header_by_str(&t->req->pool, &t->req->res.headers, name.base, name.len, 0, NULL,
                          value.base, value.len);
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    struct transfer *t = ctx;
    size_t len = size * n;
    if (t->stopped)
        return 0;
    if (t->pending.len >= PENDING_MAX) {
        /* The client reads slower than the upstream sends: hold the upstream. curl hands the
         * same bytes again after the pause. */
        t->paused = true;
        return CURL_WRITEFUNC_PAUSE;
    }
    if (!t->started) {
        usage_init(&t->usage, t->prov->usage, t->sse);
        start_response(t);
    }
    bool first = t->bytes == 0;
    buf_append(&t->pending, data, len);
    usage_feed(&t->usage, data, len);
    t->bytes += len;
    if (first && t->sse)
        flush(t); /* a stream's first event goes out at once: it is what its client waits for */
    else if (!t->sending)
        loop_timer_start(&t->flush_soon, 0, on_flush_soon);
    return len;
}

static void usage_flush(struct proxy *p)
{
    loop_timer_stop(&p->usage_timer);
    if (p->nusage == 0)
        return;
    struct err err = {0};
    if (store_proxy_token_usage(p->store, p->usage, p->nusage, &err) < 0)
        log_error("proxy usage not recorded tokens=%zu err=\"%s\"", p->nusage, err.msg);
    p->nusage = 0;
}

static void on_usage_timer(struct loop_timer *lt)
{
    usage_flush(container_of(lt, struct proxy, usage_timer));
}

static void record_usage(struct transfer *t)
{
    struct proxy *p = t->p;
    usage_finish(&t->usage);
    size_t i = 0;
    while (i < p->nusage && strcmp(p->usage[i].jti, t->jti) != 0)
        i++;
    if (i == p->nusage) {
        if (p->nusage == USAGE_PENDING_MAX)
            usage_flush(p);
        i = p->nusage++;
        p->usage[i] = (struct store_token_usage){0};
        snprintf(p->usage[i].jti, sizeof(p->usage[i].jti), "%s", t->jti);
        if (p->nusage == 1)
            loop_timer_start(&p->usage_timer, USAGE_FLUSH_MS, on_usage_timer);
    }
    p->usage[i].requests++;
    p->usage[i].input_tokens += t->usage.input;
    p->usage[i].output_tokens += t->usage.output;
}

static void on_done(CURL *easy, CURLcode rc)
{
    struct transfer *t = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&t);
    t->curl_done = true;
    http_watch_stop(&t->watch);
    long ms = (long)(time_mono_ms() - t->t0);
    if (rc != CURLE_OK) {
        bool timeout = rc == CURLE_OPERATION_TIMEDOUT;
        log_warn("proxy upstream failed service=%s user=%s run=%s err=\"%s\" ms=%ld", t->prov->name,
                 t->user, t->run[0] ? t->run : "-", curl_easy_strerror(rc), ms);
        if (!t->started) {
            release_curl(t);
            respond_error(t->req, timeout ? 504 : 502, timeout ? "upstream_timeout" : "bad_gateway",
                          timeout ? "upstream '%s' did not answer in time"
                                  : "cannot reach upstream '%s'",
                          t->prov->name);
            return;
        }
        /* mid-stream: end the response abnormally so the client sees it was cut */
        release_curl(t);
        if (!t->sending && !t->final_sent) {
            t->final_sent = true;
            h2o_send(t->req, NULL, 0, H2O_SEND_STATE_ERROR);
        }
        return;
    }
    if (!t->started) {
        usage_init(&t->usage, t->prov->usage, t->sse);
        start_response(t);
    }
    flush(t); /* the client has its answer before the bookkeeping below */
    release_curl(t);
    record_usage(t);
    log_info("proxy request service=%s user=%s run=%s status=%d bytes=%llu in=%lld out=%lld ms=%ld",
             t->prov->name, t->user, t->run[0] ? t->run : "-", t->status,
             (unsigned long long)t->bytes, (long long)t->usage.input, (long long)t->usage.output,
             ms);
}

/* --- request side --- */

static const struct provider *find_provider(const struct proxy *p, const char *name, size_t len)
{
    for (size_t i = 0; i < p->nproviders; i++)
        if (strlen(p->providers[i].name) == len && memcmp(p->providers[i].name, name, len) == 0)
            return &p->providers[i];
    return NULL;
}

static h2o_iovec_t header_value(h2o_req_t *req, const char *name)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, strlen(name), -1);
    if (i < 0)
        return h2o_iovec_init(NULL, 0);
    h2o_iovec_t v = req->headers.entries[i].value;
    while (v.len && (v.base[0] == ' ' || v.base[0] == '\t'))
        v.base++, v.len--;
    while (v.len && (v.base[v.len - 1] == ' ' || v.base[v.len - 1] == '\t'))
        v.len--;
    return v;
}

static h2o_iovec_t trim(h2o_iovec_t v)
{
    while (v.len && (v.base[0] == ' ' || v.base[0] == '\t'))
        v.base++, v.len--;
    while (v.len && (v.base[v.len - 1] == ' ' || v.base[v.len - 1] == '\t'))
        v.len--;
    return v;
}

/* The agent's token from an x-api-key or Authorization header value, in the forms allowed by
 * from (a provider's token_from), copied NUL-terminated into out. Returns its length, 0 if
 * there is none or it does not fit. */
static size_t token_of(unsigned from, h2o_iovec_t x_api_key, h2o_iovec_t authorization, char *out,
                       size_t cap)
{
    h2o_iovec_t v = trim(x_api_key), tok = {NULL, 0};
    unsigned char raw[6144];
    if ((from & TOKEN_X_API_KEY) && v.len) {
        tok = v;
    } else if (v = trim(authorization),
               (from & TOKEN_BEARER) && v.len > 7 && strncasecmp(v.base, "Bearer ", 7) == 0) {
        tok = h2o_iovec_init(v.base + 7, v.len - 7);
    } else if ((from & TOKEN_BASIC_PASSWORD) && v.len > 6 &&
               strncasecmp(v.base, "Basic ", 6) == 0 && v.len < 8192) {
        ssize_t n = base64_decode(v.base + 6, v.len - 6, raw);
        const char *colon = n > 0 ? memchr(raw, ':', (size_t)n) : NULL;
        if (!colon)
            return 0;
        tok = h2o_iovec_init(colon + 1, (size_t)n - (size_t)(colon + 1 - (char *)raw));
    }
    if (!tok.len || tok.len >= cap)
        return 0;
    memcpy(out, tok.base, tok.len);
    out[tok.len] = '\0';
    return tok.len;
}

/* Set c's services from a comma-separated list: 0, or -E2BIG past PROXY_SERVICES_MAX (the
 * first of them kept). */
static int claims_set_services(struct proxy_claims *c, const char *services)
{
    char list[PROXY_SERVICES_MAX * 32 + 1];
    snprintf(list, sizeof(list), "%s", services);
    c->nservices = 0;
    for (char *save = NULL, *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        if (c->nservices == PROXY_SERVICES_MAX)
            return -E2BIG;
        snprintf(c->services[c->nservices++], sizeof(c->services[0]), "%s", s);
    }
    return 0;
}

/* The one check of an agent's token: signature and expiry (once per token, then from the cache),
 * and revocation (at most once a second per token). Returns 0 and fills claims, -EKEYREVOKED, or
 * -EACCES with err saying why. */
static int proxy_token_check(struct proxy *p, const char *token, size_t len,
                             struct proxy_claims *claims, struct err *err)
{
    unsigned char hash[32];
    sha256_bytes(token, len, hash);
    struct token_cache_entry *ce = &token_cache[hash[0] % TOKEN_CACHE_SIZE];
    int64_t now_ms = time_mono_ms();
    bool cached = ce->used && memcmp(ce->hash, hash, sizeof(hash)) == 0;
    if (cached) {
        *claims = ce->claims;
        if (claims->exp <= time_now_ms() / 1000) {
            ce->used = false;
            return err_set(err, -EACCES, "token expired");
        }
    } else {
        int r =
            proxy_token_verify(p->key, p->keylen, token, len, time_now_ms() / 1000, claims, err);
        if (r < 0)
            return r;
    }
    if (!cached || now_ms - ce->checked_ms >= REVOCATION_RECHECK_MS) {
        int r = store_proxy_token_check(p->store, claims->jti, err);
        if (r == -EKEYREVOKED) {
            ce->used = false;
            return r;
        }
        if (r < 0)
            return err_set(err, -EACCES, "unknown token");
        memcpy(ce->hash, hash, sizeof(hash));
        ce->claims = *claims;
        ce->checked_ms = now_ms;
        ce->used = true;
    }
    /* a warm agent's token stands for the run of its sandbox that is running now, if any, and
     * grants what that run's own token would */
    if (claims->warm) {
        struct proxy_run_grant g = {0};
        if (!p->run_lookup || !claims->sandbox[0] ||
            !p->run_lookup(p->run_lookup_ctx, claims->sandbox, claims->user, &g))
            return err_set(err, -ENOENT,
                           "this sandbox's agent token is honored only while one of its runs is "
                           "running");
        snprintf(claims->run, sizeof(claims->run), "%s", g.run);
        snprintf(claims->repo, sizeof(claims->repo), "%s", g.repo);
        snprintf(claims->branch, sizeof(claims->branch), "%s", g.repo[0] ? g.branch : "");
        claims_set_services(claims, g.services); /* as many as it minted */
    }
    return 0;
}

void proxy_set_run_lookup(struct proxy *p, proxy_run_lookup_fn fn, void *ctx)
{
    p->run_lookup = fn;
    p->run_lookup_ctx = ctx;
}

bool proxy_head_authorized(struct proxy *p, h2o_iovec_t x_api_key, h2o_iovec_t authorization,
                           const char *listener_sandbox)
{
    char token[PROXY_TOKEN_MAX + 1];
    size_t len = token_of(TOKEN_X_API_KEY | TOKEN_BEARER | TOKEN_BASIC_PASSWORD, x_api_key,
                          authorization, token, sizeof(token));
    struct proxy_claims claims;
    struct err err = {0};
    return len && proxy_token_check(p, token, len, &claims, &err) == 0 &&
           strcmp(claims.sandbox, listener_sandbox) == 0;
}

/* A path we are willing to pass on: printable, starting with '/', no dot segments, no encoded
 * dots or slashes (which upstreams might decode into a path the allow-list never saw). */
static bool path_clean(const char *p, size_t len)
{
    if (len == 0 || p[0] != '/')
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c <= 0x20 || c >= 0x7f || c == '\\')
            return false;
        if (c == '/' && i + 1 < len && p[i + 1] == '.')
            return false;
        if (c == '%' && i + 2 < len &&
            ((p[i + 1] == '2' && (tolower((unsigned char)p[i + 2]) == 'e' ||
                                  tolower((unsigned char)p[i + 2]) == 'f')) ||
             (p[i + 1] == '5' && tolower((unsigned char)p[i + 2]) == 'c')))
            return false;
    }
    return true;
}

static void add_request_headers(struct transfer *t, const char *key_value)
{
    h2o_req_t *req = t->req;
    const struct provider *prov = t->prov;
    for (size_t i = 0; i < req->headers.size; i++) {
        const h2o_header_t *h = &req->headers.entries[i];
        const char *name = h->name->base;
        size_t nlen = h->name->len;
        if (is_hop(name, nlen) || (nlen == 4 && strncasecmp(name, "host", 4) == 0) ||
            (nlen == 13 && strncasecmp(name, "authorization", 13) == 0) ||
            (nlen == 9 && strncasecmp(name, "x-api-key", 9) == 0) ||
            (nlen == 15 && strncasecmp(name, "accept-encoding", 15) == 0) ||
            (nlen == 6 && strncasecmp(name, "cookie", 6) == 0) ||
            (nlen == 6 && strncasecmp(name, "expect", 6) == 0) ||
            (strlen(prov->key_header) == nlen && strncasecmp(name, prov->key_header, nlen) == 0))
            continue;
        char *line = xasprintf("%.*s: %.*s", (int)nlen, name, (int)h->value.len, h->value.base);
        t->headers = curl_slist_append(t->headers, line);
        free(line);
    }
    char *key = xasprintf("%s: %s", prov->key_header, key_value);
    t->headers = curl_slist_append(t->headers, key);
    explicit_bzero(key, strlen(key));
    free(key);
    t->headers = curl_slist_append(t->headers, "Expect:");
}

static const char zero_id[] = "0000000000000000000000000000000000000000";

/* A push refused: answered 403, logged, and kept among the run's events (the agent's attempts
 * are part of what the run did). */
/* How many of a run's refused pushes become its events; the rest are only counted in the log.
 * By run id, in a small table (a run that loses its slot starts counting again). */
#define PUSH_EVENTS_MAX 32
static struct {
    char run[64];
    unsigned n;
} push_events[64];

static bool push_event_wanted(const char *run)
{
    unsigned h = 0;
    for (const char *c = run; *c; c++)
        h = h * 31 + (unsigned char)*c;
    size_t i = h % (sizeof(push_events) / sizeof(push_events[0]));
    if (strcmp(push_events[i].run, run) != 0) {
        snprintf(push_events[i].run, sizeof(push_events[i].run), "%s", run);
        push_events[i].n = 0;
    }
    return push_events[i].n++ < PUSH_EVENTS_MAX;
}

static void push_refused(struct proxy *p, h2o_req_t *req, const struct proxy_claims *claims,
                         const char *repo, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void push_refused(struct proxy *p, h2o_req_t *req, const struct proxy_claims *claims,
                         const char *repo, const char *fmt, ...)
{
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    /* code in a sandbox can ask again and again: the log says a few a second, and a run keeps
     * the first PUSH_EVENTS_MAX of a token's refusals */
    char key[80];
    snprintf(key, sizeof(key), "push %s", claims->jti);
    uint64_t suppressed = 0;
    if (log_ratelimit(key, 5, time_mono_ms(), &suppressed))
        log_info("proxy push refused user=%s run=%s repo=%s why=\"%s\" suppressed=%llu",
                 claims->user, claims->run[0] ? claims->run : "-", repo, why,
                 (unsigned long long)suppressed);
    if (claims->run[0] && push_event_wanted(claims->run)) {
        json_t *raw =
            json_pack("{s:s, s:s, s:s}", "type", "push_refused", "repository", repo, "reason", why);
        char *text = json_dumps(raw, JSON_COMPACT);
        json_decref(raw);
        char summary[512];
        snprintf(summary, sizeof(summary), "push to %s refused: %s", repo, why);
        struct store_run_event ev = {
            .time = time_now_ms(), .type = "push_refused", .summary = summary, .raw = text};
        struct err err = {0};
        if (store_run_add_events(p->store, claims->run, &ev, 1, -1, &err) < 0)
            log_error("push refusal not recorded run=%s err=\"%s\"", claims->run, err.msg);
        free(text);
    }
    respond_error(req, 403, "push_not_allowed", "%s", why);
}

/* Whether the request is part of a push: git-receive-pack's advertisement or the push itself. */
static bool is_push(h2o_req_t *req, const char *rest, size_t rlen)
{
    static const char rp[] = "/git-receive-pack";
    const char *query = req->query_at != SIZE_MAX ? req->path.base + req->query_at : "";
    size_t qlen = req->query_at != SIZE_MAX ? req->path.len - req->query_at : 0;
    bool advert = rlen >= 10 && memcmp(rest + rlen - 10, "/info/refs", 10) == 0 &&
                  h2o_strstr(query, qlen, H2O_STRLIT("git-receive-pack")) != SIZE_MAX;
    return advert || (rlen >= sizeof(rp) - 1 &&
                      memcmp(rest + rlen - (sizeof(rp) - 1), rp, sizeof(rp) - 1) == 0);
}

/* A repository-scoped service (git): the path names one repository, which must be on the
 * operator's list, and a token naming a repository (a run's) opens that one only. A run's token
 * naming none opens none. Answers and returns false when refused. */
static bool repo_granted(struct proxy *p, h2o_req_t *req, const struct provider *prov,
                         const struct proxy_claims *claims, const char *rest, size_t rlen,
                         bool own_credential, bool push, char repo_out[PROXY_REPO_MAX])
{
    char repo[PROXY_REPO_MAX];
    size_t used = proxy_repo_of_path(rest, rlen, repo);
    bool suffix = false;
    for (char **s = prov->suffixes; used && *s; s++)
        suffix |= strlen(*s) == rlen - used && memcmp(*s, rest + used, rlen - used) == 0;
    if (!used || !suffix) {
        respond_error(req, 400, "path_not_allowed",
                      "path '%.*s' does not name a repository as /owner/name/... for '%s'",
                      (int)(rlen > 200 ? 200 : rlen), rest, prov->name);
        return false;
    }
    if (!own_credential && !proxy_repo_allowed(prov->repos, repo)) {
        if (push)
            push_refused(p, req, claims, repo, "repository '%s' is not one a credential serves",
                         repo);
        else
            respond_error(req, 403, "repository_not_allowed",
                          "repository '%s' is not one the operator's '%s' credential serves (the "
                          "operator lists them in its allow list), and you have no '%s' "
                          "credential of your own",
                          repo, prov->name, prov->name);
        return false;
    }
    if ((claims->repo[0] || claims->run[0]) && strcasecmp(claims->repo, repo) != 0) {
        if (push)
            push_refused(p, req, claims, repo, "this token opens repository '%s' only",
                         claims->repo[0] ? claims->repo : "(none)");
        else if (claims->repo[0])
            respond_error(req, 403, "repository_not_granted",
                          "this token opens repository '%s' only", claims->repo);
        else
            respond_error(req, 403, "repository_not_granted", "this token opens no repository");
        return false;
    }
    snprintf(repo_out, PROXY_REPO_MAX, "%s", repo);
    return true;
}

/* Pushes (git-receive-pack): a token pushes only when it names a branch, and then exactly one
 * ref, that branch, created or moved forward: no other branch, no tag, no deletion, no rewrite.
 * The request body is the whole push (commands, then the pack), so it is checked before any of
 * it goes upstream. Answers and returns false when refused. */
static bool push_granted(struct proxy *p, h2o_req_t *req, const struct proxy_claims *claims,
                         const char *repo, const char *rest, size_t rlen)
{
    static const char rp[] = "/git-receive-pack";
    bool post =
        rlen >= sizeof(rp) - 1 && memcmp(rest + rlen - (sizeof(rp) - 1), rp, sizeof(rp) - 1) == 0;
    if (!claims->branch[0]) {
        push_refused(p, req, claims, repo,
                     "this token pushes nothing: the server pushes a run's commits to its "
                     "session's branch when the run ends");
        return false;
    }
    if (!post)
        return true;
    char want[300];
    snprintf(want, sizeof(want), "refs/heads/%s", claims->branch);
    struct rp_request push;
    struct err err = {0};
    if (rp_parse(req->entity.base ? req->entity.base : "", req->entity.len, &push, &err) < 0) {
        push_refused(p, req, claims, repo, "a push the proxy cannot read: %s", err.msg);
        return false;
    }
    if (push.ncmds != 1 || strcmp(push.cmds[0].ref, want) != 0) {
        const char *other = push.ncmds ? push.cmds[0].ref : "";
        for (size_t i = 0; i < push.ncmds; i++)
            if (strcmp(push.cmds[i].ref, want) != 0)
                other = push.cmds[i].ref;
        push_refused(p, req, claims, repo,
                     "this token pushes to branch '%s' of %s only, not '%.200s'", claims->branch,
                     claims->repo, other);
        return false;
    }
    const struct rp_command *c = &push.cmds[0];
    if (strcmp(c->new_id, zero_id) == 0) {
        push_refused(p, req, claims, repo, "deleting branch '%s' is not allowed", claims->branch);
        return false;
    }
    if (strcmp(c->old_id, zero_id) != 0) {
        /* what a pack may inflate to is bounded (a push is checked on the loop) */
        int ff = rp_descends(push.pack, push.pack_len, c->new_id, c->old_id,
                             p->max_request_bytes * 16, &err);
        if (ff != 1) {
            push_refused(p, req, claims, repo,
                         "only fast-forward pushes to '%s' are allowed: %.12s does not descend "
                         "from %.12s%s%s",
                         claims->branch, c->new_id, c->old_id, ff < 0 ? ": " : "",
                         ff < 0 ? err.msg : "");
            return false;
        }
    }
    return true;
}

int proxy_handle(struct proxy *p, h2o_req_t *req, const char *listener_sandbox)
{
    /* /proxy/<service>/<rest>?<query> */
    const char *path = req->path_normalized.base;
    size_t plen = req->path_normalized.len;
    if (plen < 8 || memcmp(path, "/proxy/", 7) != 0) {
        respond_error(req, 404, "unknown_service", "use /proxy/<service>/<path>");
        return 0;
    }
    const char *svc = path + 7;
    const char *slash = memchr(svc, '/', plen - 7);
    size_t slen = slash ? (size_t)(slash - svc) : plen - 7;
    const struct provider *prov = find_provider(p, svc, slen);
    if (!prov) {
        respond_error(req, 404, "unknown_service", "unknown service '%.*s' (known: %s)",
                      (int)(slen > 64 ? 64 : slen), svc, p->names);
        return 0;
    }
    char token[PROXY_TOKEN_MAX + 1];
    size_t tlen = token_of(prov->token_from, header_value(req, "x-api-key"),
                           header_value(req, "authorization"), token, sizeof(token));
    if (!tlen) {
        if (prov->token_from & TOKEN_BASIC_PASSWORD) /* git asks for credentials only when told */
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE, NULL,
                           H2O_STRLIT("Basic realm=\"sandbox-mcp proxy\""));
        respond_error(req, 401, "missing_token",
                      "a proxy token is required (in x-api-key, Authorization: Bearer, or the "
                      "Basic password, as the service's client sends its key)");
        return 0;
    }
    struct proxy_claims claims;
    struct err err = {0};
    int r = proxy_token_check(p, token, tlen, &claims, &err);
    if (r == -EKEYREVOKED || r == -ENOENT) {
        respond_error(req, 403, r == -ENOENT ? "no_run" : "token_revoked", "%s", err.msg);
        return 0;
    }
    if (r < 0) {
        respond_error(req, 401, "invalid_token", "%s", err.msg);
        return 0;
    }
    if (!proxy_claims_grant(&claims, prov->name)) {
        respond_error(req, 403, "service_not_granted", "this token does not grant '%s'",
                      prov->name);
        return 0;
    }
    if (strcmp(claims.sandbox, listener_sandbox) != 0) {
        respond_error(req, 403, "wrong_listener",
                      claims.sandbox[0] ? "this token belongs to another sandbox's listener"
                                        : "this token is for the server's own listener");
        return 0;
    }
    if (!(prov->methods & method_bit(req->method.base, req->method.len))) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL,
                       H2O_STRLIT("GET, POST"));
        respond_error(req, 405, "method_not_allowed", "method %.*s is not allowed for '%s'",
                      (int)(req->method.len > 16 ? 16 : req->method.len), req->method.base,
                      prov->name);
        return 0;
    }
    const char *rest = slash ? slash : "/";
    size_t rlen = slash ? plen - 7 - slen : 1;
    if (!path_clean(rest, rlen) || !provider_path_allowed(prov, rest, rlen)) {
        respond_error(req, 400, "path_not_allowed", "path '%.*s' is not allowed for '%s'",
                      (int)(rlen > 200 ? 200 : rlen), rest, prov->name);
        return 0;
    }
    /* the user's own credential for the service, when they have one */
    _cleanup_free_ char *own_value = NULL;
    if (prov->user_credential && p->have_seal_key) {
        char *own = NULL;
        size_t own_len = 0;
        if (store_credential_open(p->store, p->seal_key, claims.user, prov->user_credential, &own,
                                  &own_len, &err) == 0) {
            own_value = provider_key_value(prov->key_format, own);
            explicit_bzero(own, own_len);
            free(own);
        } else if (err.code != -ENOENT) {
            log_warn("proxy credential unusable service=%s user=%s err=\"%s\"", prov->name,
                     claims.user, err.msg);
        }
    }
    char repo[PROXY_REPO_MAX] = "";
    bool push = prov->repo_scoped && is_push(req, rest, rlen);
    if (prov->repo_scoped &&
        (!repo_granted(p, req, prov, &claims, rest, rlen, own_value != NULL, push, repo) ||
         (push && !push_granted(p, req, &claims, repo, rest, rlen)))) {
        if (own_value)
            explicit_bzero(own_value, strlen(own_value));
        return 0;
    }
    if (req->entity.base && req->entity.len > p->max_request_bytes) {
        respond_error(req, 413, "too_large", "request body is larger than %llu bytes",
                      (unsigned long long)p->max_request_bytes);
        return 0;
    }
    if (!own_value && !prov->key_value) {
        respond_error(req, 503, "not_configured", "service '%s' has no key configured", prov->name);
        return 0;
    }

    struct transfer *t = h2o_mem_alloc_shared(&req->pool, sizeof(*t), on_dispose);
    memset(t, 0, sizeof(*t));
    t->gen.proceed = on_proceed;
    t->gen.stop = on_stop;
    t->p = p;
    t->req = req;
    t->prov = prov;
    t->t0 = time_mono_ms();
    snprintf(t->jti, sizeof(t->jti), "%s", claims.jti);
    snprintf(t->user, sizeof(t->user), "%s", claims.user);
    snprintf(t->run, sizeof(t->run), "%s", claims.run);
    http_watch_start(&t->watch, req, on_client_gone);
    buf_init(&t->pending, 0);
    buf_init(&t->inflight, 0);
    usage_init(&t->usage, USAGE_NONE, false);
    const char *query = req->query_at != SIZE_MAX ? req->path.base + req->query_at : "";
    size_t qlen = req->query_at != SIZE_MAX ? req->path.len - req->query_at : 0;
    t->url = xasprintf("%s%.*s%.*s", prov->upstream, (int)rlen, rest, (int)qlen, query);
    add_request_headers(t, own_value ? own_value : prov->key_value);
    if (own_value)
        explicit_bzero(own_value, strlen(own_value));
    CURL *e = t->easy = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, t->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)p->stall_seconds);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    if (h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"))) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->entity.base ? req->entity.base : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)(req->entity.base ? req->entity.len : 0));
    } else if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET"))) {
        char *m = h2o_strdup(&req->pool, req->method.base, req->method.len).base;
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
    }
    curl_loop_add(p->cl, e);
    return 0;
}

int proxy_mint(struct store *st, const void *key, size_t keylen, const struct proxy_grant *g,
               char **token, char jti[64], struct err *err)
{
    struct proxy_claims c = {0};
    const char *services = g->services;
    snprintf(c.user, sizeof(c.user), "%s", g->user_id);
    snprintf(c.run, sizeof(c.run), "%s", g->run_id ? g->run_id : "");
    snprintf(c.session, sizeof(c.session), "%s", g->session_id ? g->session_id : "");
    snprintf(c.sandbox, sizeof(c.sandbox), "%s", g->sandbox_id ? g->sandbox_id : "");
    snprintf(c.repo, sizeof(c.repo), "%s", g->repo ? g->repo : "");
    snprintf(c.branch, sizeof(c.branch), "%s", g->repo && g->branch ? g->branch : "");
    c.warm = g->warm && g->sandbox_id && !g->run_id;
    if (claims_set_services(&c, services) < 0)
        return err_set(err, -E2BIG, "too many services");
    c.iat = time_now_ms() / 1000;
    c.exp = c.iat + g->ttl_seconds;
    id_new("jti", c.jti);
    int r = proxy_token_mint(key, keylen, &c, token, err);
    if (r < 0)
        return r;
    struct store_proxy_token row = {0};
    snprintf(row.jti, sizeof(row.jti), "%s", c.jti);
    snprintf(row.user_id, sizeof(row.user_id), "%s", g->user_id);
    snprintf(row.run_id, sizeof(row.run_id), "%s", c.run);
    snprintf(row.session_id, sizeof(row.session_id), "%s", c.session);
    snprintf(row.sandbox_id, sizeof(row.sandbox_id), "%s", c.sandbox);
    snprintf(row.services, sizeof(row.services), "%s", services);
    row.created_at = c.iat;
    row.expires_at = c.exp;
    if ((r = store_proxy_token_add(st, &row, err)) < 0) {
        free(*token);
        *token = NULL;
        return r;
    }
    snprintf(jti, 64, "%s", c.jti);
    return 0;
}

/* The client left before the upstream answered: abort the upstream transfer. */
static void on_client_gone(struct http_watch *w)
{
    struct transfer *t = container_of(w, struct transfer, watch);
    if (!t->curl_done && t->easy) {
        curl_loop_remove(t->p->cl, t->easy);
        t->curl_done = true;
        log_info("proxy aborted service=%s user=%s run=%s reason=client-gone bytes=0",
                 t->prov->name, t->user, t->run[0] ? t->run : "-");
    }
    release_curl(t);
    /* h2o learns of the closed connection on this write and disposes of the request */
    respond_error(t->req, 499, "client_gone", "the client went away");
}

int proxy_new(const struct config *cfg, struct store *st, const void *key, size_t keylen,
              struct proxy **ret, struct err *err)
{
    struct proxy *p = xcalloc(1, sizeof(*p));
    p->store = st;
    p->key = xmalloc(keylen);
    memcpy(p->key, key, keylen);
    p->keylen = keylen;
    int r = providers_load(cfg, &p->providers, &p->nproviders, err);
    if (r < 0) {
        free(p->key);
        free(p);
        return r;
    }
    if ((r = config_get_u64(cfg, "PROXY_MAX_REQUEST_BYTES", cfg->max_request_bytes, 1024,
                            cfg->max_request_bytes, &p->max_request_bytes, err)) < 0 ||
        (r = config_get_u64(cfg, "PROXY_STALL_SECONDS", 300, 1, 86400, &p->stall_seconds, err)) <
            0) {
        proxy_free(p);
        return r;
    }
    struct buf names;
    buf_init(&names, 0); /* at most PROXY_PROVIDERS_MAX names of PROXY_NAME_MAX bytes */
    p->llms = xcalloc(p->nproviders + 1, sizeof(*p->llms));
    for (size_t i = 0; i < p->nproviders; i++) {
        const struct provider *prov = &p->providers[i];
        buf_printf(&names, "%s%s", i ? ", " : "", prov->name);
        if (prov->llm)
            p->llms[p->nllms++] = (struct proxy_llm){.name = prov->name,
                                                     .key_env = prov->key_env,
                                                     .has_key = prov->key != NULL,
                                                     .wire = prov->wire,
                                                     .base_path = prov->agent_path};
    }
    p->names = buf_steal(&names, NULL);
    if (!p->names)
        p->names = xstrdup("");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    p->cl = curl_loop_new(on_done);
    the_proxy = p;
    *ret = p;
    return 0;
}

void proxy_free(struct proxy *p)
{
    if (!p)
        return;
    usage_flush(p);
    curl_loop_free(p->cl);
    providers_free(p->providers, p->nproviders);
    free(p->llms);
    free(p->names);
    explicit_bzero(p->key, p->keylen);
    explicit_bzero(p->seal_key, sizeof(p->seal_key));
    free(p->key);
    if (the_proxy == p)
        the_proxy = NULL;
    free(p);
}

void proxy_set_seal_key(struct proxy *p, const unsigned char *key)
{
    memcpy(p->seal_key, key, SEAL_KEY_BYTES);
    p->have_seal_key = true;
}

const char *proxy_service_upstream(const struct proxy *p, const char *service)
{
    const struct provider *prov = find_provider(p, service, strlen(service));
    return prov ? prov->upstream : NULL;
}

const char *proxy_service_api(const struct proxy *p, const char *service)
{
    const struct provider *prov = find_provider(p, service, strlen(service));
    return prov ? prov->api : NULL;
}

const char *proxy_provider_names(void)
{
    return the_proxy ? the_proxy->names : "";
}

const struct proxy_llm *proxy_llms(const struct proxy *p, size_t *n)
{
    *n = p->nllms;
    return p->llms;
}

/* The sender: the outbox sent from the loop. A timer looks at the outbox when the store says rows
 * were queued, when the next row is due, and every two seconds (rows queued by another process).
 * Each due row is claimed (its attempt counted, its next_at moved past the attempt's end), its
 * target's name resolved on a thread and every address checked, and the request made with curl
 * on the loop, held to those addresses. An answer 2xx delivers it; a network error, 408, 425,
 * 429 or 5xx tries again later (Retry-After honoured, from a second up to an hour), after a wait
 * that doubles each time, with jitter; anything else, or NOTIFY_ATTEMPTS_MAX attempts, or a day,
 * ends it failed with the reason, which the target keeps for its owner to see. */
#include "notify/notify.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/curl_loop.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/metrics.h"
#include "base/util.h"
#include "store/store.h"
#include "version.h"

#define POLL_MS 2000
#define PRUNE_EVERY_MS 60000

enum outcome { DELIVERED, RETRY, FAILED };

struct attempt {
    struct notifier *nt;
    struct attempt *prev, *next;
    int64_t n;  /* its outbox row */
    int number; /* 1 for an event's first attempt */
    int64_t created_at;
    char target_id[64], user_id[64], event_id[64], type[24];
    enum notify_kind kind;
    struct notify_url u;
    char *url, *secret, *body;
    struct egress_lookup *lookup;
    struct loop_timer deadline; /* while resolving; curl keeps time after that */
    int64_t start_ms;           /* monotonic */
    CURL *easy;
    struct curl_slist *headers;
    struct egress_pin pin;
    size_t answer; /* bytes of the answer read */
    bool answer_cut;
    char errbuf[CURL_ERROR_SIZE];
};

struct notifier {
    struct store *st;
    unsigned char key[SEAL_KEY_BYTES];
    bool allow_loopback_http;
    int64_t retry_base_ms;
    bool link_view_token;
    notify_run_url_fn run_url;
    void *run_url_ctx;
    struct curl_loop *cl;
    struct loop_timer timer;
    struct attempt *head;
    int n;
    int64_t last_prune;
    bool kicked; /* since the timer last fired */
};

static void on_done(CURL *easy, CURLcode rc);
static void on_timer(struct loop_timer *t);

static void attempt_free(struct attempt *a)
{
    if (a->easy)
        curl_easy_cleanup(a->easy);
    egress_pin_release(&a->pin);
    for (struct curl_slist *h = a->headers; h; h = h->next)
        explicit_bzero(h->data, strlen(h->data));
    curl_slist_free_all(a->headers);
    if (a->secret) {
        explicit_bzero(a->secret, strlen(a->secret));
        free(a->secret);
    }
    free(a->url);
    free(a->body);
    free(a);
}

static void unlink_attempt(struct attempt *a)
{
    struct notifier *nt = a->nt;
    if (a->prev)
        a->prev->next = a->next;
    else
        nt->head = a->next;
    if (a->next)
        a->next->prev = a->prev;
    nt->n--;
}

void notifier_kick(struct notifier *nt)
{
    nt->kicked = true;
    loop_timer_start(&nt->timer, 0, on_timer);
}

static void on_queued(void *ctx)
{
    notifier_kick(ctx);
}

/* --- the end of an attempt --- */

static void end_row(struct notifier *nt, int64_t n, bool delivered, const char *why)
{
    struct err err = {0};
    if (store_notify_end(nt->st, n, delivered, why, time_now_ms(), &err) < 0)
        log_error("notify not recorded row=%" PRId64 " err=\"%s\"", n, err.msg);
}

/* One log line and one count per attempt; the row moves on; the slot is free for the next. */
static void finish(struct attempt *a, enum outcome o, long status, int64_t retry_after_ms,
                   const char *why)
{
    struct notifier *nt = a->nt;
    loop_timer_stop(&a->deadline);
    int64_t now = time_now_ms();
    char reason[STORE_NOTIFY_ERROR_MAX + 1];
    snprintf(reason, sizeof(reason), "%s", why ? why : "");
    int64_t next_in = -1;
    const char *outcome = o == DELIVERED ? "delivered" : o == FAILED ? "failed" : "retry";
    if (o == RETRY) {
        int64_t wait = retry_after_ms >= 0 ? retry_after_ms : 0;
        if (retry_after_ms < 0) {
            uint64_t rnd;
            rand_bytes(&rnd, sizeof(rnd));
            wait = notify_backoff_ms(a->number, nt->retry_base_ms, rnd);
        } else if (wait < 1000) {
            wait = 1000;
        } else if (wait > NOTIFY_BACKOFF_MAX_MS) {
            wait = NOTIFY_BACKOFF_MAX_MS;
        }
        char gave_up[STORE_NOTIFY_ERROR_MAX + 1];
        if (a->number >= NOTIFY_ATTEMPTS_MAX || now + wait > a->created_at + NOTIFY_AGE_MAX_MS) {
            snprintf(gave_up, sizeof(gave_up), "gave up after %d attempts%s: %s", a->number,
                     a->number >= NOTIFY_ATTEMPTS_MAX ? "" : " over a day", reason);
            memcpy(reason, gave_up, sizeof(reason));
            outcome = "failed";
            o = FAILED;
        } else {
            next_in = wait;
        }
    }
    char shown[STORE_NOTIFY_ERROR_MAX + 16] = "";
    if (reason[0])
        snprintf(shown, sizeof(shown), " err=\"%s\"", reason);
    char next[48] = "";
    if (next_in >= 0)
        snprintf(next, sizeof(next), " retry_in_ms=%" PRId64, next_in);
    const char *host = a->u.host;
    log_write(o == DELIVERED ? LOG_INFO : LOG_WARN,
              "notify attempt target=%s kind=%s host=%s event=%s type=%s attempt=%d "
              "outcome=%s status=%ld ms=%" PRId64 "%s%s",
              a->target_id, notify_kind_name(a->kind), host, a->event_id, a->type, a->number,
              outcome, status, time_mono_ms() - a->start_ms, next, shown);
    metrics_notify(notify_kind_name(a->kind), outcome);
    struct err err = {0};
    if (o == RETRY) {
        if (store_notify_retry(nt->st, a->n, now + next_in, reason, &err) < 0)
            log_error("notify not recorded row=%" PRId64 " err=\"%s\"", a->n, err.msg);
    } else {
        end_row(nt, a->n, o == DELIVERED, reason);
    }
    unlink_attempt(a);
    attempt_free(a);
    notifier_kick(nt);
}

static void finishf(struct attempt *a, enum outcome o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finishf(struct attempt *a, enum outcome o, const char *fmt, ...)
{
    char why[STORE_NOTIFY_ERROR_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    finish(a, o, 0, -1, why);
}

/* --- the request --- */

static size_t on_answer(char *data, size_t size, size_t nmemb, void *ctx)
{
    struct attempt *a = ctx;
    size_t n = size * nmemb;
    (void)data;
    if (a->answer + n > NOTIFY_ANSWER_MAX) {
        a->answer_cut = true;
        return 0;
    }
    a->answer += n;
    return n;
}

static void on_done(CURL *easy, CURLcode rc)
{
    struct attempt *a = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&a);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    int64_t retry_after = -1;
    struct curl_header *h = NULL;
    if (curl_easy_header(easy, "Retry-After", 0, CURLH_HEADER, -1, &h) == CURLHE_OK)
        retry_after = notify_retry_after_ms(h->value, time_now_ms());
    const char *why = a->errbuf[0] ? a->errbuf : curl_easy_strerror(rc);
    char text[STORE_NOTIFY_ERROR_MAX + 1];
    if (a->pin.refused) {
        finishf(a, FAILED, "curl was about to connect to an address that was not checked");
    } else if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && a->answer_cut && status)) {
        snprintf(text, sizeof(text), "the answer was HTTP %ld", status);
        if (status >= 200 && status < 300)
            finish(a, DELIVERED, status, -1, NULL);
        else if (status == 408 || status == 425 || status == 429 || status >= 500)
            finish(a, RETRY, status, retry_after, text);
        else if (status >= 300 && status < 400)
            finish(a, FAILED, status, -1,
                   "the answer was a redirect, which is not followed: the target must be the "
                   "URL that answers");
        else
            finish(a, FAILED, status, -1, text);
    } else if (rc == CURLE_URL_MALFORMAT || rc == CURLE_UNSUPPORTED_PROTOCOL) {
        finishf(a, FAILED, "%s", why);
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        finishf(a, RETRY, "no answer within %d ms", NOTIFY_TOTAL_TIMEOUT_MS);
    } else {
        finishf(a, RETRY, "cannot deliver: %s", why);
    }
}

static void add_header(struct attempt *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_header(struct attempt *a, const char *fmt, ...)
{
    char line[2200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    a->headers = curl_slist_append(a->headers, line);
}

static void start_transfer(struct attempt *a, const struct egress_addr *addrs, int n)
{
    struct notifier *nt = a->nt;
    CURL *e = a->easy = curl_easy_init();
    if (!e)
        abort(); /* out of memory */
    egress_pin_apply(&a->pin, e, a->u.host, a->u.port, addrs, n);
    add_header(a, "User-Agent: sandbox-mcp/%s (notifications)", SANDBOX_MCP_VERSION);
    add_header(a, "Idempotency-Key: %s", a->event_id);
    add_header(a, "X-Sandbox-MCP-Event: %s", a->type);
    add_header(a, "X-Sandbox-MCP-Attempt: %d", a->number);
    add_header(a, "Expect:");
    if (a->kind == NOTIFY_WEBHOOK) {
        char sig[NOTIFY_SIGNATURE_MAX];
        notify_sign(a->secret, time_now_ms() / 1000, a->body, strlen(a->body), sig);
        add_header(a, "Content-Type: application/json");
        add_header(a, NOTIFY_SIGNATURE_HEADER ": %s", sig);
    } else {
        struct notify_ntfy m;
        char *payload = a->body;
        notify_ntfy_message(payload, &m); /* checked when the attempt started */
        add_header(a, "Content-Type: text/plain; charset=utf-8");
        add_header(a, "Title: %s", m.title);
        add_header(a, "Priority: %d", m.priority);
        add_header(a, "Tags: %s", m.tags);
        if (m.click[0])
            add_header(a, "Click: %s", m.click);
        a->body = m.body;
        free(payload);
    }
    long left = (long)(a->start_ms + NOTIFY_TOTAL_TIMEOUT_MS - time_mono_ms());
    left = left < 1 ? 1 : left;
    curl_easy_setopt(e, CURLOPT_URL, a->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, a);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, a->headers);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, a->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(a->body));
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, a->u.http ? "http" : "https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     NOTIFY_CONNECT_TIMEOUT_MS < left ? (long)NOTIFY_CONNECT_TIMEOUT_MS : left);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, left);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_answer);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, a->errbuf);
    curl_loop_add(nt->cl, e);
}

static void on_resolve_timeout(struct loop_timer *t)
{
    struct attempt *a = container_of(t, struct attempt, deadline);
    egress_lookup_cancel(a->lookup); /* the thread finishes on its own */
    a->lookup = NULL;
    finishf(a, RETRY, "cannot resolve '%s' within %d ms", a->u.host, NOTIFY_CONNECT_TIMEOUT_MS);
}

static void on_resolved(void *ctx, const struct egress_addr *addrs, int n, const struct err *err)
{
    struct attempt *a = ctx;
    a->lookup = NULL;
    loop_timer_stop(&a->deadline);
    struct err e = {0};
    if (err) {
        finishf(a, RETRY, "%s", err->msg);
        return;
    }
    if (notify_addrs_check(&a->u, addrs, n, &e) < 0) {
        finishf(a, FAILED, "%s", e.msg);
        return;
    }
    start_transfer(a, addrs, n);
}

/* --- starting an attempt --- */

/* The first line of s, at most cap - 1 bytes (the payload cuts it at a character). */
static void first_line(const char *s, char *out, size_t cap)
{
    snprintf(out, cap, "%.*s", (int)strcspn(s ? s : "", "\r\n"), s ? s : "");
}

/* The event as sent, made at its first attempt from what the store holds then. */
static char *make_payload(struct notifier *nt, const struct store_notify_row *row)
{
    struct notify_event ev = {.id = row->event_id, .type = row->type, .at = row->created_at};
    struct store_run run = {0};
    struct err err = {0};
    char url[2048] = "", title[NOTIFY_TITLE_MAX + 1];
    struct store_question question = {0};
    _cleanup_free_ char *asked = NULL;
    bool have_run = row->run_id[0] && store_run_get(nt->st, NULL, row->run_id, &run, &err) == 0;
    if (have_run) {
        ev.run_id = run.id;
        ev.session_id = run.session_id;
        ev.status = run.status;
        first_line(run.title && *run.title ? run.title : run.task, title, sizeof(title));
        ev.title = title;
        ev.summary = run.summary && *run.summary ? run.summary
                     : run.error && *run.error   ? run.error
                                                 : run.status_reason;
        if (nt->run_url)
            nt->run_url(nt->run_url_ctx, run.id, nt->link_view_token, url, sizeof(url));
        ev.url = url;
        /* a question: what it asks (its run's newest), to be answered from the link */
        if (strcmp(row->type, "run.question") == 0 &&
            store_question_open(nt->st, run.id, true, &question, &err) == 0) {
            asked =
                xasprintf("%s%s", strcmp(question.kind, "plan") == 0 ? "Plan to approve:\n" : "",
                          question.text);
            ev.summary = asked;
        }
    } else if (strcmp(row->type, "test") == 0) {
        ev.title = "Test notification";
        ev.summary = "Notifications from sandbox-mcp reach this target.";
    }
    ev.pull_request_url = row->pr_url[0] ? row->pr_url : NULL;
    json_t *delivery = have_run && run.delivery ? json_loads(run.delivery, 0, NULL) : NULL;
    if (!ev.pull_request_url) /* the run's own, or the session's it commented on */
        ev.pull_request_url =
            json_string_value(json_object_get(json_object_get(delivery, "pull_request"), "url"));
    char *text = notify_payload(&ev);
    json_decref(delivery);
    store_run_release(&run);
    store_question_release(&question);
    return text;
}

/* Claim row and start its attempt; false when it could not be claimed. */
static bool start(struct notifier *nt, const struct store_notify_row *row)
{
    int64_t now = time_now_ms();
    struct err err = {0};
    if (store_notify_claim(nt->st, row->n, now, now + NOTIFY_LEASE_MS, &err) < 0) {
        if (err.code != -EALREADY)
            log_error("notify claim failed row=%" PRId64 " err=\"%s\"", row->n, err.msg);
        return false;
    }
    struct store_notify_target t;
    if (store_notify_target_get(nt->st, NULL, row->target_id, &t, &err) < 0) {
        end_row(nt, row->n, false, err.msg);
        return true;
    }
    struct attempt *a = xcalloc(1, sizeof(*a));
    a->nt = nt;
    a->n = row->n;
    a->number = row->attempts + 1;
    a->created_at = row->created_at;
    a->start_ms = time_mono_ms();
    snprintf(a->target_id, sizeof(a->target_id), "%s", row->target_id);
    snprintf(a->user_id, sizeof(a->user_id), "%s", row->user_id);
    snprintf(a->event_id, sizeof(a->event_id), "%s", row->event_id);
    snprintf(a->type, sizeof(a->type), "%s", row->type);
    a->url = xstrdup(t.url);
    a->next = nt->head;
    if (nt->head)
        nt->head->prev = a;
    nt->head = a;
    nt->n++;
    if (notify_kind_parse(t.kind, &a->kind) < 0 ||
        notify_url_check(t.url, a->kind, nt->allow_loopback_http, &a->u, &err) < 0) {
        finishf(a, FAILED, "the target is not allowed: %s", err.msg);
        return true;
    }
    if (now - row->created_at > NOTIFY_AGE_MAX_MS) {
        finishf(a, FAILED, "gave up after %d attempts over a day%s%s", row->attempts,
                row->last_error[0] ? ": " : "", row->last_error);
        return true;
    }
    char *payload = row->payload ? xstrdup(row->payload) : make_payload(nt, row);
    if (!row->payload && store_notify_set_payload(nt->st, row->n, payload, &err) < 0)
        log_error("notify payload not recorded row=%" PRId64 " err=\"%s\"", row->n, err.msg);
    a->body = payload;
    struct notify_ntfy m;
    if (a->kind == NOTIFY_NTFY && notify_ntfy_message(payload, &m) < 0) {
        finishf(a, FAILED, "the event cannot be sent to ntfy");
        return true;
    }
    if (a->kind == NOTIFY_NTFY)
        free(m.body);
    if (a->kind == NOTIFY_WEBHOOK &&
        (store_notify_target_secret(nt->st, nt->key, t.id, &a->secret, &err) < 0 || !a->secret)) {
        finishf(a, FAILED, "the target's signing secret cannot be read%s%s", err.msg[0] ? ": " : "",
                err.msg);
        return true;
    }
    struct egress_addr lit;
    if (egress_addr_parse(a->u.host, &lit) == 0) {
        if (notify_addrs_check(&a->u, &lit, 1, &err) < 0) {
            finishf(a, FAILED, "%s", err.msg);
            return true;
        }
        start_transfer(a, &lit, 1);
        return true;
    }
    a->lookup =
        egress_resolve(a->u.host, a->user_id, NOTIFY_IN_FLIGHT_PER_USER, on_resolved, a, &err);
    if (!a->lookup) {
        finishf(a, RETRY, "%s", err.msg);
        return true;
    }
    loop_timer_start(&a->deadline, NOTIFY_CONNECT_TIMEOUT_MS, on_resolve_timeout);
    return true;
}

/* --- the outbox --- */

struct due {
    struct store_notify_row rows[NOTIFY_IN_FLIGHT_MAX];
    int n;
};

/* Attempts under way for user_id's targets. */
static int in_flight(const struct notifier *nt, const char *user_id)
{
    int k = 0;
    for (const struct attempt *a = nt->head; a; a = a->next)
        k += strcmp(a->user_id, user_id) == 0;
    return k;
}

static void collect(const struct store_notify_row *row, void *ctx)
{
    struct due *d = ctx;
    d->rows[d->n] = *row;
    d->rows[d->n].payload = row->payload ? xstrdup(row->payload) : NULL;
    d->n++;
}

static void on_timer(struct loop_timer *t)
{
    struct notifier *nt = container_of(t, struct notifier, timer);
    nt->kicked = false;
    int64_t now = time_now_ms();
    struct err err = {0};
    if (now - nt->last_prune >= PRUNE_EVERY_MS) {
        nt->last_prune = now;
        if (store_notify_prune(nt->st, now - NOTIFY_KEEP_MS, &err) < 0)
            log_error("notify prune failed err=\"%s\"", err.msg);
    }
    struct due d = {.n = 0};
    if (nt->n < NOTIFY_IN_FLIGHT_MAX &&
        store_notify_due(nt->st, now, (unsigned)(NOTIFY_IN_FLIGHT_MAX - nt->n),
                         NOTIFY_IN_FLIGHT_PER_USER, collect, &d, &err) < 0)
        log_error("notify outbox unreadable err=\"%s\"", err.msg);
    int started = 0;
    for (int i = 0; i < d.n; i++) {
        if (in_flight(nt, d.rows[i].user_id) < NOTIFY_IN_FLIGHT_PER_USER)
            started += start(nt, &d.rows[i]);
        free(d.rows[i].payload);
    }
    /* a row due that could not be started (the database refused) is looked at again in a
     * second, not at once */
    int64_t next = 0, wait = POLL_MS;
    if (store_notify_next_due(nt->st, &next, &err) == 0 && next > 0 && nt->n < NOTIFY_IN_FLIGHT_MAX)
        wait = next > now ? (next - now < POLL_MS ? next - now : POLL_MS) : started ? 0 : 1000;
    if (!nt->kicked) /* an attempt that ended at once kicked it already */
        loop_timer_start(&nt->timer, (uint64_t)wait, on_timer);
}

struct notifier *notifier_new(const struct notify_config *cfg, struct store *st)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct notifier *nt = xcalloc(1, sizeof(*nt));
    nt->st = st;
    memcpy(nt->key, cfg->seal_key, SEAL_KEY_BYTES);
    nt->allow_loopback_http = cfg->allow_loopback_http;
    nt->retry_base_ms = cfg->retry_base_ms > 0 ? cfg->retry_base_ms : NOTIFY_RETRY_BASE_MS;
    nt->link_view_token = cfg->link_view_token;
    nt->cl = curl_loop_new(on_done);
    store_set_notify_hook(st, on_queued, nt);
    notifier_kick(nt);
    return nt;
}

void notifier_set_run_url(struct notifier *nt, notify_run_url_fn fn, void *ctx)
{
    nt->run_url = fn;
    nt->run_url_ctx = ctx;
}

void notifier_free(struct notifier *nt)
{
    if (!nt)
        return;
    store_set_notify_hook(nt->st, NULL, NULL);
    loop_timer_stop(&nt->timer);
    int64_t now = time_now_ms();
    while (nt->head) {
        struct attempt *a = nt->head;
        loop_timer_stop(&a->deadline);
        egress_lookup_cancel(a->lookup);
        if (a->easy)
            curl_loop_remove(nt->cl, a->easy);
        struct err err = {0};
        if (store_notify_retry(nt->st, a->n, now, NULL, &err) < 0)
            log_error("notify not recorded row=%" PRId64 " err=\"%s\"", a->n, err.msg);
        unlink_attempt(a);
        attempt_free(a);
    }
    curl_loop_free(nt->cl);
    explicit_bzero(nt->key, sizeof(nt->key));
    free(nt);
    curl_global_cleanup();
}

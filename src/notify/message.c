/* What is sent: the event as JSON (the webhook's body, and what an ntfy message is made from),
 * its signature, and when to try again. Pure functions. */
#include "notify/notify.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/ids.h"
#include "base/utf8.h"
#include "base/util.h"

void notify_sign(const char *secret, int64_t t, const char *body, size_t len,
                 char out[NOTIFY_SIGNATURE_MAX])
{
    char *signed_text = xmalloc(32 + len);
    int sl = snprintf(signed_text, 32, "%" PRId64 ".", t);
    memcpy(signed_text + sl, body, len);
    unsigned char mac[32];
    unsigned int maclen = 0;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)signed_text,
         (size_t)sl + len, mac, &maclen);
    free(signed_text);
    char hex[65];
    hex_encode(mac, sizeof(mac), hex);
    snprintf(out, NOTIFY_SIGNATURE_MAX, "t=%" PRId64 ",v1=%s", t, hex);
}

int64_t notify_backoff_ms(int attempt, int64_t base_ms, uint64_t rnd)
{
    int64_t d = base_ms < 1 ? 1 : base_ms;
    for (int i = 1; i < attempt && d < NOTIFY_BACKOFF_MAX_MS; i++)
        d *= 2;
    if (d > NOTIFY_BACKOFF_MAX_MS)
        d = NOTIFY_BACKOFF_MAX_MS;
    int64_t half = d / 2;
    return d - half + (int64_t)(rnd % (uint64_t)(half + 1));
}

int64_t notify_retry_after_ms(const char *v, int64_t now_ms)
{
    while (*v == ' ' || *v == '\t')
        v++;
    size_t digits = strspn(v, "0123456789");
    if (digits > 0 && v[digits + strspn(v + digits, " \t")] == '\0') {
        if (digits > 9)
            return NOTIFY_BACKOFF_MAX_MS * 1000; /* far beyond any bound */
        return strtoll(v, NULL, 10) * 1000;
    }
    time_t t = curl_getdate(v, NULL);
    if (t < 0)
        return -1;
    int64_t ms = (int64_t)t * 1000 - now_ms;
    return ms < 0 ? 0 : ms;
}

/* s cut to at most max bytes at a character boundary, "…" added when cut, invalid UTF-8
 * replaced (malloc'd). */
static char *cut(const char *s, size_t max)
{
    size_t n = strlen(s);
    char *clean = utf8_sanitize(s, n, &n);
    if (n <= max)
        return clean;
    size_t m = utf8_boundary(clean, max - 3);
    memcpy(clean + m, "…", 3);
    clean[m + 3] = '\0';
    return clean;
}

static void set_text(json_t *o, const char *key, const char *value, size_t max)
{
    if (!value)
        return;
    char *v = cut(value, max);
    json_object_set_new(o, key, json_string(v));
    free(v);
}

char *notify_payload(const struct notify_event *ev)
{
    char when[32];
    time_format_rfc3339(ev->at, when);
    json_t *o = json_pack("{s:s, s:s, s:s}", "id", ev->id, "type", ev->type, "created_at", when);
    set_text(o, "run_id", ev->run_id, 64);
    set_text(o, "session_id", ev->session_id, 64);
    set_text(o, "title", ev->title, NOTIFY_TITLE_MAX);
    set_text(o, "status", ev->status, 16);
    set_text(o, "summary", ev->summary, NOTIFY_SUMMARY_MAX);
    if (ev->url && *ev->url)
        set_text(o, "url", ev->url, 2000);
    if (ev->pull_request_url && *ev->pull_request_url)
        set_text(o, "pull_request_url", ev->pull_request_url, 2000);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

int notify_ntfy_message(const char *payload, struct notify_ntfy *out)
{
    static const struct {
        const char *type, *title, *tags;
        int priority;
    } kinds[] = {
        {"run.succeeded", "Run succeeded", "white_check_mark", 3},
        {"run.failed", "Run failed", "x", 4},
        {"run.cancelled", "Run cancelled", "no_entry_sign", 3},
        {"run.question", "Run asks you", "question", 4},
        {"pull_request.opened", "Pull request opened", "twisted_rightwards_arrows", 3},
        {"test", "Test notification", "bell", 3},
    };
    memset(out, 0, sizeof(*out));
    json_t *o = json_loads(payload, 0, NULL);
    const char *type = json_string_value(json_object_get(o, "type"));
    for (size_t i = 0; type && i < ARRAY_SIZE(kinds); i++)
        if (strcmp(type, kinds[i].type) == 0) {
            out->title = kinds[i].title;
            out->tags = kinds[i].tags;
            out->priority = kinds[i].priority;
        }
    if (!out->title) {
        json_decref(o);
        return -EINVAL;
    }
    const char *url = json_string_value(json_object_get(o, "url"));
    snprintf(out->click, sizeof(out->click), "%s",
             url && strlen(url) < sizeof(out->click) ? url : "");
    const char *title = json_string_value(json_object_get(o, "title"));
    const char *summary = json_string_value(json_object_get(o, "summary"));
    const char *pr = json_string_value(json_object_get(o, "pull_request_url"));
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, title && *title ? title : out->title);
    if (pr)
        buf_printf(&b, "\n%s", pr);
    if (summary && *summary)
        buf_printf(&b, "\n\n%s", summary);
    out->body = cut(b.data, NOTIFY_NTFY_BODY_MAX);
    buf_release(&b);
    json_decref(o);
    return 0;
}

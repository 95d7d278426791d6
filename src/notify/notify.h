#pragma once
/* Notifications: a user is told, where they asked, that a run ended (succeeded, failed,
 * cancelled) or opened a pull request. A target is a webhook (a JSON POST signed with
 * HMAC-SHA256 over a timestamp and the body) or an ntfy topic (a push to a phone). Targets and
 * the outbox live in the store (store_notify_*): an event is queued in the transaction that
 * records it. This module checks targets, builds and signs what is sent (pure functions), and
 * sends the outbox from the loop: public addresses only, retried with backoff, at least once,
 * every attempt of an event with the same Idempotency-Key. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/seal.h"
#include "egress/egress.h"

#define NOTIFY_SECRET_LEN 49      /* "whsec_" and 43 base64url characters (32 random bytes) */
#define NOTIFY_SIGNATURE_MAX 96   /* "t=<seconds>,v1=<64 hex digits>" */
#define NOTIFY_TITLE_MAX 200      /* bytes of a run's title in an event */
#define NOTIFY_SUMMARY_MAX 1000   /* bytes of a run's summary in an event */
#define NOTIFY_NTFY_BODY_MAX 4000 /* bytes of an ntfy message (ntfy takes 4096 as text) */
#define NOTIFY_ATTEMPTS_MAX 12    /* attempts of one event to one target */
#define NOTIFY_AGE_MAX_MS (24LL * 3600 * 1000) /* an event not delivered by then is given up */
#define NOTIFY_BACKOFF_MAX_MS (3600LL * 1000)  /* the longest wait between attempts */
#define NOTIFY_RETRY_BASE_MS 10000 /* the first wait, by default (NOTIFY_RETRY_SECONDS) */
#define NOTIFY_IN_FLIGHT_MAX 8     /* attempts under way at once */
#define NOTIFY_IN_FLIGHT_PER_USER                                                                  \
    2 /* of them for one user's targets, and so many name lookups:                                 \
         one stays counted past its attempt until the resolver gives                               \
         up on it */
#define NOTIFY_CONNECT_TIMEOUT_MS 5000
#define NOTIFY_TOTAL_TIMEOUT_MS 15000       /* an attempt, resolution included */
#define NOTIFY_LEASE_MS 60000               /* an attempt cut short by a crash is retried then */
#define NOTIFY_KEEP_MS (24LL * 3600 * 1000) /* ended rows are kept this long */
#define NOTIFY_ANSWER_MAX (64 * 1024)       /* bytes of an answer read (and dropped) */
#define NOTIFY_SIGNATURE_HEADER "X-Sandbox-MCP-Signature"

enum notify_kind { NOTIFY_WEBHOOK, NOTIFY_NTFY };
/* "webhook" | "ntfy" -> 0, or -EINVAL (s NULL included). */
int notify_kind_parse(const char *s, enum notify_kind *out);
const char *notify_kind_name(enum notify_kind k);

/* A target's URL, taken apart. */
struct notify_url {
    bool http;      /* the test form, http://127.0.0.1 or http://[::1] */
    char host[254]; /* a name (lowercase) or an address (without brackets) */
    uint16_t port;
};

/* Whether url may be a target of kind: at most STORE_NOTIFY_URL_MAX bytes of printable ASCII,
 * https:// (or, with allow_loopback_http, which is for tests, http://127.0.0.1[:port] and
 * http://[::1][:port]), a host name or address, no user name or password, no fragment; for ntfy
 * a path whose last segment is the topic (1 to 64 of A-Z a-z 0-9 _ -) and no query. A host that
 * is an address must be public (or the test URL's own loopback address); a name is judged by
 * what it resolves to, at each attempt. Returns 0 and *out (may be NULL), or -EINVAL or -EACCES
 * with a message that names the problem but not the URL. Pure. */
int notify_url_check(const char *url, enum notify_kind kind, bool allow_loopback_http,
                     struct notify_url *out, struct err *err);

/* Whether an attempt to u may connect to addrs (n of them, what u's host resolved to): 0 when
 * every one is public, or is the test URL's own loopback address; else -EACCES naming the first
 * address refused and its class ("'h' resolves to 10.0.0.1, a private address (RFC 1918);
 * notifications go to public addresses only"), -EHOSTUNREACH when n is 0. Pure. */
int notify_addrs_check(const struct notify_url *u, const struct egress_addr *addrs, int n,
                       struct err *err);

/* url as a page or a list shows it: a query becomes "?…", since it may hold a token. */
void notify_url_shown(const char *url, char *out, size_t cap);

/* A new webhook signing secret: "whsec_" and 32 random bytes in base64url. */
void notify_secret_new(char out[NOTIFY_SECRET_LEN + 1]);
/* The signature header's value for body (len bytes) sent at t (seconds since the epoch):
 * "t=<t>,v1=<hex of HMAC-SHA256(secret, "<t>.<body>")>", the key being the secret's text. */
void notify_sign(const char *secret, int64_t t, const char *body, size_t len,
                 char out[NOTIFY_SIGNATURE_MAX]);

/* The wait after attempt number `attempt` (1 for the first) failed: base_ms doubled for each
 * attempt before, at most NOTIFY_BACKOFF_MAX_MS, of which the upper half is jitter taken from
 * rnd (any random number). Pure. */
int64_t notify_backoff_ms(int attempt, int64_t base_ms, uint64_t rnd);
/* A Retry-After value (seconds, or an HTTP date) as milliseconds from now_ms (an HTTP date in the
 * past is 0), or -1 when it is neither. Pure. */
int64_t notify_retry_after_ms(const char *value, int64_t now_ms);

/* An event as sent. Strings may be NULL (then left out) except id and type. */
struct notify_event {
    const char *id;   /* evt_... */
    const char *type; /* run.succeeded, run.failed, run.cancelled, run.question,
                       pull_request.opened, test */
    int64_t at;       /* ms since the epoch */
    const char *run_id, *session_id;
    const char *title;   /* cut to NOTIFY_TITLE_MAX bytes */
    const char *status;  /* the run's */
    const char *summary; /* cut to NOTIFY_SUMMARY_MAX bytes */
    const char *url;     /* the run's page */
    const char *pull_request_url;
};
/* The event as JSON text (malloc'd): {id, type, created_at (RFC 3339), run_id, session_id,
 * title, status, summary, url, pull_request_url}, valid UTF-8 throughout. */
char *notify_payload(const struct notify_event *ev);

/* What an ntfy topic is sent for a payload (notify_payload's). */
struct notify_ntfy {
    const char *title; /* fixed words: "Run failed", ... (ASCII) */
    int priority;      /* 3, the default; 4 (high) for a failure */
    const char *tags;  /* an emoji name ntfy shows */
    char click[2048];  /* the run's page, or "" */
    char *body;        /* malloc'd: the run's title and summary, at most NOTIFY_NTFY_BODY_MAX */
};
/* -EINVAL when payload is not one notify_payload made. */
int notify_ntfy_message(const char *payload, struct notify_ntfy *out);

/* --- the sender, on the loop --- */

struct store;
struct notifier;

/* The run's page for a notification about it (out "" when there is none): with its view token
 * (anyone holding the address may read the page), or without (view_token false: the page's
 * address alone, which opens for the run's owner once signed in). */
typedef void (*notify_run_url_fn)(void *ctx, const char *run_id, bool view_token, char *out,
                                  size_t cap);

struct notify_config {
    const unsigned char *seal_key; /* the credentials key (copied) */
    bool allow_loopback_http;      /* tests: http://127.0.0.1 and http://[::1] targets */
    int64_t retry_base_ms;         /* the first wait (NOTIFY_RETRY_BASE_MS) */
    bool link_view_token;          /* a run's page is linked with its view token (the default) */
};

struct config;
/* Fill nc from cfg's table (NOTIFY_RETRY_SECONDS, NOTIFY_TEST_ALLOW_LOOPBACK, NOTIFY_VIEW_TOKEN)
 * and the defaults, checking each value's range: 0, or -EINVAL with err naming the key and its
 * range. seal_key is left NULL, for the caller. Implemented in src/notify/config.c. */
int notify_config_load(const struct config *cfg, struct notify_config *nc, struct err *err);

/* A sender of st's outbox, started at once: rows due (those left by an earlier process too)
 * are sent, and the store tells it when rows are queued; rows queued by another process (the
 * CLI's test) are seen within two seconds. Main loop thread only, as is everything below. */
struct notifier *notifier_new(const struct notify_config *cfg, struct store *st);
/* Where the run pages are (NULL: events carry no url). */
void notifier_set_run_url(struct notifier *nt, notify_run_url_fn fn, void *ctx);
/* Look at the outbox soon (from the loop, never within this call). */
void notifier_kick(struct notifier *nt);
/* Stop: attempts under way are dropped and their rows left due, to be sent again at the next
 * start. NULL is accepted. */
void notifier_free(struct notifier *nt);

#pragma once
/* GitHub's REST API from the server itself (the review loop's answers on pull requests, its
 * polling, the CI watcher's logs): one request at a time per call, many calls at once on the
 * loop through libcurl's multi interface, each with the credential of the user it acts for.
 * Main loop thread only. */

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct github_rest;
struct github_call;

struct github_rest *github_rest_new(void);
/* How calls GitHub refused for now are made again (rest.c): at most retries more times, the
 * first wait base_ms doubling (with jitter) when GitHub names none, all waits together at most
 * budget_ms. */
#define GITHUB_RETRIES_DEFAULT 3
#define GITHUB_RETRY_BASE_MS_DEFAULT 1000
#define GITHUB_RETRY_BUDGET_MS_DEFAULT 120000
void github_rest_set_retries(struct github_rest *g, unsigned retries, uint64_t base_ms,
                             uint64_t budget_ms);
/* Cancels what is in flight (their callbacks do not run). NULL is accepted. */
void github_rest_free(struct github_rest *g);

/* A call's end: status (0 when GitHub was not reached, why then says so), its JSON answer
 * (NULL when none or not JSON; the callee's) or, for a text answer, text (NUL-terminated, NULL
 * for JSON), its ETag ("" when none), and why ("" on a 2xx or 304, else GitHub's message). */
struct github_answer {
    long status;
    json_t *json;
    const char *text;
    size_t text_len;
    const char *etag;
    const char *why;
    long rate_remaining; /* x-ratelimit-remaining, -1 when not said */
    long rate_reset;     /* x-ratelimit-reset (seconds since the epoch), 0 when not said */
};
typedef void (*github_rest_fn)(void *ctx, const struct github_answer *a);

struct github_request {
    const char *api;        /* the API's base URL, no trailing slash */
    const char *credential; /* copied, and wiped when the call ends */
    const char *method;     /* "GET", "POST" */
    const char *path;       /* below api, with its query */
    json_t *body;           /* sent as JSON (borrowed for the call), or NULL */
    const char *etag;       /* a GET's If-None-Match, or NULL */
    size_t max;             /* bytes of the answer kept (its end when tail, else its start):
                               0 for 1 MiB */
    int tail;               /* keep the end of a longer answer (a log), not fail */
    int follow;             /* follow redirects (to a log's storage), without the credential */
    /* a POST that is safe to make again after a 5xx or a cut connection (a pull request's
     * creation: a second one is refused as a duplicate) */
    int idempotent;
};

/* Start a call; fn (may be NULL: the outcome is only logged) runs later on the loop, never from
 * within this call. Returns the call, which the caller may cancel until fn runs. */
struct github_call *github_rest_call(struct github_rest *g, const struct github_request *rq,
                                     github_rest_fn fn, void *ctx);
/* fn will not run. NULL is accepted. */
void github_rest_cancel(struct github_call *c);

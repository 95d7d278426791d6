#pragma once
/* Delivery: when a run that asked for a pull request ends with commits, the server (not the
 * agent) pushes them to the session's branch through the sandbox's git proxy, with a token that
 * pushes exactly that branch of exactly that repository, fast-forward only; then it opens the
 * session's pull request through GitHub's REST API, or comments on the one already open. What
 * became of it is a JSON value (deliver_done_fn). Main loop thread only. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct store;
struct sandbox;
struct deliverer;
struct delivery;

/* One engine's deliveries (their REST requests share a connection cache). */
struct deliverer *deliverer_new(void);
/* The deliverer's GitHub client (to set how it retries). */
struct github_rest;
struct github_rest *deliverer_github(struct deliverer *d);
/* Cancels what is in flight (their callbacks do not run). NULL is accepted. */
void deliverer_free(struct deliverer *d);

struct deliver_opts {
    struct store *st;
    const void *jwt_key; /* signs the push's proxy token */
    size_t jwt_keylen;
    struct sandbox *sbx; /* the run's (held by the caller until done) */
    const char *user_id, *run_id, *session_id;
    const char *workdir;     /* the repository inside the sandbox */
    const char *proxy_url;   /* the sandbox's proxy listener, ".../proxy" */
    const char *repo;        /* "owner/name" */
    const char *work_branch; /* pushed to */
    const char *base_branch; /* the pull request's base; "" for an empty repository */
    const char *credential;  /* the GitHub token for the REST API (copied, wiped when done) */
    const char *api;         /* GitHub's REST API base URL */
    bool draft;              /* a new pull request is a draft */
    const char *title;       /* of a new pull request */
    const char *body;        /* of a new pull request, or the comment on the session's one */
    int64_t pr_number;       /* the session's pull request, 0 when none yet */
    int64_t run_created_at;  /* ms: the run's comment, if made before, is no older */
    const char *pr_url;
    json_t *commits; /* the run's commits [{sha, message}] (borrowed for the call) */
};

/* The end of a delivery: JSON {status: "delivered" | "failed", reason?, branch, base, commits,
 * pull_request?: {url, number, state, draft}} (owned by the callee; the caller takes a
 * reference if it keeps it). A new pull request is already recorded on the session. */
typedef void (*deliver_done_fn)(void *ctx, json_t *delivery);

/* Start delivering; done runs later, never from within this call. Returns NULL with err set when
 * it cannot start. */
struct delivery *deliver_start(struct deliverer *d, const struct deliver_opts *o,
                               deliver_done_fn done, void *ctx, struct err *err);

/* {status: "skipped", reason} */
json_t *deliver_skipped(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The branch a session delivers to: "sandbox-mcp/<last 8 of its id>-<slug of what>" (what: the
 * run's title or task). */
void deliver_branch_name(const char *session_id, const char *what, char out[128]);

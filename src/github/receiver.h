#pragma once
/* POST /github/webhook: GitHub's deliveries taken in. Checked in this order before anything acts
 * on one: the server's rate of deliveries, the size (GITHUB_PAYLOAD_MAX, let in before any
 * credential by the gate only with a signature header), the signature (X-Hub-Signature-256 under
 * GITHUB_WEBHOOK_SECRET: 401 and nothing changes), the delivery id (X-GitHub-Delivery: one seen
 * before is answered and does nothing again). What passes is read (webhook.h) and handed to the
 * module that acts on it (the run engine's review loop). Main loop thread only. */

#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "github/webhook.h"

#define GITHUB_MENTION_DEFAULT "@sandbox-mcp"
#define GITHUB_DELIVERIES_DEFAULT 10000 /* ids kept against redelivery (GITHUB_DELIVERIES_MAX) */

struct github_receiver;
struct http_server;
struct store;

/* What became of an event: an HTTP status for GitHub's delivery log, and a word ("queued",
 * "ignored", ...) with a few words of why, and the run it queued ("" for none). */
struct github_outcome {
    int status;
    char word[24];
    char why[160];
    char run_id[64];
};
/* Act on ev (a delivery with a good signature, seen for the first time), filling *out (its
 * status is 202 unless set). */
typedef void (*github_event_fn)(void *ctx, const struct github_event *ev,
                                struct github_outcome *out);

/* The receiver, with its settings from cfg: GITHUB_WEBHOOK_SECRET (unset: the endpoint answers
 * 404, webhooks being off), GITHUB_WEBHOOK_SECRETS (a repository's or an owner's own secret:
 * "owner/name=SECRET", or "owner/" and a star for all of an owner's; a delivery naming that
 * repository must be signed with it, which the delivery's repository.full_name, read first,
 * chooses), GITHUB_MENTION (what addresses the server in a comment, default
 * "@sandbox-mcp"), GITHUB_WEBHOOK_RATE (deliveries a second from one address, default 10, four
 * times that from all, with bursts of five seconds' worth), GITHUB_DELIVERIES_MAX (ids kept against
 * redelivery, default 10000). */
int github_receiver_new(const struct config *cfg, struct store *st, github_event_fn fn, void *ctx,
                        struct github_receiver **out, struct err *err);
void github_receiver_free(struct github_receiver *r);
/* Serve POST /github/webhook on http's main listener (r borrowed for http's life). */
void github_receiver_register(struct http_server *http, struct github_receiver *r);
/* The mention that addresses the server ("@sandbox-mcp"). */
const char *github_receiver_mention(const struct github_receiver *r);

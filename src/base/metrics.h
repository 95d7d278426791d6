#pragma once
/* Process-wide counters and latency histograms, rendered in the Prometheus text format.
 * Main-loop thread only. */

#include "base/buf.h"

/* Count one HTTP request by route and status and record its duration. */
void metrics_http_request(const char *route, int status, double seconds);
/* Count one tools/call by tool name and outcome ("ok", "error", "protocol_error", "cancelled"). */
void metrics_tool_call(const char *tool, const char *outcome, double seconds);
/* Count one connection of a sandbox's egress proxy by verdict and reason, and its bytes. */
void metrics_egress(const char *verdict, const char *reason, unsigned long long up,
                    unsigned long long down);
/* Count one attempt to send a notification by target kind ("webhook", "ntfy") and outcome
 * ("delivered", "retry", "failed"). */
void metrics_notify(const char *kind, const char *outcome);
/* Count one sign-in attempt by how ("password", "code") and outcome ("signed_in", "wrong",
 * "throttled", "crowded", "busy"); signed_in and wrong password attempts are the ones checked. */
void metrics_signin(const char *how, const char *outcome);
/* Count one GitHub event by outcome: "queued", "answered", or why it was ignored ("stranger",
 * "no_session", "closed", "not_addressed", "duplicate", "bad_signature", ...): counted, not
 * logged one by one, since anyone can send them. */
void metrics_github(const char *outcome);
/* Set a gauge (e.g. in-flight requests). */
void metrics_gauge_set(const char *name, const char *help, double value);

/* Append every metric in the text exposition format. */
void metrics_render(struct buf *out);
void metrics_reset(void);

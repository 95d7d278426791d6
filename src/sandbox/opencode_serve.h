#pragma once
/* A warm OpenCode: the pure part of the sandbox's agent bridge (src/sandbox/helper/agent.c).
 * The bridge hands a run's task to an `opencode serve` kept running in the sandbox and follows
 * the server's event stream (GET /event, server-sent events); this turns each event of that
 * stream into the line `opencode run --format json` prints for it, so a run's events read the
 * same whichever way its agent was started, and one parser (opencode_parse_event) reads both.
 * Pure functions with jansson only, built into the static helper (which alone runs them) and into
 * the server's library for the unit tests and the fuzzer. It is the sandbox side's: the engine
 * (src/runs/) knows only the bridge's command line, never this file. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OC_FOLLOW_SESSIONS 64 /* the run's session and the subagent sessions it starts */
#define OC_SESSION_ID_MAX 127
#define OC_MESSAGE_ID_MAX 127

/* What the bridge follows: one session of the server, and the sessions started from it. */
struct oc_follow {
    char session[OC_SESSION_ID_MAX + 1]; /* the run's own session */
    char tree[OC_FOLLOW_SESSIONS][OC_SESSION_ID_MAX + 1];
    size_t ntree;
    bool errored;  /* a session.error of the run's session was seen (the run's exit status 1) */
    bool idle;     /* the session went idle: the prompt is done */
    bool retrying; /* its status became "retry": a model request failed, to be tried again */
    bool thinking; /* print reasoning blocks (as `opencode run --thinking`) */
    /* the session's newest message before the prompt; until a newer one shows, nothing of the
     * session is the prompt's */
    char after[OC_MESSAGE_ID_MAX + 1];
    bool armed;
};

/* Start following session (1-127 bytes, else the follower matches nothing). */
void oc_follow_init(struct oc_follow *f, const char *session, bool thinking);

/* Follow only what comes after message_id, the session's newest message before the prompt was
 * posted ("" when it has none). The server takes a session's prompts one after another and its
 * message ids ascend, so until an update of a newer message (or of a part of one) shows, what the
 * session reports (its parts, its errors, its status) is an earlier prompt's: one stopped just
 * before, whose end (MessageAbortedError, then idle) comes on the stream after the new prompt's
 * subscription, and is not the new prompt's error or end. */
void oc_follow_after(struct oc_follow *f, const char *message_id);

/* One event's data (a JSON object {"type", "properties"}, len bytes) as `opencode run --format
 * json` prints it: a malloc'd line ending in "\n", or NULL when it prints nothing for it. Sets
 * f->idle when the session's status became idle (the end of the prompt), f->retrying when it
 * became "retry", and f->errored on its error. A permission the session or one of its subagents
 * asks for is written to permission (its request id, at most cap - 1 bytes; "" otherwise):
 * `opencode run` refuses those it was not told to allow, and so does the bridge. now_ms is the
 * line's timestamp. */
char *oc_follow_event(struct oc_follow *f, const char *data, size_t len, int64_t now_ms,
                      char *permission, size_t cap);

/* The error line the bridge prints when it cannot do its part ("the agent's server did not
 * start: ..."), in the form of the agent's own errors, so the run shows it as the agent's
 * error. malloc'd, ending in "\n". */
char *oc_error_line(const char *session, const char *message, int64_t now_ms);

/* Server-sent events framing: feed a line of the stream (without its "\n"; a trailing "\r" is
 * dropped); when it ends an event (a blank line) returns true with the event's data (its "data:"
 * lines joined by "\n") in *data and *len, valid until the next call. Data past max bytes is
 * dropped, and the event is reported with *len == 0 and *over set. */
struct oc_sse {
    char *data;
    size_t len, cap, max;
    bool over;
};
void oc_sse_init(struct oc_sse *s, size_t max);
void oc_sse_free(struct oc_sse *s);
bool oc_sse_line(struct oc_sse *s, const char *line, size_t len, const char **data, size_t *dlen,
                 bool *over);

/* percent-encode s as encodeURIComponent does (the x-opencode-directory header) into out. Returns
 * false when out (cap bytes) is too small. */
bool oc_uri_component(const char *s, char *out, size_t cap);

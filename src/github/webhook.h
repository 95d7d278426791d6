#pragma once
/* GitHub's webhook deliveries, read (the review loop's first part; nothing routes to it yet):
 * the signature GitHub puts on a delivery, checked against the secret the operator shares with
 * it, and a delivery's event read into what the review loop acts on: a comment, a review or a
 * review comment on a pull request (with whether it addresses the server), a check suite or
 * workflow run that ended on a pull request's head, a pull request closed. Pure functions, safe
 * from any thread; the event owns its strings. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define GITHUB_BODY_MAX (64 * 1024)   /* bytes of a comment's or review's text kept */
#define GITHUB_HUNK_MAX (8 * 1024)    /* bytes of a review comment's diff hunk kept */
#define GITHUB_PAYLOAD_MAX (1u << 20) /* bytes of a delivery read (GitHub caps them at 25 MB) */

/* Whether header (X-Hub-Signature-256: "sha256=" and 64 hex digits) is the HMAC-SHA256 of body
 * under secret (slen bytes). Constant time in the digits compared; false for any other form. */
bool github_signature_ok(const void *secret, size_t slen, const char *header, const void *body,
                         size_t blen);

enum github_event_kind {
    GITHUB_EV_IGNORED,        /* nothing the review loop acts on (why says what it was) */
    GITHUB_EV_COMMENT,        /* a comment on a pull request's conversation */
    GITHUB_EV_REVIEW,         /* a review submitted */
    GITHUB_EV_REVIEW_COMMENT, /* a comment on a line of a pull request's diff */
    GITHUB_EV_CI_FAILED,      /* a check suite or workflow run on a head ended failing */
    GITHUB_EV_CI_PASSED,      /* ... ended green */
    GITHUB_EV_PR_CLOSED,      /* a pull request closed (merged or not) */
};

struct github_event {
    enum github_event_kind kind;
    char repo[128];  /* "owner/name" as GitHub spells it; "" when absent */
    int64_t pr;      /* the pull request's number; 0 when none is named */
    char sender[64]; /* the login that acted (a bot's ends in "[bot]") */
    char head[64];   /* CI events: the commit checked; "" otherwise */
    char url[512];   /* the comment's, review's, run's or pull request's html_url */
    char *text;      /* the comment's or review's body, valid UTF-8, capped; NULL for others */
    bool truncated;  /* text or hunk was cut to its cap */
    bool addressed;  /* it asks the server to act: the mention is in its text, or a review
                        that requests changes */
    bool merged;     /* GITHUB_EV_PR_CLOSED: merged */
    char path[512];  /* GITHUB_EV_REVIEW_COMMENT: the file and line commented on */
    int64_t line;
    char *hunk;     /* GITHUB_EV_REVIEW_COMMENT: the diff around it, capped; else NULL */
    char name[128]; /* CI events: the suite's app or the workflow's name */
    char why[96];   /* GITHUB_EV_IGNORED: what it was ("push", "issue_comment on an issue") */
};

/* Read a delivery of event type (X-GitHub-Event) with JSON body json (len bytes) into *ev.
 * mention ("@sandbox-mcp", may be NULL) addresses the server when it stands in a text as a word
 * of its own, case-insensitively. Returns 0 (ev filled, perhaps as ignored), or -EINVAL with err
 * set when the body is not a JSON object or is larger than GITHUB_PAYLOAD_MAX. */
int github_event_parse(const char *type, const char *json, size_t len, const char *mention,
                       struct github_event *ev, struct err *err);
/* Fill ev (its repo, pr and sender set or left empty first) as kind (a comment, review or review
 * comment) from o, the object a delivery carries, or the REST API's of the same thing (the
 * poller's): its text, link, the file and line a review comment is on, whether it addresses the
 * server (mention, or a review's state "changes_requested"), and its user as sender when ev has
 * none. */
void github_event_of(enum github_event_kind kind, const json_t *o, const char *mention,
                     struct github_event *ev);
/* Whether a check's, job's or workflow run's conclusion is a failure (failure, timed_out,
 * startup_failure). */
bool github_conclusion_failed(const char *conclusion);
/* Free what ev owns and zero it. */
void github_event_clear(struct github_event *ev);

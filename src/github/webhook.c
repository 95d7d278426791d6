/* GitHub's webhook deliveries read (webhook.h). The events and the fields read, as GitHub
 * documents them ("Webhook events and payloads"):
 *   issue_comment                created; issue.pull_request present for a pull request's
 *                                conversation; comment {body, html_url}
 *   pull_request_review          submitted; review {state, body, html_url}: "changes_requested"
 *                                addresses the server whatever its text
 *   pull_request_review_comment  created; comment {body, path, line (or original_line),
 *                                diff_hunk, html_url}
 *   check_suite                  completed; check_suite {conclusion, head_sha, app.name,
 *                                pull_requests[].number}
 *   workflow_run                 completed; workflow_run {conclusion, head_sha, name, html_url,
 *                                pull_requests[].number}
 *   pull_request                 closed; pull_request {merged, html_url}
 * with repository.full_name, sender.login and, for pull request events, pull_request.number (or
 * issue.number). Everything is read tolerantly: a field that is missing or of another type
 * reads as empty, never as a failure. */
#include "github/webhook.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "base/utf8.h"
#include "base/util.h"

bool github_signature_ok(const void *secret, size_t slen, const char *header, const void *body,
                         size_t blen)
{
    static const char prefix[] = "sha256=";
    unsigned char mac[32];
    unsigned int maclen = sizeof(mac);
    char want[65];
    if (!header || strlen(header) != sizeof(prefix) - 1 + 64 ||
        strncmp(header, prefix, sizeof(prefix) - 1) != 0 || !secret || slen == 0)
        return false;
    HMAC(EVP_sha256(), secret, (int)slen, body, blen, mac, &maclen);
    hex_encode(mac, sizeof(mac), want);
    /* GitHub writes the digits in lowercase; any other spelling is not its */
    return str_equal_ct(want, 64, header + sizeof(prefix) - 1, 64);
}

void github_event_clear(struct github_event *ev)
{
    free(ev->text);
    free(ev->hunk);
    memset(ev, 0, sizeof(*ev));
}

static const char *str_at(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static int64_t int_at(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (int64_t)json_integer_value(v) : 0;
}

/* s into out (cap bytes): cut on a character boundary, control characters as '?' */
static void copy_line(char *out, size_t cap, const char *s)
{
    size_t n = strnlen(s, 4 * cap);
    char *clean = utf8_sanitize(s, n, &n); /* first: a byte replaced grows to three */
    if (n >= cap)
        n = utf8_boundary(clean, cap - 1);
    snprintf(out, cap, "%.*s", (int)n, clean);
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7F)
            *p = '?';
    free(clean);
}

/* A copy of s as valid UTF-8, cut at cap bytes on a character boundary */
static char *copy_capped(const json_t *o, const char *key, size_t cap, bool *truncated)
{
    const json_t *v = json_object_get(o, key);
    const char *s = json_string_value(v);
    if (!s)
        return NULL;
    size_t n = json_string_length(v);
    if (n > cap) {
        n = utf8_boundary(s, cap);
        *truncated = true;
    }
    /* NULs and what jansson let through as they are become U+FFFD, which can grow the text */
    char *clean = utf8_sanitize(s, n, &n);
    if (n > cap) {
        clean[utf8_boundary(clean, cap)] = '\0';
        *truncated = true;
    }
    return clean;
}

/* Whether mention stands in text as a word of its own, case-insensitively: not inside a longer
 * name ("@sandbox-mcp-bot") nor an address ("me@sandbox-mcp.dev") */
static bool mentions(const char *text, const char *mention)
{
    size_t m = mention ? strlen(mention) : 0;
    if (!text || m == 0)
        return false;
    for (const char *p = text; *p; p++) {
        if (strncasecmp(p, mention, m) != 0)
            continue;
        bool before = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        char after = p[m];
        bool end = !(isalnum((unsigned char)after) || after == '-' || after == '_' ||
                     (after == '.' && isalnum((unsigned char)p[m + 1])));
        if (before && end)
            return true;
    }
    return false;
}

/* The first pull request a check suite or workflow run belongs to */
static int64_t first_pr(const json_t *run)
{
    return int_at(json_array_get(json_object_get(run, "pull_requests"), 0), "number");
}

static void ignore(struct github_event *ev, const char *type, const char *what)
{
    ev->kind = GITHUB_EV_IGNORED;
    char why[256];
    snprintf(why, sizeof(why), "%.100s%s%.100s", type[0] ? type : "(no event type)",
             what ? " " : "", what ? what : "");
    copy_line(ev->why, sizeof(ev->why), why); /* cut on a character boundary */
}

bool github_conclusion_failed(const char *c)
{
    return c && (strcmp(c, "failure") == 0 || strcmp(c, "timed_out") == 0 ||
                 strcmp(c, "startup_failure") == 0);
}

static void ci(struct github_event *ev, const char *type, const json_t *run, const char *name)
{
    const char *c = str_at(run, "conclusion");
    bool failed = github_conclusion_failed(c);
    if (!failed && strcmp(c, "success") != 0) {
        ignore(ev, type, "that did not pass or fail");
        return;
    }
    ev->kind = failed ? GITHUB_EV_CI_FAILED : GITHUB_EV_CI_PASSED;
    ev->pr = first_pr(run);
    copy_line(ev->head, sizeof(ev->head), str_at(run, "head_sha"));
    copy_line(ev->name, sizeof(ev->name), name);
    copy_line(ev->url, sizeof(ev->url), str_at(run, "html_url"));
}

void github_event_of(enum github_event_kind kind, const json_t *o, const char *mention,
                     struct github_event *ev)
{
    ev->kind = kind;
    if (!ev->sender[0])
        copy_line(ev->sender, sizeof(ev->sender), str_at(json_object_get(o, "user"), "login"));
    ev->text = copy_capped(o, "body", GITHUB_BODY_MAX, &ev->truncated);
    copy_line(ev->url, sizeof(ev->url), str_at(o, "html_url"));
    ev->addressed = mentions(ev->text, mention);
    if (kind == GITHUB_EV_REVIEW)
        ev->addressed |= strcasecmp(str_at(o, "state"), "changes_requested") == 0;
    if (kind == GITHUB_EV_REVIEW_COMMENT) {
        ev->hunk = copy_capped(o, "diff_hunk", GITHUB_HUNK_MAX, &ev->truncated);
        copy_line(ev->path, sizeof(ev->path), str_at(o, "path"));
        ev->line = int_at(o, "line") ? int_at(o, "line") : int_at(o, "original_line");
    }
}

int github_event_parse(const char *type, const char *json, size_t len, const char *mention,
                       struct github_event *ev, struct err *err)
{
    memset(ev, 0, sizeof(*ev));
    if (len > GITHUB_PAYLOAD_MAX)
        return err_set(err, -EINVAL, "the delivery is larger than %u bytes", GITHUB_PAYLOAD_MAX);
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(root)) {
        json_decref(root);
        return err_set(err, -EINVAL, "the delivery is not a JSON object");
    }
    type = type ? type : "";
    const char *action = str_at(root, "action"), *act = action[0] ? action : NULL;
    const json_t *pr = json_object_get(root, "pull_request");
    const json_t *issue = json_object_get(root, "issue");
    copy_line(ev->repo, sizeof(ev->repo), str_at(json_object_get(root, "repository"), "full_name"));
    copy_line(ev->sender, sizeof(ev->sender), str_at(json_object_get(root, "sender"), "login"));
    ev->pr = int_at(pr, "number");
    if (strcmp(type, "issue_comment") == 0) {
        const json_t *c = json_object_get(root, "comment");
        if (!json_is_object(json_object_get(issue, "pull_request")))
            ignore(ev, type, "on an issue");
        else if (strcmp(action, "created") != 0)
            ignore(ev, type, act);
        else {
            ev->pr = int_at(issue, "number");
            github_event_of(GITHUB_EV_COMMENT, c, mention, ev);
        }
    } else if (strcmp(type, "pull_request_review") == 0) {
        const json_t *r = json_object_get(root, "review");
        if (strcmp(action, "submitted") != 0) {
            ignore(ev, type, act);
        } else {
            github_event_of(GITHUB_EV_REVIEW, r, mention, ev);
        }
    } else if (strcmp(type, "pull_request_review_comment") == 0) {
        const json_t *c = json_object_get(root, "comment");
        if (strcmp(action, "created") != 0) {
            ignore(ev, type, act);
        } else {
            github_event_of(GITHUB_EV_REVIEW_COMMENT, c, mention, ev);
        }
    } else if (strcmp(type, "check_suite") == 0 && strcmp(action, "completed") == 0) {
        const json_t *s = json_object_get(root, "check_suite");
        ci(ev, type, s, str_at(json_object_get(s, "app"), "name"));
    } else if (strcmp(type, "workflow_run") == 0 && strcmp(action, "completed") == 0) {
        const json_t *w = json_object_get(root, "workflow_run");
        ci(ev, type, w, str_at(w, "name"));
    } else if (strcmp(type, "pull_request") == 0 && strcmp(action, "closed") == 0) {
        ev->kind = GITHUB_EV_PR_CLOSED;
        ev->merged = json_is_true(json_object_get(pr, "merged"));
        copy_line(ev->url, sizeof(ev->url), str_at(pr, "html_url"));
    } else {
        ignore(ev, type, act);
    }
    json_decref(root);
    return 0;
}

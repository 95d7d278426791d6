/* The review loop's acts (src/github has its transport): a comment, review or review comment on
 * a session's pull request, by someone allowed to steer the session and addressed to the server,
 * becomes a follow-up run in that session, answered on the pull request at once and again when
 * the run ends; a pull request closed or merged ends its session's steering.
 *
 * Who may steer: the login of the credential that opened the pull request (the session's owner
 * on GitHub) and the logins the operator lists in GITHUB_STEERERS. What addresses the server: the
 * mention (GITHUB_MENTION, "@sandbox-mcp") as a word of its own in the text, or a review that
 * requests changes. Comments the server made carry REVIEW_MARK and are never acted on, so that
 * nothing an agent writes into a summary can start another run. Everything else is counted
 * (metrics_github), not logged one by one: anyone who can comment can send it. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/util.h"
#include "github/receiver.h"
#include "github/rest.h"
#include "store/store.h"

#define TASK_TEXT_MAX (16 * 1024) /* bytes of the comment's text put into the run's task */

static void outcome(struct github_outcome *o, int status, const char *word, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void outcome(struct github_outcome *o, int status, const char *word, const char *fmt, ...)
{
    o->status = status;
    snprintf(o->word, sizeof(o->word), "%s", word);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->why, sizeof(o->why), fmt, ap);
    va_end(ap);
}

static void ignored(struct github_outcome *o, const char *metric, const char *why)
{
    metrics_github(metric);
    outcome(o, 200, "ignored", "%s", why);
}

/* Whether login is on the comma-separated list (case-insensitive, as GitHub logins are). */
static bool login_listed(const char *list, const char *login)
{
    size_t n = strlen(login);
    for (const char *p = list; p && *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t k = strcspn(p, ", ");
        if (k == n && n && strncasecmp(p, login, n) == 0)
            return true;
        p += k;
    }
    return false;
}

void review_task(const struct github_event *ev, struct buf *out)
{
    const char *what = ev->kind == GITHUB_EV_REVIEW           ? "A review"
                       : ev->kind == GITHUB_EV_REVIEW_COMMENT ? "A review comment"
                                                              : "A comment";
    buf_printf(out,
               "%s on pull request #%lld of %s, which this session opened, asks for more work. "
               "From @%s (%s):\n\n",
               what, (long long)ev->pr, ev->repo, ev->sender, ev->url);
    const char *text = ev->text && *ev->text ? ev->text : "(no text: the review requests changes)";
    size_t n = strlen(text);
    buf_printf(out, "%.*s%s\n", (int)(n > TASK_TEXT_MAX ? TASK_TEXT_MAX : n), text,
               n > TASK_TEXT_MAX || ev->truncated ? "\n[... cut]" : "");
    if (ev->kind == GITHUB_EV_REVIEW_COMMENT && ev->path[0]) {
        buf_printf(out, "\nIt is about %s", ev->path);
        if (ev->line > 0)
            buf_printf(out, ", line %lld", (long long)ev->line);
        buf_puts(out, ".\n");
        if (ev->hunk && *ev->hunk)
            buf_printf(out, "\n```diff\n%s\n```\n", ev->hunk);
    }
    buf_puts(out, "\nDo what it asks in this repository and commit the result; the server pushes "
                  "your commits to the same pull request. If it asks a question, answer it in "
                  "your final message.");
}

/* Post text as a comment on the pull request, with the user's credential (fire and forget: a
 * failure is logged by github/rest.c). */
static void answer(struct runs *e, const char *user_id, const char *repo, int64_t pr,
                   const char *text)
{
    char *cred = runs_github_credential(e, user_id, repo);
    if (!cred) {
        log_warn("review answer not posted user=%s repo=%s pr=%lld err=\"no credential\"", user_id,
                 repo, (long long)pr);
        return;
    }
    char path[300];
    snprintf(path, sizeof(path), "/repos/%s/issues/%lld/comments", repo, (long long)pr);
    char *body_text = xasprintf("%s\n%s", text, REVIEW_MARK);
    json_t *body = json_pack("{s:s}", "body", body_text);
    struct github_request rq = {
        .api = e->github_api, .credential = cred, .method = "POST", .path = path, .body = body};
    github_rest_call(e->gh, &rq, NULL, NULL);
    json_decref(body);
    free(body_text);
    runs_wipe_free(cred);
}

/* A comment, review or review comment: a follow-up run, or why not. */
static void steer(struct runs *e, const struct github_event *ev, struct github_outcome *o)
{
    struct store_session ses;
    struct err err = {0};
    if (ev->pr <= 0 || !ev->repo[0])
        return ignored(o, "no_pull_request", "it names no pull request");
    if (ev->text && strstr(ev->text, REVIEW_MARK))
        return ignored(o, "own_comment", "the server's own comment");
    int r = store_session_by_pull_request(e->st, ev->repo, ev->pr, &ses, &err);
    if (r == -ENOENT)
        return ignored(o, "no_session", "no session of this server has that pull request");
    if (r < 0)
        return outcome(o, 503, "unavailable", "the store did not answer; redeliver it");
    if (strcmp(ses.pr_state, "closed") == 0 || strcmp(ses.pr_state, "merged") == 0)
        return ignored(o, "closed",
                       "the pull request is closed: its session takes no more steering");
    size_t sl = strlen(ev->sender);
    if (sl > 5 && strcmp(ev->sender + sl - 5, "[bot]") == 0)
        return ignored(o, "bot", "bots do not steer sessions");
    bool allowed = (ses.pr_author[0] && strcasecmp(ses.pr_author, ev->sender) == 0) ||
                   login_listed(e->github_steerers, ev->sender);
    if (!allowed)
        return ignored(o, "stranger", "the sender may not steer this session");
    if (!ev->addressed)
        return ignored(o, "not_addressed", "it does not address the server");
    struct buf task;
    buf_init(&task, 0);
    review_task(ev, &task);
    const char *kind = ev->kind == GITHUB_EV_REVIEW           ? "review"
                       : ev->kind == GITHUB_EV_REVIEW_COMMENT ? "review_comment"
                                                              : "comment";
    json_t *origin = json_pack("{s:s, s:s, s:s, s:s, s:I}", "kind", kind, "url", ev->url, "login",
                               ev->sender, "repo", ev->repo, "pull_request", (json_int_t)ev->pr);
    char *origin_text = json_dumps(origin, JSON_COMPACT);
    json_decref(origin);
    char title[96];
    snprintf(title, sizeof(title), "Review follow-up on #%lld", (long long)ev->pr);
    struct runs_submit s = {.user_id = ses.user_id,
                            .task = task.data,
                            .session_id = ses.id,
                            .title = title,
                            .origin = origin_text};
    char run_id[64], session_id[64];
    r = runs_submit(e, &s, run_id, session_id, &err);
    buf_release(&task);
    free(origin_text);
    if (r < 0) {
        metrics_github("refused");
        char text[700];
        snprintf(text, sizeof(text), "Could not start a follow-up run for [this](%s): %s", ev->url,
                 err.msg);
        answer(e, ses.user_id, ses.pr_repo, ev->pr, text);
        return outcome(o, 200, "refused", "%.150s", err.msg);
    }
    metrics_github("queued");
    log_info("review follow-up queued run=%s session=%s repo=%s pr=%lld by=%s", run_id, ses.id,
             ses.pr_repo, (long long)ev->pr, ev->sender);
    char url[512];
    runs_web_url(e, false, run_id, url, sizeof(url));
    char text[1200];
    snprintf(text, sizeof(text),
             "On it: a follow-up run is queued for [this %s](%s). Follow it here: %s",
             ev->kind == GITHUB_EV_REVIEW           ? "review"
             : ev->kind == GITHUB_EV_REVIEW_COMMENT ? "review comment"
                                                    : "comment",
             ev->url, url);
    answer(e, ses.user_id, ses.pr_repo, ev->pr, text);
    snprintf(o->run_id, sizeof(o->run_id), "%s", run_id);
    outcome(o, 202, "queued", "follow-up run %s queued in session %s", run_id, ses.id);
}

void runs_review_event(void *ctx, const struct github_event *ev, struct github_outcome *o)
{
    struct runs *e = ctx;
    struct store_session ses;
    struct err err = {0};
    switch (ev->kind) {
    case GITHUB_EV_COMMENT:
    case GITHUB_EV_REVIEW:
    case GITHUB_EV_REVIEW_COMMENT: steer(e, ev, o); return;
    case GITHUB_EV_PR_CLOSED:
        if (store_session_by_pull_request(e->st, ev->repo, ev->pr, &ses, &err) < 0)
            return ignored(o, "no_session", "no session of this server has that pull request");
        if (store_session_set_pull_state(e->st, ses.id, ev->merged ? "merged" : "closed", &err) < 0)
            return outcome(o, 503, "unavailable", "the store did not answer; redeliver it");
        metrics_github("closed");
        log_info("review steering ended session=%s repo=%s pr=%lld merged=%d", ses.id, ses.pr_repo,
                 (long long)ev->pr, ev->merged);
        return outcome(o, 200, "recorded", "the session's steering ends: pull request %s",
                       ev->merged ? "merged" : "closed");
    case GITHUB_EV_CI_FAILED:
    case GITHUB_EV_CI_PASSED:
    case GITHUB_EV_IGNORED: break;
    }
    ignored(o, "not_acted_on", "nothing this server acts on");
}

void review_run_ended(struct run *r, const struct store_run *row, const char *status,
                      const json_t *delivery)
{
    struct runs *e = r->e;
    if (!row->origin || !*row->origin)
        return;
    json_t *origin = json_loads(row->origin, 0, NULL);
    const char *repo = json_string_value(json_object_get(origin, "repo"));
    json_int_t pr = json_integer_value(json_object_get(origin, "pull_request"));
    const char *asked = json_string_value(json_object_get(origin, "url"));
    const char *dstatus = json_string_value(json_object_get(delivery, "status"));
    /* a delivery that reached the pull request commented on it with the run's summary */
    if (repo && pr > 0 && !(dstatus && strcmp(dstatus, "delivered") == 0)) {
        char url[512];
        runs_web_url(e, false, row->id, url, sizeof(url));
        const char *summary = row->summary && *row->summary ? row->summary : "";
        const char *reason = json_string_value(json_object_get(delivery, "reason"));
        char *text = xasprintf(
            "The follow-up run for [this](%s) %s%s%s%s\n\n%.20000s\n\n---\nRun `%s`: %s",
            asked ? asked : "", strcmp(status, "succeeded") == 0 ? "finished" : status,
            reason ? " (" : "", reason ? reason : "", reason ? ")." : ".", summary, row->id, url);
        run_redact(r, text);
        answer(e, row->user_id, repo, pr, text);
        free(text);
    }
    json_decref(origin);
}

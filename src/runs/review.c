/* The review loop's acts (src/github has its transport): a comment, review or review comment on
 * a session's pull request, by someone allowed to steer the session and addressed to the server,
 * becomes a follow-up run in that session, answered on the pull request at once and again when
 * the run ends; a pull request closed or merged ends its session's steering.
 *
 * Who may steer: the login of the credential that opened the pull request (the session's owner
 * on GitHub), the logins the operator lists in GITHUB_STEERERS, and those the session's user
 * lists for the repository (their repository settings' steerers). What addresses the server: the
 * mention (GITHUB_MENTION, "@sandbox-mcp") as a word of its own in the text, or a review that
 * requests changes. Comments the server made carry REVIEW_MARK and are never acted on, so that
 * nothing an agent writes into a summary can start another run. Everything else is counted
 * (metrics_github), not logged one by one: anyone who can comment can send it.
 *
 * Failing CI (a session with fix_ci): checks that fail on the head the server last pushed to the
 * session's branch queue a fix run, which gets the failing jobs' names and the end of their logs
 * (read with the user's credential), at most CI_FIX_ATTEMPTS of them since the lineage began
 * (the last push of a run the CI loop did not start). It stops at the first green (said on the
 * pull request), at the cap (said once), or when the failing head is not the one the server
 * pushed: someone else pushed, and the branch is theirs to fix. */
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
    if (!allowed) { /* the user's own list for the repository */
        struct store_repo_setting rs = {0};
        allowed = store_repo_setting_get(e->st, ses.user_id, ses.pr_repo, &rs, &err) == 0 &&
                  login_listed(rs.steerers, ev->sender);
        store_repo_setting_release(&rs);
    }
    if (!allowed)
        return ignored(o, "stranger", "the sender may not steer this session");
    if (!ev->addressed)
        return ignored(o, "not_addressed", "it does not address the server");
    /* once, however it came: a webhook's delivery, its redelivery, or the poller's read */
    char key[600];
    snprintf(key, sizeof(key), "act %s", ev->url);
    int fresh = ev->url[0]
                    ? store_github_delivery_add(e->st, key, time_now_ms(), e->cfg.github_kept, &err)
                    : 1;
    if (fresh < 0)
        return outcome(o, 503, "unavailable", "the store did not answer; redeliver it");
    if (fresh == 0)
        return ignored(o, "duplicate", "acted on before");
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

/* --- failing CI --- */

#define CI_JOBS_MAX 3          /* failing jobs whose logs a fix run gets */
#define CI_LOG_TAIL (6 * 1024) /* bytes of the end of each job's log */
#define CI_FETCHES_MAX 64      /* fix runs being prepared at once (their logs read) */

/* A fix run being prepared: the failing jobs found, then their logs read, one call at a time. */
struct ci_fix {
    struct runs *e;
    struct ci_fix *next;
    char session[64], user[64], repo[200], head[64], name[128], url[512];
    int64_t pr;
    unsigned attempt;
    char *cred;
    struct github_call *call;
    int64_t run_ids[4];
    size_t nruns, next_run;
    struct {
        int64_t id;
        char name[128], url[512];
        char *log;
    } jobs[CI_JOBS_MAX];
    size_t njobs, next_log;
};

static size_t ci_count(const struct runs *e)
{
    size_t n = 0;
    for (const struct ci_fix *f = e->ci_fixes; f; f = f->next)
        n++;
    return n;
}

static void ci_free(struct ci_fix *f)
{
    struct runs *e = f->e;
    for (struct ci_fix **pp = &e->ci_fixes; *pp; pp = &(*pp)->next)
        if (*pp == f) {
            *pp = f->next;
            break;
        }
    github_rest_cancel(f->call);
    runs_wipe_free(f->cred);
    for (size_t i = 0; i < f->njobs; i++)
        free(f->jobs[i].log);
    free(f);
}

void review_release(struct runs *e)
{
    while (e->ci_fixes)
        ci_free(e->ci_fixes);
}

static void ci_call(struct ci_fix *f, const char *path, bool log, github_rest_fn fn)
{
    struct github_request rq = {.api = f->e->github_api,
                                .credential = f->cred,
                                .method = "GET",
                                .path = path,
                                .max = log ? CI_LOG_TAIL : 0,
                                .tail = log,
                                .follow = log};
    f->call = github_rest_call(f->e->gh, &rq, fn, f);
}

/* Everything read: the fix run, and the word on the pull request. */
static void ci_submit(struct ci_fix *f)
{
    struct runs *e = f->e;
    struct buf task;
    buf_init(&task, 0);
    buf_printf(&task,
               "The checks on pull request #%lld of %s failed on the head the server pushed "
               "(%.12s): %s%s%s. Make them pass.\n",
               (long long)f->pr, f->repo, f->head, f->name[0] ? f->name : "CI",
               f->url[0] ? ", " : "", f->url);
    for (size_t i = 0; i < f->njobs; i++) {
        const char *log = f->jobs[i].log ? f->jobs[i].log : "(its log could not be read)";
        buf_printf(&task, "\nFailing job \"%s\" (%s), the end of its log:\n```\n%s\n```\n",
                   f->jobs[i].name, f->jobs[i].url, log);
    }
    if (!f->njobs)
        buf_puts(&task, "\nNo failing job's log could be read: run the project's checks "
                        "yourself to find what fails.\n");
    buf_printf(&task,
               "\nFix the cause in this repository and commit; the server pushes your commits "
               "to the same pull request, and CI runs again. This is fix attempt %u of %u.",
               f->attempt, e->cfg.ci_fix_attempts);
    json_t *origin = json_pack("{s:s, s:s, s:s, s:s, s:I}", "kind", "ci", "url", f->url, "login",
                               "", "repo", f->repo, "pull_request", (json_int_t)f->pr);
    char *origin_text = json_dumps(origin, JSON_COMPACT);
    json_decref(origin);
    char title[96];
    snprintf(title, sizeof(title), "CI fix %u/%u on #%lld", f->attempt, e->cfg.ci_fix_attempts,
             (long long)f->pr);
    struct runs_submit s = {.user_id = f->user,
                            .task = task.data,
                            .session_id = f->session,
                            .title = title,
                            .origin = origin_text};
    char run_id[64], session_id[64], text[1200];
    struct err err = {0};
    int r = runs_submit(e, &s, run_id, session_id, &err);
    buf_release(&task);
    free(origin_text);
    if (r < 0) {
        metrics_github("refused");
        snprintf(text, sizeof(text), "CI failed on %.12s, but no fix run could start: %s", f->head,
                 err.msg);
    } else {
        metrics_github("queued");
        log_info("ci fix queued run=%s session=%s repo=%s pr=%lld head=%.12s attempt=%u", run_id,
                 f->session, f->repo, (long long)f->pr, f->head, f->attempt);
        char url[512];
        runs_web_url(e, false, run_id, url, sizeof(url));
        struct buf names;
        buf_init(&names, 256);
        for (size_t i = 0; i < f->njobs; i++)
            buf_printf(&names, "%s%s", i ? ", " : "", f->jobs[i].name);
        snprintf(text, sizeof(text), "CI failed on %.12s (%s). Fix attempt %u of %u: %s", f->head,
                 names.len ? names.data : (f->name[0] ? f->name : "checks"), f->attempt,
                 e->cfg.ci_fix_attempts, url);
        buf_release(&names);
    }
    answer(e, f->user, f->repo, f->pr, text);
    ci_free(f);
}

static void on_ci_log(void *ctx, const struct github_answer *a)
{
    struct ci_fix *f = ctx;
    f->call = NULL;
    size_t i = f->next_log++;
    if (a->status == 200 && a->text)
        f->jobs[i].log = strndup(a->text, a->text_len);
    if (f->next_log < f->njobs) {
        char path[400];
        snprintf(path, sizeof(path), "/repos/%s/actions/jobs/%lld/logs", f->repo,
                 (long long)f->jobs[f->next_log].id);
        ci_call(f, path, true, on_ci_log);
        return;
    }
    ci_submit(f);
}

static void next_jobs(struct ci_fix *f);

static void on_ci_jobs(void *ctx, const struct github_answer *a)
{
    struct ci_fix *f = ctx;
    f->call = NULL;
    size_t i;
    const json_t *job;
    json_array_foreach(json_object_get(a->json, "jobs"), i, job)
    {
        if (f->njobs == CI_JOBS_MAX ||
            !github_conclusion_failed(json_string_value(json_object_get(job, "conclusion"))))
            continue;
        const char *name = json_string_value(json_object_get(job, "name"));
        const char *url = json_string_value(json_object_get(job, "html_url"));
        f->jobs[f->njobs].id = json_integer_value(json_object_get(job, "id"));
        snprintf(f->jobs[f->njobs].name, sizeof(f->jobs[0].name), "%s", name ? name : "job");
        snprintf(f->jobs[f->njobs].url, sizeof(f->jobs[0].url), "%s", url ? url : "");
        f->njobs++;
    }
    next_jobs(f);
}

/* The jobs of the next failing workflow run, or the logs once every run's are known. */
static void next_jobs(struct ci_fix *f)
{
    char path[400];
    if (f->next_run < f->nruns && f->njobs < CI_JOBS_MAX) {
        snprintf(path, sizeof(path), "/repos/%s/actions/runs/%lld/jobs?filter=latest", f->repo,
                 (long long)f->run_ids[f->next_run++]);
        ci_call(f, path, false, on_ci_jobs);
        return;
    }
    if (!f->njobs) {
        ci_submit(f);
        return;
    }
    f->next_log = 0;
    snprintf(path, sizeof(path), "/repos/%s/actions/jobs/%lld/logs", f->repo,
             (long long)f->jobs[0].id);
    ci_call(f, path, true, on_ci_log);
}

static void on_ci_runs(void *ctx, const struct github_answer *a)
{
    struct ci_fix *f = ctx;
    f->call = NULL;
    size_t i;
    const json_t *run;
    json_array_foreach(json_object_get(a->json, "workflow_runs"), i, run)
    {
        if (f->nruns < sizeof(f->run_ids) / sizeof(f->run_ids[0]) &&
            github_conclusion_failed(json_string_value(json_object_get(run, "conclusion"))))
            f->run_ids[f->nruns++] = json_integer_value(json_object_get(run, "id"));
    }
    next_jobs(f);
}

/* The session a CI event is about: by its pull request, else by the head the server pushed. */
static int ci_session(struct runs *e, const struct github_event *ev, struct store_session *ses,
                      struct err *err)
{
    if (ev->pr > 0)
        return store_session_by_pull_request(e->st, ev->repo, ev->pr, ses, err);
    return store_session_by_ci_head(e->st, ev->repo, ev->head, ses, err);
}

static void ci_failed(struct runs *e, const struct github_event *ev, struct github_outcome *o)
{
    struct store_session ses;
    struct err err = {0};
    int r = ci_session(e, ev, &ses, &err);
    if (r == -ENOENT)
        return ignored(o, "no_session", "no session of this server has that pull request");
    if (r < 0)
        return outcome(o, 503, "unavailable", "the store did not answer; redeliver it");
    if (strcmp(ses.pr_state, "open") != 0)
        return ignored(o, "closed", "the pull request is closed");
    if (!ses.fix_ci)
        return ignored(o, "ci_off", "the session does not fix its CI (run_task fix_ci)");
    if (!ses.ci_head[0] || strcmp(ses.ci_head, ev->head) != 0)
        return ignored(o, "ci_other_head",
                       "the failing head is not the one the server pushed: someone else pushed");
    unsigned cap = e->cfg.ci_fix_attempts;
    if (ses.ci_fixes >= cap) {
        if (ses.ci_fixes == cap) { /* said once: the count then passes the cap */
            store_session_set_ci(e->st, ses.id, NULL, cap + 1, &err);
            char text[400];
            snprintf(text, sizeof(text),
                     "CI still fails on %.12s after %u fix attempt%s: stopping here. A later "
                     "run of the session starts again.",
                     ev->head, cap, cap == 1 ? "" : "s");
            answer(e, ses.user_id, ses.pr_repo, ses.pr_number, text);
        }
        return ignored(o, "ci_cap", "the fix runs of this head's lineage are used up");
    }
    char busy[64];
    if (runs_session_run(e, ses.id, busy, NULL))
        return ignored(o, "ci_busy", "a run of the session is under way: its push is checked next");
    for (const struct ci_fix *f = e->ci_fixes; f; f = f->next)
        if (strcmp(f->session, ses.id) == 0)
            return ignored(o, "ci_busy", "a fix run is being prepared for this head");
    if (ci_count(e) >= CI_FETCHES_MAX)
        return outcome(o, 503, "busy", "too many fix runs being prepared; redeliver it later");
    char *cred = runs_github_credential(e, ses.user_id, ses.pr_repo);
    if (!cred)
        return ignored(o, "no_credential", "the session's owner has no GitHub credential for it");
    if (store_session_set_ci(e->st, ses.id, NULL, ses.ci_fixes + 1, &err) < 0) {
        runs_wipe_free(cred);
        return outcome(o, 503, "unavailable", "the store did not answer; redeliver it");
    }
    struct ci_fix *f = xcalloc(1, sizeof(*f));
    f->e = e;
    f->cred = cred;
    f->attempt = ses.ci_fixes + 1;
    f->pr = ses.pr_number;
    snprintf(f->session, sizeof(f->session), "%s", ses.id);
    snprintf(f->user, sizeof(f->user), "%s", ses.user_id);
    snprintf(f->repo, sizeof(f->repo), "%s", ses.pr_repo);
    snprintf(f->head, sizeof(f->head), "%s", ev->head);
    snprintf(f->name, sizeof(f->name), "%s", ev->name);
    snprintf(f->url, sizeof(f->url), "%s", ev->url);
    f->next = e->ci_fixes;
    e->ci_fixes = f;
    char path[400];
    snprintf(path, sizeof(path), "/repos/%s/actions/runs?head_sha=%s&per_page=20", f->repo,
             f->head);
    ci_call(f, path, false, on_ci_runs);
    outcome(o, 202, "accepted", "fix attempt %u of %u: reading the failing jobs' logs", f->attempt,
            cap);
}

static void ci_passed(struct runs *e, const struct github_event *ev, struct github_outcome *o)
{
    struct store_session ses;
    struct err err = {0};
    if (ci_session(e, ev, &ses, &err) < 0 || strcmp(ses.ci_head, ev->head) != 0 || !ses.ci_fixes)
        return ignored(o, "ci_passed", "nothing to do: no fix runs were made for this head");
    unsigned n = ses.ci_fixes > e->cfg.ci_fix_attempts ? e->cfg.ci_fix_attempts : ses.ci_fixes;
    store_session_set_ci(e->st, ses.id, NULL, 0, &err);
    char text[300];
    snprintf(text, sizeof(text), "CI passes on %.12s after %u fix attempt%s.", ev->head, n,
             n == 1 ? "" : "s");
    answer(e, ses.user_id, ses.pr_repo, ses.pr_number, text);
    metrics_github("ci_passed");
    outcome(o, 200, "recorded", "CI passes after %u fix attempt%s", n, n == 1 ? "" : "s");
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
    case GITHUB_EV_CI_FAILED: ci_failed(e, ev, o); return;
    case GITHUB_EV_CI_PASSED: ci_passed(e, ev, o); return;
    case GITHUB_EV_IGNORED: break;
    }
    ignored(o, "not_acted_on", "nothing this server acts on");
}

void review_run_ended(struct run *r, const struct store_run *row, const char *status,
                      const json_t *delivery)
{
    struct runs *e = r->e;
    json_t *origin = row->origin && *row->origin ? json_loads(row->origin, 0, NULL) : NULL;
    const char *kind = json_string_value(json_object_get(origin, "kind"));
    const char *dstatus = json_string_value(json_object_get(delivery, "status"));
    const char *tip = json_string_value(json_array_get(json_object_get(delivery, "commits"), 0));
    if (dstatus && strcmp(dstatus, "delivered") == 0 && tip) {
        /* the head CI runs on next; a push of a run the CI loop did not start begins a lineage */
        struct store_session ses = {0};
        struct err err = {0};
        store_session_get(e->st, NULL, r->session_id, &ses, &err);
        bool fix = kind && strcmp(kind, "ci") == 0;
        if (store_session_set_ci(e->st, r->session_id, tip, fix ? ses.ci_fixes : 0, &err) < 0)
            log_error("ci head not recorded run=%s err=\"%s\"", r->id, err.msg);
    }
    if (!origin)
        return;
    const char *repo = json_string_value(json_object_get(origin, "repo"));
    json_int_t pr = json_integer_value(json_object_get(origin, "pull_request"));
    const char *asked = json_string_value(json_object_get(origin, "url"));
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

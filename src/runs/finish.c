/* The end of a run: once its agent exited, was stopped, or never started, the changes it left
 * (a script in the sandbox, read back by scripts_parse_changes), its full diff for the run page
 * (diff.c, as git streams it), the hand-off to delivery (deliver.c: the push and the pull
 * request, when the run asks for one), and its end recorded: outcome, token revoked, its final
 * phase and status, its waiters woken, its slot given to the next.
 *
 * The rule of this file: a run that reaches run_finish ends exactly once, through
 * run_record_end, whatever fails on the way; the sandbox is only read (and committed to, for a
 * delivering run), and everything said to the user about its end is written here. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json_write.h"
#include "base/log.h"
#include "base/util.h"
#include "runs/deliver.h"
#include "runs/diff.h"
#include "store/store.h"

/* The store did not answer (the database is away): the run's end is recorded again by the tick,
 * with what it came to, until it is. */
static void run_end_later(struct run *r, const char *changes, json_t *delivery, const char *why)
{
    if (!r->end_pending)
        log_warn("run end not recorded yet run=%s err=\"%s\"", r->id, why);
    r->end_pending = true;
    r->phase = PH_FINISHING; /* a queued run is not started meanwhile */
    if (changes != r->changes) {
        char *kept = changes ? xstrdup(changes) : NULL;
        free(r->changes);
        r->changes = kept;
    }
    if (delivery != r->end_delivery) {
        json_incref(delivery);
        json_decref(r->end_delivery);
        r->end_delivery = delivery;
    }
}

void run_record_end(struct run *r, const char *changes, json_t *delivery)
{
    struct runs *e = r->e;
    struct err err = {0};
    _cleanup_(store_run_release) struct store_run row = {0};
    int got = store_run_get(e->st, NULL, r->id, &row, &err);
    if (got < 0 && got != -ENOENT && !r->dropped) {
        run_end_later(r, changes, delivery, err.msg);
        return;
    }
    const char *status, *reason;
    char why[1024];
    int success = 0;
    const char *error = NULL;
    if (r->cancelled) {
        status = "cancelled";
        reason = "cancelled by the user";
        error = "the run was cancelled";
    } else if (r->timed_out) {
        status = "failed";
        snprintf(why, sizeof(why), "timed out after %.3g minutes", (double)r->timeout_ms / 60000.0);
        reason = error = why;
    } else if (r->fail[0]) {
        status = "failed";
        reason = error = r->fail;
    } else if (!r->exited) {
        status = "failed";
        reason = error = r->adopted_dead
                             ? "interrupted: the agent stopped while the server was down"
                             : "interrupted: the agent stopped without reporting an exit status";
    } else if (r->exit_code != 0 || (row.error && *row.error)) {
        status = "failed";
        /* an agent failing for want of disk says so first */
        char disk[420] = "";
        if (r->sbx && sandbox_disk_note(r->sbx, disk, sizeof(disk) - 2))
            strcat(disk, "; ");
        if (row.error && *row.error) {
            snprintf(why, sizeof(why), "%sthe agent reported an error: %.400s", disk, row.error);
        } else if (r->exit_signal) {
            snprintf(why, sizeof(why), "%sthe agent was killed by signal %d (%s)", disk,
                     r->exit_signal, strsignal(r->exit_signal));
            error = why;
        } else {
            snprintf(why, sizeof(why), "%sthe agent exited with status %d", disk, r->exit_code);
            error = why;
        }
        reason = why;
    } else {
        status = "succeeded";
        reason = r->rebuild[0]    ? "the environment was rebuilt"
                 : r->delivers[0] ? "the attempt was delivered"
                                  : "the agent finished";
        success = 1;
    }
    int revoked = store_proxy_token_revoke_run(e->st, r->id, &err);
    if (revoked < 0)
        log_error("run tokens not revoked run=%s err=\"%s\"", r->id, err.msg);
    if (!r->dropped) { /* else its end was written by the node that ended it */
        /* what the run's secrets may have reached (a commit message, an error) is redacted */
        _cleanup_free_ char *error_kept = error ? xstrdup(error) : NULL;
        _cleanup_free_ char *changes_kept = changes ? xstrdup(changes) : NULL;
        run_redact(r, error_kept);
        run_redact(r, changes_kept);
        if (store_run_set_outcome(e->st, r->id, success, NULL, error_kept, changes_kept,
                                  r->exited ? r->exit_code : -1, &err) < 0) {
            run_end_later(r, changes, delivery, err.msg);
            return;
        }
        if (delivery) {
            char *text = json_dumps(delivery, JSON_COMPACT);
            if (store_run_set_delivery(e->st, r->id, text, &err) < 0)
                log_error("run delivery not stored run=%s err=\"%s\"", r->id, err.msg);
            free(text);
        }
        store_session_update(e->st, r->session_id, NULL, NULL, time_now_ms(), &err);
        run_set_final_phase(r, status);
        int rc = store_run_transition(e->st, r->id, status, reason, time_now_ms(), &err);
        if (rc < 0 && rc != -EALREADY) { /* -EALREADY: cancelled while it wound down */
            run_end_later(r, changes, delivery, err.msg);
            return;
        }
        if (rc == 0)
            log_info("run %s run=%s reason=\"%s\"", status, r->id, reason);
        review_run_ended(r, &row, status, delivery);
    }
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/repo.tar", r->dir);
    unlink(path);
    if (r->wd >= 0)
        inotify_rm_watch(e->inotify_fd, r->wd);
    if (r->wd_status >= 0)
        inotify_rm_watch(e->inotify_fd, r->wd_status);
    if (r->sbx)
        sandbox_release(r->sbx);
    if (r->sw)
        sandbox_acquire_cancel(r->sw);
    r->sbx = NULL;
    r->sw = NULL;
    if (r->rebuild[0])
        envs_rebuild_ended(r, success);
    run_unlink(r);
    runs_notify_waiters(e, r->id);
    run_free(r);
    runs_schedule(e);
}

/* Whether the run has done what it was asked, as far as can be told before its end is
 * recorded (run_record_end decides it for good, the same way). */
static bool run_ok(struct run *r)
{
    if (r->cancelled || r->timed_out || r->fail[0] || !r->exited || r->exit_code != 0)
        return false;
    struct err err = {0};
    _cleanup_(store_run_release) struct store_run row = {0};
    return store_run_get(r->e->st, NULL, r->id, &row, &err) == 0 && !(row.error && *row.error);
}

static void on_delivered(void *ctx, json_t *delivery)
{
    struct run *r = ctx;
    r->dv = NULL;
    if (!r->base_branch[0] &&
        strcmp(json_string_value(json_object_get(delivery, "status")), "delivered") == 0) {
        /* the push made an empty repository's first branch: the session's next run works on
         * a branch of its own again, made from this one, with a pull request */
        struct err err = {0};
        if (store_session_set_branch(r->e->st, r->session_id, NULL, NULL, &err) < 0)
            log_error("session branch not reset run=%s err=\"%s\"", r->id, err.msg);
    }
    run_record_end(r, r->changes, delivery);
}

/* The pull request's text: the agent's summary and a link to the run's page. */
static char *delivery_body(struct run *r, bool follow_up)
{
    struct err err = {0};
    _cleanup_(store_run_release) struct store_run row = {0};
    store_run_get(r->e->st, NULL, r->id, &row, &err);
    char url[512];
    runs_web_url_gen(r->e, r->id, row.view_generation, url, sizeof(url));
    const char *summary = row.summary && *row.summary ? row.summary : "(the agent left no summary)";
    char *body =
        /* "Run `<id>` by sandbox-mcp" signs it: the delivery knows its own comment by that */
        xasprintf("%s%s%s%.60000s\n\n---\nRun `%s` by sandbox-mcp: %s\n" REVIEW_MARK "\n",
                  follow_up ? "**Follow-up run**: " : "", follow_up && r->title ? r->title : "",
                  follow_up ? "\n\n" : "", summary, r->id, url);
    run_redact(r, body);
    return body;
}

/* Push the run's commits and open or comment on the pull request; run_record_end when done. */
static json_t *deliver(struct run *r, const char *changes)
{
    struct runs *e = r->e;
    crash_point("delivery-committed");
    if (!r->repository)
        return NULL;
    if (!r->github_repo[0])
        return deliver_skipped("the repository is not on GitHub (%s), so there is no pull request",
                               e->github_base);
    if (r->pr == PR_NONE) {
        char *cred = runs_github_credential(e, r->user_id, r->github_repo);
        bool served = cred != NULL;
        runs_wipe_free(cred);
        return served ? deliver_skipped("the run was asked for no pull request (pull_request "
                                        "'none')")
                      : deliver_skipped("no GitHub credential serves %s: set yours with "
                                        "`sandbox-mcp user credential set NAME github` or on the "
                                        "account page, then ask again",
                                        r->github_repo);
    }
    if (!r->work_branch[0])
        return deliver_skipped("the run ended before its branch was made");
    if (!run_ok(r))
        return deliver_skipped("the run did not succeed, so nothing was pushed");
    json_t *c = changes ? json_loads(changes, 0, NULL) : NULL;
    json_t *commits = json_object_get(c, "commits");
    if (json_array_size(commits) == 0) {
        json_decref(c);
        return deliver_skipped("the run made no commits and left no changes, so nothing was "
                               "pushed");
    }
    if (r->group_id[0] && !r->delivers[0]) {
        /* an attempt: its commits wait on its session's branch, in its sandbox, to be picked */
        json_decref(c);
        return json_pack("{s:s, s:s, s:s}", "status", "held", "reason",
                         "one of several attempts: nothing is pushed until it is picked "
                         "(deliver_run, or the button on the attempts' page)",
                         "branch", r->work_branch);
    }
    char *cred = runs_github_credential(e, r->user_id, r->github_repo);
    if (!cred) {
        json_decref(c);
        return deliver_skipped("no GitHub credential serves %s: set yours with `sandbox-mcp user "
                               "credential set NAME github` or on the account page",
                               r->github_repo);
    }
    struct store_session ses = {0};
    struct err err = {0};
    store_session_get(e->st, NULL, r->session_id, &ses, &err);
    bool follow_up = ses.pr_number > 0;
    char *body = delivery_body(r, follow_up);
    /* when the run began: its comment, if a delivery cut short made it, is no older */
    struct store_run row = {0};
    store_run_get(e->st, NULL, r->id, &row, &err);
    int64_t created_at = row.created_at;
    store_run_release(&row);
    char title[256];
    const char *what = r->title && *r->title ? r->title : r->task;
    size_t tl = strcspn(what, "\n");
    snprintf(title, sizeof(title), "%.*s", (int)(tl > 200 ? 200 : tl), what);
    run_redact(r, title);
    struct deliver_opts o = {.st = e->st,
                             .jwt_key = e->cfg.jwt_key,
                             .jwt_keylen = e->cfg.jwt_keylen,
                             .sbx = r->sbx,
                             .user_id = r->user_id,
                             .run_id = r->id,
                             .session_id = r->session_id,
                             .workdir = r->workdir,
                             .proxy_url = PROXY_URL,
                             .repo = r->github_repo,
                             .work_branch = r->work_branch,
                             .base_branch = r->base_branch,
                             .credential = cred,
                             .api = e->github_api,
                             .draft = r->pr == PR_DRAFT,
                             .title = title,
                             .body = body,
                             .pr_number = ses.pr_number,
                             .run_created_at = created_at,
                             .pr_url = ses.pr_url,
                             .commits = commits};
    if (follow_up)
        run_set_phase(r, "delivering", "pushing to %s and commenting on pull request #%lld",
                      r->work_branch, (long long)ses.pr_number);
    else
        run_set_phase(r, "delivering", "pushing to %s and opening a pull request", r->work_branch);
    r->dv = deliver_start(e->deliverer, &o, on_delivered, r, &err);
    runs_wipe_free(cred);
    free(body);
    json_decref(c);
    if (!r->dv)
        return deliver_skipped("the push could not start: %s", err.msg);
    return NULL;
}

/* The changes and the diff are in: deliver them when the run asks, then record the end. */
static void deliver_and_end(struct run *r)
{
    json_t *skipped = deliver(r, r->changes);
    if (r->dv) /* on_delivered ends it */
        return;
    run_record_end(r, r->changes, skipped);
    json_decref(skipped);
}

/* The full diff for the run's page: parsed as it streams out of git (diff.c), so it is cut to
 * its limits whatever git writes; stored, then the end recorded. */
static void on_diff_output(void *ctx, enum sandbox_stream s, const char *data, size_t len)
{
    struct run *r = ctx;
    if (s == SANDBOX_STDOUT)
        diff_feed(r->diff, data, len);
}

static void on_diff(void *ctx, struct sandbox_exec_result *res, const struct err *err)
{
    struct run *r = ctx;
    r->ex = NULL;
    json_t *j = diff_finish(r->diff, res && res->exit_code == 0 && !res->timed_out);
    diff_free(r->diff);
    r->diff = NULL;
    if (!res || res->exit_code != 0) {
        _cleanup_free_ char *why = xstrdup(err            ? err->msg
                                           : res->err_len ? res->err
                                                          : "git diff failed");
        run_redact(r, why);
        size_t n = strcspn(why, "\n");
        log_warn("run diff incomplete run=%s err=\"%.*s\"", r->id, (int)(n < 200 ? n : 200), why);
    }
    /* a diff cut short is kept (it says so); a git that failed at once gives none */
    struct err serr = {0};
    if (res && (res->exit_code == 0 || json_array_size(json_object_get(j, "files")) ||
                json_integer_value(json_object_get(j, "more_files")))) {
        char *text = json_write_text(j, NULL);
        run_redact(r, text);
        if (store_run_set_diff(r->e->st, r->id, text, &serr) < 0)
            log_error("run diff not stored run=%s err=\"%s\"", r->id, serr.msg);
        free(text);
    }
    json_decref(j);
    deliver_and_end(r);
}

static void collect_diff(struct run *r)
{
    /* without a starting commit, against git's empty tree */
    _cleanup_free_ char *cmd =
        diff_command(r->base[0] ? r->base : "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
    const char *env[] = {"GIT_CONFIG_NOSYSTEM=1", "GIT_OPTIONAL_LOCKS=0", NULL};
    struct sandbox_exec_opts o = {
        .command = cmd, .cwd = r->workdir, .env = env, .timeout_ms = 60000, .output_bytes = 8192};
    struct err err = {0};
    r->diff = diff_new(NULL);
    r->ex = cmd ? sandbox_exec_start(r->sbx, &o, on_diff_output, on_diff, r, &err) : NULL;
    if (!r->ex) {
        log_warn("run diff unavailable run=%s err=\"%s\"", r->id, cmd ? err.msg : "no base");
        deliver_and_end(r);
    }
}

static void on_changes(void *ctx, struct sandbox_exec_result *res, const struct err *err)
{
    struct run *r = ctx;
    r->ex = NULL;
    r->changes = res && res->exit_code == 0 ? scripts_parse_changes(res->out) : NULL;
    run_redact(r, r->changes);
    if (err)
        log_warn("run changes unavailable run=%s err=\"%s\"", r->id, err->msg);
    collect_diff(r);
}

static void collect_changes(struct run *r)
{
    r->phase = PH_FINISHING;
    run_note_end(r);
    /* a plan_first run whose plan was not approved delivers nothing */
    if (r->plan_first && r->agent_pid > 0 && !r->fail[0] && !r->cancelled && !r->timed_out &&
        !r->dropped && !run_plan_approved(r, r->fail, sizeof(r->fail)))
        log_info("run plan not approved run=%s why=\"%s\"", r->id, r->fail);
    if (r->dropped || !r->sbx || !r->prepared || !r->workdir[0] ||
        (!r->base[0] && !r->repository)) {
        json_t *skipped = run_delivering(r)
                              ? deliver_skipped("the run ended before its workspace was ready")
                              : NULL;
        run_record_end(r, NULL, skipped);
        json_decref(skipped);
        return;
    }
    run_set_phase(r, "finishing", "collecting the changes");
    /* What the agent of a run that delivers left uncommitted is committed by the server, so
     * that it is pushed with the rest. */
    _cleanup_free_ char *cmd = scripts_changes(r->workdir, r->base, run_delivering(r) && run_ok(r));
    const char *what = r->title && *r->title ? r->title : "Changes";
    size_t wl = strcspn(what, "\n");
    char *msg = xasprintf("SMCP_MSG=%.*s (left uncommitted by the agent)\n\nCommitted by "
                          "sandbox-mcp when run %s ended: the agent left these changes "
                          "uncommitted.",
                          (int)(wl > 120 ? 120 : wl), what, r->id);
    const char *env[] = {"GIT_CONFIG_NOSYSTEM=1", "GIT_OPTIONAL_LOCKS=0", msg, NULL};
    struct sandbox_exec_opts o = {
        .command = cmd, .env = env, .timeout_ms = 60000, .output_bytes = 1 << 20};
    struct err err = {0};
    r->ex = sandbox_exec_start(r->sbx, &o, NULL, on_changes, r, &err);
    free(msg);
    if (!r->ex) {
        log_warn("run changes unavailable run=%s err=\"%s\"", r->id, err.msg);
        run_record_end(r, NULL, NULL);
    }
}

/* Whether an agent's run ends later: while the store does not answer, or has not taken its last
 * events, its end (its changes collected, its delivery, its status) waits, and the tick, which
 * ingests the events of the runs whose agent has ended and ends them, tries again. */
static bool run_end_waits(struct run *r)
{
    struct err err = {0};
    if (r->dropped || r->phase != PH_AGENT)
        return false;
    if (!r->offset_unsure && store_user_count(r->e->st, &err) >= 0) {
        if (r->end_waits)
            log_info("run end goes on run=%s", r->id);
        r->end_waits = false;
        return false;
    }
    if (!r->end_waits)
        log_warn("run end waits for the store run=%s err=\"%s\"", r->id,
                 err.msg[0] ? err.msg : "its last events are not stored yet");
    r->end_waits = true;
    return true;
}

/* The run is over (the agent exited, was killed, or never started): store what remains. */
void run_finish(struct run *r)
{
    if (r->phase == PH_FINISHING)
        return;
    if (r->clone_active) {
        kill(r->clone.pid, SIGKILL);
        proc_watch_abandon(&r->clone);
        r->clone_active = false;
    }
    egress_lookup_cancel(r->lookup);
    r->lookup = NULL;
    if (r->start_armed) {
        loop_timer_stop(&r->start);
        r->start_armed = false;
    }
    if (r->ex || r->snapshotting) {
        /* a preparation step: on_prepared sees phase FINISHING and stops there (a snapshot's
         * copy, bounded, is waited for) */
        if (r->ex)
            sandbox_exec_kill(r->ex);
        r->phase = PH_FINISHING;
        return;
    }
    if (r->agent_pid > 0 && r->sbx && (r->cancelled || r->timed_out))
        sandbox_kill_group(r->sbx, r->agent_pid);
    if (r->agent_pid > 0) {
        run_ingest(r);
        if (run_end_waits(r))
            return;
        run_check_output(r);
    }
    collect_changes(r);
}

void run_fail(struct run *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->fail, sizeof(r->fail), fmt, ap);
    va_end(ap);
    run_finish(r);
}

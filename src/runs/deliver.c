/* Delivery of a run's commits: a push from the run's workspace through the sandbox's git proxy,
 * then the pull request through GitHub's REST API.
 *
 * The push runs git inside the sandbox, where the repository is, so nothing of the agent's
 * making (its hooks, its configuration, its objects) is ever read on the host. What keeps it
 * honest is the proxy, not this git: the token it carries opens exactly one repository and
 * pushes exactly one branch of it, fast-forward only, and is good for this sandbox's listener
 * alone. Whatever the agent left in the repository could at most push other commits to that
 * branch, which its commits were going to be anyway.
 *
 * The REST calls are the server's own, with the user's token (or the operator's for the
 * repositories the operator lists), on the loop through libcurl's multi interface. */
#include "runs/deliver.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "github/rest.h"
#include "proxy/proxy.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

#define PUSH_TIMEOUT_MS 600000
#define PUSH_OUTPUT_MAX (64u << 10)
#define TOKEN_TTL_SECONDS 900

enum step { STEP_PUSH, STEP_CREATE, STEP_FIND, STEP_COMMENT, STEP_COMMENT_LOOK, STEP_GET };

struct delivery {
    struct deliverer *d;
    struct delivery *next;
    deliver_done_fn done;
    void *ctx;
    struct store *st;
    struct sandbox *sbx;
    char *user_id, *run_id, *session_id, *repo, *work_branch, *base_branch, *credential, *api,
        *title, *body;
    char *pr_url;
    int64_t pr_number;
    bool draft;
    char pr_author[64]; /* the login that opened the pull request, as GitHub answered */
    enum step step;
    int64_t since;         /* ms: the run's comment, if made before, is no older */
    unsigned looks, posts; /* of the run's comment: looked for, made */
    char last_why[256];    /* why the last attempt at it failed */
    struct sandbox_exec *ex;
    struct github_call *call; /* the REST call under way, or NULL */
    json_t *result;
};

struct deliverer {
    struct github_rest *gh;
    struct delivery *active;
};

struct deliverer *deliverer_new(void)
{
    struct deliverer *d = xcalloc(1, sizeof(*d));
    d->gh = github_rest_new();
    return d;
}

struct github_rest *deliverer_github(struct deliverer *d)
{
    return d->gh;
}

static void delivery_free(struct delivery *v)
{
    github_rest_cancel(v->call);
    if (v->credential)
        explicit_bzero(v->credential, strlen(v->credential));
    free(v->user_id);
    free(v->run_id);
    free(v->session_id);
    free(v->repo);
    free(v->work_branch);
    free(v->base_branch);
    free(v->credential);
    free(v->api);
    free(v->title);
    free(v->body);
    free(v->pr_url);
    json_decref(v->result);
    free(v);
}

void deliverer_free(struct deliverer *d)
{
    if (!d)
        return;
    while (d->active) {
        struct delivery *v = d->active;
        d->active = v->next;
        /* a push still running in the sandbox is left to end on its own; its callback is
         * never called once the loop has stopped */
        delivery_free(v);
    }
    github_rest_free(d->gh);
    free(d);
}

json_t *deliver_skipped(const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    return json_pack("{s:s, s:s}", "status", "skipped", "reason", why);
}

void deliver_branch_name(const char *session_id, const char *what, char out[128])
{
    size_t n = strlen(session_id);
    const char *tail = n > 8 ? session_id + n - 8 : session_id;
    char slug[48];
    size_t k = 0;
    bool dash = false;
    for (const char *p = what ? what : ""; *p && k < 40; p++) {
        unsigned char c = (unsigned char)*p;
        if (isalnum(c) && c < 0x80) {
            if (dash && k > 0)
                slug[k++] = '-';
            slug[k++] = (char)tolower(c);
            dash = false;
        } else {
            dash = true;
        }
    }
    while (k > 0 && slug[k - 1] == '-')
        k--;
    slug[k] = '\0';
    snprintf(out, 128, "sandbox-mcp/%s%s%s", tail, k ? "-" : "", slug);
}

/* --- the end --- */

static void unlink_delivery(struct delivery *v)
{
    for (struct delivery **pp = &v->d->active; *pp; pp = &(*pp)->next)
        if (*pp == v) {
            *pp = v->next;
            return;
        }
}

static void finish(struct delivery *v, const char *status, const char *why)
{
    json_object_set_new(v->result, "status", json_string(status));
    if (why)
        json_object_set_new(v->result, "reason", json_string(why));
    log_info("run delivery %s run=%s repo=%s branch=%s", status, v->run_id, v->repo,
             v->work_branch);
    unlink_delivery(v);
    v->done(v->ctx, v->result);
    delivery_free(v);
}

static void finishf(struct delivery *v, const char *status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finishf(struct delivery *v, const char *status, const char *fmt, ...)
{
    char why[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    finish(v, status, why);
}

static void set_pull_request(struct delivery *v, const char *url, int64_t number, const char *state,
                             bool draft)
{
    json_object_set_new(v->result, "pull_request",
                        json_pack("{s:s, s:I, s:s, s:b}", "url", url, "number", (json_int_t)number,
                                  "state", state, "draft", draft));
}

/* --- REST --- */

static void on_rest_done(void *ctx, const struct github_answer *a);

/* method path (below the API base) with a JSON body (NULL: none). */
static void rest(struct delivery *v, enum step step, const char *method, const char *path,
                 json_t *body)
{
    v->step = step;
    /* a pull request opened twice is refused as a duplicate (422, found then): safe to make
     * again; a comment is not (GitHub keeps no key to tell a second one by): it is looked for
     * after a 5xx instead (STEP_COMMENT_LOOK) */
    struct github_request rq = {.api = v->api,
                                .credential = v->credential,
                                .method = method,
                                .path = path,
                                .body = body,
                                .idempotent = step == STEP_CREATE};
    v->call = github_rest_call(v->d->gh, &rq, on_rest_done, v);
}

/* GitHub's reason for a refusal: its message, and the first of its errors' messages. */
static void github_reason(const json_t *j, long status, char *out, size_t cap)
{
    const char *msg = json_string_value(json_object_get(j, "message"));
    const json_t *errors = json_object_get(j, "errors");
    const json_t *first = json_array_get(errors, 0);
    const char *detail = json_string_value(json_object_get(first, "message"));
    if (!detail)
        detail = json_string_value(json_object_get(first, "code"));
    snprintf(out, cap, "HTTP %ld%s%.200s%s%.200s", status, msg ? ": " : "", msg ? msg : "",
             detail ? " (" : "", detail ? detail : "");
    if (detail)
        snprintf(out + strlen(out), cap - strlen(out), ")");
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < ' ')
            *p = ' ';
}

static bool pull_from(struct delivery *v, const json_t *pr)
{
    const char *url = json_string_value(json_object_get(pr, "html_url"));
    json_int_t number = json_integer_value(json_object_get(pr, "number"));
    if (!url || number <= 0)
        return false;
    const char *state = json_string_value(json_object_get(pr, "state"));
    bool merged = json_is_true(json_object_get(pr, "merged"));
    const char *author = json_string_value(json_object_get(json_object_get(pr, "user"), "login"));
    snprintf(v->pr_author, sizeof(v->pr_author), "%s", author ? author : "");
    set_pull_request(v, url, number,
                     merged  ? "merged"
                     : state ? state
                             : "open",
                     json_is_true(json_object_get(pr, "draft")));
    return true;
}

static void record_new_pull(struct delivery *v)
{
    const json_t *pr = json_object_get(v->result, "pull_request");
    struct err err = {0};
    const char *url = json_string_value(json_object_get(pr, "url"));
    /* the notification first: should the server stop between the two, the next start finds
     * the pull request again and queues the same event, which is kept once */
    if (store_notify_event(v->st, "pull_request.opened", v->run_id, url, time_now_ms(), &err) < 0)
        log_error("pull request notification not queued run=%s err=\"%s\"", v->run_id, err.msg);
    if (store_session_set_pull_request(v->st, v->session_id,
                                       json_integer_value(json_object_get(pr, "number")), url,
                                       v->repo, v->pr_author, &err) < 0)
        log_error("pull request not recorded run=%s err=\"%s\"", v->run_id, err.msg);
}

/* Whether one of comments (GitHub's list) is the run's own delivery comment, which signs it
 * "Run `<id>` by sandbox-mcp" (finish.c; the review loop's "On it" links the run's page too, so
 * the link alone does not tell). */
static bool commented(const json_t *comments, const char *run_id)
{
    char mark[96];
    snprintf(mark, sizeof(mark), "Run `%s` by sandbox-mcp", run_id);
    size_t i;
    const json_t *c;
    json_array_foreach(comments, i, c)
    {
        const char *body = json_string_value(json_object_get(c, "body"));
        if (body && strstr(body, mark))
            return true;
    }
    return false;
}

static void open_or_comment(struct delivery *v);

/* The run's comment, made once: the pull request's comments since the run began are looked
 * through first (one signed with the run's id is the run's, made by a delivery a restart cut
 * short, or by a call GitHub answered with a 5xx after it had made it). */
static void look_for_comment(struct delivery *v)
{
    char since[32], path[600];
    v->looks++;
    time_format_rfc3339(v->since, since);
    snprintf(path, sizeof(path), "/repos/%s/issues/%lld/comments?per_page=100&since=%s", v->repo,
             (long long)v->pr_number, since);
    rest(v, STEP_COMMENT_LOOK, "GET", path, NULL);
}

static void post_comment(struct delivery *v)
{
    char path[400];
    v->posts++;
    snprintf(path, sizeof(path), "/repos/%s/issues/%lld/comments", v->repo,
             (long long)v->pr_number);
    json_t *body = json_pack("{s:s}", "body", v->body);
    rest(v, STEP_COMMENT, "POST", path, body);
    json_decref(body);
}

static void on_rest_done(void *ctx, const struct github_answer *a)
{
    struct delivery *v = ctx;
    v->call = NULL;
    long status = a->status;
    const json_t *j = a->json;
    char why[512];
    if (!status)
        snprintf(why, sizeof(why), "%s", a->why);
    else
        github_reason(j, status, why, sizeof(why));
    enum step step = v->step;
    char path[600];
    switch (step) {
    case STEP_CREATE:
        if (status == 201 && pull_from(v, j)) {
            crash_point("delivery-opened");
            record_new_pull(v);
            finish(v, "delivered", NULL);
        } else if (status == 422 && strstr(why, "already exists")) {
            /* opened before (a delivery cut short by a restart): find it */
            const char *slash = strchr(v->repo, '/');
            char *head = curl_easy_escape(NULL, v->work_branch, 0);
            snprintf(path, sizeof(path), "/repos/%s/pulls?state=open&head=%.*s:%s", v->repo,
                     (int)(slash - v->repo), v->repo, head);
            curl_free(head);
            rest(v, STEP_FIND, "GET", path, NULL);
        } else {
            finishf(v, "failed", "pushed, but the pull request was not opened: %s", why);
        }
        break;
    case STEP_FIND:
        if (status == 200 && pull_from(v, json_array_get(j, 0))) {
            record_new_pull(v);
            finish(v, "delivered", NULL);
        } else {
            finishf(v, "failed", "pushed, but the pull request was not opened: %s", why);
        }
        break;
    case STEP_COMMENT:
        snprintf(v->last_why, sizeof(v->last_why), "%s", why);
        if ((status == 0 || status >= 500) && v->looks < 2) {
            look_for_comment(v); /* GitHub may have made it before it failed to say so */
            break;
        }
        if (status != 201) {
            set_pull_request(v, v->pr_url, v->pr_number, "unknown", false);
            finishf(v, "failed", "pushed, but the pull request was not commented on: %s", why);
            break;
        }
        crash_point("delivery-commented");
        snprintf(path, sizeof(path), "/repos/%s/pulls/%lld", v->repo, (long long)v->pr_number);
        rest(v, STEP_GET, "GET", path, NULL);
        break;
    case STEP_COMMENT_LOOK:
        if (status != 200) {
            set_pull_request(v, v->pr_url, v->pr_number, "unknown", false);
            finishf(v, "failed", "pushed, but the pull request was not commented on: %s", why);
        } else if (commented(j, v->run_id)) {
            log_info("delivery comment found run=%s pull=%lld", v->run_id, (long long)v->pr_number);
            snprintf(path, sizeof(path), "/repos/%s/pulls/%lld", v->repo, (long long)v->pr_number);
            rest(v, STEP_GET, "GET", path, NULL);
        } else if (v->posts < 2) {
            post_comment(v); /* not made (yet): made, at most twice */
        } else {
            set_pull_request(v, v->pr_url, v->pr_number, "unknown", false);
            finishf(v, "failed", "pushed, but the pull request was not commented on: %s",
                    v->last_why);
        }
        break;
    case STEP_GET:
        if (status != 200 || !pull_from(v, j))
            set_pull_request(v, v->pr_url, v->pr_number, "unknown", false);
        finish(v, "delivered", NULL);
        break;
    case STEP_PUSH: break;
    }
}

static void open_or_comment(struct delivery *v)
{
    char path[400];
    if (!v->base_branch[0]) {
        /* an empty repository: the push made its first branch, and there is nothing to
         * compare it with */
        finishf(v, "delivered",
                "the repository was empty: the push created its branch '%s', so there is no "
                "pull request",
                v->work_branch);
        return;
    }
    if (v->pr_number > 0) {
        look_for_comment(v);
        return;
    }
    snprintf(path, sizeof(path), "/repos/%s/pulls", v->repo);
    json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:b}", "title", v->title, "head", v->work_branch,
                             "base", v->base_branch, "body", v->body, "draft", v->draft);
    rest(v, STEP_CREATE, "POST", path, body);
    json_decref(body);
}

/* --- the push --- */

/* Why git push failed, from its --porcelain output: the refusal of the ref ("!<TAB>ref<TAB>
 * [rejected] (why)"), else its last error line. */
static void push_reason(const char *out, char *buf, size_t cap)
{
    const char *line = NULL;
    for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (p[0] == '!' && p[1] == '\t') {
            const char *t = strchr(p + 2, '\t');
            line = t ? t + 1 : p + 2;
            break;
        } else if (strncmp(p, "error: ", 7) == 0 || strncmp(p, "fatal: ", 7) == 0) {
            line = p;
        }
    size_t n = line ? strcspn(line, "\n") : 0;
    snprintf(buf, cap, "%.*s", (int)(n > 300 ? 300 : n), line ? line : "git push failed");
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < ' ')
            *p = ' ';
}

static void on_pushed(void *ctx, struct sandbox_exec_result *res, const struct err *err)
{
    struct delivery *v = ctx;
    v->ex = NULL;
    if (err) {
        finishf(v, "failed", "the push did not run: %s", err->msg);
        return;
    }
    if (res->exit_code != 0) {
        char why[400];
        push_reason(res->out, why, sizeof(why));
        if (strstr(res->out, "403"))
            snprintf(why + strlen(why), sizeof(why) - strlen(why),
                     " (the proxy or GitHub refused it; the run's events say why when it was "
                     "the proxy)");
        log_warn("run push failed run=%s git=\"%.300s\"", v->run_id, why);
        finishf(v, "failed", "the push to '%s' failed: %s", v->work_branch, why);
        return;
    }
    json_object_set_new(v->result, "pushed", json_true());
    crash_point("delivery-pushed");
    open_or_comment(v);
}

struct delivery *deliver_start(struct deliverer *d, const struct deliver_opts *o,
                               deliver_done_fn done, void *ctx, struct err *err)
{
    char *token = NULL, jti[64];
    struct proxy_grant g = {.user_id = o->user_id,
                            .services = "github",
                            .run_id = o->run_id,
                            .session_id = o->session_id,
                            .sandbox_id = sandbox_id(o->sbx),
                            .repo = o->repo,
                            .branch = o->work_branch,
                            .ttl_seconds = TOKEN_TTL_SECONDS};
    if (proxy_mint(o->st, o->jwt_key, o->jwt_keylen, &g, &token, jti, err) < 0)
        return NULL;
    char *cred = xasprintf("x-access-token:%s", token);
    char *b64 = xmalloc(strlen(cred) * 2 + 8);
    base64_encode(cred, strlen(cred), b64);
    /* The token goes in the environment of this one git, as configuration scoped to the
     * proxy's address; hooks and credential helpers are off. */
    char *env[] = {
        xasprintf("GIT_CONFIG_NOSYSTEM=1"),
        xasprintf("GIT_TERMINAL_PROMPT=0"),
        xasprintf("GIT_CONFIG_COUNT=3"),
        xasprintf("GIT_CONFIG_KEY_0=http.%s/github/.extraHeader", o->proxy_url),
        xasprintf("GIT_CONFIG_VALUE_0=Authorization: Basic %s", b64),
        xasprintf("GIT_CONFIG_KEY_1=core.hooksPath"),
        xasprintf("GIT_CONFIG_VALUE_1=/dev/null"),
        xasprintf("GIT_CONFIG_KEY_2=credential.helper"),
        xasprintf("GIT_CONFIG_VALUE_2="),
        xasprintf("SMCP_URL=%s/github/%s.git", o->proxy_url, o->repo),
        xasprintf("SMCP_REF=HEAD:refs/heads/%s", o->work_branch),
        NULL,
    };
    explicit_bzero(cred, strlen(cred));
    explicit_bzero(token, strlen(token));
    free(cred);
    free(token);
    struct sandbox_exec_opts so = {
        .command = "git push --porcelain --no-thin --no-verify \"$SMCP_URL\" \"$SMCP_REF\" 2>&1",
        .cwd = o->workdir,
        .env = (const char *const *)env,
        .timeout_ms = PUSH_TIMEOUT_MS,
        .output_bytes = PUSH_OUTPUT_MAX};
    struct delivery *v = xcalloc(1, sizeof(*v));
    v->d = d;
    v->done = done;
    v->ctx = ctx;
    v->st = o->st;
    v->sbx = o->sbx;
    v->user_id = xstrdup(o->user_id);
    v->run_id = xstrdup(o->run_id);
    v->session_id = xstrdup(o->session_id);
    v->repo = xstrdup(o->repo);
    v->work_branch = xstrdup(o->work_branch);
    v->base_branch = xstrdup(o->base_branch ? o->base_branch : "");
    v->credential = xstrdup(o->credential);
    v->api = xstrdup(o->api);
    v->title = xstrdup(o->title);
    v->body = xstrdup(o->body);
    v->since = (o->run_created_at ? o->run_created_at : time_now_ms()) - 60000;
    v->pr_url = xstrdup(o->pr_url ? o->pr_url : "");
    v->pr_number = o->pr_number;
    v->draft = o->draft;
    json_t *shas = json_array();
    size_t i;
    const json_t *c;
    json_array_foreach(o->commits, i, c)
    {
        json_array_append(shas, json_object_get(c, "sha"));
    }
    v->result = json_pack("{s:s, s:s, s:s, s:o}", "status", "failed", "branch", o->work_branch,
                          "base", v->base_branch, "commits", shas);
    v->step = STEP_PUSH;
    v->ex = sandbox_exec_start(o->sbx, &so, NULL, on_pushed, v, err);
    for (char **e = env; *e; e++) {
        explicit_bzero(*e, strlen(*e));
        free(*e);
    }
    explicit_bzero(b64, strlen(b64));
    free(b64);
    if (!v->ex) {
        delivery_free(v);
        return NULL;
    }
    v->next = d->active;
    d->active = v;
    return v;
}

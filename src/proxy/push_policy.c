/* The git push policy of a repository-scoped service (GitHub's smart HTTP): which repository a
 * request names and whether the token opens it, which requests are part of a push, and a push's
 * commands checked before any of it goes upstream (one ref, the token's branch, created or moved
 * forward), the fast-forward check handed to push_check.c's threads; a refusal answered as git
 * shows it and kept among the run's events. Its rule: it decides and answers refusals; what is
 * granted goes on to forward.c untouched. */
#include "proxy/proxy_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/util.h"
#include "http/watch.h"
#include "proxy/receive_pack.h"
#include "store/store.h"

static const char zero_id[] = "0000000000000000000000000000000000000000";

/* How many of a run's refused pushes become its events; the rest are only counted in the log.
 * By run id, in a small table (a run that loses its slot starts counting again). */
#define PUSH_EVENTS_MAX 32
static struct {
    char run[64];
    unsigned n;
} push_events[64];

static bool push_event_wanted(const char *run)
{
    unsigned h = 0;
    for (const char *c = run; *c; c++)
        h = h * 31 + (unsigned char)*c;
    size_t i = h % (sizeof(push_events) / sizeof(push_events[0]));
    if (strcmp(push_events[i].run, run) != 0) {
        snprintf(push_events[i].run, sizeof(push_events[i].run), "%s", run);
        push_events[i].n = 0;
    }
    return push_events[i].n++ < PUSH_EVENTS_MAX;
}

/* A push refused: logged, kept among the run's events (the agent's attempts are part of what the
 * run did), and answered. A push whose commands were read (push) and that asks for a report gets
 * git-receive-pack's own refusal, which git shows as "! [remote rejected] <ref> (why)"; anything
 * else a JSON error of status and code. retry_s, when not 0, goes in Retry-After. */
static void push_refusal(struct proxy *p, h2o_req_t *req, const struct proxy_claims *claims,
                         const char *repo, const struct rp_request *push, int status,
                         const char *code, unsigned retry_s, const char *why)
{
    /* code in a sandbox can ask again and again: the log says a few a second, and a run keeps
     * the first PUSH_EVENTS_MAX of a token's refusals */
    char key[80];
    snprintf(key, sizeof(key), "push %s", claims->jti);
    uint64_t suppressed = 0;
    if (log_ratelimit(key, 5, time_mono_ms(), &suppressed))
        log_info("proxy push refused user=%s run=%s repo=%s why=\"%s\" code=%s suppressed=%llu",
                 claims->user, claims->run[0] ? claims->run : "-", repo, why, code,
                 (unsigned long long)suppressed);
    if (claims->run[0] && push_event_wanted(claims->run)) {
        json_t *raw =
            json_pack("{s:s, s:s, s:s}", "type", "push_refused", "repository", repo, "reason", why);
        char *text = json_dumps(raw, JSON_COMPACT);
        json_decref(raw);
        char summary[512];
        snprintf(summary, sizeof(summary), "push to %s refused: %s", repo, why);
        struct store_run_event ev = {
            .time = time_now_ms(), .type = "push_refused", .summary = summary, .raw = text};
        struct err err = {0};
        if (store_run_add_events(p->store, claims->run, &ev, 1, -1, &err) < 0)
            log_error("push refusal not recorded run=%s err=\"%s\"", claims->run, err.msg);
        free(text);
    }
    if (retry_s) {
        char *v = h2o_mem_alloc_pool(&req->pool, 24);
        int n = snprintf(v, 24, "%u", retry_s);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, v, (size_t)n);
    }
    if (push && push->report_status && push->ncmds) {
        struct buf answer;
        buf_init(&answer, 0);
        rp_refusal(push, why, &answer);
        req->res.status = 200;
        req->res.reason = "OK";
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                       H2O_STRLIT("application/x-git-receive-pack-result"));
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                       H2O_STRLIT("no-cache"));
        h2o_iovec_t v = h2o_strdup(&req->pool, answer.data, answer.len);
        buf_release(&answer);
        req->res.content_length = v.len;
        h2o_send_inline(req, v.base, v.len);
        return;
    }
    proxy_respond_error(req, status, code, "%s", why);
}

static void push_refused(struct proxy *p, h2o_req_t *req, const struct proxy_claims *claims,
                         const char *repo, const struct rp_request *push, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void push_refused(struct proxy *p, h2o_req_t *req, const struct proxy_claims *claims,
                         const char *repo, const struct rp_request *push, const char *fmt, ...)
{
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    push_refusal(p, req, claims, repo, push, 403, "push_not_allowed", 0, why);
}

bool proxy_is_push(h2o_req_t *req, const char *rest, size_t rlen)
{
    static const char rp[] = "/git-receive-pack";
    const char *query = req->query_at != SIZE_MAX ? req->path.base + req->query_at : "";
    size_t qlen = req->query_at != SIZE_MAX ? req->path.len - req->query_at : 0;
    bool advert = rlen >= 10 && memcmp(rest + rlen - 10, "/info/refs", 10) == 0 &&
                  h2o_strstr(query, qlen, H2O_STRLIT("git-receive-pack")) != SIZE_MAX;
    return advert || (rlen >= sizeof(rp) - 1 &&
                      memcmp(rest + rlen - (sizeof(rp) - 1), rp, sizeof(rp) - 1) == 0);
}

bool proxy_repo_granted(struct proxy *p, h2o_req_t *req, const struct provider *prov,
                        const struct proxy_claims *claims, const char *rest, size_t rlen,
                        bool own_credential, bool push, char repo_out[PROXY_REPO_MAX])
{
    char repo[PROXY_REPO_MAX];
    size_t used = proxy_repo_of_path(rest, rlen, repo);
    bool suffix = false;
    for (char **s = prov->suffixes; used && *s; s++)
        suffix |= strlen(*s) == rlen - used && memcmp(*s, rest + used, rlen - used) == 0;
    if (!used || !suffix) {
        proxy_respond_error(req, 400, "path_not_allowed",
                            "path '%.*s' does not name a repository as /owner/name/... for '%s'",
                            (int)(rlen > 200 ? 200 : rlen), rest, prov->name);
        return false;
    }
    if (!own_credential && !proxy_repo_allowed(prov->repos, repo)) {
        if (push)
            push_refused(p, req, claims, repo, NULL,
                         "repository '%s' is not one a credential serves", repo);
        else
            proxy_respond_error(
                req, 403, "repository_not_allowed",
                "repository '%s' is not one the operator's '%s' credential serves (the "
                "operator lists them in its allow list), and you have no '%s' "
                "credential of your own",
                repo, prov->name, prov->name);
        return false;
    }
    if ((claims->repo[0] || claims->run[0]) && strcasecmp(claims->repo, repo) != 0) {
        if (push)
            push_refused(p, req, claims, repo, NULL, "this token opens repository '%s' only",
                         claims->repo[0] ? claims->repo : "(none)");
        else if (claims->repo[0])
            proxy_respond_error(req, 403, "repository_not_granted",
                                "this token opens repository '%s' only", claims->repo);
        else
            proxy_respond_error(req, 403, "repository_not_granted",
                                "this token opens no repository");
        return false;
    }
    snprintf(repo_out, PROXY_REPO_MAX, "%s", repo);
    return true;
}

/* A push waiting for its check (push_check.c), in the request's pool. */
struct push_wait {
    struct transfer *t;
    struct proxy_claims claims;
    char repo[PROXY_REPO_MAX];
    struct rp_request push; /* its pack points into the request's body */
};

bool proxy_push_granted(struct proxy *p, h2o_req_t *req, const struct proxy_claims *claims,
                        const char *repo, const char *rest, size_t rlen, struct push_wait **wait)
{
    static const char rp[] = "/git-receive-pack";
    bool post =
        rlen >= sizeof(rp) - 1 && memcmp(rest + rlen - (sizeof(rp) - 1), rp, sizeof(rp) - 1) == 0;
    if (!claims->branch[0]) {
        push_refused(p, req, claims, repo, NULL,
                     "this token pushes nothing: the server pushes a run's commits to its "
                     "session's branch when the run ends");
        return false;
    }
    if (!post)
        return true;
    char want[300];
    snprintf(want, sizeof(want), "refs/heads/%s", claims->branch);
    struct rp_request push;
    struct err err = {0};
    if (rp_parse(req->entity.base ? req->entity.base : "", req->entity.len, &push, &err) < 0) {
        push_refused(p, req, claims, repo, NULL, "a push the proxy cannot read: %s", err.msg);
        return false;
    }
    if (push.ncmds != 1 || strcmp(push.cmds[0].ref, want) != 0) {
        const char *other = push.ncmds ? push.cmds[0].ref : "";
        for (size_t i = 0; i < push.ncmds; i++)
            if (strcmp(push.cmds[i].ref, want) != 0)
                other = push.cmds[i].ref;
        push_refused(p, req, claims, repo, &push,
                     "this token pushes to branch '%s' of %s only, not '%.200s'", claims->branch,
                     claims->repo, other);
        return false;
    }
    const struct rp_command *c = &push.cmds[0];
    if (strcmp(c->new_id, zero_id) == 0) {
        push_refused(p, req, claims, repo, &push, "deleting branch '%s' is not allowed",
                     claims->branch);
        return false;
    }
    if (strcmp(c->old_id, zero_id) != 0) {
        struct push_wait *w = h2o_mem_alloc_pool(&req->pool, sizeof(*w));
        w->t = NULL;
        w->claims = *claims;
        snprintf(w->repo, sizeof(w->repo), "%s", repo);
        w->push = push;
        *wait = w;
    }
    return true;
}

/* A push's check has ended (a check whose client the watch saw leave was forgotten): the push
 * goes upstream, or is refused; or the client has left since the watch last looked, and the
 * watch's end of the request answers it (false). */
static bool on_push_checked(void *ctx, int result, const char *why, uint64_t held_ms)
{
    struct push_wait *w = ctx;
    struct transfer *t = w->t;
    t->check = NULL;
    if (http_watch_poll(&t->watch))
        return false; /* t may be gone */
    if (result == 1) {
        forward_connect(t);
        return true;
    }
    http_watch_stop(&t->watch);
    const struct rp_command *c = &w->push.cmds[0];
    char held[120] = "";
    if (held_ms)
        snprintf(held, sizeof(held), " (pushes with this token are now refused for %llu s)",
                 (unsigned long long)((held_ms + 999) / 1000));
    char text[400];
    snprintf(
        text, sizeof(text),
        "only fast-forward pushes to '%s' are allowed: %.12s does not descend from %.12s%s%s%s",
        w->claims.branch, c->new_id, c->old_id, result < 0 ? ": " : "", result < 0 ? why : "",
        held);
    push_refusal(t->p, t->req, &w->claims, w->repo, &w->push, 403, "push_not_allowed", 0, text);
    return true;
}

void proxy_push_check_begin(struct transfer *t, struct push_wait *w)
{
    struct proxy *p = t->p;
    const struct rp_command *c = &w->push.cmds[0];
    char who[160];
    snprintf(who, sizeof(who), "user=%s run=%s", w->claims.user,
             w->claims.run[0] ? w->claims.run : "-");
    /* what a pack may inflate to is bounded, and the thread's to spend */
    struct push_check_args a = {.jti = w->claims.jti,
                                .who = who,
                                .tip = c->new_id,
                                .ancestor = c->old_id,
                                .pack = w->push.pack,
                                .len = w->push.pack_len,
                                .inflate_max = p->max_request_bytes * 16};
    unsigned retry_s = 0;
    struct err err = {0};
    w->t = t;
    t->check = push_check_start(p->push_checks, &a, on_push_checked, w, &retry_s, &err);
    if (t->check)
        return;
    http_watch_stop(&t->watch);
    int status = err.code == -EBUSY ? 503 : 429;
    const char *code = err.code == -EALREADY ? "push_busy"
                       : err.code == -EAGAIN ? "push_held_back"
                                             : "push_checks_busy";
    push_refusal(p, t->req, &w->claims, w->repo, &w->push, status, code, retry_s, err.msg);
}

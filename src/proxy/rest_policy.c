/* The read-only REST view of a run's own repository (a provider file with "rest_paths", GitHub's
 * API in proxy/github-api.json): a request reads /repos/owner/name or one of the parts of it the
 * file lists (its pull requests, issues, comments, reviews, checks, workflow runs and their
 * logs), and only the repository the token names. GraphQL is not served: one query can walk from
 * the repository to any other the credential reaches (its owner's repositories, a commenter's),
 * which no look at a path can scope. Each token's requests are also paced (a token bucket).
 * Its rule, as push_policy.c's: it decides and answers refusals; what is granted goes on to
 * forward.c untouched. */
#include "proxy/proxy_internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"

/* Tokens paced at once; a token that finds its slot taken by another starts with a full bucket,
 * which only a server with more runs than this under way lets happen. */
#define BUCKETS 256

static struct bucket {
    char jti[64];
    double tokens;
    int64_t at_ms;
} buckets[BUCKETS];

/* Take one request from jti's bucket: 0, or the seconds until one is there. */
static unsigned rate_take(const struct provider *prov, const char *jti, int64_t now_ms)
{
    if (!prov->rate_per_minute)
        return 0;
    unsigned h = 2166136261u;
    for (const char *c = jti; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    struct bucket *b = &buckets[h % BUCKETS];
    double per_ms = prov->rate_per_minute / 60000.0;
    if (strcmp(b->jti, jti) != 0) {
        snprintf(b->jti, sizeof(b->jti), "%s", jti);
        b->tokens = prov->rate_burst;
        b->at_ms = now_ms;
    }
    b->tokens += (double)(now_ms - b->at_ms) * per_ms;
    if (b->tokens > prov->rate_burst)
        b->tokens = prov->rate_burst;
    b->at_ms = now_ms;
    if (b->tokens >= 1) {
        b->tokens -= 1;
        return 0;
    }
    return (unsigned)((1 - b->tokens) / per_ms / 1000) + 1;
}

/* Whether sub (what follows /repos/owner/name, "" or "/...") is a part of the repository that
 * prov lists. An entry "a/b" takes the first two segments. */
static bool part_listed(const struct provider *prov, const char *sub, size_t len)
{
    if (len == 0)
        return true;
    for (char **e = prov->rest_paths; *e; e++) {
        size_t n = strlen(*e);
        if (len > n && sub[0] == '/' && memcmp(sub + 1, *e, n) == 0 &&
            (len == n + 1 || sub[n + 1] == '/'))
            return true;
    }
    return false;
}

bool proxy_rest_graphql(h2o_req_t *req, const struct provider *prov,
                        const struct proxy_claims *claims, const char *path, size_t len)
{
    if (!((len == 8 && memcmp(path, "/graphql", 8) == 0) ||
          (len == 12 && memcmp(path, "/api/graphql", 12) == 0) ||
          (len == 15 && memcmp(path, "/api/v3/graphql", 15) == 0)))
        return false;
    proxy_respond_error(
        req, 403, "graphql_not_served",
        "'%s' serves GitHub's REST API only: a GraphQL query can reach any repository the "
        "credential can. Read the run's repository with REST instead, e.g. gh api "
        "repos/%s/pulls/NUMBER/comments, or gh run view --log-failed",
        prov->name, claims->repo[0] ? claims->repo : "OWNER/NAME");
    return true;
}

bool proxy_rest_granted(struct proxy *p, h2o_req_t *req, const struct provider *prov,
                        const struct proxy_claims *claims, const char **rest, size_t *rlen,
                        bool own_credential)
{
    (void)p;
    const char *path = *rest;
    size_t len = *rlen;
    /* gh speaks to a GitHub Enterprise host's API at /api/v3 */
    if (len > 7 && memcmp(path, "/api/v3/", 8) == 0) {
        path += 7;
        len -= 7;
    }
    char repo[PROXY_REPO_MAX];
    size_t used = len > 6 && memcmp(path, "/repos/", 7) == 0
                      ? proxy_repo_of_path(path + 6, len - 6, repo)
                      : 0;
    const char *sub = used ? path + 6 + used : "";
    size_t slen = used ? len - 6 - used : 0;
    /* proxy_repo_of_path drops a ".git", which names another repository here */
    bool dot_git = used >= 4 && strncasecmp(path + 6 + used - 4, ".git", 4) == 0;
    if (!used || dot_git || !part_listed(prov, sub, slen)) {
        char parts[400];
        size_t k = 0;
        parts[0] = '\0';
        for (char **e = prov->rest_paths; *e && k < sizeof(parts); e++)
            k += (size_t)snprintf(parts + k, sizeof(parts) - k, "%s%s", k ? ", " : "", *e);
        proxy_respond_error(req, 403, "path_not_allowed",
                            "'%s' reads /repos/OWNER/NAME and these parts of it: %s; not '%.*s'",
                            prov->name, parts, (int)(len > 200 ? 200 : len), path);
        return false;
    }
    if (!claims->repo[0] || strcasecmp(claims->repo, repo) != 0) {
        proxy_respond_error(req, 403, "repository_not_granted",
                            claims->repo[0] ? "this token reads repository '%s' only"
                                            : "this token reads no repository%s",
                            claims->repo);
        return false;
    }
    if (!own_credential && !proxy_repo_allowed(prov->repos, repo)) {
        proxy_respond_error(req, 403, "repository_not_allowed",
                            "repository '%s' is not one the operator's '%s' credential serves, "
                            "and you have no credential of your own",
                            repo, provider_grant_name(prov));
        return false;
    }
    unsigned wait_s = rate_take(prov, claims->jti, time_mono_ms());
    if (wait_s) {
        char *v = h2o_mem_alloc_pool(&req->pool, 16);
        int n = snprintf(v, 16, "%u", wait_s);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, v, (size_t)n);
        proxy_respond_error(req, 429, "rate_limited",
                            "this token may make %u requests a minute to '%s'; try again in %u s",
                            prov->rate_per_minute, prov->name, wait_s);
        return false;
    }
    *rest = path;
    *rlen = len;
    return true;
}

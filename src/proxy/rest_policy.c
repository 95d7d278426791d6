/* The read-only REST view of a run's own repository (a provider file with "rest_paths", GitHub's
 * API in proxy/github-api.json): a request reads /repos/owner/name or one of the parts of it the
 * file lists (its pull requests, issues, comments, reviews, checks, workflow runs and their
 * logs), and only the repository the token names. GraphQL is not served, one query being able
 * to walk from the repository to any other the credential reaches (its owner's repositories, a
 * commenter's), which no look at a path can scope; except the documents the provider file lists
 * by their SHA-256 (gh's `pr view`), each read to touch only the repository its $owner and
 * $repo name, and then only with those naming the token's. Each token's requests are also paced
 * (a token bucket).
 * Its rule, as push_policy.c's: it decides and answers refusals; what is granted goes on to
 * forward.c untouched. */
#include "proxy/proxy_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/bucket.h"
#include "base/ids.h"
#include "base/util.h"

/* Tokens paced at once; a token that finds its slot taken by another starts with a full bucket,
 * which only a server with more runs than this under way lets happen. */
#define BUCKETS 256
#define GRAPHQL_BODY_MAX (64 * 1024) /* bytes of a GraphQL request looked at */

static bool repo_open(h2o_req_t *req, const struct provider *prov,
                      const struct proxy_claims *claims, const char *repo, bool own_credential);

static struct keyed_bucket buckets[BUCKETS];

/* Take one request from jti's bucket: 0, or the seconds until one is there. */
static unsigned rate_take(const struct provider *prov, const char *jti, int64_t now_ms)
{
    if (!prov->rate_per_minute)
        return 0;
    int64_t wait = bucket_take(bucket_of(buckets, BUCKETS, jti, strlen(jti)),
                               prov->rate_per_minute / 60.0, prov->rate_burst, now_ms);
    return wait ? (unsigned)((wait + 999) / 1000) : 0;
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

/* The upstream's GraphQL path: GitHub's is /graphql beside its REST API at the root, GitHub
 * Enterprise's /api/graphql beside /api/v3. In req's pool. */
static h2o_iovec_t graphql_path(h2o_req_t *req, const struct provider *prov)
{
    const char *u = strstr(prov->upstream, "://");
    const char *path = u ? strchr(u + 3, '/') : NULL;
    size_t n = path ? strlen(path) : 0;
    if (n >= 3 && memcmp(path + n - 3, "/v3", 3) == 0)
        n -= 3;
    char *out = h2o_mem_alloc_pool(&req->pool, n + sizeof("/graphql"));
    memcpy(out, path ? path : "", n);
    memcpy(out + n, "/graphql", sizeof("/graphql"));
    return h2o_iovec_init(out, n + sizeof("/graphql") - 1);
}

/* Whether hex is on the NULL-terminated list. */
static bool listed(char **list, const char *hex)
{
    for (char **d = list; d && *d; d++)
        if (strcmp(*d, hex) == 0)
            return true;
    return false;
}

int proxy_rest_graphql(h2o_req_t *req, const struct provider *prov,
                       const struct proxy_claims *claims, const char **rest, size_t *rlen,
                       char repo[PROXY_REPO_MAX])
{
    const char *path = *rest;
    size_t len = *rlen;
    if (!((len == 8 && memcmp(path, "/graphql", 8) == 0) ||
          (len == 12 && memcmp(path, "/api/graphql", 12) == 0) ||
          (len == 15 && memcmp(path, "/api/v3/graphql", 15) == 0)))
        return 0;
    /* a document on the list, asked about the token's repository */
    bool post = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"));
    json_t *body = post && req->entity.base && req->entity.len <= GRAPHQL_BODY_MAX
                       ? json_loadb(req->entity.base, req->entity.len, JSON_REJECT_DUPLICATES, NULL)
                       : NULL;
    const char *query = json_string_value(json_object_get(body, "query"));
    const json_t *vars = json_object_get(body, "variables");
    const char *owner = json_string_value(json_object_get(vars, "owner"));
    const char *name = json_string_value(json_object_get(vars, "repo"));
    char hex[65] = "";
    if (query)
        sha256_hex(query, strlen(query), hex);
    size_t keys = json_object_size(body);
    bool known =
        query && listed(prov->graphql_docs, hex) && json_is_object(vars) && owner && name &&
        keys <= 3 &&
        keys == (size_t)(1 + (vars != NULL) + (json_object_get(body, "operationName") != NULL));
    int n = known ? snprintf(repo, PROXY_REPO_MAX, "%s/%s", owner, name) : 0;
    json_decref(body);
    if (known && n > 0 && n < PROXY_REPO_MAX && claims->repo[0] &&
        strcasecmp(claims->repo, repo) == 0) {
        h2o_iovec_t to = graphql_path(req, prov);
        *rest = to.base;
        *rlen = to.len;
        return 1;
    }
    proxy_respond_error(
        req, 403, "graphql_not_served",
        "'%s' serves GitHub's REST API, and of GraphQL only the queries of `gh pr view` about "
        "repository %s: another query can reach any repository the credential can. Read the "
        "run's repository with REST instead, e.g. gh api repos/%s/pulls/NUMBER/comments, or gh "
        "run view --log-failed",
        prov->name, claims->repo[0] ? claims->repo : "(none)",
        claims->repo[0] ? claims->repo : "OWNER/NAME");
    return -1;
}

bool proxy_rest_granted(struct proxy *p, h2o_req_t *req, const struct provider *prov,
                        const struct proxy_claims *claims, const char **rest, size_t *rlen,
                        const char *graphql_repo, bool own_credential)
{
    (void)p;
    const char *path = *rest;
    size_t len = *rlen;
    if (graphql_repo) /* checked against the token by proxy_rest_graphql */
        return repo_open(req, prov, claims, graphql_repo, own_credential);
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
    if (!repo_open(req, prov, claims, repo, own_credential))
        return false;
    *rest = path;
    *rlen = len;
    return true;
}

/* The token's repository repo: on the operator's list unless own_credential, and the token
 * within its pace. Answers and returns false when not. */
static bool repo_open(h2o_req_t *req, const struct provider *prov,
                      const struct proxy_claims *claims, const char *repo, bool own_credential)
{
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
    return true;
}

/* POST /token (authorization_code with PKCE, refresh_token with rotation and its overlap) and
 * POST /revoke (RFC 7009). Every answer carries Cache-Control: no-store. */
#include "auth/auth_internal.h"

#include "http/bearer.h"

#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

#include "base/ids.h"
#include "base/log.h"

static bool verifier_matches(const char *verifier, const char *challenge)
{
    size_t n = strlen(verifier);
    if (n < 43 || n > 128 ||
        strspn(verifier, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") != n)
        return false;
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)verifier, n, d);
    char enc[64];
    size_t len = base64url_encode(d, sizeof(d), enc);
    if (len != strlen(challenge))
        return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < len; i++)
        diff |= (unsigned char)(enc[i] ^ challenge[i]);
    return diff == 0;
}

static void issue(struct auth *a, h2o_req_t *req, const struct store_oauth_grant *g,
                  const char *family, unsigned scopes, const char *resource)
{
    char scope[128], at[STORE_OAUTH_TOKEN_LEN + 1], rt[STORE_OAUTH_TOKEN_LEN + 1];
    scopes_format(scopes, scope, sizeof(scope));
    struct err err = {0};
    int64_t refresh = (scopes & SCOPE_OFFLINE) ? a->refresh_ttl_ms : 0;
    if (store_oauth_tokens_issue(a->store, g->id, family, scope, resource, a->access_ttl_ms,
                                 refresh, at, rt, &err) < 0) {
        log_error("oauth store-failure reason=\"%s\"", err.msg);
        auth_json_error(req, 500, "server_error", "the server could not issue a token");
        return;
    }
    json_t *body = json_pack("{s:s, s:s, s:I, s:s}", "access_token", at, "token_type", "Bearer",
                             "expires_in", (json_int_t)(a->access_ttl_ms / 1000), "scope", scope);
    if (rt[0])
        json_object_set_new(body, "refresh_token", json_string(rt));
    log_info("oauth token-issued user=%s client=\"%.200s\" scope=\"%s\" refresh=%s", g->user_name,
             g->client_id, scope, rt[0] ? "yes" : "no");
    auth_json(req, 200, body);
}

/* A code or refresh token presented after its use: someone else may hold it. */
static void replayed(h2o_req_t *req, const struct store_oauth_client *c, const char *what,
                     const char *why, const char *revoked)
{
    http_bearer_cache_flush();
    log_warn("oauth replay client=\"%.200s\" what=%s reason=\"%s\" revoked=\"%s\"", c->id, what,
             why, revoked);
    char msg[160];
    snprintf(msg, sizeof(msg), "this %s was already used; %s", what, revoked);
    auth_json_error(req, 400, "invalid_grant", msg);
}

static void by_code(struct auth *a, h2o_req_t *req, const struct form *f,
                    const struct store_oauth_client *c)
{
    const char *code = form_get(f, "code"), *verifier = form_get(f, "code_verifier");
    if (!code || !verifier) {
        auth_json_error(req, 400, "invalid_request", "code and code_verifier are required");
        return;
    }
    struct store_oauth_code k;
    struct err err = {0};
    int r = store_oauth_code_redeem(a->store, code, strlen(code), &k, &err);
    if (r == -EALREADY) {
        replayed(req, c, "code", err.msg, "the tokens issued for it are revoked");
        return;
    }
    if (r == -ENOENT) {
        auth_json_error(req, 400, "invalid_grant", "the code is unknown or expired");
        return;
    }
    if (r < 0) {
        log_error("oauth store-failure reason=\"%s\"", err.msg);
        auth_json_error(req, 500, "server_error", "the server could not check the code");
        return;
    }
    /* The code is spent now, whatever follows: a wrong verifier or redirect_uri does not leave
     * it for another try. */
    if (strcmp(k.grant.client_id, c->id) != 0) {
        auth_json_error(req, 400, "invalid_grant", "the code was issued to another client");
        return;
    }
    const char *ru = form_get(f, "redirect_uri");
    if (ru && strcmp(ru, k.redirect_uri) != 0) {
        auth_json_error(req, 400, "invalid_grant",
                        "redirect_uri differs from the authorization request's");
        return;
    }
    if (!verifier_matches(verifier, k.challenge)) {
        auth_json_error(req, 400, "invalid_grant", "the code_verifier does not match");
        return;
    }
    const char *resource = form_get(f, "resource");
    if (resource && strcmp(resource, k.resource) != 0) {
        auth_json_error(req, 400, "invalid_target",
                        "resource differs from the authorization request's");
        return;
    }
    unsigned scopes = 0;
    scopes_parse(k.scope, &scopes, NULL);
    issue(a, req, &k.grant, k.family, scopes, k.resource);
}

static void by_refresh(struct auth *a, h2o_req_t *req, const struct form *f,
                       const struct store_oauth_client *c)
{
    const char *rt = form_get(f, "refresh_token");
    if (!rt) {
        auth_json_error(req, 400, "invalid_request", "refresh_token is required");
        return;
    }
    struct store_oauth_token t;
    struct err err = {0};
    int r = store_oauth_refresh_spend(a->store, rt, strlen(rt), c->id, &a->refresh_reuse, &t, &err);
    if (r == -EALREADY) {
        replayed(req, c, "refresh token", err.msg,
                 "the grant is revoked; the user must approve the app again");
        return;
    }
    if (r == -ENOENT) {
        auth_json_error(req, 400, "invalid_grant",
                        "the refresh token is unknown, revoked or expired");
        return;
    }
    if (r < 0) {
        log_error("oauth store-failure reason=\"%s\"", err.msg);
        auth_json_error(req, 500, "server_error", "the server could not check the token");
        return;
    }
    /* the same client again within moments of the rotation, as when it refreshes for each of
     * several calls at once: a fresh pair in the same family, not a theft */
    if (r > 0)
        log_info("oauth refresh-reuse user=%s client=\"%.200s\" reuse=%d max=%d window_s=%lld",
                 t.grant.user_name, c->id, r, a->refresh_reuse.max,
                 (long long)(a->refresh_reuse.window_ms / 1000));
    unsigned had = 0, want;
    scopes_parse(t.scope, &had, NULL);
    want = had;
    const char *scope = form_get(f, "scope");
    if (scope && scopes_parse(scope, &want, &err) < 0) {
        auth_json_error(req, 400, "invalid_scope", err.msg);
        return;
    }
    if ((want & had) != want) {
        auth_json_error(req, 400, "invalid_scope", "a refresh cannot widen the granted scope");
        return;
    }
    const char *resource = form_get(f, "resource");
    if (resource && strcmp(resource, t.resource) != 0) {
        auth_json_error(req, 400, "invalid_target", "resource differs from the grant's");
        return;
    }
    /* the new refresh token carries on the family even if the narrowed scope drops
     * offline_access: rotation keeps what the user approved */
    issue(a, req, &t.grant, t.family, want | (had & SCOPE_OFFLINE), t.resource);
}

static void token_request(struct auth *a, h2o_req_t *req, const struct form *f,
                          const struct store_oauth_client *c)
{
    const char *gt = form_get(f, "grant_type");
    if (!gt)
        auth_json_error(req, 400, "invalid_request", "grant_type is required");
    else if (strcmp(gt, "authorization_code") == 0)
        by_code(a, req, f, c);
    else if (strcmp(gt, "refresh_token") == 0)
        by_refresh(a, req, f, c);
    else
        auth_json_error(req, 400, "unsupported_grant_type",
                        "grant_type must be authorization_code or refresh_token");
}

static void revoke_request(struct auth *a, h2o_req_t *req, const struct form *f,
                           const struct store_oauth_client *c)
{
    const char *tok = form_get(f, "token");
    struct err err = {0};
    if (!tok) {
        auth_json_error(req, 400, "invalid_request", "token is required");
    } else if (store_oauth_token_revoke(a->store, tok, strlen(tok), c->id, &err) < 0) {
        log_error("oauth store-failure reason=\"%s\"", err.msg);
        auth_json_error(req, 503, "temporarily_unavailable", "try again");
    } else {
        http_bearer_cache_flush();
        auth_json(req, 200, json_object());
    }
}

/* A client's POST of a form to path: the form read, the client authenticated, then fn. */
static int client_request(h2o_handler_t *self, h2o_req_t *req, const char *path,
                          void (*fn)(struct auth *a, h2o_req_t *req, const struct form *f,
                                     const struct store_oauth_client *c))
{
    struct http_route *route = (struct http_route *)self;
    struct auth *a = route->ctx;
    http_request_track(route, req);
    if (!auth_post_only(req, path))
        return 0;
    struct form f;
    if (!auth_read_form(req, &f, true))
        return 0;
    struct store_oauth_client c;
    if (auth_client_authenticate(a, req, &f, &c)) {
        fn(a, req, &f, &c);
        store_oauth_client_clear(&c);
    }
    form_release(&f);
    return 0;
}

int auth_on_token(h2o_handler_t *self, h2o_req_t *req)
{
    return client_request(self, req, "/token", token_request);
}

int auth_on_revoke(h2o_handler_t *self, h2o_req_t *req)
{
    return client_request(self, req, "/revoke", revoke_request);
}

#pragma once
/* Proxy tokens: short-lived HS256 JWTs (libjwt) that agents in sandboxes present instead of a
 * provider key. Pure functions, safe from any thread. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define PROXY_TOKEN_MAX 4096 /* longer tokens are refused unparsed */
#define PROXY_SERVICES_MAX 8

struct proxy_claims {
    char user[64];    /* "user": user id */
    char run[64];     /* "run": run id, "" for an operator token */
    char session[64]; /* "session" */
    char sandbox[64]; /* "sbx": the sandbox whose listener may carry it, "" = main listener only */
    char repo[200];   /* "repo": the one repository ("owner/name") its git requests may name */
    char
        branch[256]; /* "push": the one branch of repo it may push to, fast-forward only; "" none */
    char services[PROXY_SERVICES_MAX][32]; /* "svc": granted services */
    int nservices;
    /* "warm": a sandbox's warm agent's token, for no run in particular: honored only while a run
     * of its sandbox is running (proxy_set_run_lookup), and for that run */
    bool warm;
    int64_t iat, exp; /* seconds since the epoch */
    char jti[64];
};

/* Sign claims with key (HS256). Returns 0 and a malloc'd token in *out (caller frees), or a
 * negative errno with err set. */
int proxy_token_mint(const void *key, size_t keylen, const struct proxy_claims *c, char **out,
                     struct err *err);

/* Verify a token: header exactly HS256 (anything else, "none" included, is refused before the
 * signature is looked at), signature, exp > now, and the claim types. Returns 0 and fills *out,
 * or -EACCES (bad token: algorithm, signature, expired, malformed) with err saying which. */
int proxy_token_verify(const void *key, size_t keylen, const char *token, size_t len, int64_t now,
                       struct proxy_claims *out, struct err *err);

/* A pooled sandbox's agent key: what an agent started before its sandbox had an owner (the warm
 * pool's, runs_pool.c) sends instead of a token, since nothing may be minted before the hand-over.
 * It is the HMAC-SHA256 of the sandbox's id under key, so it needs no row and survives restarts;
 * the proxy takes it only on that sandbox's own listener, and only for the run of the sandbox's
 * owner that is running there (proxy_set_run_lookup), as a warm token. */
#define PROXY_SANDBOX_KEY_PREFIX "smcp-sbx-"
#define PROXY_SANDBOX_KEY_LEN (sizeof(PROXY_SANDBOX_KEY_PREFIX) - 1 + 64)
void proxy_sandbox_key(const void *key, size_t keylen, const char *sandbox_id,
                       char out[PROXY_SANDBOX_KEY_LEN + 1]);
/* Whether token (len bytes) is sandbox_id's agent key, in constant time. */
bool proxy_sandbox_key_is(const void *key, size_t keylen, const char *sandbox_id, const char *token,
                          size_t len);

/* Whether the claims grant service. */
bool proxy_claims_grant(const struct proxy_claims *c, const char *service);

/* The authorization server's state and routes. */
#include "auth/auth_internal.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/cimd.h"
#include "auth/password.h"
#include "auth/throttle.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"

struct auth *auth_new(const struct config *cfg, const struct auth_config *ac, struct store *st)
{
    struct auth *a = xcalloc(1, sizeof(*a));
    a->cfg = cfg;
    a->conf = *ac;
    a->store = st;
    a->cimd_loopback = ac->cimd_loopback;
    a->access_ttl_ms = ac->access_ttl_s * 1000;
    a->refresh_ttl_ms = ac->refresh_ttl_s * 1000;
    a->refresh_reuse.window_ms = ac->refresh_reuse_s * 1000;
    a->refresh_reuse.max = ac->refresh_reuse_max;
    a->cimd = cimd_new(a->cimd_loopback);
    auth_admit_init(a);
    a->trust_s = (int64_t)ac->signin_trust_days * 86400;
    /* from the server's secret, so that every node of a cluster reads the same cookies and a
     * restart keeps them good; without one (tests of a bare server), a key of this process */
    const char *secret = config_get(cfg, "PROXY_JWT_SECRET");
    if (secret)
        key_derive(secret, strlen(secret), KEY_DEVICE_COOKIE, a->device_key);
    else
        rand_bytes(a->device_key, sizeof(a->device_key));
    throttle_configure(&(struct throttle_limits){
        .inflight_per_addr = ac->signin_inflight_per_address,
        .inflight_per_net = ac->signin_inflight_per_network,
        .known_ms = a->trust_s * 1000,
    });
    password_set_reserved((int)ac->signin_reserved_checks);
    password_set_memory_mb(ac->signin_password_memory_mb);
    const struct cimd_limits lim = {
        .fetches = ac->cimd_fetches,
        .per_requester = ac->cimd_per_address,
        .per_host = ac->cimd_per_host,
        .total_ms = (long)ac->cimd_timeout_ms,
        .failure_ms = ac->cimd_failure_ms,
    };
    cimd_set_limits(a->cimd, &lim);
    const char *path = strchr(strstr(cfg->public_url, "://") + 3, '/');
    if (path)
        log_warn("auth public-url-path path=\"%s\": OAuth clients look for the metadata at the "
                 "origin's root; serve the server at the root of its host name",
                 path);
    if (a->cimd_loopback)
        log_warn("auth cimd-loopback: client metadata documents are fetched from loopback "
                 "addresses (OAUTH_CIMD_ALLOW_LOOPBACK is for tests)");
    return a;
}

const char *auth_issuer(const struct auth *a)
{
    return a->cfg->public_url;
}

void auth_resource(const struct auth *a, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/mcp", a->cfg->public_url);
    if (n < 0 || (size_t)n >= cap)
        out[0] = '\0';
}

void auth_free(struct auth *a)
{
    if (!a)
        return;
    auth_admit_release(a);
    cimd_free(a->cimd);
    sodium_memzero(a->device_key, sizeof(a->device_key));
    sodium_memzero(a->credential_key, sizeof(a->credential_key));
    free(a);
}

void auth_set_credential_key(struct auth *a, const unsigned char key[SEAL_KEY_BYTES])
{
    memcpy(a->credential_key, key, SEAL_KEY_BYTES);
    a->has_credential_key = true;
}

void auth_register(struct http_server *http, struct auth *a)
{
    http_add_route(http, "/.well-known/oauth-protected-resource", "/.well-known", auth_on_metadata,
                   a);
    http_add_route(http, "/.well-known/oauth-authorization-server", "/.well-known",
                   auth_on_metadata, a);
    http_add_route(http, "/.well-known/openid-configuration", "/.well-known", auth_on_metadata, a);
    http_add_route(http, "/authorize", "/authorize", auth_on_authorize, a);
    http_add_route(http, "/token", "/token", auth_on_token, a);
    http_add_route(http, "/register", "/register", auth_on_register, a);
    http_add_route(http, "/revoke", "/revoke", auth_on_revoke, a);
    http_add_route(http, "/login", "/login", auth_on_login, a);
    http_add_route(http, "/logout", "/logout", auth_on_logout, a);
    http_add_route(http, "/account", "/account", auth_on_account, a);
}

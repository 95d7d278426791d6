/* The authorization server's settings an operator writes (OAUTH_*, SIGNIN_*), read from the
 * configuration table into struct auth_config. Rule: only reading and checking. */
#include "auth/auth.h"

#include <string.h>

#include "base/config.h"

int auth_config_load(const struct config *cfg, struct auth_config *ac, struct err *err)
{
    uint64_t u;
    memset(ac, 0, sizeof(*ac));
    if (config_get_u64(cfg, "OAUTH_ACCESS_TTL", 3600, 60, 86400, &u, err) < 0)
        return err->code;
    ac->access_ttl_s = (int64_t)u;
    if (config_get_u64(cfg, "OAUTH_REFRESH_TTL", 30 * 86400, 3600, 365 * 86400, &u, err) < 0)
        return err->code;
    ac->refresh_ttl_s = (int64_t)u;
    if (config_get_u64(cfg, "OAUTH_REFRESH_REUSE_SECONDS", 30, 0, 300, &u, err) < 0)
        return err->code;
    ac->refresh_reuse_s = (int64_t)u;
    if (config_get_u64(cfg, "OAUTH_REFRESH_REUSE_MAX", 5, 1, 100, &u, err) < 0)
        return err->code;
    ac->refresh_reuse_max = (int)u;
    if (config_get_u64(cfg, "OAUTH_CIMD_ALLOW_LOOPBACK", 0, 0, 1, &u, err) < 0)
        return err->code;
    ac->cimd_loopback = u == 1;
    if (config_get_u64(cfg, "OAUTH_REGISTER_PER_ADDRESS", 20, 1, 1000000, &u, err) < 0)
        return err->code;
    ac->register_per_address = (int)u;
    if (config_get_u64(cfg, "OAUTH_CLIENTS_MAX", 10000, 1, 10000000, &u, err) < 0)
        return err->code;
    ac->clients_max = (int)u;
    if (config_get_u64(cfg, "SIGNIN_INFLIGHT_PER_ADDRESS", 2, 1, 16, &u, err) < 0)
        return err->code;
    ac->signin_inflight_per_address = (unsigned)u;
    unsigned per_net = ac->signin_inflight_per_address > 4 ? ac->signin_inflight_per_address : 4;
    if (config_get_u64(cfg, "SIGNIN_INFLIGHT_PER_NETWORK", per_net, ac->signin_inflight_per_address,
                       64, &u, err) < 0)
        return err->code;
    ac->signin_inflight_per_network = (unsigned)u;
    /* of the 18 places of the password check queue (src/auth/password.h) */
    if (config_get_u64(cfg, "SIGNIN_RESERVED_CHECKS", 6, 0, 17, &u, err) < 0)
        return err->code;
    ac->signin_reserved_checks = (unsigned)u;
    /* Argon2id with two passes: OWASP's floor is 19 MiB; two checks run at once */
    if (config_get_u64(cfg, "SIGNIN_PASSWORD_MEMORY_MB", 64, 19, 1024, &u, err) < 0)
        return err->code;
    ac->signin_password_memory_mb = (unsigned)u;
    if (config_get_u64(cfg, "SIGNIN_TRUST_DAYS", 365, 1, 3650, &u, err) < 0)
        return err->code;
    ac->signin_trust_days = (unsigned)u;
    if (config_get_u64(cfg, "OAUTH_CIMD_FETCHES", 16, 1, 1024, &u, err) < 0)
        return err->code;
    ac->cimd_fetches = (int)u;
    if (config_get_u64(cfg, "OAUTH_CIMD_FETCHES_PER_ADDRESS", 2, 1, (uint64_t)ac->cimd_fetches, &u,
                       err) < 0)
        return err->code;
    ac->cimd_per_address = (int)u;
    if (config_get_u64(cfg, "OAUTH_CIMD_FETCHES_PER_HOST", 4, 1, (uint64_t)ac->cimd_fetches, &u,
                       err) < 0)
        return err->code;
    ac->cimd_per_host = (int)u;
    if (config_get_u64(cfg, "OAUTH_CIMD_TIMEOUT_SECONDS", 5, 1, 60, &u, err) < 0)
        return err->code;
    ac->cimd_timeout_ms = (int64_t)u * 1000;
    if (config_get_u64(cfg, "OAUTH_CIMD_FAILURE_SECONDS", 60, 0, 3600, &u, err) < 0)
        return err->code;
    ac->cimd_failure_ms = (int64_t)u * 1000;
    return 0;
}

/* The conformance fixtures' settings (CONFORMANCE_TASKS_*, CONFORMANCE_TASK_TTL_MS), read from
 * the configuration table. Rule: only reading and checking. */
#include "mcp/fixtures.h"

#include "base/config.h"

int mcp_fixtures_tasks_config_load(const struct config *cfg, struct fixture_tasks_limits *lim,
                                   struct err *err)
{
    uint64_t per_user, max, ttl;
    if (config_get_u64(cfg, "CONFORMANCE_TASKS_PER_USER", FIXTURE_TASKS_PER_USER_DEFAULT, 1, 100000,
                       &per_user, err) < 0 ||
        config_get_u64(cfg, "CONFORMANCE_TASKS_MAX", FIXTURE_TASKS_MAX_DEFAULT, 1, 1000000, &max,
                       err) < 0 ||
        config_get_u64(cfg, "CONFORMANCE_TASK_TTL_MS", FIXTURE_TASK_TTL_MS_DEFAULT, 100, 86400000,
                       &ttl, err) < 0)
        return err->code;
    lim->per_user = (unsigned)per_user;
    lim->max = (unsigned)max;
    lim->ttl_ms = ttl;
    return 0;
}

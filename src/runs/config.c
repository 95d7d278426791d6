/* The run settings an operator writes (RUN_*, RUNS_*, GITHUB_*, FETCH_ALLOW), read from the
 * configuration table into struct runs_config, and where the coding agents' programs are found.
 * Rule: only reading and checking; the keys and the engine's handles are filled in by the caller.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runs/runs.h"
#include "runs/runs_internal.h"

#include "github/receiver.h"

#include "base/cleanup.h"
#include "base/config.h"
#include "github/rest.h"
#include "base/util.h"
#include "proxy/proxy.h"
#include "sandbox/sandbox.h"

int runs_config_load(const struct config *cfg, struct runs_config *rc, struct err *err)
{
    uint64_t v;
    memset(rc, 0, sizeof(*rc));
    rc->data_dir = cfg->data_dir;
    rc->public_url = cfg->public_url;
    rc->default_model = config_get(cfg, "RUN_DEFAULT_MODEL");
    rc->default_agent = config_get(cfg, "RUN_DEFAULT_AGENT");
    if (rc->default_agent && !agent_find(rc->default_agent))
        return err_set(err, -EINVAL, "RUN_DEFAULT_AGENT: '%.64s' is not an agent; agents: %s",
                       rc->default_agent, agent_names());
    rc->github_token = config_get(cfg, "GITHUB_TOKEN");
    rc->github_base_url = config_get(cfg, "GITHUB_BASE_URL");
    rc->github_repos = config_get(cfg, "GITHUB_REPOS");
    rc->github_steerers = config_get(cfg, "GITHUB_STEERERS");
    rc->fetch_allow = config_get(cfg, "FETCH_ALLOW");
    struct egress_rules rules;
    if (egress_rules_parse(rc->fetch_allow, &rules, err) < 0 ||
        proxy_repos_check(rc->github_repos, err) < 0)
        return err->code;
    const char *local = config_get(cfg, "RUNS_ALLOW_LOCAL_REPOS");
    rc->allow_local_repos = local && (strcmp(local, "1") == 0 || strcmp(local, "true") == 0);
    if (config_get_u64(cfg, "RUN_TIMEOUT_MAX_MINUTES", 240, 1, 7 * 24 * 60, &v, err) < 0)
        return err->code;
    rc->timeout_max_ms = v * 60000;
    if (config_get_u64(cfg, "RUN_TIMEOUT_MINUTES", 50 < v ? 50 : v, 1, v, &v, err) < 0)
        return err->code;
    rc->timeout_ms = v * 60000;
    if (config_get_u64(cfg, "RUNS_MAX_RUNNING", 4, 1, 10000, &v, err) < 0)
        return err->code;
    rc->max_running = (unsigned)v;
    if (config_get_u64(cfg, "RUNS_MAX_RUNNING_PER_USER", 2, 1, 10000, &v, err) < 0)
        return err->code;
    rc->max_running_user = (unsigned)v;
    if (config_get_u64(cfg, "RUNS_MAX_QUEUED_PER_USER", 10, 1, 100000, &v, err) < 0)
        return err->code;
    rc->max_queued_user = (unsigned)v;
    /* What an agent may write to the host: its event stream, and its log (no more is kept). */
    if (config_get_u64(cfg, "RUNS_EVENTS_MAX_BYTES", 256ull << 20, 64 << 10, 1ull << 40,
                       &rc->events_max_bytes, err) < 0)
        return err->code;
    if (config_get_u64(cfg, "RUNS_AGENT_LOG_MAX_BYTES", 16ull << 20, 64 << 10, 1ull << 40,
                       &rc->agent_log_max_bytes, err) < 0)
        return err->code;
    /* How long a session's OpenCode server stays warm after its last run (0: a process per run) */
    bool hooks =
        config_get(cfg, "GITHUB_WEBHOOK_SECRET") || config_get(cfg, "GITHUB_WEBHOOK_SECRETS");
    if (config_get_u64(cfg, "GITHUB_POLL_SECONDS", hooks ? 0 : 180, 0, 86400, &v, err) < 0)
        return err->code;
    rc->github_poll_s = (unsigned)v;
    if (config_get_u64(cfg, "GITHUB_DELIVERIES_MAX", GITHUB_DELIVERIES_DEFAULT, 1, 10000000,
                       &rc->github_kept, err) < 0)
        return err->code;
    rc->github_mention = config_get(cfg, "GITHUB_MENTION");
    if (!rc->github_mention)
        rc->github_mention = GITHUB_MENTION_DEFAULT;
    if (config_get_u64(cfg, "CI_FIX_ATTEMPTS", 3, 0, 10, &v, err) < 0)
        return err->code;
    rc->ci_fix_attempts = (unsigned)v;
    if (config_get_u64(cfg, "RUNS_AGENT_WARM_SECONDS", 300, 0, 86400, &v, err) < 0)
        return err->code;
    rc->agent_warm_s = (unsigned)v;
    /* How many of the warm pool's sandboxes hold an agent booted ahead of any run (launch.c) */
    if (config_get_u64(cfg, "RUNS_AGENT_POOL", 1, 0, 1000, &v, err) < 0)
        return err->code;
    rc->agent_pool = (unsigned)v;
    /* How many recently used environment snapshots have a pooled sandbox kept on them */
    if (config_get_u64(cfg, "RUNS_ENV_POOL", 1, 0, SANDBOX_POOL_ENVS_MAX, &v, err) < 0)
        return err->code;
    rc->env_pool = (unsigned)v;
    if (config_get_u64(cfg, "GITHUB_RETRIES", GITHUB_RETRIES_DEFAULT, 0, 10, &v, err) < 0)
        return -EINVAL;
    rc->github_retries = (unsigned)v;
    if (config_get_u64(cfg, "GITHUB_RETRY_BASE_MS", GITHUB_RETRY_BASE_MS_DEFAULT, 1, 60000, &v,
                       err) < 0)
        return -EINVAL;
    rc->github_retry_base_ms = v;
    if (config_get_u64(cfg, "RUN_QUESTION_TIMEOUT_MINUTES", 30, 1, RUNS_QUESTION_WAIT_MAX_S / 60,
                       &v, err) < 0)
        return -EINVAL;
    rc->question_timeout_s = v * 60;
    if (config_get_u64(cfg, "RUN_SETUP_TIMEOUT_SECONDS", 600, 1, 86400, &v, err) < 0)
        return err->code;
    rc->setup_timeout_s = (unsigned)v;
    if (envcache_config_load(cfg, cfg->data_dir, &rc->cache, err) < 0)
        return err->code;
    /* environment snapshots (envs.c) share the caches' settings */
    rc->env_cache_bytes = rc->cache.max_bytes;
    rc->env_user_bytes = rc->cache.user_max_bytes;
    rc->env_max_age_ms = rc->cache.max_age_ms;
    rc->env_share_public = rc->cache.share_public;
    /* Days, fractions allowed (0 keeps workspaces forever). */
    const char *days = config_get(cfg, "RUNS_RETENTION_DAYS");
    double d = 7;
    if (days) {
        char *end;
        d = strtod(days, &end);
        if (end == days || *end || d < 0 || d > 3650)
            return err_set(err, -EINVAL,
                           "RUNS_RETENTION_DAYS '%s' is not a number of days (0 to "
                           "3650)",
                           days);
    }
    rc->retention_ms = (uint64_t)(d * 24 * 3600 * 1000);
    return 0;
}

/* ad's program as its setting names it or `make deps` installs it, into *out */
static bool agent_find_program(const struct config *cfg, const struct agent_adapter *ad,
                               struct runs_agent_program *out)
{
    const char *set = config_get(cfg, ad->program_env);
    char *found = NULL;
    if (set) {
        found = access(set, X_OK) == 0 ? realpath(set, NULL) : NULL;
    } else {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
            return false;
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        const char *rel[] = {ad->name, "../src/runs", "../../src/runs"};
        for (size_t i = 0; i < ARRAY_SIZE(rel) && !found; i++) {
            _cleanup_free_ char *p = i == 0 ? xasprintf("%s/%s", self, rel[i])
                                            : xasprintf("%s/%s/%s", self, rel[i], ad->installed);
            if (access(p, X_OK) == 0)
                found = realpath(p, NULL);
        }
    }
    if (!found)
        return false;
    /* the directory mounted: the program's own, or as many above it as the package needs */
    char *dir = xstrdup(found);
    for (unsigned up = 0; up <= ad->mount_up; up++) {
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir) {
            free(dir);
            free(found);
            return false;
        }
        *slash = '\0';
    }
    snprintf(out->name, sizeof(out->name), "%s", ad->name);
    out->program = found;
    out->dir = dir;
    out->inside = xasprintf(AGENT_DIR "/%s%s", ad->name, found + strlen(dir));
    return true;
}

size_t runs_agents_find(const struct config *cfg, struct runs_agent_program out[RUNS_AGENTS_MAX])
{
    size_t n = 0;
    for (const struct agent_adapter *ad = agent_first(); ad && n < RUNS_AGENTS_MAX;
         ad = agent_next(ad))
        if (agent_find_program(cfg, ad, &out[n]))
            n++;
    return n;
}

void runs_agents_release(struct runs_agent_program *a, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(a[i].program);
        free(a[i].dir);
        free(a[i].inside);
        memset(&a[i], 0, sizeof(a[i]));
    }
}

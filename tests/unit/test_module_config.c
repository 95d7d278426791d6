/* The settings each module reads beside itself: sandbox_config_load, runs_config_load,
 * cluster_config_load, mcp_fixtures_tasks_config_load, auth_config_load and
 * notify_config_load, from a configuration table. */
#include <errno.h>
#include <string.h>

#include "harness.h"

#include "auth/auth.h"
#include "base/config.h"
#include "cluster/cluster.h"
#include "mcp/fixtures.h"
#include "notify/notify.h"
#include "runs/runs.h"
#include "sandbox/sandbox_internal.h"

/* A configuration built from dotenv text as the command line builds it (config_finish fills
 * data_dir and public_url). */
static void cfg_from(struct config *cfg, const char *text)
{
    struct err err = {0};
    memset(cfg, 0, sizeof(*cfg));
    CHECK_INT_EQ(config_parse_dotenv(cfg, text, strlen(text), &err), 0);
    CHECK_INT_EQ(config_finish(cfg, &err), 0);
}

TEST(sandbox_config_scales_and_defaults)
{
    struct config cfg;
    cfg_from(&cfg, "DATA_DIR=/srv/x\nSANDBOX_MEMORY_MB=512\nSANDBOX_IDLE_SECONDS=60\n"
                   "SANDBOX_CPUS=1.5\nSANDBOX_TEMPLATE=host\n");
    struct sandbox_config sc, def;
    struct err err = {0};
    sandbox_config_defaults(&def);
    CHECK_INT_EQ(sandbox_config_load(&cfg, &sc, &err), 0);
    CHECK_STR_EQ(sc.data_dir, "/srv/x");
    CHECK_STR_EQ(sc.template_name, "host");
    CHECK_INT_EQ(sc.memory_bytes, 512ull << 20);
    CHECK_INT_EQ(sc.idle_ms, 60000);
    CHECK(sc.cpus == 1.5);
    CHECK_INT_EQ(sc.pids_max, def.pids_max);
    CHECK_INT_EQ(sc.max_running, def.max_running);
    CHECK(!sc.disk_strict); /* thin unless told */
    CHECK_INT_EQ(sc.disk_reserve_bytes, 0);
    config_release(&cfg);
    cfg_from(&cfg, "DATA_DIR=/srv/x\nSANDBOX_DISK_ADMIT=strict\nSANDBOX_DISK_RESERVE_MB=300\n");
    CHECK_INT_EQ(sandbox_config_load(&cfg, &sc, &err), 0);
    CHECK(sc.disk_strict);
    CHECK_INT_EQ(sc.disk_reserve_bytes, 300ull << 20);
    config_release(&cfg);
}

TEST(sandbox_disk_reserve_follows_the_filesystem)
{
    struct sandbox_manager m = {0};
    const uint64_t mib = 1ull << 20;
    CHECK_INT_EQ(disk_reserve(&m, 1000ull << 30), 4096 * mib);   /* 5% of 1000 GiB, at most 4 GiB */
    CHECK_INT_EQ(disk_reserve(&m, 40ull << 30), 2048 * mib);     /* 5% */
    CHECK_INT_EQ(disk_reserve(&m, 3ull << 30), 256 * mib);       /* at least 256 MiB */
    CHECK_INT_EQ(disk_reserve(&m, 1ull << 30), 1024 * mib / 10); /* at most a tenth */
    m.cfg.disk_reserve_bytes = 300 * mib;
    CHECK_INT_EQ(disk_reserve(&m, 1000ull << 30), 300 * mib);
}

TEST(sandbox_config_refuses_what_it_cannot_use)
{
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"SANDBOX_TEMPLATE=alpine\n", "SANDBOX_TEMPLATE 'alpine'"},
        {"SANDBOX_TEMPLATE_DIR=rel/dir\n", "not an absolute path"},
        {"SANDBOX_TEMPLATE_MIRROR=ftp://m\n", "not an http://"},
        {"SANDBOX_TEMPLATE_MIRROR=https://u:p@m/debian\n", "must not carry a user or password"},
        {"SANDBOX_TEMPLATE_MIRROR=\"https://m/a b\"\n", "holds a space or a quote"},
        {"SANDBOX_DISK_MB=10\n", "SANDBOX_DISK_MB must be 0"},
        {"SANDBOX_DISK_ADMIT=loose\n", "SANDBOX_DISK_ADMIT must be thin or strict, not 'loose'"},
        {"SANDBOX_DISK_RESERVE_MB=lots\n", "SANDBOX_DISK_RESERVE_MB"},
        {"SANDBOX_UID_BASE=4294000000\nSANDBOX_UID_RANGES=1000\n", "goes past the last host id"},
        {"SANDBOX_CPUS=many\n", "SANDBOX_CPUS 'many'"},
        {"SANDBOX_MEMORY_MB=1\n", "SANDBOX_MEMORY_MB"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct config cfg;
        cfg_from(&cfg, cases[i].text);
        struct sandbox_config sc;
        struct err err = {0};
        CHECK_INT_EQ(sandbox_config_load(&cfg, &sc, &err), -EINVAL);
        CHECK_STR_CONTAINS(err.msg, cases[i].says);
        config_release(&cfg);
    }
}

TEST(runs_config_reads_minutes_and_days)
{
    struct config cfg;
    cfg_from(&cfg, "RUN_TIMEOUT_MAX_MINUTES=30\nRUNS_RETENTION_DAYS=0.5\n"
                   "RUNS_ALLOW_LOCAL_REPOS=true\nRUN_DEFAULT_MODEL=openai/gpt-5\n"
                   "RUN_DEFAULT_AGENT=codex\n");
    struct runs_config rc;
    struct err err = {0};
    CHECK_INT_EQ(runs_config_load(&cfg, &rc, &err), 0);
    CHECK_INT_EQ(rc.timeout_max_ms, 30 * 60000);
    CHECK_INT_EQ(rc.timeout_ms, 30 * 60000); /* the default 50 is capped by the maximum */
    CHECK_INT_EQ(rc.retention_ms, 12 * 3600 * 1000);
    CHECK(rc.allow_local_repos);
    CHECK_STR_EQ(rc.default_model, "openai/gpt-5");
    CHECK_STR_EQ(rc.default_agent, "codex");
    CHECK_INT_EQ(rc.max_running, 4);
    CHECK(rc.jwt_key == NULL && rc.agents == NULL && rc.nagents == 0);
    config_release(&cfg);
}

TEST(runs_config_refuses_what_it_cannot_use)
{
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"RUNS_RETENTION_DAYS=soon\n", "RUNS_RETENTION_DAYS 'soon'"},
        {"RUNS_RETENTION_DAYS=4000\n", "RUNS_RETENTION_DAYS '4000'"},
        {"RUN_TIMEOUT_MAX_MINUTES=10\nRUN_TIMEOUT_MINUTES=20\n", "RUN_TIMEOUT_MINUTES"},
        {"GITHUB_REPOS=not a repo\n", ""},
        {"RUN_DEFAULT_AGENT=aider\n",
         "RUN_DEFAULT_AGENT: 'aider' is not an agent; agents: opencode, claude-code, codex"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct config cfg;
        cfg_from(&cfg, cases[i].text);
        struct runs_config rc;
        struct err err = {0};
        CHECK_INT_EQ(runs_config_load(&cfg, &rc, &err), -EINVAL);
        CHECK_STR_CONTAINS(err.msg, cases[i].says);
        config_release(&cfg);
    }
}

/* Each agent's setting names its program; the directory mounted is the program's, or the
 * package's platform directory above it (Codex's); a setting naming nothing finds nothing (and
 * not the one make deps installed). */
TEST(runs_agents_find_follows_their_settings)
{
    struct config cfg;
    struct runs_agent_program a[RUNS_AGENTS_MAX];
    cfg_from(&cfg, "OPENCODE_BIN=/bin/sh\nCLAUDE_CODE_BIN=/nonexistent/claude\n"
                   "CODEX_BIN=/usr/bin/env\n");
    size_t n = runs_agents_find(&cfg, a);
    CHECK_INT_EQ(n, 2);
    CHECK_STR_EQ(a[0].name, "opencode");
    CHECK(a[0].program[0] == '/');
    CHECK(strncmp(a[0].program, a[0].dir, strlen(a[0].dir)) == 0);
    CHECK(strchr(a[0].program + strlen(a[0].dir) + 1, '/') == NULL);
    CHECK(strncmp(a[0].inside, "/opt/agents/opencode/", 21) == 0);
    CHECK_STR_EQ(a[1].name, "codex");
    CHECK_STR_EQ(a[1].dir, "/usr");
    CHECK_STR_EQ(a[1].inside, "/opt/agents/codex/bin/env");
    runs_agents_release(a, n);
    config_release(&cfg);
    cfg_from(&cfg, "OPENCODE_BIN=/nonexistent/opencode\nCLAUDE_CODE_BIN=/nonexistent/c\n"
                   "CODEX_BIN=/nonexistent/x\n");
    CHECK_INT_EQ(runs_agents_find(&cfg, a), 0);
    config_release(&cfg);
}

TEST(cluster_config_reads_and_checks)
{
    struct config cfg;
    struct cluster_config cc;
    struct err err = {0};
    cfg_from(&cfg, "NODE_HEARTBEAT_SECONDS=2\nNODE_LOST_SECONDS=9\n");
    CHECK_INT_EQ(cluster_config_load(&cfg, &cc, &err), 0);
    CHECK_INT_EQ(cc.heartbeat_ms, 2000);
    CHECK_INT_EQ(cc.lost_ms, 9000);
    CHECK_INT_EQ(cc.max_nonces, 65536);
    CHECK(cc.node_url == NULL && cc.secret == NULL && cc.node_id == NULL);
    config_release(&cfg);

    static const struct {
        const char *text, *says;
    } cases[] = {
        {"NODE_HEARTBEAT_SECONDS=10\nNODE_LOST_SECONDS=10\n",
         "NODE_LOST_SECONDS (10) must be longer than NODE_HEARTBEAT_SECONDS (10)"},
        {"NODE_URL=ftp://node\n", "NODE_URL 'ftp://node' must start with http:// or https://"},
        {"CLUSTER_SECRET=short\n", "CLUSTER_SECRET must be at least 32 characters"},
        {"CLUSTER_NONCE_CACHE=10\n", "CLUSTER_NONCE_CACHE"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cfg_from(&cfg, cases[i].text);
        err = (struct err){0};
        CHECK_INT_EQ(cluster_config_load(&cfg, &cc, &err), -EINVAL);
        CHECK_STR_CONTAINS(err.msg, cases[i].says);
        config_release(&cfg);
    }
}

TEST(fixture_task_limits_read_and_checked)
{
    struct config cfg;
    struct fixture_tasks_limits lim;
    struct err err = {0};
    cfg_from(&cfg, "CONFORMANCE_TASKS_MAX=5\n");
    CHECK_INT_EQ(mcp_fixtures_tasks_config_load(&cfg, &lim, &err), 0);
    CHECK_INT_EQ(lim.max, 5);
    CHECK_INT_EQ(lim.per_user, FIXTURE_TASKS_PER_USER_DEFAULT);
    CHECK_INT_EQ(lim.ttl_ms, FIXTURE_TASK_TTL_MS_DEFAULT);
    config_release(&cfg);
    cfg_from(&cfg, "CONFORMANCE_TASK_TTL_MS=5\n");
    CHECK_INT_EQ(mcp_fixtures_tasks_config_load(&cfg, &lim, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "CONFORMANCE_TASK_TTL_MS");
    config_release(&cfg);
}

TEST(auth_config_reads_and_checks)
{
    struct config cfg;
    struct auth_config ac;
    struct err err = {0};
    cfg_from(&cfg,
             "OAUTH_ACCESS_TTL=120\nSIGNIN_INFLIGHT_PER_ADDRESS=8\nOAUTH_CIMD_TIMEOUT_SECONDS=7\n"
             "OAUTH_CIMD_ALLOW_LOOPBACK=1\n");
    CHECK_INT_EQ(auth_config_load(&cfg, &ac, &err), 0);
    CHECK_INT_EQ(ac.access_ttl_s, 120);
    CHECK_INT_EQ(ac.refresh_ttl_s, 30 * 86400);
    CHECK_INT_EQ(ac.refresh_reuse_s, 30);
    CHECK_INT_EQ(ac.refresh_reuse_max, 5);
    CHECK(ac.cimd_loopback);
    CHECK_INT_EQ(ac.register_per_address, 20);
    CHECK_INT_EQ(ac.clients_max, 10000);
    /* the per-network default is never below the per-address cap */
    CHECK_INT_EQ(ac.signin_inflight_per_address, 8);
    CHECK_INT_EQ(ac.signin_inflight_per_network, 8);
    CHECK_INT_EQ(ac.signin_reserved_checks, 6);
    CHECK_INT_EQ(ac.signin_trust_days, 365);
    CHECK_INT_EQ(ac.cimd_fetches, 16);
    CHECK_INT_EQ(ac.cimd_timeout_ms, 7000);
    CHECK_INT_EQ(ac.cimd_failure_ms, 60000);
    CHECK(!ac.notify_loopback);
    config_release(&cfg);

    static const struct {
        const char *text, *says;
    } cases[] = {
        {"OAUTH_ACCESS_TTL=5\n", "OAUTH_ACCESS_TTL '5' is not a number between 60 and 86400"},
        {"OAUTH_REFRESH_REUSE_SECONDS=301\n",
         "OAUTH_REFRESH_REUSE_SECONDS '301' is not a number between 0 and 300"},
        {"OAUTH_REFRESH_REUSE_MAX=0\n",
         "OAUTH_REFRESH_REUSE_MAX '0' is not a number between 1 and 100"},
        {"OAUTH_CIMD_ALLOW_LOOPBACK=yes\n", "OAUTH_CIMD_ALLOW_LOOPBACK 'yes'"},
        {"SIGNIN_INFLIGHT_PER_ADDRESS=8\nSIGNIN_INFLIGHT_PER_NETWORK=4\n",
         "SIGNIN_INFLIGHT_PER_NETWORK '4' is not a number between 8 and 64"},
        {"OAUTH_CIMD_FETCHES=3\nOAUTH_CIMD_FETCHES_PER_HOST=4\n",
         "OAUTH_CIMD_FETCHES_PER_HOST '4' is not a number between 1 and 3"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cfg_from(&cfg, cases[i].text);
        err = (struct err){0};
        CHECK_INT_EQ(auth_config_load(&cfg, &ac, &err), -EINVAL);
        CHECK_STR_CONTAINS(err.msg, cases[i].says);
        config_release(&cfg);
    }
}

TEST(notify_config_reads_and_checks)
{
    struct config cfg;
    struct notify_config nc;
    struct err err = {0};
    cfg_from(&cfg, "");
    CHECK_INT_EQ(notify_config_load(&cfg, &nc, &err), 0);
    CHECK_INT_EQ(nc.retry_base_ms, NOTIFY_RETRY_BASE_MS);
    CHECK(!nc.allow_loopback_http);
    CHECK(nc.link_view_token);
    CHECK(nc.seal_key == NULL);
    config_release(&cfg);
    cfg_from(&cfg, "NOTIFY_RETRY_SECONDS=1\nNOTIFY_TEST_ALLOW_LOOPBACK=1\nNOTIFY_VIEW_TOKEN=0\n");
    CHECK_INT_EQ(notify_config_load(&cfg, &nc, &err), 0);
    CHECK_INT_EQ(nc.retry_base_ms, 1000);
    CHECK(nc.allow_loopback_http);
    CHECK(!nc.link_view_token);
    config_release(&cfg);

    static const struct {
        const char *text, *says;
    } cases[] = {
        {"NOTIFY_RETRY_SECONDS=0\n", "NOTIFY_RETRY_SECONDS '0' is not a number between 1 and 3600"},
        {"NOTIFY_TEST_ALLOW_LOOPBACK=2\n", "NOTIFY_TEST_ALLOW_LOOPBACK '2'"},
        {"NOTIFY_VIEW_TOKEN=no\n", "NOTIFY_VIEW_TOKEN 'no' is not a number between 0 and 1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cfg_from(&cfg, cases[i].text);
        err = (struct err){0};
        CHECK_INT_EQ(notify_config_load(&cfg, &nc, &err), -EINVAL);
        CHECK_STR_CONTAINS(err.msg, cases[i].says);
        config_release(&cfg);
    }
}

TEST_MAIN()

/* sandbox-mcp serve: the server's wiring. It reads the configuration, builds the parts (store,
 * egress, sandboxes, MCP server and tools, HTTP listener, proxy, cluster, runs, notifier) in
 * the order they need each other, runs the loop until a signal, and takes them down again in
 * the reverse order. Rule: the only file that knows every module; nothing here is called back
 * by them except through the small adapters at the top. */
#include "cli/cli.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/cleanup.h"
#include "base/config.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/seal.h"
#include "base/util.h"
#include "cluster/cluster.h"
#include "egress/egress.h"
#include "http/http.h"
#include "mcp/fixtures.h"
#include "mcp/mcp.h"
#include "mcp/tools.h"
#include "notify/notify.h"
#include "proxy/proxy.h"
#include "runs/runs.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "version.h"

const char cli_usage_serve[] =
    "usage: sandbox-mcp serve [--listen HOST:PORT] [--data-dir DIR] [--env-file FILE]\n"
    "                         [--public-url URL] [--tls-cert FILE --tls-key FILE]\n"
    "                         [--conformance-fixtures]\n"
    "\n"
    "Runs the MCP server (POST /mcp) until SIGTERM or SIGINT. With TLS, SIGHUP reads the\n"
    "certificate and key again for new connections.\n"
    "  --listen HOST:PORT       address to listen on (default 127.0.0.1:8788, or LISTEN)\n"
    "  --public-url URL         base URL clients use (default http(s)://LISTEN, or PUBLIC_URL)\n"
    "  --tls-cert FILE          serve HTTPS (HTTP/2 and HTTP/1.1) with this PEM certificate\n"
    "                           chain (or TLS_CERT)\n"
    "  --tls-key FILE           its PEM private key (or TLS_KEY)\n"
    "  --conformance-fixtures   also register the MCP conformance suite's test tools,\n"
    "                           resources and prompts (for testing only)\n"
    "On an empty data directory it creates the database, a proxy signing secret and a first\n"
    "user, and prints that user's token once and how to add the server in Claude and ChatGPT.\n";

static void notify_run_url(void *runs, const char *run_id, bool view_token, char *out, size_t cap)
{
    if (view_token)
        runs_web_url(runs, false, run_id, out, cap);
    else
        runs_page_url(runs, false, run_id, out, cap);
}

static void on_tool_done(const char *tool, const char *outcome, double seconds)
{
    metrics_tool_call(tool, outcome, seconds);
}

/* Every connection, sandbox pipe and pidfd is a descriptor, and the usual soft limit of 1024 is
 * far below what the connection caps allow: take the hard limit, and say so when even that is
 * short of what the caps let connections take. */
static void raise_nofile(const struct config *cfg, const struct sandbox_config *sc)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
        log_warn("serve nofile err=\"%s\"", strerror(errno));
        return;
    }
    rlim_t was = rl.rlim_cur;
    if (rl.rlim_cur != rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
            log_warn("serve nofile soft=%llu hard=%llu err=\"%s\"", (unsigned long long)was,
                     (unsigned long long)rl.rlim_max, strerror(errno));
            return;
        }
    }
    log_info("serve nofile soft=%llu hard=%llu was=%llu", (unsigned long long)rl.rlim_cur,
             (unsigned long long)rl.rlim_max, (unsigned long long)was);
    /* room for the server's own files and every sandbox's pipes besides the connections: its
     * proxy listener's, and its egress proxy's, two descriptors each (the sandbox's side and the
     * upstream) */
    unsigned long long per_sandbox =
        cfg->sandbox_connections + 2ULL * cfg->sandbox_egress_connections + 8;
    unsigned long long need =
        cfg->max_connections + (unsigned long long)sc->max_running * per_sandbox + 256;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
        log_warn("serve nofile-low soft=%llu need=%llu note=\"lower MAX_CONNECTIONS, "
                 "SANDBOX_CONNECTIONS, SANDBOX_EGRESS_CONNECTIONS or SANDBOX_MAX_RUNNING, or raise "
                 "the hard limit\"",
                 (unsigned long long)rl.rlim_cur, need);
}

static void on_sandbox_listener(void *ctx, const char *sandbox_id, int fd)
{
    http_sandbox_listener(ctx, sandbox_id, fd);
}

static void on_node_lost(void *ctx, const char *node_id)
{
    runs_node_lost(ctx, node_id);
}

/* What a node that was cut off gives up when it is back: runs first, which hold sandboxes. */
struct node_parts {
    struct sandbox_manager *sandboxes;
    struct runs *runs;
};

static void on_node_back(void *ctx)
{
    struct node_parts *p = ctx;
    if (p->runs)
        runs_node_back(p->runs);
    sandbox_manager_drop_moved(p->sandboxes);
}

/* This node's row in the store, its heartbeat and the sweep for lost ones (cluster.h). */
static int start_cluster(const struct config *cfg, struct store *st, struct http_server *http,
                         const struct sandbox_config *sc, const struct runs_config *rc,
                         struct cluster **ret)
{
    struct err err = {0};
    struct cluster_config cc;
    if (cluster_config_load(cfg, &cc, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return -1;
    }
    _cleanup_free_ char *derived =
        xasprintf("%s://%s", cfg->tls_cert ? "https" : "http", http_server_address(http));
    if (store_is_shared(st) && (!cc.secret || !*cc.secret))
        log_warn("node forwarding=off note=\"set the same CLUSTER_SECRET on every node sharing "
                 "this database, so that a call reaching one node for a sandbox on another is "
                 "forwarded there\"");
    cc.node_id = store_node(st);
    if (!cc.node_url)
        cc.node_url = derived;
    cc.max_sandboxes = sc->max_running;
    cc.max_runs = rc->max_running;
    if (cluster_new(&cc, st, ret, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return -1;
    }
    return 0;
}

int cli_serve(const struct cli_command *cmd, int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, OPT_LISTEN,  OPT_PUBLIC_URL,
                                  OPT_FIXTURES, OPT_TLS_CERT, OPT_TLS_KEY, 0};
    struct cli_opts o = {0};
    int r = cli_parse_opts(cmd->name, cmd->usage, argc, argv, allowed, &o);
    if (r)
        return r == 1 ? 0 : r;
    if (o.nargs > 0)
        return cli_usage_error(cmd->name, cmd->usage, "unexpected argument '%s'", o.args[0]);
    /* A command's output of megabytes passes through a few buffers of its size on its way into
     * the reply. By default glibc maps each with mmap and unmaps it when freed, so every such
     * call faults in fresh pages, which a virtual machine makes slow (half the time of a 1 MiB
     * exec here). Keep blocks up to 16 MiB on the heap, and up to 32 MiB of it when freed. */
    mallopt(M_MMAP_THRESHOLD, 16 << 20);
    mallopt(M_TRIM_THRESHOLD, 32 << 20);
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = cli_open_config_store(&o, &cfg, &st)))
        return r;
    if (cli_ensure_jwt_secret(&cfg) < 0) {
        cli_close_config_store(&cfg, st);
        return 1;
    }
    /* read once, or made on a first start, so that a key that cannot be read stops the server
     * here rather than a user's first use of it */
    unsigned char credential_key[SEAL_KEY_BYTES];
    struct err kerr = {0};
    if (store_credential_key_load(cfg.data_dir, credential_key, &kerr) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", kerr.msg);
        cli_close_config_store(&cfg, st);
        return 1;
    }
    struct sandbox_config sc;
    struct runs_config rc;
    struct err serr = {0};
    _cleanup_free_ char *opencode = runs_opencode_find(&cfg);
    if (sandbox_config_load(&cfg, &sc, &serr) < 0 || runs_config_load(&cfg, &rc, &serr) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", serr.msg);
        cli_close_config_store(&cfg, st);
        return 2;
    }
    struct egress_policy *policy = NULL;
    struct egress_proxy *egress = NULL;
    if (egress_policy_new(&cfg, &policy, &serr) < 0 ||
        egress_proxy_new(&cfg, policy, &egress, &serr) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", serr.msg);
        egress_policy_free(policy);
        cli_close_config_store(&cfg, st);
        return 2;
    }
    log_info("egress mode=%s", egress_mode_name(egress_policy_mode(policy)));
    egress_resolve_configure(cfg.name_lookups_reserved, cfg.name_lookup_timeout_ms);
    raise_nofile(&cfg, &sc);
    _cleanup_free_ char *agent_dir = opencode ? xstrdup(opencode) : NULL;
    if (opencode) {
        /* The agents' programs are mounted into every sandbox, read-only. */
        *strrchr(agent_dir, '/') = '\0';
        sc.agent_dir = agent_dir;
        log_info("runs agent=opencode program=%s", opencode);
    } else {
        log_warn("runs agent=opencode program=none note=\"runs will fail until OpenCode is "
                 "installed (make deps) or OPENCODE_BIN names it\"");
    }
    struct sandbox_manager *sandboxes = NULL;
    if (sandbox_manager_new(&sc, st, &sandboxes, &serr) < 0)
        log_error("sandbox runtime unavailable err=\"%s\"", serr.msg);
    else {
        sandbox_manager_keep_template(sandboxes);
        sandbox_manager_keep_pool(sandboxes);
    }
    struct runs_network *network = runs_network_new(st, sandboxes, policy);
    egress_proxy_set_mode(egress, runs_network_mode, network);
    egress_proxy_set_recorder(egress, runs_network_record, network);
    /* what the tools and the instructions tell a model, from this configuration */
    struct tools_facts facts = {
        .sandbox = &sc,
        .reply_max_bytes = cfg.reply_max_bytes,
        .network = egress_mode_name(egress_policy_mode(policy)),
        .run_timeout_ms = rc.timeout_ms,
        .run_timeout_max_ms = rc.timeout_max_ms,
        .default_model = rc.default_model ? rc.default_model : RUNS_DEFAULT_MODEL,
    };
    _cleanup_free_ char *instructions = tools_instructions(&facts);
    const struct mcp_server_info info = {
        .name = "sandbox-mcp",
        .title = "sandbox-mcp",
        .version = SANDBOX_MCP_VERSION,
        .description = "Isolated Linux sandboxes and long-running coding agents for AI assistants",
        .instructions = instructions,
    };
    struct mcp_server *mcp = mcp_server_new(&info);
    mcp_server_set_reply_budget(mcp, cfg.reply_max_bytes);
    /* from the secret every node shares, so a state one node issued opens on the others */
    unsigned char state_key[32];
    const char *state_secret = config_get(&cfg, "PROXY_JWT_SECRET");
    key_derive(state_secret, strlen(state_secret), KEY_MCP_REQUEST_STATE, state_key);
    mcp_server_set_input_state(mcp, state_key, cfg.mcp_request_state_ttl_s * 1000);
    explicit_bzero(state_key, sizeof(state_key));
    mcp_server_set_tool_observer(mcp, on_tool_done);
    tools_server_register(mcp);
    tools_container_register(mcp, sandboxes, serr.msg, &facts);
    struct fixture_tasks *fixture_tasks = NULL;
    struct err err = {0};
    if (cfg.conformance_fixtures) {
        log_warn("mcp conformance-fixtures enabled=yes note=\"test tools are exposed; not for "
                 "production\"");
        mcp_fixtures_register(mcp);
        struct fixture_tasks_limits lim;
        if (mcp_fixtures_tasks_config_load(&cfg, &lim, &err) < 0) {
            fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
            mcp_server_free(mcp);
            mcp_fixtures_tasks_free(fixture_tasks);
            egress_proxy_free(egress);
            runs_network_free(network);
            sandbox_manager_free(sandboxes);
            egress_policy_free(policy);
            cli_close_config_store(&cfg, st);
            return 1;
        }
        fixture_tasks = mcp_fixtures_tasks_register(mcp, &lim);
    }
    struct http_server *http = NULL;
    if (http_server_new(&cfg, st, mcp, &http, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        mcp_server_free(mcp);
        mcp_fixtures_tasks_free(fixture_tasks);
        egress_proxy_free(egress);
        runs_network_free(network);
        sandbox_manager_free(sandboxes);
        egress_policy_free(policy);
        cli_close_config_store(&cfg, st);
        return 1;
    }
    struct proxy *proxy = NULL;
    const char *secret = config_get(&cfg, "PROXY_JWT_SECRET");
    unsigned char jwt_key[32], view_key[32];
    key_derive(secret, strlen(secret), KEY_PROXY_JWT, jwt_key);
    key_derive(secret, strlen(secret), KEY_VIEW_TOKEN, view_key);
    if (proxy_new(&cfg, st, jwt_key, sizeof(jwt_key), &proxy, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        http_server_free(http);
        mcp_server_free(mcp);
        mcp_fixtures_tasks_free(fixture_tasks);
        egress_proxy_free(egress);
        runs_network_free(network);
        sandbox_manager_free(sandboxes);
        egress_policy_free(policy);
        cli_close_config_store(&cfg, st);
        return 2;
    }
    proxy_set_seal_key(proxy, credential_key);
    http_server_set_proxy(http, proxy);
    http_server_set_credential_key(http, credential_key);
    if (sandboxes) {
        sandbox_manager_set_listener(sandboxes, SANDBOX_PROXY_PORT, on_sandbox_listener, http);
        sandbox_manager_set_listener(sandboxes, SANDBOX_EGRESS_PORT, egress_proxy_listener, egress);
    }
    if (!cfg.public_url_set) {
        /* Derive from the bound address, so --listen 127.0.0.1:0 prints the real port. */
        free(cfg.public_url);
        cfg.public_url =
            xasprintf("%s://%s", cfg.tls_cert ? "https" : "http", http_server_address(http));
    }
    struct cluster *cluster = NULL;
    if (start_cluster(&cfg, st, http, &sc, &rc, &cluster) < 0) {
        http_server_free(http);
        proxy_free(proxy);
        mcp_server_free(mcp);
        mcp_fixtures_tasks_free(fixture_tasks);
        egress_proxy_free(egress);
        runs_network_free(network);
        sandbox_manager_free(sandboxes);
        egress_policy_free(policy);
        cli_close_config_store(&cfg, st);
        return 2;
    }
    http_server_set_cluster(http, cluster);
    struct runs *runs = NULL;
    const char *runs_unavailable = "sandboxes are unavailable";
    if (sandboxes) {
        rc.public_url = cfg.public_url;
        rc.opencode_bin = opencode;
        rc.jwt_key = jwt_key;
        rc.jwt_keylen = sizeof(jwt_key);
        rc.view_key = view_key;
        rc.view_keylen = sizeof(view_key);
        rc.network = policy;
        rc.seal_key = credential_key;
        rc.github_api_url = proxy_service_api(proxy, "github");
        rc.llms = proxy_llms(proxy, &rc.nllms);
        if (runs_new(&rc, st, sandboxes, &runs, &err) < 0) {
            log_error("runs unavailable err=\"%s\"", err.msg);
            runs_unavailable = err.msg;
        }
        if (runs)
            proxy_set_run_lookup(proxy, runs_sandbox_run, runs);
    }
    if (runs)
        cluster_on_lost(cluster, on_node_lost, runs);
    struct node_parts parts = {.sandboxes = sandboxes, .runs = runs};
    if (sandboxes)
        cluster_on_back(cluster, on_node_back, &parts);
    runs_network_set_runs(network, runs);
    facts.llms = proxy_llms(proxy, &facts.nllms);
    tools_runs_register(mcp, runs, st, runs_unavailable, &facts);
    http_server_set_runs(http, runs);
    struct notify_config nc = {.seal_key = credential_key,
                               .allow_loopback_http = cfg.notify_test_loopback,
                               .retry_base_ms = cfg.notify_retry_base_ms,
                               .link_view_token = cfg.notify_view_token};
    struct notifier *notifier = notifier_new(&nc, st);
    if (runs)
        notifier_set_run_url(notifier, notify_run_url, runs);
    if (cfg.notify_test_loopback)
        log_warn("notify test-loopback enabled=yes note=\"notifications may go to "
                 "http://127.0.0.1; for tests only\"");
    if (cli_first_start(&cfg, st) < 0) {
        runs_network_set_runs(network, NULL);
        proxy_set_run_lookup(proxy, NULL, NULL);
        runs_free(runs);
        notifier_free(notifier);
        cluster_free(cluster);
        http_server_free(http);
        proxy_free(proxy);
        mcp_server_free(mcp);
        mcp_fixtures_tasks_free(fixture_tasks);
        egress_proxy_free(egress);
        runs_network_free(network);
        sandbox_manager_free(sandboxes);
        egress_policy_free(policy);
        cli_close_config_store(&cfg, st);
        return 1;
    }
    log_info("serve start version=%s data_dir=%s store=%s public_url=%s", SANDBOX_MCP_VERSION,
             cfg.data_dir, store_is_shared(st) ? "postgres" : "sqlite", cfg.public_url);
    http_server_run(http);
    runs_network_set_runs(network, NULL); /* the engine goes first, the proxy's records after */
    proxy_set_run_lookup(proxy, NULL, NULL);
    runs_free(runs);
    notifier_free(notifier);
    cluster_free(cluster);
    http_server_free(http);
    proxy_free(proxy);
    mcp_server_free(mcp);
    mcp_fixtures_tasks_free(fixture_tasks);
    egress_proxy_free(egress);
    runs_network_free(network);
    sandbox_manager_free(sandboxes);
    egress_policy_free(policy);
    cli_close_config_store(&cfg, st);
    explicit_bzero(jwt_key, sizeof(jwt_key));
    explicit_bzero(view_key, sizeof(view_key));
    explicit_bzero(credential_key, sizeof(credential_key));
    metrics_reset();
    return 0;
}

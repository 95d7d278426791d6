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

#include "auth/auth.h"
#include "base/cleanup.h"
#include "base/config.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/seal.h"
#include "base/util.h"
#include "cluster/cluster.h"
#include "egress/egress.h"
#include "github/receiver.h"
#include "http/http.h"
#include "mcp/mcp_endpoint.h"
#include "web/web.h"
#include "mcp/fixtures.h"
#include "mcp/mcp.h"
#include "mcp/tools.h"
#include "notify/notify.h"
#include "preview/preview.h"
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

/* gh's configuration in every sandbox (GH_CONFIG_DIR of a run's agent): the GitHub API by the
 * sandbox's socket, whose answers the proxy's read-only REST view gives; "version" keeps gh from
 * rewriting the file, which it could not. */
#define GH_CONFIG                                                                                  \
    "version: 1\nhttp_unix_socket: " SANDBOX_SERVER_SOCKET "\ngit_protocol: https\n"               \
    "prompt: disabled\n"

static void on_sandbox_socket(void *ctx, const char *sandbox_id, int fd)
{
    http_sandbox_socket(ctx, sandbox_id, fd);
}

static void on_node_lost(void *ctx, const char *node_id)
{
    runs_node_lost(ctx, node_id);
}

static void on_session_taken(void *ctx, const char *session_id)
{
    runs_session_taken(ctx, session_id);
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

/* The server's parts, each NULL (or zero) until it is set up; serve_stop takes down what is
 * there, in the reverse order of cli_serve, so that every way out of it is the same one. */
struct serve {
    struct config cfg;
    struct store *st;
    unsigned char credential_key[SEAL_KEY_BYTES];
    unsigned char jwt_key[32], view_key[32];
    struct sandbox_config sc;
    struct runs_config rc;
    struct auth_config ac;
    struct notify_config nc;
    struct runs_agent_program agents[RUNS_AGENTS_MAX];
    size_t nagents;
    char *instructions;
    struct egress_policy *policy;
    struct egress_proxy *egress;
    struct sandbox_manager *sandboxes;
    struct runs_network *network;
    struct tools_facts facts;
    struct mcp_server *mcp;
    struct mcp_server *agent_mcp; /* the agents' tools (/agent/mcp in sandboxes) */
    struct previews *previews;    /* NULL without sandboxes */
    struct fixture_tasks *fixture_tasks;
    struct http_server *http;
    struct auth *auth;
    struct proxy *proxy;
    struct cluster *cluster;
    struct runs *runs;
    struct node_parts parts;
    struct notifier *notifier;
    struct github_receiver *github;
    /* why sandboxes or runs are unavailable; the tools keep pointers to these messages */
    struct err sandbox_err, err;
};

/* /opt/sandbox-mcp/screenshot URL [FILE] [WIDTH,HEIGHT]: a PNG of a page as headless Chromium
 * draws it, at a phone's size by default, for an agent's add_evidence. */
static const char SCREENSHOT_SCRIPT[] =
    "#!/bin/sh\n"
    "# screenshot URL [FILE] [WIDTH,HEIGHT]: a PNG of URL as headless Chromium draws it (default\n"
    "# /workspace/screenshot.png, 390,844: a phone), for the add_evidence tool.\n"
    "url=${1:?usage: screenshot URL [FILE] [WIDTH,HEIGHT]}\n"
    "out=${2:-/workspace/screenshot.png}\n"
    "size=${3:-390,844}\n"
    "for b in /usr/lib/chromium/chromium chromium chromium-browser google-chrome; do\n"
    "  command -v \"$b\" >/dev/null 2>&1 || continue\n"
    "  \"$b\" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \\\n"
    "    --disable-background-networking --disable-component-update --no-first-run \\\n"
    "    --window-size=\"$size\" --screenshot=\"$out\" \"$url\" >/dev/null 2>&1 && echo \"$out\" "
    "&& exit 0\n"
    "  echo \"screenshot: $b failed\" >&2; exit 1\n"
    "done\n"
    "# none here: installed once, when the sandbox may reach Debian's mirrors\n"
    "if [ -z \"$SCREENSHOT_INSTALLING\" ] && command -v apt-get >/dev/null 2>&1; then\n"
    "  echo 'screenshot: installing chromium (once)...' >&2\n"
    "  if timeout 600 sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install "
    "-y -qq --no-install-recommends chromium' >/dev/null 2>&1; then\n"
    "    SCREENSHOT_INSTALLING=1 exec sh \"$0\" \"$url\" \"$out\" \"$size\"\n"
    "  fi\n"
    "fi\n"
    "echo 'screenshot: no Chromium in this sandbox, and it could not be installed (apt-get install "
    "chromium needs the network: network allowlist or public)' >&2\n"
    "exit 127\n";

/* A run's open previews, for what runs_describe says of it. */
static json_t *run_previews(void *ctx, const char *run_id)
{
    return previews_list(ctx, NULL, run_id);
}

/* The review loop without an engine (no sandboxes): deliveries are refused for GitHub to retry. */
static void no_review_loop(void *ctx, const struct github_event *ev, struct github_outcome *o)
{
    (void)ctx;
    (void)ev;
    o->status = 503;
    snprintf(o->word, sizeof(o->word), "unavailable");
    snprintf(o->why, sizeof(o->why), "runs are unavailable on this server");
}

static void serve_stop(struct serve *s)
{
    /* the engine goes first, the proxy's records after */
    if (s->network)
        runs_network_set_runs(s->network, NULL);
    if (s->proxy)
        proxy_set_run_lookup(s->proxy, NULL, NULL);
    if (s->sandboxes)
        sandbox_manager_pool_prepare(s->sandboxes, 0, NULL, NULL);
    runs_free(s->runs);
    tools_container_set_previews(NULL);
    previews_free(s->previews);
    github_receiver_free(s->github);
    notifier_free(s->notifier);
    cluster_free(s->cluster);
    http_server_free(s->http);
    auth_free(s->auth);
    proxy_free(s->proxy);
    mcp_server_free(s->mcp);
    mcp_server_free(s->agent_mcp);
    mcp_fixtures_tasks_free(s->fixture_tasks); /* after the server that used it */
    egress_proxy_free(s->egress);
    runs_network_free(s->network);
    sandbox_manager_free(s->sandboxes);
    egress_policy_free(s->policy);
    cli_close_config_store(&s->cfg, s->st);
    free(s->instructions);
    runs_agents_release(s->agents, s->nagents);
    explicit_bzero(s->jwt_key, sizeof(s->jwt_key));
    explicit_bzero(s->view_key, sizeof(s->view_key));
    explicit_bzero(s->credential_key, sizeof(s->credential_key));
    metrics_reset();
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
    struct serve s = {0};
    struct config *cfg = &s.cfg;
    if ((r = cli_open_config_store(&o, cfg, &s.st)))
        return r;
    r = 1;
    if (cli_ensure_jwt_secret(cfg) < 0)
        goto out;
    /* read once, or made on a first start, so that a key that cannot be read stops the server
     * here rather than a user's first use of it */
    if (store_credential_key_load(cfg->data_dir, s.credential_key, &s.err) < 0)
        goto fail;
    r = 2;
    s.nagents = runs_agents_find(cfg, s.agents);
    if (sandbox_config_load(cfg, &s.sc, &s.err) < 0 || runs_config_load(cfg, &s.rc, &s.err) < 0 ||
        auth_config_load(cfg, &s.ac, &s.err) < 0 || notify_config_load(cfg, &s.nc, &s.err) < 0)
        goto fail;
    if (egress_policy_new(cfg, &s.policy, &s.err) < 0 ||
        egress_proxy_new(cfg, s.policy, &s.egress, &s.err) < 0)
        goto fail;
    log_info("egress mode=%s", egress_mode_name(egress_policy_mode(s.policy)));
    egress_resolve_configure(cfg->name_lookups_reserved, cfg->name_lookup_timeout_ms);
    raise_nofile(cfg, &s.sc);
    /* The agents' programs are mounted into every sandbox, read-only. */
    for (size_t i = 0; i < s.nagents && i < SANDBOX_AGENTS_MAX; i++) {
        s.sc.agents[i] =
            (struct sandbox_agent_dir){.name = s.agents[i].name, .dir = s.agents[i].dir};
        s.sc.nagents = i + 1;
        log_info("runs agent=%s program=%s", s.agents[i].name, s.agents[i].program);
    }
    if (s.nagents == 0)
        log_warn("runs agents=none note=\"runs will fail until an agent is installed (make deps) "
                 "or OPENCODE_BIN, CLAUDE_CODE_BIN or CODEX_BIN names one\"");
    if (sandbox_manager_new(&s.sc, s.st, &s.sandboxes, &s.sandbox_err) < 0)
        log_error("sandbox runtime unavailable err=\"%s\"", s.sandbox_err.msg);
    else {
        sandbox_manager_keep_template(s.sandboxes);
        sandbox_manager_keep_pool(s.sandboxes);
        sandbox_env_sweep_leftovers(s.sandboxes);
    }
    s.network = runs_network_new(s.st, s.sandboxes, s.policy);
    egress_proxy_set_mode(s.egress, runs_network_mode, s.network);
    egress_proxy_set_recorder(s.egress, runs_network_record, s.network);
    /* what the tools and the instructions tell a model, from this configuration */
    s.facts = (struct tools_facts){
        .sandbox = &s.sc,
        .reply_max_bytes = cfg->reply_max_bytes,
        .network = egress_mode_name(egress_policy_mode(s.policy)),
        .run_timeout_ms = s.rc.timeout_ms,
        .run_timeout_max_ms = s.rc.timeout_max_ms,
        .default_model = s.rc.default_model ? s.rc.default_model : RUNS_DEFAULT_MODEL,
        .default_agent = s.rc.default_agent ? s.rc.default_agent : RUNS_DEFAULT_AGENT,
    };
    s.instructions = tools_instructions(&s.facts);
    const struct mcp_server_info info = {
        .name = "sandbox-mcp",
        .title = "sandbox-mcp",
        .version = SANDBOX_MCP_VERSION,
        .description = "Isolated Linux sandboxes and long-running coding agents for AI assistants",
        .instructions = s.instructions,
    };
    s.mcp = mcp_server_new(&info);
    mcp_server_set_reply_budget(s.mcp, cfg->reply_max_bytes);
    /* from the secret every node shares, so a state one node issued opens on the others */
    unsigned char state_key[32];
    const char *secret = config_get(cfg, "PROXY_JWT_SECRET");
    key_derive(secret, strlen(secret), KEY_MCP_REQUEST_STATE, state_key);
    mcp_server_set_input_state(s.mcp, state_key, cfg->mcp_request_state_ttl_s * 1000);
    explicit_bzero(state_key, sizeof(state_key));
    mcp_server_set_tool_observer(s.mcp, on_tool_done);
    tools_server_register(s.mcp);
    tools_container_register(s.mcp, s.sandboxes, s.sandbox_err.msg, &s.facts);
    r = 1;
    if (cfg->conformance_fixtures) {
        log_warn("mcp conformance-fixtures enabled=yes note=\"test tools are exposed; not for "
                 "production\"");
        mcp_fixtures_register(s.mcp);
        struct fixture_tasks_limits lim;
        if (mcp_fixtures_tasks_config_load(cfg, &lim, &s.err) < 0)
            goto fail;
        s.fixture_tasks = mcp_fixtures_tasks_register(s.mcp, &lim);
    }
    /* wiring: the HTTP listener and what it serves (MCP, the proxy, the cluster's channel, the
     * runs' pages) */
    if (http_server_new(cfg, s.st, &s.http, &s.err) < 0)
        goto fail;
    mcp_endpoint_register(s.http, s.mcp);
    key_derive(secret, strlen(secret), KEY_PROXY_JWT, s.jwt_key);
    key_derive(secret, strlen(secret), KEY_VIEW_TOKEN, s.view_key);
    r = 2;
    if (proxy_new(cfg, s.st, s.jwt_key, sizeof(s.jwt_key), &s.proxy, &s.err) < 0)
        goto fail;
    proxy_set_seal_key(s.proxy, s.credential_key);
    proxy_register(s.http, s.proxy);
    if (s.sandboxes) {
        sandbox_manager_set_listener(s.sandboxes, SANDBOX_PROXY_PORT, on_sandbox_listener, s.http);
        sandbox_manager_set_listener(s.sandboxes, SANDBOX_EGRESS_PORT, egress_proxy_listener,
                                     s.egress);
        sandbox_manager_set_file(s.sandboxes, "config.yml", GH_CONFIG);
        sandbox_manager_set_file(s.sandboxes, "screenshot", SCREENSHOT_SCRIPT);
        sandbox_manager_set_socket(s.sandboxes, on_sandbox_socket, s.http);
    }
    if (!cfg->public_url_set) {
        /* Derive from the bound address, so --listen 127.0.0.1:0 prints the real port. */
        free(cfg->public_url);
        cfg->public_url =
            xasprintf("%s://%s", cfg->tls_cert ? "https" : "http", http_server_address(s.http));
    }
    if (s.sandboxes) {
        struct previews_config pc = {.public_url = cfg->public_url};
        if (previews_config_load(cfg, &pc, &s.err) < 0)
            goto fail;
        unsigned char preview_key[32];
        key_derive(secret, strlen(secret), KEY_PREVIEW, preview_key);
        s.previews = previews_new(&pc, s.st, s.sandboxes, preview_key);
        explicit_bzero(preview_key, sizeof(preview_key));
        previews_register(s.http, s.previews);
        tools_container_set_previews(s.previews);
    }
    if (start_cluster(cfg, s.st, s.http, &s.sc, &s.rc, &s.cluster) < 0)
        goto out;
    http_server_set_cluster(s.http, s.cluster);
    if (s.sandboxes)
        http_server_set_health(s.http, sandbox_manager_health, s.sandboxes);
    const char *runs_unavailable = "sandboxes are unavailable";
    if (s.sandboxes) {
        s.rc.public_url = cfg->public_url;
        s.rc.agents = s.agents;
        s.rc.nagents = s.nagents;
        s.rc.jwt_key = s.jwt_key;
        s.rc.jwt_keylen = sizeof(s.jwt_key);
        s.rc.view_key = s.view_key;
        s.rc.view_keylen = sizeof(s.view_key);
        s.rc.network = s.policy;
        s.rc.seal_key = s.credential_key;
        s.rc.github_api_url = proxy_service_api(s.proxy, "github");
        s.rc.llms = proxy_llms(s.proxy, &s.rc.nllms);
        if (runs_new(&s.rc, s.st, s.sandboxes, &s.runs, &s.err) < 0) {
            log_error("runs unavailable err=\"%s\"", s.err.msg);
            runs_unavailable = s.err.msg;
        }
        if (s.runs) {
            proxy_set_run_lookup(s.proxy, runs_sandbox_run, s.runs);
            if (s.sandboxes)
                sandbox_manager_pool_prepare(s.sandboxes, s.rc.agent_warm_s ? s.rc.agent_pool : 0,
                                             runs_pool_prepare, s.runs);
        }
    }
    if (s.runs) {
        cluster_on_lost(s.cluster, on_node_lost, s.runs);
        cluster_on_taken(s.cluster, on_session_taken, s.runs);
    }
    s.parts = (struct node_parts){.sandboxes = s.sandboxes, .runs = s.runs};
    if (s.sandboxes)
        cluster_on_back(s.cluster, on_node_back, &s.parts);
    runs_network_set_runs(s.network, s.runs);
    if (github_receiver_new(cfg, s.st, s.runs ? runs_review_event : no_review_loop, s.runs,
                            &s.github, &s.err) < 0)
        goto fail;
    github_receiver_register(s.http, s.github);
    s.facts.llms = proxy_llms(s.proxy, &s.facts.nllms);
    tools_runs_register(s.mcp, s.runs, s.st, runs_unavailable, &s.facts);
    if (s.runs) {
        const struct mcp_server_info agent_info = {
            .name = "sandbox-mcp",
            .title = "sandbox-mcp (for the run's agent)",
            .version = SANDBOX_MCP_VERSION,
            .description = "Reach the person who gave this run its task",
            .instructions = "ask_user asks the person who gave you the task a question and "
                            "waits for the answer; submit_plan asks them to approve a plan; "
                            "open_preview shows them a port your app serves.",
        };
        s.agent_mcp = mcp_server_new(&agent_info);
        tools_agent_register(s.agent_mcp, s.runs, s.previews);
        if (s.previews)
            runs_set_previews(s.runs, run_previews, s.previews);
        mcp_endpoint_register_agent(s.http, s.agent_mcp, proxy_agent_auth, s.proxy);
    }
    s.nc.seal_key = s.credential_key;
    s.notifier = notifier_new(&s.nc, s.st);
    if (s.runs)
        notifier_set_run_url(s.notifier, notify_run_url, s.runs);
    if (s.nc.allow_loopback_http)
        log_warn("notify test-loopback enabled=yes note=\"notifications may go to "
                 "http://127.0.0.1; for tests only\"");
    r = 1;
    if (cli_first_start(cfg, s.st) < 0)
        goto out;
    s.ac.notify_loopback = s.nc.allow_loopback_http;
    s.auth = auth_new(cfg, &s.ac, s.st);
    auth_set_credential_key(s.auth, s.credential_key);
    auth_register(s.http, s.auth);
    web_register(s.http, s.st, s.auth, s.runs);
    log_info("serve start version=%s data_dir=%s store=%s public_url=%s", SANDBOX_MCP_VERSION,
             cfg->data_dir, store_is_shared(s.st) ? "postgres" : "sqlite", cfg->public_url);
    http_server_run(s.http);
    r = 0;
    goto out;
fail:
    fprintf(stderr, "sandbox-mcp: %s\n", s.err.msg);
out:
    serve_stop(&s);
    return r;
}

/* sandbox-mcp: command line, configuration and wiring. The only file that exits. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "auth/auth.h"
#include "auth/password.h"
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
#include "http/mcp_endpoint.h"
#include "http/web.h"
#include "mcp/fixtures.h"
#include "mcp/mcp.h"
#include "mcp/tools.h"
#include "notify/notify.h"
#include "proxy/proxy.h"
#include "runs/runs.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "version.h"

#define EXIT_USAGE 2

static const char usage_main[] =
    "usage: sandbox-mcp <command> [options]\n"
    "\n"
    "commands:\n"
    "  serve                 run the MCP server\n"
    "  migrate               create or upgrade the database and exit\n"
    "  user add NAME         create a user\n"
    "  user list             list users\n"
    "  user passwd NAME      set a user's password for the sign-in page (read from stdin)\n"
    "  user login-link NAME [--ttl DURATION]\n"
    "                        print a one-time sign-in link (default 15m, at most 24h)\n"
    "  user network NAME [none|allowlist|public|default]\n"
    "                        show or narrow what NAME's sandboxes may reach\n"
    "  user credential set|delete NAME github | user credential list NAME\n"
    "                        NAME's own GitHub token (read from stdin), sealed at rest\n"
    "  user notify add NAME webhook|ntfy URL | user notify list NAME\n"
    "  user notify remove|test NAME ID\n"
    "                        where NAME is told that a run ended or opened a pull request\n"
    "  token create --user NAME [--label TEXT]\n"
    "                        create an API token (printed once; only its hash is kept)\n"
    "  token list [--user NAME]\n"
    "  token revoke ID       revoke an API token or an app's OAuth grant (grt_...)\n"
    "  proxy-token --user NAME --services LIST [--ttl DURATION]\n"
    "                        mint a token for the LLM/git proxy (to check a setup with curl)\n"
    "  proxy-token revoke JTI\n"
    "  links revoke ID       stop the web addresses given out for a run's or session's page\n"
    "  node list             list the nodes sharing the store, their state and last heartbeat\n"
    "  sandbox list          list running sandboxes\n"
    "  sandbox stop-all      stop every sandbox and unmount their disks (maintenance)\n"
    "  template build NAME [--force]\n"
    "                        build a sandbox template ('debian'; 'host' needs no build)\n"
    "\n"
    "common options:\n"
    "  --data-dir DIR        state directory (default ./var, or DATA_DIR)\n"
    "  --env-file FILE       KEY=VALUE configuration file (default .dev.vars if present)\n"
    "  -h, --help            help for a command\n"
    "  --version             print the version\n";

static const char usage_serve[] =
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

static const char usage_migrate[] =
    "usage: sandbox-mcp migrate [--data-dir DIR] [--env-file FILE]\n"
    "\nCreates the database or applies pending migrations.\n";
static const char usage_node[] =
    "usage: sandbox-mcp node list [--data-dir DIR] [--env-file FILE]\n"
    "\nLists the nodes that share this store (DATABASE_URL): id, state (up, lost, stopped),\n"
    "the URL the others reach it at, and how long ago it last beat.\n";
static const char usage_user[] =
    "usage: sandbox-mcp user add NAME [--data-dir DIR]\n"
    "       sandbox-mcp user list [--data-dir DIR]\n"
    "       sandbox-mcp user passwd NAME [--data-dir DIR]\n"
    "       sandbox-mcp user login-link NAME [--ttl DURATION] [--public-url URL] [--data-dir DIR]\n"
    "       sandbox-mcp user network NAME [none|allowlist|public|default] [--data-dir DIR]\n"
    "       sandbox-mcp user credential set|delete NAME github [--data-dir DIR]\n"
    "       sandbox-mcp user credential list NAME [--data-dir DIR]\n"
    "       sandbox-mcp user notify add NAME webhook|ntfy URL [--data-dir DIR]\n"
    "       sandbox-mcp user notify list NAME [--data-dir DIR]\n"
    "       sandbox-mcp user notify remove|test NAME ID [--data-dir DIR]\n"
    "\n"
    "passwd sets the password NAME signs in with on the server's sign-in page (when a client\n"
    "such as Claude or ChatGPT connects through OAuth), and signs NAME out of every browser.\n"
    "It reads the password from the terminal, twice and without echo, or else as one line\n"
    "of standard input: at least 10 characters, at most 1024 bytes.\n"
    "login-link prints a link (PUBLIC_URL/login/link?t=CODE) that signs NAME in once within\n"
    "DURATION (30s, 10m, 2h; default 15m, at most 24h); CODE also works in the one-time code\n"
    "field of the sign-in page. The link goes to stdout, the explanation to stderr.\n"
    "network sets how much network NAME's sandboxes get: none, allowlist or public, never\n"
    "more than the server's SANDBOX_NETWORK (a wider mode is refused); default follows the\n"
    "server's. Without a mode it prints NAME's setting and what applies.\n"
    "credential set stores NAME's own token for a service (github: a fine-grained personal\n"
    "token or an app installation token), read from the terminal without echo or as one line\n"
    "of standard input, never from the command line. It is sealed with the key in\n"
    "DATA_DIR/secrets/credentials.key and never shown again; list names the services set.\n"
    "notify add tells NAME at URL when a run ends or opens a pull request (at most 5 targets):\n"
    "webhook, a JSON POST to an https URL signed with a secret printed once now; ntfy, a push\n"
    "to an ntfy topic (https://ntfy.sh/TOPIC or a server of your own). test queues a test\n"
    "notification that the running server sends; list shows how the last ones went.\n";
static const char usage_token[] =
    "usage: sandbox-mcp token create --user NAME [--label TEXT] [--data-dir DIR]\n"
    "       sandbox-mcp token list [--user NAME] [--data-dir DIR]\n"
    "       sandbox-mcp token revoke ID [--data-dir DIR]\n"
    "\n"
    "The list shows API tokens and the apps connected through OAuth (ids grt_...); revoking a\n"
    "grant disconnects the app and ends its tokens.\n";

struct opts {
    const char *data_dir;
    const char *env_file;
    const char *listen;
    const char *public_url;
    const char *tls_cert;
    const char *tls_key;
    const char *user;
    const char *label;
    const char *services;
    const char *ttl;
    const char *sandbox;
    bool fixtures;
    bool force;
    char **args; /* positional arguments after the command */
    int nargs;
};

enum {
    OPT_DATA_DIR = 256,
    OPT_ENV_FILE,
    OPT_LISTEN,
    OPT_PUBLIC_URL,
    OPT_USER,
    OPT_LABEL,
    OPT_FIXTURES,
    OPT_SERVICES,
    OPT_TTL,
    OPT_FORCE,
    OPT_SANDBOX,
    OPT_TLS_CERT,
    OPT_TLS_KEY
};

static int usage_error(const char *cmd, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int usage_error(const char *cmd, const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sandbox-mcp %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s", usage);
    return EXIT_USAGE;
}

/* Parse options for a command; allowed is a string of the option ids it accepts. Returns 0, 1
 * when help was printed, or EXIT_USAGE. */
static int parse_opts(const char *cmd, const char *usage, int argc, char **argv, const int *allowed,
                      struct opts *o)
{
    static const struct option longopts[] = {
        {"data-dir", required_argument, NULL, OPT_DATA_DIR},
        {"env-file", required_argument, NULL, OPT_ENV_FILE},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"public-url", required_argument, NULL, OPT_PUBLIC_URL},
        {"user", required_argument, NULL, OPT_USER},
        {"label", required_argument, NULL, OPT_LABEL},
        {"conformance-fixtures", no_argument, NULL, OPT_FIXTURES},
        {"services", required_argument, NULL, OPT_SERVICES},
        {"ttl", required_argument, NULL, OPT_TTL},
        {"force", no_argument, NULL, OPT_FORCE},
        {"sandbox", required_argument, NULL, OPT_SANDBOX},
        {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
        {"tls-key", required_argument, NULL, OPT_TLS_KEY},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h') {
            fputs(usage, stdout);
            return 1;
        }
        if (c == '?') {
            /* getopt_long sets optopt to the option's value when its argument is missing, and
             * to 0 (or the bad character) when the option is unknown. */
            const char *bad = argv[optind - 1];
            if (optopt >= OPT_DATA_DIR)
                return usage_error(cmd, usage, "option '%s' needs a value", bad);
            return usage_error(cmd, usage, "unknown option '%s'", bad);
        }
        bool ok = false;
        for (const int *a = allowed; *a; a++)
            ok = ok || *a == c;
        /* "--opt value" leaves optind past the value; "--opt=value" does not. */
        const char *name =
            optarg && optarg == argv[optind - 1] ? argv[optind - 2] : argv[optind - 1];
        if (!ok)
            return usage_error(cmd, usage, "option '%s' does not apply here", name);
        if (optarg && !optarg[0])
            return usage_error(cmd, usage, "option '%s' needs a non-empty value", name);
        switch (c) {
        case OPT_DATA_DIR: o->data_dir = optarg; break;
        case OPT_ENV_FILE: o->env_file = optarg; break;
        case OPT_LISTEN: o->listen = optarg; break;
        case OPT_PUBLIC_URL: o->public_url = optarg; break;
        case OPT_USER: o->user = optarg; break;
        case OPT_LABEL: o->label = optarg; break;
        case OPT_SERVICES: o->services = optarg; break;
        case OPT_TTL: o->ttl = optarg; break;
        case OPT_SANDBOX: o->sandbox = optarg; break;
        case OPT_TLS_CERT: o->tls_cert = optarg; break;
        case OPT_TLS_KEY: o->tls_key = optarg; break;
        case OPT_FIXTURES: o->fixtures = true; break;
        case OPT_FORCE: o->force = true; break;
        }
    }
    o->args = argv + optind;
    o->nargs = argc - optind;
    return 0;
}

/* Build the configuration: defaults < .dev.vars < environment < flags. */
static int load_config(const struct opts *o, struct config *cfg)
{
    struct err err = {0};
    const char *file = o->env_file ? o->env_file : ".dev.vars";
    if (config_load_file(cfg, file, o->env_file != NULL, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        config_release(cfg);
        return 1;
    }
    config_load_environ(cfg);
    if (o->listen)
        cfg->listen = xstrdup(o->listen);
    if (o->data_dir)
        cfg->data_dir = xstrdup(o->data_dir);
    if (o->public_url)
        cfg->public_url = xstrdup(o->public_url);
    if (o->tls_cert)
        cfg->tls_cert = xstrdup(o->tls_cert);
    if (o->tls_key)
        cfg->tls_key = xstrdup(o->tls_key);
    cfg->conformance_fixtures = o->fixtures;
    if (config_finish(cfg, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        config_release(cfg);
        return EXIT_USAGE;
    }
    const char *lvl = config_get(cfg, "LOG_LEVEL");
    enum log_level level;
    if (lvl) {
        if (log_parse_level(lvl, &level) < 0) {
            fprintf(stderr, "sandbox-mcp: LOG_LEVEL '%s' is not one of debug, info, warn, error\n",
                    lvl);
            config_release(cfg);
            return EXIT_USAGE;
        }
        log_set_level(level);
    }
    return 0;
}

static int ensure_dir(const char *path, mode_t mode)
{
    if (mkdir(path, mode) == 0 || errno == EEXIST)
        return 0;
    fprintf(stderr, "sandbox-mcp: cannot create directory '%s': %s\n", path, strerror(errno));
    return -1;
}

/* This node's id: NODE_ID, else the one kept in DATA_DIR/node_id, else a new one kept there. */
static int ensure_node_id(const struct config *cfg, char out[64])
{
    const char *v = config_get(cfg, "NODE_ID");
    char kept[64] = "";
    _cleanup_free_ char *path = xasprintf("%s/node_id", cfg->data_dir);
    if (!v || !*v) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (f && fgets(kept, sizeof(kept), f))
            kept[strcspn(kept, "\n")] = '\0';
        if (!kept[0]) {
            id_new("node", kept);
            _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd < 0 || dprintf(fd, "%s\n", kept) < 0) {
                fprintf(stderr, "sandbox-mcp: cannot write '%s': %s\n", path, strerror(errno));
                return -1;
            }
        }
        v = kept;
    }
    size_t n = strlen(v);
    bool ok = n > 0 && n < 64;
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)v[i]) || strchr("._-", v[i]);
    if (!ok) {
        fprintf(stderr,
                "sandbox-mcp: NODE_ID '%.64s' must be 1..63 letters, digits, '.', '_' or "
                "'-'\n",
                v);
        return -1;
    }
    snprintf(out, 64, "%s", v);
    return 0;
}

static int open_store(const struct config *cfg, struct store **st)
{
    if (ensure_dir(cfg->data_dir, 0700) < 0)
        return 1;
    /* DATABASE_URL: a PostgreSQL database several nodes share; else SQLite in DATA_DIR. The URL
     * may hold a password, so it is never printed. */
    const char *url = config_get(cfg, "DATABASE_URL");
    if (url && *url && !store_url_is_postgres(url)) {
        fprintf(stderr, "sandbox-mcp: DATABASE_URL must be a postgres:// or postgresql:// URL; "
                        "leave it unset for SQLite in DATA_DIR\n");
        return 1;
    }
    _cleanup_free_ char *path =
        url && *url ? xstrdup(url) : xasprintf("%s/sandbox-mcp.db", cfg->data_dir);
    char node[64];
    if (ensure_node_id(cfg, node) < 0)
        return 1;
    struct err err = {0};
    if (store_open(path, st, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return 1;
    }
    store_set_node(*st, node);
    int taken = store_node_adopt_legacy(*st, &err);
    if (taken < 0)
        log_warn("node rows not adopted node=%s err=\"%s\"", node, err.msg);
    else if (taken > 0)
        log_info("node took sandboxes and sessions from before nodes node=%s rows=%d", node, taken);
    return 0;
}

/* The configuration and store of a command line subcommand, opened together; 0 or an exit
 * status (the error already printed). Close with close_config_store(). */
static int open_config_store(const struct opts *o, struct config *cfg, struct store **st)
{
    int r = load_config(o, cfg);
    if (r)
        return r;
    if ((r = open_store(cfg, st)))
        config_release(cfg);
    return r;
}

static void close_config_store(struct config *cfg, struct store *st)
{
    store_close(st);
    config_release(cfg);
}

/* PROXY_JWT_SECRET: from the configuration, else the one kept in the data dir, else a new one. */
static int ensure_jwt_secret(struct config *cfg)
{
    if (config_get(cfg, "PROXY_JWT_SECRET"))
        return 0;
    _cleanup_free_ char *dir = xasprintf("%s/secrets", cfg->data_dir);
    _cleanup_free_ char *path = xasprintf("%s/proxy_jwt_secret", dir);
    if (ensure_dir(dir, 0700) < 0)
        return -1;
    char secret[65] = "";
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (f) {
        if (!fgets(secret, sizeof(secret), f) || strlen(secret) < 32) {
            fprintf(stderr, "sandbox-mcp: '%s' does not hold a secret of at least 32 characters\n",
                    path);
            return -1;
        }
    } else {
        unsigned char raw[32];
        rand_bytes(raw, sizeof(raw));
        hex_encode(raw, sizeof(raw), secret);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || write(fd, secret, 64) != 64 || fsync(fd) < 0) {
            fprintf(stderr, "sandbox-mcp: cannot write '%s': %s\n", path, strerror(errno));
            return -1;
        }
        log_info("config generated-secret name=PROXY_JWT_SECRET file=%s", path);
    }
    config_set(cfg, "PROXY_JWT_SECRET", secret);
    return 0;
}

static void print_welcome(const struct config *cfg, const char *user, const char *token)
{
    printf("\n"
           "sandbox-mcp is ready. A first user was created: %s\n"
           "\n"
           "  MCP endpoint:  %s/mcp\n"
           "  Access token:  %s\n"
           "\n"
           "This token is shown only now; keep it safe. Create more with\n"
           "  sandbox-mcp token create --user %s\n"
           "\n"
           "Client configuration (Claude Code: claude mcp add --transport http sandbox %s/mcp "
           "--header \"Authorization: Bearer <token>\"):\n"
           "{\n"
           "  \"mcpServers\": {\n"
           "    \"sandbox\": {\n"
           "      \"type\": \"http\",\n"
           "      \"url\": \"%s/mcp\",\n"
           "      \"headers\": { \"Authorization\": \"Bearer %s\" }\n"
           "    }\n"
           "  }\n"
           "}\n\n",
           user, cfg->public_url, token, user, cfg->public_url, cfg->public_url, token);
    /* Claude and ChatGPT reach the server from their clouds, over https only, and sign in with
     * OAuth on the server's own pages: a user needs a password or a sign-in link, not a token. */
    if (strncmp(cfg->public_url, "https://", 8) == 0)
        printf("Claude and ChatGPT: add a connector with the URL\n"
               "  %s/mcp\n"
               "(Claude: a custom connector; ChatGPT: an app in developer mode), leave the OAuth\n"
               "client id and secret empty, and sign in as %s on the page that opens. First give\n"
               "%s a password, or print a one-time sign-in link:\n"
               "  sandbox-mcp user passwd %s\n"
               "  sandbox-mcp user login-link %s\n"
               "Step by step: docs/DEPLOY.md.\n\n",
               cfg->public_url, user, user, user, user);
    else
        printf("Claude and ChatGPT need a public https PUBLIC_URL: see docs/DEPLOY.md.\n\n");
    fflush(stdout);
}

static int first_start(struct config *cfg, struct store *st)
{
    struct err err = {0};
    int n = store_user_count(st, &err);
    if (n < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return -1;
    }
    if (n > 0)
        return 0;
    struct store_user u;
    char token[STORE_TOKEN_LEN + 1];
    if (store_user_add(st, cfg->first_user, &u, &err) < 0 ||
        store_token_create(st, u.id, "first start", token, NULL, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return -1;
    }
    log_info("store first-user user=%s", u.name);
    print_welcome(cfg, u.name, token);
    return 0;
}

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

/* Sandbox settings from the config table (sizes in MiB and seconds, as operators write them). */
static int load_sandbox_config(const struct config *cfg, struct sandbox_config *sc, struct err *err)
{
    uint64_t v;
    sandbox_config_defaults(sc);
    sc->data_dir = cfg->data_dir;
    const char *tmpl = config_get(cfg, "SANDBOX_TEMPLATE");
    if (tmpl && strcmp(tmpl, "host") != 0 && strcmp(tmpl, "debian") != 0)
        return err_set(err, -EINVAL, "SANDBOX_TEMPLATE '%s' is not host or debian", tmpl);
    if (tmpl)
        sc->template_name = tmpl;
    sc->template_dir = config_get(cfg, "SANDBOX_TEMPLATE_DIR");
    if (sc->template_dir && sc->template_dir[0] != '/')
        return err_set(err, -EINVAL, "SANDBOX_TEMPLATE_DIR '%s' is not an absolute path",
                       sc->template_dir);
    sc->template_mirror = config_get(cfg, "SANDBOX_TEMPLATE_MIRROR");
    if (sc->template_mirror && strncmp(sc->template_mirror, "http://", 7) != 0 &&
        strncmp(sc->template_mirror, "https://", 8) != 0 &&
        strncmp(sc->template_mirror, "file:///", 8) != 0)
        return err_set(err, -EINVAL,
                       "SANDBOX_TEMPLATE_MIRROR '%s' is not an http://, https:// or file:/// URL",
                       sc->template_mirror);
    if (sc->template_mirror && strpbrk(sc->template_mirror, " \t\r\n\"'"))
        return err_set(err, -EINVAL, "SANDBOX_TEMPLATE_MIRROR '%s' holds a space or a quote",
                       sc->template_mirror);
    /* The mirror is named in logs and in what sandboxes are told: no password in it. */
    if (sc->template_mirror) {
        const char *host = strstr(sc->template_mirror, "://") + 3;
        const char *at = strchr(host, '@'), *slash = strchr(host, '/');
        if (at && (!slash || at < slash))
            return err_set(err, -EINVAL,
                           "SANDBOX_TEMPLATE_MIRROR must not carry a user or password; use a "
                           "mirror that needs none");
    }
#define GET(key, def, min, max, dst, scale)                                                        \
    do {                                                                                           \
        if (config_get_u64(cfg, key, (def) / (scale), min, max, &v, err) < 0)                      \
            return err->code;                                                                      \
        dst = v * (scale);                                                                         \
    } while (0)
    GET("SANDBOX_MEMORY_MB", sc->memory_bytes, 16, 1 << 24, sc->memory_bytes, 1 << 20);
    GET("SANDBOX_PIDS", sc->pids_max, 8, 1 << 22, sc->pids_max, 1);
    GET("SANDBOX_DISK_MB", sc->disk_bytes, 0, 1 << 24, sc->disk_bytes, 1 << 20);
    if (sc->disk_bytes && sc->disk_bytes < (64 << 20))
        return err_set(err, -EINVAL, "SANDBOX_DISK_MB must be 0 (no limit) or at least 64");
    GET("SANDBOX_TMP_MB", sc->tmp_bytes, 1, 1 << 20, sc->tmp_bytes, 1 << 20);
    GET("SANDBOX_MAX_RUNNING", sc->max_running, 1, 100000, sc->max_running, 1);
    GET("SANDBOX_MAX_RUNNING_PER_USER", sc->max_running_user, 1, 100000, sc->max_running_user, 1);
    GET("SANDBOX_POOL", sc->pool_size, 0, 1000, sc->pool_size, 1);
    GET("SANDBOX_DISK_PER_USER_MB", sc->disk_user_bytes, 0, 1ull << 32, sc->disk_user_bytes,
        1 << 20);
    GET("SANDBOX_DISK_TOTAL_MB", sc->disk_total_bytes, 0, 1ull << 32, sc->disk_total_bytes,
        1 << 20);
    GET("SANDBOX_IDLE_SECONDS", sc->idle_ms, 1, 30 * 24 * 3600, sc->idle_ms, 1000);
    GET("SANDBOX_TEMPLATE_RETRY_SECONDS", sc->template_retry_ms, 1, 3600, sc->template_retry_ms,
        1000);
    GET("SANDBOX_UID_BASE", sc->uid_base, 65536, 4294901759ull, sc->uid_base, 1);
    GET("SANDBOX_UID_RANGES", sc->uid_ranges, 1, 65535, sc->uid_ranges, 1);
    /* Slot N is uid_base + N * 65536; the last id of the last range stays below (uid_t)-1. */
    if (((uint64_t)sc->uid_ranges + 1) * 65536 + sc->uid_base > 0xffffffffull)
        return err_set(err, -EINVAL,
                       "SANDBOX_UID_BASE %u with SANDBOX_UID_RANGES %u goes past the last host id",
                       sc->uid_base, sc->uid_ranges);
    GET("EXEC_TIMEOUT_MAX_SECONDS", sc->exec_timeout_max, 1, 7 * 24 * 3600, sc->exec_timeout_max,
        1000);
    GET("EXEC_TIMEOUT_SECONDS", sc->exec_timeout_ms, 1, sc->exec_timeout_max / 1000,
        sc->exec_timeout_ms, 1000);
    GET("EXEC_OUTPUT_BYTES", sc->output_bytes, 1024, 64 << 20, sc->output_bytes, 1);
    sc->file_max_bytes = cfg->file_max_bytes; /* checked against MAX_REQUEST_BYTES */
#undef GET
    sc->cgroup_root = config_get(cfg, "SANDBOX_CGROUP_ROOT");
    if (config_get_u64(cfg, "SANDBOX_ALLOW_UNLIMITED", 0, 0, 1, &v, err) < 0)
        return err->code;
    sc->allow_unlimited = v == 1;
    const char *cpus = config_get(cfg, "SANDBOX_CPUS");
    if (cpus) {
        char *end;
        sc->cpus = strtod(cpus, &end);
        if (*end || sc->cpus < 0 || sc->cpus > 4096)
            return err_set(err, -EINVAL, "SANDBOX_CPUS '%s' is not a number of cores", cpus);
    }
    return 0;
}

/* The OpenCode program: OPENCODE_BIN, else next to this binary, else where `make deps` installs
 * it in the source tree (build/<variant>/../../src/runs/opencode). NULL when none exists. */
static char *find_opencode(const struct config *cfg)
{
    const char *set = config_get(cfg, "OPENCODE_BIN");
    if (set)
        return access(set, X_OK) == 0 ? realpath(set, NULL) : NULL;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return NULL;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    static const char *const rel[] = {
        "opencode",
        "../src/runs/opencode/node_modules/opencode-ai/bin/opencode.exe",
        "../../src/runs/opencode/node_modules/opencode-ai/bin/opencode.exe",
    };
    for (size_t i = 0; i < ARRAY_SIZE(rel); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", self, rel[i]);
        if (access(p, X_OK) == 0)
            return realpath(p, NULL);
    }
    return NULL;
}

/* Run settings (minutes and days, as operators write them). */
static int load_runs_config(const struct config *cfg, struct runs_config *rc, struct err *err)
{
    uint64_t v;
    memset(rc, 0, sizeof(*rc));
    rc->data_dir = cfg->data_dir;
    rc->public_url = cfg->public_url;
    rc->default_model = config_get(cfg, "RUN_DEFAULT_MODEL");
    rc->github_token = config_get(cfg, "GITHUB_TOKEN");
    rc->github_base_url = config_get(cfg, "GITHUB_BASE_URL");
    rc->github_repos = config_get(cfg, "GITHUB_REPOS");
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
    if (config_get_u64(cfg, "RUNS_AGENT_WARM_SECONDS", 300, 0, 86400, &v, err) < 0)
        return err->code;
    rc->agent_warm_s = (unsigned)v;
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
    uint64_t beat, lost, nonces;
    if (config_get_u64(cfg, "NODE_HEARTBEAT_SECONDS", 5, 1, 3600, &beat, &err) < 0 ||
        config_get_u64(cfg, "NODE_LOST_SECONDS", 30, 2, 86400, &lost, &err) < 0 ||
        config_get_u64(cfg, "CLUSTER_NONCE_CACHE", 65536, 1024, 16 << 20, &nonces, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return -1;
    }
    if (lost <= beat) {
        fprintf(stderr,
                "sandbox-mcp: NODE_LOST_SECONDS (%llu) must be longer than "
                "NODE_HEARTBEAT_SECONDS (%llu)\n",
                (unsigned long long)lost, (unsigned long long)beat);
        return -1;
    }
    const char *url = config_get(cfg, "NODE_URL");
    _cleanup_free_ char *derived =
        xasprintf("%s://%s", cfg->tls_cert ? "https" : "http", http_server_address(http));
    if (url && *url && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        fprintf(stderr, "sandbox-mcp: NODE_URL '%.200s' must start with http:// or https://\n",
                url);
        return -1;
    }
    const char *secret = config_get(cfg, "CLUSTER_SECRET");
    if (secret && *secret && strlen(secret) < 32) {
        fprintf(stderr, "sandbox-mcp: CLUSTER_SECRET must be at least 32 characters\n");
        return -1;
    }
    if (store_is_shared(st) && (!secret || !*secret))
        log_warn("node forwarding=off note=\"set the same CLUSTER_SECRET on every node sharing "
                 "this database, so that a call reaching one node for a sandbox on another is "
                 "forwarded there\"");
    struct cluster_config cc = {
        .node_id = store_node(st),
        .node_url = url && *url ? url : derived,
        .secret = secret,
        .heartbeat_ms = beat * 1000,
        .lost_ms = lost * 1000,
        .max_sandboxes = sc->max_running,
        .max_runs = rc->max_running,
        .max_nonces = nonces,
    };
    if (cluster_new(&cc, st, ret, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int cmd_serve(int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, OPT_LISTEN,  OPT_PUBLIC_URL,
                                  OPT_FIXTURES, OPT_TLS_CERT, OPT_TLS_KEY, 0};
    struct opts o = {0};
    int r = parse_opts("serve", usage_serve, argc, argv, allowed, &o);
    if (r)
        return r == 1 ? 0 : r;
    if (o.nargs > 0)
        return usage_error("serve", usage_serve, "unexpected argument '%s'", o.args[0]);
    /* A command's output of megabytes passes through a few buffers of its size on its way into
     * the reply. By default glibc maps each with mmap and unmaps it when freed, so every such
     * call faults in fresh pages, which a virtual machine makes slow (half the time of a 1 MiB
     * exec here). Keep blocks up to 16 MiB on the heap, and up to 32 MiB of it when freed. */
    mallopt(M_MMAP_THRESHOLD, 16 << 20);
    mallopt(M_TRIM_THRESHOLD, 32 << 20);
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = open_config_store(&o, &cfg, &st)))
        return r;
    if (ensure_jwt_secret(&cfg) < 0) {
        close_config_store(&cfg, st);
        return 1;
    }
    /* read once, or made on a first start, so that a key that cannot be read stops the server
     * here rather than a user's first use of it */
    unsigned char credential_key[SEAL_KEY_BYTES];
    struct err kerr = {0};
    if (store_credential_key_load(cfg.data_dir, credential_key, &kerr) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", kerr.msg);
        close_config_store(&cfg, st);
        return 1;
    }
    struct sandbox_config sc;
    struct runs_config rc;
    struct err serr = {0};
    _cleanup_free_ char *opencode = find_opencode(&cfg);
    if (load_sandbox_config(&cfg, &sc, &serr) < 0 || load_runs_config(&cfg, &rc, &serr) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", serr.msg);
        close_config_store(&cfg, st);
        return 2;
    }
    struct egress_policy *policy = NULL;
    struct egress_proxy *egress = NULL;
    if (egress_policy_new(&cfg, &policy, &serr) < 0 ||
        egress_proxy_new(&cfg, policy, &egress, &serr) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", serr.msg);
        egress_policy_free(policy);
        close_config_store(&cfg, st);
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
        uint64_t per_user, max, ttl;
        if (config_get_u64(&cfg, "CONFORMANCE_TASKS_PER_USER", FIXTURE_TASKS_PER_USER_DEFAULT, 1,
                           100000, &per_user, &err) < 0 ||
            config_get_u64(&cfg, "CONFORMANCE_TASKS_MAX", FIXTURE_TASKS_MAX_DEFAULT, 1, 1000000,
                           &max, &err) < 0 ||
            config_get_u64(&cfg, "CONFORMANCE_TASK_TTL_MS", FIXTURE_TASK_TTL_MS_DEFAULT, 100,
                           86400000, &ttl, &err) < 0) {
            fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
            mcp_server_free(mcp);
            mcp_fixtures_tasks_free(fixture_tasks);
            egress_proxy_free(egress);
            runs_network_free(network);
            sandbox_manager_free(sandboxes);
            egress_policy_free(policy);
            close_config_store(&cfg, st);
            return 1;
        }
        const struct fixture_tasks_limits lim = {(unsigned)per_user, (unsigned)max, ttl};
        fixture_tasks = mcp_fixtures_tasks_register(mcp, &lim);
    }
    struct http_server *http = NULL;
    if (http_server_new(&cfg, st, &http, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        mcp_server_free(mcp);
        mcp_fixtures_tasks_free(fixture_tasks);
        egress_proxy_free(egress);
        runs_network_free(network);
        sandbox_manager_free(sandboxes);
        egress_policy_free(policy);
        close_config_store(&cfg, st);
        return 1;
    }
    mcp_endpoint_register(http, mcp);
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
        close_config_store(&cfg, st);
        return 2;
    }
    proxy_set_seal_key(proxy, credential_key);
    http_server_set_proxy(http, proxy);
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
        close_config_store(&cfg, st);
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
    if (first_start(&cfg, st) < 0) {
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
        close_config_store(&cfg, st);
        return 1;
    }
    struct auth *auth = auth_new(&cfg, st);
    auth_set_credential_key(auth, credential_key);
    auth_register(http, auth);
    web_register(http, st, auth, runs);
    log_info("serve start version=%s data_dir=%s store=%s public_url=%s", SANDBOX_MCP_VERSION,
             cfg.data_dir, store_is_shared(st) ? "postgres" : "sqlite", cfg.public_url);
    http_server_run(http);
    runs_network_set_runs(network, NULL); /* the engine goes first, the proxy's records after */
    proxy_set_run_lookup(proxy, NULL, NULL);
    runs_free(runs);
    notifier_free(notifier);
    cluster_free(cluster);
    http_server_free(http);
    auth_free(auth);
    proxy_free(proxy);
    mcp_server_free(mcp);
    mcp_fixtures_tasks_free(fixture_tasks);
    egress_proxy_free(egress);
    runs_network_free(network);
    sandbox_manager_free(sandboxes);
    egress_policy_free(policy);
    close_config_store(&cfg, st);
    explicit_bzero(jwt_key, sizeof(jwt_key));
    explicit_bzero(view_key, sizeof(view_key));
    explicit_bzero(credential_key, sizeof(credential_key));
    metrics_reset();
    return 0;
}

static int cmd_migrate(int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, 0};
    struct opts o = {0};
    int r = parse_opts("migrate", usage_migrate, argc, argv, allowed, &o);
    if (r)
        return r == 1 ? 0 : r;
    if (o.nargs > 0)
        return usage_error("migrate", usage_migrate, "unexpected argument '%s'", o.args[0]);
    struct config cfg = {0};
    if ((r = load_config(&o, &cfg)))
        return r;
    struct store *st = NULL;
    if ((r = open_store(&cfg, &st)) == 0)
        printf("database schema is at version %d\n", store_schema_version_known());
    close_config_store(&cfg, st);
    return r;
}

static void print_node(const struct store_node *n, void *ctx)
{
    (void)ctx;
    printf("%-24s %-8s %-40s beat %llds ago\n", n->id, n->state, n->url,
           (long long)((time_now_ms() - n->heartbeat_at) / 1000));
}

static int cmd_node(int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, 0};
    struct opts o = {0};
    int r = parse_opts("node", usage_node, argc, argv, allowed, &o);
    if (r)
        return r == 1 ? 0 : r;
    if (o.nargs != 1 || strcmp(o.args[0], "list") != 0)
        return usage_error("node", usage_node, "%s", "'node' takes list");
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = open_config_store(&o, &cfg, &st)))
        return r;
    struct err err = {0};
    if (store_node_list(st, print_node, NULL, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        r = 1;
    }
    close_config_store(&cfg, st);
    return r;
}

static void print_user_token(const struct store_token *t, void *ctx)
{
    (void)ctx;
    char created[32], used[32] = "never";
    time_format_rfc3339(t->created_at, created);
    if (t->last_used_at)
        time_format_rfc3339(t->last_used_at, used);
    printf("%-30s %-16s %-14s %-8s %-24s %-24s %s\n", t->id, t->user_name, t->prefix,
           t->revoked_at ? "revoked" : "active", created, used, t->label);
}

/* An OAuth grant, as a row of the token list: its id, "oauth" for a prefix, the app as label. */
static void print_grant(const struct store_oauth_grant *g, void *ctx)
{
    (void)ctx;
    char created[32], used[32] = "never";
    time_format_rfc3339(g->created_at, created);
    if (g->last_used_at)
        time_format_rfc3339(g->last_used_at, used);
    printf("%-30s %-16s %-14s %-8s %-24s %-24s %s (%s; %s)\n", g->id, g->user_name, "oauth",
           "active", created, used, g->client_name, g->redirect_host, g->scope);
}

/* Commands with subcommands ("user add", "token list"...): -h/--help before the subcommand
 * prints usage (returns 1); a missing subcommand is a usage error naming the expected ones;
 * otherwise *sub is the subcommand and the options after it are parsed into o (0). */
static int parse_sub(const char *cmd, const char *usage, const char *expected, int argc,
                     char **argv, const int *allowed, struct opts *o, const char **sub)
{
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
            fputs(usage, stdout);
            return 1;
        }
        return usage_error(cmd, usage, "expected %s", expected);
    }
    *sub = argv[1];
    return parse_opts(cmd, usage, argc - 1, argv + 1, allowed, o);
}

/* "90", "30s", "10m", "2h" -> seconds; -1 when malformed. */
static int64_t parse_duration(const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v <= 0 || v > 1000000000) /* no more than 30 years in seconds */
        return -1;
    if (*end == '\0' || strcmp(end, "s") == 0)
        return v;
    if (strcmp(end, "m") == 0)
        return v * 60;
    if (strcmp(end, "h") == 0)
        return v * 3600;
    return -1;
}

static void print_user(const struct store_user *u, void *ctx)
{
    (void)ctx;
    char created[32];
    time_format_rfc3339(u->created_at, created);
    printf("%-30s %-24s %s\n", u->id, u->name, created);
}

/* The terminal as it was before a prompt turned its echo off, put back on the way out however
 * that comes. */
static struct termios tty_saved;
static volatile sig_atomic_t tty_quiet;

static void tty_restore(void)
{
    if (tty_quiet) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &tty_saved);
        tty_quiet = 0;
    }
}

static void on_signal_restore_tty(int sig)
{
    tty_restore();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* One line of stdin into buf[PASSWORD_MAX_BYTES + 2], without its line end, read a byte at a
 * time so that nothing of it stays in a stdio buffer. Returns its length, -EFBIG when it is
 * longer than PASSWORD_MAX_BYTES, -ENODATA when stdin is empty, or -errno. */
static ssize_t read_secret_line(char *buf)
{
    size_t n = 0;
    bool got = false;
    for (;;) {
        char c;
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0 && !got)
            return -ENODATA;
        if (r == 0 || c == '\n')
            break;
        got = true;
        if (n > PASSWORD_MAX_BYTES)
            return -EFBIG; /* even with a '\r' to drop, no password is this long */
        buf[n++] = c;
    }
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    if (n > PASSWORD_MAX_BYTES)
        return -EFBIG;
    buf[n] = '\0';
    return (ssize_t)n;
}

/* Turn the terminal's echo off, prompt (in that order: what is typed after the prompt is not
 * shown), and read a line. */
static ssize_t prompt_secret(const char *prompt, char *buf)
{
    struct termios quiet = tty_saved;
    quiet.c_lflag &= ~(tcflag_t)ECHO;
    tty_quiet = 1;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) < 0) {
        tty_quiet = 0;
        return -errno;
    }
    fputs(prompt, stderr);
    fflush(stderr);
    ssize_t n = read_secret_line(buf);
    tty_restore();
    fputc('\n', stderr);
    return n;
}

/* The new password for name into pw[PASSWORD_MAX_BYTES + 2]: from the terminal, asked twice,
 * or one line of stdin. Returns its length; or -1 after saying why, with the exit status in
 * *status. */
static ssize_t read_new_password(const char *name, char *pw, int *status)
{
    ssize_t n;
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &tty_saved) < 0) {
        n = read_secret_line(pw);
    } else {
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
        for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
            signal(sigs[i], on_signal_restore_tty);
        _cleanup_free_ char *prompt = xasprintf("New password for %s: ", name);
        n = prompt_secret(prompt, pw);
        /* one that will be refused is refused before it is asked for again */
        if (n >= 0 && password_acceptable(pw, (size_t)n, NULL) == 0) {
            char again[PASSWORD_MAX_BYTES + 2];
            ssize_t m = prompt_secret("Repeat it: ", again);
            bool same = m == n && sodium_memcmp(pw, again, (size_t)n) == 0;
            sodium_memzero(again, sizeof(again));
            if (m >= 0 && !same) {
                fputs("sandbox-mcp: the two passwords differ; nothing was changed\n", stderr);
                *status = EXIT_USAGE;
                return -1;
            }
            if (m < 0)
                n = m;
        }
    }
    if (n >= 0)
        return n;
    *status = n == -ENODATA || n == -EFBIG ? EXIT_USAGE : 1;
    if (n == -ENODATA)
        fputs("sandbox-mcp: no password on standard input\n", stderr);
    else if (n == -EFBIG)
        fprintf(stderr, "sandbox-mcp: the password is longer than %d bytes\n", PASSWORD_MAX_BYTES);
    else
        fprintf(stderr, "sandbox-mcp: cannot read the password: %s\n", strerror((int)-n));
    return -1;
}

static int user_passwd(struct store *st, const char *name)
{
    struct err err = {0};
    struct store_user u;
    if (store_user_find(st, name, &u, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return 1;
    }
    char pw[PASSWORD_MAX_BYTES + 2], hash[crypto_pwhash_STRBYTES];
    int status = 1;
    ssize_t n = read_new_password(name, pw, &status);
    if (n < 0)
        goto out;
    if (password_acceptable(pw, (size_t)n, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s; nothing was changed\n", err.msg);
        status = EXIT_USAGE;
        goto out;
    }
    int ended;
    status = 1;
    if (password_hash(pw, (size_t)n, hash, &err) < 0 ||
        store_user_set_password(st, name, hash, &err) < 0 ||
        (ended = store_web_session_delete_user(st, u.id, &err)) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        goto out;
    }
    printf("password set for %s\n", name);
    if (ended > 0)
        fprintf(stderr, "signed %s out of %d browser session%s\n", name, ended,
                ended == 1 ? "" : "s");
    status = 0;
out:
    sodium_memzero(pw, sizeof(pw));
    sodium_memzero(hash, sizeof(hash));
    return status;
}

/* "15 minutes", "2 hours", "90 seconds". */
static void format_duration(int64_t s, char out[32])
{
    const char *unit = "second";
    if (s % 3600 == 0)
        s /= 3600, unit = "hour";
    else if (s % 60 == 0)
        s /= 60, unit = "minute";
    snprintf(out, 32, "%lld %s%s", (long long)s, unit, s == 1 ? "" : "s");
}

static int user_login_link(const struct config *cfg, struct store *st, const char *name,
                           int64_t ttl)
{
    struct err err = {0};
    char token[STORE_LINK_LEN + 1], within[32];
    if (store_login_link_create(st, name, ttl, token, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return 1;
    }
    format_duration(ttl, within);
    printf("%s/login/link?t=%s\n", cfg->public_url, token);
    fflush(stdout);
    fprintf(stderr,
            "Open it once, within %s, to sign in as %s; or paste the code after t= into the "
            "one-time code field of the sign-in page.\n",
            within, name);
    if (!cfg->public_url_set)
        fprintf(stderr, "note: PUBLIC_URL is not set, so the link names the listen address; set "
                        "it (or pass --public-url) to the address browsers reach\n");
    explicit_bzero(token, sizeof(token));
    return 0;
}

/* Show NAME's network setting, or set it (arg "default" clears it) to mode, which may not be
 * wider than the server's. */
static int user_network(const struct config *cfg, struct store *st, const char *name,
                        const char *arg, enum egress_mode mode)
{
    struct err err = {0};
    struct egress_policy *policy = NULL;
    if (egress_policy_new(cfg, &policy, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return 2;
    }
    enum egress_mode server = egress_policy_mode(policy);
    struct store_user u;
    char mine[STORE_NETWORK_MAX];
    int r = 1;
    if (store_user_find(st, name, &u, &err) < 0)
        goto out;
    if (arg) {
        bool clear = strcmp(arg, "default") == 0;
        if (!clear && egress_mode_narrow(mode, server) != mode) {
            err_set(&err, -EINVAL,
                    "'%s' is wider than this server's SANDBOX_NETWORK ('%s'); a user's setting "
                    "can only narrow it",
                    arg, egress_mode_name(server));
            goto out;
        }
        if (store_user_network_set(st, name, clear ? NULL : egress_mode_name(mode), &err) < 0)
            goto out;
    }
    if (store_user_network_get(st, u.id, mine, &err) < 0)
        goto out;
    printf("%s: network %s (user setting: %s; server: %s)\n", name,
           egress_mode_name(runs_network_bound(policy, st, u.id)), mine[0] ? mine : "default",
           egress_mode_name(server));
    r = 0;
out:
    if (r)
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
    egress_policy_free(policy);
    return r;
}

static void print_credential(const struct store_credential *c, void *ctx)
{
    (void)ctx;
    char when[32];
    time_format_rfc3339(c->updated_at, when);
    printf("%-10s set %s\n", c->service, when);
}

/* user credential set|delete NAME SERVICE, user credential list NAME. */
static int cmd_user_credential(const struct opts *o)
{
    const char *action = o->nargs > 0 ? o->args[0] : "";
    bool set = strcmp(action, "set") == 0, del = strcmp(action, "delete") == 0,
         list = strcmp(action, "list") == 0;
    if (!set && !del && !list)
        return usage_error("user", usage_user, "%s", "'user credential' takes set, delete or list");
    if ((list && o->nargs != 2) || (!list && o->nargs != 3))
        return usage_error("user", usage_user,
                           "'user credential %s' takes NAME%s (a token is read from stdin, never "
                           "from the command line)",
                           action, list ? "" : " and a service (github)");
    if (o->ttl || o->public_url)
        return usage_error("user", usage_user, "%s", "--ttl and --public-url do not apply here");
    const char *name = o->args[1], *service = list ? NULL : o->args[2];
    if (service && strcmp(service, "github") != 0)
        return usage_error("user", usage_user, "unknown service '%s': the only one is github",
                           service);
    struct config cfg = {0};
    struct store *st = NULL;
    int r = open_config_store(o, &cfg, &st);
    if (r)
        return r;
    struct err err = {0};
    struct store_user u;
    char token[PASSWORD_MAX_BYTES + 2];
    unsigned char key[SEAL_KEY_BYTES];
    r = 1;
    if (store_user_find(st, name, &u, &err) < 0)
        goto out;
    if (list) {
        r = store_credential_list(st, u.id, print_credential, NULL, &err) < 0 ? 1 : 0;
        goto out;
    }
    if (del) {
        if (store_credential_delete(st, u.id, service, &err) < 0)
            goto out;
        printf("%s credential of %s deleted\n", service, name);
        r = 0;
        goto out;
    }
    ssize_t n;
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &tty_saved) == 0) {
        _cleanup_free_ char *prompt = xasprintf("%s token for %s: ", service, name);
        n = prompt_secret(prompt, token);
    } else {
        n = read_secret_line(token);
    }
    const char *why = n == -ENODATA || n == 0 ? "no token on standard input"
                      : n == -EFBIG           ? "the token is longer than 255 characters"
                      : n < 0                 ? strerror((int)-n)
                                              : store_credential_problem(token, (size_t)n);
    if (why) {
        err_set(&err, -EINVAL, "%s; nothing was changed", why);
        r = EXIT_USAGE;
        goto out;
    }
    if (store_credential_key_load(cfg.data_dir, key, &err) < 0 ||
        store_credential_seal(st, key, u.id, service, token, (size_t)n, time_now_ms(), &err) < 0)
        goto out;
    printf("%s credential of %s set (sealed; it is not shown again)\n", service, name);
    r = 0;
out:
    if (r == 1 || (r == EXIT_USAGE && err.msg[0]))
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
    sodium_memzero(token, sizeof(token));
    sodium_memzero(key, sizeof(key));
    close_config_store(&cfg, st);
    return r;
}

static void print_target(const struct store_notify_target *t, void *ctx)
{
    (void)ctx;
    char when[32], shown[STORE_NOTIFY_URL_MAX + 8];
    notify_url_shown(t->url, shown, sizeof(shown));
    printf("%-30s %-8s %s\n", t->id, t->kind, shown);
    time_format_rfc3339(t->created_at, when);
    printf("    added %s", when);
    if (t->last_status[0]) {
        time_format_rfc3339(t->last_at, when);
        printf("; last %s %s%s%s", t->last_status, when, t->last_error[0] ? ": " : "",
               t->last_error);
    }
    if (t->pending)
        printf("; %lld waiting%s%s", (long long)t->pending,
               t->pending_error[0] ? ", last try: " : "", t->pending_error);
    printf("\n");
}

/* user notify add NAME KIND URL | list NAME | remove NAME ID | test NAME ID */
static int cmd_user_notify(const struct opts *o)
{
    const char *action = o->nargs > 0 ? o->args[0] : "";
    bool add = strcmp(action, "add") == 0, list = strcmp(action, "list") == 0,
         remove = strcmp(action, "remove") == 0, test = strcmp(action, "test") == 0;
    if (!add && !list && !remove && !test)
        return usage_error("user", usage_user, "%s",
                           "'user notify' takes add, list, remove or test");
    if ((add && o->nargs != 4) || (list && o->nargs != 2) || ((remove || test) && o->nargs != 3))
        return usage_error("user", usage_user, "'user notify %s' takes NAME%s", action,
                           add    ? ", webhook or ntfy, and a URL"
                           : list ? ""
                                  : " and a target ID (see 'user notify list NAME')");
    if (o->ttl || o->public_url)
        return usage_error("user", usage_user, "%s", "--ttl and --public-url do not apply here");
    const char *name = o->args[1];
    enum notify_kind kind = NOTIFY_WEBHOOK;
    if (add && notify_kind_parse(o->args[2], &kind) < 0)
        return usage_error("user", usage_user, "unknown target kind '%s': webhook or ntfy",
                           o->args[2]);
    struct config cfg = {0};
    struct store *st = NULL;
    int r = open_config_store(o, &cfg, &st);
    if (r)
        return r;
    struct err err = {0};
    struct store_user u;
    unsigned char key[SEAL_KEY_BYTES];
    char secret[NOTIFY_SECRET_LEN + 1] = "", event_id[64];
    struct store_notify_target t;
    r = 1;
    if (store_user_find(st, name, &u, &err) < 0)
        goto out;
    if (list) {
        r = store_notify_target_list(st, u.id, print_target, NULL, &err) < 0 ? 1 : 0;
    } else if (remove) {
        if (store_notify_target_delete(st, u.id, o->args[2], &err) == 0) {
            printf("notification target %s of %s removed\n", o->args[2], name);
            r = 0;
        }
    } else if (test) {
        if (store_notify_test(st, u.id, o->args[2], time_now_ms(), event_id, &err) == 0) {
            printf("test notification %s queued for %s; the running server sends it within a "
                   "few seconds ('user notify list %s' shows how it went)\n",
                   event_id, o->args[2], name);
            r = 0;
        }
    } else if (notify_url_check(o->args[3], kind, cfg.notify_test_loopback, NULL, &err) < 0) {
        err_wrap(&err, "not added");
        r = EXIT_USAGE;
    } else {
        if (kind == NOTIFY_WEBHOOK)
            notify_secret_new(secret);
        if (store_credential_key_load(cfg.data_dir, key, &err) == 0 &&
            store_notify_target_add(st, key, u.id, notify_kind_name(kind), o->args[3],
                                    secret[0] ? secret : NULL, &t, &err) == 0) {
            printf("%s target %s added for %s\n", t.kind, t.id, name);
            if (secret[0])
                printf("signing secret (shown only now; keep it where the receiver checks the "
                       "%s header):\n%s\n",
                       NOTIFY_SIGNATURE_HEADER, secret);
            r = 0;
        }
    }
out:
    if (r)
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
    sodium_memzero(secret, sizeof(secret));
    sodium_memzero(key, sizeof(key));
    close_config_store(&cfg, st);
    return r;
}

static int cmd_user(int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, OPT_TTL, OPT_PUBLIC_URL, 0};
    const char *sub = NULL;
    struct opts o = {0};
    int r = parse_sub("user", usage_user,
                      "'add', 'list', 'passwd', 'login-link', 'network', 'credential' or "
                      "'notify'",
                      argc, argv, allowed, &o, &sub);
    if (r)
        return r == 1 ? 0 : r;
    bool add = strcmp(sub, "add") == 0, list = strcmp(sub, "list") == 0,
         passwd = strcmp(sub, "passwd") == 0, link = strcmp(sub, "login-link") == 0,
         network = strcmp(sub, "network") == 0, credential = strcmp(sub, "credential") == 0;
    if (credential)
        return cmd_user_credential(&o);
    if (strcmp(sub, "notify") == 0)
        return cmd_user_notify(&o);
    if (!add && !list && !passwd && !link && !network)
        return usage_error("user", usage_user, "unknown subcommand '%s'", sub);
    if (network && (o.nargs < 1 || o.nargs > 2))
        return usage_error("user", usage_user, "%s",
                           "'user network' takes NAME and, to change it, a mode");
    enum egress_mode mode = EGRESS_MODE_NONE;
    if (network && o.nargs == 2 && strcmp(o.args[1], "default") != 0 &&
        egress_mode_parse(o.args[1], &mode) < 0)
        return usage_error("user", usage_user,
                           "network mode '%s' is not none, allowlist, public or default",
                           o.args[1]);
    if (!list && !network && o.nargs != 1)
        return usage_error("user", usage_user, "'user %s' takes exactly one NAME", sub);
    if (list && o.nargs != 0)
        return usage_error("user", usage_user, "unexpected argument '%s'", o.args[0]);
    if (!link && o.ttl)
        return usage_error("user", usage_user, "%s", "--ttl applies to 'user login-link' only");
    if (!link && o.public_url)
        return usage_error("user", usage_user, "%s",
                           "--public-url applies to 'user login-link' only");
    if (!list && !store_user_name_valid(o.args[0]))
        return usage_error(
            "user", usage_user,
            "invalid user name '%s': use letters, digits, '.', '_' or '-' (at most 64)", o.args[0]);
    int64_t ttl = o.ttl ? parse_duration(o.ttl) : 15 * 60;
    if (link && (ttl <= 0 || ttl > STORE_LINK_TTL_MAX_S))
        return usage_error("user", usage_user, "--ttl '%s' is not a duration between 1s and 24h",
                           o.ttl);
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = open_config_store(&o, &cfg, &st)))
        return r;
    struct err err = {0};
    if (add) {
        struct store_user u;
        if (store_user_add(st, o.args[0], &u, &err) < 0) {
            fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
            r = 1;
        } else {
            printf("created user %s (%s)\n", u.name, u.id);
        }
    } else if (passwd) {
        r = user_passwd(st, o.args[0]);
    } else if (link) {
        r = user_login_link(&cfg, st, o.args[0], ttl);
    } else if (network) {
        r = user_network(&cfg, st, o.args[0], o.nargs == 2 ? o.args[1] : NULL, mode);
    } else {
        printf("%-30s %-24s %s\n", "ID", "NAME", "CREATED");
        r = store_user_list(st, print_user, NULL, &err) < 0 ? 1 : 0;
        if (r)
            fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
    }
    close_config_store(&cfg, st);
    return r;
}

static int cmd_token(int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, OPT_USER, OPT_LABEL, 0};
    const char *sub = NULL;
    struct opts o = {0};
    int r = parse_sub("token", usage_token, "'create', 'list' or 'revoke'", argc, argv, allowed, &o,
                      &sub);
    if (r)
        return r == 1 ? 0 : r;
    bool create = strcmp(sub, "create") == 0, list = strcmp(sub, "list") == 0,
         revoke = strcmp(sub, "revoke") == 0;
    if (!create && !list && !revoke)
        return usage_error("token", usage_token, "unknown subcommand '%s'", sub);
    if (create && !o.user)
        return usage_error("token", usage_token, "%s", "'token create' needs --user NAME");
    if (revoke && o.nargs != 1)
        return usage_error("token", usage_token, "%s", "'token revoke' takes exactly one ID");
    if (!revoke && o.nargs != 0)
        return usage_error("token", usage_token, "unexpected argument '%s'", o.args[0]);
    if (o.label && strlen(o.label) > 100)
        return usage_error("token", usage_token, "%s", "--label is limited to 100 characters");
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = open_config_store(&o, &cfg, &st)))
        return r;
    struct err err = {0};
    struct store_user u;
    char token[STORE_TOKEN_LEN + 1];
    struct store_token t;
    if (create) {
        if (store_user_find(st, o.user, &u, &err) < 0 ||
            store_token_create(st, u.id, o.label, token, &t, &err) < 0)
            r = 1;
        else
            printf("%s\n", token),
                fprintf(stderr, "created token %s for user %s (shown once)\n", t.id, u.name);
    } else if (list) {
        printf("%-30s %-16s %-14s %-8s %-24s %-24s %s\n", "ID", "USER", "PREFIX", "STATE",
               "CREATED", "LAST USED", "LABEL");
        if (o.user && store_user_find(st, o.user, &u, &err) < 0)
            r = 1;
        else if (store_token_list(st, o.user, print_user_token, NULL, &err) < 0 ||
                 store_oauth_grant_list(st, o.user, print_grant, NULL, &err) < 0)
            r = 1;
    } else if (strncmp(o.args[0], "grt_", 4) == 0) {
        if (store_oauth_grant_revoke(st, o.args[0], NULL, &err) < 0)
            r = 1;
        else
            printf("revoked OAuth grant %s (the app's tokens stop working)\n", o.args[0]);
    } else {
        if (store_token_revoke(st, o.args[0], &err) < 0)
            r = 1;
        else
            printf("revoked token %s\n", o.args[0]);
    }
    if (r)
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
    close_config_store(&cfg, st);
    return r;
}

static const char usage_proxy_token[] =
    "usage: sandbox-mcp proxy-token --user NAME --services LIST [--ttl DURATION]\n"
    "                               [--sandbox ID] [--data-dir DIR]\n"
    "       sandbox-mcp proxy-token revoke JTI [--data-dir DIR]\n"
    "\n"
    "Mints a token for /proxy/<service>/... on the main listener, for the services in LIST\n"
    "(comma-separated, e.g. anthropic,github), valid for DURATION (30s, 10m, 2h; default 10m,\n"
    "at most 24h). With --sandbox the token works only on that sandbox's own listener,\n"
    "http://127.0.0.1:8788/proxy/... inside it. The token is printed on stdout; its id (JTI)\n"
    "on stderr.\n";

static int cmd_proxy_token(int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, OPT_USER, OPT_SERVICES,
                                  OPT_TTL,      OPT_SANDBOX,  0};
    struct opts o = {0};
    int r = parse_opts("proxy-token", usage_proxy_token, argc, argv, allowed, &o);
    if (r)
        return r == 1 ? 0 : r;
    bool revoke = o.nargs >= 1 && strcmp(o.args[0], "revoke") == 0;
    if (revoke && o.nargs != 2)
        return usage_error("proxy-token", usage_proxy_token, "%s",
                           "'proxy-token revoke' takes exactly one JTI");
    if (!revoke && o.nargs > 0)
        return usage_error("proxy-token", usage_proxy_token, "unexpected argument '%s'", o.args[0]);
    int64_t ttl = o.ttl ? parse_duration(o.ttl) : 600;
    if (!revoke) {
        if (!o.user || !o.services)
            return usage_error("proxy-token", usage_proxy_token, "%s",
                               "--user and --services are required");
        if (ttl <= 0 || ttl > 86400)
            return usage_error("proxy-token", usage_proxy_token,
                               "--ttl '%s' is not a duration between 1s and 24h", o.ttl);
        for (const char *c = o.services; *c; c++)
            if (!isalnum((unsigned char)*c) && *c != ',' && *c != '-' && *c != '_')
                return usage_error("proxy-token", usage_proxy_token,
                                   "--services '%s' must be names separated by commas", o.services);
    }
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = open_config_store(&o, &cfg, &st)))
        return r;
    struct err err = {0};
    r = 0;
    if (revoke) {
        if (store_proxy_token_revoke(st, o.args[1], &err) < 0) {
            fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
            r = 1;
        } else {
            printf("revoked %s\n", o.args[1]);
        }
    } else if (ensure_jwt_secret(&cfg) < 0) {
        r = 1;
    } else {
        struct store_user u;
        char *token = NULL, jti[64];
        const char *secret = config_get(&cfg, "PROXY_JWT_SECRET");
        unsigned char key[32];
        key_derive(secret, strlen(secret), KEY_PROXY_JWT, key);
        struct proxy_grant g = {
            .user_id = u.id, .services = o.services, .sandbox_id = o.sandbox, .ttl_seconds = ttl};
        if (store_user_find(st, o.user, &u, &err) < 0 ||
            proxy_mint(st, key, sizeof(key), &g, &token, jti, &err) < 0) {
            fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
            r = 1;
        } else {
            printf("%s\n", token);
            fprintf(stderr, "proxy token %s for %s: services %s, expires in %llds\n", jti, o.user,
                    o.services, (long long)ttl);
            explicit_bzero(token, strlen(token));
            free(token);
        }
        explicit_bzero(key, sizeof(key));
    }
    close_config_store(&cfg, st);
    return r;
}

static const char usage_sandbox[] =
    "usage: sandbox-mcp sandbox list|stop-all [--data-dir DIR] [--env-file FILE]\n"
    "\n"
    "Sandboxes outlive the server, so that a restart does not kill running work. 'list' shows\n"
    "the running ones; 'stop-all' kills them all and unmounts their disk images, e.g. before\n"
    "deleting the data directory.\n";

static void print_sandbox(const struct sandbox_info *i, void *ctx)
{
    printf("%-30s %-30s %-10s %8d %s\n", i->id, i->user_id, i->session_id[0] ? i->session_id : "-",
           i->pid, i->running ? "running" : "stopped");
}

static int cmd_sandbox(int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, 0};
    const char *sub = NULL;
    struct opts o = {0};
    int r =
        parse_sub("sandbox", usage_sandbox, "'list' or 'stop-all'", argc, argv, allowed, &o, &sub);
    if (r)
        return r == 1 ? 0 : r;
    bool stop = strcmp(sub, "stop-all") == 0;
    if (!stop && strcmp(sub, "list") != 0)
        return usage_error("sandbox", usage_sandbox, "unknown subcommand '%s'", sub);
    if (o.nargs != 0)
        return usage_error("sandbox", usage_sandbox, "unexpected argument '%s'", o.args[0]);
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = open_config_store(&o, &cfg, &st)))
        return r;
    struct sandbox_config sc;
    struct sandbox_manager *m = NULL;
    struct err err = {0};
    if (load_sandbox_config(&cfg, &sc, &err) < 0 || sandbox_manager_new(&sc, st, &m, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        r = 1;
    } else if (stop) {
        printf("stopped %d sandboxes\n", sandbox_manager_stop_all(m));
    } else {
        printf("%-30s %-30s %-10s %8s %s\n", "ID", "USER", "SESSION", "PID", "STATE");
        sandbox_manager_list(m, print_sandbox, NULL);
    }
    sandbox_manager_free(m);
    close_config_store(&cfg, st);
    return r;
}

static const char usage_links[] =
    "usage: sandbox-mcp links revoke RUN_OR_SESSION_ID [--data-dir DIR] [--env-file FILE]\n"
    "\n"
    "Stops every web address given out so far for a run's (run_...) or a session's (ses_...)\n"
    "page from opening it. get_result and run_task hand out working addresses again.\n";

static int cmd_links(int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, 0};
    const char *sub = NULL;
    struct opts o = {0};
    int r = parse_sub("links", usage_links, "'revoke'", argc, argv, allowed, &o, &sub);
    if (r)
        return r == 1 ? 0 : r;
    if (strcmp(sub, "revoke") != 0)
        return usage_error("links", usage_links, "unknown subcommand '%s'", sub);
    if (o.nargs != 1)
        return usage_error("links", usage_links, "expected one run or session id");
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = open_config_store(&o, &cfg, &st)))
        return r;
    struct err err = {0};
    bool session = strncmp(o.args[0], "ses_", 4) == 0;
    if (store_view_revoke(st, session, o.args[0], &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        r = 1;
    } else {
        printf("revoked the web addresses of %s\n", o.args[0]);
    }
    close_config_store(&cfg, st);
    return r;
}

static const char usage_template[] =
    "usage: sandbox-mcp template build NAME [--force] [--data-dir DIR] [--env-file FILE]\n"
    "\n"
    "Builds the sandbox template NAME in SANDBOX_TEMPLATE_DIR (default DATA_DIR/templates).\n"
    "serve builds the default one, debian, by itself in the background; this command does it\n"
    "ahead of time, or again with --force.\n"
    "  debian    Debian trixie (bookworm where the mirror lacks trixie) made with debootstrap\n"
    "            from SANDBOX_TEMPLATE_MIRROR (default: the host's apt mirror): python3, pip,\n"
    "            venv, numpy, pandas, matplotlib, scipy, git, gcc, make, curl, node, npm and\n"
    "            pnpm. Needs root, debootstrap and the network, and takes minutes. Sandboxes\n"
    "            that are running keep the tree they started on.\n"
    "  host      assembled from the host when the first sandbox starts; needs no build.\n"
    "A template whose recipe is unchanged and whose tools still run is kept; --force\n"
    "rebuilds it anyway.\n";

static int cmd_template(int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, OPT_FORCE, 0};
    const char *sub = NULL;
    struct opts o = {0};
    int r = parse_sub("template", usage_template, "'build'", argc, argv, allowed, &o, &sub);
    if (r)
        return r == 1 ? 0 : r;
    if (strcmp(sub, "build") != 0)
        return usage_error("template", usage_template, "unknown subcommand '%s'", sub);
    if (o.nargs != 1)
        return usage_error("template", usage_template, "%s",
                           "'template build' takes exactly one NAME");
    struct config cfg = {0};
    if ((r = load_config(&o, &cfg)))
        return r;
    struct sandbox_config sc;
    struct err err = {0};
    if (load_sandbox_config(&cfg, &sc, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        config_release(&cfg);
        return EXIT_USAGE;
    }
    if (ensure_dir(cfg.data_dir, 0700) < 0) {
        config_release(&cfg);
        return 1;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", sc.template_dir ? sc.template_dir : "");
    if (!sc.template_dir)
        snprintf(dir, sizeof(dir), "%s/templates", cfg.data_dir);
    /* Set by the server for the build it runs itself (template_keeper.c). */
    const char *fd = getenv("SANDBOX_TEMPLATE_STATUS_FD");
    struct template_build_opts to = {.dir = dir,
                                     .mirror = sc.template_mirror,
                                     .force = o.force,
                                     .status_fd = fd ? atoi(fd) : -1};
    if (template_build(o.args[0], &to, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        r = 1;
    }
    config_release(&cfg);
    return r;
}

int main(int argc, char **argv)
{
    /* libsodium picks its implementations and seeds itself here, before any thread can use it */
    if (sodium_init() < 0) {
        fputs("sandbox-mcp: cannot initialise libsodium\n", stderr);
        return 1;
    }
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("sandbox-mcp %s\n", SANDBOX_MCP_VERSION);
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage_main, stdout);
        return 0;
    }
    if (strcmp(cmd, "serve") == 0)
        return cmd_serve(argc - 1, argv + 1);
    if (strcmp(cmd, "migrate") == 0)
        return cmd_migrate(argc - 1, argv + 1);
    if (strcmp(cmd, "node") == 0)
        return cmd_node(argc - 1, argv + 1);
    if (strcmp(cmd, "user") == 0)
        return cmd_user(argc - 1, argv + 1);
    if (strcmp(cmd, "token") == 0)
        return cmd_token(argc - 1, argv + 1);
    if (strcmp(cmd, "sandbox") == 0)
        return cmd_sandbox(argc - 1, argv + 1);
    if (strcmp(cmd, "proxy-token") == 0)
        return cmd_proxy_token(argc - 1, argv + 1);
    if (strcmp(cmd, "links") == 0)
        return cmd_links(argc - 1, argv + 1);
    if (strcmp(cmd, "template") == 0)
        return cmd_template(argc - 1, argv + 1);
    fprintf(stderr, "sandbox-mcp: unknown command '%s'\n%s", cmd, usage_main);
    return EXIT_USAGE;
}

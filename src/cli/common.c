/* The command line's shared parts: option parsing, usage errors, building the configuration,
 * opening the store as this node, and what a first start makes (the proxy signing secret, the
 * first user and its token). Rule: these print their own errors and return an exit status or
 * -1; they never exit, so every command keeps one way out. */
#include "cli/cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/auth.h"
#include "base/cleanup.h"
#include "base/config.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "notify/notify.h"
#include "runs/envcache.h"
#include "store/store.h"

int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
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
int cli_parse_opts(const char *cmd, const char *usage, int argc, char **argv, const int *allowed,
                   struct cli_opts *o)
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
        {"setup-file", required_argument, NULL, OPT_SETUP_FILE},
        {"setup-stdin", no_argument, NULL, OPT_SETUP_STDIN},
        {"on-setup-failure", required_argument, NULL, OPT_ON_SETUP_FAILURE},
        {"fix-ci", required_argument, NULL, OPT_FIX_CI},
        {"steerers", required_argument, NULL, OPT_STEERERS},
        {"repos", required_argument, NULL, OPT_REPOS},
        {"agent", no_argument, NULL, OPT_AGENT},
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
                return cli_usage_error(cmd, usage, "option '%s' needs a value", bad);
            return cli_usage_error(cmd, usage, "unknown option '%s'", bad);
        }
        bool ok = false;
        for (const int *a = allowed; *a; a++)
            ok = ok || *a == c;
        /* "--opt value" leaves optind past the value; "--opt=value" does not. */
        const char *name =
            optarg && optarg == argv[optind - 1] ? argv[optind - 2] : argv[optind - 1];
        if (!ok)
            return cli_usage_error(cmd, usage, "option '%s' does not apply here", name);
        if (optarg && !optarg[0])
            return cli_usage_error(cmd, usage, "option '%s' needs a non-empty value", name);
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
        case OPT_SETUP_FILE: o->setup_file = optarg; break;
        case OPT_SETUP_STDIN: o->setup_stdin = true; break;
        case OPT_ON_SETUP_FAILURE: o->on_setup_failure = optarg; break;
        case OPT_FIX_CI: o->fix_ci = optarg; break;
        case OPT_STEERERS: o->steerers = optarg; break;
        case OPT_REPOS: o->repos = optarg; break;
        case OPT_AGENT: o->agent = true; break;
        }
    }
    o->args = argv + optind;
    o->nargs = argc - optind;
    return 0;
}

/* Build the configuration: defaults < .dev.vars < environment < flags. */
int cli_load_config(const struct cli_opts *o, struct config *cfg)
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
    /* The modules' settings that every command checks, so that a value serve would refuse is
     * refused by the command that writes to its store too; serve reads them again to use. */
    struct auth_config ac;
    struct notify_config nc;
    struct envcache_config cc;
    if (config_finish(cfg, &err) < 0 || auth_config_load(cfg, &ac, &err) < 0 ||
        notify_config_load(cfg, &nc, &err) < 0 ||
        envcache_config_load(cfg, cfg->data_dir, &cc, &err) < 0) {
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

int cli_ensure_dir(const char *path, mode_t mode)
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

int cli_open_store(const struct config *cfg, struct store **st)
{
    if (cli_ensure_dir(cfg->data_dir, 0700) < 0)
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
 * status (the error already printed). Close with cli_close_config_store(). */
int cli_open_config_store(const struct cli_opts *o, struct config *cfg, struct store **st)
{
    int r = cli_load_config(o, cfg);
    if (r)
        return r;
    if ((r = cli_open_store(cfg, st)))
        config_release(cfg);
    return r;
}

void cli_close_config_store(struct config *cfg, struct store *st)
{
    store_close(st);
    config_release(cfg);
}

/* PROXY_JWT_SECRET: from the configuration, else the one kept in the data dir, else a new one. */
int cli_ensure_jwt_secret(struct config *cfg)
{
    if (config_get(cfg, "PROXY_JWT_SECRET"))
        return 0;
    _cleanup_free_ char *dir = xasprintf("%s/secrets", cfg->data_dir);
    _cleanup_free_ char *path = xasprintf("%s/proxy_jwt_secret", dir);
    if (cli_ensure_dir(dir, 0700) < 0)
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

int cli_first_start(struct config *cfg, struct store *st)
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

/* Commands with subcommands ("user add", "token list"...): -h/--help before the subcommand
 * prints usage (returns 1); a missing subcommand is a usage error naming the expected ones;
 * otherwise *sub is the subcommand and the options after it are parsed into o (0). */
int cli_parse_sub(const char *cmd, const char *usage, const char *expected, int argc, char **argv,
                  const int *allowed, struct cli_opts *o, const char **sub)
{
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
            fputs(usage, stdout);
            return 1;
        }
        return cli_usage_error(cmd, usage, "expected %s", expected);
    }
    *sub = argv[1];
    return cli_parse_opts(cmd, usage, argc - 1, argv + 1, allowed, o);
}

/* "90", "30s", "10m", "2h" -> seconds; -1 when malformed. */
int64_t cli_parse_duration(const char *s)
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

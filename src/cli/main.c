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
#include "mcp/fixtures.h"
#include "mcp/mcp.h"
#include "mcp/tools.h"
#include "notify/notify.h"
#include "proxy/proxy.h"
#include "runs/runs.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "version.h"

#include "cli/cli.h"

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

static const char usage_migrate[] =
    "usage: sandbox-mcp migrate [--data-dir DIR] [--env-file FILE]\n"
    "\nCreates the database or applies pending migrations.\n";
static const char usage_node[] =
    "usage: sandbox-mcp node list [--data-dir DIR] [--env-file FILE]\n"
    "\nLists the nodes that share this store (DATABASE_URL): id, state (up, lost, stopped),\n"
    "the URL the others reach it at, and how long ago it last beat.\n";
static const char usage_token[] =
    "usage: sandbox-mcp token create --user NAME [--label TEXT] [--data-dir DIR]\n"
    "       sandbox-mcp token list [--user NAME] [--data-dir DIR]\n"
    "       sandbox-mcp token revoke ID [--data-dir DIR]\n"
    "\n"
    "The list shows API tokens and the apps connected through OAuth (ids grt_...); revoking a\n"
    "grant disconnects the app and ends its tokens.\n";

static int cmd_migrate(const struct cli_command *cmd, int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, 0};
    struct cli_opts o = {0};
    int r = cli_parse_opts(cmd->name, cmd->usage, argc, argv, allowed, &o);
    if (r)
        return r == 1 ? 0 : r;
    if (o.nargs > 0)
        return cli_usage_error(cmd->name, cmd->usage, "unexpected argument '%s'", o.args[0]);
    struct config cfg = {0};
    if ((r = cli_load_config(&o, &cfg)))
        return r;
    struct store *st = NULL;
    if ((r = cli_open_store(&cfg, &st)) == 0)
        printf("database schema is at version %d\n", store_schema_version_known());
    cli_close_config_store(&cfg, st);
    return r;
}

static void print_node(const struct store_node *n, void *ctx)
{
    (void)ctx;
    printf("%-24s %-8s %-40s beat %llds ago\n", n->id, n->state, n->url,
           (long long)((time_now_ms() - n->heartbeat_at) / 1000));
}

static int cmd_node(const struct cli_command *cmd, int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, 0};
    struct cli_opts o = {0};
    int r = cli_parse_opts(cmd->name, cmd->usage, argc, argv, allowed, &o);
    if (r)
        return r == 1 ? 0 : r;
    if (o.nargs != 1 || strcmp(o.args[0], "list") != 0)
        return cli_usage_error(cmd->name, cmd->usage, "%s", "'node' takes list");
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = cli_open_config_store(&o, &cfg, &st)))
        return r;
    struct err err = {0};
    if (store_node_list(st, print_node, NULL, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        r = 1;
    }
    cli_close_config_store(&cfg, st);
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

static int cmd_token(const struct cli_command *cmd, int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, OPT_USER, OPT_LABEL, 0};
    const char *sub = NULL;
    struct cli_opts o = {0};
    int r = cli_parse_sub(cmd->name, cmd->usage, "'create', 'list' or 'revoke'", argc, argv,
                          allowed, &o, &sub);
    if (r)
        return r == 1 ? 0 : r;
    bool create = strcmp(sub, "create") == 0, list = strcmp(sub, "list") == 0,
         revoke = strcmp(sub, "revoke") == 0;
    if (!create && !list && !revoke)
        return cli_usage_error(cmd->name, cmd->usage, "unknown subcommand '%s'", sub);
    if (create && !o.user)
        return cli_usage_error(cmd->name, cmd->usage, "%s", "'token create' needs --user NAME");
    if (revoke && o.nargs != 1)
        return cli_usage_error(cmd->name, cmd->usage, "%s", "'token revoke' takes exactly one ID");
    if (!revoke && o.nargs != 0)
        return cli_usage_error(cmd->name, cmd->usage, "unexpected argument '%s'", o.args[0]);
    if (o.label && strlen(o.label) > 100)
        return cli_usage_error(cmd->name, cmd->usage, "%s", "--label is limited to 100 characters");
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = cli_open_config_store(&o, &cfg, &st)))
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
    cli_close_config_store(&cfg, st);
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

static int cmd_proxy_token(const struct cli_command *cmd, int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, OPT_USER, OPT_SERVICES,
                                  OPT_TTL,      OPT_SANDBOX,  0};
    struct cli_opts o = {0};
    int r = cli_parse_opts(cmd->name, cmd->usage, argc, argv, allowed, &o);
    if (r)
        return r == 1 ? 0 : r;
    bool revoke = o.nargs >= 1 && strcmp(o.args[0], "revoke") == 0;
    if (revoke && o.nargs != 2)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "'proxy-token revoke' takes exactly one JTI");
    if (!revoke && o.nargs > 0)
        return cli_usage_error(cmd->name, cmd->usage, "unexpected argument '%s'", o.args[0]);
    int64_t ttl = o.ttl ? cli_parse_duration(o.ttl) : 600;
    if (!revoke) {
        if (!o.user || !o.services)
            return cli_usage_error(cmd->name, cmd->usage, "%s",
                                   "--user and --services are required");
        if (ttl <= 0 || ttl > 86400)
            return cli_usage_error(cmd->name, cmd->usage,
                                   "--ttl '%s' is not a duration between 1s and 24h", o.ttl);
        for (const char *c = o.services; *c; c++)
            if (!isalnum((unsigned char)*c) && *c != ',' && *c != '-' && *c != '_')
                return cli_usage_error(cmd->name, cmd->usage,
                                       "--services '%s' must be names separated by commas",
                                       o.services);
    }
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = cli_open_config_store(&o, &cfg, &st)))
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
    } else if (cli_ensure_jwt_secret(&cfg) < 0) {
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
    cli_close_config_store(&cfg, st);
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

static int cmd_sandbox(const struct cli_command *cmd, int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, 0};
    const char *sub = NULL;
    struct cli_opts o = {0};
    int r =
        cli_parse_sub(cmd->name, cmd->usage, "'list' or 'stop-all'", argc, argv, allowed, &o, &sub);
    if (r)
        return r == 1 ? 0 : r;
    bool stop = strcmp(sub, "stop-all") == 0;
    if (!stop && strcmp(sub, "list") != 0)
        return cli_usage_error(cmd->name, cmd->usage, "unknown subcommand '%s'", sub);
    if (o.nargs != 0)
        return cli_usage_error(cmd->name, cmd->usage, "unexpected argument '%s'", o.args[0]);
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = cli_open_config_store(&o, &cfg, &st)))
        return r;
    struct sandbox_config sc;
    struct sandbox_manager *m = NULL;
    struct err err = {0};
    if (sandbox_config_load(&cfg, &sc, &err) < 0 || sandbox_manager_new(&sc, st, &m, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        r = 1;
    } else if (stop) {
        printf("stopped %d sandboxes\n", sandbox_manager_stop_all(m));
    } else {
        printf("%-30s %-30s %-10s %8s %s\n", "ID", "USER", "SESSION", "PID", "STATE");
        sandbox_manager_list(m, print_sandbox, NULL);
    }
    sandbox_manager_free(m);
    cli_close_config_store(&cfg, st);
    return r;
}

static const char usage_links[] =
    "usage: sandbox-mcp links revoke RUN_OR_SESSION_ID [--data-dir DIR] [--env-file FILE]\n"
    "\n"
    "Stops every web address given out so far for a run's (run_...) or a session's (ses_...)\n"
    "page from opening it. get_result and run_task hand out working addresses again.\n";

static int cmd_links(const struct cli_command *cmd, int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, 0};
    const char *sub = NULL;
    struct cli_opts o = {0};
    int r = cli_parse_sub(cmd->name, cmd->usage, "'revoke'", argc, argv, allowed, &o, &sub);
    if (r)
        return r == 1 ? 0 : r;
    if (strcmp(sub, "revoke") != 0)
        return cli_usage_error(cmd->name, cmd->usage, "unknown subcommand '%s'", sub);
    if (o.nargs != 1)
        return cli_usage_error(cmd->name, cmd->usage, "expected one run or session id");
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = cli_open_config_store(&o, &cfg, &st)))
        return r;
    struct err err = {0};
    bool session = strncmp(o.args[0], "ses_", 4) == 0;
    if (store_view_revoke(st, session, o.args[0], &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        r = 1;
    } else {
        printf("revoked the web addresses of %s\n", o.args[0]);
    }
    cli_close_config_store(&cfg, st);
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

static int cmd_template(const struct cli_command *cmd, int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, OPT_FORCE, 0};
    const char *sub = NULL;
    struct cli_opts o = {0};
    int r = cli_parse_sub(cmd->name, cmd->usage, "'build'", argc, argv, allowed, &o, &sub);
    if (r)
        return r == 1 ? 0 : r;
    if (strcmp(sub, "build") != 0)
        return cli_usage_error(cmd->name, cmd->usage, "unknown subcommand '%s'", sub);
    if (o.nargs != 1)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "'template build' takes exactly one NAME");
    struct config cfg = {0};
    if ((r = cli_load_config(&o, &cfg)))
        return r;
    struct sandbox_config sc;
    struct err err = {0};
    if (sandbox_config_load(&cfg, &sc, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        config_release(&cfg);
        return EXIT_USAGE;
    }
    if (cli_ensure_dir(cfg.data_dir, 0700) < 0) {
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

/* The commands, as git's commands[]: a name, the function that runs it with argv[0] the
 * command's name, and its usage text (printed for -h and after a usage error). */
static const struct cli_command commands[] = {
    {"serve", cli_serve, cli_usage_serve},
    {"migrate", cmd_migrate, usage_migrate},
    {"node", cmd_node, usage_node},
    {"user", cli_user, cli_usage_user},
    {"token", cmd_token, usage_token},
    {"sandbox", cmd_sandbox, usage_sandbox},
    {"proxy-token", cmd_proxy_token, usage_proxy_token},
    {"links", cmd_links, usage_links},
    {"template", cmd_template, usage_template},
};

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
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("sandbox-mcp %s\n", SANDBOX_MCP_VERSION);
        return 0;
    }
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        fputs(usage_main, stdout);
        return 0;
    }
    for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].fn(&commands[i], argc - 1, argv + 1);
    fprintf(stderr, "sandbox-mcp: unknown command '%s'\n%s", name, usage_main);
    return EXIT_USAGE;
}

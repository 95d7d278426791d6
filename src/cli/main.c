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
    {"token", cli_token, cli_usage_token},
    {"sandbox", cmd_sandbox, usage_sandbox},
    {"proxy-token", cli_proxy_token, cli_usage_proxy_token},
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

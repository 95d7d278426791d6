/* The operator's maintenance commands: migrate, node list, sandbox list|stop-all,
 * links revoke and template build. Rule: each opens what it needs, does one thing and
 * closes it; none starts the server's loop. */
#include "cli/cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/util.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

const char cli_usage_migrate[] = "usage: sandbox-mcp migrate [--data-dir DIR] [--env-file FILE]\n"
                                 "\nCreates the database or applies pending migrations.\n";
const char cli_usage_node[] =
    "usage: sandbox-mcp node list [--data-dir DIR] [--env-file FILE]\n"
    "\nLists the nodes that share this store (DATABASE_URL): id, state (up, lost, stopped),\n"
    "the URL the others reach it at, and how long ago it last beat.\n";
int cli_migrate(const struct cli_command *cmd, int argc, char **argv)
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

int cli_node(const struct cli_command *cmd, int argc, char **argv)
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

const char cli_usage_sandbox[] =
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

int cli_sandbox(const struct cli_command *cmd, int argc, char **argv)
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

const char cli_usage_links[] =
    "usage: sandbox-mcp links revoke RUN_OR_SESSION_ID [--data-dir DIR] [--env-file FILE]\n"
    "\n"
    "Stops every web address given out so far for a run's (run_...) or a session's (ses_...)\n"
    "page from opening it. get_result and run_task hand out working addresses again.\n";

int cli_links(const struct cli_command *cmd, int argc, char **argv)
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

const char cli_usage_template[] =
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

int cli_template(const struct cli_command *cmd, int argc, char **argv)
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

/* sandbox-mcp: main() and the command table. Rule: this file only finds the command and hands
 * it argv; what a command does is in its family's file (serve.c, user.c, token.c, admin.c),
 * what they share in common.c. */
#include "cli/cli.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "version.h"

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
    "  user secret set|delete NAME SECRET [--repos P] [--agent] | user secret list NAME\n"
    "                        environment variables for NAME's runs (value from stdin)\n"
    "  user notify add NAME webhook|ntfy URL | user notify list NAME\n"
    "  user notify remove|test NAME ID\n"
    "                        where NAME is told that a run ended or opened a pull request\n"
    "  user repo set NAME OWNER/REPO [--setup-file PATH | --setup-stdin]\n"
    "    [--on-setup-failure start|stop] | user repo show|delete|list NAME ...\n"
    "                        NAME's setup script and setup-failure rule for a repository\n"
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
    "  cache list [--user NAME] | cache drop NAME OWNER/NAME\n"
    "                        the node's repository mirrors; drop NAME's of a repository\n"
    "  sandbox stop-all      stop every sandbox and unmount their disks (maintenance)\n"
    "  template build NAME [--force]\n"
    "                        build a sandbox template ('debian'; 'host' needs no build)\n"
    "\n"
    "common options:\n"
    "  --data-dir DIR        state directory (default ./var, or DATA_DIR)\n"
    "  --env-file FILE       KEY=VALUE configuration file (default .dev.vars if present)\n"
    "  -h, --help            help for a command\n"
    "  --version             print the version\n";

/* The commands, as git's commands[]: a name, the function that runs it with argv[0] the
 * command's name, and its usage text (printed for -h and after a usage error). */
static const struct cli_command commands[] = {
    {"serve", cli_serve, cli_usage_serve},
    {"migrate", cli_migrate, cli_usage_migrate},
    {"node", cli_node, cli_usage_node},
    {"user", cli_user, cli_usage_user},
    {"token", cli_token, cli_usage_token},
    {"sandbox", cli_sandbox, cli_usage_sandbox},
    {"proxy-token", cli_proxy_token, cli_usage_proxy_token},
    {"links", cli_links, cli_usage_links},
    {"template", cli_template, cli_usage_template},
    {"cache", cli_cache, cli_usage_cache},
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

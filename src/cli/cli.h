#pragma once
/* The command line's shared parts (src/cli/): the options every command parses, opening the
 * configuration and the store, and the secrets made on a first start. Only the commands use
 * them; nothing in the library includes this header. Commands print their errors on stderr
 * and return an exit status: 0, 1 (it failed) or EXIT_USAGE (it was asked wrongly). */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct config;
struct store;

#define EXIT_USAGE 2

/* What the options and arguments of one command line say; strings point into argv. */
struct cli_opts {
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
    const char *setup_file;       /* user repo set */
    const char *on_setup_failure; /* user repo set */
    const char *fix_ci;           /* user repo set: "on" or "off" */
    const char *steerers;         /* user repo set: GitHub logins, comma-separated */
    bool setup_stdin;             /* user repo set */
    const char *repos;            /* user secret set --repos */
    bool agent;                   /* user secret set --agent */
    bool fixtures;
    bool force;
    char **args; /* positional arguments after the command */
    int nargs;
};

/* The long options, by id; a command lists the ids it accepts, ended by 0. */
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
    OPT_TLS_KEY,
    OPT_SETUP_FILE,
    OPT_SETUP_STDIN,
    OPT_ON_SETUP_FAILURE,
    OPT_FIX_CI,
    OPT_STEERERS,
    OPT_REPOS,
    OPT_AGENT
};

/* One command of the table in cli/main.c: fn runs it with argv[0] its name and returns the exit
 * status; usage is its help text, which it prints for -h and after a usage error. */
struct cli_command {
    const char *name;
    int (*fn)(const struct cli_command *cmd, int argc, char **argv);
    const char *usage;
};

/* Print "sandbox-mcp CMD: MESSAGE" and the command's usage on stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parse the options of a command into o; allowed lists the option ids it accepts (0-ended).
 * Returns 0, 1 when help was printed (on stdout), or EXIT_USAGE after saying why. */
int cli_parse_opts(const char *cmd, const char *usage, int argc, char **argv, const int *allowed,
                   struct cli_opts *o);

/* Commands with subcommands ("user add", "token list"...): -h/--help before the subcommand
 * prints usage (returns 1); a missing subcommand is a usage error naming the expected ones
 * (EXIT_USAGE); otherwise *sub is the subcommand and the options after it are parsed into o
 * (cli_parse_opts' result). */
int cli_parse_sub(const char *cmd, const char *usage, const char *expected, int argc, char **argv,
                  const int *allowed, struct cli_opts *o, const char **sub);

/* "90", "30s", "10m", "2h" -> seconds; -1 when malformed. */
int64_t cli_parse_duration(const char *s);

/* Build the configuration: defaults < .dev.vars (or --env-file) < environment < flags, and set
 * the log level. 0, or an exit status after printing why (cfg released). Release cfg with
 * config_release. */
int cli_load_config(const struct cli_opts *o, struct config *cfg);

/* mkdir that accepts an existing directory: 0, or -1 after printing why. */
int cli_ensure_dir(const char *path, mode_t mode);

/* Open the store (DATABASE_URL, else SQLite in DATA_DIR, created 0700) as this node (NODE_ID, or
 * the id kept in DATA_DIR/node_id). 0, or 1 after printing why; close with store_close. */
int cli_open_store(const struct config *cfg, struct store **st);

/* The configuration and store of a command, opened together: 0, or an exit status (the error
 * already printed, nothing left open). Close with cli_close_config_store(). */
int cli_open_config_store(const struct cli_opts *o, struct config *cfg, struct store **st);
/* Close the store (NULL is fine) and release the configuration. */
void cli_close_config_store(struct config *cfg, struct store *st);

/* PROXY_JWT_SECRET: from the configuration, else the one kept in DATA_DIR/secrets, else a new
 * one written there (0600); set in cfg. 0, or -1 after printing why. */
int cli_ensure_jwt_secret(struct config *cfg);

/* On an empty store, create the first user (FIRST_USER) and a token, and print the welcome with
 * that token once on stdout. 0 (also when users exist), or -1 after printing why. */
int cli_first_start(struct config *cfg, struct store *st);

/* The commands (each one's entry in the table of cli/main.c, its arguments after the command's
 * name; returns the exit status). */

/* cli/serve.c: run the server until SIGTERM or SIGINT. */
extern const char cli_usage_serve[];
int cli_serve(const struct cli_command *cmd, int argc, char **argv);

/* cli/user.c: user add|list|passwd|login-link|network|credential|notify|repo. */
extern const char cli_usage_user[];
int cli_user(const struct cli_command *cmd, int argc, char **argv);
/* cli/user_repo.c: user repo set|show|delete|list, with cli_user's options parsed. */
int cli_user_repo(const struct cli_command *cmd, const struct cli_opts *o);

/* cli/token.c: token create|list|revoke, and proxy-token. */
extern const char cli_usage_token[];
extern const char cli_usage_proxy_token[];
int cli_token(const struct cli_command *cmd, int argc, char **argv);
int cli_proxy_token(const struct cli_command *cmd, int argc, char **argv);

/* cli/admin.c: migrate, node list, sandbox list|stop-all, links revoke, template build. */
extern const char cli_usage_migrate[];
extern const char cli_usage_node[];
extern const char cli_usage_sandbox[];
extern const char cli_usage_links[];
extern const char cli_usage_cache[];
extern const char cli_usage_template[];
int cli_migrate(const struct cli_command *cmd, int argc, char **argv);
int cli_node(const struct cli_command *cmd, int argc, char **argv);
int cli_sandbox(const struct cli_command *cmd, int argc, char **argv);
int cli_links(const struct cli_command *cmd, int argc, char **argv);
/* cache.c: the node's caches (cache list, cache drop). */
int cli_cache(const struct cli_command *cmd, int argc, char **argv);
int cli_template(const struct cli_command *cmd, int argc, char **argv);

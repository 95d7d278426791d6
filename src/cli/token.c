/* sandbox-mcp token ... and proxy-token: the API tokens and OAuth grants users' clients hold,
 * and the short-lived tokens of the LLM/git proxy. Rule: a token is printed once, on stdout,
 * and only its hash (or for proxy tokens its id) is kept. */
#include "cli/cli.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/config.h"
#include "base/ids.h"
#include "base/util.h"
#include "proxy/proxy.h"
#include "store/store.h"

const char cli_usage_token[] =
    "usage: sandbox-mcp token create --user NAME [--label TEXT] [--data-dir DIR]\n"
    "       sandbox-mcp token list [--user NAME] [--data-dir DIR]\n"
    "       sandbox-mcp token revoke ID [--data-dir DIR]\n"
    "\n"
    "The list shows API tokens and the apps connected through OAuth (ids grt_...); revoking a\n"
    "grant disconnects the app and ends its tokens.\n";

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

/* The token subcommands, each run with its arguments checked and the store open: 0, or -1 with
 * err set. */
static int token_create(struct store *st, const struct cli_opts *o, struct err *err)
{
    struct store_user u;
    char token[STORE_TOKEN_LEN + 1];
    struct store_token t;
    if (store_user_find(st, o->user, &u, err) < 0 ||
        store_token_create(st, u.id, o->label, token, &t, err) < 0)
        return -1;
    printf("%s\n", token);
    fprintf(stderr, "created token %s for user %s (shown once)\n", t.id, u.name);
    return 0;
}

static int token_list(struct store *st, const struct cli_opts *o, struct err *err)
{
    struct store_user u;
    printf("%-30s %-16s %-14s %-8s %-24s %-24s %s\n", "ID", "USER", "PREFIX", "STATE", "CREATED",
           "LAST USED", "LABEL");
    if (o->user && store_user_find(st, o->user, &u, err) < 0)
        return -1;
    if (store_token_list(st, o->user, print_user_token, NULL, err) < 0 ||
        store_oauth_grant_list(st, o->user, print_grant, NULL, err) < 0)
        return -1;
    return 0;
}

/* An API token by its id, or an app's OAuth grant (grt_...). */
static int token_revoke(struct store *st, const struct cli_opts *o, struct err *err)
{
    const char *id = o->args[0];
    if (strncmp(id, "grt_", 4) == 0) {
        if (store_oauth_grant_revoke(st, id, NULL, err) < 0)
            return -1;
        printf("revoked OAuth grant %s (the app's tokens stop working)\n", id);
        return 0;
    }
    if (store_token_revoke(st, id, err) < 0)
        return -1;
    printf("revoked token %s\n", id);
    return 0;
}

static const struct token_sub {
    const char *name;
    int (*fn)(struct store *st, const struct cli_opts *o, struct err *err);
} token_subs[] = {
    {"create", token_create},
    {"list", token_list},
    {"revoke", token_revoke},
};

int cli_token(const struct cli_command *cmd, int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, OPT_USER, OPT_LABEL, 0};
    const char *sub = NULL;
    struct cli_opts o = {0};
    int r = cli_parse_sub(cmd->name, cmd->usage, "'create', 'list' or 'revoke'", argc, argv,
                          allowed, &o, &sub);
    if (r)
        return r == 1 ? 0 : r;
    const struct token_sub *ts = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(token_subs) && !ts; i++)
        if (strcmp(sub, token_subs[i].name) == 0)
            ts = &token_subs[i];
    if (!ts)
        return cli_usage_error(cmd->name, cmd->usage, "unknown subcommand '%s'", sub);
    bool create = ts->fn == token_create, revoke = ts->fn == token_revoke;
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
    if (ts->fn(st, &o, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        r = 1;
    }
    cli_close_config_store(&cfg, st);
    return r;
}

const char cli_usage_proxy_token[] =
    "usage: sandbox-mcp proxy-token --user NAME --services LIST [--ttl DURATION]\n"
    "                               [--sandbox ID] [--data-dir DIR]\n"
    "       sandbox-mcp proxy-token revoke JTI [--data-dir DIR]\n"
    "\n"
    "Mints a token for /proxy/<service>/... on the main listener, for the services in LIST\n"
    "(comma-separated, e.g. anthropic,github), valid for DURATION (30s, 10m, 2h; default 10m,\n"
    "at most 24h). With --sandbox the token works only on that sandbox's own listener,\n"
    "http://127.0.0.1:8788/proxy/... inside it. The token is printed on stdout; its id (JTI)\n"
    "on stderr.\n";

int cli_proxy_token(const struct cli_command *cmd, int argc, char **argv)
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

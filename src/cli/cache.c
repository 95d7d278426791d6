/* The operator's view of the node's caches: cache list [--user NAME] and cache drop NAME
 * OWNER/NAME, over the repository mirrors (DATA_DIR/cache) and the environment snapshots
 * (DATA_DIR/envs, their rows in the store). Rule: the caches' own accounting does the work
 * (runs/envcache.h; the snapshots' rows, whose directories the server removes once no sandbox
 * starts on them); the store is opened for user names and the snapshots' rows. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/config.h"
#include "base/util.h"
#include "runs/envcache.h"
#include "store/store.h"

const char cli_usage_cache[] =
    "usage: sandbox-mcp cache list [--user NAME] [--data-dir DIR] [--env-file FILE]\n"
    "       sandbox-mcp cache drop NAME OWNER/NAME [--data-dir DIR] [--env-file FILE]\n"
    "\n"
    "The node's caches (ENV_CACHE_MB): the repository mirrors runs fetch into, and the\n"
    "environment snapshots new sessions start on. 'list' shows each entry, least recently used\n"
    "first: its kind (mirrors, snapshot), whose it is (a user, or 'shared' for a repository\n"
    "fetched without a credential, with ENV_CACHE_SHARE_PUBLIC=1), its size, when it was last\n"
    "used and what it holds. 'drop' removes NAME's entries of the repository OWNER/NAME (its URL\n"
    "or path ends with /OWNER/NAME or /OWNER/NAME.git): a mirror at once, waiting for a run that\n"
    "uses it to let it go; a snapshot is no longer used, and the server removes it once no\n"
    "sandbox starts on it. The next run fetches and sets up afresh.\n";

struct names {
    struct store_user *v;
    size_t n;
};

static void add_name(const struct store_user *u, void *ctx)
{
    struct names *ns = ctx;
    ns->v = xrealloc(ns->v, (ns->n + 1) * sizeof(*ns->v));
    ns->v[ns->n++] = *u;
}

static const char *name_of(const struct names *ns, const char *owner)
{
    if (strcmp(owner, ENVCACHE_PUBLIC) == 0)
        return "shared";
    for (size_t i = 0; i < ns->n; i++)
        if (strcmp(ns->v[i].id, owner) == 0)
            return ns->v[i].name;
    return owner;
}

static void print_entry(const struct envcache_info *i, void *ctx)
{
    const struct names *ns = ctx;
    char when[32] = "-";
    if (i->used_ms > 0) {
        time_t t = (time_t)(i->used_ms / 1000);
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    }
    printf("%-8s %-20s %10.1f MiB  %-20s %s%s\n", i->kind, name_of(ns, i->owner),
           (double)i->bytes / (1 << 20), when, i->label[0] ? i->label : "-",
           i->busy ? " (in use)" : "");
}

struct snapshots {
    const struct names *ns;
    const char *repo; /* drop: these, of user; list: NULL */
    const char *user;
    struct store *st;
    size_t n;
};

static bool names_repo(const char *url, const char *repo);

static void on_snapshot(const struct store_env *e, void *ctx)
{
    struct snapshots *s = ctx;
    if (s->repo) {
        struct err err = {0};
        if (!e->dropped && names_repo(e->repository, s->repo) &&
            (strcmp(e->user_id, s->user) == 0 || strcmp(e->scope, s->user) == 0) &&
            store_env_drop(s->st, e->id, &err) == 0)
            s->n++;
        return;
    }
    if (e->dropped)
        return;
    char when[32] = "-";
    time_t t = (time_t)(e->last_used_at / 1000);
    struct tm tm;
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    printf("%-8s %-20s %10.1f MiB  %-20s %s\n", "snapshot",
           e->scope[0] ? name_of(s->ns, e->scope) : "shared", (double)e->bytes / (1 << 20), when,
           e->repository);
}

/* Whether url names the repository owner/name ("owner/name"): it ends with /owner/name, with
 * .git or a slash after it or not. */
static bool names_repo(const char *url, const char *repo)
{
    size_t n = strlen(url), k = strlen(repo);
    while (n > 0 && url[n - 1] == '/')
        n--;
    if (n >= 4 && strncmp(url + n - 4, ".git", 4) == 0)
        n -= 4;
    return n > k && url[n - k - 1] == '/' && strncmp(url + n - k, repo, k) == 0;
}

struct drop {
    const char *repo;
    struct envcache_info *v;
    size_t n;
};

static void pick(const struct envcache_info *i, void *ctx)
{
    struct drop *d = ctx;
    if (!names_repo(i->label, d->repo))
        return;
    d->v = xrealloc(d->v, (d->n + 1) * sizeof(*d->v));
    d->v[d->n++] = *i;
}

int cli_cache(const struct cli_command *cmd, int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR, OPT_ENV_FILE, OPT_USER, 0};
    const char *sub = NULL;
    struct cli_opts o = {0};
    int r = cli_parse_sub(cmd->name, cmd->usage, "'list' or 'drop'", argc, argv, allowed, &o, &sub);
    if (r)
        return r == 1 ? 0 : r;
    bool list = strcmp(sub, "list") == 0;
    if (!list && strcmp(sub, "drop") != 0)
        return cli_usage_error(cmd->name, cmd->usage, "unknown subcommand '%s'", sub);
    if (list && o.nargs != 0)
        return cli_usage_error(cmd->name, cmd->usage, "unexpected argument '%s'", o.args[0]);
    if (!list && (o.nargs != 2 || o.user))
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "'cache drop' takes NAME and OWNER/NAME");
    const char *repo = list ? NULL : o.args[1];
    if (repo && (!strchr(repo, '/') || repo[0] == '/' || strchr(repo, '/') != strrchr(repo, '/') ||
                 repo[strlen(repo) - 1] == '/'))
        return cli_usage_error(cmd->name, cmd->usage, "repository '%s' is not OWNER/NAME", repo);
    struct config cfg = {0};
    struct store *st = NULL;
    if ((r = cli_open_config_store(&o, &cfg, &st)))
        return r;
    struct err err = {0};
    struct envcache_config cc;
    struct names ns = {0};
    const char *who = list ? o.user : o.args[0];
    const char *owner = NULL;
    struct store_user u = {0};
    if (envcache_config_load(&cfg, cfg.data_dir, &cc, &err) < 0 ||
        store_user_list(st, add_name, &ns, &err) < 0 ||
        (who && store_user_find(st, who, &u, &err) < 0)) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        r = 1;
        goto out;
    }
    owner = who ? u.id : NULL;
    struct snapshots snaps = {.ns = &ns, .repo = list ? NULL : repo, .user = owner, .st = st};
    struct store_env_filter f = {.user_id = owner};
    if (list) {
        envcache_list(&cc, owner, print_entry, &ns, &err);
        store_env_list(st, &f, on_snapshot, &snaps, &err);
        goto out;
    }
    struct drop d = {.repo = repo};
    envcache_list(&cc, owner, pick, &d, &err);
    size_t dropped = 0;
    for (size_t i = 0; i < d.n; i++) {
        err = (struct err){0};
        if (envcache_drop(&cc, d.v[i].kind, d.v[i].owner, d.v[i].key, &err) == 0)
            dropped++;
    }
    free(d.v);
    store_env_list(st, &f, on_snapshot, &snaps, &err);
    dropped += snaps.n;
    if (dropped == 0) {
        fprintf(stderr, "sandbox-mcp: user '%s' has no cached entries of '%s'\n", who, repo);
        r = 1;
    } else {
        printf("dropped %zu cached %s of '%s' for user '%s'\n", dropped,
               dropped == 1 ? "entry" : "entries", repo, who);
    }
out:
    free(ns.v);
    cli_close_config_store(&cfg, st);
    return r;
}

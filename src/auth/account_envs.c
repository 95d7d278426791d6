/* The account page's card of cached environments (auth/account.c draws the page and answers its
 * posts): the signed-in user's environment snapshots on this node (runs/envs.c), by repository,
 * with their size and last use, and a button to drop each: the next new session of that
 * repository sets up afresh. Rule: a user sees and drops only snapshots built by them or serving
 * them. */
#include "auth/auth_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/util.h"

struct env_rows {
    struct buf *b;
    const char *csrf;
    int n;
};

static void env_row(const struct store_env *e, void *ctx)
{
    struct env_rows *l = ctx;
    struct buf *b = l->b;
    if (e->dropped)
        return;
    l->n++;
    char when[32];
    time_t t = (time_t)(e->last_used_at / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", &tm);
    buf_puts(b, "<li class=\"item\"><div><strong><code>");
    html_text(b, e->repository);
    buf_printf(b, "</code></strong><br><span class=\"muted small\">%.1f MiB · %lld files · used %s",
               (double)e->bytes / 1048576.0, (long long)e->files, when);
    buf_puts(b, e->scope[0] ? "" : " · shared");
    buf_puts(b, "</span></div><form method=\"post\" action=\"/account/env/drop\">\n");
    html_hidden(b, "csrf", l->csrf);
    html_hidden(b, "id", e->id);
    buf_puts(b, "<button type=\"submit\">Drop</button></form></li>\n");
}

void account_envs_card(struct auth *a, struct buf *b, const char *csrf,
                       const struct store_user *user)
{
    struct env_rows l = {b, csrf, 0};
    struct err err = {0};
    struct store_env_filter f = {.user_id = user->id};
    buf_puts(b, "<section class=\"card\" id=\"environments\">\n<h2>Cached environments</h2>\n"
                "<ul class=\"list\">\n");
    store_env_list(a->store, &f, env_row, &l, &err);
    if (!l.n)
        buf_puts(b, "<li class=\"muted\">No environment is cached.</li>\n");
    buf_puts(b, "</ul>\n<p class=\"muted small\">What a repository's setup installed, kept so "
                "that a new session of it starts there and runs only its maintenance script. "
                "Drop one to have the next session set up afresh.</p>\n</section>\n");
}

struct env_pick {
    const char *id;
    bool found;
};

static void env_pick(const struct store_env *e, void *ctx)
{
    struct env_pick *p = ctx;
    p->found = p->found || (!e->dropped && strcmp(e->id, p->id) == 0);
}

int account_env_drop(struct auth *a, const struct store_user *user, const char *id, struct err *err)
{
    struct env_pick p = {id ? id : "", false};
    struct store_env_filter f = {.user_id = user->id};
    int r = store_env_list(a->store, &f, env_pick, &p, err);
    if (r < 0)
        return r;
    if (!p.found)
        return err_set(err, -ENOENT, "There is no such cached environment.");
    return store_env_drop(a->store, id, err);
}

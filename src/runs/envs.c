/* Environments: a session starts where the repository's last setup left off.
 *
 * After a successful setup in a fresh clone, the sandbox's writable layer and workspace are
 * copied out as an environment snapshot (sandbox_snapshot), keyed by who it serves (the user, or
 * nobody in particular for a public repository when ENV_CACHE_SHARE_PUBLIC allows), the
 * repository, the template and the run's own setup script; its fingerprint (the lock files and
 * setup files of the checkout it was built from) is kept beside it. A new session of the same
 * key starts its sandbox on the snapshot (below its own layer and workspace: no copy), unpacks
 * the run's clone over the snapshot's checkout (the files git tracked there removed first, what
 * setup installed kept), and compares fingerprints: the same, and only the repository's
 * .sandbox-mcp/maintenance.sh runs; different (a lock file or a setup file changed), and the
 * snapshot is dropped and the full setup runs, on top of what the snapshot had installed.
 *
 * The cache is bounded (ENV_CACHE_MB for the node, ENV_CACHE_USER_MB for one user's: least
 * recently used dropped first) and ages out (ENV_CACHE_MAX_AGE_HOURS: an older snapshot is
 * dropped, and the next fresh setup builds a new one). A dropped snapshot's directory goes once
 * no sandbox starts on it (envs_sweep, from the engine's periodic look).
 *
 * The rule of this file: a snapshot never stops a run. Whatever fails here (a copy over the
 * budget, a snapshot that cannot be mounted) is told in the run's timeline and the run goes on
 * as it would have without one. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "runs/envcache.h"
#include "store/store.h"

#define ENV_FILES_MAX 2000000 /* files in one snapshot */
#define FINGERPRINT_MAX 4000  /* bytes of a fingerprint (store_env.fingerprint) */

/* The lock and setup files a snapshot depends on, "<blob> <path>" a line, in a fixed order. */
static const char fingerprint_script[] =
    "for f in package-lock.json npm-shrinkwrap.json pnpm-lock.yaml yarn.lock requirements*.txt "
    "poetry.lock uv.lock Pipfile.lock go.sum Cargo.lock Gemfile.lock .sandbox-mcp/setup.sh "
    ".sandbox-mcp/maintenance.sh .devcontainer/devcontainer.json .devcontainer.json; do\n"
    "  if [ -f \"$f\" ] && [ ! -L \"$f\" ]; then\n"
    "    printf '%s %s\\n' \"$(git hash-object -- \"$f\")\" \"$f\"\n"
    "  fi\n"
    "done\n";

bool envs_enabled(const struct runs *e)
{
    return e->cfg.env_cache_bytes > 0;
}

/* The key of a snapshot: who it serves, the repository, the template, the run's own setup. */
static void key_of(const char *scope, const char *repository, const char *tree, const char *setup,
                   char key[80])
{
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    const char *parts[] = {scope, repository, tree, setup};
    for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
        crypto_hash_sha256_update(&h, (const unsigned char *)parts[i], strlen(parts[i]) + 1);
    unsigned char d[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&h, d);
    sodium_bin2hex(key, 80, d, 24);
}

/* r's key (and r->env_scope). */
static void env_key(struct run *r, char key[80])
{
    char *cred = runs_github_credential(r->e, r->user_id, r->github_repo);
    /* never shared when the user's secrets were in the setup's environment: it may have
     * written them into what the snapshot keeps */
    bool shared = r->e->cfg.env_share_public && !cred && !r->ref.local && r->nsecrets == 0;
    runs_wipe_free(cred);
    snprintf(r->env_scope, sizeof(r->env_scope), "%s", shared ? "" : r->user_id);
    key_of(r->env_scope, r->repository, sandbox_template_tree(r->e->mgr),
           r->setup_arg ? r->setup_arg : "", key);
}

/* Whether env, past its age, is to be rebuilt (and serves meanwhile): used since it was built,
 * not past twice its age (a rebuild that never gets a slot does not keep it for ever), and
 * built by the repository's own setup on this template (a run_task `setup` argument is not
 * kept, so it cannot be replayed). */
static bool rebuild_wanted(struct runs *e, const struct store_env *env, int64_t now)
{
    int64_t age = now - env->created_at, max = (int64_t)e->cfg.env_max_age_ms;
    if (env->dropped || age <= max || age > 2 * max || env->uses <= 0)
        return false;
    char key[80];
    key_of(env->scope, env->repository, sandbox_template_tree(e->mgr), "", key);
    return strcmp(key, env->key) == 0;
}

void envs_choose(struct run *r, struct sandbox_acquire_opts *o)
{
    struct runs *e = r->e;
    if (!envs_enabled(e) || !r->repository)
        return;
    struct store_sandbox sb;
    struct err err = {0};
    if (store_sandbox_find(e->st, r->user_id, r->session_id, &sb, &err) != -ENOENT)
        return;        /* the session's sandbox is there already, with its own workspace */
    r->env_new = true; /* nothing but this run's clone and setup in it: a snapshot may be taken */
    env_key(r, r->env_key);
    if (r->rebuild[0])
        return; /* a rebuild sets up afresh on the template */
    struct store_env env;
    if (store_env_find(e->st, r->env_key, &env, &err) < 0)
        return;
    int64_t now = time_now_ms();
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/envs/%s", e->data_dir, env.id);
    bool aged = now - env.created_at > (int64_t)e->cfg.env_max_age_ms;
    if ((aged && !rebuild_wanted(e, &env, now)) || access(path, F_OK) < 0) {
        store_env_drop(e->st, env.id, &err); /* aged out, or lost: the next setup builds anew */
        return;
    }
    if (aged) /* it serves until its rebuild replaces it: the rebuild is looked at now */
        e->next_env_sweep = 0;
    store_env_touch(e->st, env.id, now, &err);
    snprintf(r->env_id, sizeof(r->env_id), "%s", env.id);
    free(r->env_chosen_fp);
    r->env_chosen_fp = xstrdup(env.fingerprint);
    snprintf(r->env_chosen_base, sizeof(r->env_chosen_base), "%s", env.base);
    r->env_chosen_bytes = env.bytes;
    r->env_first = true;
    o->env = r->env_id;
    log_info("run starts on a snapshot run=%s env=%s", r->id, env.id);
    /* the next new session on it finds a sandbox started on it, its agent ready */
    char dir[512];
    snprintf(dir, sizeof(dir), "/workspace/%s", r->ref.name);
    runs_pool_keep_env(e, env.id, dir);
}

bool envs_start_failed(struct run *r, const struct err *err)
{
    if (!r->env_first || err->code == -EBUSY)
        return false;
    struct err e2 = {0};
    log_warn("run snapshot did not start run=%s env=%s err=\"%s\"", r->id, r->env_id, err->msg);
    run_server_event(
        r, "env_note",
        "the environment snapshot could not be used: it is dropped, and the setup runs "
        "afresh",
        json_pack("{s:s, s:s}", "snapshot", r->env_id, "error", err->msg));
    store_env_drop(r->e->st, r->env_id, &e2);
    r->env_id[0] = '\0';
    r->env_first = false;
    /* the session's new sandbox starts over on the template alone */
    if (sandbox_manager_discard(r->e->mgr, r->user_id, r->session_id, &e2) < 0)
        return false;
    struct sandbox_acquire_opts o = {
        .user_id = r->user_id, .session_id = r->session_id, .create = true};
    run_acquire(r, &o, run_on_sandbox);
    return true;
}

/* --- after the checkout: the fingerprint, and what runs as setup --- */

static void on_fingerprint(void *ctx, struct sandbox_exec_result *res, const struct err *err)
{
    struct run *r = ctx;
    r->ex = NULL;
    if (r->phase == PH_FINISHING) {
        r->phase = PH_PREPARE;
        run_finish(r);
        return;
    }
    free(r->env_fp);
    r->env_fp = NULL;
    if (!err && res->exit_code == 0 && res->out_len <= FINGERPRINT_MAX - 100) {
        /* and the user's own setup script for the repository, when there is one */
        struct store_repo_setting rs = {0};
        char slug[STORE_REPO_NAME_MAX + 1], hex[2 * crypto_hash_sha256_BYTES + 1] = "";
        struct err serr = {0};
        if (runs_repo_slug(r->repository, slug, sizeof(slug)) &&
            store_repo_setting_get(r->e->st, r->user_id, slug, &rs, &serr) == 0 && rs.setup) {
            unsigned char d[crypto_hash_sha256_BYTES];
            crypto_hash_sha256(d, (const unsigned char *)rs.setup, strlen(rs.setup));
            sodium_bin2hex(hex, sizeof(hex), d, sizeof(d));
        }
        store_repo_setting_release(&rs);
        r->env_fp = hex[0] ? xasprintf("%s%s user-setup\n", res->out, hex) : xstrdup(res->out);
    }
    if (!r->env_first) {
        run_setup(r);
        return;
    }
    /* against the snapshot the sandbox started on, even when its rebuild has replaced it since */
    struct err serr = {0};
    bool same = r->env_fp && r->env_chosen_fp && strcmp(r->env_chosen_fp, r->env_fp) == 0;
    if (!same) {
        /* a lock file or a setup file changed since it was built: it serves no one any more */
        store_env_drop(r->e->st, r->env_id, &serr);
        run_server_event(
            r, "env_note",
            "the environment snapshot is out of date (its lock or setup files changed): "
            "the full setup runs, and a later session builds a new snapshot",
            json_pack("{s:s}", "snapshot", r->env_id));
        r->env_first = false;
        run_setup(r);
        return;
    }
    run_server_event(r, "env_restored", "started from the environment snapshot",
                     json_pack("{s:s, s:s, s:I}", "snapshot", r->env_id, "base", r->env_chosen_base,
                               "bytes", (json_int_t)r->env_chosen_bytes));
    run_maintenance(r);
}

void envs_before_setup(struct run *r)
{
    /* the workspace is there: the agent's boot goes beside the setup (not before the clone,
     * which fails often enough, on a wrong branch or a private repository, to waste a boot) */
    if (!r->rebuild[0])
        run_start_agent_ahead(r);
    if (!envs_enabled(r->e) || !r->repository || !r->fresh) {
        run_setup(r);
        return;
    }
    struct sandbox_exec_opts o = {.command = fingerprint_script,
                                  .cwd = r->workdir,
                                  .timeout_ms = 60000,
                                  .output_bytes = FINGERPRINT_MAX + 1};
    const char *env[] = {"GIT_CONFIG_NOSYSTEM=1", NULL};
    o.env = env;
    struct err err = {0};
    r->ex = sandbox_exec_start(r->sbx, &o, NULL, on_fingerprint, r, &err);
    if (!r->ex)
        on_fingerprint(r, NULL, &err);
}

/* --- the cache's bounds --- */

struct usage {
    const char *user;
    int64_t all, user_bytes;
    struct store_env lru, lru_user; /* the least recently used of all, and of the user's */
    bool have_lru, have_lru_user;
};

static void count(const struct store_env *env, void *ctx)
{
    struct usage *u = ctx;
    u->all += env->bytes;
    bool mine = strcmp(env->user_id, u->user) == 0;
    if (mine)
        u->user_bytes += env->bytes;
    if (env->dropped)
        return;
    if (!u->have_lru) {
        u->lru = *env;
        u->have_lru = true;
    }
    if (mine && !u->have_lru_user) {
        u->lru_user = *env;
        u->have_lru_user = true;
    }
}

struct owned {
    const char *owner;
    bool shared; /* owner is the shared one's */
    uint64_t all, mine;
};

static void count_snapshot(const struct store_env *env, void *ctx)
{
    struct owned *o = ctx;
    o->all += (uint64_t)env->bytes; /* dropped ones too: on disk until removed */
    if (o->shared ? env->scope[0] == '\0' : strcmp(env->user_id, o->owner) == 0)
        o->mine += (uint64_t)env->bytes;
}

void envs_usage(struct runs *e, const char *owner, uint64_t *all, uint64_t *mine)
{
    struct owned o = {.owner = owner, .shared = strcmp(owner, ENVCACHE_PUBLIC) == 0};
    struct err err = {0};
    store_env_list(e->st, NULL, count_snapshot, &o, &err);
    *all = o.all;
    *mine = o.mine;
}

static void count_mirror(const struct envcache_info *i, void *ctx)
{
    struct owned *o = ctx;
    o->all += i->bytes;
    if (strcmp(i->owner, o->owner) == 0)
        o->mine += i->bytes;
}

/* The bytes a new snapshot of user's may take beside the others under the caps, after the
 * dropped ones no sandbox starts on are removed; *victim (when not NULL) gets the snapshot to
 * drop for more room: the user's least recently used when the user is at their cap, else the
 * node's. Returns the room, or 0 on a store error. */
static uint64_t room_for(struct runs *e, const char *user, struct store_env *victim, bool *found)
{
    uint64_t cap = e->cfg.env_cache_bytes, user_cap = e->cfg.env_user_bytes;
    struct usage u = {.user = user};
    struct err err = {0};
    envs_sweep(e);
    *found = false;
    if (store_env_list(e->st, NULL, count, &u, &err) < 0)
        return 0;
    /* the repository mirrors count against the same budget (envcache.c keeps theirs) */
    struct owned m = {.owner = user};
    envcache_list(&e->cfg.cache, NULL, count_mirror, &m, &err);
    u.all += (int64_t)m.all;
    u.user_bytes += (int64_t)m.mine;
    uint64_t room = (uint64_t)u.all < cap ? cap - (uint64_t)u.all : 0;
    uint64_t user_room = (uint64_t)u.user_bytes < user_cap ? user_cap - (uint64_t)u.user_bytes : 0;
    bool user_bound = user_room <= room;
    if (user_bound)
        room = user_room;
    const struct store_env *v = user_bound && u.have_lru_user ? &u.lru_user
                                : u.have_lru                  ? &u.lru
                                                              : NULL;
    if (v) {
        *victim = *v;
        *found = true;
    }
    return room;
}

/* Drop one snapshot for room (room_for's victim): false when there is none to drop. */
static bool evict_one(struct runs *e, const char *user)
{
    struct store_env victim;
    bool found;
    room_for(e, user, &victim, &found);
    if (!found)
        return false;
    struct err err = {0};
    log_info("environment snapshot evicted env=%s bytes=%lld", victim.id, (long long)victim.bytes);
    store_env_drop(e->st, victim.id, &err);
    envs_sweep(e);
    return true;
}

/* --- taking a snapshot after a successful setup --- */

struct taking {
    struct run *r;
    struct store_env row;
    int64_t t0;
    int tries;
};

#define TAKE_TRIES 16 /* copies, each after one more snapshot was evicted for room */

/* What a snapshot's root layer leaves out: the agent's own state (its conversations, its
 * configuration), which belongs to the session that made it, not to the environment. */
static const char *const root_skip[] = {"root/.local/share/opencode", "root/.local/state/opencode",
                                        "root/.cache/opencode", "root/.config/opencode", NULL};

static void on_snapshot(void *ctx, const struct layer_stats *stats, const struct err *err);

/* Copy r's sandbox out within the room the caps leave (evicting one snapshot first when there
 * is none): 0, or a negative errno with err (on_snapshot is then not called). */
static int take(struct taking *t, struct err *err)
{
    struct runs *e = t->r->e;
    struct store_env victim;
    bool found;
    uint64_t room = room_for(e, t->r->user_id, &victim, &found);
    if (room == 0 && evict_one(e, t->r->user_id))
        room = room_for(e, t->r->user_id, &victim, &found);
    if (room == 0)
        return err_set(err, -E2BIG, "the environment cache has no room for it");
    struct layer_limits lim = {.max_bytes = room, .max_entries = ENV_FILES_MAX, .skip = root_skip};
    t->tries++;
    return sandbox_snapshot(t->r->sbx, t->row.id, &lim, on_snapshot, t, err);
}

static void on_snapshot(void *ctx, const struct layer_stats *stats, const struct err *err)
{
    struct taking *t = ctx;
    struct run *r = t->r;
    struct runs *e = r->e;
    struct err again = {0};
    if (err && err->code == -E2BIG && strstr(err->msg, "MiB") && t->tries < TAKE_TRIES &&
        r->phase != PH_FINISHING && evict_one(e, r->user_id) && take(t, &again) == 0)
        return; /* too large for the room there was: again with one snapshot fewer */
    r->snapshotting = false;
    int64_t ms = time_mono_ms() - t->t0;
    if (err) {
        char msg[640];
        snprintf(msg, sizeof(msg), "the environment was not saved: %s", err->msg);
        run_server_event(r, "env_note", msg, json_pack("{s:s}", "error", err->msg));
        log_warn("run snapshot failed run=%s err=\"%s\"", r->id, err->msg);
        if (r->rebuild[0])
            snprintf(r->fail, sizeof(r->fail), "%s", msg);
    } else {
        t->row.bytes = (int64_t)stats->bytes;
        t->row.files = (int64_t)stats->entries;
        t->row.created_at = t->row.last_used_at = time_now_ms();
        struct err serr = {0};
        struct store_env old;
        /* the one it replaces (a different fingerprint, or aged out) serves no one now */
        while (store_env_find(e->st, t->row.key, &old, &serr) == 0 &&
               store_env_drop(e->st, old.id, &serr) == 0)
            ;
        if (store_env_insert(e->st, &t->row, &serr) < 0) {
            log_error("run snapshot not recorded run=%s err=\"%s\"", r->id, serr.msg);
            if (r->rebuild[0])
                snprintf(r->fail, sizeof(r->fail), "the new snapshot was not recorded");
        } else {
            if (r->rebuild[0]) { /* the one it replaces, under another key now (a new scope) */
                store_env_drop(e->st, r->rebuild, &serr);
                r->rebuilt = true;
            }
            char msg[160];
            snprintf(msg, sizeof(msg), "environment saved: %.1f MiB, %lld files, in %.1f s",
                     (double)stats->bytes / 1048576.0, (long long)stats->entries,
                     (double)ms / 1000.0);
            run_server_event(r, "env_saved", msg,
                             json_pack("{s:s, s:I, s:I, s:I}", "snapshot", t->row.id, "bytes",
                                       (json_int_t)stats->bytes, "files",
                                       (json_int_t)stats->entries, "duration_ms", (json_int_t)ms));
            log_info("run snapshot taken run=%s env=%s bytes=%llu files=%llu ms=%lld", r->id,
                     t->row.id, (unsigned long long)stats->bytes,
                     (unsigned long long)stats->entries, (long long)ms);
            runs_pool_keep_env(e, t->row.id, r->workdir);
        }
    }
    free(t);
    if (r->phase == PH_FINISHING) { /* cancelled or timed out meanwhile */
        r->phase = PH_PREPARE;
        run_finish(r);
        return;
    }
    run_setup_over(r);
}

void envs_after_setup(struct run *r, bool ok)
{
    struct runs *e = r->e;
    if (!ok || !envs_enabled(e) || !r->env_new || !r->fresh || r->env_id[0] || !r->env_fp) {
        if (r->rebuild[0] && !r->fail[0])
            snprintf(r->fail, sizeof(r->fail), "%s",
                     !ok ? "the setup did not succeed"
                         : "the repository's lock and setup files could not be read");
        run_setup_over(r);
        return;
    }
    env_key(r, r->env_key); /* again: the secrets the setup saw decide whether it is shared */
    struct err err = {0};
    struct taking *t = xcalloc(1, sizeof(*t));
    t->r = r;
    t->t0 = time_mono_ms();
    char rnd[64];
    id_new("env", rnd);
    for (char *p = rnd; *p; p++)
        *p = *p == '_' ? '-' : (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    snprintf(t->row.id, sizeof(t->row.id), "%.40s", rnd);
    snprintf(t->row.key, sizeof(t->row.key), "%s", r->env_key);
    snprintf(t->row.scope, sizeof(t->row.scope), "%s", r->env_scope);
    snprintf(t->row.user_id, sizeof(t->row.user_id), "%s", r->user_id);
    snprintf(t->row.repository, sizeof(t->row.repository), "%s", r->repository);
    snprintf(t->row.template_name, sizeof(t->row.template_name), "%s",
             sandbox_template_name(e->mgr));
    snprintf(t->row.fingerprint, sizeof(t->row.fingerprint), "%s", r->env_fp);
    snprintf(t->row.base, sizeof(t->row.base), "%s", r->base);
    /* the run's hold keeps the sandbox; run_finish waits for the copy */
    run_set_phase(r, "preparing", "saving the environment");
    r->snapshotting = true;
    if (take(t, &err) == 0)
        return;
    struct layer_stats none = {0};
    on_snapshot(t, &none, &err);
}

/* --- removing what is dropped --- */

struct sweep {
    struct runs *e;
    int64_t now;
};

static void sweep_one(const struct store_env *env, void *ctx)
{
    struct sweep *s = ctx;
    struct err err = {0};
    if (!env->dropped && s->now - env->created_at > (int64_t)s->e->cfg.env_max_age_ms &&
        !rebuild_wanted(s->e, env, s->now)) {
        store_env_drop(s->e->st, env->id, &err);
        log_info("environment snapshot expired env=%s", env->id);
    } else if (!env->dropped) {
        return;
    }
    runs_pool_keep_env(s->e, env->id, NULL); /* its pooled sandbox goes, then the snapshot */
    if (sandbox_env_remove(s->e->mgr, env->id, &err) < 0)
        return; /* a sandbox starts on it: later */
    store_env_delete(s->e->st, env->id, &err);
    log_info("environment snapshot removed env=%s bytes=%lld", env->id, (long long)env->bytes);
}

void envs_sweep(struct runs *e)
{
    struct sweep s = {.e = e, .now = time_now_ms()};
    struct err err = {0};
    store_env_list(e->st, NULL, sweep_one, &s, &err);
}

/* --- rebuilding what aged out --- */

struct due {
    struct runs *e;
    int64_t now;
    struct store_env pick; /* the most recently used of those due */
    bool found;
};

static void find_due(const struct store_env *env, void *ctx)
{
    struct due *d = ctx;
    if (rebuild_wanted(d->e, env, d->now)) {
        d->pick = *env;
        d->found = true;
    }
}

void envs_rebuild_due(struct runs *e)
{
    if (!envs_enabled(e))
        return;
    for (struct run *r = e->runs; r; r = r->next)
        if (r->rebuild[0])
            return; /* one at a time on a node */
    struct due *d = xcalloc(1, sizeof(*d));
    d->e = e;
    d->now = time_now_ms();
    struct err err = {0};
    if (store_env_list(e->st, NULL, find_due, d, &err) < 0 || !d->found) {
        free(d);
        return;
    }
    const struct store_env *env = &d->pick;
    /* a session and a run of the snapshot's owner, on this node, as run_task would make them:
     * the same clone (mirror, credential), the same limits, the same setup */
    struct store_session ses = {0};
    id_new("ses", ses.id);
    snprintf(ses.user_id, sizeof(ses.user_id), "%s", env->user_id);
    snprintf(ses.agent, sizeof(ses.agent), "%s", "opencode");
    snprintf(ses.node_id, sizeof(ses.node_id), "%s", store_node(e->st));
    ses.created_at = ses.last_run_at = d->now;
    char task[700];
    snprintf(task, sizeof(task),
             "Rebuild the environment snapshot %s of %s: its setup runs afresh, no agent runs",
             env->id, env->repository);
    struct store_run row = {0};
    id_new("run", row.id);
    snprintf(row.user_id, sizeof(row.user_id), "%s", env->user_id);
    snprintf(row.session_id, sizeof(row.session_id), "%s", ses.id);
    snprintf(row.model, sizeof(row.model), "%s", e->default_model);
    snprintf(row.agent, sizeof(row.agent), "%s", ses.agent);
    snprintf(row.rebuild, sizeof(row.rebuild), "%s", env->id);
    row.task = task;
    row.title = (char *)"environment rebuild";
    row.repository = (char *)env->repository;
    row.status_reason = (char *)"the environment snapshot aged out";
    row.timeout_ms = (int64_t)e->cfg.timeout_ms;
    row.created_at = d->now;
    snprintf(row.network, sizeof(row.network), "%s",
             egress_mode_name(runs_network_bound(e->cfg.network, e->st, env->user_id)));
    snprintf(row.pull_request, sizeof(row.pull_request), "none");
    if (store_session_create(e->st, &ses, &err) < 0 || store_run_insert(e->st, &row, &err) < 0) {
        log_warn("environment rebuild not queued env=%s err=\"%s\"", env->id, err.msg);
        store_env_drop(e->st, env->id, &err); /* it expires as it would have */
        free(d);
        return;
    }
    struct store_run got = {0};
    if (store_run_get(e->st, NULL, row.id, &got, &err) == 0)
        row.n = got.n;
    store_run_release(&got);
    log_info("environment rebuild queued env=%s run=%s user=%s repository=%s", env->id, row.id,
             env->user_id, env->repository);
    run_alloc(e, &row);
    free(d);
    runs_schedule(e);
}

void run_setup_over(struct run *r)
{
    if (r->delivers[0]) {
        attempt_deliver_now(r);
        return;
    }
    if (!r->rebuild[0]) {
        run_start_agent(r);
        return;
    }
    if (r->rebuilt) {
        r->exited = true;
        r->exit_code = 0;
    } else if (!r->fail[0]) {
        snprintf(r->fail, sizeof(r->fail), "the repository has no setup to run");
    }
    r->phase = PH_FINISHING;
    run_note_end(r);
    run_record_end(r, NULL, NULL);
}

void envs_rebuild_ended(struct run *r, bool ok)
{
    struct runs *e = r->e;
    struct err err = {0};
    if (ok && r->rebuilt) {
        log_info("environment rebuilt env=%s run=%s", r->rebuild, r->id);
    } else {
        /* the old one expires as it would have without a rebuild */
        log_warn("environment rebuild failed env=%s run=%s err=\"%s\"", r->rebuild, r->id,
                 r->fail[0]     ? r->fail
                 : r->cancelled ? "cancelled"
                                : "interrupted");
        store_env_drop(e->st, r->rebuild, &err);
    }
    /* nothing of the rebuild's session is kept: the snapshot has what it made */
    int rc = sandbox_manager_discard(e->mgr, r->user_id, r->session_id, &err);
    if (rc < 0 && rc != -ENOENT) {
        log_warn("environment rebuild's sandbox left to retention run=%s err=\"%s\"", r->id,
                 err.msg);
        return;
    }
    static const char *const files[] = {"events.jsonl", "agent.log", "status", "task.txt"};
    char path[PATH_MAX + 32];
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        snprintf(path, sizeof(path), "%s/%s", r->dir, files[i]);
        unlink(path);
    }
    rmdir(r->dir);
    store_session_mark_cleaned(e->st, r->session_id, time_now_ms(), &err);
}

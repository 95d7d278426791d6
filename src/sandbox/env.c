/* Environment snapshots on the sandbox's side: a sandbox's layer and workspace copied out under
 * DATA_DIR/envs/<env> (root/ and workspace/, ids in the template's range: layer.c), on a worker
 * thread, for later sandboxes to start on (sandbox_acquire's env: both trees idmapped below the
 * sandbox's own, setup.c). Which snapshot serves whom, and when one goes, is the caller's (the
 * runs' environments); this file only makes, measures and removes them, and never removes one a
 * sandbox starts on. */
#include "sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "base/work.h"
#include "store/store.h"

/* Copies are disk-bound and few: one at a time, a few waiting. */
static struct work_pool pool = WORK_POOL_INIT("environment snapshots");

struct snapshot {
    struct work work;
    char upper[PATH_MAX], ws[PATH_MAX], part[PATH_MAX], final[PATH_MAX];
    uint32_t from;
    struct layer_limits lim;
    struct layer_stats stats;
    struct err err;
    sandbox_snapshot_fn cb;
    void *ctx;
};

bool sandbox_env_name_ok(const char *env)
{
    size_t n = strlen(env);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((env[i] >= 'a' && env[i] <= 'z') || (env[i] >= '0' && env[i] <= '9') ||
              env[i] == '-'))
            return false;
    return true;
}

static void snapshot_run(struct work *w)
{
    struct snapshot *s = (struct snapshot *)w;
    char root[PATH_MAX], ws[PATH_MAX];
    struct layer_stats a = {0}, b = {0};
    tree_remove(AT_FDCWD, s->part); /* a copy a stopped server left */
    snprintf(root, sizeof(root), "%s/root", s->part);
    snprintf(ws, sizeof(ws), "%s/workspace", s->part);
    if (mkdir(s->part, 0700) < 0) {
        err_set(&s->err, -errno, "create '%s': %s", s->part, strerror(errno));
        return;
    }
    int r = layer_copy(s->upper, root, s->from, 0, SANDBOX_IDS, &s->lim, &a, &s->err);
    if (r == 0) {
        struct layer_limits rest = s->lim;
        rest.max_bytes -= a.bytes;
        rest.max_entries -= a.entries;
        r = layer_copy(s->ws, ws, s->from, 0, SANDBOX_IDS, &rest, &b, &s->err);
    }
    if (r == 0 && rename(s->part, s->final) < 0)
        r = err_set(&s->err, -errno, "rename '%s': %s", s->part, strerror(errno));
    if (r < 0)
        tree_remove(AT_FDCWD, s->part);
    s->stats =
        (struct layer_stats){a.bytes + b.bytes, a.entries + b.entries, a.skipped + b.skipped};
}

static void snapshot_done(struct work *w)
{
    struct snapshot *s = (struct snapshot *)w;
    s->cb(s->ctx, &s->stats, s->err.code ? &s->err : NULL);
    free(s);
}

int sandbox_snapshot(struct sandbox *sbx, const char *env, const struct layer_limits *lim,
                     sandbox_snapshot_fn cb, void *ctx, struct err *err)
{
    struct sandbox_manager *m = sbx->m;
    if (!sandbox_env_name_ok(env))
        return err_set(err, -EINVAL, "bad snapshot name '%s'", env);
    if (sbx->env[0])
        return err_set(err, -ENOTSUP, "sandbox '%s' starts on a snapshot already", sbx->id);
    if (!sbx->id_slot)
        return err_set(err, -ENOENT, "sandbox '%s' has never started", sbx->id);
    struct snapshot *s = xcalloc(1, sizeof(*s));
    const char *layers = m->cfg.disk_bytes ? "/disk" : "";
    snprintf(s->upper, sizeof(s->upper), "%s%s/upper", sbx->dir, layers);
    snprintf(s->ws, sizeof(s->ws), "%s%s/workspace", sbx->dir, layers);
    snprintf(s->part, sizeof(s->part), "%s/envs/%s.part", m->data_dir, env);
    snprintf(s->final, sizeof(s->final), "%s/envs/%s", m->data_dir, env);
    s->from = m->cfg.uid_base + sbx->id_slot * SANDBOX_IDS;
    s->lim = *lim;
    s->cb = cb;
    s->ctx = ctx;
    s->work.run = snapshot_run;
    s->work.done = snapshot_done;
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/envs", m->data_dir);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        free(s);
        return err_set(err, -errno, "create '%s': %s", dir, strerror(errno));
    }
    work_pool_limit(&pool, 1, 8);
    int r = work_submit(&pool, &s->work, err);
    if (r < 0)
        free(s);
    return r;
}

struct removal {
    struct work work;
    char path[PATH_MAX];
    int r;
};

static void removal_run(struct work *w)
{
    struct removal *rm = (struct removal *)w;
    rm->r = tree_remove(AT_FDCWD, rm->path);
}

static void removal_done(struct work *w)
{
    struct removal *rm = (struct removal *)w;
    if (rm->r < 0 && rm->r != -ENOENT)
        log_warn("environment snapshot not removed path=%s err=\"%s\"", rm->path, strerror(-rm->r));
    free(rm);
}

int sandbox_env_remove(struct sandbox_manager *m, const char *env, struct err *err)
{
    if (!sandbox_env_name_ok(env))
        return err_set(err, -EINVAL, "bad snapshot name '%s'", env);
    for (const struct sandbox *s = m->all; s; s = s->next)
        if (strcmp(s->env, env) == 0)
            return err_set(err, -EBUSY, "sandbox '%s' starts on snapshot '%s'", s->id, env);
    int64_t users = 0;
    int r = store_sandbox_env_users(m->store, env, &users, err);
    if (r < 0)
        return r;
    if (users > 0)
        return err_set(err, -EBUSY, "a sandbox starts on snapshot '%s'", env);
    /* out of the way at once (a rename), removed on the worker thread: a snapshot may hold a
     * large tree, and the loop does not wait for its files */
    struct removal *rm = xcalloc(1, sizeof(*rm));
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/envs/%s", m->data_dir, env);
    snprintf(rm->path, sizeof(rm->path), "%s/envs/%s.gone", m->data_dir, env);
    if (rename(path, rm->path) < 0) {
        int e = errno;
        free(rm);
        return e == ENOENT ? 0 : err_set(err, -e, "remove '%s': %s", path, strerror(e));
    }
    rm->work.run = removal_run;
    rm->work.done = removal_done;
    work_pool_limit(&pool, 1, 8);
    struct err werr = {0};
    if (work_submit(&pool, &rm->work, &werr) < 0) {
        removal_run(&rm->work); /* the pool is full: here, then */
        removal_done(&rm->work);
    }
    return 0;
}

void sandbox_env_sweep_leftovers(struct sandbox_manager *m)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/envs", m->data_dir);
    DIR *d = opendir(dir);
    if (!d)
        return;
    unsigned n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        bool gone = len > 5 && strcmp(de->d_name + len - 5, ".gone") == 0;
        bool part = len > 5 && strcmp(de->d_name + len - 5, ".part") == 0;
        if (!gone && !part)
            continue;
        struct removal *rm = xcalloc(1, sizeof(*rm));
        snprintf(rm->path, sizeof(rm->path), "%s/%s", dir, de->d_name);
        rm->work.run = removal_run;
        rm->work.done = removal_done;
        work_pool_limit(&pool, 1, 8);
        struct err werr = {0};
        if (work_submit(&pool, &rm->work, &werr) < 0) {
            removal_run(&rm->work);
            removal_done(&rm->work);
        }
        n++;
    }
    closedir(d);
    if (n)
        log_info("environment snapshot leftovers removed count=%u", n);
}

/* The warm pool: sandboxes started before anyone asks, owned by nobody, handed to a caller in
 * place of a start.
 *
 * A pooled sandbox is started as a user's is (its own id range, cgroup, disk image and layer, on
 * the template new sandboxes get), and nothing runs in it but its init until it is given away,
 * so taking one is the same as starting one: only faster. One part waits for the hand-over: its
 * network namespace, about a third of an idle sandbox's kernel memory. Until then its init waits
 * in an empty network namespace the pool shares, holds no socket, refuses commands and is not yet
 * confined; taking the sandbox asks the init to make the namespace and its loopback, confine
 * itself (as every process of the sandbox then is) and send the listeners (sandbox_arm): about a
 * millisecond and a half, most of it the kernel's. The rest of taking is a row update in
 * the store; the caller's limits (running sandboxes per user, disk per user) are checked as for
 * a start. The pool is refilled one start at a time from the loop, and only while the server has
 * capacity to spare: it never stops a user's sandbox to make room for itself, and it is the
 * first to give way when a user's start needs room (lru_idle in manager.c). A pooled sandbox
 * that died, or is on a template new sandboxes no longer get, is removed and replaced. Unowned
 * sandboxes left by an earlier server are removed when the pool starts, never adopted: their
 * history is unknown. */
#include "sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/util.h"
#include "store/store.h"

/* Pooled sandboxes handed over ahead of a take (pool_arm_ahead). */
#define POOL_ARMED_AHEAD 2
/* The longest wait between pool starts that fail. */
#define POOL_RETRY_MAX_MS 60000

static void on_pool_timer(struct loop_timer *t);

static void pool_arm(struct sandbox_manager *m, uint64_t ms)
{
    if (m->pool_armed)
        loop_timer_stop(&m->pool_timer);
    m->pool_armed = true;
    loop_timer_start(&m->pool_timer, ms, on_pool_timer);
}

void pool_schedule(struct sandbox_manager *m)
{
    if (m->pool_on && m->cfg.pool_size)
        pool_arm(m, 0);
}

static bool pooled(const struct sandbox *s)
{
    return sandbox_unowned(s) && !s->retiring;
}

/* Whether env is one the pool keeps a sandbox on. */
static bool env_kept(const struct sandbox_manager *m, const char *env)
{
    for (size_t i = 0; i < m->npool_envs; i++)
        if (strcmp(m->pool_envs[i], env) == 0)
            return true;
    return false;
}

/* A kept snapshot (sandbox_pool_keep_envs) with no pooled sandbox on it, or NULL. */
static const char *env_missing(const struct sandbox_manager *m)
{
    for (size_t i = 0; i < m->npool_envs; i++) {
        bool have = false;
        for (const struct sandbox *s = m->all; s && !have; s = s->next)
            have = pooled(s) && s->state != SBX_STOPPED && strcmp(s->env, m->pool_envs[i]) == 0;
        if (!have)
            return m->pool_envs[i];
    }
    return NULL;
}

/* How many pooled sandboxes on the template alone are started or starting (those on kept
 * snapshots not counted); *starting when any pooled one is starting. */
static unsigned pool_count(const struct sandbox_manager *m, bool *starting)
{
    unsigned n = 0;
    *starting = false;
    for (const struct sandbox *s = m->all; s; s = s->next)
        if (pooled(s) && s->state != SBX_STOPPED) {
            n += !s->env[0];
            if (s->state == SBX_STARTING)
                *starting = true;
        }
    return n;
}

unsigned pool_missing(const struct sandbox_manager *m)
{
    bool starting;
    unsigned n = pool_count(m, &starting);
    return m->pool_on && n < m->cfg.pool_size ? m->cfg.pool_size - n : 0;
}

static void pool_gauge(const struct sandbox_manager *m)
{
    unsigned n = 0;
    for (const struct sandbox *s = m->all; s; s = s->next)
        n += pooled(s) && s->state != SBX_STOPPED;
    metrics_gauge_set("sandbox_mcp_sandbox_pool", "Warm pool sandboxes started or starting", n);
}

/* Prepare pooled sandboxes for runs while fewer than wanted are: each handed over early (its
 * namespace made, confined) and given to the preparer. One that cannot be armed is removed. */
static void pool_prepare(struct sandbox_manager *m)
{
    if (!m->pool_prepare_fn || !m->pool_on)
        return;
    unsigned have = 0;
    for (const struct sandbox *s = m->all; s; s = s->next)
        have += pooled(s) && !s->env[0] && s->prepared && s->state == SBX_RUNNING;
    for (struct sandbox *s = m->all, *next; s; s = next) {
        next = s->next;
        if (!pooled(s) || s->prepared || s->state != SBX_RUNNING || s->holds || s->waiters ||
            strcmp(s->template_name, m->tmpl.name) != 0 || !sandbox_alive(s) ||
            (!s->env[0] && have >= m->pool_prepare_count))
            continue;
        struct err err = {0};
        if (sandbox_arm(s, &err) < 0) {
            log_warn("sandbox pool prepare failed sbx=%s err=\"%s\"", s->id, err.msg);
            sandbox_forget(s, "prepare failed");
            continue;
        }
        if (!m->pool_prepare_fn(m->pool_prepare_ctx, s))
            return; /* the preparer cannot now: the next fill or tick asks again */
        s->prepared = s->preparing = true;
        s->prepared_at = time_mono_ms();
        have += !s->env[0];
        log_info("sandbox pool preparing sbx=%s for=runs", s->id);
    }
}

void sandbox_pool_ready(struct sandbox_manager *m, const char *sandbox_id, bool ok)
{
    for (struct sandbox *s = m->all; s; s = s->next)
        if (strcmp(s->id, sandbox_id) == 0 && pooled(s) && s->preparing) {
            log_info("sandbox pool prepared sbx=%s ready=%s us=%lld", s->id, ok ? "yes" : "no",
                     (long long)((time_mono_ms() - s->prepared_at) * 1000));
            s->preparing = false;
            if (!ok)
                sandbox_forget(s, "not prepared");
            pool_schedule(m);
            return;
        }
}

void sandbox_pool_keep_envs(struct sandbox_manager *m, const char (*envs)[64], size_t n)
{
    m->npool_envs = 0;
    for (size_t i = 0; i < n && m->npool_envs < SANDBOX_POOL_ENVS_MAX; i++)
        if (envs[i][0])
            snprintf(m->pool_envs[m->npool_envs++], sizeof(m->pool_envs[0]), "%s", envs[i]);
    pool_tick(m); /* those on snapshots no longer kept go, and the new ones are started */
}

void sandbox_manager_pool_prepare(struct sandbox_manager *m, unsigned count,
                                  sandbox_pool_prepare_fn fn, void *ctx)
{
    m->pool_prepare_count = fn ? count : 0;
    m->pool_prepare_fn = count ? fn : NULL;
    m->pool_prepare_ctx = ctx;
    pool_prepare(m);
}

/* Hand over ahead (sandbox_arm: its network namespace made, its init confined) up to
 * POOL_ARMED_AHEAD pooled sandboxes, so that a take is bookkeeping only; the others wait in the
 * shared parked namespace, which spares their kernel memory in a large pool. */
static void pool_arm_ahead(struct sandbox_manager *m)
{
    unsigned armed = 0;
    for (const struct sandbox *s = m->all; s; s = s->next)
        armed += pooled(s) && s->state == SBX_RUNNING && !s->net_deferred && !s->prepared;
    for (struct sandbox *s = m->all, *next; s && armed < POOL_ARMED_AHEAD; s = next) {
        next = s->next;
        if (!pooled(s) || s->state != SBX_RUNNING || !s->net_deferred || s->prepared || s->holds ||
            s->waiters || !sandbox_alive(s))
            continue;
        struct err err = {0};
        int64_t t0 = time_mono_us();
        if (sandbox_arm(s, &err) < 0) {
            log_warn("sandbox pool arm failed sbx=%s err=\"%s\"", s->id, err.msg);
            sandbox_forget(s, "arm failed");
            continue;
        }
        log_info("sandbox pool armed sbx=%s us=%lld", s->id, (long long)(time_mono_us() - t0));
        armed++;
    }
}

static void on_pool_started(void *ctx, struct sandbox *sbx, const struct err *err)
{
    struct sandbox_manager *m = ctx;
    if (err) {
        /* The start has logged why; its unfinished sandbox is removed by the next tick. The
         * next try waits, longer each time, so that a host that cannot start sandboxes is not
         * asked again and again. */
        m->pool_failures++;
        uint64_t wait = 1000ull << (m->pool_failures < 6 ? m->pool_failures : 6);
        if (wait > POOL_RETRY_MAX_MS)
            wait = POOL_RETRY_MAX_MS;
        m->pool_retry_at = time_mono_ms() + (int64_t)wait;
        pool_arm(m, wait);
        return;
    }
    m->pool_failures = 0;
    sandbox_release(sbx);
    pool_prepare(m);
    pool_arm_ahead(m);
    pool_gauge(m);
    pool_schedule(m);
}

/* Start one more pooled sandbox when the pool is short, none is starting, and the server has a
 * slot and disk room to spare. */
static void pool_fill(struct sandbox_manager *m)
{
    bool starting;
    unsigned n = pool_count(m, &starting);
    const char *want_env = m->pool_prepare_fn ? env_missing(m) : NULL;
    if (!m->pool_on || starting || (n >= m->cfg.pool_size && !want_env) ||
        m->running >= m->cfg.max_running)
        return;
    int64_t now = time_mono_ms();
    if (now < m->pool_retry_at) {
        pool_arm(m, (uint64_t)(m->pool_retry_at - now));
        return;
    }
    /* What a new sandbox would take, checked before anything is made for it: no room without
     * stopping someone's sandbox means looking again later. */
    struct err err = {0};
    struct sandbox probe = {.m = m};
    bool user_limit;
    if (sandbox_disk_check(m, &probe, &user_limit, &err) < 0) {
        if (!m->pool_blocked)
            log_info("sandbox pool short size=%u have=%u reason=\"%s\"", m->cfg.pool_size, n,
                     err.msg);
        m->pool_blocked = true;
        m->pool_retry_at = now + POOL_RETRY_MAX_MS / 4;
        pool_arm(m, POOL_RETRY_MAX_MS / 4);
        return;
    }
    struct store_sandbox row = {0};
    id_new("sbx", row.id);
    snprintf(row.template_name, sizeof(row.template_name), "%s", m->tmpl.name);
    /* the template's first, then the one on the kept snapshot */
    if (n >= m->cfg.pool_size)
        snprintf(row.env, sizeof(row.env), "%s", want_env);
    row.created_at = time_now_ms();
    if (store_sandbox_insert(m->store, &row, &err) < 0) {
        log_error("sandbox pool start failed err=\"%s\"", err.msg);
        m->pool_retry_at = now + POOL_RETRY_MAX_MS / 4;
        pool_arm(m, POOL_RETRY_MAX_MS / 4);
        return;
    }
    struct sandbox *sbx = sandbox_alloc(m, &row);
    sbx->net_deferred = m->park_netns >= 0;
    m->pool_blocked = false;
    struct sandbox_waiter *w = xcalloc(1, sizeof(*w));
    w->sbx = sbx;
    w->cb = on_pool_started;
    w->ctx = m;
    sbx->waiters = w;
    sandbox_admit_start(sbx);
}

static void on_pool_timer(struct loop_timer *t)
{
    struct sandbox_manager *m = container_of(t, struct sandbox_manager, pool_timer);
    m->pool_armed = false;
    pool_fill(m);
}

int pool_take(struct sandbox_manager *m, const char *user_id, const char *session_id,
              struct sandbox *replaces, bool for_run, const char *env, struct sandbox **out,
              struct err *err)
{
    env = env ? env : "";
    if (!m->pool_on)
        return 0;
    /* a prepared one first (for a run), then one armed ahead, then any */
    struct sandbox *p = NULL;
    for (struct sandbox *s = m->all; s && !(p && p->prepared); s = s->next)
        if (pooled(s) && s->state == SBX_RUNNING && s->holds == 0 && !s->preparing &&
            (for_run || !s->prepared) && strcmp(s->env, env) == 0 &&
            (!p || s->prepared || (p->net_deferred && !s->net_deferred)) &&
            strcmp(s->template_name, m->tmpl.name) == 0 && sandbox_alive(s))
            p = s;
    if (!p)
        return 0;
    int64_t t0 = time_mono_us();
    struct err aerr = {0};
    if (sandbox_arm(p, &aerr) < 0) {
        /* the caller starts a sandbox instead */
        log_warn("sandbox pool hand-over failed sbx=%s err=\"%s\"", p->id, aerr.msg);
        sandbox_forget(p, "hand-over failed");
        pool_schedule(m);
        return 0;
    }
    int r = sandbox_user_room(m, user_id, p, replaces, err);
    if (r < 0)
        return r;
    const char *sid = session_id ? session_id : "";
    snprintf(p->user_id, sizeof(p->user_id), "%s", user_id);
    snprintf(p->session_id, sizeof(p->session_id), "%s", sid);
    /* Its disk image now counts as the user's (a replacement holds no more than the running one
     * it replaces could grow into, so it is not counted twice). */
    if (!replaces && (r = sandbox_disk_admit(m, p, err)) < 0)
        goto undo;
    if ((r = store_sandbox_assign(m->store, p->id, user_id, sid, replaces ? replaces->id : NULL,
                                  err)) < 0)
        goto undo;
    if (replaces) {
        replaces->retiring = true;
        replaces->user_id[0] = replaces->session_id[0] = '\0';
    }
    p->last_used = time_mono_ms();
    p->warm = true;
    log_info("sandbox assigned sbx=%s user=%s session=%s from=pool template=%s env=%s prepared=%s "
             "us=%lld",
             p->id, user_id, *sid ? sid : "-", p->template_name, p->env[0] ? p->env : "-",
             p->prepared ? "yes" : "no", (long long)(time_mono_us() - t0));
    p->prepared = false;
    pool_gauge(m);
    pool_schedule(m);
    *out = p;
    return 1;
undo:
    p->user_id[0] = p->session_id[0] = '\0';
    return r;
}

void pool_tick(struct sandbox_manager *m)
{
    if (!m->pool_on)
        return;
    for (struct sandbox *s = m->all, *next; s; s = next) {
        next = s->next;
        if (!pooled(s) || s->holds > 0 || s->waiters || s->state == SBX_STARTING)
            continue;
        if (s->state == SBX_STOPPED)
            sandbox_forget(s, "pool");
        else if (!sandbox_alive(s))
            sandbox_forget(s, "died");
        else if (strcmp(s->template_name, m->tmpl.name) != 0)
            sandbox_forget(s, "template changed");
        else if (s->prepared && time_mono_ms() - s->prepared_at > SANDBOX_POOL_PREPARED_MAX_MS)
            sandbox_forget(s, "prepared too long ago");
        else if (s->env[0] && !env_kept(m, s->env))
            sandbox_forget(s, "snapshot no longer kept");
    }
    pool_prepare(m);
    pool_arm_ahead(m);
    pool_gauge(m);
    pool_schedule(m);
}

/* An empty network namespace, its loopback down, where pooled sandboxes' inits wait until they
 * are handed over and make their own: made by a child that leaves it at once. */
static int park_netns_open(struct err *err)
{
    int sync[2];
    if (pipe2(sync, O_CLOEXEC) < 0)
        return err_set(err, -errno, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid == 0) {
        char c = unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
        if (write(sync[1], &c, 1) == 1)
            pause(); /* until killed: its namespace must outlive the open below */
        _exit(0);
    }
    close(sync[1]);
    char c = 'n';
    if (pid > 0 && read(sync[0], &c, 1) != 1)
        c = 'n';
    close(sync[0]);
    int fd = -1, e = pid < 0 ? errno : EPERM;
    if (c == 'y') {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        e = errno;
    }
    if (pid > 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (fd < 0)
        return err_set(err, -e, "cannot make a network namespace for the pool: %s", strerror(e));
    return fd;
}

static void collect_unowned(const struct store_sandbox *row, void *ctx)
{
    struct buf *ids = ctx;
    buf_append(ids, row, sizeof(*row));
}

static void collect_id(const char *id, void *ctx)
{
    struct buf *ids = ctx;
    buf_append(ids, id, strlen(id) + 1);
}

static bool listed(const struct buf *ids, const char *id)
{
    for (size_t i = 0; i < ids->len; i += strlen(ids->data + i) + 1)
        if (strcmp(ids->data + i, id) == 0)
            return true;
    return false;
}

void sandbox_manager_drop_moved(struct sandbox_manager *m)
{
    struct buf ids;
    buf_init(&ids, 0);
    struct err err = {0};
    if (store_sandbox_list_ids(m->store, collect_id, &ids, &err) < 0) {
        log_error("sandbox list failed err=\"%s\"", err.msg);
        buf_release(&ids);
        return;
    }
    /* held ones are in use now; they go at the next look */
    for (struct sandbox *s = m->all, *next; s; s = next) {
        next = s->next;
        if (!listed(&ids, s->id) && s->holds == 0 && !s->waiters && s->state != SBX_STARTING)
            sandbox_forget(s, "moved to another node");
    }
    /* the files of sandboxes no row of this node's names: left when another node took them
     * over while this one was lost */
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/sandboxes", m->data_dir);
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, "sbx_", 4) != 0 || listed(&ids, de->d_name))
            continue;
        bool known = false;
        for (struct sandbox *s = m->all; s && !known; s = s->next)
            known = strcmp(s->id, de->d_name) == 0;
        if (known)
            continue;
        struct store_sandbox row = {0};
        snprintf(row.id, sizeof(row.id), "%s", de->d_name);
        sandbox_forget(sandbox_alloc(m, &row), "moved to another node");
    }
    if (d)
        closedir(d);
    buf_release(&ids);
}

void sandbox_manager_keep_pool(struct sandbox_manager *m)
{
    /* Sandbox groups no row knows as running: left by a server that died while starting them.
     * Only the server does this: a command line's manager could meet a start under way. */
    cgroup_list(sandbox_reap_unknown, m);
    /* What an earlier server left without an owner: a pool it kept, or sandboxes replaced by
     * container_initialize whose removal it did not finish. */
    struct buf rows;
    buf_init(&rows, 0);
    struct err err = {0};
    if (store_sandbox_list_unowned(m->store, collect_unowned, &rows, &err) < 0)
        log_error("sandbox pool cleanup failed err=\"%s\"", err.msg);
    const struct store_sandbox *row = (const void *)rows.data;
    for (size_t i = 0; i < rows.len / sizeof(*row); i++) {
        struct sandbox *sbx = NULL;
        for (struct sandbox *s = m->all; s && !sbx; s = s->next)
            if (strcmp(s->id, row[i].id) == 0)
                sbx = s;
        if (!sbx)
            sbx = sandbox_alloc(m, &row[i]);
        sandbox_forget(sbx, "unowned at start");
    }
    buf_release(&rows);
    sandbox_manager_drop_moved(m);
    if (m->cfg.pool_size && m->park_netns < 0) {
        struct err nerr = {0};
        int fd = park_netns_open(&nerr);
        if (fd >= 0)
            m->park_netns = fd;
        else
            log_warn("sandbox pool err=\"%s\" note=\"pooled sandboxes get their network "
                     "namespace at their start instead, which costs more memory\"",
                     nerr.msg);
    }
    m->pool_on = true;
    log_info("sandbox pool size=%u max_running=%u", m->cfg.pool_size, m->cfg.max_running);
    pool_schedule(m);
}

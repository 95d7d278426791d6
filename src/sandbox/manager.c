/* The sandbox manager: which sandbox serves which caller, capacity, idle stops, and re-adoption
 * of sandboxes that outlived a previous server process. */
#include "sandbox/sandbox_internal.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "store/store.h"

extern const char sandbox_helper_image[];
extern const char sandbox_helper_image_end[];

void sandbox_config_defaults(struct sandbox_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->template_name = "debian";
    cfg->template_retry_ms = 60 * 1000;
    cfg->memory_bytes = 2ull << 30;
    cfg->pids_max = 512;
    cfg->disk_bytes = 10ull << 30;
    cfg->tmp_bytes = 512ull << 20;
    cfg->max_running = 64;
    /* A team of ten shares the 64: each keeps its own sandbox and a few run sessions going. */
    cfg->max_running_user = 6;
    cfg->pool_size = 2;
    cfg->standby = 8;
    cfg->disk_user_bytes = 100ull << 30;
    cfg->idle_ms = 10 * 60 * 1000;
    cfg->uid_base = 524288;
    cfg->uid_ranges = 4096;
    cfg->exec_timeout_ms = 60 * 1000;
    cfg->exec_timeout_max = 60 * 60 * 1000;
    cfg->output_bytes = 1 << 20;
    cfg->file_max_bytes = 3 << 20;
}

const char *sandbox_template_name(const struct sandbox_manager *m)
{
    return m->tmpl.name;
}

const char *sandbox_template_tree(const struct sandbox_manager *m)
{
    return m->tmpl.rootfs;
}

const char *sandbox_manager_cgroup_mode(const struct sandbox_manager *m)
{
    return cgroup_mode_name(cgroup_mode());
}

/* The init program in a sealed, read-only memfd: executable from any mount namespace. */
static int make_init_memfd(struct err *err)
{
    int fd = memfd_create("sandbox-helper", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return err_set(err, -errno, "memfd_create: %s", strerror(errno));
    size_t len = (size_t)(sandbox_helper_image_end - sandbox_helper_image), off = 0;
    while (off < len) {
        ssize_t n = write(fd, sandbox_helper_image + off, len - off);
        if (n <= 0) {
            close(fd);
            return err_set(err, -errno, "write sandbox-init: %s", strerror(errno));
        }
        off += (size_t)n;
    }
    fchmod(fd, 0555);
    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    /* A writable descriptor would make exec fail with ETXTBSY: reopen read-only. */
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    int ro = open(path, O_RDONLY | O_CLOEXEC);
    close(fd);
    if (ro < 0)
        return err_set(err, -errno, "reopen sandbox-init: %s", strerror(errno));
    return ro;
}

struct sandbox *sandbox_alloc(struct sandbox_manager *m, const struct store_sandbox *row)
{
    struct sandbox *sbx = xcalloc(1, sizeof(*sbx));
    sbx->m = m;
    sbx->pidfd = -1;
    sbx->fs_sock = -1;
    sbx->listen_rx = -1;
    snprintf(sbx->id, sizeof(sbx->id), "%s", row->id);
    snprintf(sbx->user_id, sizeof(sbx->user_id), "%s", row->user_id);
    snprintf(sbx->session_id, sizeof(sbx->session_id), "%s", row->session_id);
    snprintf(sbx->template_name, sizeof(sbx->template_name), "%s", row->template_name);
    snprintf(sbx->cgroup, sizeof(sbx->cgroup), "%s", row->cgroup[0] ? row->cgroup : row->id);
    snprintf(sbx->dir, sizeof(sbx->dir), "%s/sandboxes/%s", m->data_dir, row->id);
    mkdir(sbx->dir, 0700);
    sbx->dirfd = open(sbx->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    snprintf(sbx->env, sizeof(sbx->env), "%s", row->env);
    sbx->created_at = row->created_at;
    sbx->started_at = row->started_at;
    sbx->id_slot = row->id_slot;
    sbx->last_used = time_mono_ms();
    sbx->next = m->all;
    m->all = sbx;
    return sbx;
}

static void adopt_one(const struct store_sandbox *row, void *ctx)
{
    struct sandbox_manager *m = ctx;
    struct sandbox *sbx = sandbox_alloc(m, row);
    sbx->init_pid = (pid_t)row->init_pid;
    sbx->init_start = (uint64_t)row->init_start;
    uint64_t now_start = row->init_pid > 0 ? proc_start_time((pid_t)row->init_pid) : 0;
    int fd = now_start && now_start == (uint64_t)row->init_start
                 ? pidfd_open_pid((pid_t)row->init_pid)
                 : -1;
    if (fd >= 0 && proc_start_time((pid_t)row->init_pid) == (uint64_t)row->init_start) {
        sbx->pidfd = fd;
        sbx->state = SBX_RUNNING;
        m->running++;
        /* An init of an earlier server listens on the older name, and closes the connection
         * after each command, which this server follows. */
        sbx->ctl_old = faccessat(sbx->dirfd, SANDBOX_CTL_SOCK, F_OK, 0) < 0;
        if (sbx->ctl_old && faccessat(sbx->dirfd, SANDBOX_CTL_SOCK_OLD, F_OK, 0) < 0) {
            /* started by a server without the init's control socket: it cannot take
             * commands, so stop it (its files stay) and let the next call start it afresh */
            sandbox_stop(sbx, "incompatible");
            return;
        }
        log_info("sandbox adopted sbx=%s user=%s pid=%d", sbx->id, sbx->user_id, sbx->init_pid);
        return;
    }
    if (fd >= 0)
        close(fd);
    /* The init is gone, or its pid now belongs to another process. */
    cgroup_destroy(sbx->cgroup);
    sbx->state = SBX_STOPPED;
    sandbox_save(sbx);
    log_info("sandbox found dead sbx=%s user=%s pid=%lld", sbx->id, sbx->user_id,
             (long long)row->init_pid);
}

void sandbox_reap_unknown(const char *name, void *ctx)
{
    struct sandbox_manager *m = ctx;
    for (struct sandbox *s = m->all; s; s = s->next)
        if (s->state == SBX_RUNNING && strcmp(s->cgroup, name) == 0)
            return;
    int r = cgroup_destroy(name);
    log_info("sandbox unknown stopped cgroup=%s ok=%s", name, r == 0 ? "true" : "false");
}

static void on_idle_tick(struct loop_timer *t);

static uint64_t idle_tick_ms(const struct sandbox_manager *m)
{
    return m->cfg.idle_ms < 10000 ? 250 : 5000;
}

int sandbox_manager_new(const struct sandbox_config *cfg, struct store *store,
                        struct sandbox_manager **ret, struct err *err)
{
    struct sandbox_manager *m = xcalloc(1, sizeof(*m));
    m->host.lock = -1;
    m->cfg = *cfg;
    /* Absolute: the setup child changes directory while it builds a sandbox. */
    char abs_dir[PATH_MAX];
    m->data_dir = xstrdup(realpath(cfg->data_dir, abs_dir) ? abs_dir : cfg->data_dir);
    m->template_name = xstrdup(cfg->template_name ? cfg->template_name : "debian");
    m->cfg.data_dir = m->data_dir;
    m->cfg.template_name = m->template_name;
    if (cfg->template_dir)
        m->template_dir =
            xstrdup(realpath(cfg->template_dir, abs_dir) ? abs_dir : cfg->template_dir);
    else
        m->template_dir = xasprintf("%s/templates", m->data_dir);
    m->cfg.template_dir = m->template_dir;
    m->template_mirror = cfg->template_mirror ? xstrdup(cfg->template_mirror) : NULL;
    m->cfg.template_mirror = m->template_mirror;
    for (size_t i = 0; i < cfg->nagents && i < SANDBOX_AGENTS_MAX; i++) {
        m->cfg.agents[i].name = m->agent_names[i] = xstrdup(cfg->agents[i].name);
        m->cfg.agents[i].dir = m->agent_dirs[i] = xstrdup(cfg->agents[i].dir);
        m->cfg.nagents = i + 1;
    }
    m->store = store;
    m->init_memfd = -1;
    m->devnull = -1;
    for (int i = 0; i < 4; i++)
        m->spare_pipes[i] = -1;
    m->park_netns = -1;
    int r;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/sandboxes", m->data_dir);
    if (mkdir(path, 0700) < 0 && errno != EEXIST) {
        r = err_set(err, -errno, "cannot create '%s': %s", path, strerror(errno));
        goto fail;
    }
    if (geteuid() != 0) {
        r = err_set(err, -EPERM, "sandboxes need root (namespaces, mounts and cgroups)");
        goto fail;
    }
    /* The instance: this data directory, wherever it is reached from. */
    char real[PATH_MAX], hash[65];
    if (!realpath(m->data_dir, real))
        snprintf(real, sizeof(real), "%s", m->data_dir);
    sha256_hex(real, strlen(real), hash);
    hash[12] = '\0';
    enum cgroup_mode mode = cgroup_setup(hash, cfg->cgroup_root);
    if (mode == CGROUP_NONE && !cfg->allow_unlimited) {
        r = err_set(err, -ENOTSUP,
                    "sandboxes need memory and process limits, and this host offers no usable "
                    "cgroup hierarchy (cgroup v2 with the memory and pids controllers, or the "
                    "cgroup v1 memory and pids controllers, under %s); give the server one, or "
                    "set SANDBOX_ALLOW_UNLIMITED=1 to run sandboxes without those limits (only "
                    "for code you trust)",
                    cfg->cgroup_root ? cfg->cgroup_root : "/sys/fs/cgroup");
        goto fail;
    }
    if ((r = policy_init(err)) < 0)
        goto fail;
    /* The host template always: new sandboxes start on it while the debian one is not usable. */
    if ((r = template_prepare(m->template_dir, "host", &m->host, err)) < 0)
        goto fail;
    m->tmpl = m->host;
    if (strcmp(m->template_name, "debian") == 0) {
        struct err terr = {0};
        m->keeper.state = KEEPER_BUILDING;
        if (template_prepare(m->template_dir, "debian", &m->debian, &terr) == 0) {
            m->keeper.usable = true;
            m->tmpl = m->debian;
        }
    }
    if ((r = make_init_memfd(err)) < 0)
        goto fail;
    m->init_memfd = r;
    if ((m->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        r = err_set(err, -errno, "cannot open /dev/null: %s", strerror(errno));
        goto fail;
    }
    if (m->cfg.disk_bytes) {
        static const char *const mkfs[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"};
        for (size_t i = 0; i < ARRAY_SIZE(mkfs) && !m->mkfs[0]; i++)
            if (access(mkfs[i], X_OK) == 0)
                snprintf(m->mkfs, sizeof(m->mkfs), "%s", mkfs[i]);
        if (!m->mkfs[0] || access("/dev/loop-control", R_OK | W_OK) < 0) {
            r = err_set(err, -ENOTSUP,
                        "disk limits need mkfs.ext4 and /dev/loop-control; set "
                        "SANDBOX_DISK_MB=0 to run without a workspace size limit");
            goto fail;
        }
        /* e2fsck, from the same package */
        snprintf(m->fsck, sizeof(m->fsck), "%.*se2fsck", (int)(strrchr(m->mkfs, '/') - m->mkfs + 1),
                 m->mkfs);
    }
    log_info(
        "sandbox runtime cgroup=%s template=%s new-sandboxes=%s template_dir=%s memory_mb=%llu "
        "pids=%llu disk_mb=%llu disk_admit=%s max_running=%u idle_s=%llu",
        cgroup_mode_name(mode), m->template_name, m->tmpl.name, m->template_dir,
        (unsigned long long)(m->cfg.memory_bytes >> 20), (unsigned long long)m->cfg.pids_max,
        (unsigned long long)(m->cfg.disk_bytes >> 20), m->cfg.disk_strict ? "strict" : "thin",
        m->cfg.max_running, (unsigned long long)(m->cfg.idle_ms / 1000));
    struct statvfs vfs;
    if (m->cfg.disk_bytes && m->cfg.disk_strict && !m->cfg.disk_total_bytes &&
        statvfs(path, &vfs) == 0 &&
        (uint64_t)vfs.f_bavail * vfs.f_frsize < m->cfg.disk_bytes * m->cfg.max_running)
        log_warn("sandbox disk-room free_mb=%llu: fewer than SANDBOX_MAX_RUNNING=%u sandboxes "
                 "with SANDBOX_DISK_MB=%llu images can run at once without overcommitting the "
                 "disk; idle ones are stopped to make room (lower SANDBOX_DISK_MB or set "
                 "SANDBOX_DISK_TOTAL_MB to change that)",
                 (unsigned long long)((uint64_t)vfs.f_bavail * vfs.f_frsize >> 20),
                 m->cfg.max_running, (unsigned long long)(m->cfg.disk_bytes >> 20));
    if (mode == CGROUP_NONE)
        log_warn("sandbox limits off: no usable cgroup hierarchy and SANDBOX_ALLOW_UNLIMITED=1, so "
                 "a sandbox's memory and processes are bounded by rlimits only: run only code you "
                 "trust");
    if ((r = store_sandbox_list_running(store, adopt_one, m, err)) < 0)
        goto fail;
    loop_timer_start(&m->idle_timer, idle_tick_ms(m), on_idle_tick);
    disk_watch_start(m);
    *ret = m;
    return 0;
fail:
    sandbox_manager_free(m);
    return r;
}

void sandbox_manager_free(struct sandbox_manager *m)
{
    if (!m)
        return;
    loop_timer_stop(&m->idle_timer);
    loop_timer_stop(&m->disk_timer);
    loop_timer_stop(&m->exec_timer);
    loop_timer_stop(&m->pool_timer);
    keeper_stop(m);
    if (m->host.lock >= 0)
        close(m->host.lock);
    struct sandbox *s = m->all;
    while (s) {
        struct sandbox *next = s->next;
        if (s->state == SBX_STARTING)
            proc_watch_abandon(&s->start_watch);
        if (s->pidfd >= 0)
            close(s->pidfd);
        sandbox_exec_release(s);
        if (s->dirfd >= 0)
            close(s->dirfd);
        struct sandbox_waiter *w = s->waiters;
        while (w) {
            struct sandbox_waiter *wn = w->next;
            free(w);
            w = wn;
        }
        free(s);
        s = next;
    }
    if (m->init_memfd >= 0)
        close(m->init_memfd);
    if (m->park_netns >= 0)
        close(m->park_netns);
    if (m->devnull >= 0)
        close(m->devnull);
    for (int i = 0; i < 4; i++)
        if (m->spare_pipes[i] >= 0)
            close(m->spare_pipes[i]);
    free(m->data_dir);
    free(m->template_dir);
    free(m->template_mirror);
    free(m->template_name);
    for (size_t i = 0; i < SANDBOX_AGENTS_MAX; i++) {
        free(m->agent_names[i]);
        free(m->agent_dirs[i]);
    }
    for (size_t i = 0; i < m->nfiles; i++)
        free(m->files[i].content);
    free(m);
}

/* The sandbox struct for (user, session), loading or creating its row: 0, or 1 when it is one
 * just taken from the pool (running, and as fresh as can be). */
static int lookup(struct sandbox_manager *m, const char *user_id, const char *session_id,
                  bool create, const char *env, bool for_run, struct sandbox **out, struct err *err)
{
    const char *sid = session_id ? session_id : "";
    for (struct sandbox *s = m->all; s; s = s->next)
        if (strcmp(s->user_id, user_id) == 0 && strcmp(s->session_id, sid) == 0) {
            *out = s;
            return 0;
        }
    struct store_sandbox row;
    int r = store_sandbox_find(m->store, user_id, sid, &row, err);
    if (r == -ENOENT && *sid && !create)
        return err_set(err, -ENOENT, "session '%s' not found", sid);
    if (r == -ENOENT) {
        /* A new sandbox for the caller: a pooled one that already runs, when there is one on
         * the same template or snapshot (the pool keeps one snapshot's: sandbox_pool_keep_env). */
        if ((r = pool_take(m, user_id, sid, NULL, for_run, env, out, err)) != 0)
            return r < 0 ? r : 1;
        memset(&row, 0, sizeof(row));
        id_new("sbx", row.id);
        snprintf(row.user_id, sizeof(row.user_id), "%s", user_id);
        snprintf(row.session_id, sizeof(row.session_id), "%s", sid);
        snprintf(row.template_name, sizeof(row.template_name), "%s", m->tmpl.name);
        snprintf(row.env, sizeof(row.env), "%s", env ? env : "");
        row.created_at = time_now_ms();
        if ((r = store_sandbox_insert(m->store, &row, err)) < 0)
            return r;
    } else if (r < 0) {
        return r;
    } else if (strcmp(row.node_id, store_node(m->store)) != 0) {
        /* reached here although another node holds it (a call the cluster did not route) */
        return err_set(err, -EREMOTE, "sandbox '%s' lives on node '%s'", row.id, row.node_id);
    }
    struct sandbox *sbx = sandbox_alloc(m, &row);
    if (mkdir(sbx->dir, 0700) < 0 && errno != EEXIST)
        return err_set(err, -errno, "cannot create '%s': %s", sbx->dir, strerror(errno));
    *out = sbx;
    return 0;
}

int sandbox_manager_discard(struct sandbox_manager *m, const char *user_id, const char *session_id,
                            struct err *err)
{
    struct sandbox *sbx = NULL;
    int r = lookup(m, user_id, session_id, false, NULL, false, &sbx, err);
    if (r < 0)
        return r;
    if (sbx->holds > 0 || sbx->state == SBX_STARTING)
        return err_set(err, -EBUSY, "sandbox '%s' is in use", sbx->id);
    if (sbx->state == SBX_RUNNING)
        sandbox_stop(sbx, "discarded");
    if ((r = sandbox_wipe(sbx, err)) < 0)
        return r;
    /* Nothing on disk is owned by its id range any more: another sandbox may take it. */
    if (sbx->id_slot && (r = store_sandbox_release_slot(m->store, sbx->id, err)) < 0)
        return r;
    sbx->id_slot = 0;
    return 0;
}

void sandbox_forget(struct sandbox *sbx, const char *reason)
{
    struct sandbox_manager *m = sbx->m;
    struct err err = {0};
    sbx->retiring = true;
    if (sbx->state == SBX_RUNNING)
        sandbox_stop(sbx, reason);
    if (sandbox_wipe(sbx, &err) < 0) {
        /* The row keeps its id range, so no other sandbox gets ids that own files here; a later
         * server removes both. */
        log_error("sandbox removal failed sbx=%s err=\"%s\"", sbx->id, err.msg);
    } else {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/sandboxes", m->data_dir);
        int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int r = dfd >= 0 ? tree_remove(dfd, sbx->id) : -errno;
        if (dfd >= 0)
            close(dfd);
        if (r < 0)
            log_warn("sandbox directory left sbx=%s err=\"%s\"", sbx->id, strerror(-r));
        if (store_sandbox_delete(m->store, sbx->id, &err) < 0)
            log_error("sandbox row removal failed sbx=%s err=\"%s\"", sbx->id, err.msg);
        else
            log_info("sandbox removed sbx=%s user=%s reason=%s", sbx->id, sbx->user_id, reason);
    }
    for (struct sandbox **pp = &m->all; *pp; pp = &(*pp)->next)
        if (*pp == sbx) {
            *pp = sbx->next;
            break;
        }
    if (sbx->dirfd >= 0)
        close(sbx->dirfd);
    if (sbx->pidfd >= 0)
        close(sbx->pidfd);
    sandbox_exec_release(sbx);
    free(sbx);
}

const struct sandbox *sandbox_find_running(const struct sandbox_manager *m, const char *id)
{
    for (const struct sandbox *s = m->all; s; s = s->next)
        if (s->state != SBX_STOPPED && strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

struct sandbox_waiter *sandbox_acquire(struct sandbox_manager *m,
                                       const struct sandbox_acquire_opts *opts, sandbox_ready_fn cb,
                                       void *ctx)
{
    struct err err = {0};
    struct sandbox *sbx = NULL;
    int found = lookup(m, opts->user_id, opts->session_id, opts->create,
                       opts->create ? opts->env : NULL, opts->for_run, &sbx, &err);
    if (found < 0) {
        cb(ctx, NULL, &err);
        return NULL;
    }
    if (found == 1) {
        /* from the pool: nothing to start, nor to start over */
        sbx->holds++;
        cb(ctx, sbx, NULL);
        return NULL;
    }
    if (sbx->state == SBX_STARTING && opts->fresh) {
        err_set(&err, -EAGAIN, "sandbox is starting; retry in a moment");
        cb(ctx, NULL, &err);
        return NULL;
    }
    /* Starting over: a pooled sandbox takes the place of one nothing holds, which is then
     * removed (after the caller has its answer). */
    struct sandbox *fresh = NULL;
    int took = 0;
    if (opts->fresh && sbx->holds == 0 && !sbx->waiters &&
        (sbx->state == SBX_RUNNING || !m->cfg.disk_user_bytes) &&
        (took = pool_take(m, opts->user_id, opts->session_id, sbx, opts->for_run, NULL, &fresh,
                          &err)) != 0) {
        if (took < 0) {
            cb(ctx, NULL, &err);
            return NULL;
        }
        fresh->holds++;
        cb(ctx, fresh, NULL);
        sandbox_forget(sbx, "initialize");
        return NULL;
    }
    if (sbx->standby && !opts->fresh) {
        int r = standby_take(sbx, &err);
        if (r < 0) {
            cb(ctx, NULL, &err);
            return NULL;
        }
    }
    if (sbx->state == SBX_RUNNING && (opts->fresh || !sandbox_alive(sbx)))
        sandbox_stop(sbx, opts->fresh ? "initialize" : "found dead");
    if (opts->fresh)
        sbx->fresh_pending = true;
    if (sbx->state == SBX_RUNNING && sbx->disk_paused) {
        sandbox_disk_paused_err(sbx, &err);
        cb(ctx, NULL, &err);
        return NULL;
    }
    if (sbx->state == SBX_RUNNING && !sbx->barriers) {
        sbx->holds++;
        sbx->last_used = time_mono_ms();
        cb(ctx, sbx, NULL);
        return NULL;
    }
    struct sandbox_waiter *w = xcalloc(1, sizeof(*w));
    w->sbx = sbx;
    w->cb = cb;
    w->ctx = ctx;
    struct sandbox_waiter **pp = &sbx->waiters;
    while (*pp)
        pp = &(*pp)->next;
    *pp = w;
    if (sbx->state == SBX_STOPPED) {
        if (sandbox_make_room(m, sbx, &err) < 0) {
            *pp = NULL;
            free(w);
            cb(ctx, NULL, &err);
            return NULL;
        }
        sandbox_admit_start(sbx);
        /* a start that failed at once has already answered */
        for (struct sandbox_waiter *x = sbx->waiters; x; x = x->next)
            if (x == w)
                return w;
        return NULL;
    }
    return w;
}

void sandbox_acquire_cancel(struct sandbox_waiter *w)
{
    struct sandbox *sbx = w->sbx;
    for (struct sandbox_waiter **pp = &sbx->waiters; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            free(w);
            return;
        }
}

void sandbox_barrier(struct sandbox *sbx, bool on)
{
    if (on) {
        sbx->barriers++;
        return;
    }
    if (sbx->barriers > 0 && --sbx->barriers == 0 && sbx->state == SBX_RUNNING)
        sandbox_notify(sbx, NULL); /* the calls held back meanwhile */
}

void sandbox_release(struct sandbox *sbx)
{
    if (sbx->holds > 0)
        sbx->holds--;
    sbx->last_used = time_mono_ms();
}

static void on_idle_tick(struct loop_timer *t)
{
    struct sandbox_manager *m = container_of(t, struct sandbox_manager, idle_timer);
    int64_t now = time_mono_ms();
    for (struct sandbox *s = m->all; s; s = s->next) {
        if (s->state != SBX_RUNNING || s->holds > 0 || sandbox_unowned(s) || s->standby ||
            now - s->last_used < (int64_t)m->cfg.idle_ms)
            continue;
        if (!sandbox_alive(s)) {
            sandbox_stop(s, "died");
            continue;
        }
        if (sandbox_busy(s)) {
            s->last_used = now; /* processes still running: look again after a full period */
            continue;
        }
        sandbox_stop(s, "idle");
        standby_after_idle(s);
    }
    standby_tick(m);
    pool_tick(m);
    proc_reap_later(0);
    loop_timer_start(&m->idle_timer, idle_tick_ms(m), on_idle_tick);
}

int sandbox_manager_stop_all(struct sandbox_manager *m)
{
    int n = 0;
    for (struct sandbox *s = m->all; s; s = s->next)
        if (s->state == SBX_RUNNING) {
            sandbox_stop(s, "stop-all");
            n++;
        }
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/sandboxes", m->data_dir);
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char disk[PATH_MAX];
        if (snprintf(disk, sizeof(disk), "%s/%s/disk", path, de->d_name) < (int)sizeof(disk))
            umount2(disk, MNT_DETACH);
    }
    if (d)
        closedir(d);
    cgroup_list(sandbox_reap_unknown, m);
    cgroup_teardown();
    return n;
}

void sandbox_manager_list(struct sandbox_manager *m,
                          void (*fn)(const struct sandbox_info *i, void *ctx), void *ctx)
{
    for (struct sandbox *s = m->all; s; s = s->next) {
        if (s->state != SBX_RUNNING || s->retiring)
            continue;
        struct sandbox_info i = {s->id, s->user_id, s->session_id, s->init_pid, true};
        fn(&i, ctx);
    }
}

int sandbox_manager_find(struct sandbox_manager *m, const char *id, struct sandbox_info *out)
{
    const struct sandbox *s = sandbox_find_running(m, id);
    /* An unowned sandbox is nobody's: no network, no proxy (runs/network.c). */
    if (!s || sandbox_unowned(s))
        return -ENOENT;
    *out = (struct sandbox_info){s->id, s->user_id, s->session_id, s->init_pid,
                                 s->state == SBX_RUNNING};
    return 0;
}

void sandbox_manager_set_listener(struct sandbox_manager *m, uint16_t port, sandbox_listener_fn fn,
                                  void *ctx)
{
    assert(m->nlisteners < SANDBOX_LISTENERS_MAX);
    int i = m->nlisteners++;
    m->listeners[i] = (struct sandbox_listener_hook){port, fn, ctx};
    for (struct sandbox *s = m->all; s; s = s->next)
        if (s->state == SBX_RUNNING)
            sandbox_open_listeners(s, i);
}

/* Starting and stopping one sandbox: the server's side of its life cycle. A start prepares
 * everything the setup child needs (plan_init), forks it (setup.c, which builds the sandbox and
 * starts its init) and watches the pipe on which it reports the init's pid or why it failed.
 * Admission (room for one more running sandbox, disk room) is decided before a start, by
 * admit.c, which then calls sandbox_start: this file calls nothing above it. */
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/util.h"
#include "store/store.h"

/* --- server side --- */

static void plan_init(struct setup_plan *p, struct sandbox *sbx)
{
    struct sandbox_manager *m = sbx->m;
    memset(p, 0, sizeof(*p));
    p->uid = m->cfg.uid_base + sbx->id_slot * SANDBOX_IDS;
    p->uid_base = m->cfg.uid_base;
    p->userns_fd = -1;
    p->memfd = m->init_memfd;
    p->disk = m->cfg.disk_bytes > 0;
    p->disk_bytes = m->cfg.disk_bytes;
    snprintf(p->mkfs, sizeof(p->mkfs), "%s", m->mkfs);
    snprintf(p->fsck, sizeof(p->fsck), "%s", m->fsck);
    snprintf(p->dir, sizeof(p->dir), "%s", sbx->dir);
    snprintf(p->disk_img, sizeof(p->disk_img), "%s/disk.img", sbx->dir);
    snprintf(p->disk_mnt, sizeof(p->disk_mnt), "%s/disk", sbx->dir);
    const char *layers = p->disk ? p->disk_mnt : sbx->dir;
    snprintf(p->upper, sizeof(p->upper), "%s/upper", layers);
    snprintf(p->work, sizeof(p->work), "%s/work", layers);
    snprintf(p->ws, sizeof(p->ws), "%s/workspace", layers);
    snprintf(p->root, sizeof(p->root), "%s/root", sbx->dir);
    snprintf(p->lower_src, sizeof(p->lower_src), "%s", m->tmpl.rootfs);
    template_mark_used(&m->tmpl);
    snprintf(p->lower, sizeof(p->lower), "%s/lower", sbx->dir);
    if (sbx->env[0]) {
        snprintf(p->env_root_src, sizeof(p->env_root_src), "%s/envs/%s/root", m->data_dir,
                 sbx->env);
        snprintf(p->env_ws_src, sizeof(p->env_ws_src), "%s/envs/%s/workspace", m->data_dir,
                 sbx->env);
        snprintf(p->env_root, sizeof(p->env_root), "%s/envroot", sbx->dir);
        snprintf(p->env_ws, sizeof(p->env_ws), "%s/envws", sbx->dir);
        snprintf(p->ws_work, sizeof(p->ws_work), "%s/wswork", layers);
        snprintf(p->ws_opts, sizeof(p->ws_opts), "lowerdir=%s,upperdir=%s,workdir=%s,metacopy=off",
                 p->env_ws, p->ws, p->ws_work);
    }
    /* metacopy off: every file the sandbox changes is whole in its layer, which an environment
     * snapshot copies */
    snprintf(p->overlay_opts, sizeof(p->overlay_opts),
             "lowerdir=%s%s%s,upperdir=%s,workdir=%s,metacopy=off", p->env_root,
             p->env_root[0] ? ":" : "", p->lower, p->upper, p->work);
    for (int i = 0; i < m->tmpl.nbinds && i < MAX_BINDS - SANDBOX_AGENTS_MAX; i++) {
        snprintf(p->bind_src[i], sizeof(p->bind_src[i]), "%s", m->tmpl.binds[i]);
        snprintf(p->bind_dst[i], sizeof(p->bind_dst[i]), "%s%s", p->root, m->tmpl.binds[i]);
        p->nbinds++;
    }
    for (size_t i = 0; i < m->cfg.nagents && p->nbinds < MAX_BINDS; i++) {
        snprintf(p->bind_src[p->nbinds], sizeof(p->bind_src[0]), "%s", m->cfg.agents[i].dir);
        snprintf(p->bind_dst[p->nbinds], sizeof(p->bind_dst[0]), "%s/opt/agents/%s", p->root,
                 m->cfg.agents[i].name);
        snprintf(p->opt_dir, sizeof(p->opt_dir), "%s/opt", p->root);
        snprintf(p->agents_dir, sizeof(p->agents_dir), "%s/opt/agents", p->root);
        p->nbinds++;
    }
    if (p->nbinds < MAX_BINDS &&
        sandbox_server_dir(sbx, p->bind_src[p->nbinds], sizeof(p->bind_src[0]))) {
        snprintf(p->bind_dst[p->nbinds], sizeof(p->bind_dst[0]), "%s" SANDBOX_SERVER_DIR, p->root);
        snprintf(p->opt_dir, sizeof(p->opt_dir), "%s/opt", p->root);
        p->nbinds++;
    }
    snprintf(p->ws_dst, sizeof(p->ws_dst), "%s/workspace", p->root);
    snprintf(p->tmp_dst, sizeof(p->tmp_dst), "%s/tmp", p->root);
    snprintf(p->dev_dst, sizeof(p->dev_dst), "%s/dev", p->root);
    snprintf(p->proc_dst, sizeof(p->proc_dst), "%s/proc", p->root);
    snprintf(p->tmp_opts, sizeof(p->tmp_opts), "size=%llu,mode=1777,uid=%u,gid=%u",
             (unsigned long long)m->cfg.tmp_bytes, p->uid, p->uid);
    snprintf(p->dev_opts, sizeof(p->dev_opts), "size=64k,nr_inodes=64,mode=755,uid=%u,gid=%u",
             p->uid, p->uid);
    snprintf(p->pts_opts, sizeof(p->pts_opts), "newinstance,ptmxmode=0666,mode=0620,gid=%u",
             p->uid + 5);
    snprintf(p->shm_opts, sizeof(p->shm_opts), "size=%llu,mode=1777,uid=%u,gid=%u",
             (unsigned long long)(m->cfg.tmp_bytes / 4), p->uid, p->uid);
    p->ncg = cgroup_procs_paths(sbx->cgroup, p->cg_procs, 4);
    p->listen_fd = -1;
    p->defer_net = sbx->net_deferred; /* only when the pool has its namespace */
    p->park_netns = m->park_netns;
    for (int i = 0; i < m->nlisteners && !p->defer_net; i++)
        p->ports[p->nports++] = m->listeners[i].port;
    snprintf(p->uid_map, sizeof(p->uid_map), "0 %u %u\n", p->uid, SANDBOX_IDS);
    snprintf(p->gid_map, sizeof(p->gid_map), "0 %u %u\n", p->uid, SANDBOX_IDS);
    snprintf(p->mkfs_root_owner, sizeof(p->mkfs_root_owner),
             "root_owner=%u:%u,lazy_itable_init=1,lazy_journal_init=1", p->uid, p->uid);
}

void sandbox_save(struct sandbox *sbx)
{
    struct store_sandbox row = {0};
    snprintf(row.id, sizeof(row.id), "%s", sbx->id);
    snprintf(row.template_name, sizeof(row.template_name), "%s", sbx->template_name);
    snprintf(row.cgroup, sizeof(row.cgroup), "%s", sbx->cgroup);
    row.running = sbx->state == SBX_RUNNING && !sbx->standby; /* to its owner, standby is stopped */
    row.init_pid = row.running ? sbx->init_pid : 0;
    row.init_start = row.running ? (int64_t)sbx->init_start : 0;
    row.started_at = sbx->started_at;
    row.last_used_at = time_now_ms();
    snprintf(row.env, sizeof(row.env), "%s", sbx->env);
    struct err err = {0};
    if (store_sandbox_update(sbx->m->store, &row, &err) < 0)
        log_error("sandbox save failed sbx=%s err=\"%s\"", sbx->id, err.msg);
}

void sandbox_notify(struct sandbox *sbx, const struct err *err)
{
    struct sandbox_waiter *w = sbx->waiters;
    sbx->waiters = NULL;
    while (w) {
        struct sandbox_waiter *next = w->next;
        if (!err)
            sbx->holds++;
        w->cb(w->ctx, err ? NULL : sbx, err);
        free(w);
        w = next;
    }
}

static void on_started(struct proc_watch *w, int status)
{
    struct sandbox *sbx = container_of(w, struct sandbox, start_watch);
    struct err err = {0};
    int pid = 0;
    /* The pid line, or instead of it the setup child's or the init's error: the setup child
     * resumes only once the init has executed sandbox-init or failed, and adds no pid line to a
     * failure. */
    if (sscanf(w->data, "pid %d", &pid) != 1 || pid <= 0) {
        err_set(&err, -EIO, "cannot start sandbox: %s",
                *w->data ? w->data : "setup process died without a report");
        size_t n = strlen(err.msg);
        if (n && err.msg[n - 1] == '\n')
            err.msg[n - 1] = '\0';
    } else {
        if (strstr(w->data, " userns-owner=root"))
            log_warn("sandbox user namespace owned by root sbx=%s: this host refuses user "
                     "namespaces to unprivileged users, so per-user kernel limits (inotify "
                     "instances, processes) are shared between sandboxes",
                     sbx->id);
        sbx->init_pid = pid;
        sbx->init_start = proc_start_time(pid);
        int fd = pidfd_open_pid(pid);
        if (fd < 0 || sbx->init_start == 0) {
            if (fd >= 0)
                close(fd);
            err_set(&err, -ESRCH, "cannot start sandbox: init process %d exited at once", pid);
        } else {
            sbx->pidfd = fd;
            sbx->ctl_old = false; /* a sandbox adopted from an earlier server, started anew */
        }
    }
    free(w->data);
    w->data = NULL;
    if (err.code) {
        log_error("sandbox start failed sbx=%s user=%s err=\"%s\"", sbx->id, sbx->user_id, err.msg);
        sandbox_drop_listeners(sbx);
        cgroup_destroy(sbx->cgroup);
        sbx->state = SBX_STOPPED;
        sbx->m->running--;
        sandbox_notify(sbx, &err);
        return;
    }
    sbx->state = SBX_RUNNING;
    int64_t took_us = time_mono_us() - sbx->start_t0;
    standby_gauges(sbx->m);
    metrics_gauge_set("sandbox_mcp_sandbox_last_start_seconds",
                      "How long the latest sandbox start took", (double)took_us / 1e6);
    sbx->started_at = time_now_ms();
    sbx->last_used = time_mono_ms();
    sbx->last_start_ms = took_us / 1000;
    sandbox_take_listeners(sbx);
    log_info("sandbox %s sbx=%s user=%s pid=%d template=%s cgroup=%s uid=%u ms=%.2f",
             sbx->standby ? "standby ready" : "started", sbx->id,
             sandbox_unowned(sbx) ? "(pool)" : sbx->user_id, pid, sbx->template_name,
             cgroup_mode_name(cgroup_mode()), sbx->m->cfg.uid_base + sbx->id_slot * SANDBOX_IDS,
             (double)took_us / 1000.0);
    /* Callers first; the row (for a later server to re-adopt it) after. */
    sandbox_notify(sbx, NULL);
    sandbox_save(sbx);
}

void sandbox_start(struct sandbox *sbx)
{
    struct sandbox_manager *m = sbx->m;
    struct err err = {0};
    sbx->generation++;
    sbx->warm = false;
    snprintf(sbx->cgroup, sizeof(sbx->cgroup), "%s", sbx->id);
    snprintf(sbx->template_name, sizeof(sbx->template_name), "%s", m->tmpl.name);
    struct cgroup_limits lim = {m->cfg.memory_bytes, m->cfg.pids_max, m->cfg.cpus};
    if (!sbx->id_slot &&
        store_sandbox_claim_slot(m->store, sbx->id, m->cfg.uid_ranges, &sbx->id_slot, &err) < 0)
        goto fail;
    if (cgroup_create(sbx->cgroup, &lim, &err) < 0)
        goto fail;
    struct setup_plan *p = xmalloc(sizeof(*p));
    plan_init(p, sbx);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        free(p);
        err_set(&err, -errno, "pipe: %s", strerror(errno));
        goto fail;
    }
    p->report_fd = fds[1];
    int lsp[2] = {-1, -1};
    if (p->nports && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, lsp) == 0)
        p->listen_fd = lsp[1];
    else
        p->nports = 0; /* opened by the helper once it runs */
    /* On v2 the setup child starts in the sandbox's group, so it need not join it: joining
     * waits for an RCU grace period, several milliseconds, most of a start. v1 has no way. */
    int cgfd = cgroup_open_dir(sbx->cgroup);
    pid_t pid = -1;
    if (cgfd >= 0) {
        int ncg = p->ncg;
        p->ncg = 0;
        pid = proc_fork_into_cgroup(cgfd);
        if (pid < 0) {
            p->ncg = ncg;
            if (!m->fork_into_warned)
                log_warn("sandbox clone-into-cgroup unavailable err=\"%s\" note=\"starts join "
                         "their cgroup after the fork instead, which is slower\"",
                         strerror(errno));
            m->fork_into_warned = true;
        }
        close(cgfd);
    }
    if (pid < 0)
        pid = fork();
    if (pid == 0) {
        close(fds[0]);
        if (lsp[0] >= 0)
            close(lsp[0]);
        setup_child(p);
    }
    int saved = errno;
    close(fds[1]);
    if (lsp[1] >= 0)
        close(lsp[1]);
    free(p);
    sbx->listen_rx = lsp[0];
    if (pid < 0) {
        close(fds[0]);
        sandbox_drop_listeners(sbx);
        err_set(&err, -saved, "fork: %s", strerror(saved));
        goto fail;
    }
    sbx->state = SBX_STARTING;
    m->running++;
    proc_watch_start(&sbx->start_watch, pid, fds[0], 4096, on_started);
    return;
fail:
    sandbox_start_failed(sbx, &err);
}

void sandbox_start_failed(struct sandbox *sbx, const struct err *err)
{
    log_error("sandbox start failed sbx=%s user=%s err=\"%s\"", sbx->id, sbx->user_id, err->msg);
    sandbox_notify(sbx, err);
}

bool sandbox_alive(struct sandbox *sbx)
{
    if (sbx->state != SBX_RUNNING || sbx->pidfd < 0)
        return false;
    /* A pidfd names one process, never a later one with the same number, and turns readable
     * when that process exits. */
    struct pollfd pfd = {.fd = sbx->pidfd, .events = POLLIN};
    return poll(&pfd, 1, 0) == 0;
}

void sandbox_stop(struct sandbox *sbx, const char *reason)
{
    if (sbx->state != SBX_RUNNING)
        return;
    if (sbx->pidfd >= 0) {
        /* Killing PID 1 of the namespace kills every process in it; the pidfd turns readable
         * once it has exited. */
        syscall(SYS_pidfd_send_signal, sbx->pidfd, SIGKILL, NULL, 0);
        sandbox_disk_resume(sbx); /* a frozen v1 process dies only once thawed */
        struct pollfd pfd = {.fd = sbx->pidfd, .events = POLLIN};
        poll(&pfd, 1, 2000);
        close(sbx->pidfd);
        sbx->pidfd = -1;
    }
    sandbox_exec_release(sbx);
    sbx->standby = false;
    for (int i = 0; i < sbx->m->nlisteners; i++)
        sbx->m->listeners[i].fn(sbx->m->listeners[i].ctx, sbx->id, -1);
    if (sbx->m->socket_hook.fn)
        sbx->m->socket_hook.fn(sbx->m->socket_hook.ctx, sbx->id, -1);
    /* Exec helpers live outside the pid namespace but inside the cgroup. */
    cgroup_destroy(sbx->cgroup);
    sbx->state = SBX_STOPPED;
    sbx->m->running--;
    standby_gauges(sbx->m);
    sandbox_save(sbx);
    log_info("sandbox stopped sbx=%s user=%s reason=%s", sbx->id, sbx->user_id, reason);
    if (sbx->waiters) { /* calls held back by a barrier (sandbox_barrier) */
        struct err err = {0};
        err_set(&err, -EAGAIN, "the sandbox was stopped (%s) before this call could start; retry",
                reason);
        sandbox_notify(sbx, &err);
    }
}

int sandbox_wipe(struct sandbox *sbx, struct err *err)
{
    char path[PATH_MAX];
    int r;
    snprintf(path, sizeof(path), "%s/disk", sbx->dir);
    /* A detached unmount of the image; the loop device clears itself once it is released. */
    if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
        return err_set(err, -errno, "cannot unmount '%s': %s", path, strerror(errno));
    _cleanup_close_ int dfd = open(sbx->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return err_set(err, -errno, "cannot open '%s': %s", sbx->dir, strerror(errno));
    static const char *const parts[] = {"disk.img",  "disk",   "upper",   "work",
                                        "workspace", "wswork", "envroot", "envws"};
    for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
        if ((r = tree_remove(dfd, parts[i])) < 0)
            return err_set(err, r, "cannot remove '%s/%s': %s", sbx->dir, parts[i], strerror(-r));
    if (sbx->env[0]) { /* what starts next starts on the template alone */
        sbx->env[0] = '\0';
        sandbox_save(sbx);
    }
    return 0;
}

const char *sandbox_id(const struct sandbox *sbx)
{
    return sbx->id;
}

const char *sandbox_env_of(const struct sandbox *sbx)
{
    return sbx->env;
}

int sandbox_usage(const struct sandbox *sbx, uint64_t *memory_bytes, uint64_t *processes)
{
    uint64_t tasks = 0;
    int r = cgroup_usage(sbx->cgroup, memory_bytes, &tasks);
    uint64_t own = 1 + (sbx->fs_pid > 0); /* not counting the init and the file worker */
    *processes = tasks > own ? tasks - own : 0;
    return r;
}

json_t *sandbox_describe(const struct sandbox *sbx)
{
    const struct sandbox_config *c = &sbx->m->cfg;
    char started[32];
    time_format_rfc3339(sbx->started_at, started);
    json_t *limits = json_pack("{s:I, s:I, s:I, s:I}", "memory_bytes", (json_int_t)c->memory_bytes,
                               "processes", (json_int_t)c->pids_max, "disk_bytes",
                               (json_int_t)c->disk_bytes, "tmp_bytes", (json_int_t)c->tmp_bytes);
    if (c->cpus > 0)
        json_object_set_new(limits, "cpus", json_real(c->cpus));
    json_t *d =
        json_pack("{s:s, s:s, s:s, s:o, s:s, s:I, s:I, s:b}", "sandbox_id", sbx->id, "template",
                  sbx->template_name, "cgroup", cgroup_mode_name(cgroup_mode()), "limits", limits,
                  "started_at", started, "uptime_ms", (json_int_t)(time_now_ms() - sbx->started_at),
                  "start_ms", (json_int_t)sbx->last_start_ms, "warm", sbx->warm);
    char *note = sandbox_manager_template_note(sbx->m, sbx->template_name);
    if (note)
        json_object_set_new(d, "template_note", json_string(note));
    free(note);
    return d;
}

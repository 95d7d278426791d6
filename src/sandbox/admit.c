/* Admission: whether one more sandbox may run, decided before sandbox_start and never from
 * it. Room for it (the user's limit, the server's capacity) and disk room for its image (the
 * user's share, the server's total, the host's free space: thin, above the reserve the disk
 * watcher keeps, or strict, room for every running image to grow to its size), each made by
 * stopping idle running sandboxes, least recently used first, where that helps. Runs on the loop;
 * reads /proc and the sandboxes' directories, never blocks on a sandbox. */
#include "sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "store/store.h"

#define WARM_PROCS_MAX 256
/* What a new image takes to start, above the reserve (a fresh 10 GiB ext4 holds about 4 MiB,
 * the layer's first files a few more). */
#define SANDBOX_DISK_START_BYTES (64ull << 20)

/* A process's command name and session, as /proc/<pid>/stat gives them (host pids). */
static bool proc_stat(pid_t pid, char comm[32], pid_t *session)
{
    char path[64], text[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
    if (n <= 0)
        return false;
    text[n] = '\0';
    char *open_paren = strchr(text, '('), *close_paren = strrchr(text, ')');
    int sid;
    if (!open_paren || !close_paren || close_paren < open_paren ||
        sscanf(close_paren + 1, " %*c %*d %*d %d", &sid) != 1)
        return false;
    size_t len = (size_t)(close_paren - open_paren - 1);
    if (len > 31)
        len = 31;
    memcpy(comm, open_paren + 1, len);
    comm[len] = '\0';
    *session = sid;
    return true;
}

/* Whether every process of s but its init is a warm agent's (a run's OpenCode server kept for the
 * session's next run, src/sandbox/helper/agent.c): its keeper and what runs in the keeper's
 * session. Such a sandbox is idle: it is stopped when idle, or to make room, like any other (the
 * agent is started again with the next run). A process naming itself so only lets its own
 * sandbox be stopped. */
static bool only_warm_agent(const struct sandbox *s)
{
    char paths[4][4096];
    if (cgroup_procs_paths(s->cgroup, paths, 4) < 1)
        return false;
    _cleanup_fclose_ FILE *f = fopen(paths[0], "re");
    pid_t sids[WARM_PROCS_MAX], keepers[8]; /* the keepers' sessions */
    size_t n = 0, nk = 0;
    int pid;
    while (f && fscanf(f, "%d", &pid) == 1) {
        char comm[32];
        if (n == WARM_PROCS_MAX)
            return false;
        if (pid == s->init_pid || pid == s->fs_pid || !proc_stat(pid, comm, &sids[n]))
            continue;
        if (strcmp(comm, "sandbox-keeper") == 0 && nk < ARRAY_SIZE(keepers))
            keepers[nk++] = sids[n];
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        bool kept = false;
        for (size_t k = 0; k < nk && !kept; k++)
            kept = sids[i] == keepers[k];
        if (!kept)
            return false;
    }
    return f != NULL && nk > 0;
}

bool sandbox_busy(struct sandbox *s)
{
    if (s->holds > 0 || s->state != SBX_RUNNING)
        return true;
    uint64_t mem, procs;
    return sandbox_usage(s, &mem, &procs) == 0 && procs > 0 && !only_warm_agent(s);
}

/* What the disk image of sandbox `id` holds now (its allocated blocks) and may still take (up to
 * its size): with no image yet, nothing and the whole configured size. */
struct image_use {
    uint64_t used, room;
};

static struct image_use image_use(const struct sandbox_manager *m, const char *id)
{
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof(path), "%s/sandboxes/%s/disk.img", m->data_dir, id);
    if (stat(path, &st) < 0)
        return (struct image_use){0, m->cfg.disk_bytes};
    uint64_t used = (uint64_t)st.st_blocks * 512, size = (uint64_t)st.st_size;
    return (struct image_use){used, size > used ? size - used : 0};
}

struct user_disk {
    const struct sandbox_manager *m;
    const struct sandbox *sbx;
    uint64_t total;
};

/* A sandbox of the user: what its image holds, and what it may still take while it runs. */
static void add_user_image(const char *id, void *ctx)
{
    struct user_disk *u = ctx;
    if (strcmp(id, u->sbx->id) == 0)
        return;
    struct image_use iu = image_use(u->m, id);
    u->total += iu.used + (sandbox_find_running(u->m, id) ? iu.room : 0);
}

int sandbox_disk_check(struct sandbox_manager *m, const struct sandbox *sbx, bool *user_limit,
                       struct err *err)
{
    *user_limit = false;
    const uint64_t mib = 1 << 20;
    if (!m->cfg.disk_bytes)
        return 0;
    /* A stopped image cannot grow; a running one may, up to its size. */
    const struct image_use mine = image_use(m, sbx->id);
    uint64_t room = 0;
    for (const struct sandbox *s = m->all; s; s = s->next)
        if (s != sbx && s->state != SBX_STOPPED)
            room += image_use(m, s->id).room;
    if (m->cfg.disk_user_bytes) {
        struct user_disk u = {m, sbx, mine.used + mine.room};
        int r = store_sandbox_list_with_files(m->store, sbx->user_id, add_user_image, &u, err);
        if (r < 0)
            return r;
        if (u.total > m->cfg.disk_user_bytes) {
            *user_limit = true;
            return err_set(err, -ENOSPC,
                           "your sandboxes' disks would hold up to %llu MiB with this one "
                           "running, more than the %llu MiB one user may have on this server; "
                           "continue in one of your sessions (session_id), stop using old ones "
                           "and wait until retention removes them",
                           (unsigned long long)(u.total / mib),
                           (unsigned long long)(m->cfg.disk_user_bytes / mib));
        }
    }
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/sandboxes", m->data_dir);
    if (m->cfg.disk_total_bytes) {
        uint64_t used = 0;
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d)))
            if (de->d_name[0] != '.' && strcmp(de->d_name, sbx->id) != 0)
                used += image_use(m, de->d_name).used;
        if (d)
            closedir(d);
        uint64_t total = used + room + mine.used + mine.room;
        if (total > m->cfg.disk_total_bytes)
            return err_set(err, room ? -EBUSY : -ENOSPC,
                           "the sandboxes' disks would hold up to %llu MiB with this one running, "
                           "more than the %llu MiB this server allows (SANDBOX_DISK_TOTAL_MB); "
                           "retry when other sandboxes have stopped",
                           (unsigned long long)(total / mib),
                           (unsigned long long)(m->cfg.disk_total_bytes / mib));
        return 0;
    }
    struct statvfs vfs;
    if (statvfs(path, &vfs) < 0)
        return err_set(err, -errno, "cannot stat '%s': %s", path, strerror(errno));
    uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    if (!m->cfg.disk_strict) {
        /* Thin: by what the images hold. The filesystem keeps its reserve above what a new
         * image takes to start; the watcher (diskwatch.c) keeps it while they grow. */
        uint64_t reserve = disk_reserve(m, (uint64_t)vfs.f_blocks * vfs.f_frsize);
        uint64_t need = reserve + (mine.used ? 0 : SANDBOX_DISK_START_BYTES);
        if (m->disk.low || avail < need)
            return err_set(err, -ENOSPC,
                           "the server's disk is nearly full: %llu MiB free, of which it keeps "
                           "%llu MiB in reserve for the sandboxes running (SANDBOX_DISK_RESERVE_MB)"
                           ", so no sandbox starts now; retry once the operator has freed space",
                           (unsigned long long)(avail / mib), (unsigned long long)(reserve / mib));
        return 0;
    }
    /* Strict: what the running images may still grow into, this one's included, must fit in
     * what the filesystem has free, so that no image finds the disk full. */
    if (room + mine.room > avail)
        return err_set(err, room ? -EBUSY : -ENOSPC,
                       "no disk room for this sandbox: the host has %llu MiB free, the running "
                       "sandboxes' disks may still grow by %llu MiB and this one's by %llu MiB, "
                       "which would overcommit it; %sfree space on the host, lower "
                       "SANDBOX_DISK_MB, or set SANDBOX_DISK_TOTAL_MB to allow more",
                       (unsigned long long)(avail / mib), (unsigned long long)(room / mib),
                       (unsigned long long)(mine.room / mib),
                       room ? "retry when other sandboxes have stopped, " : "");
    return 0;
}

/* The least recently used running sandbox other than sbx that is idle (no call in flight, no
 * process running), of user_id or of anyone's when NULL: a pooled one first (anyone's), then,
 * when standby, the one on standby longest, which lru_idle otherwise passes over. */
static struct sandbox *lru_idle(struct sandbox_manager *m, const char *user_id,
                                const struct sandbox *sbx, bool standby)
{
    struct sandbox *lru = NULL;
    for (struct sandbox *s = m->all; s; s = s->next) {
        if (s == sbx || s->state != SBX_RUNNING || s->holds > 0 || s->retiring ||
            (user_id && strcmp(s->user_id, user_id) != 0) || (s->standby && !standby))
            continue;
        if (!user_id && sandbox_unowned(s))
            return s;
        if (s->standby && (!lru || !lru->standby || s->standby_at < lru->standby_at)) {
            lru = s;
            continue;
        }
        if (lru && lru->standby)
            continue;
        if ((!lru || s->last_used < lru->last_used) && !sandbox_busy(s))
            lru = s;
    }
    return lru;
}

int sandbox_disk_admit(struct sandbox_manager *m, const struct sandbox *sbx, struct err *err)
{
    /* An idle running sandbox's image may still grow as long as it runs: stopping it (its files
     * stay) gives that room back, as the capacity limit stops one for a slot. */
    for (;;) {
        bool user_limit;
        int r = sandbox_disk_check(m, sbx, &user_limit, err);
        if (r == 0)
            return 0;
        /* thin: stopping a sandbox frees nothing on the disk */
        if (!user_limit && !m->cfg.disk_strict && !m->cfg.disk_total_bytes)
            return r;
        struct sandbox *lru = lru_idle(m, user_limit ? sbx->user_id : NULL, sbx, true);
        if (!lru)
            return r;
        sandbox_stop(lru, "evicted (disk room)");
    }
}

int sandbox_user_room(struct sandbox_manager *m, const char *user_id, const struct sandbox *sbx,
                      const struct sandbox *replaces, struct err *err)
{
    unsigned mine = 0;
    for (struct sandbox *s = m->all; s; s = s->next)
        if (s != sbx && s != replaces && strcmp(s->user_id, user_id) == 0 &&
            s->state != SBX_STOPPED && !s->standby)
            mine++;
    if (mine >= m->cfg.max_running_user) {
        struct sandbox *own_lru = lru_idle(m, user_id, sbx, false);
        if (!own_lru)
            return err_set(err, -EBUSY,
                           "you have %u sandbox%s running (your own and your runs' sessions), "
                           "the most one user may have on this server, and all are busy; retry "
                           "when a command or run of yours has ended",
                           mine, mine == 1 ? "" : "es");
        sandbox_stop(own_lru, "evicted (user limit)");
    }
    return 0;
}

int sandbox_make_room(struct sandbox_manager *m, const struct sandbox *sbx, struct err *err)
{
    int r = sandbox_user_room(m, sbx->user_id, sbx, NULL, err);
    if (r < 0)
        return r;
    if (m->running < m->cfg.max_running)
        return 0;
    struct sandbox *lru = lru_idle(m, NULL, sbx, true);
    if (!lru)
        return err_set(err, -EBUSY, "at capacity: all %u sandboxes are busy; retry later",
                       m->cfg.max_running);
    sandbox_stop(lru, "evicted");
    return 0;
}

void sandbox_admit_start(struct sandbox *sbx)
{
    struct err err = {0};
    sbx->start_t0 = time_mono_us();
    /* Starting over discards the image first, so that it is not counted as it was. */
    if (sbx->fresh_pending) {
        sbx->fresh_pending = false;
        if (sandbox_wipe(sbx, &err) < 0) {
            sandbox_start_failed(sbx, &err);
            return;
        }
    }
    if (sandbox_disk_admit(sbx->m, sbx, &err) < 0) {
        sandbox_start_failed(sbx, &err);
        return;
    }
    sandbox_start(sbx);
}

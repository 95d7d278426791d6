/* The data dir's disk, watched once a second. Sandbox images are sparse files: with thin
 * admission (the default) a sandbox starts while the filesystem has more free than its reserve,
 * whatever the images could still grow to, so that density follows what they really hold. The
 * watcher then keeps the reserve, as a thin pool's monitor does: under it,
 *   1. new starts are refused (admit.c) and the warm pool empties (its images are removed),
 *   2. what the images' files freed is given back to the host (FITRIM of each mounted image,
 *      whose loop device punches the freed blocks out of its file),
 *   3. idle sandboxes are stopped (their images can no longer grow),
 *   4. the running sandbox whose image grew most since the last look is paused (its cgroup
 *      frozen), one more each look while the disk is still under the reserve and images still
 *      grow; its tool calls are answered with the reason.
 * Once free space is back above the reserve and a half, the paused ones resume. Strict admission
 * (SANDBOX_DISK_ADMIT=strict) admits only while every running image could grow to its size, so
 * the watcher has nothing to do unless something else fills the disk.
 *
 * A disk that fills all the same (another program on the host) makes an image's ext4 meet write
 * errors, after which the kernel keeps it read-only: the watcher notes it, tools say why their
 * writes fail, and once the disk has room again an idle such sandbox is stopped and its image
 * unmounted, so that its next start checks and repairs it (setup.c). */
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/util.h"
#include "store/store.h"

#define DISK_WATCH_MS 1000
#define TRIM_EVERY_MS 10000 /* FITRIM of every image at most this often while low */
#define MIB (1ull << 20)
/* Free space under which a failure in a sandbox is put down to the disk, whatever the reserve */
#define SANDBOX_DISK_SHORT_BYTES (64ull << 20)
#define DISK_SHORT_RECENT_MS 60000 /* ... or was, this recently */

uint64_t disk_reserve(const struct sandbox_manager *m, uint64_t fs_bytes)
{
    if (m->cfg.disk_reserve_bytes)
        return m->cfg.disk_reserve_bytes;
    uint64_t r = fs_bytes / 20;
    if (r < 256 * MIB)
        r = 256 * MIB;
    if (r > 4096 * MIB)
        r = 4096 * MIB;
    return r > fs_bytes / 10 ? fs_bytes / 10 : r;
}

bool sandbox_image_has_errors(const char *img)
{
    unsigned char sb[1024];
    int fd = open(img, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? pread(fd, sb, sizeof(sb), 1024) : -1;
    if (fd >= 0)
        close(fd);
    if (n != (ssize_t)sizeof(sb))
        return false;
    unsigned state = sb[58] | (unsigned)sb[59] << 8;
    uint32_t errors = sb[0x194] | (uint32_t)sb[0x195] << 8 | (uint32_t)sb[0x196] << 16 |
                      (uint32_t)sb[0x197] << 24;
    return (state & 0x0002) || errors != 0;
}

/* Whether sbx's image met write errors: its filesystem read-only, or errors recorded. */
static bool image_failed(const struct sandbox *s)
{
    char path[PATH_MAX];
    struct statvfs img;
    snprintf(path, sizeof(path), "%s/disk", s->dir);
    if (statvfs(path, &img) == 0 && (img.f_flag & ST_RDONLY))
        return true;
    snprintf(path, sizeof(path), "%s/disk.img", s->dir);
    return sandbox_image_has_errors(path);
}

/* The blocks a sandbox's image holds now. */
static uint64_t image_blocks(const struct sandbox *s)
{
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof(path), "%s/disk.img", s->dir);
    return stat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

/* Whether sbx's image is mounted (it stays so across idle stops). */
static bool image_mounted(const struct sandbox *s, struct statvfs *vfs)
{
    char path[PATH_MAX];
    struct stat top, below;
    snprintf(path, sizeof(path), "%s/disk", s->dir);
    return stat(path, &top) == 0 && stat(s->dir, &below) == 0 && top.st_dev != below.st_dev &&
           statvfs(path, vfs) == 0;
}

/* Give back to the host what the image's files no longer hold. */
static void image_trim(const struct sandbox *s)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/disk", s->dir);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct fstrim_range range = {.start = 0, .len = UINT64_MAX, .minlen = 0};
    uint64_t held = image_blocks(s);
    if (fd >= 0 && ioctl(fd, FITRIM, &range) == 0 && held > image_blocks(s) + MIB)
        log_info("sandbox disk trimmed sbx=%s freed_mb=%llu", s->id,
                 (unsigned long long)((held - image_blocks(s)) / MIB));
}

void sandbox_disk_resume(struct sandbox *s)
{
    if (!s->disk_paused)
        return;
    s->disk_paused = false;
    if (s->m->disk.paused > 0)
        s->m->disk.paused--;
    if (s->state == SBX_RUNNING && cgroup_freeze(s->cgroup, false) < 0)
        log_warn("sandbox thaw failed sbx=%s", s->id);
    metrics_gauge_set("sandbox_mcp_sandboxes_paused", "Sandboxes paused for want of disk",
                      s->m->disk.paused);
}

int sandbox_disk_paused_err(const struct sandbox *s, struct err *err)
{
    const struct disk_watch *d = &s->m->disk;
    return err_set(err, -ENOSPC,
                   "this sandbox is paused: the server's disk is nearly full (%llu MiB free, %llu "
                   "MiB kept in reserve) and it was writing the most; its processes and files "
                   "are kept, and it resumes by itself once the operator frees space",
                   (unsigned long long)(d->avail / MIB), (unsigned long long)(d->reserve / MIB));
}

bool sandbox_disk_note(const struct sandbox *s, char *buf, size_t len)
{
    const struct sandbox_manager *m = s->m;
    struct statvfs img, host;
    char path[PATH_MAX];
    if (s->disk_failed || (image_mounted(s, &img) && image_failed(s))) {
        snprintf(buf, len,
                 "this sandbox's disk stopped taking writes when the server's disk filled up (its "
                 "files can still be read); it is checked and repaired when it next starts, "
                 "which happens by itself once the server has room and nothing runs in it");
        return true;
    }
    snprintf(path, sizeof(path), "%s/sandboxes", m->data_dir);
    if (!m->cfg.disk_bytes || statvfs(path, &host) < 0)
        return false;
    uint64_t avail = (uint64_t)host.f_bavail * host.f_frsize;
    uint64_t reserve = disk_reserve(m, (uint64_t)host.f_blocks * host.f_frsize);
    if (avail < reserve || avail < SANDBOX_DISK_SHORT_BYTES)
        snprintf(buf, len,
                 "the server's disk is nearly full (%llu MiB free, %llu MiB kept in reserve): "
                 "writes that need more room fail until the operator frees space",
                 (unsigned long long)(avail / MIB), (unsigned long long)(reserve / MIB));
    else if (m->disk.short_at && time_mono_ms() - m->disk.short_at < DISK_SHORT_RECENT_MS)
        snprintf(buf, len,
                 "the server's disk was nearly full in the last minute (%llu MiB free now): a "
                 "write that needed more room then failed, and may work now",
                 (unsigned long long)(avail / MIB));
    else
        return false;
    return true;
}

bool sandbox_manager_health(void *ctx, json_t *health)
{
    const struct sandbox_manager *m = ctx;
    const struct disk_watch *d = &m->disk;
    if (!m->cfg.disk_bytes)
        return false;
    /* /healthz answers anyone: whether, not how much (the bytes are on /metrics, behind its
     * token) */
    json_object_set_new(health, "disk",
                        json_pack("{s:b, s:i}", "low", d->low, "paused", (int)d->paused));
    return d->low;
}

static void pause_writer(struct sandbox_manager *m, struct sandbox *s, uint64_t grew)
{
    struct err why = {0};
    int r = cgroup_freeze(s->cgroup, true);
    if (r < 0) {
        log_warn("sandbox pause failed sbx=%s err=\"%s\": stopping it instead", s->id,
                 strerror(-r));
        sandbox_stop(s, "disk full");
        return;
    }
    s->disk_paused = true;
    m->disk.paused++;
    metrics_gauge_set("sandbox_mcp_sandboxes_paused", "Sandboxes paused for want of disk",
                      m->disk.paused);
    log_warn("sandbox paused sbx=%s user=%s grew_mb=%llu free_mb=%llu reserve_mb=%llu "
             "reason=\"disk nearly full\"",
             s->id, s->user_id, (unsigned long long)(grew / MIB),
             (unsigned long long)(m->disk.avail / MIB),
             (unsigned long long)(m->disk.reserve / MIB));
    sandbox_disk_paused_err(s, &why);
    exec_answer_now(s, &why);
}

static void on_disk_timer(struct loop_timer *t);

void disk_watch_tick(struct sandbox_manager *m)
{
    struct disk_watch *d = &m->disk;
    char path[PATH_MAX];
    struct statvfs vfs;
    snprintf(path, sizeof(path), "%s/sandboxes", m->data_dir);
    if (statvfs(path, &vfs) < 0)
        return;
    d->avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    d->reserve = disk_reserve(m, (uint64_t)vfs.f_blocks * vfs.f_frsize);
    metrics_gauge_set("sandbox_mcp_disk_free_bytes", "Free bytes on the data dir's filesystem",
                      (double)d->avail);
    if (d->avail < d->reserve || d->avail < SANDBOX_DISK_SHORT_BYTES)
        d->short_at = time_mono_ms();
    /* What each running image grew by since the last look; which images went read-only. */
    struct sandbox *top = NULL;
    uint64_t top_grew = 0;
    for (struct sandbox *s = m->all; s; s = s->next) {
        struct statvfs img;
        if (s->state != SBX_RUNNING)
            continue;
        /* a first look (a sandbox just started) sets where its growth counts from */
        uint64_t used = image_blocks(s),
                 grew = s->disk_seen && used > s->disk_seen ? used - s->disk_seen : 0;
        s->disk_seen = used;
        if (!s->disk_paused && grew > top_grew && !sandbox_unowned(s)) {
            top = s;
            top_grew = grew;
        }
        if (!s->disk_failed && image_mounted(s, &img) && image_failed(s)) {
            s->disk_failed = true;
            log_error("sandbox disk failed sbx=%s user=%s free_mb=%llu: its filesystem met "
                      "write errors and is read-only until checked at its next start",
                      s->id, s->user_id, (unsigned long long)(d->avail / MIB));
        }
    }
    if (d->avail < d->reserve) {
        if (!d->low)
            log_warn("disk low free_mb=%llu reserve_mb=%llu: new sandboxes refused, the pool "
                     "emptied, idle sandboxes stopped, the busiest writer paused",
                     (unsigned long long)(d->avail / MIB), (unsigned long long)(d->reserve / MIB));
        d->low = true;
        for (struct sandbox *s = m->all, *next; s; s = next) {
            next = s->next;
            if (sandbox_unowned(s) && !s->retiring && s->holds == 0 && !s->waiters &&
                s->state != SBX_STARTING)
                sandbox_forget(s, "disk low");
        }
        int64_t now = time_mono_ms();
        if (now - d->trimmed_at >= TRIM_EVERY_MS) {
            d->trimmed_at = now;
            for (struct sandbox *s = m->all; s; s = s->next) {
                struct statvfs img;
                if (image_mounted(s, &img) && !image_failed(s))
                    image_trim(s);
            }
        }
        for (struct sandbox *s = m->all; s; s = s->next)
            if (s->state == SBX_RUNNING && !s->disk_paused && s->holds == 0 && !s->retiring &&
                !sandbox_busy(s))
                sandbox_stop(s, "disk low");
        if (top && top->state == SBX_RUNNING)
            pause_writer(m, top, top_grew);
    } else if (d->low && d->avail >= d->reserve + d->reserve / 2) {
        log_info("disk room again free_mb=%llu reserve_mb=%llu paused=%u",
                 (unsigned long long)(d->avail / MIB), (unsigned long long)(d->reserve / MIB),
                 d->paused);
        d->low = false;
        for (struct sandbox *s = m->all; s; s = s->next)
            sandbox_disk_resume(s);
        pool_schedule(m);
    }
    if (!d->low)
        store_keep_reserve(m->store);
    /* With room again, an idle sandbox whose image failed is stopped and its image unmounted:
     * its next start checks it. */
    for (struct sandbox *s = m->all; s && !d->low; s = s->next) {
        if (!s->disk_failed || s->holds > 0 || s->waiters || s->state == SBX_STARTING ||
            (s->state == SBX_RUNNING && sandbox_busy(s)))
            continue;
        sandbox_stop(s, "disk failed");
        snprintf(path, sizeof(path), "%s/disk", s->dir);
        if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL)
            log_warn("sandbox disk unmount failed sbx=%s err=\"%s\"", s->id, strerror(errno));
        s->disk_failed = false;
    }
}

static void on_disk_timer(struct loop_timer *t)
{
    struct sandbox_manager *m = container_of(t, struct sandbox_manager, disk_timer);
    disk_watch_tick(m);
    loop_timer_start(&m->disk_timer, DISK_WATCH_MS, on_disk_timer);
}

void disk_watch_start(struct sandbox_manager *m)
{
    if (!m->cfg.disk_bytes)
        return;
    disk_watch_tick(m);
    loop_timer_start(&m->disk_timer, DISK_WATCH_MS, on_disk_timer);
}

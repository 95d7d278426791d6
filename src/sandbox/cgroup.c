/* cgroups for sandboxes: the unified v2 hierarchy where it has controllers, else the v1 memory,
 * pids, cpu and freezer controllers, else none (rlimits only). Each sandbox gets one group per
 * hierarchy under "sandbox-mcp/<instance>", the instance naming one data directory, so servers with
 * different data directories on one host never touch each other's sandboxes. */
#include "sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"

static enum cgroup_mode mode = CGROUP_NONE;
static char cg_root[PATH_MAX] = "/sys/fs/cgroup";
static char v2_parent[PATH_MAX]; /* v2: group holding the sandbox groups */
static char v1_parent[64];       /* v1: "sandbox-mcp/<instance>" below each controller */
static const char *const v1_ctrls[] = {"memory", "pids", "cpu", "freezer"};
static bool v1_have[4];
/* A start joins the first V1_JOINED (each join of a v1 hierarchy waits for an RCU grace
 * period); the freezer's group is made and joined only when a sandbox is paused (cgroup_freeze). */
enum { V1_MEMORY, V1_PIDS, V1_CPU, V1_FREEZER, V1_JOINED = V1_FREEZER };
static char instance_name[32];

static int write_file(const char *path, const char *value)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = strlen(value);
    if (write(fd, value, n) != (ssize_t)n)
        return -errno;
    return 0;
}

static int read_u64(const char *path, uint64_t *out)
{
    char buf[64];
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return n < 0 ? -errno : -EIO;
    buf[n] = '\0';
    *out = strtoull(buf, NULL, 10);
    return 0;
}

static bool file_has_word(const char *path, const char *word)
{
    char buf[512];
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    for (char *save = NULL, *tok = strtok_r(buf, " \n", &save); tok;
         tok = strtok_r(NULL, " \n", &save))
        if (strcmp(tok, word) == 0)
            return true;
    return false;
}

/* v2: our own group from /proc/self/cgroup ("0::/path"). */
static int v2_self(char *out, size_t len)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return -errno;
    char line[PATH_MAX];
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, len, "%s", line + 3);
            return 0;
        }
    }
    return -ENOENT;
}

static int enable_controllers(const char *group)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/cgroup.subtree_control", group);
    int r = 0;
    static const char *const want[] = {"+memory", "+pids", "+cpu"};
    for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
        char ctl[PATH_MAX];
        snprintf(ctl, sizeof(ctl), "%s/cgroup.controllers", group);
        if (!file_has_word(ctl, want[i] + 1))
            continue;
        int w = write_file(path, want[i]);
        if (w < 0)
            r = w;
    }
    return r;
}

/* v2 wants processes only in leaves: when our own group is not the root, move the server into a
 * "server" leaf and put sandboxes in a "sandbox-mcp" sibling, both under our group (systemd's
 * Delegate=yes gives us that group). */
static int setup_v2(const char *instance)
{
    char self[PATH_MAX], base[PATH_MAX];
    if (v2_self(self, sizeof(self)) < 0)
        return -ENOENT;
    if (strcmp(self, "/") == 0)
        snprintf(base, sizeof(base), "%s", cg_root);
    else
        snprintf(base, sizeof(base), "%s%s", cg_root, self);
    size_t blen = strlen(base);
    if (blen > 7 && strcmp(base + blen - 7, "/server") == 0)
        base[blen - 7] = '\0'; /* a restarted server already moved itself */
    char ctl[PATH_MAX];
    snprintf(ctl, sizeof(ctl), "%s/cgroup.controllers", base);
    if (!file_has_word(ctl, "memory") || !file_has_word(ctl, "pids"))
        return -ENOTSUP;
    if (strcmp(self, "/") != 0) {
        char leaf[PATH_MAX], procs[PATH_MAX], pid[32];
        snprintf(leaf, sizeof(leaf), "%s/server", base);
        if (mkdir(leaf, 0755) < 0 && errno != EEXIST)
            return -errno;
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", leaf);
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        int r = write_file(procs, pid);
        if (r < 0)
            return r;
    }
    int r = enable_controllers(base);
    if (r < 0)
        return r;
    snprintf(v2_parent, sizeof(v2_parent), "%s/sandbox-mcp", base);
    if (mkdir(v2_parent, 0755) < 0 && errno != EEXIST)
        return -errno;
    if ((r = enable_controllers(v2_parent)) < 0)
        return r;
    size_t n = strlen(v2_parent);
    snprintf(v2_parent + n, sizeof(v2_parent) - n, "/%s", instance);
    if (mkdir(v2_parent, 0755) < 0 && errno != EEXIST)
        return -errno;
    return enable_controllers(v2_parent);
}

static int setup_v1(const char *instance)
{
    bool any = false;
    snprintf(v1_parent, sizeof(v1_parent), "sandbox-mcp/%s", instance);
    for (size_t i = 0; i < ARRAY_SIZE(v1_ctrls); i++) {
        char path[PATH_MAX];
        struct statfs sfs;
        snprintf(path, sizeof(path), "%s/%s", cg_root, v1_ctrls[i]);
        if (statfs(path, &sfs) < 0 || sfs.f_type != CGROUP_SUPER_MAGIC)
            continue;
        snprintf(path, sizeof(path), "%s/%s/sandbox-mcp", cg_root, v1_ctrls[i]);
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            continue;
        /* the instance's own group is made with its first sandbox (ensure_parents) */
        v1_have[i] = true;
        any = true;
    }
    /* memory and pids both: a sandbox without either could exhaust the host */
    return any && v1_have[V1_MEMORY] && v1_have[V1_PIDS] ? 0 : -ENOTSUP;
}

enum cgroup_mode cgroup_setup(const char *instance, const char *root)
{
    struct statfs sfs;
    snprintf(instance_name, sizeof(instance_name), "%s", instance);
    if (root)
        snprintf(cg_root, sizeof(cg_root), "%s", root);
    if (statfs(cg_root, &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC) {
        int r = setup_v2(instance);
        if (r == 0)
            return mode = CGROUP_V2;
        log_warn("sandbox cgroup v2 unusable err=\"%s\"", strerror(-r));
    } else if (setup_v1(instance) == 0) {
        return mode = CGROUP_V1;
    }
    return mode = CGROUP_NONE;
}

enum cgroup_mode cgroup_mode(void)
{
    return mode;
}

const char *cgroup_mode_name(enum cgroup_mode m)
{
    return m == CGROUP_V2 ? "v2" : m == CGROUP_V1 ? "v1" : "none";
}

static void group_path(char *out, size_t len, int ctrl, const char *name, const char *file)
{
    if (mode == CGROUP_V2)
        snprintf(out, len, "%s/%s%s%s", v2_parent, name, file ? "/" : "", file ? file : "");
    else
        snprintf(out, len, "%s/%s/%s/%s%s%s", cg_root, v1_ctrls[ctrl], v1_parent, name,
                 file ? "/" : "", file ? file : "");
}

/* The parent groups may have been removed (sandbox stop-all from another process): recreate. */
static void ensure_parents(void)
{
    char path[PATH_MAX];
    if (mode == CGROUP_V2) {
        if (access(v2_parent, F_OK) < 0)
            setup_v2(instance_name);
        return;
    }
    for (size_t i = 0; i < ARRAY_SIZE(v1_ctrls); i++) {
        if (!v1_have[i])
            continue;
        snprintf(path, sizeof(path), "%s/%s/sandbox-mcp", cg_root, v1_ctrls[i]);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/%s/%s", cg_root, v1_ctrls[i], v1_parent);
        mkdir(path, 0755);
    }
}

int cgroup_create(const char *name, const struct cgroup_limits *lim, struct err *err)
{
    char path[PATH_MAX], val[64];
    int r;
    if (mode == CGROUP_NONE)
        return 0;
    ensure_parents();
    if (mode == CGROUP_V2) {
        group_path(path, sizeof(path), 0, name, NULL);
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            return err_set(err, -errno, "cannot create cgroup '%s': %s", path, strerror(errno));
        snprintf(val, sizeof(val), "%llu", (unsigned long long)lim->memory_bytes);
        group_path(path, sizeof(path), 0, name, "memory.max");
        if ((r = write_file(path, val)) < 0)
            return err_set(err, r, "cannot write '%s': %s", path, strerror(-r));
        group_path(path, sizeof(path), 0, name, "memory.swap.max");
        write_file(path, "0"); /* absent without swap accounting */
        snprintf(val, sizeof(val), "%llu", (unsigned long long)lim->pids_max);
        group_path(path, sizeof(path), 0, name, "pids.max");
        if ((r = write_file(path, val)) < 0)
            return err_set(err, r, "cannot write '%s': %s", path, strerror(-r));
        if (lim->cpus > 0) {
            snprintf(val, sizeof(val), "%llu 100000", (unsigned long long)(lim->cpus * 100000));
            group_path(path, sizeof(path), 0, name, "cpu.max");
            write_file(path, val);
        }
        return 0;
    }
    for (size_t i = 0; i < V1_JOINED; i++) {
        if (!v1_have[i])
            continue;
        group_path(path, sizeof(path), (int)i, name, NULL);
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            return err_set(err, -errno, "cannot create cgroup '%s': %s", path, strerror(errno));
    }
    snprintf(val, sizeof(val), "%llu", (unsigned long long)lim->memory_bytes);
    group_path(path, sizeof(path), 0, name, "memory.limit_in_bytes");
    if ((r = write_file(path, val)) < 0)
        return err_set(err, r, "cannot write '%s': %s", path, strerror(-r));
    group_path(path, sizeof(path), 0, name, "memory.memsw.limit_in_bytes");
    write_file(path, val); /* absent without swap accounting */
    if (v1_have[V1_PIDS]) {
        snprintf(val, sizeof(val), "%llu", (unsigned long long)lim->pids_max);
        group_path(path, sizeof(path), 1, name, "pids.max");
        if ((r = write_file(path, val)) < 0)
            return err_set(err, r, "cannot write '%s': %s", path, strerror(-r));
    }
    if (v1_have[V1_CPU] && lim->cpus > 0) {
        snprintf(val, sizeof(val), "%llu", (unsigned long long)(lim->cpus * 100000));
        group_path(path, sizeof(path), 2, name, "cpu.cfs_quota_us");
        write_file(path, val);
    }
    return 0;
}

int cgroup_procs_paths(const char *name, char out[][4096], int max)
{
    int n = 0;
    if (mode == CGROUP_V2 && max > 0) {
        group_path(out[n++], 4096, 0, name, "cgroup.procs");
    } else if (mode == CGROUP_V1) {
        for (size_t i = 0; i < V1_JOINED && n < max; i++)
            if (v1_have[i])
                group_path(out[n++], 4096, (int)i, name, "cgroup.procs");
    }
    return n;
}

int cgroup_open_dir(const char *name)
{
    if (mode != CGROUP_V2)
        return -1;
    char path[PATH_MAX];
    group_path(path, sizeof(path), 0, name, NULL);
    return open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static int kill_procs(const char *procs)
{
    _cleanup_fclose_ FILE *f = fopen(procs, "re");
    if (!f)
        return errno == ENOENT ? 0 : -errno;
    int n = 0;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1) {
        kill((pid_t)pid, SIGKILL);
        n++;
    }
    return n;
}

int cgroup_destroy(const char *name)
{
    char path[PATH_MAX];
    int r = 0;
    if (mode == CGROUP_NONE)
        return 0;
    int nctrl = mode == CGROUP_V2 ? 1 : (int)ARRAY_SIZE(v1_ctrls);
    for (int i = 0; i < nctrl; i++) {
        if (mode == CGROUP_V1 && !v1_have[i])
            continue;
        if (mode == CGROUP_V2) {
            group_path(path, sizeof(path), i, name, "cgroup.kill");
            write_file(path, "1");
        }
        group_path(path, sizeof(path), i, name, "cgroup.procs");
        kill_procs(path);
        if (i == 0)
            cgroup_freeze(name, false); /* a frozen v1 process dies only once thawed */
        group_path(path, sizeof(path), i, name, NULL);
        /* Killed processes take a moment to leave the group. */
        for (int tries = 0; rmdir(path) < 0 && errno == EBUSY && tries < 200; tries++)
            usleep(1000);
        if (access(path, F_OK) == 0)
            r = -EBUSY;
    }
    return r;
}

/* The pids listed in the procs file at path, sorted, at most max: how many. */
static size_t read_procs(const char *path, long *pids, size_t max)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    size_t n = 0;
    while (f && n < max && fscanf(f, "%ld", &pids[n]) == 1)
        n++;
    qsort(pids, n, sizeof(*pids), cmp_long);
    return n;
}

int cgroup_freeze(const char *name, bool frozen)
{
    char path[PATH_MAX];
    if (mode == CGROUP_V2) {
        group_path(path, sizeof(path), 0, name, "cgroup.freeze");
        return write_file(path, frozen ? "1" : "0");
    }
    if (mode != CGROUP_V1 || !v1_have[V1_FREEZER])
        return -ENOTSUP;
    group_path(path, sizeof(path), V1_FREEZER, name, NULL);
    if (!frozen) {
        group_path(path, sizeof(path), V1_FREEZER, name, "freezer.state");
        return access(path, F_OK) == 0 ? write_file(path, "THAWED") : 0;
    }
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return -errno;
    /* Move the group's processes in, again while one forked meanwhile is still outside (its
     * child, forked after its parent moved, is born inside). */
    char from[PATH_MAX], to[PATH_MAX];
    group_path(from, sizeof(from), V1_MEMORY, name, "cgroup.procs");
    group_path(to, sizeof(to), V1_FREEZER, name, "cgroup.procs");
    /* Each round reads both lists once: a sandbox forking as fast as it can (at most its pids
     * limit of processes) costs the loop a bounded number of rounds of n log n. */
    enum { FREEZE_ROUNDS = 20, FREEZE_PIDS = 8192 };
    long *in = xmalloc(FREEZE_PIDS * sizeof(long)), *done = xmalloc(FREEZE_PIDS * sizeof(long));
    for (int round = 0, moved = 1; moved && round < FREEZE_ROUNDS; round++) {
        moved = 0;
        size_t nin = read_procs(from, in, FREEZE_PIDS);
        size_t ndone = read_procs(to, done, FREEZE_PIDS);
        char buf[32];
        for (size_t i = 0; i < nin; i++)
            if (!bsearch(&in[i], done, ndone, sizeof(*done), cmp_long)) {
                snprintf(buf, sizeof(buf), "%ld", in[i]);
                moved += write_file(to, buf) == 0;
            }
    }
    free(in);
    free(done);
    group_path(path, sizeof(path), V1_FREEZER, name, "freezer.state");
    return write_file(path, "FROZEN");
}

int cgroup_usage(const char *name, uint64_t *memory_bytes, uint64_t *tasks)
{
    char path[PATH_MAX];
    *memory_bytes = *tasks = 0;
    if (mode == CGROUP_NONE)
        return -ENOTSUP;
    group_path(path, sizeof(path), 0, name,
               mode == CGROUP_V2 ? "memory.current" : "memory.usage_in_bytes");
    read_u64(path, memory_bytes);
    if (mode == CGROUP_V2 || v1_have[V1_PIDS]) {
        group_path(path, sizeof(path), 1, name, "pids.current");
        return read_u64(path, tasks);
    }
    return 0;
}

void cgroup_list(void (*fn)(const char *name, void *ctx), void *ctx)
{
    char path[PATH_MAX];
    if (mode == CGROUP_NONE)
        return;
    if (mode == CGROUP_V2)
        snprintf(path, sizeof(path), "%s", v2_parent);
    else
        snprintf(path, sizeof(path), "%s/memory/%s", cg_root, v1_parent);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_type == DT_DIR && de->d_name[0] != '.')
            fn(de->d_name, ctx);
    }
    closedir(d);
}

void cgroup_teardown(void)
{
    char path[PATH_MAX];
    if (mode == CGROUP_V2) {
        rmdir(v2_parent);
        return;
    }
    for (size_t i = 0; mode == CGROUP_V1 && i < ARRAY_SIZE(v1_ctrls); i++) {
        snprintf(path, sizeof(path), "%s/%s/%s", cg_root, v1_ctrls[i], v1_parent);
        rmdir(path);
    }
}

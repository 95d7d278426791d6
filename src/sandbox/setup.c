/* The setup child of a sandbox start: everything that runs between sandbox_start's fork and
 * the exec of sandbox-init, as crun's linux.c is to its container.c. The child (real root, host
 * namespaces)
 *   1. joins the sandbox's cgroup (v2: is created in it; v1: a helper joins it meanwhile, and it
 *      waits for that before step 6),
 *   2. with a disk limit, creates the sandbox's ext4 image on first use and mounts it (host
 *      mount namespace, so the workspace stays reachable from the host across idle stops),
 *   3. makes the sandbox's user namespace: owned by the sandbox's own host uid (not root, so
 *      per-user kernel counts such as inotify instances are per sandbox) and mapping root
 *      inside to the sandbox's own host id range (so no two sandboxes share an owner on disk),
 *   4. unshares mount, pid, net, uts, ipc and cgroup namespaces (owned by the host's user
 *      namespace, so root inside can never mount, reconfigure the network or set the hostname),
 *   5. builds the root: overlayfs (the template below, idmapped into the sandbox's range, the
 *      sandbox's layer above), the host's /usr read-only, /workspace, tmpfs /tmp, a minimal /dev,
 *   6. starts the init (in the setup child's memory until its exec, CLONE_VM | CLONE_VFORK), which
 *      mounts /proc, pivots into the new root, joins the user namespace of step 3 and executes
 *      sandbox-init from a sealed memfd.
 * It reports the init's pid on the pipe and exits; the init is then no child of the server and
 * outlives it.
 *
 * The rule of this file: it runs in a child of a multi-threaded server, so nothing here
 * allocates, takes a lock or logs. Its paths and options come ready in the plan (plan_init,
 * before the fork), the few it composes are built on the stack, and failures are reported on
 * the pipe (FAIL: child_report, then _exit(127)). */
#include "sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <linux/loop.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "sandbox/confine.h"
#include "sandbox/listen_ports.h"

_Static_assert(SANDBOX_LISTENERS_MAX <= LISTEN_PORTS_MAX, "one message holds every listener");

/* Set by whichever child fails; the init shares the setup child's memory until its exec, so the
 * setup child sees the init's failure when it resumes. */
static volatile int child_failed;

#define FAIL(stage)                                                                                \
    do {                                                                                           \
        child_report(p->report_fd, stage, errno);                                                  \
        child_failed = 1;                                                                          \
        _exit(127);                                                                                \
    } while (0)

static int write_all(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int saved = errno;
    close(fd);
    errno = saved;
    return w == (ssize_t)n ? 0 : -1;
}

static int mkdir_owned(const char *path, mode_t mode, uint32_t uid)
{
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return -1;
    return chown(path, uid, uid);
}

static bool is_mountpoint(const char *path, const char *parent)
{
    struct stat a, b;
    return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* Run program with argv, its standard streams on /dev/null and no environment: its wait status,
 * or -1 (errno set) when it could not be forked or waited for. */
static int child_run(const char *program, char *const argv[])
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
        char *envp[] = {NULL};
        execve(program, argv, envp);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return st;
}

static void child_mkfs(const struct setup_plan *p)
{
    int fd = open(p->disk_img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        FAIL("create disk image");
    if (ftruncate(fd, (off_t)p->disk_bytes) < 0)
        FAIL("size disk image");
    close(fd);
    char *argv[] = {(char *)"mkfs.ext4",
                    (char *)"-q",
                    (char *)"-F",
                    (char *)"-m",
                    (char *)"0",
                    (char *)"-E",
                    (char *)p->mkfs_root_owner,
                    (char *)p->disk_img,
                    NULL};
    int st = child_run(p->mkfs, argv);
    if (st < 0)
        FAIL("run mkfs");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        unlink(p->disk_img);
        errno = EIO;
        FAIL("mkfs.ext4 failed");
    }
}

/* An image whose ext4 recorded errors (the host's disk filled up under it, say) is checked and
 * repaired before it is mounted again. */
static void child_check_disk(const struct setup_plan *p)
{
    if (!sandbox_image_has_errors(p->disk_img))
        return;
    char *argv[] = {(char *)"e2fsck", (char *)"-f", (char *)"-y", (char *)p->disk_img, NULL};
    int st = child_run(p->fsck, argv);
    if (st < 0)
        FAIL("run e2fsck");
    /* 0: clean, 1 and 2: repaired, 4: errors left (mounted all the same), 8 and up: not run */
    if (!WIFEXITED(st) || WEXITSTATUS(st) >= 8) {
        errno = EIO;
        FAIL("e2fsck of the disk image failed");
    }
}

static void child_mount_disk(const struct setup_plan *p)
{
    if (access(p->disk_img, F_OK) < 0)
        child_mkfs(p);
    if (mkdir(p->disk_mnt, 0700) < 0 && errno != EEXIST)
        FAIL("create disk mount point");
    if (is_mountpoint(p->disk_mnt, p->dir))
        return;
    child_check_disk(p);
    int img = open(p->disk_img, O_RDWR | O_CLOEXEC);
    if (img < 0)
        FAIL("open disk image");
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        FAIL("open /dev/loop-control");
    for (int attempt = 0;; attempt++) {
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0)
            FAIL("find a free loop device");
        char dev[32];
        snprintf(dev, sizeof(dev), "/dev/loop%d", n);
        int lfd = open(dev, O_RDWR | O_CLOEXEC);
        if (lfd < 0 && errno == ENOENT) {
            /* a /dev without devtmpfs does not grow new nodes by itself */
            mknod(dev, S_IFBLK | 0660, makedev(7, n));
            lfd = open(dev, O_RDWR | O_CLOEXEC);
        }
        if (lfd < 0)
            FAIL("open loop device");
        struct loop_config lc;
        memset(&lc, 0, sizeof(lc));
        lc.fd = (uint32_t)img;
        lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        if (ioctl(lfd, LOOP_CONFIGURE, &lc) < 0) {
            close(lfd);
            if (errno == EBUSY && attempt < 20)
                continue; /* raced another attach */
            FAIL("attach loop device");
        }
        /* errors=remount-ro: an image that meets write errors (a full host disk) stops taking
         * writes at once, in a state the watcher sees (diskwatch.c) */
        if (mount(dev, p->disk_mnt, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME,
                  "errors=remount-ro") < 0)
            FAIL("mount disk image");
        close(lfd); /* the mount keeps the device; autoclear detaches it at unmount */
        break;
    }
    close(ctl);
    close(img);
}

/* --- a sandbox's files move to its own id range --- */

static uint32_t shift_id(uint32_t id, uint32_t from, uint32_t to)
{
    return id >= from && id - from < SANDBOX_IDS ? id - from + to : id;
}

/* Move the entries of the tree below dirfd from the id range at `from` to the one at `to`;
 * ids outside that range stay as they are. No allocation: one stack buffer and one open
 * directory per level. Returns 0 or -1 with errno. */
static int shift_tree(int dirfd, uint32_t from, uint32_t to, int depth)
{
    char buf[2048] __attribute__((aligned(8)));
    for (;;) {
        long n = syscall(SYS_getdents64, dirfd, buf, sizeof(buf));
        if (n <= 0)
            return (int)n;
        for (long off = 0; off < n;) {
            /* glibc's struct dirent64 has the kernel's layout */
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            off += d->d_reclen;
            if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
                continue;
            struct stat st;
            if (fstatat(dirfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -1;
            uint32_t uid = shift_id(st.st_uid, from, to), gid = shift_id(st.st_gid, from, to);
            if ((uid != st.st_uid || gid != st.st_gid) &&
                fchownat(dirfd, d->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                return -1;
            /* chown drops the set-id bits of files; they belonged to the file, not the range */
            if (S_ISREG(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID)) &&
                fchmodat(dirfd, d->d_name, st.st_mode & 07777, 0) < 0)
                return -1;
            if (!S_ISDIR(st.st_mode))
                continue;
            if (depth >= 1024) {
                errno = ELOOP;
                return -1;
            }
            int fd = openat(dirfd, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0)
                return -1;
            int r = shift_tree(fd, from, to, depth + 1);
            close(fd);
            if (r < 0)
                return r;
        }
    }
}

static void shift_dir(const struct setup_plan *p, const char *path, uint32_t from)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return;
        FAIL("open layer to move its ids");
    }
    struct stat st;
    if (fstat(fd, &st) < 0 ||
        fchown(fd, shift_id(st.st_uid, from, p->uid), shift_id(st.st_gid, from, p->uid)) < 0 ||
        shift_tree(fd, from, p->uid, 0) < 0)
        FAIL("move a layer to the sandbox's id range");
    close(fd);
}

/* Files made under another id range (by a server that gave every sandbox the same one, or
 * before SANDBOX_UID_BASE changed) follow the sandbox to its range, found from the owner of its
 * workspace directory, which is the root of the range that made it. */
static void child_shift_ids(const struct setup_plan *p)
{
    struct stat st;
    if (stat(p->ws, &st) < 0 || (st.st_uid >= p->uid && st.st_uid - p->uid < SANDBOX_IDS) ||
        st.st_uid < p->uid_base)
        return;
    uint32_t from = p->uid_base + (st.st_uid - p->uid_base) / SANDBOX_IDS * SANDBOX_IDS;
    shift_dir(p, p->ws, from);
    shift_dir(p, p->upper, from);
}

/* --- the sandbox's user namespace --- */

/* The stack of the short-lived process that makes the namespace; it shares the setup child's
 * memory (no page tables to copy) and exits before the setup child goes on. */
static char userns_stack[16 << 10] __attribute__((aligned(16)));

static int userns_maker(void *arg)
{
    const struct setup_plan *p = arg;
    char msg[1 + sizeof(int)] = {'u'};
    /* Raw system calls: glibc's set*id would signal threads of a process this one is not. */
    if (!p->userns_as_root && (syscall(SYS_setgroups, 0, NULL) < 0 ||
                               syscall(SYS_setresgid, p->uid, p->uid, p->uid) < 0 ||
                               syscall(SYS_setresuid, p->uid, p->uid, p->uid) < 0))
        msg[0] = 'e';
    if (msg[0] == 'u' && syscall(SYS_unshare, CLONE_NEWUSER) < 0)
        msg[0] = 'e';
    int e = errno;
    memcpy(msg + 1, &e, sizeof(e));
    if (write(p->userns_sync, msg, sizeof(msg)) == (ssize_t)sizeof(msg))
        (void)!read(p->userns_sync, msg, 1); /* until the namespace has its maps and a holder */
    _exit(0);
}

/* Make the namespace (with a process that unshares it and waits), write its id maps and keep a
 * descriptor of it. Returns 0, or -1 with errno when it could not be made. */
static int make_userns(struct setup_plan *p)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    p->userns_sync = sv[1];
    pid_t pid = clone(userns_maker, userns_stack + sizeof(userns_stack), CLONE_VM | SIGCHLD, p);
    int r = -1;
    char msg[1 + sizeof(int)], path[64];
    if (pid < 0)
        goto out;
    if (read(sv[0], msg, sizeof(msg)) != (ssize_t)sizeof(msg)) {
        errno = EPROTO;
    } else if (msg[0] != 'u') {
        memcpy(&errno, msg + 1, sizeof(int));
    } else {
        snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
        if (write_all(path, p->uid_map) == 0) {
            snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
            if (write_all(path, p->gid_map) == 0) {
                snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
                p->userns_fd = open(path, O_RDONLY | O_CLOEXEC);
                r = p->userns_fd < 0 ? -1 : 0;
            }
        }
    }
    int saved = errno;
    if (write(sv[0], "k", 1) < 0) {
        /* it has exited already */
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    errno = saved;
out:
    close(sv[0]);
    close(sv[1]);
    return r;
}

static void child_userns(struct setup_plan *p)
{
    if (make_userns(p) == 0)
        return;
    /* A host that forbids unprivileged users to make user namespaces (a sysctl, an LSM)
     * refuses our owner uid: fall back to root as the owner, which shares per-user kernel
     * counts between sandboxes, and say so. */
    if (errno != EPERM && errno != EACCES)
        FAIL("create user namespace");
    p->userns_as_root = true;
    if (make_userns(p) < 0)
        FAIL("create user namespace");
}

/* The template, read-only, with its ids mapped into the sandbox's range: a file owned by root
 * in the template belongs to the sandbox's root, whichever range that is. */
/* src mounted read-only at dst, idmapped from the template's id range into the sandbox's:
 * 0 or -1 with errno. */
static int idmapped(const struct setup_plan *p, const char *src, const char *dst)
{
    int fd = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (fd < 0)
        return -1;
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                          MOUNT_ATTR_NODEV,
                              .userns_fd = (uint64_t)p->userns_fd};
    int r = mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr));
    if (r == 0 && (r = mkdir(dst, 0700)) < 0 && errno == EEXIST)
        r = 0;
    if (r == 0)
        r = move_mount(fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

/* The template below everything, and an environment snapshot's trees above it. */
static void child_idmapped_lower(const struct setup_plan *p)
{
    if (idmapped(p, p->lower_src, p->lower) < 0)
        FAIL("mount the idmapped template (needs Linux 5.19 or later and a filesystem that "
             "supports idmapped mounts)");
    if (p->env_root[0] && (idmapped(p, p->env_root_src, p->env_root) < 0 ||
                           idmapped(p, p->env_ws_src, p->env_ws) < 0))
        FAIL("mount the environment snapshot");
}

static void bind_ro(const struct setup_plan *p, const char *src, const char *dst,
                    unsigned long extra)
{
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
        FAIL("bind mount");
    if (mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | extra,
              NULL) < 0)
        FAIL("remount read-only");
}

static void child_dev(const struct setup_plan *p)
{
    static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
    char path[PATH_MAX], src[64];
    if (mount("tmpfs", p->dev_dst, "tmpfs", MS_NOSUID | MS_NOEXEC, p->dev_opts) < 0)
        FAIL("mount /dev");
    for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
        snprintf(path, sizeof(path), "%s/%s", p->dev_dst, nodes[i]);
        snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
            FAIL("create device node");
        close(fd);
        if (mount(src, path, NULL, MS_BIND, NULL) < 0)
            FAIL("bind device node");
    }
    snprintf(path, sizeof(path), "%s/pts", p->dev_dst);
    mkdir(path, 0755);
    if (mount("devpts", path, "devpts", MS_NOSUID | MS_NOEXEC, p->pts_opts) < 0)
        FAIL("mount /dev/pts");
    snprintf(path, sizeof(path), "%s/shm", p->dev_dst);
    mkdir(path, 01777);
    if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, p->shm_opts) < 0)
        FAIL("mount /dev/shm");
    static const char *const links[][2] = {{"pts/ptmx", "ptmx"},
                                           {"/proc/self/fd", "fd"},
                                           {"/proc/self/fd/0", "stdin"},
                                           {"/proc/self/fd/1", "stdout"},
                                           {"/proc/self/fd/2", "stderr"}};
    for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
        snprintf(path, sizeof(path), "%s/%s", p->dev_dst, links[i][1]);
        if (symlink(links[i][0], path) < 0)
            FAIL("create /dev link");
    }
    if (mount(NULL, p->dev_dst, NULL, MS_REMOUNT | MS_NOSUID | MS_NOEXEC, p->dev_opts) < 0)
        FAIL("remount /dev");
}

/* The listening sockets of the registered ports, on 127.0.0.1 of the new network namespace,
 * sent to the server in one message (in the order of p->ports), so that it need not run a
 * helper into the namespace after the start (sandbox_open_listeners does for a sandbox it
 * adopts). */
static void child_listeners(const struct setup_plan *p)
{
    if (p->nports == 0)
        return;
    const char *stage = "";
    int r = listen_ports_send(p->listen_fd, p->ports, p->nports, &stage);
    if (r < 0) {
        errno = -r;
        FAIL(stage);
    }
    close(p->listen_fd);
}

/* The init: PID 1 of the new pid namespace. */
static void child_init(const struct setup_plan *p)
{
    setsid();
    /* A mount namespace of its own, so that pivoting leaves the setup child's root (and its
     * view of the host's /proc, where it writes our id maps) alone. */
    if (unshare(CLONE_NEWNS) < 0)
        FAIL("unshare mount namespace");
    if (mount("proc", p->proc_dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        FAIL("mount /proc");
    /* Like Docker: /proc/sys and friends read-only; kernel memory, keys, hardware and timing
     * details hidden (Docker's masked paths, and kallsyms): a file under /dev/null, a directory
     * under an empty read-only tmpfs. */
    static const char *const ro[] = {"sys", "sysrq-trigger", "irq", "bus", "fs"};
    static const char *const masked[] = {"acpi",  "asound",     "interrupts",    "kallsyms",
                                         "kcore", "keys",       "latency_stats", "sched_debug",
                                         "scsi",  "timer_list", "timer_stats"};
    char path[PATH_MAX], devnull[PATH_MAX];
    for (size_t i = 0; i < ARRAY_SIZE(ro); i++) {
        snprintf(path, sizeof(path), "%s/%s", p->proc_dst, ro[i]);
        if (access(path, F_OK) == 0)
            bind_ro(p, path, path, MS_NOEXEC);
    }
    snprintf(devnull, sizeof(devnull), "%s/null", p->dev_dst);
    for (size_t i = 0; i < ARRAY_SIZE(masked); i++) {
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", p->proc_dst, masked[i]);
        if (stat(path, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            if (mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      "size=4k,mode=0555") < 0)
                FAIL("mask /proc directory");
        } else if (mount(devnull, path, NULL, MS_BIND, NULL) < 0) {
            FAIL("mask /proc file");
        }
    }
    if (chdir(p->root) < 0)
        FAIL("chdir new root");
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        FAIL("pivot_root");
    if (umount2(".", MNT_DETACH) < 0)
        FAIL("detach old root");
    if (chdir("/") < 0)
        FAIL("chdir /");
    if (setns(p->userns_fd, CLONE_NEWUSER) < 0)
        FAIL("join the sandbox's user namespace");
    close(p->userns_fd);
    /* Raw system calls: the init shares the setup child's memory until its exec, and glibc's
     * set*id would act for the threads it believes that memory's process has. */
    if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setgroups, 0, NULL) < 0 ||
        syscall(SYS_setresuid, 0, 0, 0) < 0)
        FAIL("become root in the sandbox");
    /* A pooled sandbox's init confines itself when it is handed over, once it has made the
     * sandbox's network namespace (which needs the capabilities and system calls the policy
     * takes away); until then it runs nothing but itself, and refuses commands. It keeps the
     * policy in a memory file at descriptor 4 for that. */
    int policy = -1;
    if (p->defer_net) {
        const struct sock_fprog *filters;
        size_t nf = policy_filters_loaded(&filters);
        policy = confine_filters_save(filters, nf);
        if (policy < 0) {
            errno = -policy;
            FAIL("save sandbox policy");
        }
    } else if (policy_apply_child() < 0) {
        FAIL("apply sandbox policy");
    }
    /* The init lives as long as the sandbox and its descriptors are visible from inside
     * (/proc/1/fd): it keeps nothing of the server's, not even stdout and stderr. */
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(null_fd, 1) < 0 || dup2(null_fd, 2) < 0)
        FAIL("redirect init to /dev/null");
    /* Its only descriptor: the control socket, at 3. */
    int exe = fcntl(p->memfd, F_DUPFD_CLOEXEC, 10);
    if (p->ctl_fd == 3)
        fcntl(3, F_SETFD, 0);
    else if (dup2(p->ctl_fd, 3) < 0)
        FAIL("control socket");
    syscall(SYS_close_range, 4, ~0u, CLOSE_RANGE_CLOEXEC);
    if (policy >= 0 && dup2(policy, 4) < 0) /* dup2 leaves 4 open across the exec */
        FAIL("policy file");
    char *argv[] = {(char *)"sandbox-init", NULL};
    char *envp[] = {NULL};
    syscall(SYS_execveat, exe, "", argv, envp, AT_EMPTY_PATH);
    FAIL("exec sandbox-init");
}

/* Joining a cgroup (v1; v2 starts place the setup child in its group at the fork) waits for an
 * RCU grace period, several milliseconds on a virtual machine and most of a start. A helper
 * sharing the setup child's memory joins it to the sandbox's groups while the setup child builds
 * the sandbox, which must be done before the setup child enters a new cgroup namespace and forks
 * the init (whose processes are then all in the groups). It only opens and writes files and
 * exits; it reports by its exit status alone, since errno is shared with the setup child. */
struct attach {
    const struct setup_plan *p;
    char pid[16];
};
static char attach_stack[16 << 10] __attribute__((aligned(16)));

static int attach_main(void *arg)
{
    const struct attach *a = arg;
    for (int i = 0; i < a->p->ncg; i++) {
        int fd = open(a->p->cg_procs[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, a->pid, strlen(a->pid)) < 0)
            _exit(1);
        close(fd);
    }
    _exit(0);
}

static char init_stack[64 << 10] __attribute__((aligned(16)));

static int init_main(void *arg)
{
    child_init(arg);
    return 127; /* not reached: child_init executes sandbox-init or exits */
}

void setup_child(struct setup_plan *p)
{
    /* Do not take the server's process group or terminal signals along. */
    setsid();
    /* A pooled sandbox waits in an empty network namespace of its own kind, not the server's. */
    if (p->defer_net && setns(p->park_netns, CLONE_NEWNET) < 0)
        FAIL("enter the pool's network namespace");
    struct attach attach = {.p = p};
    pid_t attacher = 0;
    if (p->ncg > 0) {
        snprintf(attach.pid, sizeof(attach.pid), "%d", (int)getpid());
        attacher =
            clone(attach_main, attach_stack + sizeof(attach_stack), CLONE_VM | SIGCHLD, &attach);
        if (attacher < 0)
            FAIL("join cgroup");
    }
    if (p->disk)
        child_mount_disk(p);
    child_shift_ids(p);
    /* The control socket on which the init takes commands from the server. The path is short
     * (relative to the sandbox directory) to fit a unix socket address. */
    if (chdir(p->dir) < 0)
        FAIL("chdir sandbox directory");
    unlink(SANDBOX_CTL_SOCK);
    unlink(SANDBOX_CTL_SOCK_OLD);
    int ctl = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX, .sun_path = SANDBOX_CTL_SOCK};
    if (ctl < 0 || bind(ctl, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(ctl, 64) < 0)
        FAIL("control socket");
    chmod(SANDBOX_CTL_SOCK, 0600);
    p->ctl_fd = ctl;
    if (mkdir_owned(p->upper, 0755, p->uid) < 0 || mkdir_owned(p->work, 0700, 0) < 0 ||
        (p->ws_work[0] && mkdir_owned(p->ws_work, 0700, 0) < 0) ||
        mkdir_owned(p->ws, 0755, p->uid) < 0 || (mkdir(p->root, 0700) < 0 && errno != EEXIST))
        FAIL("create sandbox layers");
    /* Before the new pid namespace: its maker must not become that namespace's PID 1. */
    child_userns(p);
    /* A pooled sandbox gets its network namespace when it is handed over (the init makes it): a
     * network namespace is a third of an idle sandbox's kernel memory. */
    if (unshare(CLONE_NEWNS | CLONE_NEWPID | (p->defer_net ? 0 : CLONE_NEWNET) | CLONE_NEWUTS |
                CLONE_NEWIPC) < 0)
        FAIL("unshare namespaces");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        FAIL("make mounts private");
    child_idmapped_lower(p);
    if (mount("overlay", p->root, "overlay", MS_NOSUID | MS_NODEV, p->overlay_opts) < 0)
        FAIL("mount overlay root");
    if (p->opt_dir[0])
        mkdir(p->opt_dir, 0755);
    if (p->agents_dir[0])
        mkdir(p->agents_dir, 0755);
    for (int i = 0; i < p->nbinds; i++) {
        mkdir(p->bind_dst[i], 0755);
        bind_ro(p, p->bind_src[i], p->bind_dst[i], 0);
    }
    if (p->env_ws[0]) {
        /* the snapshot's workspace below the sandbox's own */
        if (mount("overlay", p->ws_dst, "overlay", MS_NOSUID | MS_NODEV, p->ws_opts) < 0)
            FAIL("mount /workspace on the environment snapshot");
    } else if (mount(p->ws, p->ws_dst, NULL, MS_BIND, NULL) < 0 ||
               mount(NULL, p->ws_dst, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) <
                   0) {
        FAIL("mount /workspace");
    }
    if (mount("tmpfs", p->tmp_dst, "tmpfs", MS_NOSUID | MS_NODEV, p->tmp_opts) < 0)
        FAIL("mount /tmp");
    child_dev(p);
    if (sethostname("sandbox", 7) < 0)
        FAIL("sethostname");
    if (!p->defer_net) {
        int r = listen_loopback_up();
        if (r < 0) {
            errno = -r;
            FAIL("bring lo up");
        }
        child_listeners(p);
    }
    if (attacher > 0) {
        int status = 0;
        pid_t w;
        while ((w = waitpid(attacher, &status, __WALL)) < 0 && errno == EINTR)
            ;
        if (w != attacher || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            errno = EIO;
            FAIL("join cgroup");
        }
    }
    /* In the sandbox's groups now: they are the root of its cgroup namespace. */
    if (unshare(CLONE_NEWCGROUP) < 0)
        FAIL("unshare cgroup namespace");
    /* The init shares this process's memory until it executes sandbox-init, and this process
     * waits for that (CLONE_VFORK): a fork would copy the server's page tables once more, only
     * for the exec to drop them. */
    pid_t init =
        clone(init_main, init_stack + sizeof(init_stack), CLONE_VM | CLONE_VFORK | SIGCHLD, p);
    if (init < 0)
        FAIL("start init");
    if (child_failed)
        _exit(127); /* the init has reported why on the pipe */
    char path[64];
    /* The sandbox's own OOM kills should pick anything but its init. */
    snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)init);
    write_all(path, "-998");
    char msg[48];
    int n = snprintf(msg, sizeof(msg), "pid %d%s\n", (int)init,
                     p->userns_as_root ? " userns-owner=root" : "");
    if (write(p->report_fd, msg, (size_t)n) != n)
        FAIL("report init pid");
    _exit(0);
}

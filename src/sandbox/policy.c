/* What a process inside a sandbox may do: a capability set narrower than Docker's default,
 * no_new_privs, rlimits, and a seccomp allow list modelled on Docker's default profile. Two
 * programs are built once at start and loaded in children with a bare prctl, so nothing between
 * fork and exec allocates:
 *   - the allow list (libseccomp): every system call not on it fails with EPERM, some are allowed
 *     only for some arguments, and a foreign ABI kills the process;
 *   - a guard written by hand for what libseccomp cannot express: ENOSYS for numbers above the
 *     highest one the list knows (newer calls, so that libc falls back to older ones), and the
 *     TIOCSTI ioctl judged on the 32 bits the kernel reads.
 * The guard is loaded second. Seccomp runs every filter and keeps the strictest action; between
 * two ERRNO results the one of the most recently loaded filter wins, so the guard's ENOSYS replaces
 * the allow list's EPERM above the highest number. */
#include "sandbox/sandbox_internal.h"

#include "sandbox/confine.h"

#include <errno.h>
#include <endian.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"

/* Allowed with any arguments, for the 64-bit ABIs (x86_64, aarch64): Docker's default list
 * (moby/profiles seccomp/default.json) without the calls it grants only with a capability, and
 * without adjtimex, clock_adjtime, name_to_handle_at and process_vm_writev, which Docker allows
 * and we do not; every difference, with its reason, is in docs/SANDBOX.md ("Compared with
 * Docker's default profile"), and tests/unit/test_policy.c holds the filter to that table. Names
 * an architecture (or the installed libseccomp) does not know are skipped. Not on the list, so
 * refused with EPERM: mount and the new mount API, pivot_root, chroot, unshare, setns, bpf,
 * io_uring, kexec, module loading, keyctl and the key calls, userfaultfd, perf_event_open,
 * open_by_handle_at, kcmp, pidfd_getfd, process_madvise, NUMA memory policy (get_mempolicy,
 * set_mempolicy, mbind, move_pages, migrate_pages: Docker's only with CAP_SYS_NICE, or not at
 * all), sysfs and ustat (not on Docker's list), quotas, swap, reboot, syslog, acct, clock and
 * host administration, iopl and ioperm, fanotify_init, vhangup. */
/* clang-format off */
static const char *const allowed[] = {
    /* files and directories */
    "access", "chdir", "chmod", "chown", "creat", "faccessat", "faccessat2", "fadvise64",
    "fallocate", "fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat", "fstat",
    "fstatfs", "ftruncate", "futimesat", "getcwd", "getdents", "getdents64", "lchown", "link",
    "linkat", "lstat", "mkdir", "mkdirat", "mknod", "mknodat", "newfstatat", "open", "openat",
    "openat2", "readahead", "readlink", "readlinkat", "rename", "renameat", "renameat2", "rmdir",
    "stat", "statfs", "statmount", "listmount", "statx", "symlink", "symlinkat", "truncate",
    "umask", "unlink", "unlinkat", "utime", "utimensat", "utimes",
    /* extended attributes */
    "fgetxattr", "flistxattr", "fremovexattr", "fsetxattr", "getxattr", "getxattrat", "lgetxattr",
    "listxattr", "listxattrat", "llistxattr", "lremovexattr", "lsetxattr", "removexattr",
    "removexattrat", "setxattr", "setxattrat",
    /* descriptors and I/O */
    "close", "close_range", "copy_file_range", "dup", "dup2", "dup3", "fcntl", "fdatasync",
    "flock", "fsync", "lseek", "pipe", "pipe2", "pread64", "preadv", "preadv2", "pwrite64",
    "pwritev", "pwritev2", "read", "readv", "sendfile", "splice", "sync", "sync_file_range",
    "syncfs", "tee", "vmsplice", "write", "writev", "io_cancel", "io_destroy", "io_getevents",
    "io_pgetevents", "io_setup", "io_submit", "ioctl",
    /* waiting and notification */
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2",
    "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "fanotify_mark", "inotify_add_watch",
    "inotify_init", "inotify_init1", "inotify_rm_watch", "poll", "ppoll", "pselect6", "select",
    "signalfd", "signalfd4", "timerfd_create", "timerfd_gettime", "timerfd_settime",
    /* memory */
    "brk", "cachestat", "madvise", "map_shadow_stack", "membarrier", "memfd_create",
    "memfd_secret", "mincore", "mlock", "mlock2", "mlockall", "mmap", "mprotect", "mremap",
    "mseal", "msync", "munlock", "munlockall", "munmap", "pkey_alloc", "pkey_free",
    "pkey_mprotect", "remap_file_pages",
    /* processes and threads */
    "arch_prctl", "execve", "execveat", "exit", "exit_group", "fork", "get_robust_list",
    "get_thread_area", "getcpu", "getpgid", "getpgrp", "getpid", "getppid", "getsid", "gettid",
    "kill", "modify_ldt", "pidfd_open", "pidfd_send_signal", "prctl", "process_mrelease",
    "process_vm_readv", "ptrace", "rseq", "seccomp", "set_robust_list", "set_thread_area",
    "set_tid_address", "setpgid", "setsid", "tgkill", "tkill", "uretprobe", "vfork", "wait4",
    "waitid", "futex", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake",
    "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self",
    /* signals */
    "pause", "restart_syscall", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
    "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo",
    "sigaltstack",
    /* identity (within the user namespace) */
    "capget", "capset", "getegid", "geteuid", "getgid", "getgroups", "getresgid", "getresuid",
    "getuid", "setfsgid", "setfsuid", "setgid", "setgroups", "setregid", "setresgid", "setresuid",
    "setreuid", "setuid",
    /* time */
    "alarm", "clock_getres", "clock_gettime", "clock_nanosleep", "getitimer", "gettimeofday",
    "nanosleep", "setitimer", "time", "timer_create", "timer_delete", "timer_getoverrun",
    "timer_gettime", "timer_settime", "times",
    /* scheduling and limits */
    "getpriority", "getrandom", "getrlimit", "getrusage", "ioprio_get", "ioprio_set", "prlimit64",
    "sched_get_priority_max", "sched_get_priority_min", "sched_getaffinity", "sched_getattr",
    "sched_getparam", "sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity",
    "sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield", "setpriority",
    "setrlimit", "sysinfo", "uname",
    /* sockets (socket and socketpair below) */
    "accept", "accept4", "bind", "connect", "getpeername", "getsockname", "getsockopt", "listen",
    "recvfrom", "recvmmsg", "recvmsg", "sendmmsg", "sendmsg", "sendto", "setsockopt", "shutdown",
    /* System V and POSIX IPC */
    "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink",
    "msgctl", "msgget", "msgrcv", "msgsnd", "semctl", "semget", "semop", "semtimedop", "shmat",
    "shmctl", "shmdt", "shmget",
};
/* clang-format on */

/* Socket families and types a sandbox may create; type is compared without SOCK_NONBLOCK and
 * SOCK_CLOEXEC. Raw and packet sockets (which need CAP_NET_RAW, dropped anyway), vsock (it
 * reaches the hypervisor and other guests, around the network namespace), AF_ALG and every other
 * family are refused. Netlink is limited to routing (ip, getifaddrs) and socket diagnostics (ss),
 * both answered by the sandbox's own network namespace. A negative field matches any value. */
static const struct {
    int family, type, protocol;
} sockets[] = {
    {AF_UNIX, -1, -1},
    {AF_INET, SOCK_STREAM, -1},
    {AF_INET, SOCK_DGRAM, -1},
    {AF_INET, SOCK_SEQPACKET, -1},
    {AF_INET6, SOCK_STREAM, -1},
    {AF_INET6, SOCK_DGRAM, -1},
    {AF_INET6, SOCK_SEQPACKET, -1},
    {AF_NETLINK, -1, NETLINK_ROUTE},
    {AF_NETLINK, -1, NETLINK_SOCK_DIAG},
};

/* Docker's personality values: Linux, 32-bit Linux, each with UNAME26, and the query. Refused:
 * ADDR_NO_RANDOMIZE (ASLR off) and the other emulations. */
static const uint64_t personalities[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};

/* Namespace flags refused to clone (Docker's mask): CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC,
 * NEWUSER, NEWPID, NEWNET. CLONE_NEWTIME lies in clone's exit-signal byte, so only clone3 and
 * unshare can ask for it; both are refused. */
#define CLONE_NS_FLAGS 0x7e020000ull

#define X32_SYSCALL_BIT 0x40000000u

static struct sock_fprog loaded[2];

/* The libseccomp program of ctx, read back from a memfd. */
static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *prog, struct err *err)
{
    _cleanup_close_ int fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
    if (fd < 0)
        return err_set(err, -errno, "memfd_create: %s", strerror(errno));
    int r = seccomp_export_bpf(ctx, fd);
    if (r < 0)
        return err_set(err, r, "cannot export seccomp filter: %s", strerror(-r));
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) ||
        st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS)
        return err_set(err, -EIO, "seccomp filter has a bad size");
    struct sock_filter *insns = xmalloc((size_t)st.st_size);
    if (pread(fd, insns, (size_t)st.st_size, 0) != st.st_size) {
        free(insns);
        return err_set(err, -EIO, "cannot read seccomp filter back");
    }
    prog->filter = insns;
    prog->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
    return 0;
}

/* Argument comparisons on the full 64 bits of the register. */
static struct scmp_arg_cmp arg_eq(unsigned arg, uint64_t value)
{
    return (struct scmp_arg_cmp){.arg = arg, .op = SCMP_CMP_EQ, .datum_a = value, .datum_b = 0};
}

static struct scmp_arg_cmp arg_masked(unsigned arg, uint64_t mask, uint64_t value)
{
    return (struct scmp_arg_cmp){
        .arg = arg, .op = SCMP_CMP_MASKED_EQ, .datum_a = mask, .datum_b = value};
}

static int add_rules(scmp_filter_ctx ctx, uint32_t arch, int *max_nr)
{
    int r = 0, max = -1;
    for (size_t i = 0; i < ARRAY_SIZE(allowed) && r == 0; i++) {
        int nr = seccomp_syscall_resolve_name_arch(arch, allowed[i]);
        if (nr < 0)
            continue; /* not on this architecture, or newer than libseccomp */
        max = nr > max ? nr : max;
        /* libseccomp takes the number of this machine's architecture and translates it */
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, seccomp_syscall_resolve_name(allowed[i]), 0);
    }
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                             arg_masked(0, CLONE_NS_FLAGS, 0));
    /* clone3 passes its flags in memory the filter cannot read: ENOSYS, and libc falls back to
     * clone. */
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    for (size_t i = 0; i < ARRAY_SIZE(personalities) && r == 0; i++)
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
                             arg_eq(0, personalities[i]));
    for (size_t i = 0; i < ARRAY_SIZE(sockets) && r == 0; i++) {
        struct scmp_arg_cmp cmp[3];
        unsigned n = 0;
        cmp[n++] = arg_eq(0, (uint64_t)sockets[i].family);
        if (sockets[i].type >= 0)
            cmp[n++] = arg_masked(1, 0xf, (uint64_t)sockets[i].type);
        if (sockets[i].protocol >= 0)
            cmp[n++] = arg_eq(2, (uint64_t)sockets[i].protocol);
        r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), n, cmp);
    }
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1, arg_eq(0, AF_UNIX));
    static const char *const ruled[] = {"clone", "clone3", "personality", "socket", "socketpair"};
    for (size_t i = 0; i < ARRAY_SIZE(ruled); i++) {
        int nr = seccomp_syscall_resolve_name_arch(arch, ruled[i]);
        max = nr > max ? nr : max;
    }
    *max_nr = max;
    return r;
}

/* The guard: foreign ABIs killed, numbers above max_nr ENOSYS, TIOCSTI refused, else allowed. */
static int build_guard(uint32_t arch, int max_nr, struct sock_fprog *prog, struct err *err)
{
    int ioctl_nr = seccomp_syscall_resolve_name_arch(arch, "ioctl");
    if (ioctl_nr < 0 || max_nr < 0)
        return err_set(err, -EINVAL, "no system call numbers for architecture 0x%x", arch);
    /* The ioctl command is an unsigned int: the kernel ignores the upper half of the register. */
    uint32_t cmd_off = offsetof(struct seccomp_data, args[1]) + (BYTE_ORDER == BIG_ENDIAN ? 4 : 0);
    struct sock_filter insns[16];
    unsigned n = 0;
    insns[n++] =
        (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    insns[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0);
    insns[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    insns[n++] =
        (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    if (arch == SCMP_ARCH_X86_64) {
        /* x32 shares x86_64's audit arch and marks its numbers with a bit */
        insns[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1);
        insns[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    }
    insns[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, (uint32_t)max_nr, 0, 1);
    insns[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
    insns[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)ioctl_nr, 0, 3);
    insns[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, cmd_off);
    insns[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 0, 1);
    insns[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
    insns[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    prog->filter = xmalloc(n * sizeof(insns[0]));
    memcpy(prog->filter, insns, n * sizeof(insns[0]));
    prog->len = (unsigned short)n;
    return 0;
}

int policy_build(uint32_t arch, struct policy_filters *ret, struct err *err)
{
    if (arch == SCMP_ARCH_NATIVE)
        arch = seccomp_arch_native();
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!ctx)
        return err_set(err, -ENOMEM, "seccomp_init failed");
    struct policy_filters f = {.max_nr = -1};
    int r = 0;
    if (arch != seccomp_arch_native()) {
        r = seccomp_arch_add(ctx, arch);
        if (r == 0)
            r = seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE);
    }
    /* A call through another ABI (i386 by int 0x80, x32, 32-bit arm) kills the process. */
    if (r == 0)
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    /* A binary tree over the system call numbers instead of a linear scan. */
    if (r == 0)
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    if (r == 0)
        r = add_rules(ctx, arch, &f.max_nr);
    if (r < 0) {
        seccomp_release(ctx);
        return err_set(err, r, "cannot build seccomp filter: %s", strerror(-r));
    }
    r = export_bpf(ctx, &f.allow, err);
    seccomp_release(ctx);
    if (r == 0)
        r = build_guard(arch, f.max_nr, &f.guard, err);
    if (r < 0) {
        policy_filters_release(&f);
        return r;
    }
    *ret = f;
    return 0;
}

void policy_filters_release(struct policy_filters *f)
{
    free(f->allow.filter);
    free(f->guard.filter);
    f->allow.filter = f->guard.filter = NULL;
}

int policy_init(struct err *err)
{
    struct policy_filters f;
    int r = policy_build(SCMP_ARCH_NATIVE, &f, err);
    if (r < 0)
        return r;
    free(loaded[0].filter);
    free(loaded[1].filter);
    loaded[0] = f.allow;
    loaded[1] = f.guard;
    return 0;
}

size_t policy_filters_loaded(const struct sock_fprog **filters)
{
    *filters = loaded;
    return loaded[0].filter ? ARRAY_SIZE(loaded) : 0;
}

int policy_apply_child(void)
{
    return confine_apply(loaded, loaded[0].filter ? ARRAY_SIZE(loaded) : 0);
}

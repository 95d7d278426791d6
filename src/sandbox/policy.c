/* What a process inside a sandbox may do: a capability set narrower than Docker's default,
 * no_new_privs, rlimits, and a seccomp denylist modelled on Docker's default profile. The
 * filter is compiled once by libseccomp and loaded in children with a bare prctl, so nothing
 * between fork and exec allocates. */
#include "sandbox/sandbox_internal.h"

#include "sandbox/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"

static struct sock_fprog filter;

/* Denied with EPERM: mounts, namespaces, kernel modules and keyrings, BPF, tracing the kernel,
 * clock and host administration. */
static const char *const denied[] = {
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "bpf",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "keyctl",
    "add_key",
    "request_key",
    "userfaultfd",
    "perf_event_open",
    "open_by_handle_at",
    "name_to_handle_at",
    "lookup_dcookie",
    "acct",
    "quotactl",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "iopl",
    "ioperm",
    "fanotify_init",
    "vhangup",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "nfsservctl",
    "uselib",
    "kcmp",
    "process_vm_writev",
    "sethostname",
    "setdomainname",
    "pidfd_getfd",
    "create_module",
    "get_kernel_syms",
    "query_module",
};

static const uint64_t ns_flags[] = {CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
                                    CLONE_NEWUTS, CLONE_NEWIPC,  CLONE_NEWCGROUP, CLONE_NEWTIME};

int policy_init(struct err *err)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return err_set(err, -ENOMEM, "seccomp_init failed");
    int r = 0;
    for (size_t i = 0; i < ARRAY_SIZE(denied) && r == 0; i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    }
    /* New namespaces through clone: deny any namespace flag. clone3 passes its flags in memory
     * the filter cannot read, so it reports ENOSYS and libc falls back to clone. */
    for (size_t i = 0; i < ARRAY_SIZE(ns_flags) && r == 0; i++)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* Raw and packet sockets need CAP_NET_RAW, which is dropped; refuse them outright too. */
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_EQ, AF_PACKET));
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff, SOCK_RAW));
    /* vsock reaches the hypervisor and other guests, around the network namespace. */
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_EQ, AF_VSOCK));
    /* TIOCSTI pushes input into another process's terminal. */
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
    if (r < 0) {
        seccomp_release(ctx);
        return err_set(err, r, "cannot build seccomp filter: %s", strerror(-r));
    }
    _cleanup_close_ int fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
    if (fd < 0) {
        seccomp_release(ctx);
        return err_set(err, -errno, "memfd_create: %s", strerror(errno));
    }
    r = seccomp_export_bpf(ctx, fd);
    seccomp_release(ctx);
    if (r < 0)
        return err_set(err, r, "cannot export seccomp filter: %s", strerror(-r));
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size % sizeof(struct sock_filter))
        return err_set(err, -EIO, "seccomp filter has a bad size");
    struct sock_filter *prog = xmalloc((size_t)st.st_size);
    if (pread(fd, prog, (size_t)st.st_size, 0) != st.st_size) {
        free(prog);
        return err_set(err, -EIO, "cannot read seccomp filter back");
    }
    free(filter.filter);
    filter.filter = prog;
    filter.len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
    return 0;
}

const struct sock_fprog *policy_filter(void)
{
    return filter.filter ? &filter : NULL;
}

int policy_apply_child(void)
{
    return confine_apply(filter.filter ? &filter : NULL);
}

/* The sandbox's seccomp programs: built for x86_64 and aarch64 without loading them, and run
 * through a small classic-BPF interpreter that combines the two results as the kernel does; then
 * loaded for real in a child of this process on the native architecture. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "harness.h"
#include "sandbox/confine.h"
#include "sandbox/sandbox_internal.h"

#define ERRNO(e) (SECCOMP_RET_ERRNO | (e))
#define ALLOW SECCOMP_RET_ALLOW
#define KILL SECCOMP_RET_KILL_PROCESS
#define BAD_INSN 0xdeadbeefu

/* Classic BPF over a seccomp_data, for the instructions libseccomp and the guard emit. */
static uint32_t bpf_run(const struct sock_fprog *prog, const struct seccomp_data *d)
{
    uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};
    for (unsigned pc = 0; pc < prog->len; pc++) {
        const struct sock_filter *i = &prog->filter[pc];
        uint32_t src = BPF_SRC(i->code) == BPF_X ? x : i->k;
        switch (BPF_CLASS(i->code)) {
        case BPF_LD:
            if (i->code == (BPF_LD | BPF_W | BPF_ABS) && i->k + 4 <= sizeof(*d))
                memcpy(&a, (const char *)d + i->k, 4);
            else if (i->code == (BPF_LD | BPF_MEM) && i->k < BPF_MEMWORDS)
                a = mem[i->k];
            else if (i->code == (BPF_LD | BPF_IMM))
                a = i->k;
            else
                return BAD_INSN;
            break;
        case BPF_LDX:
            if (i->code == (BPF_LDX | BPF_MEM) && i->k < BPF_MEMWORDS)
                x = mem[i->k];
            else if (i->code == (BPF_LDX | BPF_IMM))
                x = i->k;
            else
                return BAD_INSN;
            break;
        case BPF_ST: mem[i->k % BPF_MEMWORDS] = a; break;
        case BPF_STX: mem[i->k % BPF_MEMWORDS] = x; break;
        case BPF_ALU:
            switch (BPF_OP(i->code)) {
            case BPF_AND: a &= src; break;
            case BPF_OR: a |= src; break;
            case BPF_ADD: a += src; break;
            case BPF_SUB: a -= src; break;
            default: return BAD_INSN;
            }
            break;
        case BPF_JMP: {
            if (BPF_OP(i->code) == BPF_JA) {
                pc += i->k;
                break;
            }
            bool t;
            switch (BPF_OP(i->code)) {
            case BPF_JEQ: t = a == src; break;
            case BPF_JGT: t = a > src; break;
            case BPF_JGE: t = a >= src; break;
            case BPF_JSET: t = (a & src) != 0; break;
            default: return BAD_INSN;
            }
            pc += t ? i->jt : i->jf;
            break;
        }
        case BPF_RET: return BPF_RVAL(i->code) == BPF_A ? a : i->k;
        case BPF_MISC:
            if (BPF_MISCOP(i->code) == BPF_TAX)
                x = a;
            else
                a = x;
            break;
        default: return BAD_INSN;
        }
    }
    return BAD_INSN; /* fell off the end */
}

/* The kernel's choice among stacked filters: the strictest action (as a signed value); on a tie
 * the filter loaded last. */
static uint32_t run_both(const struct policy_filters *f, const struct seccomp_data *d)
{
    uint32_t first = bpf_run(&f->allow, d), last = bpf_run(&f->guard, d);
    if (first == BAD_INSN || last == BAD_INSN)
        return BAD_INSN;
    int32_t fa = (int32_t)(first & SECCOMP_RET_ACTION_FULL),
            la = (int32_t)(last & SECCOMP_RET_ACTION_FULL);
    return fa < la ? first : last;
}

static uint32_t call(const struct policy_filters *f, uint32_t arch, const char *name, uint64_t a0,
                     uint64_t a1, uint64_t a2)
{
    int nr = seccomp_syscall_resolve_name_arch(arch, name);
    if (nr < 0) {
        fprintf(stderr, "  %s has no number\n", name);
        return BAD_INSN;
    }
    struct seccomp_data d = {.nr = nr, .arch = arch, .args = {a0, a1, a2}};
    return run_both(f, &d);
}

static uint32_t call_nr(const struct policy_filters *f, uint32_t arch, int nr)
{
    struct seccomp_data d = {.nr = nr, .arch = arch};
    return run_both(f, &d);
}

/* What every 64-bit architecture we build for must answer the same way. */
static void check_common(uint32_t arch)
{
    struct err err = {0};
    struct policy_filters f;
    CHECK_INT_EQ(policy_build(arch, &f, &err), 0);
    if (err.code)
        fprintf(stderr, "  %s\n", err.msg);
    CHECK(f.allow.len > 100 && f.allow.len <= BPF_MAXINSNS);
    CHECK(f.guard.len > 0);

    /* the highest number: the newest call the list knows, in the range shared by every arch */
    CHECK(f.max_nr >= seccomp_syscall_resolve_name_arch(arch, "clone3"));
    CHECK(f.max_nr >= seccomp_syscall_resolve_name_arch(arch, "futex_waitv"));
    CHECK(f.max_nr < 1000);
    CHECK_INT_EQ(call_nr(&f, arch, f.max_nr + 1), ERRNO(ENOSYS));
    CHECK_INT_EQ(call_nr(&f, arch, 1000), ERRNO(ENOSYS));

    /* the common calls of a program */
    static const char *const ok[] = {
        "read",    "write", "openat",  "mmap",       "execve",       "futex",          "wait4",
        "getpid",  "rseq",  "statx",   "ioctl",      "prctl",        "kill",           "ptrace",
        "mknodat", "pipe2", "seccomp", "exit_group", "rt_sigreturn", "set_robust_list"};
    for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
        uint32_t r = call(&f, arch, ok[i], 0, 0, 0);
        if (r != ALLOW)
            CHECK_FAIL_("%s: 0x%x, not allowed", ok[i], r);
    }
    /* refused by the list */
    static const char *const refused[] = {"mount",
                                          "umount2",
                                          "pivot_root",
                                          "chroot",
                                          "unshare",
                                          "setns",
                                          "bpf",
                                          "io_uring_setup",
                                          "io_uring_enter",
                                          "io_uring_register",
                                          "kexec_load",
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
                                          "fsopen",
                                          "open_tree",
                                          "move_mount",
                                          "mount_setattr",
                                          "kcmp",
                                          "pidfd_getfd",
                                          "process_vm_writev",
                                          "process_madvise",
                                          "syslog",
                                          "reboot",
                                          "settimeofday",
                                          "clock_settime",
                                          "adjtimex",
                                          "sethostname",
                                          "acct",
                                          "quotactl",
                                          "swapon",
                                          "fanotify_init",
                                          "vhangup"};
    for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
        uint32_t r = call(&f, arch, refused[i], 0, 0, 0);
        if (r != ERRNO(EPERM))
            CHECK_FAIL_("%s: 0x%x, not EPERM", refused[i], r);
    }

    /* clone without namespace flags, clone3 to its fallback */
    CHECK_INT_EQ(call(&f, arch, "clone",
                      CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                          CLONE_SYSVSEM | CLONE_SETTLS,
                      0, 0),
                 ALLOW);
    CHECK_INT_EQ(call(&f, arch, "clone", SIGCHLD, 0, 0), ALLOW);
    static const uint64_t ns[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,   CLONE_NEWNET,
                                  CLONE_NEWUTS,  CLONE_NEWIPC, CLONE_NEWCGROUP};
    for (size_t i = 0; i < ARRAY_SIZE(ns); i++)
        CHECK_INT_EQ(call(&f, arch, "clone", ns[i] | SIGCHLD, 0, 0), ERRNO(EPERM));
    CHECK_INT_EQ(call(&f, arch, "clone3", 0, 0, 0), ERRNO(ENOSYS));

    /* personality: Docker's values only */
    CHECK_INT_EQ(call(&f, arch, "personality", 0, 0, 0), ALLOW);
    CHECK_INT_EQ(call(&f, arch, "personality", 0xffffffff, 0, 0), ALLOW);
    CHECK_INT_EQ(call(&f, arch, "personality", ADDR_NO_RANDOMIZE, 0, 0), ERRNO(EPERM));
    CHECK_INT_EQ(call(&f, arch, "personality", READ_IMPLIES_EXEC, 0, 0), ERRNO(EPERM));

    /* sockets */
    CHECK_INT_EQ(call(&f, arch, "socket", AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), ALLOW);
    CHECK_INT_EQ(call(&f, arch, "socket", AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), ALLOW);
    CHECK_INT_EQ(call(&f, arch, "socket", AF_INET6, SOCK_DGRAM, 0), ALLOW);
    CHECK_INT_EQ(call(&f, arch, "socket", AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE),
                 ALLOW);
    CHECK_INT_EQ(call(&f, arch, "socket", AF_NETLINK, SOCK_DGRAM, NETLINK_SOCK_DIAG), ALLOW);
    CHECK_INT_EQ(call(&f, arch, "socketpair", AF_UNIX, SOCK_STREAM, 0), ALLOW);
    CHECK_INT_EQ(call(&f, arch, "socket", AF_INET, SOCK_RAW, 1), ERRNO(EPERM));
    CHECK_INT_EQ(call(&f, arch, "socket", AF_INET6, SOCK_RAW | SOCK_CLOEXEC, 58), ERRNO(EPERM));
    CHECK_INT_EQ(call(&f, arch, "socket", AF_INET, SOCK_PACKET, 0), ERRNO(EPERM));
    CHECK_INT_EQ(call(&f, arch, "socket", AF_PACKET, SOCK_DGRAM, 0), ERRNO(EPERM));
    CHECK_INT_EQ(call(&f, arch, "socket", AF_VSOCK, SOCK_STREAM, 0), ERRNO(EPERM));
    CHECK_INT_EQ(call(&f, arch, "socket", AF_ALG, SOCK_SEQPACKET, 0), ERRNO(EPERM));
    CHECK_INT_EQ(call(&f, arch, "socket", AF_NETLINK, SOCK_RAW, 12 /* NETFILTER */), ERRNO(EPERM));
    /* upper bits the kernel drops do not turn a refused family into an allowed one */
    CHECK_INT_EQ(call(&f, arch, "socket", (1ull << 32) | AF_VSOCK, SOCK_STREAM, 0), ERRNO(EPERM));

    /* TIOCSTI, also with garbage in the upper half of the register */
    CHECK_INT_EQ(call(&f, arch, "ioctl", 0, TCGETS, 0), ALLOW);
    CHECK_INT_EQ(call(&f, arch, "ioctl", 0, TIOCSTI, 0), ERRNO(EPERM));
    CHECK_INT_EQ(call(&f, arch, "ioctl", 0, 0xffffffff00000000ull | TIOCSTI, 0), ERRNO(EPERM));

    policy_filters_release(&f);
}

TEST(x86_64_builds_and_answers)
{
    check_common(SCMP_ARCH_X86_64);
    struct err err = {0};
    struct policy_filters f;
    CHECK_INT_EQ(policy_build(SCMP_ARCH_X86_64, &f, &err), 0);
    /* foreign ABIs: i386 (int 0x80) and x32 kill the process, in both programs */
    struct seccomp_data i386 = {.nr = 20 /* getpid */, .arch = AUDIT_ARCH_I386};
    CHECK_INT_EQ(bpf_run(&f.allow, &i386), KILL);
    CHECK_INT_EQ(bpf_run(&f.guard, &i386), KILL);
    struct seccomp_data x32 = {.nr = 0x40000000 | 39 /* getpid */, .arch = AUDIT_ARCH_X86_64};
    CHECK_INT_EQ(bpf_run(&f.allow, &x32), KILL);
    CHECK_INT_EQ(bpf_run(&f.guard, &x32), KILL);
    CHECK_INT_EQ(call(&f, SCMP_ARCH_X86_64, "arch_prctl", 0, 0, 0), ALLOW);
    policy_filters_release(&f);
}

TEST(aarch64_builds_and_answers)
{
    check_common(SCMP_ARCH_AARCH64);
    struct err err = {0};
    struct policy_filters f;
    CHECK_INT_EQ(policy_build(SCMP_ARCH_AARCH64, &f, &err), 0);
    struct seccomp_data arm = {.nr = 20 /* getpid */, .arch = AUDIT_ARCH_ARM};
    CHECK_INT_EQ(bpf_run(&f.allow, &arm), KILL);
    CHECK_INT_EQ(bpf_run(&f.guard, &arm), KILL);
    /* the list knows the same newest call on both: numbers above 423 are shared */
    struct policy_filters g;
    CHECK_INT_EQ(policy_build(SCMP_ARCH_X86_64, &g, &err), 0);
    CHECK_INT_EQ(f.max_nr, g.max_nr);
    policy_filters_release(&f);
    policy_filters_release(&g);
}

/* The table of docs/SANDBOX.md ("Compared with Docker's default profile"): the calls where the
 * sandbox differs from Docker's default profile (moby/profiles seccomp/default.json), and those
 * checked and found the same, each answered as the table says. A name the architecture (or the
 * installed libseccomp) has no number for is skipped: sysfs and ustat exist on x86_64 only, and
 * libseccomp 2.5 knows neither listmount, statmount nor uretprobe (the sandbox then refuses them:
 * ENOSYS above the highest number the list knows, EPERM below). */
static void check_docker_table(uint32_t arch)
{
    static const struct {
        const char *name;
        uint64_t a0;
        uint32_t want;
    } table[] = {
        /* Docker: only with CAP_SYS_NICE, which its default set lacks */
        {"get_mempolicy", 0, ERRNO(EPERM)},
        {"set_mempolicy", 0, ERRNO(EPERM)},
        {"mbind", 0, ERRNO(EPERM)},
        {"set_mempolicy_home_node", 0, ERRNO(EPERM)},
        /* Docker: not on its list at all */
        {"move_pages", 0, ERRNO(EPERM)},
        {"migrate_pages", 0, ERRNO(EPERM)},
        {"sysfs", 2, ERRNO(EPERM)},
        {"ustat", 0, ERRNO(EPERM)},
        /* Docker: only with CAP_SYS_PTRACE */
        {"kcmp", 0, ERRNO(EPERM)},
        {"pidfd_getfd", 0, ERRNO(EPERM)},
        {"process_madvise", 0, ERRNO(EPERM)},
        /* Docker allows them; refused here, deliberately */
        {"adjtimex", 0, ERRNO(EPERM)},
        {"clock_adjtime", 0, ERRNO(EPERM)},
        {"name_to_handle_at", 0, ERRNO(EPERM)},
        {"process_vm_writev", 0, ERRNO(EPERM)},
        {"chroot", 0, ERRNO(EPERM)},
        /* allowed, as by Docker (process_vm_readv and ptrace: on kernels from 4.8) */
        {"process_vm_readv", 0, ALLOW},
        {"ptrace", 0, ALLOW},
        {"listmount", 0, ALLOW},
        {"statmount", 0, ALLOW},
        {"uretprobe", 0, ALLOW},
        /* personality: Docker's five values, compared on all 64 bits */
        {"personality", PER_LINUX, ALLOW},
        {"personality", UNAME26, ALLOW},
        {"personality", PER_LINUX32, ALLOW},
        {"personality", PER_LINUX32 | UNAME26, ALLOW},
        {"personality", 0xffffffff, ALLOW},
        {"personality", ADDR_NO_RANDOMIZE, ERRNO(EPERM)},
        {"personality", READ_IMPLIES_EXEC, ERRNO(EPERM)},
        {"personality", UNAME26 | ADDR_NO_RANDOMIZE, ERRNO(EPERM)},
        {"personality", PER_LINUX32 | READ_IMPLIES_EXEC, ERRNO(EPERM)},
        {"personality", MMAP_PAGE_ZERO, ERRNO(EPERM)},
        {"personality", ADDR_LIMIT_32BIT, ERRNO(EPERM)},
        {"personality", ADDR_COMPAT_LAYOUT, ERRNO(EPERM)},
        {"personality", PER_BSD, ERRNO(EPERM)},
        {"personality", PER_SVR4, ERRNO(EPERM)},
        {"personality", 0xffffffffffffffffull, ERRNO(EPERM)},
        {"personality", 1ull << 32, ERRNO(EPERM)},
    };
    struct err err = {0};
    struct policy_filters f;
    CHECK_INT_EQ(policy_build(arch, &f, &err), 0);
    for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
        if (seccomp_syscall_resolve_name_arch(arch, table[i].name) < 0)
            continue;
        uint32_t r = call(&f, arch, table[i].name, table[i].a0, 0, 0);
        if (r != table[i].want)
            CHECK_FAIL_("arch 0x%x: %s(0x%llx): 0x%x, not 0x%x", arch, table[i].name,
                        (unsigned long long)table[i].a0, r, table[i].want);
    }
    policy_filters_release(&f);
}

TEST(differences_from_docker_are_the_listed_ones)
{
    check_docker_table(SCMP_ARCH_X86_64);
    check_docker_table(SCMP_ARCH_AARCH64);
}

/* Loaded for real in a child: the kernel's stacking gives the guard's ENOSYS above the list. */
TEST(native_filters_loaded)
{
    struct err err = {0};
    struct policy_filters f;
    CHECK_INT_EQ(policy_build(SCMP_ARCH_NATIVE, &f, &err), 0);
    int fds[2];
    CHECK_INT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f.allow) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f.guard) < 0)
            _exit(2);
        int res[8];
        errno = 0;
        res[0] = syscall(1000) < 0 ? errno : 0;
        res[1] = syscall(f.max_nr + 1) < 0 ? errno : 0;
        res[2] = syscall(SYS_io_uring_setup, 1, NULL) < 0 ? errno : 0;
        res[3] = syscall(SYS_socket, AF_VSOCK, SOCK_STREAM, 0) < 0 ? errno : 0;
        long s = syscall(SYS_socket, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        res[4] = s < 0 ? errno : 0;
        res[5] = syscall(SYS_clone3, NULL, 0) < 0 ? errno : 0;
        res[6] = syscall(SYS_personality, ADDR_NO_RANDOMIZE) < 0 ? errno : 0;
        res[7] = syscall(SYS_ioctl, 0, 0xffffffff00000000ul | TIOCSTI, "x") < 0 ? errno : 0;
        _exit(write(fds[1], res, sizeof(res)) == sizeof(res) ? 0 : 3);
    }
    close(fds[1]);
    int res[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    CHECK_INT_EQ(read(fds[0], res, sizeof(res)), sizeof(res));
    close(fds[0]);
    int status = 0;
    CHECK_INT_EQ(waitpid(pid, &status, 0), pid);
    CHECK_INT_EQ(status, 0);
    CHECK_INT_EQ(res[0], ENOSYS);
    CHECK_INT_EQ(res[1], ENOSYS);
    CHECK_INT_EQ(res[2], EPERM);
    CHECK_INT_EQ(res[3], EPERM);
    CHECK_INT_EQ(res[4], 0);
    CHECK_INT_EQ(res[5], ENOSYS);
    CHECK_INT_EQ(res[6], EPERM);
    CHECK_INT_EQ(res[7], EPERM);
    policy_filters_release(&f);
}

/* What a process's status says of its confinement: "<Seccomp> <NoNewPrivs> <CapBnd>". */
static void confinement(char *out, size_t cap)
{
    char line[256], seccomp[16] = "?", nnp[16] = "?", bnd[32] = "?";
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof(line), f)) {
        sscanf(line, "Seccomp: %15s", seccomp);
        sscanf(line, "NoNewPrivs: %15s", nnp);
        sscanf(line, "CapBnd: %31s", bnd);
    }
    if (f)
        fclose(f);
    snprintf(out, cap, "%s %s %s", seccomp, nnp, bnd);
}

/* A pooled sandbox's init confines itself from the policy saved for it: the same filters, the
 * same answers, and a damaged file applies nothing at all. */
TEST(saved_policy_confines_as_the_loaded_one)
{
    struct err err = {0};
    struct policy_filters f;
    CHECK_INT_EQ(policy_build(SCMP_ARCH_NATIVE, &f, &err), 0);
    struct sock_fprog progs[2] = {f.allow, f.guard};
    int fd = confine_filters_save(progs, 2);
    CHECK(fd >= 0);
    int fds[2];
    CHECK_INT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        struct {
            int r, io_uring, clone3;
            char status[96];
        } res = {0};
        res.r = confine_apply_saved(fd);
        res.io_uring = syscall(SYS_io_uring_setup, 1, NULL) < 0 ? errno : 0;
        res.clone3 = syscall(SYS_clone3, NULL, 0) < 0 ? errno : 0;
        confinement(res.status, sizeof(res.status));
        _exit(write(fds[1], &res, sizeof(res)) == sizeof(res) ? 0 : 3);
    }
    close(fds[1]);
    struct {
        int r, io_uring, clone3;
        char status[96];
    } res = {-1, -1, -1, ""};
    CHECK_INT_EQ(read(fds[0], &res, sizeof(res)), sizeof(res));
    close(fds[0]);
    int status = 0;
    CHECK_INT_EQ(waitpid(pid, &status, 0), pid);
    CHECK_INT_EQ(status, 0);
    CHECK_INT_EQ(res.r, 0);
    CHECK_INT_EQ(res.io_uring, EPERM);
    CHECK_INT_EQ(res.clone3, ENOSYS);
    CHECK_STR_EQ(res.status, "2 1 00000000000005fb");

    /* cut short, or a filter's length out of range: refused before anything is applied */
    static const uint32_t bad_len[] = {1, 0};
    int cut = confine_filters_save(progs, 2);
    CHECK(cut >= 0 && ftruncate(cut, 4 + 4 + 10) == 0);
    int zero = memfd_create("bad", 0);
    CHECK(zero >= 0 && write(zero, bad_len, sizeof(bad_len)) == sizeof(bad_len));
    const int broken[] = {cut, zero};
    for (size_t i = 0; i < 2; i++) {
        pid = fork();
        if (pid == 0) {
            char before[96], after[96];
            confinement(before, sizeof(before));
            int r = confine_apply_saved(broken[i]);
            confinement(after, sizeof(after));
            _exit(r == -EPROTO && strcmp(before, after) == 0 ? 0 : 4);
        }
        CHECK_INT_EQ(waitpid(pid, &status, 0), pid);
        if (status != 0)
            CHECK_FAIL_("damaged policy file %zu: status %d", i, status);
    }
    close(cut);
    close(zero);
    close(fd);
    policy_filters_release(&f);
}

TEST_MAIN()

/* Confinement applied by every process that enters a sandbox, after it has become root of the
 * sandbox's user namespace: capabilities, rlimits, no_new_privs, the seccomp filter. Shared by
 * the server (file workers, the sandbox init) and the static sandbox helper; plain system calls,
 * no allocation, safe between fork and exec. */
#include "sandbox/confine.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/util.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Capabilities kept (within the sandbox's user namespace only): enough to act as root over
 * the sandbox's own files and processes. Not kept, unlike Docker: NET_RAW, MKNOD, SYS_CHROOT,
 * AUDIT_WRITE, SETFCAP. */
static const int kept_caps[] = {
    CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_FOWNER,  CAP_FSETID,           CAP_KILL,
    CAP_SETGID, CAP_SETUID,       CAP_SETPCAP, CAP_NET_BIND_SERVICE,
};

static int drop_caps(void)
{
    uint64_t keep = 0;
    for (size_t i = 0; i < ARRAY_SIZE(kept_caps); i++)
        keep |= 1ull << kept_caps[i];
    for (int cap = 0; cap <= 63; cap++) {
        if (keep & (1ull << cap))
            continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            return -errno;
    }
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    data[0].effective = data[0].permitted = data[0].inheritable = (uint32_t)keep;
    data[1].effective = data[1].permitted = data[1].inheritable = (uint32_t)(keep >> 32);
    if (syscall(SYS_capset, &hdr, data) < 0)
        return -errno;
    return 0;
}

int confine_apply(const struct sock_fprog *filters, size_t n)
{
    static const struct {
        int res;
        rlim_t soft, hard;
    } limits[] = {
        {RLIMIT_NOFILE, 4096, 4096},         {RLIMIT_CORE, 0, 0},
        {RLIMIT_MEMLOCK, 8 << 20, 8 << 20},  {RLIMIT_SIGPENDING, 4096, 4096},
        {RLIMIT_MSGQUEUE, 1 << 20, 1 << 20},
    };
    for (size_t i = 0; i < ARRAY_SIZE(limits); i++) {
        /* Only ever lower a limit: raising one needs privileges outside the sandbox. */
        struct rlimit cur, rl = {limits[i].soft, limits[i].hard};
        if (getrlimit(limits[i].res, &cur) < 0)
            return -errno;
        if (rl.rlim_max > cur.rlim_max)
            rl.rlim_max = cur.rlim_max;
        if (rl.rlim_cur > rl.rlim_max)
            rl.rlim_cur = rl.rlim_max;
        if (setrlimit(limits[i].res, &rl) < 0)
            return -errno;
    }
    int r = drop_caps();
    if (r < 0)
        return r;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -errno;
    for (size_t i = 0; i < n; i++)
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filters[i]) < 0)
            return -errno;
    return 0;
}

/* The file: a count, then each filter as its length (instructions) and its instructions; native
 * byte order, since the same machine reads it. */
#define SAVED_MAX 4

int confine_filters_save(const struct sock_fprog *filters, size_t n)
{
    if (n > SAVED_MAX)
        return -EINVAL;
    int fd = memfd_create("sandbox-policy", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    uint32_t count = (uint32_t)n;
    int r = write_full(fd, &count, sizeof(count));
    for (size_t i = 0; r == 0 && i < n; i++) {
        uint32_t len = filters[i].len;
        r = write_full(fd, &len, sizeof(len));
        if (r == 0)
            r = write_full(fd, filters[i].filter, len * sizeof(struct sock_filter));
    }
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

int confine_apply_saved(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    size_t size = (size_t)st.st_size, max = 4 + SAVED_MAX * (4 + BPF_MAXINSNS * 8);
    if (st.st_size < 4 || size > max)
        return -EPROTO;
    uint32_t *buf = malloc(size); /* 4-byte words: the counts and sock_filter's alignment */
    if (!buf)
        return -ENOMEM;
    int r = pread_full(fd, buf, size, 0);
    struct sock_fprog progs[SAVED_MAX];
    size_t count = r == 0 ? buf[0] : 0, at = 1, words = size / 4;
    if (r == 0 && count > SAVED_MAX)
        r = -EPROTO;
    for (size_t i = 0; r == 0 && i < count; i++) {
        /* each instruction is two words */
        uint32_t len = at < words ? buf[at] : 0;
        if (len == 0 || len > BPF_MAXINSNS || at + 1 + 2 * (size_t)len > words) {
            r = -EPROTO;
            break;
        }
        progs[i] = (struct sock_fprog){.len = (unsigned short)len,
                                       .filter = (struct sock_filter *)(buf + at + 1)};
        at += 1 + 2 * (size_t)len;
    }
    if (r == 0)
        r = confine_apply(progs, count);
    free(buf);
    return r;
}

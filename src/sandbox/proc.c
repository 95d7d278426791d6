/* Child-process helpers for the sandbox: failure reports from forked children, process start
 * times, pidfds, forks straight into a cgroup. */
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"

void child_report(int fd, const char *stage, int errnum)
{
    char buf[256];
    size_t n = 0;
    const char *msg = strerror(errnum); /* glibc: static table for known errnos */
    for (const char *p = stage; *p && n < 120; p++)
        buf[n++] = *p;
    buf[n++] = ':';
    buf[n++] = ' ';
    for (const char *p = msg; *p && n < sizeof(buf) - 1; p++)
        buf[n++] = *p;
    while (write(fd, buf, n) < 0 && errno == EINTR)
        ;
}

uint64_t proc_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* Field 22; the command name (field 2) may hold spaces, so count from its closing paren. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return 0;
    p += 2; /* field 3, the state */
    if (*p == 'Z' || *p == 'X')
        return 0;
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return 0;
        p++;
    }
    return strtoull(p, NULL, 10);
}

int pidfd_open_pid(pid_t pid)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    return fd < 0 ? -errno : fd;
}

pid_t proc_fork_into_cgroup(int cgfd)
{
    struct clone_args args;
    memset(&args, 0, sizeof(args));
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.cgroup = (uint64_t)cgfd;
    return (pid_t)syscall(SYS_clone3, &args, sizeof(args));
}

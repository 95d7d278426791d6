/* sandbox-enter: run one command inside a sandbox.
 *
 * The server starts this with posix_spawn (a vfork: no copy of the server's memory) and:
 *   fd 0, 1, 2  the command's stdin, stdout, stderr
 *   fd 3        the report pipe
 *   fd 4        a pidfd of the sandbox's init
 *   fd 5        the seccomp program (struct sock_filter array, sealed memfd)
 *   argv        sandbox-enter [--cg CGROUP_PROCS_FILE]... --cwd DIR -- PROGRAM ARG...
 *   envp        the command's environment
 * It joins the sandbox's cgroups and namespaces, forks the command into the sandbox's pid
 * namespace as root of its user namespace under the sandbox policy, and reports on fd 3:
 *   "pid <host pid>"   once the command is forked
 *   "exit <status>"    its wait status when it ends
 *   "<stage>: <error>" when setup failed (the command did not run)
 * It stays outside the sandbox's pid namespace, so nothing inside can see or signal it. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helper.h"
#include "sandbox/confine.h"

#define ENTER_NS                                                                                   \
    (CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP | CLONE_NEWPID)
#define MAX_FILTER 4096

static void report(const char *stage, int errnum)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "%s: %s\n", stage, strerror(errnum));
    if (write(3, buf, (size_t)n) < 0)
        _exit(127);
}

#define FAIL(stage)                                                                                \
    do {                                                                                           \
        report(stage, errno);                                                                      \
        _exit(127);                                                                                \
    } while (0)

int enter_main(int argc, char **argv, char **envp)
{
    const char *cwd = "/workspace";
    int i = 1;
    static struct sock_filter prog[MAX_FILTER];
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (i + 1 >= argc) {
            errno = EINVAL;
            FAIL("usage");
        }
        if (strcmp(argv[i], "--cg") == 0) {
            int fd = open(argv[++i], O_WRONLY | O_CLOEXEC);
            if (fd < 0 || write(fd, "0", 1) != 1)
                FAIL("join cgroup");
            close(fd);
        } else if (strcmp(argv[i], "--cwd") == 0) {
            cwd = argv[++i];
        } else {
            errno = EINVAL;
            FAIL("usage");
        }
    }
    if (i >= argc) {
        errno = EINVAL;
        FAIL("usage");
    }
    struct stat st;
    if (fstat(5, &st) < 0 || st.st_size <= 0 || (size_t)st.st_size > sizeof(prog) ||
        pread(5, prog, (size_t)st.st_size, 0) != st.st_size)
        FAIL("read seccomp program");
    struct sock_fprog filter = {.len = (unsigned short)(st.st_size / sizeof(prog[0])),
                                .filter = prog};
    close(5);
    fcntl(3, F_SETFD, FD_CLOEXEC);
    if (setns(4, ENTER_NS) < 0)
        FAIL("enter sandbox namespaces");
    if (setns(4, CLONE_NEWUSER) < 0)
        FAIL("enter sandbox user namespace");
    close(4);
    if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0)
        FAIL("become root in the sandbox");
    pid_t pid = fork();
    if (pid < 0)
        FAIL("fork command");
    if (pid == 0) {
        setsid();
        if (chdir(cwd) < 0)
            FAIL("cwd");
        if (confine_apply(&filter) < 0)
            FAIL("apply sandbox policy");
        execve(argv[i], argv + i, envp);
        FAIL("exec");
    }
    close(0);
    close(1);
    close(2);
    char msg[48];
    int n = snprintf(msg, sizeof(msg), "pid %d\n", (int)pid);
    if (write(3, msg, (size_t)n) < 0)
        return 127;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return 127;
    n = snprintf(msg, sizeof(msg), "exit %d\n", status);
    if (write(3, msg, (size_t)n) < 0)
        return 127;
    return 0;
}

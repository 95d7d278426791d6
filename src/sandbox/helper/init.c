/* sandbox-init: PID 1 of a sandbox's pid namespace. It reaps orphans and starts the sandbox's
 * commands: the server connects to its control socket (fd 3, listening; bound on a host path the
 * sandbox cannot see) and sends one request per command. Commands forked here are already in
 * every namespace and cgroup of the sandbox and inherit its policy (capabilities, no_new_privs,
 * seccomp), so a command costs one clone (sharing the init's memory until it execs) and one
 * exec. The namespace ends when the server sends
 * this process SIGKILL.
 *
 * Request (one per connection): a 4-byte length, then "cwd\0argv0\0...\0\0env0\0...\0\0", with
 * the command's stdin, stdout and stderr attached (SCM_RIGHTS) to the first bytes.
 * Answers on the connection, one line each: "pid <pid in the sandbox>", then "exit <status>"
 * when it ends, or "<stage>: <error>" if it could not start. A byte 'k' from the server kills
 * the command's process group. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helper.h"

#define CTL_FD 3
#define REQUEST_MAX (4u << 20)
#define MAX_CMDS 1024

struct cmd {
    pid_t pid;
    int conn; /* -1 once the server went away: the command runs on unreported */
};

static struct cmd cmds[MAX_CMDS];

/* "<word> <number>\n" on the connection */
static void say(int conn, const char *word, long v)
{
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "%s %ld\n", word, v);
    if (conn >= 0 && write(conn, buf, (size_t)n) < 0) {
        /* the server went away; nothing to tell */
    }
}

static void say_error(int conn, const char *stage, int errnum)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "%s: %s\n", stage, strerror(errnum));
    if (write(conn, buf, (size_t)n) < 0) {
        /* the server went away */
    }
}

static bool read_full(int fd, char *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = read(fd, buf + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        off += (size_t)n;
    }
    return true;
}

/* Split "a\0b\0\0" into a NULL-terminated vector; returns the position after the list. */
static char *split(char *p, char *end, char **vec, size_t max, size_t *count)
{
    size_t n = 0;
    while (p < end && *p && n + 1 < max) {
        vec[n++] = p;
        p += strlen(p) + 1;
    }
    vec[n] = NULL;
    *count = n;
    return p < end ? p + 1 : end;
}

/* A command that is a plain program name and arguments ("true", "ls -la src", "make test")
 * means the same with or without the shell: run it without one, which saves starting the shell
 * each time. Anything the shell would interpret (quotes, variables, globs, redirections, lists,
 * assignments) or a shell builtin other than true and false goes to /bin/sh -c as always, and so
 * does a program not found on PATH (for the shell's own "not found" and status 127). Runs in
 * the forked child: modifies cmd, allocates nothing. */
static void exec_simple(char *cmd, char **envp)
{
    static const char *const builtins[] = {
        ".",       ":",        "[",      "alias",   "bg",    "break", "cd",     "chdir",
        "command", "continue", "echo",   "eval",    "exec",  "exit",  "export", "fc",
        "fg",      "getopts",  "hash",   "jobs",    "kill",  "local", "printf", "pwd",
        "read",    "readonly", "return", "set",     "shift", "test",  "times",  "trap",
        "type",    "ulimit",   "umask",  "unalias", "unset", "wait",  NULL};
    size_t n = strlen(cmd);
    if (n == 0 || n > 4096)
        return;
    for (size_t i = 0; i < n; i++) {
        char c = cmd[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr(" _./,:+@%-", c)))
            return;
    }
    char *words[64];
    size_t nw = 0;
    for (char *p = cmd; *p;) {
        while (*p == ' ')
            *p++ = '\0';
        if (!*p)
            break;
        if (nw == 63)
            return;
        words[nw++] = p;
        while (*p && *p != ' ')
            p++;
    }
    words[nw] = NULL;
    if (nw == 0)
        return;
    for (const char *const *b = builtins; *b; b++)
        if (strcmp(words[0], *b) == 0)
            goto restore;
    if (strchr(words[0], '/')) {
        execve(words[0], words, envp);
        goto restore;
    }
    const char *path = "/usr/local/bin:/usr/bin:/bin";
    for (char **e = envp; *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            path = *e + 5;
    for (const char *dir = path; *dir;) {
        size_t dl = strcspn(dir, ":");
        char full[4096];
        size_t wl = strlen(words[0]);
        if (dl > 0 && dl + 1 + wl < sizeof(full)) {
            memcpy(full, dir, dl);
            full[dl] = '/';
            memcpy(full + dl + 1, words[0], wl + 1);
            execve(full, words, envp); /* returns only when it cannot run that one */
        }
        dir += dl;
        if (*dir == ':')
            dir++;
    }
restore:
    /* back to the original text for the shell */
    for (size_t i = 0; i < n; i++)
        if (cmd[i] == '\0')
            cmd[i] = ' ';
}

/* What the command's process needs between clone and exec. */
struct child {
    int conn;
    int started; /* the write end of the init's start pipe */
    const int *fds;
    const char *cwd;
    char **argv, **envp;
    size_t argc;
};

/* The command's own stack until its exec; the init waits meanwhile and never runs two of these
 * at once. */
static char child_stack[64 << 10] __attribute__((aligned(16)));

/* How long a command may take from clone to exec. Only a command stopped in between (SIGSTOP
 * from a process of the sandbox) comes near it. */
#define START_TIMEOUT_MS 5000

/* The command between clone and exec. It shares the init's memory (CLONE_VM: no page tables
 * to copy, which is most of the cost of a fork) but has its own file table, working directory
 * and signal mask, so it may change those; it allocates nothing and leaves the init's memory as
 * it found it unless it execs. */
static int child_main(void *arg)
{
    struct child *c = arg;
    sigset_t none;
    sigemptyset(&none);
    for (int i = 0; i < 3; i++)
        if (dup2(c->fds[i], i) < 0)
            _exit(127);
    /* Kept, close-on-exec, and nothing else: the connection at 3, to report a failure before
     * exec, and the start pipe at 4, whose closing at exec (or exit) tells the init that its
     * memory is its own again. */
    int report = fcntl(c->conn, F_DUPFD_CLOEXEC, 10);
    int started = fcntl(c->started, F_DUPFD_CLOEXEC, 10);
    if (report < 0 || started < 0 || dup3(report, 3, O_CLOEXEC) < 0 ||
        dup3(started, 4, O_CLOEXEC) < 0)
        _exit(127);
    report = 3;
    syscall(SYS_close_range, 5, ~0u, 0);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setsid();
    if (chdir(c->cwd) < 0) {
        say_error(report, "cwd", errno);
        _exit(127);
    }
    if (c->argc == 3 && strcmp(c->argv[0], "/bin/sh") == 0 && strcmp(c->argv[1], "-c") == 0)
        exec_simple(c->argv[2], c->envp); /* returns when the shell is needed after all */
    execve(c->argv[0], c->argv, c->envp);
    say_error(report, "exec", errno);
    _exit(127);
}

static void start_command(int conn)
{
    uint32_t len = 0;
    int fds[3] = {-1, -1, -1};
    union {
        char buf[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &len, .iov_len = sizeof(len)};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (n != sizeof(len) || !c || c->cmsg_type != SCM_RIGHTS ||
        c->cmsg_len != CMSG_LEN(3 * sizeof(int)) || len < 4 || len > REQUEST_MAX) {
        if (c && c->cmsg_type == SCM_RIGHTS)
            for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) && i < 3; i++)
                close(((int *)CMSG_DATA(c))[i]);
        say_error(conn, "bad request", EPROTO);
        close(conn);
        return;
    }
    memcpy(fds, CMSG_DATA(c), sizeof(fds));
    char *req = malloc(len + 2);
    int slot = -1;
    for (int i = 0; i < MAX_CMDS; i++)
        if (cmds[i].pid == 0) {
            slot = i;
            break;
        }
    if (!req || !read_full(conn, req, len) || slot < 0) {
        say_error(conn, slot < 0 ? "too many commands" : "read request", slot < 0 ? EAGAIN : EIO);
        goto out;
    }
    req[len] = req[len + 1] = '\0';
    char *end = req + len, *cwd = req;
    char *argv[64], *envp[512];
    size_t argc, envc;
    char *p = split(cwd + strlen(cwd) + 1, end, argv, 64, &argc);
    split(p, end, envp, 512, &envc);
    if (argc == 0) {
        say_error(conn, "bad request", EPROTO);
        goto out;
    }
    int started[2];
    if (pipe2(started, O_CLOEXEC) < 0) {
        say_error(conn, "fork command", errno);
        goto out;
    }
    struct child ch = {.conn = conn,
                       .started = started[1],
                       .fds = fds,
                       .cwd = cwd,
                       .argv = argv,
                       .argc = argc,
                       .envp = envp};
    /* Not CLONE_VFORK, which would wait for the exec without a limit: a process of the sandbox
     * could stop the command before its exec and so stall the init for good. */
    pid_t pid = clone(child_main, child_stack + sizeof(child_stack), CLONE_VM | SIGCHLD, &ch);
    close(started[1]);
    if (pid < 0) {
        close(started[0]);
        say_error(conn, "fork command", errno);
        goto out;
    }
    struct pollfd pfd = {.fd = started[0], .events = POLLIN};
    int ready;
    while ((ready = poll(&pfd, 1, START_TIMEOUT_MS)) < 0 && errno == EINTR)
        ;
    close(started[0]);
    if (ready <= 0) {
        /* stopped before its exec: it still runs on our memory, so it goes before we go on */
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
        static const char stopped[] = "start command: it was stopped before it could start (by a "
                                      "signal from inside the sandbox?), and killed\n";
        if (write(conn, stopped, sizeof(stopped) - 1) < 0) {
            /* the server went away */
        }
        goto out;
    }
    cmds[slot].pid = pid;
    cmds[slot].conn = conn;
    say(conn, "pid", pid);
    conn = -1; /* kept until the command ends */
out:
    free(req);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    if (conn >= 0)
        close(conn);
}

static struct cmd *cmd_of_conn(int conn)
{
    for (int i = 0; i < MAX_CMDS; i++)
        if (cmds[i].pid && cmds[i].conn == conn)
            return &cmds[i];
    return NULL;
}

int init_main(void)
{
    prctl(PR_SET_NAME, "sandbox-init"); /* not "memfd:sandbox-i" */
    /* Not dumpable: processes in the sandbox (no CAP_SYS_PTRACE) can neither trace PID 1 nor
     * open its /proc/1/fd, mem or environ. */
    prctl(PR_SET_DUMPABLE, 0);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, 0);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    fcntl(CTL_FD, F_SETFD, FD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = sfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    ev.data.fd = CTL_FD;
    epoll_ctl(ep, EPOLL_CTL_ADD, CTL_FD, &ev);
    for (;;) {
        struct epoll_event evs[32];
        int n = epoll_wait(ep, evs, 32, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == CTL_FD) {
                int conn = accept4(CTL_FD, NULL, NULL, SOCK_CLOEXEC);
                if (conn < 0)
                    continue;
                start_command(conn);
                struct cmd *c = cmd_of_conn(conn);
                if (c) {
                    struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = conn};
                    epoll_ctl(ep, EPOLL_CTL_ADD, conn, &cev);
                }
            } else if (fd == sfd) {
                struct signalfd_siginfo si;
                while (read(sfd, &si, sizeof(si)) > 0)
                    ;
                int status;
                pid_t pid;
                while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                    for (int k = 0; k < MAX_CMDS; k++) {
                        if (cmds[k].pid != pid)
                            continue;
                        if (cmds[k].conn >= 0) {
                            say(cmds[k].conn, "exit", status);
                            epoll_ctl(ep, EPOLL_CTL_DEL, cmds[k].conn, NULL);
                            close(cmds[k].conn);
                        }
                        cmds[k].pid = 0;
                        cmds[k].conn = -1;
                    }
                }
            } else {
                /* the server: 'k' kills the command; end of file means it went away */
                struct cmd *c = cmd_of_conn(fd);
                char b;
                ssize_t r = read(fd, &b, 1);
                if (r == 1 && b == 'k' && c) {
                    kill(-c->pid, SIGKILL);
                    kill(c->pid, SIGKILL);
                } else if (r <= 0) {
                    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                    close(fd);
                    if (c)
                        c->conn = -1;
                }
            }
        }
    }
}

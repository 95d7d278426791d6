/* sandbox-init: PID 1 of a sandbox's pid namespace. It reaps orphans and starts the sandbox's
 * commands: the server connects to its control socket (fd 3, listening; bound on a host path the
 * sandbox cannot see) and sends one request per command. Commands forked here are already in
 * every namespace and cgroup of the sandbox and inherit its policy (capabilities, no_new_privs,
 * seccomp), so a command costs one clone (sharing the init's memory until it execs) and one
 * exec. The namespace ends when the server sends
 * this process SIGKILL.
 *
 * A pooled sandbox's init starts without a network namespace of its own and unconfined, its
 * policy in a memory file at fd 4, and refuses commands until the server hands the sandbox over
 * (arm below).
 *
 * Request: a 4-byte length, then "cwd\0argv0\0...\0\0env0\0...\0\0", with the command's
 * stdin, stdout and stderr attached (SCM_RIGHTS) to the first bytes. A connection with nothing
 * to read yet waits (at most SPARE_MAX of them) until its request comes.
 * Answers on the connection, one line each: "pid <pid in the sandbox>", then "exit <status>"
 * when it ends, or "<stage>: <error>" if it could not start. A byte 'k' from the server kills
 * the command's process group. This process keeps its copies of a command's stdout and stderr
 * until it has told the end: the pipes then end with the report rather than a moment before it,
 * and the server, which finishes on the report, is woken once rather than twice.
 * One command at a time per connection: when a plain command has ended, a last line "ready"
 * says that this process keeps the connection for the server's next request (at most KEPT_MAX
 * of them, which it never closes first), so that a sandbox's commands need no connect, accept
 * and close each. Without that line the connection closes after the report.
 *
 * A relayed request has a fourth descriptor, a status file, and a third list after the
 * environment, "<stdout max>\0<stderr max>\0\0". Its stdout and stderr are then files of the
 * host that no process of the sandbox may hold: the command writes to memory files of its own
 * instead (files, not pipes: a program that writes a pipe without blocking may drop what is
 * still queued when it exits), and this process copies what they gain into the host files every
 * RELAY_TICK_MS, at most that many bytes each, and frees what it has copied or dropped (the
 * memory is the sandbox's). What the host's full disk does not take stays in the memory file for
 * the next tick. When it reaps the command it copies the rest and writes "exit <wait status>\n"
 * to the status file, "exit <wait status> lost <bytes>\n" when the full disk kept bytes out. The
 * server reads it there, whether or not it was connected, or restarted, meanwhile. Nothing in the
 * sandbox can reach those descriptors: this process is not dumpable, so its /proc/1/fd is closed to
 * them. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#include "helper.h"
#include "sandbox/confine.h"
#include "sandbox/listen_ports.h"

#define CTL_FD 3
#define POLICY_FD 4 /* a pooled sandbox's: the policy it confines itself with when handed over */
#define REQUEST_MAX (4u << 20)
/* A plain command holds three descriptors here until it ends (its connection, stdout and
 * stderr): at most MAX_CMDS of them, with the connections waiting for a request (SPARE_MAX new
 * ones, KEPT_MAX kept after a command), stay within the sandbox's RLIMIT_NOFILE (4096). */
#define MAX_CMDS 1024
#define SPARE_MAX 4
#define KEPT_MAX 16

#define RELAY_CHUNK 65536
#define RELAY_TICK_MS 50
#define RELAY_TICK_BYTES (8u << 20) /* copied per file and tick, so other work waits little */

/* A memory file the command writes and the host file its bytes go to. */
struct relay {
    int from;        /* the memory file, -1 when none */
    int to;          /* the host file, -1 when none */
    uint64_t copied; /* bytes of from copied or dropped (and freed) */
    uint64_t left;   /* bytes the host file may still take; the rest is dropped */
    bool full;       /* the host's disk was full at the last copy: kept to copy at the next */
};

struct cmd {
    pid_t pid;
    int conn;      /* -1 once the server went away: the command runs on unreported */
    int status_fd; /* the host file for the command's end, -1 when none */
    bool relayed;  /* told its pid at once (the others learn it with their end) */
    struct relay relay[2];
    int held[2]; /* a plain command's stdout and stderr, closed after its end is told */
};

static struct cmd cmds[MAX_CMDS];
static int cmds_end;         /* past the highest slot taken so far: slots are taken lowest first */
static int spare[SPARE_MAX]; /* connections waiting for their request, -1 where none */
static unsigned long spare_age[SPARE_MAX], spare_count; /* when each came, counted */
static int kept[KEPT_MAX]; /* connections kept after a command for the next, -1 where none */
static bool pooled;        /* not handed over yet: no network namespace of its own, not confined */
static int ep = -1, tick = -1;
static unsigned relays; /* relayed commands running: the tick runs while there are any */

/* The descriptor in *fd, which is -1 afterwards. */
static int take_fd(int *fd)
{
    int v = *fd;
    *fd = -1;
    return v;
}
#define TAKE(fd) take_fd(&(fd))

/* "<word> <number>\n" on the connection */
static void say(int conn, const char *word, long v)
{
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "%s %ld\n", word, v);
    if (conn >= 0 && write(conn, buf, (size_t)n) < 0) {
        /* the server went away; nothing to tell */
    }
}

/* A command's end: "exit <status>\n", after "pid <pid>\n" when pid is not 0 (a command whose
 * pid was not told at its start) and before "ready\n" when the connection is kept, in one
 * write. */
static void say_end(int conn, pid_t pid, int status, bool ready)
{
    char buf[64];
    int n = pid ? snprintf(buf, sizeof(buf), "pid %d\nexit %d\n%s", (int)pid, status,
                           ready ? "ready\n" : "")
                : snprintf(buf, sizeof(buf), "exit %d\n%s", status, ready ? "ready\n" : "");
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

/* 1 from the command's clone until it no longer runs on this process's memory. */
static int on_our_memory;

/* Wait, up to START_TIMEOUT_MS, until the command has left this process's memory. */
static bool left_our_memory(void)
{
    struct timespec now, end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += START_TIMEOUT_MS / 1000;
    while (__atomic_load_n(&on_our_memory, __ATOMIC_ACQUIRE)) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ns = (end.tv_sec - now.tv_sec) * 1000000000L + (end.tv_nsec - now.tv_nsec);
        if (ns <= 0)
            return false;
        struct timespec left = {ns / 1000000000L, ns % 1000000000L};
        /* a shared futex, as the kernel wakes it */
        syscall(SYS_futex, &on_our_memory, FUTEX_WAIT, 1, &left, NULL, 0);
    }
    return true;
}

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
    /* Everything above stderr goes at the exec, marked in one call: among it the connection, to
     * report a failure before exec. Kernels before 5.11 cannot mark a range, and close it instead
     * after moving the connection below it. */
    int report = c->conn;
    if (syscall(SYS_close_range, 3, ~0u, CLOSE_RANGE_CLOEXEC) < 0) {
        report = fcntl(c->conn, F_DUPFD_CLOEXEC, 10);
        if (report < 0 || dup3(report, 3, O_CLOEXEC) < 0)
            _exit(127);
        report = 3;
        syscall(SYS_close_range, 4, ~0u, 0);
    }
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* A process group of its own, which a kill takes whole; not a session of its own, which
     * would cost the kernel a scheduler group (an autogroup) for each command. */
    setpgid(0, 0);
    if (chdir(c->cwd) < 0) {
        say_error(report, "cwd", errno);
        _exit(127);
    }
    if (c->argc == 3 && strcmp(c->argv[0], "/bin/sh") == 0 && strcmp(c->argv[1], "-c") == 0)
        exec_simple(c->argv[2], c->envp); /* returns when the shell is needed after all */
    /* the agent bridge is this program's own (helper.h); /proc/self/exe is the image this
     * process shares with the init until it execs */
    bool own = strcmp(c->argv[0], "sandbox-agent") == 0;
    execve(own ? "/proc/self/exe" : c->argv[0], c->argv, c->envp);
    say_error(report, "exec", errno);
    _exit(127);
}

/* Parse a byte cap of the request's option list. */
static bool parse_max(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = s ? strtoull(s, &end, 10) : 0;
    if (!s || !*s || *end || errno)
        return false;
    *out = v;
    return true;
}

/* The hand-over of a pooled sandbox (LISTEN_ARM_REQUEST, after its first word): a network
 * namespace of the sandbox's own with its loopback up, then this process confines itself as the
 * setup would have before its exec, then the listeners go to the server. From here on everything
 * started here is in that namespace and under that policy. A hand-over that fails half-way ends
 * this process, and with it the sandbox: it must not be left between the two states. */
static void arm(int conn)
{
    uint32_t n = 0;
    uint16_t ports[LISTEN_PORTS_MAX];
    if (!pooled) {
        say_error(conn, "hand-over", EALREADY);
        return;
    }
    if (!read_full(conn, (char *)&n, sizeof(n)) || n > LISTEN_PORTS_MAX ||
        !read_full(conn, (char *)ports, n * sizeof(ports[0]))) {
        say_error(conn, "hand-over request", EPROTO);
        return;
    }
    const char *stage = "network namespace";
    int r = unshare(CLONE_NEWNET) < 0 ? -errno : 0;
    if (r == 0) {
        stage = "bring lo up";
        r = listen_loopback_up();
    }
    if (r == 0) {
        stage = "apply sandbox policy";
        r = confine_apply_saved(POLICY_FD);
    }
    if (r == 0) {
        close(POLICY_FD);
        pooled = false;
        if (n)
            r = listen_ports_send(conn, ports, (int)n, &stage);
        else if (write(conn, "ready\n", 6) != 6)
            r = -EIO;
    }
    if (r < 0) {
        say_error(conn, stage, -r);
        _exit(127);
    }
}

static void start_command(int conn)
{
    uint32_t len = 0;
    /* stdin, stdout, stderr and, for a relayed command, its status file */
    int fds[4] = {-1, -1, -1, -1}, mem[2] = {-1, -1};
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &len, .iov_len = sizeof(len)};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    size_t nfds = c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS
                      ? (c->cmsg_len - CMSG_LEN(0)) / sizeof(int)
                      : 0;
    if (nfds > 4)
        nfds = 4;
    if (nfds)
        memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
    bool relayed = nfds == 4;
    char *req = NULL;
    if (n == sizeof(len) && len == LISTEN_ARM_REQUEST && nfds == 0) {
        arm(conn);
        goto out;
    }
    if (pooled) {
        /* Nothing runs before the sandbox is handed over: it is not confined yet. The request is
         * read whole first, so that the answer does not meet a client still writing it (which
         * would see a broken pipe instead of the reason). */
        char sink[4096];
        size_t left = n == sizeof(len) && len <= REQUEST_MAX ? len : 0;
        while (left) {
            size_t k = left < sizeof(sink) ? left : sizeof(sink);
            if (!read_full(conn, sink, k))
                break;
            left -= k;
        }
        say_error(conn, "the sandbox is not handed over yet", EPERM);
        goto out;
    }
    if (n != sizeof(len) || (msg.msg_flags & MSG_CTRUNC) || nfds < 3 || len < 4 ||
        len > REQUEST_MAX) {
        say_error(conn, "bad request", EPROTO);
        goto out;
    }
    req = malloc(len + 2);
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
    char *argv[64], *envp[512], *opts[4];
    size_t argc, envc, optc;
    char *p = split(cwd + strlen(cwd) + 1, end, argv, 64, &argc);
    p = split(p, end, envp, 512, &envc);
    split(p, end, opts, 4, &optc);
    uint64_t max[2] = {0, 0};
    if (argc == 0 ||
        (relayed && (optc != 2 || !parse_max(opts[0], &max[0]) || !parse_max(opts[1], &max[1])))) {
        say_error(conn, "bad request", EPROTO);
        goto out;
    }
    int child_fds[3] = {fds[0], fds[1], fds[2]};
    if (relayed) {
        for (int i = 0; i < 2; i++) {
            mem[i] = memfd_create(i == 0 ? "stdout" : "stderr", MFD_CLOEXEC);
            if (mem[i] < 0) {
                say_error(conn, "memfd_create", errno);
                goto out;
            }
            fcntl(mem[i], F_SETFL, O_APPEND);
            child_fds[1 + i] = mem[i];
        }
    }
    struct child ch = {
        .conn = conn, .fds = child_fds, .cwd = cwd, .argv = argv, .argc = argc, .envp = envp};
    /* Not CLONE_VFORK, which would wait for the exec without a limit: a process of the sandbox
     * could stop the command before its exec and so stall the init for good. The kernel clears
     * on_our_memory and wakes its futex when the command leaves this memory, at its exec or its
     * exit (CLONE_CHILD_CLEARTID, as a thread's end is told to pthread_join). */
    on_our_memory = 1;
    pid_t pid = clone(child_main, child_stack + sizeof(child_stack),
                      CLONE_VM | CLONE_CHILD_CLEARTID | SIGCHLD, &ch, NULL, NULL, &on_our_memory);
    if (pid < 0) {
        say_error(conn, "fork command", errno);
        goto out;
    }
    if (!left_our_memory()) {
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
    /* A slot is set up when it is taken. */
    struct cmd *cmd = &cmds[slot];
    if (slot >= cmds_end)
        cmds_end = slot + 1;
    cmd->pid = pid;
    cmd->conn = conn;
    cmd->status_fd = -1;
    cmd->relayed = relayed;
    for (int i = 0; i < 2; i++) {
        cmd->relay[i].from = cmd->relay[i].to = -1;
        cmd->held[i] = relayed ? -1 : TAKE(fds[1 + i]);
    }
    if (relayed) {
        for (int i = 0; i < 2; i++) {
            struct relay *r = &cmd->relay[i];
            r->from = TAKE(mem[i]);
            r->to = TAKE(fds[1 + i]);
            r->copied = 0;
            r->left = max[i];
        }
        cmd->status_fd = TAKE(fds[3]);
        if (relays++ == 0) {
            struct itimerspec every = {.it_interval = {0, RELAY_TICK_MS * 1000000L},
                                       .it_value = {0, RELAY_TICK_MS * 1000000L}};
            timerfd_settime(tick, 0, &every, NULL);
        }
    }
    /* A relayed command's caller waits for its pid; a plain one's learns it with its end, in one
     * write, so that the server wakes once for a short command. */
    if (relayed)
        say(conn, "pid", pid);
    conn = -1; /* kept until the command ends */
out:
    free(req);
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    for (int i = 0; i < 2; i++)
        if (mem[i] >= 0)
            close(mem[i]);
    if (conn >= 0)
        close(conn);
}

/* Copy what the command added to its memory file into the host file, at most budget bytes now
 * and up to the cap in all, and free it. A sandbox that shrinks the file loses what was not
 * copied yet; one that writes past the cap only has it freed. */
static void relay_copy(struct relay *r, uint64_t budget)
{
    static char buf[RELAY_CHUNK];
    struct stat st;
    if (r->from < 0 || fstat(r->from, &st) < 0)
        return;
    uint64_t size = (uint64_t)st.st_size, from = r->copied;
    if (size < from)
        from = r->copied = size;
    if (size - r->copied > budget && r->left > 0)
        size = r->copied + budget;
    while (r->copied < size && r->left > 0) {
        size_t want = size - r->copied < sizeof(buf) ? (size_t)(size - r->copied) : sizeof(buf);
        if (want > r->left)
            want = (size_t)r->left;
        ssize_t n = pread(r->from, buf, want, (off_t)r->copied);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        ssize_t off = 0;
        r->full = false;
        while (off < n) {
            ssize_t w = write(r->to, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && (errno == ENOSPC || errno == EDQUOT))
                r->full = true; /* kept in the memory file for the next copy */
            else if (w <= 0)
                r->left = 0; /* the file takes no more: drop the rest */
            if (w <= 0)
                break;
            off += w;
        }
        if (r->full)
            n = off;
        r->copied += (uint64_t)n;
        r->left = r->left > (uint64_t)n ? r->left - (uint64_t)n : 0;
        if (r->full)
            break;
    }
    if (r->left == 0)
        r->copied = size;
    if (r->copied > from)
        fallocate(r->from, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)from,
                  (off_t)(r->copied - from));
}

static void relay_close(struct relay *r)
{
    if (r->from >= 0)
        close(r->from);
    if (r->to >= 0)
        close(r->to);
    r->from = r->to = -1;
    r->copied = r->left = 0;
    r->full = false;
}

static void cmd_clear(struct cmd *c)
{
    if (c->status_fd >= 0 && --relays == 0) {
        struct itimerspec stop = {0};
        timerfd_settime(tick, 0, &stop, NULL);
    }
    c->pid = 0;
    c->conn = -1;
    if (c->status_fd >= 0)
        close(c->status_fd);
    c->status_fd = -1;
    for (int i = 0; i < 2; i++) {
        relay_close(&c->relay[i]);
        if (c->held[i] >= 0)
            close(TAKE(c->held[i]));
    }
}

/* The command was reaped: the rest of what it wrote, then the record of its end. */
static void cmd_ended(struct cmd *c, int status)
{
    uint64_t lost = 0;
    for (int i = 0; i < 2; i++) {
        struct relay *r = &c->relay[i];
        struct stat st;
        relay_copy(r, UINT64_MAX);
        /* what the host's full disk could not take is lost now: the server is told */
        if (r->full && r->from >= 0 && fstat(r->from, &st) == 0 && (uint64_t)st.st_size > r->copied)
            lost += (uint64_t)st.st_size - r->copied;
        relay_close(r);
    }
    if (c->status_fd >= 0) {
        /* the server allocated the file's first block, so this is written on a full disk */
        char line[64];
        int n = lost ? snprintf(line, sizeof(line), "exit %d lost %llu\n", status,
                                (unsigned long long)lost)
                     : snprintf(line, sizeof(line), "exit %d\n", status);
        if (write(c->status_fd, line, (size_t)n) != n) {
            /* the server learns nothing; it sees the sandbox's end instead */
        }
    }
}

/* Connections closed while a batch of epoll events is handled: a later event of the batch for
 * one of these numbers is that connection's, not of whatever took the number since (an accept,
 * a request's descriptors), and is dropped. */
static int closed_now[MAX_CMDS + SPARE_MAX + KEPT_MAX + 1];
static int nclosed_now;

static void conn_close(int conn)
{
    if (nclosed_now < (int)(sizeof(closed_now) / sizeof(closed_now[0])))
        closed_now[nclosed_now++] = conn;
    close(conn); /* which also leaves the epoll set: nothing else holds its file */
}

static bool closed_in_batch(int fd)
{
    for (int i = 0; i < nclosed_now; i++)
        if (closed_now[i] == fd)
            return true;
    return false;
}

static struct cmd *cmd_of_conn(int conn)
{
    for (int i = 0; i < cmds_end; i++)
        if (cmds[i].pid && cmds[i].conn == conn)
            return &cmds[i];
    return NULL;
}

/* A connection made ahead of its request: watched until the request comes. The oldest goes
 * when there are too many (the server keeps one a sandbox). */
static void spare_add(int conn)
{
    int at = 0;
    for (int i = 0; i < SPARE_MAX && spare[at] >= 0; i++)
        if (spare[i] < 0 || spare_age[i] < spare_age[at])
            at = i;
    if (spare[at] >= 0)
        conn_close(spare[at]);
    spare[at] = conn;
    spare_age[at] = ++spare_count;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = conn};
    epoll_ctl(ep, EPOLL_CTL_ADD, conn, &ev);
}

/* Keep conn, in the epoll set already, for the server's next request; false when KEPT_MAX
 * are kept already. */
static bool kept_add(int conn)
{
    for (int i = 0; i < KEPT_MAX; i++)
        if (kept[i] < 0) {
            kept[i] = conn;
            return true;
        }
    return false;
}

/* Whether conn is a spare or a kept connection, which it stops being. */
static bool spare_take(int conn)
{
    for (int i = 0; i < SPARE_MAX; i++)
        if (spare[i] == conn) {
            spare[i] = -1;
            return true;
        }
    for (int i = 0; i < KEPT_MAX; i++)
        if (kept[i] == conn) {
            kept[i] = -1;
            return true;
        }
    return false;
}

/* Start the command conn brings; the connection is then watched for the server's 'k' and its
 * going away, or was closed. watched: conn is in the epoll set already. */
static void serve(int conn, bool watched)
{
    /* A spare stays in the set: the request is read whole before the command starts, and a
     * connection closed here leaves the set with its file, which nothing else holds (a command's
     * copy of the init's descriptors goes at its exec, which the init waits for). */
    start_command(conn);
    if (!watched && cmd_of_conn(conn)) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = conn};
        epoll_ctl(ep, EPOLL_CTL_ADD, conn, &ev);
    }
}

int init_main(void)
{
    prctl(PR_SET_NAME, "sandbox-init"); /* not "memfd:sandbox-i" */
    for (int i = 0; i < SPARE_MAX; i++)
        spare[i] = -1;
    for (int i = 0; i < KEPT_MAX; i++)
        kept[i] = -1;
    /* Before anything here opens a descriptor that could take its number. */
    pooled = fcntl(POLICY_FD, F_SETFD, FD_CLOEXEC) == 0;
    /* Not dumpable: processes in the sandbox (no CAP_SYS_PTRACE) can neither trace PID 1 nor
     * open its /proc/1/fd, mem or environ, which hold the host files of relayed commands. */
    prctl(PR_SET_DUMPABLE, 0);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, 0);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    ep = epoll_create1(EPOLL_CLOEXEC);
    tick = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    fcntl(CTL_FD, F_SETFD, FD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = sfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    ev.data.fd = CTL_FD;
    epoll_ctl(ep, EPOLL_CTL_ADD, CTL_FD, &ev);
    ev.data.fd = tick;
    epoll_ctl(ep, EPOLL_CTL_ADD, tick, &ev);
    for (;;) {
        struct epoll_event evs[32];
        int n = epoll_wait(ep, evs, 32, -1);
        nclosed_now = 0;
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (closed_in_batch(fd))
                continue;
            if (fd == tick) {
                uint64_t ticks;
                if (read(tick, &ticks, sizeof(ticks)) < 0) {
                    /* none due */
                }
                for (int k = 0; k < cmds_end; k++)
                    if (cmds[k].pid && cmds[k].status_fd >= 0)
                        for (int j = 0; j < 2; j++)
                            relay_copy(&cmds[k].relay[j], RELAY_TICK_BYTES);
            } else if (fd == CTL_FD) {
                int conn = accept4(CTL_FD, NULL, NULL, SOCK_CLOEXEC);
                if (conn < 0)
                    continue;
                char peek;
                if (recv(conn, &peek, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN) {
                    spare_add(conn); /* connected ahead: its request comes later */
                    continue;
                }
                serve(conn, false);
            } else if (spare_take(fd)) {
                serve(fd, true);
            } else if (fd == sfd) {
                /* SIGCHLD does not queue: one read takes it, and one that comes while these
                 * are reaped makes sfd readable again */
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof(si)) < 0) {
                    /* taken by an earlier turn */
                }
                int status;
                pid_t pid;
                while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                    for (int k = 0; k < cmds_end; k++) {
                        if (cmds[k].pid != pid)
                            continue;
                        cmd_ended(&cmds[k], status);
                        int conn = cmds[k].conn;
                        if (conn >= 0 && !cmds[k].relayed && kept_add(conn)) {
                            say_end(conn, pid, status, true);
                        } else if (conn >= 0) {
                            say_end(conn, cmds[k].relayed ? 0 : pid, status, false);
                            conn_close(conn);
                        }
                        cmd_clear(&cmds[k]);
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
                } else if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                    conn_close(fd);
                    if (c)
                        c->conn = -1;
                }
            }
        }
    }
}

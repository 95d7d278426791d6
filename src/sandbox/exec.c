/* Entering a running sandbox with a command (sandbox_exec_start, sandbox_spawn); file
 * operations go through its file worker (fs_worker.c).
 *
 * A command is handed to the sandbox's init over its control socket, with the command's stdin,
 * stdout and stderr attached; the init starts it already inside every namespace, the cgroup and
 * the policy of the sandbox (helper/init.c has the protocol). The server reads the output pipes
 * and the init's report on the connection: "pid <pid>", then "exit <wait status>" and "ready"
 * when the init keeps the connection for the sandbox's next command, or "<stage>: <error>" when
 * the command could not start. A spawned process (one that outlives the
 * server) never gets a host file: the init relays its output into the host files with a cap and
 * records its end in a status file, so neither depends on a server being connected. */
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <sys/un.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "sandbox/capture.h"
#include "sandbox/listen_ports.h"

/* The init's report on a command is a few short lines: more is cut, and ends the connection. */
#define REPORT_MAX 512

struct sandbox_exec {
    struct sandbox_exec *next; /* in m->execs */
    struct sandbox *sbx;
    h2o_socket_t *conn;      /* to the sandbox's init, which reports on it */
    char report[REPORT_MAX]; /* what it said so far, NUL terminated */
    size_t report_len;
    h2o_socket_t *out_sock, *err_sock;
    int out_fd, err_fd;     /* the pipes' ends, which the sockets above wrap once watched */
    struct loop_timer tick; /* the first look at the pipes; then, while output pours in, reads */
    bool gathering, grown;
    char *stdin_data;
    h2o_socket_t *stdin_sock;
    struct capture out, err;
    int conn_fd; /* conn's descriptor */
    int64_t t0, deadline;
    bool timed_out, killed;
    bool answered; /* exec_answer_now: its caller has had its answer */
    sandbox_output_fn on_output;
    sandbox_exec_done_fn on_done;
    void *ctx;
};

static void exec_finish(struct sandbox_exec *ex, bool ready);

/* (h2o makes the descriptor non-blocking itself) */
static int nonblock_socket(int fd, h2o_socket_t **out, void *data)
{
    *out = h2o_evloop_socket_create(loop_get(), fd, 0);
    (*out)->data = data;
    return 0;
}

/* Take into the stream's capture what h2o has read of it, then what the pipe holds until it
 * would block or ends (fd -1: nothing more): into the head directly while it has room, so that
 * most output is copied once, by the kernel. */
static void read_stream(struct sandbox_exec *ex, h2o_socket_t *sock, int fd, enum sandbox_stream s)
{
    struct capture *c = s == SANDBOX_STDOUT ? &ex->out : &ex->err;
    if (sock && sock->input->size) {
        capture_add(c, sock->input->bytes, sock->input->size);
        if (ex->on_output)
            ex->on_output(ex->ctx, s, sock->input->bytes, sock->input->size);
        h2o_buffer_consume(&sock->input, sock->input->size);
    }
    char buf[65536];
    while (fd >= 0) {
        size_t room = sizeof(buf);
        char *at = capture_room(c, &room);
        ssize_t n = read(fd, at ? at : buf, room);
        if (n <= 0)
            return;
        if (at) {
            capture_took(c, (size_t)n);
        } else {
            capture_add(c, buf, (size_t)n);
        }
        if (ex->on_output)
            ex->on_output(ex->ctx, s, at ? at : buf, (size_t)n);
    }
}

/* A command that prints a lot prints it a few kilobytes at a time, and reading each piece as it
 * comes wakes the server for each: a mebibyte in 8 KiB writes is 128 wake-ups, and on a virtual
 * machine a wake-up costs more than the read. Once a command has printed GATHER_BYTES and a read
 * finds GATHER_CHUNK or more waiting (a writer in bulk, not one printing a line now and then),
 * its pipes grow to GATHER_PIPE (charged, as pipe pages are, to the writer's memory cgroup: the
 * sandbox's) so that it rarely waits on a full one, and are read every GATHER_MS rather than at
 * each write, until a tick finds nothing new. What it prints after that is read as it comes
 * again, and a command that prints little is never on the tick. */
#define GATHER_BYTES (32u << 10)
#define GATHER_CHUNK (4u << 10)
#define GATHER_PIPE (1 << 20)
#define GATHER_MS 1

static void on_stream(h2o_socket_t *sock, const char *err);

/* Both pipes emptied; returns how many bytes that took in. */
static uint64_t read_both(struct sandbox_exec *ex)
{
    uint64_t before = ex->out.total + ex->err.total;
    if (ex->out_sock)
        read_stream(ex, ex->out_sock, ex->out_fd, SANDBOX_STDOUT);
    if (ex->err_sock)
        read_stream(ex, ex->err_sock, ex->err_fd, SANDBOX_STDERR);
    return ex->out.total + ex->err.total - before;
}

static void on_gather(struct loop_timer *t)
{
    struct sandbox_exec *ex = container_of(t, struct sandbox_exec, tick);
    if (read_both(ex)) {
        loop_timer_start(&ex->tick, GATHER_MS, on_gather);
        return;
    }
    ex->gathering = false;
    if (ex->out_sock)
        h2o_socket_read_start(ex->out_sock, on_stream);
    if (ex->err_sock)
        h2o_socket_read_start(ex->err_sock, on_stream);
}

static void gather_start(struct sandbox_exec *ex)
{
    ex->gathering = true;
    h2o_socket_t *socks[2] = {ex->out_sock, ex->err_sock};
    int fds[2] = {ex->out_fd, ex->err_fd};
    for (int i = 0; i < 2; i++) {
        if (!socks[i])
            continue;
        if (!ex->grown) /* best effort: a pipe that cannot grow is only read more often */
            fcntl(fds[i], F_SETPIPE_SZ, GATHER_PIPE);
        h2o_socket_read_stop(socks[i]);
    }
    ex->grown = true;
    loop_timer_start(&ex->tick, GATHER_MS, on_gather);
}

static void close_stream(h2o_socket_t **sockp)
{
    h2o_socket_read_stop(*sockp);
    h2o_socket_close(*sockp);
    *sockp = NULL;
}

/* What the command wrote before it exited is in the pipe already, unless its end was read. */
static void drain(struct sandbox_exec *ex, h2o_socket_t *sock, int fd, enum sandbox_stream s)
{
    if (!sock || h2o_socket_is_reading(sock) || ex->gathering)
        read_stream(ex, sock, fd, s);
}

static void on_stream(h2o_socket_t *sock, const char *err)
{
    struct sandbox_exec *ex = sock->data;
    enum sandbox_stream s = sock == ex->out_sock ? SANDBOX_STDOUT : SANDBOX_STDERR;
    /* h2o reads a few kilobytes at a time; empty the pipe in large reads instead, so a command
     * writing fast is not held back by a full pipe. End of file is left to h2o; the pipe is
     * closed with the command's end, after the answer. */
    uint64_t before = ex->out.total + ex->err.total;
    read_stream(ex, sock, err ? -1 : s == SANDBOX_STDOUT ? ex->out_fd : ex->err_fd, s);
    uint64_t now = ex->out.total + ex->err.total;
    if (err)
        h2o_socket_read_stop(sock);
    else if (now >= GATHER_BYTES && now - before >= GATHER_CHUNK && !ex->gathering)
        gather_start(ex);
}

/* Most commands end within a millisecond or two, and what they print waits in the pipes until
 * their end is reported: the pipes are watched by the event loop only once a command has run
 * WATCH_MS, so that a short one costs the loop no registration and removal of either. What a
 * longer one prints streams from then on as it comes. */
#define WATCH_MS 2

static void on_watch(struct loop_timer *t)
{
    struct sandbox_exec *ex = container_of(t, struct sandbox_exec, tick);
    nonblock_socket(ex->out_fd, &ex->out_sock, ex);
    nonblock_socket(ex->err_fd, &ex->err_sock, ex);
    h2o_socket_read_start(ex->out_sock, on_stream);
    h2o_socket_read_start(ex->err_sock, on_stream);
}

static void close_stdin(struct sandbox_exec *ex)
{
    if (ex->stdin_sock) {
        h2o_socket_close(ex->stdin_sock);
        ex->stdin_sock = NULL;
    }
}

static void on_stdin_written(h2o_socket_t *sock, const char *err)
{
    struct sandbox_exec *ex = sock->data;
    close_stdin(ex);
}

/* The init's report on a command ends with its "exit <status>" line, then "ready" when the init
 * keeps the connection for the next command: 0 while it is not whole, 1 when it is and the
 * connection closes, 2 when it is kept. */
static int report_end(const char *data, size_t len)
{
    if (!len || data[len - 1] != '\n')
        return 0;
    const char *last = len > 1 ? memrchr(data, '\n', len - 1) : NULL;
    last = last ? last + 1 : data;
    if (strncmp(last, "exit ", 5) == 0)
        return 1;
    if (strcmp(last, "ready\n") != 0 || last == data)
        return 0;
    const char *exit = last - 1 > data ? memrchr(data, '\n', (size_t)(last - 1 - data)) : NULL;
    exit = exit ? exit + 1 : data;
    return strncmp(exit, "exit ", 5) == 0 ? 2 : 0;
}

static void on_report(h2o_socket_t *sock, const char *err)
{
    struct sandbox_exec *ex = sock->data;
    size_t room = sizeof(ex->report) - 1 - ex->report_len;
    size_t n = sock->input->size < room ? sock->input->size : room;
    memcpy(ex->report + ex->report_len, sock->input->bytes, n);
    ex->report_len += n;
    ex->report[ex->report_len] = '\0';
    bool cut = n < sock->input->size;
    h2o_buffer_consume(&sock->input, sock->input->size);
    int end = report_end(ex->report, ex->report_len);
    if (!err && !cut && !end)
        return;
    exec_finish(ex, !err && !cut && end == 2);
}

/* A connection the init keeps between commands is read only for its end (the sandbox's). */
static void on_spare(h2o_socket_t *sock, const char *err)
{
    struct sandbox *sbx = sock->data;
    sbx->ctl_spare = NULL;
    h2o_socket_close(sock);
}

static void unlink_exec(struct sandbox_exec *ex)
{
    for (struct sandbox_exec **pp = &ex->sbx->m->execs; *pp; pp = &(*pp)->next)
        if (*pp == ex) {
            *pp = ex->next;
            break;
        }
}

static void kill_command(struct sandbox_exec *ex)
{
    /* The init kills the command's process group (the command leads its own). */
    if (ex->conn_fd >= 0 && write(ex->conn_fd, "k", 1) < 0) {
        /* the init is gone: the command went with it */
    }
}

/* ready: the init keeps the connection for the sandbox's next command. */
static void exec_finish(struct sandbox_exec *ex, bool ready)
{
    struct sandbox_exec_result res = {0};
    struct err err = {0};
    int status = -1;
    const char *line = ex->report;
    while (status < 0 && *line) {
        if (strncmp(line, "pid ", 4) == 0)
            ;
        else if (strncmp(line, "exit ", 5) == 0)
            status = (int)strtol(line + 5, NULL, 10);
        else if (!err.code) {
            size_t n = strcspn(line, "\n");
            err_set(&err, -EIO, "%.*s", (int)n, line);
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    drain(ex, ex->out_sock, ex->out_fd, SANDBOX_STDOUT);
    drain(ex, ex->err_sock, ex->err_fd, SANDBOX_STDERR);
    loop_timer_stop(&ex->tick);
    ex->gathering = false;
    unlink_exec(ex);
    if (status < 0 && !err.code)
        err_set(&err, -EIO, "the sandbox went away while the command ran");
    if (err.code) {
        if (strncmp(err.msg, "cwd: ", 5) == 0)
            err_set(&err, -ENOENT, "cannot change to the working directory: %s", err.msg + 5);
        else if (strncmp(err.msg, "fork command: ", 14) == 0)
            err_set(&err, -EAGAIN,
                    "the sandbox is at its process limit (%llu): kill processes, or start over "
                    "with container_initialize",
                    (unsigned long long)ex->sbx->m->cfg.pids_max);
        if (!ex->answered)
            ex->on_done(ex->ctx, NULL, &err);
    } else {
        res.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        res.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        res.timed_out = ex->timed_out;
        res.out = capture_finish(&ex->out, &res.out_len, &res.out_truncated);
        res.err = capture_finish(&ex->err, &res.err_len, &res.err_truncated);
        res.out_total = ex->out.total;
        res.err_total = ex->err.total;
        res.duration_ms = (uint64_t)(time_mono_ms() - ex->t0);
        if (!ex->answered)
            ex->on_done(ex->ctx, &res, NULL);
        free(res.out);
        free(res.err);
    }
    /* after the answer, which does not wait for these; the connection waits for the sandbox's
     * next command unless a kill was sent on it (which the init could read as a request) */
    struct sandbox *sbx = ex->sbx;
    if (ready && !ex->killed && !ex->timed_out && !err.code && !sbx->ctl_spare &&
        sbx->state == SBX_RUNNING) {
        sbx->ctl_spare = ex->conn;
        ex->conn->data = sbx;
        h2o_socket_read_start(ex->conn, on_spare);
    } else {
        h2o_socket_read_stop(ex->conn);
        h2o_socket_close(ex->conn);
    }
    if (ex->out_sock)
        close_stream(&ex->out_sock);
    else
        close(ex->out_fd);
    if (ex->err_sock)
        close_stream(&ex->err_sock);
    else
        close(ex->err_fd);
    close_stdin(ex);
    sbx->last_used = time_mono_ms();
    free(ex->stdin_data);
    capture_release(&ex->out);
    capture_release(&ex->err);
    free(ex);
}

void exec_answer_now(struct sandbox *sbx, const struct err *err)
{
    for (struct sandbox_exec *ex = sbx->m->execs; ex; ex = ex->next)
        if (ex->sbx == sbx && !ex->answered) {
            ex->answered = true;
            ex->on_output = NULL;
            ex->on_done(ex->ctx, NULL, err);
        }
}

void sandbox_exec_kill(struct sandbox_exec *ex)
{
    ex->killed = true;
    kill_command(ex);
}

static void on_exec_tick(struct loop_timer *t)
{
    struct sandbox_manager *m = container_of(t, struct sandbox_manager, exec_timer);
    exec_tick(m);
}

void exec_tick(struct sandbox_manager *m)
{
    int64_t now = time_mono_ms();
    for (struct sandbox_exec *ex = m->execs; ex; ex = ex->next) {
        if (!ex->timed_out && now >= ex->deadline) {
            ex->timed_out = true;
            kill_command(ex);
        }
    }
    if (m->execs)
        loop_timer_start(&m->exec_timer, 50, on_exec_tick);
}

/* Build argv/envp for /bin/sh -c. The egress proxy at SANDBOX_EGRESS_PORT is named in both
 * spellings tools read, whatever the mode (with none, a tool meets the proxy's refusal and its
 * reason rather than "could not resolve host"), and the proxy listener at 127.0.0.1:8788 stays
 * direct. No command has a terminal, so debconf is told so: it would otherwise try its dialog,
 * readline and teletype front ends in turn and say why each failed on the stderr of every
 * `apt-get install` before falling back to this one. */
static char **build_env(const char *const *extra, const char *cwd)
{
    static const char *const base[] = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/root",
        "USER=root",
        "LOGNAME=root",
        "SHELL=/bin/sh",
        "LANG=C.UTF-8",
        "HOSTNAME=sandbox",
        "TMPDIR=/tmp",
        "DEBIAN_FRONTEND=noninteractive",
    };
#define EGRESS_URL "http://127.0.0.1:3128"
    _Static_assert(SANDBOX_EGRESS_PORT == 3128, "EGRESS_URL names the egress port");
    static const char *const proxy[] = {
        "HTTP_PROXY=" EGRESS_URL,           "HTTPS_PROXY=" EGRESS_URL,
        "http_proxy=" EGRESS_URL,           "https_proxy=" EGRESS_URL,
        "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
    };
#undef EGRESS_URL
    size_t n = 0;
    while (extra && extra[n])
        n++;
    char **env = xcalloc(ARRAY_SIZE(base) + ARRAY_SIZE(proxy) + n + 2, sizeof(char *));
    size_t k = 0;
    for (size_t i = 0; i < ARRAY_SIZE(base) + ARRAY_SIZE(proxy); i++) {
        const char *var = i < ARRAY_SIZE(base) ? base[i] : proxy[i - ARRAY_SIZE(base)];
        size_t nl = strcspn(var, "=") + 1;
        bool overridden = false;
        for (size_t j = 0; j < n; j++)
            if (strncmp(extra[j], var, nl) == 0)
                overridden = true;
        if (!overridden)
            env[k++] = xstrdup(var);
    }
    env[k++] = xasprintf("PWD=%s", cwd);
    for (size_t j = 0; j < n; j++)
        env[k++] = xstrdup(extra[j]);
    env[k] = NULL;
    return env;
}

static void free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* The request for the sandbox's init: a 4-byte length, then cwd, argv, envp and (for a relayed
 * command) its options as NUL-separated lists each ended by an empty string (see
 * helper/init.c). */
static char *build_request(const char *cwd, const char *const *argv, char **envp,
                           const char *const *opts, uint32_t *len)
{
    struct buf b;
    buf_init(&b, 0);
    uint32_t zero = 0;
    buf_append(&b, &zero, sizeof(zero));
    buf_append(&b, cwd, strlen(cwd) + 1);
    for (size_t i = 0; argv[i]; i++)
        buf_append(&b, argv[i], strlen(argv[i]) + 1);
    buf_append(&b, "", 1);
    for (size_t i = 0; envp[i]; i++)
        buf_append(&b, envp[i], strlen(envp[i]) + 1);
    buf_append(&b, "", 1);
    if (opts) {
        for (size_t i = 0; opts[i]; i++)
            buf_append(&b, opts[i], strlen(opts[i]) + 1);
        buf_append(&b, "", 1);
    }
    size_t n;
    char *data = buf_steal(&b, &n);
    *len = (uint32_t)(n - sizeof(zero));
    memcpy(data, len, sizeof(*len));
    return data;
}

int sandbox_connect_init(struct sandbox *sbx, struct err *err)
{
    char path[108];
    snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", sbx->dirfd,
             sbx->ctl_old ? SANDBOX_CTL_SOCK_OLD : SANDBOX_CTL_SOCK);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    int conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (conn < 0)
        return err_set(err, -errno, "socket: %s", strerror(errno));
    if (connect(conn, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        int e = errno;
        close(conn);
        return err_set(err, -ESRCH,
                       "the sandbox is not answering (%s); start it over with "
                       "container_initialize",
                       strerror(e));
    }
    return conn;
}

/* Wait until conn takes more (a kept connection is the event loop's, so non-blocking). */
static bool wait_writable(int conn)
{
    struct pollfd pfd = {.fd = conn, .events = POLLOUT};
    return poll(&pfd, 1, 5000) > 0;
}

/* The request on conn, whole, with nfds descriptors riding on its first bytes. */
static bool send_request(int conn, char *req, size_t len, const int *fds, size_t nfds)
{
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    /* The whole request in one message where the socket takes it, so that the init finds all
     * of it when it wakes. */
    struct iovec iov = {.iov_base = req, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = u.buf,
                         .msg_controllen = CMSG_SPACE(nfds * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
    memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    ssize_t sent;
    while ((sent = sendmsg(conn, &msg, MSG_NOSIGNAL)) < 0 &&
           (errno == EINTR || (errno == EAGAIN && wait_writable(conn))))
        ;
    for (size_t off = sent > 0 ? (size_t)sent : len; sent > 0 && off < len;) {
        ssize_t n = send(conn, req + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && (errno == EINTR || (errno == EAGAIN && wait_writable(conn))))
            continue;
        if (n <= 0)
            return false;
        off += (size_t)n;
    }
    return sent > 0;
}

/* Hand a command to the sandbox's init over its control socket, with nfds descriptors attached:
 * the command's stdin, stdout and stderr, and for a relayed command (opts given) its status
 * file. Returns the connection, on which the init reports. With kept not NULL it goes on the
 * connection the init kept after the sandbox's last command if there is one (*kept, then owned
 * by the caller), else on a new one (*kept NULL). */
static int send_to_init(struct sandbox *sbx, const char *cwd, const char *const *argv,
                        const char *const *env, const char *const *opts, const int *fds,
                        size_t nfds, h2o_socket_t **kept, struct err *err)
{
    char **envp = build_env(env, cwd);
    uint32_t len;
    char *req = build_request(cwd, argv, envp, opts, &len);
    free_strv(envp);
    for (;;) {
        h2o_socket_t *sock = kept ? sbx->ctl_spare : NULL;
        int conn;
        if (sock) {
            sbx->ctl_spare = NULL;
            conn = h2o_socket_get_fd(sock);
        } else if ((conn = sandbox_connect_init(sbx, err)) < 0) {
            free(req);
            return conn;
        }
        if (send_request(conn, req, sizeof(len) + len, fds, nfds)) {
            free(req);
            if (kept)
                *kept = sock;
            return conn;
        }
        int e = errno;
        if (sock) {
            /* kept by an init that has gone since: once more, anew */
            h2o_socket_close(sock);
            continue;
        }
        close(conn);
        free(req);
        return err_set(err, -EIO, "cannot hand the command to the sandbox: %s", strerror(e));
    }
}

int sandbox_spawn_helper(struct sandbox_manager *m, const char *const *argv, const int *fds,
                         int nfds, pid_t *pid)
{
    int src[4];
    for (int i = 0; i < nfds; i++)
        src[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 64);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    for (int i = 0; i < 3; i++)
        posix_spawn_file_actions_adddup2(&fa, m->devnull, i);
    for (int i = 0; i < nfds; i++)
        posix_spawn_file_actions_adddup2(&fa, src[i], 3 + i);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3 + nfds);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), m->init_memfd);
    char *envp[] = {NULL};
    int r = posix_spawn(pid, path, &fa, NULL, (char *const *)argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < nfds; i++)
        if (src[i] >= 0)
            close(src[i]);
    return r;
}

/* The pipes for a command's stdout and stderr are made after the one before was handed to its
 * init, off the path of the next: one pair for the whole server, since a command's output needs
 * nothing of its sandbox. */
static int output_pipes(int out[2], int err[2])
{
    if (pipe2(out, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(err, O_CLOEXEC) < 0) {
        int e = -errno;
        close(out[0]);
        close(out[1]);
        out[0] = out[1] = -1;
        return e;
    }
    /* the server's ends only: the command's stay blocking, as programs expect of their output */
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    return 0;
}

static void make_pipes(struct sandbox_manager *m)
{
    if (m->spare_pipes[0] < 0)
        output_pipes(m->spare_pipes, m->spare_pipes + 2);
}

static bool take_pipes(struct sandbox_manager *m, int out[2], int err[2])
{
    if (m->spare_pipes[0] < 0)
        return false;
    memcpy(out, m->spare_pipes, 2 * sizeof(int));
    memcpy(err, m->spare_pipes + 2, 2 * sizeof(int));
    for (int i = 0; i < 4; i++)
        m->spare_pipes[i] = -1;
    return true;
}

struct sandbox_exec *sandbox_exec_start(struct sandbox *sbx, const struct sandbox_exec_opts *opts,
                                        sandbox_output_fn on_output, sandbox_exec_done_fn on_done,
                                        void *ctx, struct err *err)
{
    struct sandbox_manager *m = sbx->m;
    if (sbx->state != SBX_RUNNING) {
        err_set(err, -ESRCH, "sandbox '%s' is not running", sbx->id);
        return NULL;
    }
    const char *cwd = opts->cwd && *opts->cwd ? opts->cwd : "/workspace";
    /* stdin is a pipe only when there is something to write to it; otherwise /dev/null (the
     * same end of file at once, for two system calls less per command). */
    bool feed = opts->stdin_data && opts->stdin_len && opts->stdin_fd <= 0;
    int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1};
    bool spare = take_pipes(m, out, errp);
    int r = feed && pipe2(in, O_CLOEXEC) < 0 ? -errno : 0;
    if (r == 0 && !spare)
        r = output_pipes(out, errp);
    if (r < 0) {
        err_set(err, r, "pipe: %s", strerror(-r));
        for (int i = 0; i < 2; i++) {
            if (in[i] >= 0)
                close(in[i]);
            if (out[i] >= 0)
                close(out[i]);
            if (errp[i] >= 0)
                close(errp[i]);
        }
        return NULL;
    }
    const char *argv[] = {"/bin/sh", "-c", opts->command, NULL};
    int stdin_fd = opts->stdin_fd > 0 ? opts->stdin_fd : feed ? in[0] : m->devnull;
    int fds[3] = {stdin_fd, out[1], errp[1]};
    h2o_socket_t *kept = NULL;
    int conn = send_to_init(sbx, cwd, argv, opts->env, NULL, fds, 3, &kept, err);
    if (in[0] >= 0)
        close(in[0]);
    close(out[1]);
    close(errp[1]);
    make_pipes(m);
    if (conn < 0) {
        if (in[1] >= 0)
            close(in[1]);
        close(out[0]);
        close(errp[0]);
        return NULL;
    }
    struct sandbox_exec *ex = xcalloc(1, sizeof(*ex));
    ex->sbx = sbx;
    ex->on_output = on_output;
    ex->on_done = on_done;
    ex->ctx = ctx;
    ex->t0 = time_mono_ms();
    uint64_t timeout = opts->timeout_ms ? opts->timeout_ms : m->cfg.exec_timeout_ms;
    ex->deadline = ex->t0 + (int64_t)timeout;
    size_t cap = opts->output_bytes ? opts->output_bytes : m->cfg.output_bytes;
    capture_init(&ex->out, cap);
    capture_init(&ex->err, cap);
    ex->out_fd = out[0];
    ex->err_fd = errp[0];
    loop_timer_start(&ex->tick, WATCH_MS, on_watch);
    if (feed) {
        nonblock_socket(in[1], &ex->stdin_sock, ex);
        ex->stdin_data = xmalloc(opts->stdin_len);
        memcpy(ex->stdin_data, opts->stdin_data, opts->stdin_len);
        h2o_iovec_t buf = h2o_iovec_init(ex->stdin_data, opts->stdin_len);
        h2o_socket_write(ex->stdin_sock, &buf, 1, on_stdin_written);
    }
    ex->next = m->execs;
    m->execs = ex;
    if (!h2o_timeout_is_linked(&m->exec_timer.entry))
        loop_timer_start(&m->exec_timer, 50, on_exec_tick);
    ex->conn_fd = conn;
    ex->conn = kept ? kept : h2o_evloop_socket_create(loop_get(), conn, 0);
    ex->conn->data = ex;
    h2o_socket_read_start(ex->conn, on_report);
    return ex;
}

int sandbox_spawn(struct sandbox *sbx, const struct sandbox_spawn_opts *opts, int *pid,
                  struct err *err)
{
    if (sbx->state != SBX_RUNNING)
        return err_set(err, -ESRCH, "sandbox '%s' is not running", sbx->id);
    const char *cwd = opts->cwd && *opts->cwd ? opts->cwd : "/workspace";
    char out_max[24], err_max[24];
    snprintf(out_max, sizeof(out_max), "%llu", (unsigned long long)opts->out_max);
    snprintf(err_max, sizeof(err_max), "%llu", (unsigned long long)opts->err_max);
    const char *relay[] = {out_max, err_max, NULL};
    int fds[4] = {opts->stdin_fd, opts->out_fd, opts->err_fd, opts->status_fd};
    int conn = send_to_init(sbx, cwd, opts->argv, opts->env, relay, fds, 4, NULL, err);
    if (conn < 0)
        return conn;
    /* The init forks and answers at once; a failed exec follows within the same moment. */
    char line[256];
    size_t len = 0;
    struct pollfd pfd = {.fd = conn, .events = POLLIN};
    int64_t deadline = time_mono_ms() + 5000;
    while (len < sizeof(line) - 1 && !memchr(line, '\n', len)) {
        int64_t left = deadline - time_mono_ms();
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            break;
        ssize_t n = read(conn, line + len, sizeof(line) - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(conn);
    line[len] = '\0';
    if (sscanf(line, "pid %d", pid) == 1 && *pid > 0)
        return 0;
    line[strcspn(line, "\n")] = '\0';
    return err_set(err, -EIO, "cannot start the process: %s",
                   len ? line : "the sandbox did not answer");
}

int sandbox_spawn_status(const char *text, size_t len, int *wait_status)
{
    char line[64];
    if (len == 0 || len >= sizeof(line) || text[len - 1] != '\n')
        return 0; /* not yet, or not all of it yet */
    memcpy(line, text, len);
    line[len] = '\0';
    return sscanf(line, "exit %d", wait_status) == 1 ? 1 : 0;
}

/* The host pid of sbx's process whose pid inside the sandbox is pid; 0 when there is none. */
static pid_t host_pid_of(struct sandbox *sbx, int pid)
{
    char procs[4][PATH_MAX];
    int n = cgroup_procs_paths(sbx->cgroup, procs, 4);
    for (int i = 0; i < n; i++) {
        _cleanup_fclose_ FILE *f = fopen(procs[i], "re");
        if (!f)
            continue;
        long hp;
        while (fscanf(f, "%ld", &hp) == 1) {
            char path[64], buf[4096];
            snprintf(path, sizeof(path), "/proc/%ld/status", hp);
            _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
            ssize_t got = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
            if (got <= 0)
                continue;
            buf[got] = '\0';
            /* "NSpid:\t<host>\t...\t<innermost>" */
            char *ns = strstr(buf, "\nNSpid:");
            if (!ns)
                continue;
            ns[strcspn(ns + 1, "\n") + 1] = '\0';
            char *last = strrchr(ns, '\t');
            if (last && atoi(last + 1) == pid)
                return (pid_t)hp;
        }
        return 0; /* every process is in each hierarchy's group: one file is enough */
    }
    return 0;
}

bool sandbox_pid_alive(struct sandbox *sbx, int pid)
{
    if (sbx->state != SBX_RUNNING || pid <= 0)
        return false;
    pid_t hp = host_pid_of(sbx, pid);
    return hp > 0 && proc_start_time(hp) != 0;
}

int sandbox_kill_group(struct sandbox *sbx, int pid)
{
    pid_t hp = sbx->state == SBX_RUNNING && pid > 0 ? host_pid_of(sbx, pid) : 0;
    if (hp <= 0)
        return -ESRCH;
    /* The process leads its own process group, so its group id is its pid (as the host sees
     * it). */
    kill(-hp, SIGKILL);
    kill(hp, SIGKILL);
    return 0;
}

void sandbox_exec_release(struct sandbox *sbx)
{
    if (sbx->ctl_spare)
        h2o_socket_close(sbx->ctl_spare);
    sbx->ctl_spare = NULL;
    sandbox_fs_worker_stop(sbx);
}

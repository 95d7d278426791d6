/* A sandbox's listeners and its hand-over from the pool: the sockets the server's hooks accept
 * on (the proxy's and the MCP listener inside the sandbox's network namespace), opened by the
 * setup child or, for a sandbox that lost them, by the helper's "sandbox-listen" role; and
 * sandbox_arm, which gives a pooled sandbox its network namespace and listeners when it is
 * handed over (helper/init.c has the init's side). */
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "sandbox/listen_ports.h"

void sandbox_open_listeners(struct sandbox *sbx, int only)
{
    struct sandbox_manager *m = sbx->m;
    if (sbx->pidfd < 0 || sbx->net_deferred) /* a pooled one's come when it is handed over */
        return;
    /* one helper run opens them all: the hooks in want[], their ports as its arguments */
    int want[SANDBOX_LISTENERS_MAX], n = 0;
    char ports[SANDBOX_LISTENERS_MAX][8];
    const char *argv[SANDBOX_LISTENERS_MAX + 2] = {"sandbox-listen"};
    for (int i = 0; i < m->nlisteners; i++) {
        if (only >= 0 && i != only)
            continue;
        snprintf(ports[n], sizeof(ports[n]), "%u", (unsigned)m->listeners[i].port);
        argv[1 + n] = ports[n];
        want[n++] = i;
    }
    if (n == 0)
        return;
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
        log_error("sandbox listener failed sbx=%s err=\"socketpair: %s\"", sbx->id,
                  strerror(errno));
        return;
    }
    int fds[2] = {sp[1], sbx->pidfd};
    pid_t pid;
    int r = sandbox_spawn_helper(m, argv, fds, 2, &pid);
    close(sp[1]);
    if (r != 0) {
        close(sp[0]);
        log_error("sandbox listener failed sbx=%s err=\"spawn: %s\"", sbx->id, strerror(r));
        return;
    }
    /* The helper does a few system calls and exits: wait for it here. */
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    char line[256];
    int lfd[SANDBOX_LISTENERS_MAX];
    int nfds = listen_ports_recv(sp[0], lfd, n, line, sizeof(line));
    close(sp[0]);
    if (nfds != n) {
        for (int i = 0; i < nfds; i++)
            close(lfd[i]);
        line[strcspn(line, "\n")] = '\0';
        log_error("sandbox listener failed sbx=%s err=\"%s\"", sbx->id,
                  nfds == 0 && line[0] ? line : "helper died");
        return;
    }
    for (int i = 0; i < n; i++) {
        fcntl(lfd[i], F_SETFL, fcntl(lfd[i], F_GETFL) | O_NONBLOCK);
        const struct sandbox_listener_hook *h = &m->listeners[want[i]];
        h->fn(h->ctx, sbx->id, lfd[i]);
    }
}

/* The listeners of all the hooks, in their order, made nonblocking by their maker
 * (listen_ports_send), to their hooks. */
static void give_listeners(struct sandbox *sbx, const int *lfd, int n)
{
    for (int i = 0; i < n; i++) {
        const struct sandbox_listener_hook *h = &sbx->m->listeners[i];
        h->fn(h->ctx, sbx->id, lfd[i]);
    }
}

void sandbox_drop_listeners(struct sandbox *sbx)
{
    if (sbx->listen_rx >= 0)
        close(sbx->listen_rx);
    sbx->listen_rx = -1;
}

#define SERVER_DIR "server" /* in the sandbox's directory on the host */

bool sandbox_server_dir(struct sandbox *sbx, char *out, size_t cap)
{
    if (mkdirat(sbx->dirfd, SERVER_DIR, 0755) < 0 && errno != EEXIST) {
        log_error("sandbox server dir failed sbx=%s err=\"mkdir: %s\"", sbx->id, strerror(errno));
        return false;
    }
    _cleanup_close_ int dfd =
        openat(sbx->dirfd, SERVER_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dfd < 0 || fchmodat(sbx->dirfd, SERVER_DIR, 0755, 0) < 0) {
        log_error("sandbox server dir failed sbx=%s err=\"open: %s\"", sbx->id, strerror(errno));
        return false;
    }
    for (size_t i = 0; i < sbx->m->nfiles; i++) {
        const char *name = sbx->m->files[i].name, *content = sbx->m->files[i].content;
        char path[64], tmp[96];
        snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dfd, name);
        snprintf(tmp, sizeof(tmp), "%s.new", path);
        _cleanup_close_ int fd =
            open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0 || write_full(fd, content, strlen(content)) < 0 || fchmod(fd, 0644) < 0 ||
            rename(tmp, path) < 0) {
            log_error("sandbox server file failed sbx=%s file=%s err=\"%s\"", sbx->id, name,
                      strerror(errno));
            return false;
        }
    }
    snprintf(out, cap, "%s/" SERVER_DIR, sbx->dir);
    return true;
}

void sandbox_open_socket(struct sandbox *sbx)
{
    const struct sandbox_listener_hook *h = &sbx->m->socket_hook;
    if (!h->fn)
        return;
    _cleanup_close_ int dfd =
        openat(sbx->dirfd, SERVER_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dfd < 0)
        return; /* a sandbox from before the directory: it has no mount for one either */
    /* by the directory's descriptor: the data directory's path may be longer than sun_path */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/api.sock", dfd);
    unlink(sa.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        chmod(sa.sun_path, 0666) < 0 || listen(fd, 64) < 0) {
        log_error("sandbox socket failed sbx=%s err=\"%s\"", sbx->id, strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    h->fn(h->ctx, sbx->id, fd);
}

void sandbox_manager_set_file(struct sandbox_manager *m, const char *name, const char *content)
{
    if (m->nfiles == SANDBOX_SERVER_FILES_MAX)
        return;
    snprintf(m->files[m->nfiles].name, sizeof(m->files[0].name), "%s", name);
    m->files[m->nfiles++].content = xstrdup(content);
}

void sandbox_manager_set_socket(struct sandbox_manager *m, sandbox_listener_fn fn, void *ctx)
{
    m->socket_hook = (struct sandbox_listener_hook){0, fn, ctx};
    for (struct sandbox *s = m->all; s; s = s->next)
        if (s->state == SBX_RUNNING)
            sandbox_open_socket(s);
}

void sandbox_take_listeners(struct sandbox *sbx)
{
    sandbox_open_socket(sbx);
    struct sandbox_manager *m = sbx->m;
    int lfd[SANDBOX_LISTENERS_MAX], nfds = 0;
    if (sbx->listen_rx >= 0) {
        /* The setup child sent them before its report, and has exited. */
        nfds = listen_ports_recv(sbx->listen_rx, lfd, SANDBOX_LISTENERS_MAX, NULL, 0);
        sandbox_drop_listeners(sbx);
    }
    if (nfds != m->nlisteners) {
        for (int i = 0; i < nfds; i++)
            close(lfd[i]);
        sandbox_open_listeners(sbx, -1);
        return;
    }
    give_listeners(sbx, lfd, nfds);
}

int sandbox_arm(struct sandbox *sbx, struct err *err)
{
    struct sandbox_manager *m = sbx->m;
    if (!sbx->net_deferred)
        return 0;
    _cleanup_close_ int conn = sandbox_connect_init(sbx, err);
    if (conn < 0)
        return conn;
    struct {
        uint32_t word, n;
        uint16_t ports[SANDBOX_LISTENERS_MAX];
    } req = {.word = LISTEN_ARM_REQUEST, .n = (uint32_t)m->nlisteners};
    for (int i = 0; i < m->nlisteners; i++)
        req.ports[i] = m->listeners[i].port;
    size_t len = offsetof(__typeof__(req), ports) + (size_t)m->nlisteners * sizeof(uint16_t);
    int r = write_full(conn, &req, len);
    if (r < 0)
        return err_set(err, r, "cannot hand the sandbox over: %s", strerror(-r));
    /* The init makes a network namespace, brings its loopback up and confines itself: about a
     * millisecond and a half, waited for here, since the take that asked is answered at once.
     * An init that has not answered in a second is given up on (the caller then starts a
     * sandbox), so that the loop never waits longer than that. */
    struct pollfd pfd = {.fd = conn, .events = POLLIN};
    int ready;
    while ((ready = poll(&pfd, 1, 1000)) < 0 && errno == EINTR)
        ;
    char line[256] = "";
    int lfd[SANDBOX_LISTENERS_MAX];
    int nfds = ready > 0 ? listen_ports_recv(conn, lfd, m->nlisteners, line, sizeof(line)) : 0;
    bool ok = m->nlisteners ? nfds == m->nlisteners : strcmp(line, "ready\n") == 0;
    if (!ok) {
        for (int i = 0; i < nfds; i++)
            close(lfd[i]);
        line[strcspn(line, "\n")] = '\0';
        return err_set(err, -EIO, "cannot hand the sandbox over: %s",
                       line[0]      ? line
                       : ready == 0 ? "its init did not answer"
                                    : "its init died");
    }
    sbx->net_deferred = false;
    give_listeners(sbx, lfd, nfds);
    return 0;
}

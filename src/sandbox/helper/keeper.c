/* The keeper of a warm OpenCode in a sandbox: "sandbox-keeper PORT IDLE_S FINGERPRINT PROGRAM"
 * starts `PROGRAM serve` and keeps it between runs; the protocol its bridges speak is in agent.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_http.h"
#include "base/util.h"
#include "helper.h"
#include "sandbox/opencode_serve.h"

#define MAX_AGE_S (20 * 3600) /* a server is replaced after this, between runs */
#define KEEPER_CONNS 16
#define FREEZE_AFTER_MS 2000 /* an idle server is stopped after this without a run */

extern char **environ;

struct bridge {
    int fd;
    bool said_hello, done;
    bool waiting;  /* said hello with this server's fingerprint before it was ready */
    short revents; /* of the latest poll (0 for one accepted since) */
    char session[OC_SESSION_ID_MAX + 1];
    char dir[4096];
    char in[8192];
    size_t inlen;
};

static void say(int fd, const char *text)
{
    if (fd >= 0)
        write_full(fd, text, strlen(text));
}

/* OpenCode's config directory seeded as it would seed it, so it installs no plugin at start
 * (the sandbox could not fetch one). */
static void seed_config(void)
{
    const char *home = getenv("HOME");
    char dir[4096], path[4200];
    if (!home || snprintf(dir, sizeof(dir), "%s/.config/opencode", home) >= (int)sizeof(dir))
        return;
    const char *pkg = "{\"dependencies\":{\"@opencode-ai/plugin\":\"*\"}}";
    char sub[4200];
    snprintf(sub, sizeof(sub), "%s/.config", home);
    mkdir(sub, 0755);
    mkdir(dir, 0755);
    snprintf(sub, sizeof(sub), "%s/node_modules", dir);
    mkdir(sub, 0755);
    snprintf(path, sizeof(path), "%s/package.json", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dprintf(fd, "%s\n", pkg);
        close(fd);
    }
    snprintf(path, sizeof(path), "%s/package-lock.json", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dprintf(fd, "{\"packages\":{\"\":%s}}\n", pkg);
        close(fd);
    }
}

/* Start `program serve` in a process group of its own; its stdout comes to *out, where it says
 * when it is ready: it listens before it can answer, and a request that comes in between is
 * never answered. */
static pid_t start_server(const char *program, const char *port, int *out)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid != 0) {
        close(p[1]);
        *out = p[0];
        if (pid < 0)
            close(p[0]);
        return pid;
    }
    setpgid(0, 0);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 2);
    }
    dup2(p[1], 1);
    char *argv[] = {(char *)program, "serve",     "--port",    (char *)port,
                    "--hostname",    "127.0.0.1", (char *)NULL};
    execve(program, argv, environ);
    _exit(127);
}

static void stop_server(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(-pid, SIGTERM);
    kill(pid, SIGCONT); /* if it was stopped between runs */
    for (int i = 0; i < 30; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            goto gone;
        usleep(100000);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, 0);
gone:
    kill(-pid, SIGKILL); /* what it started and left behind */
}

/* Whether another bridge has said it prompts b's session: the next run of the session, which
 * aborts what is left of b's prompt itself before it prompts (agent.c, newest_message), and whose
 * own prompt an abort from here could end. */
static bool taken_over(const struct bridge *bridges, size_t nb, const struct bridge *b)
{
    for (size_t i = 0; i < nb; i++)
        if (&bridges[i] != b && strcmp(bridges[i].session, b->session) == 0)
            return true;
    return false;
}

/* A line from a bridge. */
static void keeper_line(struct bridge *b, const char *line, const char *fingerprint, bool ready,
                        bool *stale, long *idle_s)
{
    if (strncmp(line, "idle ", 5) == 0) {
        char *end;
        long v = strtol(line + 5, &end, 10);
        if (*end == '\0' && v > 0 && v <= MAX_AGE_S)
            *idle_s = v;
        return;
    }
    if (strncmp(line, "hello ", 6) == 0 && !b->said_hello) {
        b->said_hello = true;
        if (strcmp(line + 6, fingerprint) != 0) {
            *stale = true;
            say(b->fd, "stale\n");
        } else if (ready) {
            say(b->fd, "ready\n");
        } else {
            b->waiting = true;
        }
    } else if (strncmp(line, "session ", 8) == 0) {
        const char *id = line + 8, *sp = strchr(id, ' ');
        size_t n = sp ? (size_t)(sp - id) : strlen(id);
        if (n <= OC_SESSION_ID_MAX && sp && strlen(sp + 1) < sizeof(b->dir)) {
            memcpy(b->session, id, n);
            b->session[n] = '\0';
            strcpy(b->dir, sp + 1);
        }
    } else if (strcmp(line, "done") == 0) {
        b->done = true;
    }
}

int keeper_main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    const char *port_s = argv[1], *fingerprint = argv[3], *program = argv[4];
    long port = strtol(port_s, NULL, 10), idle_s = strtol(argv[2], NULL, 10);
    if (port <= 0 || port > 65535 || idle_s <= 0)
        return 2;
    prctl(PR_SET_NAME, "sandbox-keeper");
    signal(SIGPIPE, SIG_IGN);
    struct sockaddr_un a;
    socklen_t alen;
    keeper_address(port_s, &a, &alen);
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, alen) < 0 || listen(ls, 16) < 0)
        return 0; /* another keeper has it */
    seed_config();
    int64_t born = time_mono_ms(), last_use = born;
    int out = -1;
    pid_t server = start_server(program, port_s, &out);
    bool ready = false, stale = false, frozen = false;
    char failure[256] = "", said[512] = "";
    size_t saidlen = 0;
    static struct bridge bridges[KEEPER_CONNS];
    size_t nb = 0;
    for (;;) {
        struct pollfd p[KEEPER_CONNS + 2];
        p[0] = (struct pollfd){.fd = ls, .events = POLLIN};
        for (size_t i = 0; i < nb; i++)
            p[i + 1] = (struct pollfd){.fd = bridges[i].fd, .events = POLLIN};
        p[nb + 1] = (struct pollfd){.fd = out, .events = POLLIN};
        poll(p, nb + 2, 1000);
        /* each bridge keeps what the poll said of it: the list changes below (a bridge
         * accepted, one gone and replaced by the last) */
        for (size_t i = 0; i < nb; i++)
            bridges[i].revents = p[i + 1].revents;
        if (out >= 0 && (p[nb + 1].revents & (POLLIN | POLLHUP | POLLERR))) {
            /* "opencode server listening on http://...": ready; the rest is dropped */
            ssize_t n = read(out, said + saidlen, sizeof(said) - 1 - saidlen);
            if (n <= 0) {
                close(out);
                out = -1;
            } else if (!ready) {
                saidlen += (size_t)n;
                said[saidlen] = '\0';
                ready = strstr(said, "listening on") != NULL;
                /* those of its configuration, whether or not another bridge has made it stale
                 * since (which only means that it stops once they are done) */
                for (size_t i = 0; ready && i < nb; i++)
                    if (bridges[i].waiting) {
                        bridges[i].waiting = false;
                        say(bridges[i].fd, "ready\n");
                    }
                if (saidlen == sizeof(said) - 1) {
                    memmove(said, said + 256, saidlen - 256);
                    saidlen -= 256;
                }
            }
        }
        int ws;
        if (server > 0 && waitpid(server, &ws, WNOHANG) == server) {
            server = 0;
            snprintf(failure, sizeof(failure), "fail the agent's server exited (%s %d)\n",
                     WIFEXITED(ws) ? "status" : "signal",
                     WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
        }
        if (!ready && !failure[0] && time_mono_ms() - born > READY_TIMEOUT_S * 1000LL)
            snprintf(failure, sizeof(failure),
                     "fail the agent's server was not ready within %d s\n", READY_TIMEOUT_S);
        if (p[0].revents & POLLIN) {
            int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0 && nb < KEEPER_CONNS && !failure[0]) {
                bridges[nb] = (struct bridge){.fd = fd};
                nb++;
                if (frozen && kill(server, SIGCONT) == 0)
                    frozen = false;
            } else if (fd >= 0) {
                say(fd, failure[0] ? failure : "fail too many runs at once\n");
                close(fd);
            }
        }
        for (size_t i = 0; i < nb; i++) {
            struct bridge *b = &bridges[i];
            bool gone = false;
            if (b->revents & (POLLIN | POLLHUP | POLLERR)) {
                ssize_t n = read(b->fd, b->in + b->inlen, sizeof(b->in) - 1 - b->inlen);
                if (n <= 0) {
                    gone = true;
                } else {
                    b->inlen += (size_t)n;
                    b->in[b->inlen] = '\0';
                    char *nl;
                    while ((nl = memchr(b->in, '\n', b->inlen))) {
                        *nl = '\0';
                        keeper_line(b, b->in, fingerprint, ready, &stale, &idle_s);
                        size_t used = (size_t)(nl - b->in) + 1;
                        memmove(b->in, nl + 1, b->inlen - used);
                        b->inlen -= used;
                    }
                    gone = b->inlen == sizeof(b->in) - 1; /* a line too long: not a bridge */
                }
            }
            if (gone) {
                if (!b->done && b->session[0] && ready && server > 0 && !taken_over(bridges, nb, b))
                    session_abort((uint16_t)port, b->session, b->dir);
                close(b->fd);
                bridges[i] = bridges[--nb];
                i--;
                last_use = time_mono_ms();
            }
        }
        if (failure[0]) {
            for (size_t i = 0; i < nb; i++) {
                say(bridges[i].fd, failure);
                close(bridges[i].fd);
            }
            nb = 0;
            break;
        }
        if (nb == 0 && (stale || time_mono_ms() - last_use > idle_s * 1000 ||
                        time_mono_ms() - born > MAX_AGE_S * 1000LL))
            break;
        if (nb == 0 && ready && server > 0 && !frozen &&
            time_mono_ms() - last_use > FREEZE_AFTER_MS && kill(server, SIGSTOP) == 0)
            frozen = true;
    }
    /* the server first: a bridge waiting for a new keeper starts one only once this one's
     * socket is gone, and the new server needs the port */
    stop_server(server);
    if (out >= 0)
        close(out);
    close(ls);
    return 0;
}

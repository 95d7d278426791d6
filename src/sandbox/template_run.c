/* Running the programs of a template build (debootstrap, apt, npm, the checks), for
 * template_build.c: each in a private mount namespace of its own, so the /proc and /dev bind
 * mounts of a chroot, and the mounts the program makes, vanish with it even when the build is
 * killed; with a fixed environment (plus the caller's proxy settings), its output streamed to
 * stderr line by line or kept for the caller. Between fork and exec (child_run) nothing
 * allocates: failures go to the output pipe and the child exits 127. */
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"

/* Variables worth passing from the caller to the programs the build runs. */
static const char *const env_pass[] = {"http_proxy",         "https_proxy", "no_proxy",
                                       "HTTP_PROXY",         "HTTPS_PROXY", "NO_PROXY",
                                       "npm_config_registry"};

struct run_paths {
    char proc[PATH_MAX], dev[PATH_MAX], tmp[PATH_MAX];
};

#define FAIL(stage)                                                                                \
    do {                                                                                           \
        child_report(2, stage, errno);                                                             \
        _exit(127);                                                                                \
    } while (0)

/* In the child: nothing allocates; failures are written to the output pipe (FAIL). */
static void child_run(const struct template_run *r, const struct run_paths *p, char *const envp[],
                      int out)
{
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
        _exit(127);
    /* A build that is killed takes the program along rather than leave it writing into a tree
     * the next build removes. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != r->parent)
        _exit(127);
    if (unshare(CLONE_NEWNS) < 0)
        FAIL("cannot unshare the mount namespace");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        FAIL("cannot make mounts private");
    if (r->root) {
        if (r->check && (mount(r->root, r->root, NULL, MS_BIND | MS_REC, NULL) < 0 ||
                         mount(NULL, r->root, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0))
            FAIL("cannot bind the tree read-only");
        if (r->check && mount("tmpfs", p->tmp, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
            FAIL("cannot mount /tmp");
        if (mount("/proc", p->proc, NULL, MS_BIND | MS_REC, NULL) < 0)
            FAIL("cannot bind /proc");
        if (mount("/dev", p->dev, NULL, MS_BIND | MS_REC, NULL) < 0)
            FAIL("cannot bind /dev");
        if (chroot(r->root) < 0 || chdir("/") < 0)
            FAIL("cannot chroot");
    }
    execve(r->argv[0], (char *const *)r->argv, envp);
    FAIL("cannot execute the program");
}

/* A fixed environment (so that builds do not depend on the caller's), plus proxy settings. */
static char **run_env(bool check)
{
    size_t n = 0;
    char **env = xcalloc(ARRAY_SIZE(env_pass) + 8, sizeof(*env));
    env[n++] = xstrdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    env[n++] = xstrdup(check ? "HOME=/tmp" : "HOME=/root");
    env[n++] = xstrdup("LANG=C.UTF-8");
    env[n++] = xstrdup("DEBIAN_FRONTEND=noninteractive");
    /* node trusts its own list of authorities unless told; the tree's bundle holds the host's
     * local ones too (see copy_ca) */
    if (!check)
        env[n++] = xstrdup("NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt");
    for (size_t i = 0; i < ARRAY_SIZE(env_pass); i++) {
        const char *v = getenv(env_pass[i]);
        if (v)
            env[n++] = xasprintf("%s=%s", env_pass[i], v);
    }
    return env;
}

static void env_free(char **env)
{
    for (char **e = env; e && *e; e++)
        free(*e);
    free(env);
}

/* Stream complete lines of data to stderr behind prefix; line holds a partial one. */
static void stream_lines(const char *prefix, char *line, size_t *len, size_t cap, const char *data,
                         size_t n, bool flush)
{
    for (size_t i = 0; i < n; i++) {
        if (data[i] == '\r')
            continue;
        if (data[i] != '\n') {
            line[(*len)++] = data[i];
            if (*len < cap - 1)
                continue;
        }
        fprintf(stderr, "%s%.*s\n", prefix, (int)*len, line);
        *len = 0;
    }
    if (flush && *len > 0) {
        fprintf(stderr, "%s%.*s\n", prefix, (int)*len, line);
        *len = 0;
    }
}

int template_run(struct template_run *r, struct err *err)
{
    struct run_paths p;
    if (r->root) {
        snprintf(p.proc, sizeof(p.proc), "%s/proc", r->root);
        snprintf(p.dev, sizeof(p.dev), "%s/dev", r->root);
        snprintf(p.tmp, sizeof(p.tmp), "%s/tmp", r->root);
    }
    char **env = run_env(r->check);
    r->parent = getpid();
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        env_free(env);
        return err_set(err, -errno, "cannot create a pipe: %s", strerror(errno));
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        env_free(env);
        return err_set(err, -e, "cannot fork: %s", strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        child_run(r, &p, env, fds[1]);
    }
    close(fds[1]);
    env_free(env);
    char buf[4096], line[1024];
    size_t line_len = 0;
    ssize_t n;
    r->out_len = 0;
    r->out[0] = '\0';
    for (;;) {
        n = read(fds[0], buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (r->prefix) {
            stream_lines(r->prefix, line, &line_len, sizeof(line), buf, (size_t)n, false);
        } else {
            size_t take = sizeof(r->out) - 1 - r->out_len;
            if (take > (size_t)n)
                take = (size_t)n;
            memcpy(r->out + r->out_len, buf, take);
            r->out_len += take;
            r->out[r->out_len] = '\0';
        }
    }
    if (r->prefix)
        stream_lines(r->prefix, line, &line_len, sizeof(line), NULL, 0, true);
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return err_set(err, -errno, "cannot wait for '%s': %s", r->argv[0], strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFSIGNALED(status))
        return err_set(err, -EIO, "'%s' was killed by signal %d", r->argv[0], WTERMSIG(status));
    return err_set(err, -EIO, "'%s' exited with status %d", r->argv[0], WEXITSTATUS(status));
}

/* The server's care of the debian template, the default one.
 *
 * The server never builds on its loop: it runs `sandbox-mcp template build debian` (its own
 * binary, template_build.c) as a child, which verifies the tree in place (its tools run) or builds
 * it when it is missing, outdated or broken, and reports each step on a pipe. The child's own
 * output goes to TEMPLATE_DIR/debian.log. Meanwhile:
 *   - a tree in place serves new sandboxes at once (it passed the same checks when it was built);
 *     if the child finds it broken, new sandboxes fall back to the host template until a build
 *     replaces it;
 *   - without a tree, new sandboxes start on the host template and say so (template_note);
 *   - a failed build is retried after SANDBOX_TEMPLATE_RETRY_SECONDS, doubling up to an hour.
 * Sandboxes that are running keep the tree they started on; replaced trees are kept while they may
 * be in use (template_build.c). */
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"

#define RETRY_MAX_MS (3600 * 1000)
#define STATUS_FD 3

/* Variables the build child takes from the server's environment: proxies for the mirror and the
 * npm registry, and the sanitizers' settings of a test build. Nothing else (no secrets). */
static const char *const env_pass[] = {
    "http_proxy", "https_proxy",         "no_proxy",     "HTTP_PROXY",    "HTTPS_PROXY",
    "NO_PROXY",   "npm_config_registry", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"};

static void keeper_spawn(struct sandbox_manager *m);

static void use_template(struct sandbox_manager *m, const struct template_info *t)
{
    if (strcmp(m->tmpl.name, t->name) != 0)
        log_info("sandbox template new-sandboxes=%s", t->name);
    m->tmpl = *t;
}

static void became_unusable(struct sandbox_manager *m, const char *why)
{
    struct template_keeper *k = &m->keeper;
    if (k->usable)
        log_warn("sandbox template debian unusable: %s: new sandboxes start on the host template "
                 "until it is rebuilt",
                 why);
    k->usable = false;
    use_template(m, &m->host);
}

static void on_ready(struct sandbox_manager *m, const char *what)
{
    struct template_keeper *k = &m->keeper;
    struct err err = {0};
    struct template_info t;
    if (template_prepare(m->template_dir, "debian", &t, &err) < 0) {
        snprintf(k->error, sizeof(k->error), "%s", err.msg);
        became_unusable(m, err.msg);
        return;
    }
    m->debian = t;
    k->usable = true;
    k->state = KEEPER_READY;
    k->failures = 0;
    k->error[0] = '\0';
    snprintf(k->built, sizeof(k->built), "%s", what);
    log_info("sandbox template debian ready %s ms=%lld", *what ? what : "verified",
             (long long)(time_now_ms() - k->since_ms));
    use_template(m, &m->debian);
}

/* One status line from the child (template_build.c's status()). */
static void on_status(struct sandbox_manager *m, char *line)
{
    struct template_keeper *k = &m->keeper;
    char *rest = strchr(line, ' ');
    if (rest)
        *rest++ = '\0';
    else
        rest = line + strlen(line);
    if (strcmp(line, "verifying") == 0) {
        k->state = KEEPER_VERIFYING;
    } else if (strcmp(line, "waiting") == 0) {
        k->state = KEEPER_WAITING;
        snprintf(k->step, sizeof(k->step), "%s", rest);
    } else if (strcmp(line, "outdated") == 0) {
        k->state = KEEPER_BUILDING;
        log_info("sandbox template debian rebuilding: %s", rest);
    } else if (strcmp(line, "invalid") == 0) {
        k->state = KEEPER_BUILDING;
        became_unusable(m, rest);
    } else if (strcmp(line, "building") == 0) {
        if (k->state != KEEPER_BUILDING)
            log_info("sandbox template debian building attempt=%u log=%s/debian.log",
                     k->failures + 1, m->template_dir);
        k->state = KEEPER_BUILDING;
        snprintf(k->step, sizeof(k->step), "%s", rest);
    } else if (strcmp(line, "ready") == 0) {
        on_ready(m, rest);
    } else if (strcmp(line, "failed") == 0) {
        snprintf(k->error, sizeof(k->error), "%s", rest);
    }
}

static void on_retry(struct loop_timer *t)
{
    struct sandbox_manager *m = container_of(t, struct sandbox_manager, keeper.retry);
    keeper_spawn(m);
}

static void on_child_done(struct sandbox_manager *m)
{
    struct template_keeper *k = &m->keeper;
    int status = 0;
    while (k->pid > 0 && waitpid(k->pid, &status, 0) < 0 && errno == EINTR)
        ;
    k->pid = 0;
    if (k->state == KEEPER_READY && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return;
    if (!k->error[0]) {
        if (WIFSIGNALED(status))
            snprintf(k->error, sizeof(k->error), "the build was killed by signal %d",
                     WTERMSIG(status));
        else
            snprintf(k->error, sizeof(k->error), "the build exited with status %d",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    k->failures++;
    uint64_t delay = m->cfg.template_retry_ms;
    for (unsigned i = 1; i < k->failures && delay < RETRY_MAX_MS; i++)
        delay *= 2;
    if (delay > RETRY_MAX_MS)
        delay = RETRY_MAX_MS;
    k->state = KEEPER_RETRY;
    k->retry_at = time_now_ms() + (int64_t)delay;
    log_warn("sandbox template debian build failed attempt=%u retry_s=%llu log=%s/debian.log: %s",
             k->failures, (unsigned long long)(delay / 1000), m->template_dir, k->error);
    loop_timer_start(&k->retry, delay, on_retry);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    struct sandbox_manager *m = sock->data;
    struct template_keeper *k = &m->keeper;
    h2o_buffer_t *in = sock->input;
    for (size_t i = 0; i < in->size; i++) {
        char c = in->bytes[i];
        if (c != '\n' && k->line_len < sizeof(k->line) - 1) {
            k->line[k->line_len++] = c;
            continue;
        }
        if (c != '\n')
            continue; /* an overlong line is cut */
        k->line[k->line_len] = '\0';
        k->line_len = 0;
        on_status(m, k->line);
    }
    h2o_buffer_consume(&sock->input, in->size);
    if (!err)
        return;
    h2o_socket_read_stop(sock);
    h2o_socket_close(sock);
    k->sock = NULL;
    on_child_done(m);
}

static void keeper_spawn(struct sandbox_manager *m)
{
    struct template_keeper *k = &m->keeper;
    k->since_ms = time_now_ms();
    k->error[0] = '\0';
    k->step[0] = '\0';
    k->line_len = 0;
    char log_path[PATH_MAX];
    snprintf(log_path, sizeof(log_path), "%s/debian.log", m->template_dir);
    _cleanup_close_ int log_fd =
        open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    int fds[2] = {-1, -1};
    if (log_fd < 0 || pipe2(fds, O_CLOEXEC) < 0) {
        snprintf(k->error, sizeof(k->error), "cannot start the build: %s", strerror(errno));
        if (fds[0] >= 0)
            close(fds[0]);
        k->pid = 0;
        on_child_done(m);
        return;
    }
    /* Everything the child needs is made before fork: after it, only async-signal-safe calls. */
    char *argv[] = {"sandbox-mcp", "template",   "build",     "debian", "--data-dir",
                    m->data_dir,   "--env-file", "/dev/null", NULL};
    char *env[ARRAY_SIZE(env_pass) + 8];
    size_t n = 0;
    env[n++] = xstrdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    env[n++] = xasprintf("SANDBOX_TEMPLATE_DIR=%s", m->template_dir);
    env[n++] = xasprintf("SANDBOX_TEMPLATE_STATUS_FD=%d", STATUS_FD);
    if (m->cfg.template_mirror)
        env[n++] = xasprintf("SANDBOX_TEMPLATE_MIRROR=%s", m->cfg.template_mirror);
    for (size_t i = 0; i < ARRAY_SIZE(env_pass); i++) {
        const char *v = getenv(env_pass[i]);
        if (v)
            env[n++] = xasprintf("%s=%s", env_pass[i], v);
    }
    env[n] = NULL;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* the build dies with the server rather than go on unwatched */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
            _exit(127);
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0 ||
            dup2(fds[1], STATUS_FD) < 0)
            _exit(127);
        execve("/proc/self/exe", argv, env);
        _exit(127);
    }
    int saved = errno;
    for (size_t i = 0; i < n; i++)
        free(env[i]);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        snprintf(k->error, sizeof(k->error), "cannot start the build: %s", strerror(saved));
        k->pid = 0;
        on_child_done(m);
        return;
    }
    k->pid = pid;
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    k->sock = h2o_evloop_socket_create(loop_get(), fds[0], 0);
    k->sock->data = m;
    h2o_socket_read_start(k->sock, on_read);
}

void sandbox_manager_keep_template(struct sandbox_manager *m)
{
    struct template_keeper *k = &m->keeper;
    if (strcmp(m->template_name, "debian") != 0 || k->pid > 0)
        return;
    struct err err = {0};
    if (template_prepare(m->template_dir, "debian", &m->debian, &err) == 0) {
        k->usable = true;
        k->state = KEEPER_VERIFYING;
        use_template(m, &m->debian);
    } else {
        if (err.code != -ENOENT)
            log_warn("sandbox template debian: %s: rebuilding it", err.msg);
        k->usable = false;
        k->state = KEEPER_BUILDING;
        use_template(m, &m->host);
    }
    keeper_spawn(m);
}

void keeper_stop(struct sandbox_manager *m)
{
    struct template_keeper *k = &m->keeper;
    loop_timer_stop(&k->retry);
    if (k->sock) {
        h2o_socket_read_stop(k->sock);
        h2o_socket_close(k->sock);
        k->sock = NULL;
    }
    if (k->pid > 0) {
        kill(k->pid, SIGKILL);
        while (waitpid(k->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        k->pid = 0;
    }
}

static const char tools[] = "Debian with python3, pip, venv, numpy, pandas, matplotlib, scipy, "
                            "git, gcc, make, curl, node, npm and pnpm";

char *sandbox_manager_template_note(const struct sandbox_manager *m, const char *sandbox_template)
{
    const struct template_keeper *k = &m->keeper;
    if (k->state == KEEPER_OFF || strcmp(sandbox_template, "debian") == 0)
        return NULL;
    const char *host = "This sandbox runs on the host template: the server's own programs, which "
                       "may lack pip's system installs, compilers or pnpm.";
    const char *moves = "container_initialize moves this sandbox onto it (it starts over, "
                        "empty), and so does its next start after an idle stop (files kept)";
    int64_t now = time_now_ms();
    switch (k->state) {
    case KEEPER_READY:
        return xasprintf("%s The default template (%s) is ready: %s.", host, tools, moves);
    case KEEPER_RETRY:
        return xasprintf("%s The default template (%s) could not be built yet (attempt %u: %s); "
                         "the next attempt starts in %lld s. Once it is ready, new sandboxes get "
                         "it; %s.",
                         host, tools, k->failures, k->error,
                         (long long)((k->retry_at - now + 999) / 1000), moves);
    default:
        return xasprintf("%s The default template (%s) is being built (%s, for %lld s so far); "
                         "a first build takes a few minutes. Once it is ready, new sandboxes get "
                         "it; %s.",
                         host, tools, k->step[0] ? k->step : "starting",
                         (long long)((now - k->since_ms) / 1000), moves);
    }
}

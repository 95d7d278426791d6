/* The pool's agents: a pooled sandbox's agent booted before any run has the sandbox, so that a
 * new session's first model request does not wait for the agent's boot (runs_pool_prepare); the
 * snapshots the pool keeps sandboxes started on, with the directory their agents are readied for
 * (runs_pool_keep_env); and the tick's look at the warm-ups under way (runs_pool_check).
 *
 * The rule of this file: nothing is minted for a pooled agent. Its key is the sandbox's
 * (proxy_sandbox_key), which the proxy honours only while a run is running in the sandbox, so
 * that what the agent holds before the hand-over grants nothing. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"

/* A pooled agent's warm-up (boot, then one refused prompt) that has not ended in this long is
 * given up on, and after one that failed no pooled agent is started for a while. */
#define POOL_WARMUP_MAX_MS (10 * 60 * 1000)
#define POOL_RETRY_MS (10 * 60 * 1000)

/* A pooled sandbox's agent, booted before any run (sandbox_manager_pool_prepare): the default
 * agent's warm server as a new session's first run on the default model would start it, whose key
 * is the sandbox's (proxy_sandbox_key: nothing is minted before the hand-over), then readied for
 * /workspace, a new session's directory when it has no repository. A run on another model, or
 * with secrets for its agent, finds it stale and has it replaced. Nothing else runs in the
 * sandbox; it is the new owner's once taken. */
bool runs_pool_prepare(void *ctx, struct sandbox *sbx)
{
    struct runs *e = ctx;
    const struct agent_adapter *ad = agent_find(e->default_agent);
    const char *inside = ad ? runs_agent_inside(e, ad->name) : NULL;
    if (!ad || !ad->warm || !inside || e->cfg.agent_warm_s == 0 ||
        time_mono_ms() < e->pool_retry_at)
        return false;
    struct proxy_llm llms[PROXY_SERVICES_MAX];
    char services[PROXY_SERVICES_MAX * (PROXY_NAME_MAX + 1) + 8];
    size_t nllms = run_llms(&e->cfg, e->default_model, false, llms, services, sizeof(services));
    if (nllms == 0)
        return false;
    /* on the kept snapshot, for its repository's directory; else for a new session's own */
    const char *env = sandbox_env_of(sbx), *dir = env[0] ? NULL : "/workspace";
    for (size_t i = 0; i < e->npool_envs && !dir; i++)
        if (strcmp(e->pool_envs[i], env) == 0)
            dir = e->pool_env_dirs[i];
    if (!dir)
        return false;
    char key[PROXY_SANDBOX_KEY_LEN + 1], program[PATH_MAX];
    proxy_sandbox_key(e->cfg.jwt_key, e->cfg.jwt_keylen, sandbox_id(sbx), key);
    snprintf(program, sizeof(program), "%s", inside);
    struct agent_launch l = {.model = e->default_model,
                             .session = "",
                             .proxy_token = key,
                             .proxy_url = PROXY_URL,
                             .program = program,
                             .providers = llms,
                             .nproviders = nllms,
                             .warm_port = AGENT_SERVE_PORT,
                             .warm_idle_s = e->cfg.agent_warm_s,
                             .start_ahead = true,
                             .warm_dir = dir,
                             .gh_host = e->gh_host};
    ad->launch(&l);
    explicit_bzero(key, sizeof(key));
    struct err err = {0};
    int pid, rc = -EIO;
    int fds[3] = {open("/dev/null", O_RDONLY | O_CLOEXEC), open("/dev/null", O_WRONLY | O_CLOEXEC),
                  memfd_create("warm-up", MFD_CLOEXEC)};
    if (l.argv && fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0) {
        struct sandbox_spawn_opts so = {.argv = (const char *const *)l.argv,
                                        .cwd = "/workspace",
                                        .env = (const char *const *)l.env,
                                        .stdin_fd = fds[0],
                                        .out_fd = fds[1],
                                        .err_fd = fds[1],
                                        .out_max = 4096,
                                        .err_max = 4096,
                                        .status_fd = fds[2]};
        rc = sandbox_spawn(sbx, &so, &pid, &err);
    }
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (rc < 0 && fds[2] >= 0)
        close(fds[2]);
    for (size_t i = 0; l.env && l.env[i]; i++)
        explicit_bzero(l.env[i], strlen(l.env[i]));
    agent_launch_release(&l);
    if (rc < 0) {
        log_warn("run agent not booted in the pool sbx=%s err=\"%s\"", sandbox_id(sbx), err.msg);
        return false;
    }
    struct pool_warmup *w = xcalloc(1, sizeof(*w));
    snprintf(w->sandbox, sizeof(w->sandbox), "%s", sandbox_id(sbx));
    w->status_fd = fds[2];
    w->started = time_mono_ms();
    w->next = e->warmups;
    e->warmups = w;
    log_info("run agent booting in the pool sbx=%s model=%s env=%s dir=%s", sandbox_id(sbx),
             e->default_model, env[0] ? env : "-", dir);
    return true;
}

void runs_pool_keep_env(struct runs *e, const char *env, const char *dir)
{
    if (!e->mgr || e->cfg.env_pool == 0 || e->cfg.agent_warm_s == 0)
        return;
    size_t i = 0;
    while (i < e->npool_envs && strcmp(e->pool_envs[i], env) != 0)
        i++;
    if (i == 0 && dir && e->npool_envs && strcmp(e->pool_env_dirs[0], dir) == 0)
        return;              /* the most recent already */
    if (i < e->npool_envs) { /* out of the list, to go in front (or not at all) */
        memmove(&e->pool_envs[i], &e->pool_envs[i + 1],
                (e->npool_envs - i - 1) * sizeof(e->pool_envs[0]));
        memmove(&e->pool_env_dirs[i], &e->pool_env_dirs[i + 1],
                (e->npool_envs - i - 1) * sizeof(e->pool_env_dirs[0]));
        e->npool_envs--;
    } else if (!dir) {
        return;
    }
    if (dir) {
        size_t keep =
            e->cfg.env_pool < SANDBOX_POOL_ENVS_MAX ? e->cfg.env_pool : SANDBOX_POOL_ENVS_MAX;
        if (e->npool_envs >= keep)
            e->npool_envs = keep - 1; /* the least recently used goes */
        memmove(&e->pool_envs[1], &e->pool_envs[0], e->npool_envs * sizeof(e->pool_envs[0]));
        memmove(&e->pool_env_dirs[1], &e->pool_env_dirs[0],
                e->npool_envs * sizeof(e->pool_env_dirs[0]));
        snprintf(e->pool_envs[0], sizeof(e->pool_envs[0]), "%s", env);
        snprintf(e->pool_env_dirs[0], sizeof(e->pool_env_dirs[0]), "%s", dir);
        e->npool_envs++;
    }
    sandbox_pool_keep_envs(e->mgr, (const char(*)[64])e->pool_envs, e->npool_envs);
}

void runs_pool_check(struct runs *e, bool all)
{
    int64_t now = time_mono_ms();
    for (struct pool_warmup **pp = &e->warmups; *pp;) {
        struct pool_warmup *w = *pp;
        char text[64];
        ssize_t n = pread(w->status_fd, text, sizeof(text) - 1, 0);
        int ws = 0;
        bool ended = n > 0 && sandbox_spawn_status(text, (size_t)n, &ws) > 0;
        if (!ended && !all && now - w->started < POOL_WARMUP_MAX_MS) {
            pp = &w->next;
            continue;
        }
        bool ok = ended && WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
        if (!all)
            sandbox_pool_ready(e->mgr, w->sandbox, ok);
        if (!ok && !all) {
            log_warn("run agent not ready in the pool sbx=%s status=%s", w->sandbox,
                     ended ? "failed" : "too slow");
            e->pool_retry_at = now + POOL_RETRY_MS;
        }
        close(w->status_fd);
        *pp = w->next;
        free(w);
    }
}

/* A run's workspace: its sandbox acquired (created with the session's first run), then, for a run
 * that names a repository, one command in the sandbox that finds the repository already in the
 * workspace (a later run of the session) or says it is absent; when absent, the host name
 * resolved and every address checked against the egress policy, the clone made on the host
 * (host git, pinned to the addresses checked, no redirects, the credential in the environment
 * only) into the run's directory and packed: fetched into the node's mirror of the repository
 * first when the cache is on (the user's own, or one shared for a repository fetched without a
 * credential where the operator allows it) and cloned from there, so that only what is new
 * crosses the network, and the archive unpacked in the sandbox, which
 * checks out the branch and makes the session's branch for a delivering run. A run without a
 * repository works in /workspace. An adopted run whose agent is still there goes back to
 * ingesting from here.
 *
 * The rule of this file: nothing of the sandbox's choosing runs with credentials, and nothing on
 * the host follows links the sandbox made: the host side only clones and packs, the sandbox side
 * only unpacks (the scripts themselves are in scripts.c). */
#include "runs/runs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "runs/deliver.h"
#include "store/store.h"

#define CLONE_OUTPUT_MAX (16u << 10)

/* The end of a preparation command in the sandbox: false when the run is over instead (it was
 * cancelled or timed out meanwhile, or the command could not run). */
static bool prepared(struct run *r, const struct err *err)
{
    r->ex = NULL;
    if (r->phase == PH_FINISHING) {
        r->phase = PH_PREPARE;
        run_finish(r);
        return false;
    }
    if (err) {
        run_fail(r, "cannot prepare the workspace: %s", err->msg);
        return false;
    }
    return true;
}

static void on_pinned(void *ctx, struct sandbox_exec_result *res, const struct err *err)
{
    struct run *r = ctx;
    if (!prepared(r, err))
        return;
    if (res->exit_code == 0)
        snprintf(r->base, sizeof(r->base), "%s", r->group_base);
    else
        log_warn("run attempt not at its group's start run=%s group=%s want=%s has=%s", r->id,
                 r->group_id, r->group_base, r->base);
    r->prepared = true;
    envs_before_setup(r);
}

/* An attempt starts where its group's first one did: the commit the first to get here recorded
 * (its own, when it is the first), checked out if this workspace's is another (its branch moved
 * between their clones). True when a command to check it out is under way. */
static bool pin_to_group(struct run *r)
{
    struct err err = {0};
    if (store_group_base(r->e->st, r->group_id, r->base, r->group_base, &err) < 0) {
        log_warn("run group start not recorded run=%s err=\"%s\"", r->id, err.msg);
        return false;
    }
    if (strcmp(r->group_base, r->base) == 0 || !scripts_sha_valid(r->group_base))
        return false;
    _cleanup_free_ char *cmd = scripts_reset_to(r->workdir, r->group_base);
    const char *env[] = {"GIT_CONFIG_NOSYSTEM=1", NULL};
    struct sandbox_exec_opts o = {.command = cmd, .env = env, .timeout_ms = 60000};
    r->ex = sandbox_exec_start(r->sbx, &o, NULL, on_pinned, r, &err);
    return r->ex != NULL;
}

/* Output of the preparation: "<branch>\n<HEAD sha>\n" ("-" for the sha in a repository without
 * commits), then "made" or "empty" when the run made the session's branch */
static void on_prepared(void *ctx, struct sandbox_exec_result *res, const struct err *err)
{
    struct run *r = ctx;
    bool probing = r->probing;
    r->probing = false;
    if (!prepared(r, err))
        return;
    if (probing && res->exit_code == 0 && strcmp(res->out, "absent\n") == 0) {
        run_clone(r);
        return;
    }
    if (res->exit_code != 0) {
        const char *msg = res->err_len ? res->err : res->out;
        size_t n = strlen(msg);
        while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
            n--;
        run_fail(r, "cannot prepare the workspace: %.*s", (int)(n > 400 ? 400 : n), msg);
        return;
    }
    if (r->repository) {
        char sha[64] = "", branch[256] = "", made[16] = "";
        sscanf(res->out, "%255s %63s %15s", branch, sha, made);
        snprintf(r->base, sizeof(r->base), "%s", strcmp(sha, "-") == 0 ? "" : sha);
        snprintf(r->branch, sizeof(r->branch), "%s", branch);
        if (strcmp(made, "made") == 0 || strcmp(made, "empty") == 0) {
            /* the session's branch, made from the one checked out: its pull request's base; in
             * an empty repository, the branch checked out, with no base (its push creates it) */
            struct err e2 = {0};
            if (strcmp(made, "empty") == 0)
                snprintf(r->work_branch, sizeof(r->work_branch), "%s", branch);
            snprintf(r->base_branch, sizeof(r->base_branch), "%s",
                     strcmp(made, "made") == 0 ? branch : "");
            if (store_session_set_branch(r->e->st, r->session_id, r->work_branch, r->base_branch,
                                         &e2) < 0)
                log_error("session branch not recorded run=%s err=\"%s\"", r->id, e2.msg);
        } else if (run_delivering(r) && r->base_branch[0]) {
            snprintf(r->branch, sizeof(r->branch), "%s", r->base_branch);
        }
        /* the session's repository is the one its workspace holds: a later run without one
         * works there */
        struct err serr = {0};
        if (store_session_update(r->e->st, r->session_id, NULL, r->repository, time_now_ms(),
                                 &serr) < 0)
            log_error("session repository not stored run=%s err=\"%s\"", r->id, serr.msg);
        if (r->group_id[0] && !r->delivers[0] && r->base[0] && pin_to_group(r))
            return;
    }
    r->prepared = true;
    envs_before_setup(r);
}

/* In the sandbox: unpack the clone (when there is one), check out the requested branch of an
 * existing one, and print the branch and the starting commit (none in a repository without
 * commits). Without a clone to unpack, it first looks for the repository in the workspace (a
 * later run of the session) and prints only "absent" when it is not there, so that a run whose
 * repository is already in place gets ready in one command. The archive holds the git directory as
 * .GIT, a name git never checks out, and it becomes .git only once all is unpacked: a workspace
 * with .git is whole, and an unpack that stopped half-way is made afresh by the session's next run
 * instead of failing it again. */
void run_prepare_workspace(struct run *r, bool unpack)
{
    r->phase = PH_PREPARE;
    run_set_phase(r, "preparing", "%s",
                  unpack ? "unpacking the repository into the workspace"
                         : "preparing the workspace");
    bool work = run_delivering(r), made = work && r->new_work_branch;
    _cleanup_free_ char *gh_remote =
        r->github_repo[0] ? xasprintf("%s/%s.git", r->e->github_base, r->github_repo) : NULL;
    struct scripts_prepare p = {.workdir = r->workdir,
                                .unpack = unpack,
                                .over = unpack && r->env_first,
                                .repository = r->repository != NULL,
                                .checkout = !r->repository  ? NULL
                                            : work && !made ? r->work_branch /* an earlier run's */
                                            : !unpack && r->branch_req[0] ? r->branch_req
                                                                          : NULL,
                                .make_branch = r->repository && made ? r->work_branch : NULL,
                                .gh_remote = gh_remote};
    r->probing = r->repository && !unpack;
    r->fresh = unpack;
    _cleanup_free_ char *cmd = scripts_prepare(&p);
    struct err err = {0};
    _cleanup_close_ int tar = unpack ? run_open_file(r, "repo.tar", O_RDONLY, &err) : -1;
    if (unpack && tar < 0) {
        r->probing = false;
        run_fail(r, "%s", err.msg);
        return;
    }
    const char *env[] = {"GIT_CONFIG_NOSYSTEM=1", NULL};
    struct sandbox_exec_opts o = {
        .command = cmd, .env = env, .stdin_fd = tar, .timeout_ms = 600000};
    r->ex = sandbox_exec_start(r->sbx, &o, NULL, on_prepared, r, &err);
    if (!r->ex) {
        r->probing = false;
        run_fail(r, "cannot prepare the workspace: %s", err.msg);
    }
}

/* The clone's HEAD names a branch it does not have, and it has several: fail, naming some of
 * them. out ends with what the clone script printed: "smcp-branches <n>\n" and up to ten
 * names, one a line. */
static void fail_branches(struct run *r, char *out)
{
    struct buf names;
    buf_init(&names, 0);
    unsigned long total;
    unsigned shown = scripts_clone_branches(out, &names, &total);
    if (shown == 0)
        run_fail(r,
                 "cannot clone '%s': the branch its HEAD names does not exist; pass the branch to "
                 "work on as branch",
                 r->repository);
    else if (total > shown)
        run_fail(r,
                 "cannot clone '%s': the branch its HEAD names does not exist; pass one of its %lu "
                 "branches as branch: %s and %lu more",
                 r->repository, total, names.data, total - shown);
    else
        run_fail(r,
                 "cannot clone '%s': the branch its HEAD names does not exist; pass one of its "
                 "branches as branch: %s",
                 r->repository, names.data);
    buf_release(&names);
}

/* The clone is over: record the mirror's new size and its use (a new mirror whose first fetch
 * failed is removed), let it go, and keep the cache within its budget. */
static void mirror_done(struct run *r, const char *out)
{
    if (!r->mirror_held)
        return;
    struct err err = {0};
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/mirror.kb", r->dir);
    unsigned long long kb = 0;
    FILE *f = fopen(path, "re"); /* written once the mirror is fetched and cloned from */
    bool ok = f && fscanf(f, "%llu", &kb) == 1;
    if (f)
        fclose(f);
    unlink(path);
    if (out && strstr(out, "smcp-mirror-recreated"))
        log_warn("run mirror was unusable and was made afresh run=%s mirror=%s", r->id,
                 r->mirror.path);
    if (ok && envcache_commit(&r->mirror, kb * 1024, &err) < 0)
        log_warn("run mirror not recorded run=%s err=\"%s\"", r->id, err.msg);
    if (!ok && r->mirror.fresh)
        envcache_remove(&r->mirror);
    envcache_release(&r->mirror);
    r->mirror_held = false;
    /* the snapshots count against the same budget */
    uint64_t snap_all = 0, snap_owner = 0;
    envs_usage(r->e, r->mirror.owner, &snap_all, &snap_owner);
    int n = envcache_evict(&r->e->cfg.cache, r->mirror.owner, snap_all, snap_owner, &err);
    if (n > 0)
        log_info("run cache entries evicted run=%s owner=%s count=%d", r->id, r->mirror.owner, n);
}

static void on_cloned(struct proc_watch *w, int status)
{
    struct run *r = container_of(w, struct run, clone);
    r->clone_active = false;
    _cleanup_free_ char *out = w->data;
    w->data = NULL;
    mirror_done(r, out);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
        log_info("run clone has no branch at HEAD run=%s", r->id);
        fail_branches(r, out ? out : (char *)"");
        return;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 4) {
        run_fail(r, "cannot clone '%s': branch '%s' does not exist in the repository",
                 r->repository, r->branch_req);
        return;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char *msg = out ? out : (char *)"";
        size_t n = strlen(msg);
        while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
            msg[--n] = '\0';
        char *last = msg;
        for (char *p = msg; *p; p++)
            if (*p == '\n' && p[1])
                last = p + 1;
        /* git's own words go to the operator's log only */
        for (char *p = last; *p; p++)
            if (*p == '"' || (unsigned char)*p < ' ')
                *p = '\'';
        log_warn("run clone failed run=%s git=\"%.300s\"", r->id, last);
        run_fail(r, "cannot clone '%s': %s", r->repository, scripts_clone_reason(msg));
        return;
    }
    run_prepare_workspace(r, true);
}

/* Take the repository's mirror for r's clone: false when the cache is off or the mirror is in
 * use by another run (which then clones directly). A mirror fetched with a credential is the
 * user's own; one fetched without is shared between users only when the operator allows it. */
static bool mirror_take(struct run *r, bool credential)
{
    const struct envcache_config *cc = &r->e->cfg.cache;
    if (cc->max_bytes == 0)
        return false;
    const char *owner = !credential && cc->share_public ? ENVCACHE_PUBLIC : r->user_id;
    char key[65];
    sha256_hex(r->repository, strlen(r->repository), key);
    key[32] = '\0';
    struct err err = {0};
    if (envcache_acquire(cc, "mirrors", owner, key, r->repository, &r->mirror, &err) < 0) {
        if (err.code == -EBUSY)
            log_info("run mirror in use, cloning directly run=%s", r->id);
        else
            log_warn("run mirror unavailable run=%s err=\"%s\"", r->id, err.msg);
        return false;
    }
    r->mirror_held = true;
    return true;
}

/* Host-side clone with git. addrs (n of them, checked) pin the host's name so that git connects
 * to nothing else; http is allowed when the operator's list allowed the host. */
static void spawn_clone(struct run *r, const struct egress_addr *addrs, int n_addrs, bool http)
{
    struct runs *e = r->e;
    r->phase = PH_CLONE;
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        run_fail(r, "pipe: %s", strerror(errno));
        return;
    }
    /* The URL and paths go in the environment; the credential, for the operator's GitHub
     * repositories only, as a git configuration entry from the environment: neither is ever in
     * an argument list. */
    char *env[28];
    size_t n = 0, ncfg = 0;
    env[n++] = xstrdup("PATH=/usr/local/bin:/usr/bin:/bin");
    env[n++] = xasprintf("HOME=%s", r->dir);
    env[n++] = xstrdup("LANG=C.UTF-8");
    env[n++] = xstrdup("GIT_TERMINAL_PROMPT=0");
    env[n++] = xstrdup("GIT_CONFIG_NOSYSTEM=1");
    env[n++] = xstrdup("GIT_CONFIG_GLOBAL=/dev/null");
    env[n++] = xstrdup(r->ref.local ? "GIT_ALLOW_PROTOCOL=file"
                       : http       ? "GIT_ALLOW_PROTOCOL=https:http"
                                    : "GIT_ALLOW_PROTOCOL=https");
    env[n++] = xasprintf("SMCP_URL=%s", r->repository);
    env[n++] = xasprintf("SMCP_DEST=%s/src", r->dir);
    env[n++] = xasprintf("SMCP_TAR=%s/repo.tar", r->dir);
    env[n++] = xasprintf("SMCP_BRANCH=%s", r->branch_req);
    env[n++] = xasprintf("GIT_CONFIG_KEY_%zu=http.followRedirects", ncfg);
    env[n++] = xasprintf("GIT_CONFIG_VALUE_%zu=false", ncfg++);
    /* HEAD of an empty clone when the remote does not say what its HEAD names */
    env[n++] = xasprintf("GIT_CONFIG_KEY_%zu=init.defaultBranch", ncfg);
    env[n++] = xasprintf("GIT_CONFIG_VALUE_%zu=main", ncfg++);
    struct egress_addr literal;
    if (n_addrs > 0 && egress_addr_parse(r->ref.host, &literal) < 0) {
        struct buf pin;
        buf_init(&pin, 0);
        buf_printf(&pin, "GIT_CONFIG_VALUE_%zu=%s:%u:", ncfg, r->ref.host, (unsigned)r->ref.port);
        for (int i = 0; i < n_addrs; i++) {
            char text[EGRESS_ADDR_TEXT_MAX];
            egress_addr_format(&addrs[i], text);
            bool v4 = egress_addr_is_v4(&addrs[i]);
            buf_printf(&pin, "%s%s%s%s", i ? "," : "", v4 ? "" : "[", text, v4 ? "" : "]");
        }
        env[n++] = xasprintf("GIT_CONFIG_KEY_%zu=http.curloptResolve", ncfg++);
        env[n++] = xstrdup(pin.data);
        buf_release(&pin);
    }
    char *token = runs_github_credential(e, r->user_id, r->github_repo);
    if (mirror_take(r, token != NULL)) {
        env[n++] = xasprintf("SMCP_MIRROR=%s", r->mirror.data);
        env[n++] = xasprintf("SMCP_MIRROR_KB=%s/mirror.kb", r->dir);
    }
    if (token) {
        char *cred = xasprintf("x-access-token:%s", token);
        runs_wipe_free(token);
        char *b64 = xmalloc(strlen(cred) * 2 + 8);
        base64_encode(cred, strlen(cred), b64);
        env[n++] = xasprintf("GIT_CONFIG_KEY_%zu=http.%s/.extraheader", ncfg, e->github_base);
        env[n++] = xasprintf("GIT_CONFIG_VALUE_%zu=Authorization: Basic %s", ncfg++, b64);
        explicit_bzero(cred, strlen(cred));
        free(cred);
        free(b64);
    }
    env[n++] = xasprintf("GIT_CONFIG_COUNT=%zu", ncfg);
    env[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
    /* the mirror's lock goes with git: a clone killed with its run leaves the mirror to no one
     * else while a git of it still writes there */
    if (r->mirror_held)
        posix_spawn_file_actions_adddup2(&fa, r->mirror.lock_fd, 3);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    char *argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)scripts_clone, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    for (size_t i = 0; i < n; i++) {
        explicit_bzero(env[i], strlen(env[i]));
        free(env[i]);
    }
    close(pipefd[1]);
    if (rc != 0) {
        close(pipefd[0]);
        mirror_done(r, NULL);
        run_fail(r, "cannot run git: %s", strerror(rc));
        return;
    }
    r->clone_active = true;
    proc_watch_start(&r->clone, pid, pipefd[0], CLONE_OUTPUT_MAX, on_cloned);
}

/* Every address the repository's host resolved to must pass the egress policy. */
static void on_resolved(void *ctx, const struct egress_addr *addrs, int n, const struct err *err)
{
    struct run *r = ctx;
    r->lookup = NULL;
    if (err) {
        run_fail(r, "cannot clone '%s': %s", r->repository, err->msg);
        return;
    }
    struct err e2 = {0};
    bool by_rule;
    if (egress_check(&r->e->fetch_rules, r->ref.host, addrs, n, r->ref.port, &by_rule, &e2) < 0) {
        run_fail(r, "cannot clone '%s': %s", r->repository, e2.msg);
        return;
    }
    if (r->ref.http && !by_rule) {
        run_fail(r,
                 "cannot clone '%s': http:// is fetched only from hosts the operator allows with "
                 "FETCH_ALLOW; use https://",
                 r->repository);
        return;
    }
    spawn_clone(r, addrs, n, r->ref.http);
}

void run_clone(struct run *r)
{
    r->phase = PH_CLONE;
    run_set_phase(r, "cloning", "cloning %s", r->repository);
    if (r->ref.local) {
        spawn_clone(r, NULL, 0, false);
        return;
    }
    struct err err = {0};
    r->lookup = egress_resolve_for(r->ref.host, r->user_id, on_resolved, r, &err);
    if (!r->lookup)
        run_fail(r, "cannot clone '%s': %s", r->repository, err.msg);
}

static void on_start(struct loop_timer *t)
{
    struct run *r = container_of(t, struct run, start);
    r->start_armed = false;
    envs_before_setup(r);
}

void run_on_sandbox(void *ctx, struct sandbox *sbx, const struct err *err)
{
    struct run *r = ctx;
    r->sw = NULL;
    if (!sbx) {
        if (err->code == -EBUSY && !r->cancelled && !r->timed_out) {
            /* no room for now (the server's sandboxes, the user's own, or disk room that
             * running sandboxes may still take): stay queued and try again in a while, saying
             * which, up to the advice the message ends with */
            r->phase = PH_QUEUED;
            size_t why = strcspn(err->msg, ";");
            run_set_phase(r, "preparing", "waiting for a sandbox: %.*s", (int)why, err->msg);
            r->retry_at = time_mono_ms() + 2000;
            return;
        }
        if (envs_start_failed(r, err))
            return;
        run_fail(r, "cannot start the session's sandbox: %s", err->msg);
        return;
    }
    r->sbx = sbx;
    if (r->cancelled || r->timed_out) {
        run_finish(r);
        return;
    }
    if (r->phase == PH_AGENT) { /* adopted: is the agent still there? */
        if (run_agent_ended(r)) {
            r->adopted_dead = !r->exited;
            run_finish(r);
            return;
        }
        run_watch_events(r);
        run_grant(r, NULL); /* for a warm agent's token, which stands for this run */
        log_info("run adopted run=%s sbx=%s pid=%d offset=%lld", r->id, sandbox_id(sbx),
                 r->agent_pid, (long long)r->offset);
        run_ingest(r);
        if (run_read_exit(r) > 0)
            run_finish(r);
        return;
    }
    log_info("run sandbox ready run=%s sbx=%s", r->id, sandbox_id(sbx));
    if (!r->repository) {
        /* /workspace is a mount point of every sandbox: nothing to prepare. A running sandbox
         * is handed over within run_task's call: the agent starts on the loop's next turn, so
         * that the reply does not wait for it. */
        snprintf(r->workdir, sizeof(r->workdir), "/workspace");
        r->phase = PH_PREPARE;
        r->prepared = true;
        r->start_armed = true;
        loop_timer_start(&r->start, 0, on_start);
        return;
    }
    /* the repository is cloned only when the workspace does not hold it already (or holds
     * the snapshot's checkout, which the clone goes over) */
    snprintf(r->workdir, sizeof(r->workdir), "/workspace/%s", r->ref.name);
    if (r->env_first)
        run_clone(r);
    else
        run_prepare_workspace(r, false);
}

/* A run interrupted while preparing: its sandbox is acquired only to be released properly. */
void run_on_sandbox_failed(void *ctx, struct sandbox *sbx, const struct err *err)
{
    struct run *r = ctx;
    r->sw = NULL;
    r->sbx = sbx;
    r->phase = PH_PREPARE;
    run_finish(r);
}

/* Acquire r's sandbox. The callback may run, and end r, before sandbox_acquire() returns:
 * r is touched after it only when the wait goes on. */
void run_acquire(struct run *r, const struct sandbox_acquire_opts *o, sandbox_ready_fn cb)
{
    struct sandbox_waiter *w = sandbox_acquire(r->e->mgr, o, cb, r);
    if (w)
        r->sw = w;
}

/* A delivering run's branch: the session's, made by an earlier run, or the one this run makes.
 * Looked at again when the run starts: a run queued behind the session's first finds the branch
 * that one made. */
void run_load_work_branch(struct run *r)
{
    if (r->pr == PR_NONE || !r->github_repo[0])
        return;
    struct store_session ses = {0};
    struct err err = {0};
    store_session_get(r->e->st, NULL, r->session_id, &ses, &err);
    r->new_work_branch = !ses.work_branch[0];
    if (ses.work_branch[0]) {
        snprintf(r->work_branch, sizeof(r->work_branch), "%s", ses.work_branch);
        snprintf(r->base_branch, sizeof(r->base_branch), "%s", ses.base_branch);
    } else {
        r->base_branch[0] = '\0';
        deliver_branch_name(r->session_id, r->title && *r->title ? r->title : r->task,
                            r->work_branch);
    }
}

/* The agent's start: what the run's proxy token grants (its LLM providers, and git through the
 * proxy for its own repository when a credential serves it), the token minted, the agent's
 * command line and environment from its adapter (agent_adapter.launch), and the agent spawned as
 * a process of the sandbox with the task on stdin as a sealed memory file and its output going to
 * the run's files, which the init writes (no process of the sandbox holds them).
 *
 * The rule of this file: what is particular to an agent comes from the run's adapter (its
 * command line and environment, its wrapper, whether it can be warm, whether its conversations
 * belong to a directory; agents.c has the table); a second agent is a second adapter, not a
 * branch here. Each agent's program is mounted at AGENT_DIR/<name> (runs_agents_find). The real
 * keys never reach the sandbox: only the run's short-lived proxy token does. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "runs/agent.h"
#include "store/store.h"

/* The names of the secrets the agent sees, comma-separated (src/sandbox/helper/agent.c reads
 * it for its server's fingerprint) */
#define AGENT_SECRETS_ENV "SANDBOX_MCP_AGENT_SECRETS"
/* A warm agent's token outlives its server: the bridge's keeper replaces a server after 20 h
 * (between runs), and a run started just before may run for the longest timeout. */
#define WARM_TOKEN_SPARE_S (21 * 3600)

/* What a plan_first run's agent is told before its task: the plan goes to the server's
 * submit_plan tool (mcp/tools_agent.c), whose answer is the approval. */
static const char plan_first_preface[] =
    "Before you change anything, make a plan. Read what you need to, but do not edit, create or "
    "delete files, commit, or run commands that change the workspace. Then submit the plan with "
    "the submit_plan tool of the sandbox-mcp server and wait for its answer: it returns once the "
    "person who gave you this task has approved the plan, possibly with changes. Then carry out "
    "the plan as approved. If the answer says the plan is not approved, change nothing and "
    "stop.\n\nThe task:\n\n";

/* The task as a sealed memory file: the agent's stdin, read from the start, and no file of the
 * host. */
static int task_memfd(struct run *r, struct err *err)
{
    _cleanup_close_ int fd = memfd_create("task", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return err_set(err, -errno, "memfd_create: %s", strerror(errno));
    _cleanup_free_ char *task =
        r->plan_first ? xasprintf("%s%s", plan_first_preface, r->task) : xstrdup(r->task);
    size_t len = strlen(task);
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, task + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return err_set(err, -EIO, "cannot copy the task: %s", strerror(errno));
        off += (size_t)n;
    }
    if (lseek(fd, 0, SEEK_SET) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
        return err_set(err, -EIO, "cannot copy the task: %s", strerror(errno));
    return TAKE_FD(fd);
}

/* The session's newest run before r that its agent spoke in (its agent started, in a workdir,
 * and it has events; a run that ended in its setup has events but no agent): the one whose
 * conversation r would continue */
struct earlier_run {
    int64_t before;
    char id[64];
    char agent[32];
    char workdir[512]; /* "" until found */
};

static void on_earlier_run(const struct store_run *row, void *ctx)
{
    struct earlier_run *p = ctx;
    if (!p->id[0] && row->n < p->before && row->workdir[0] && row->event_count > 0) {
        snprintf(p->id, sizeof(p->id), "%s", row->id);
        snprintf(p->agent, sizeof(p->agent), "%s", row->agent);
        snprintf(p->workdir, sizeof(p->workdir), "%s", row->workdir);
    }
}

static bool earlier_run(struct run *r, struct earlier_run *p)
{
    *p = (struct earlier_run){.before = r->n};
    struct store_run_list_opts o = {
        .user_id = r->user_id, .session_id = r->session_id, .limit = 20};
    struct err err = {0};
    bool more;
    return store_run_list(r->e->st, &o, on_earlier_run, p, &more, &err) == 0 && p->id[0];
}

/* Whether r works where its session's conversation was held (its newest earlier run that the
 * agent spoke in): OpenCode keeps a conversation with the directory it began in, and asked to
 * continue it in another one it hangs without a word. True when that is not known. */
static bool conversation_here(struct run *r)
{
    struct earlier_run p;
    if (!earlier_run(r, &p) || !p.workdir[0])
        return true;
    return strcmp(p.workdir, r->workdir) == 0;
}

struct last_finish {
    int64_t seq;
    struct run *r;
};

static void on_last_finish(const struct store_run_event_row *ev, void *ctx)
{
    struct last_finish *f = ctx;
    if (!f->seq && strcmp(ev->type, "step_finish") == 0)
        f->seq = ev->seq;
}

static void on_finish_raw(const struct store_run_event_row *ev, void *ctx)
{
    struct last_finish *f = ctx;
    struct agent_reader *rd = f->r->reader;
    f->r->adapter->totals(ev->raw, strlen(ev->raw), &rd->total_in, &rd->total_out);
}

/* r's reader starts from the totals the last step's end of run from reported */
static bool seed_from(struct run *r, const char *from)
{
    if (!r->adapter || !r->adapter->totals)
        return false;
    struct last_finish f = {.r = r};
    struct err err = {0};
    if (store_run_events_back(r->e->st, from, 0, 200, on_last_finish, &f, &err) < 0 || !f.seq)
        return false;
    if (!r->reader)
        r->reader = xcalloc(1, sizeof(*r->reader));
    return store_run_events(r->e->st, from, f.seq - 1, 1, on_finish_raw, &f, &err) == 0;
}

void run_seed_totals(struct run *r)
{
    struct earlier_run p;
    if (!r->adapter || !r->adapter->totals || seed_from(r, r->id))
        return;
    if (earlier_run(r, &p) && strcmp(p.agent, r->adapter->name) == 0)
        seed_from(r, p.id);
}

size_t run_llms(const struct runs_config *c, const char *model, bool git,
                struct proxy_llm out[PROXY_SERVICES_MAX], char *services, size_t cap)
{
    size_t n = 0, plen = strcspn(model, "/"), len = 0;
    services[0] = '\0';
    for (int own = 1; own >= 0; own--)
        for (size_t i = 0; i < c->nllms && n + git < PROXY_SERVICES_MAX; i++) {
            const struct proxy_llm *p = &c->llms[i];
            bool mine = strlen(p->name) == plen && memcmp(p->name, model, plen) == 0;
            if (p->has_key && mine == own) {
                out[n++] = *p;
                len +=
                    (size_t)snprintf(services + len, cap - len, "%s%s", n > 1 ? "," : "", p->name);
            }
        }
    if (git)
        snprintf(services + len, cap - len, "%sgithub", n ? "," : "");
    return n;
}

/* What r's agent's token grants, into r->grant_services and r->grant_git: git through the proxy
 * only for the run's own repository, when a credential serves it (pushes to the session's branch
 * only, when the run delivers). Fills llms (may be NULL); returns how many. */
size_t run_grant(struct run *r, struct proxy_llm llms[PROXY_SERVICES_MAX])
{
    struct proxy_llm none[PROXY_SERVICES_MAX];
    char *cred = runs_github_credential(r->e, r->user_id, r->github_repo);
    r->grant_git = cred != NULL;
    runs_wipe_free(cred);
    return run_llms(&r->e->cfg, r->model, r->grant_git, llms ? llms : none, r->grant_services,
                    sizeof(r->grant_services));
}

/* A warm agent's token stands for the sandbox's run under way: what that run's own grants. */
bool runs_sandbox_run(void *ctx, const char *sandbox, const char *user_id,
                      struct proxy_run_grant *out)
{
    const struct runs *e = ctx;
    for (const struct run *r = e->runs; r; r = r->next)
        if (r->phase == PH_AGENT && r->sbx && !r->exited &&
            (!user_id || strcmp(r->user_id, user_id) == 0) &&
            strcmp(sandbox_id(r->sbx), sandbox) == 0) {
            bool git = r->grant_git;
            snprintf(out->user, sizeof(out->user), "%s", r->user_id);
            snprintf(out->run, sizeof(out->run), "%s", r->id);
            snprintf(out->jti, sizeof(out->jti), "%s", r->agent_jti);
            snprintf(out->services, sizeof(out->services), "%s", r->grant_services);
            snprintf(out->repo, sizeof(out->repo), "%s", git ? r->github_repo : "");
            snprintf(out->branch, sizeof(out->branch), "%s",
                     git && run_delivering(r) ? r->work_branch : "");
            return true;
        }
    return false;
}

/* r's agent as its adapter starts it, into *l (release with agent_launch_release): pointed at the
 * proxy with a token minted now, warm (its server kept in the sandbox, and then the token is the
 * sandbox's) when its adapter can be and the server keeps agents warm. program and llms are the
 * caller's storage for what l points to. start_ahead: only the start of the warm server. */
static int agent_launch_for(struct run *r, const char *session, bool start_ahead,
                            struct agent_launch *l, char program[PATH_MAX],
                            struct proxy_llm llms[PROXY_SERVICES_MAX], struct err *err)
{
    struct runs *e = r->e;
    char *token = NULL, jti[64];
    int64_t ttl = (int64_t)(r->timeout_ms / 1000) + 600;
    /* Warm: the session's agent server is kept in the sandbox between runs, so its token is
     * the sandbox's: honored only while one of the sandbox's runs is running, and then granting
     * what that run's own token would (runs_sandbox_run). */
    bool warm = e->cfg.agent_warm_s > 0 && r->adapter->warm;
    if (proxy_llm_check(e->cfg.llms, e->cfg.nllms, r->model, err) < 0)
        return err->code; /* the configuration changed since run_task */
    size_t nllms = run_grant(r, llms);
    bool git = r->grant_git;
    struct proxy_grant g = {
        .user_id = r->user_id,
        .services = r->grant_services,
        .run_id = warm ? NULL : r->id,
        .session_id = r->session_id,
        .sandbox_id = sandbox_id(r->sbx),
        .repo = git && !warm ? r->github_repo : NULL,
        .branch = run_delivering(r) ? r->work_branch : NULL,
        .ttl_seconds = warm ? (int64_t)(e->cfg.timeout_max_ms / 1000) + WARM_TOKEN_SPARE_S : ttl,
        .warm = warm};
    if (proxy_mint(e->st, e->cfg.jwt_key, e->cfg.jwt_keylen, &g, &token, jti, err) < 0)
        return err_wrap(err, "cannot mint the run's proxy token");
    snprintf(r->agent_jti, sizeof(r->agent_jti), "%s", jti);
    snprintf(program, PATH_MAX, "%s", runs_agent_inside(e, r->adapter->name));
    *l = (struct agent_launch){.model = r->model,
                               .session = session,
                               .proxy_token = token,
                               .proxy_url = PROXY_URL,
                               .program = program,
                               .providers = llms,
                               .nproviders = nllms,
                               .warm_port = warm ? AGENT_SERVE_PORT : NULL,
                               .warm_idle_s = e->cfg.agent_warm_s,
                               .start_ahead = start_ahead && warm,
                               .gh_host = e->gh_host};
    r->adapter->launch(l);
    free(token);
    return 0;
}

/* l's environment with the secrets marked for r's agent, and their names for a warm agent's
 * keeper, whose server's fingerprint counts its environment: the same for the server started
 * ahead and for the run's bridge (malloc'd; *names_env too, the caller's to free). */
static const char **agent_env(const struct run *r, const struct agent_launch *l, char **names_env)
{
    char names[STORE_SECRETS_MAX * (STORE_SECRET_NAME_MAX + 1) + 64];
    *names_env = NULL;
    if (run_secret_names(r, true, names, sizeof(names)) > 0)
        *names_env = xasprintf(AGENT_SECRETS_ENV "=%s", names);
    size_t nbase = 0;
    while (l->env[nbase])
        nbase++;
    _cleanup_free_ const char **base = xcalloc(nbase + 2, sizeof(char *));
    for (size_t i = 0; i < nbase; i++)
        base[i] = l->env[i];
    base[nbase] = *names_env;
    return run_secret_env(r, true, base);
}

/* Start r's warm agent's server now, its workspace prepared, while it is set up, so that its boot
 * is not added to the setup: the adapter's way to start it without a task, with the environment
 * (and so the configuration's fingerprint) its bridge will have, whose token is the sandbox's
 * like any warm server's. A server already there is left to the bridge; a setup that changes
 * what the configuration depends on makes this one stale, and the bridge has it replaced. This
 * is the earliest point a session's agent can start today: sessions are made by run_task itself.
 * Earlier still, in the warm pool's sandboxes, is weighed in docs/RUNS.md ("Agents ready before
 * run_task"): it needs each such sandbox armed (its own network namespace) when filled, and a key
 * the first run's bridge hands the server, so that nothing minted before the hand-over grants
 * anything. */
void run_start_agent_ahead(struct run *r)
{
    struct runs *e = r->e;
    if (!r->adapter || !r->adapter->warm || e->cfg.agent_warm_s == 0 ||
        !runs_agent_inside(e, r->adapter->name))
        return;
    if (!r->repository && !r->setup_arg)
        return; /* nothing to wait for: the agent's own start follows at once */
    struct agent_launch l;
    char program[PATH_MAX];
    struct proxy_llm llms[PROXY_SERVICES_MAX];
    struct err err = {0};
    int pid, rc = agent_launch_for(r, "", true, &l, program, llms, &err);
    if (rc < 0) {
        log_info("run agent not started ahead run=%s err=\"%s\"", r->id, err.msg);
        return;
    }
    char *names_env = NULL;
    _cleanup_free_ const char **env = agent_env(r, &l, &names_env);
    int fds[4] = {open("/dev/null", O_RDONLY | O_CLOEXEC),
                  run_open_file(r, "agent.log", O_WRONLY | O_CREAT | O_APPEND, &err), -1,
                  open("/dev/null", O_WRONLY | O_CLOEXEC)};
    fds[2] = fds[1] >= 0 ? fcntl(fds[1], F_DUPFD_CLOEXEC, 3) : -1;
    rc = -EIO;
    if (l.argv && fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0 && fds[3] >= 0) {
        struct sandbox_spawn_opts so = {.argv = (const char *const *)l.argv,
                                        .cwd = "/workspace",
                                        .env = env,
                                        .stdin_fd = fds[0],
                                        .out_fd = fds[1],
                                        .err_fd = fds[2],
                                        .out_max = 4096,
                                        .err_max = 4096,
                                        .status_fd = fds[3]};
        rc = sandbox_spawn(r->sbx, &so, &pid, &err);
    }
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    agent_launch_release(&l);
    free(names_env);
    if (rc < 0)
        log_info("run agent not started ahead run=%s err=\"%s\"", r->id, err.msg);
    else
        log_info("run agent starting ahead run=%s sbx=%s", r->id, sandbox_id(r->sbx));
}

void run_start_agent(struct run *r)
{
    struct runs *e = r->e;
    struct err err = {0};
    if (!r->adapter) {
        run_fail(r, "agent '%s' is not available on this server", r->agent);
        return;
    }
    if (!runs_agent_inside(e, r->adapter->name)) {
        run_fail(r, "the %s agent is not installed on this server (make deps, or set %s)",
                 r->adapter->name, r->adapter->program_env);
        return;
    }
    struct store_session ses = {0};
    store_session_get(e->st, r->user_id, r->session_id, &ses, &err);
    if (ses.id[0] && strcmp(ses.agent, r->adapter->name) != 0) {
        /* another agent takes the session over: its own conversation, the same workspace */
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "a new %s conversation: the session's earlier runs were %s's, whose "
                 "conversation it does not see (their changes are in the workspace)",
                 r->adapter->name, ses.agent);
        run_server_event(r, "agent_changed", msg,
                         json_pack("{s:s, s:s}", "from", ses.agent, "to", r->adapter->name));
        if (store_session_set_agent(e->st, r->session_id, r->adapter->name, &err) < 0)
            log_error("session agent not stored run=%s err=\"%s\"", r->id, err.msg);
        log_info("run starts a new conversation run=%s session=%s from=%s to=%s", r->id,
                 r->session_id, ses.agent, r->adapter->name);
        ses.agent_session[0] = '\0';
    }
    if (ses.agent_session[0] && r->adapter->conversation_per_dir && !conversation_here(r)) {
        log_info("run starts a new conversation run=%s session=%s workdir=%s", r->id, r->session_id,
                 r->workdir);
        ses.agent_session[0] = '\0';
    }
    if (ses.agent_session[0])
        run_seed_totals(r);
    bool warm = e->cfg.agent_warm_s > 0 && r->adapter->warm;
    struct agent_launch l;
    char program[PATH_MAX];
    struct proxy_llm llms[PROXY_SERVICES_MAX];
    if (agent_launch_for(r, ses.agent_session, false, &l, program, llms, &err) < 0) {
        run_fail(r, "%s", err.msg);
        return;
    }
    /* The adapter's wrapper (OpenCode's seeds its config directory, so that it installs no
     * plugin) becomes the agent, whose exit status the init records. */
    size_t argc = 0;
    while (l.argv[argc])
        argc++;
    const char **argv = xcalloc(argc + 5, sizeof(char *));
    if (warm || !r->adapter->seed) { /* a warm agent's bridge seeds what it needs itself */
        for (size_t i = 0; i < argc; i++)
            argv[i] = l.argv[i];
        goto spawn;
    }
    argv[0] = "/bin/sh";
    argv[1] = "-c";
    argv[2] = r->adapter->seed;
    argv[3] = "agent";
    for (size_t i = 0; i < argc; i++)
        argv[4 + i] = l.argv[i];
spawn:;
    char *names_env = NULL;
    _cleanup_free_ const char **env = agent_env(r, &l, &names_env);
    int fds[4] = {task_memfd(r, &err),
                  run_open_file(r, "events.jsonl", O_WRONLY | O_CREAT | O_APPEND, &err),
                  run_open_file(r, "agent.log", O_WRONLY | O_CREAT | O_APPEND, &err),
                  run_open_file(r, "status", O_WRONLY | O_CREAT | O_TRUNC, &err)};
    int pid = 0, rc = -EIO;
    /* the agent's end is written there even when the disk has filled up meanwhile */
    if (fds[3] >= 0 && fallocate(fds[3], FALLOC_FL_KEEP_SIZE, 0, 4096) < 0 && errno == ENOSPC)
        err_set(&err, -ENOSPC, "the server's disk is full");
    if (fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0 && fds[3] >= 0 && err.code != -ENOSPC) {
        struct sandbox_spawn_opts so = {.argv = argv,
                                        .cwd = r->workdir,
                                        .env = env,
                                        .stdin_fd = fds[0],
                                        .out_fd = fds[1],
                                        .err_fd = fds[2],
                                        .out_max = e->cfg.events_max_bytes,
                                        .err_max = e->cfg.agent_log_max_bytes,
                                        .status_fd = fds[3]};
        rc = sandbox_spawn(r->sbx, &so, &pid, &err);
    }
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(argv);
    free(names_env);
    agent_launch_release(&l);
    if (rc < 0) {
        run_fail(r, "cannot start the agent: %s", err.msg);
        return;
    }
    r->agent_pid = pid;
    if (store_run_set_started(e->st, r->id, r->workdir, r->branch, r->base, pid, &err) < 0)
        log_error("run start not stored run=%s err=\"%s\"", r->id, err.msg);
    run_watch_events(r);
    r->phase = PH_AGENT;
    run_set_phase(r, "agent", "starting the agent");
    log_info("run agent started run=%s sbx=%s pid=%d agent=%s model=%s warm=%s", r->id,
             sandbox_id(r->sbx), pid, r->agent, r->model, warm ? "yes" : "no");
    run_ingest(r);
}

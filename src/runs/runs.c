/* The run engine.
 *
 * A run goes: queued (waiting for a slot, or for the session's previous run) -> running:
 *   1. acquire the session's sandbox (created with the session's first run);
 *   2. with a repository not yet in the workspace, resolve its host and check every address
 *      against the egress policy, then clone it on the host (host git, host network, pinned to
 *      the addresses checked, no redirects, credentials in the environment only) into the run's
 *      directory, pack it, and unpack it in the sandbox from that archive (so nothing of the
 *      sandbox's choosing ever runs with credentials, and nothing on the host follows links the
 *      sandbox made);
 *   3. note the starting commit, mint the run's proxy token, and start the agent as a process
 *      of the sandbox with the task on stdin; the sandbox's init copies its stdout into the run's
 *      event file and its stderr into its log, each up to a cap, and records its exit status in
 *      the run's status file (no process of the sandbox holds any of these files);
 *   4. store the events as they arrive (inotify, and a periodic look), each exactly once;
 *   5. when the agent exits (the status file has its wait status), is cancelled, times out or
 *      fills its event file: diff stat and commits against the starting commit, the full diff
 *      for the run's page (cut to its limits, diff.c), outcome, token revoked.
 * Everything that must survive a restart is in the store and the run's directory.
 *
 * Each stage has a file of its own behind runs_internal.h: submit.c (run_task's checks),
 * workspace.c (1, 2), launch.c (3), ingest.c (4), finish.c (5), with their pure parts (the
 * scripts, the change parser, the redaction) in scripts.c. This file holds what moves runs from
 * one stage to the next and what outlives any one run: the queue and its scheduling, adoption at
 * start and the runs a shared store hands this node, and the public calls (runs.h); the periodic
 * look (deadlines, agents that died, waits, retention, snapshots) is tick.c's. */
#include "runs/runs.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "base/utf8.h"
#include "base/util.h"
#include "github/receiver.h"
#include "github/rest.h"
#include "runs/agent.h"
#include "runs/deliver.h"
#include "runs/diff.h"
#include "runs/runs_internal.h"
#include "store/store.h"

/* How long a waiting session whose repository has a snapshot on another node is left to that
 * node before any node with room claims it */
#define ENV_CLAIM_PREFER_MS 15000

static int end_unheld(struct runs *e, const char *run_id, const char *status, const char *reason,
                      bool queued_only, struct err *err);

/* --- bookkeeping --- */

void run_transition(struct run *r, const char *status, const char *reason)
{
    struct err err = {0};
    int rc = store_run_transition(r->e->st, r->id, status, reason, time_now_ms(), &err);
    if (rc == 0)
        log_info("run %s run=%s reason=\"%s\"", status, r->id, reason);
    else if (rc != -EALREADY) /* already final (cancelled while it wound down) */
        log_error("run transition failed run=%s status=%s err=\"%s\"", r->id, status, err.msg);
}

void run_free(struct run *r)
{
    if (r->mirror_held)
        envcache_release(&r->mirror);
    free(r->changes);
    json_decref(r->end_delivery);
    diff_free(r->diff);
    free(r->task);
    free(r->setup_arg);
    free(r->env_fp);
    free(r->env_chosen_fp);
    free(r->repository);
    free(r->title);
    run_secrets_release(r);
    if (r->reader)
        agent_reader_clear(r->reader);
    free(r->reader);
    free(r);
}

void run_unlink(struct run *r)
{
    for (struct run **pp = &r->e->runs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            return;
        }
}

struct run *runs_find(struct runs *e, const char *id)
{
    for (struct run *r = e->runs; r; r = r->next)
        if (strcmp(r->id, id) == 0)
            return r;
    return NULL;
}

void runs_notify_waiters(struct runs *e, const char *run_id)
{
    for (struct runs_waiter **pp = &e->waiters; *pp;) {
        struct runs_waiter *w = *pp;
        if (!run_id || strcmp(w->run_id, run_id) == 0) {
            *pp = w->next;
            w->cb(w->ctx);
            free(w);
        } else {
            pp = &w->next;
        }
    }
}

/* Tell run_id's waiters that want to know that it moved on, each once. A callback may end or
 * cancel any wait, so the list is looked at afresh after each. */
void runs_notify_progress(struct runs *e, const char *run_id)
{
    uint64_t round = ++e->progress_round;
    for (;;) {
        struct runs_waiter *w = e->waiters;
        while (w && !(w->progress && w->told != round && strcmp(w->run_id, run_id) == 0))
            w = w->next;
        if (!w)
            return;
        w->told = round;
        w->progress(w->ctx);
    }
}

/* Record r's phase when it differs from the one recorded, and tell the waiters. A run that
 * moves to another phase while it works (transit) also records a transition (status running,
 * the phase as its reason), so its status_reason and its history follow the phases. */
static bool record_phase(struct run *r, const char *name, char *detail, bool transit)
{
    if (r->ph_final)
        return false;
    detail[utf8_boundary(detail, strlen(detail))] = '\0'; /* whole characters only */
    bool renamed = strcmp(name, r->ph_name) != 0;
    if (!renamed && strcmp(detail, r->ph_detail) == 0 && r->steps == r->ph_steps)
        return false;
    snprintf(r->ph_name, sizeof(r->ph_name), "%s", name);
    snprintf(r->ph_detail, sizeof(r->ph_detail), "%s", detail);
    r->ph_steps = r->steps;
    struct err err = {0};
    if (store_run_set_phase(r->e->st, r->id, name, r->steps, detail, time_now_ms(), &err) < 0)
        log_error("run phase not stored run=%s err=\"%s\"", r->id, err.msg);
    if (renamed && transit && r->began)
        run_transition(r, "running", detail);
    runs_notify_progress(r->e, r->id);
    return true;
}

/* Whether it was another phase (and so recorded). */
bool run_set_phase(struct run *r, const char *name, const char *fmt, ...)
{
    char detail[RUNS_PHASE_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    return record_phase(r, name, detail, true);
}

/* Where r ended, for its final phase ("at step 3", "while cloning"): noted once, when it stops
 * working (before it collects its changes). */
void run_server_event(struct run *r, const char *type, const char *summary, json_t *raw)
{
    run_server_words(r, type, summary, NULL, raw);
}

void run_server_words(struct run *r, const char *type, const char *summary, const char *words,
                      json_t *raw)
{
    json_object_set_new(raw, "type", json_string(type));
    char *text = json_dumps(raw, JSON_COMPACT);
    json_decref(raw);
    _cleanup_free_ char *sum = xstrdup(summary);
    _cleanup_free_ char *kept = words ? xstrdup(words) : NULL;
    run_redact(r, text);
    run_redact(r, sum);
    run_redact(r, kept);
    struct store_run_event ev = {
        .time = time_now_ms(), .type = type, .summary = sum, .raw = text, .text = kept};
    struct err err = {0};
    if (store_run_add_events(r->e->st, r->id, &ev, 1, -1, &err) < 0)
        log_error("run event not stored run=%s type=%s err=\"%s\"", r->id, type, err.msg);
    free(text);
    runs_notify_progress(r->e, r->id);
}

void run_note_end(struct run *r)
{
    if (r->ended_in[0])
        return;
    if (strcmp(r->ph_name, "agent") == 0 && r->steps > 0)
        snprintf(r->ended_in, sizeof(r->ended_in), "at step %lld", (long long)r->steps);
    else if (strcmp(r->ph_name, "agent") == 0)
        snprintf(r->ended_in, sizeof(r->ended_in), "before its first step");
    else
        snprintf(r->ended_in, sizeof(r->ended_in), "while %s", r->ph_name);
    run_questions_end(r);
}

/* The final phase: how the run ended (status), and where. Recorded before the final
 * transition, so that whoever it wakes reads it. */
void run_set_final_phase(struct run *r, const char *status)
{
    char detail[RUNS_PHASE_TEXT_MAX];
    run_note_end(r);
    if (strcmp(status, "succeeded") == 0)
        snprintf(detail, sizeof(detail), "after %lld step%s", (long long)r->steps,
                 r->steps == 1 ? "" : "s");
    else
        snprintf(detail, sizeof(detail), "%s", r->ended_in);
    record_phase(r, status, detail, false);
    r->ph_final = true;
}

void runs_wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

/* The GitHub token that serves repo ("owner/name") for user_id: their own, else the operator's
 * for the repositories the operator lists; NULL when none does (malloc'd: runs_wipe_free it). */
char *runs_github_credential(struct runs *e, const char *user_id, const char *repo)
{
    if (!repo[0])
        return NULL;
    if (e->have_seal_key) {
        char *own = NULL;
        size_t n = 0;
        struct err err = {0};
        int rc = store_credential_open(e->st, e->seal_key, user_id, "github", &own, &n, &err);
        if (rc == 0)
            return own;
        if (rc != -ENOENT)
            log_warn("github credential unusable user=%s err=\"%s\"", user_id, err.msg);
    }
    if (e->github_token && proxy_repo_allowed(e->github_repos, repo))
        return xstrdup(e->github_token);
    return NULL;
}

bool run_delivering(const struct run *r)
{
    return r->pr != PR_NONE && r->github_repo[0] && r->work_branch[0];
}

int run_open_file(struct run *r, const char *name, int flags, struct err *err)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/%s", r->dir, name);
    int fd = open(path, flags | O_CLOEXEC, 0600);
    if (fd < 0)
        return err_set(err, -errno, "cannot open '%s': %s", path, strerror(errno));
    return fd;
}

/* Start queued run r: false when it cannot start after all (its user reached the limit through
 * another node, so it waits a tick; or it was cancelled through another node, and is gone). */
static bool run_begin(struct run *r)
{
    struct runs *e = r->e;
    if (!r->began) {
        struct err err = {0};
        int rc = store_run_start(e->st, r->id, r->user_id, e->cfg.max_running_user,
                                 "preparing the sandbox", time_now_ms(), &err);
        if (rc == -EBUSY) {
            r->retry_at = time_mono_ms() + RUNS_TICK_MS;
            return false;
        }
        if (rc < 0) {
            log_info("run not started run=%s err=\"%s\"", r->id, err.msg);
            if (rc == -EALREADY) { /* ended through another node while it waited here */
                run_unlink(r);
                runs_notify_waiters(e, r->id);
                run_free(r);
            } else {
                r->retry_at = time_mono_ms() + RUNS_TICK_MS;
            }
            return false;
        }
        log_info("run running run=%s reason=\"preparing the sandbox\"", r->id);
        r->deadline = time_mono_ms() + (int64_t)r->timeout_ms;
    }
    r->phase = PH_ACQUIRE;
    run_load_work_branch(r);
    run_set_phase(r, "preparing", "preparing the sandbox"); /* its start was the transition */
    r->began = true;
    struct sandbox_acquire_opts o = {
        .user_id = r->user_id, .session_id = r->session_id, .create = true, .for_run = true};
    envs_choose(r, &o);
    run_acquire(r, &o, run_on_sandbox);
    return true;
}

static bool session_busy(struct runs *e, const struct run *r)
{
    for (struct run *o = e->runs; o && o != r; o = o->next)
        if (strcmp(o->session_id, r->session_id) == 0)
            return true;
    return false;
}

/* Runs of user_id past queued (phase != PH_QUEUED), and waiting. */
void runs_user_runs(struct runs *e, const char *user_id, unsigned *active, unsigned *queued)
{
    *active = *queued = 0;
    for (struct run *o = e->runs; o; o = o->next)
        if (strcmp(o->user_id, user_id) == 0)
            (*(o->phase == PH_QUEUED ? queued : active))++;
}

/* Start queued runs while there is room, first come first served among the users that are
 * under their own limit (so one user's queue does not hold the others' back). Starting one can
 * end runs (and free them) before run_begin() returns, and can come back here: so pick afresh
 * after each start, and let a nested call only ask for another round. */
void runs_schedule(struct runs *e)
{
    if (e->scheduling) {
        e->reschedule = true;
        return;
    }
    e->scheduling = true;
    do {
        e->reschedule = false;
        unsigned active = 0;
        struct run *pick = NULL;
        int64_t now = time_mono_ms();
        for (struct run *r = e->runs; r; r = r->next) {
            if (r->phase != PH_QUEUED)
                active++;
            else if (!pick && r->retry_at <= now && !session_busy(e, r)) {
                unsigned mine, waiting;
                runs_user_runs(e, r->user_id, &mine, &waiting);
                if (mine < e->cfg.max_running_user)
                    pick = r;
            }
        }
        if (pick && active < e->cfg.max_running) {
            run_begin(pick);
            e->reschedule = true; /* started, waiting a tick, or gone: pick afresh */
        }
    } while (e->reschedule);
    e->scheduling = false;
}

/* --- adoption at start --- */

void run_queued(struct runs *e, struct store_run *row, const char *node_id)
{
    /* a session of another node's, or none's yet: its node takes the run up (take_queued) */
    if (strcmp(node_id, store_node(e->st)) == 0) {
        struct store_run got = {0};
        struct err err = {0};
        if (store_run_get(e->st, NULL, row->id, &got, &err) == 0)
            row->n = got.n;
        store_run_release(&got);
        run_alloc(e, row);
    }
    runs_schedule(e);
}

struct run *run_alloc(struct runs *e, const struct store_run *row)
{
    struct run *r = xcalloc(1, sizeof(*r));
    r->e = e;
    r->n = row->n;
    r->wd = r->wd_status = -1;
    r->exit_code = -1;
    snprintf(r->id, sizeof(r->id), "%s", row->id);
    snprintf(r->user_id, sizeof(r->user_id), "%s", row->user_id);
    snprintf(r->session_id, sizeof(r->session_id), "%s", row->session_id);
    snprintf(r->agent, sizeof(r->agent), "%s", row->agent);
    r->adapter = agent_find(row->agent); /* NULL: an agent this build does not have */
    snprintf(r->model, sizeof(r->model), "%s", row->model);
    r->task = xstrdup(row->task ? row->task : "");
    r->repository = row->repository ? xstrdup(row->repository) : NULL;
    r->title = row->title ? xstrdup(row->title) : NULL;
    r->setup_arg = row->setup ? xstrdup(row->setup) : NULL;
    r->plan_first = row->plan_first;
    r->question_timeout_s = (uint64_t)row->question_timeout_s;
    snprintf(r->rebuild, sizeof(r->rebuild), "%s", row->rebuild);
    snprintf(r->group_id, sizeof(r->group_id), "%s", row->group_id);
    snprintf(r->delivers, sizeof(r->delivers), "%s", row->delivers);
    snprintf(r->branch_req, sizeof(r->branch_req), "%s", row->branch);
    snprintf(r->ph_name, sizeof(r->ph_name), "%s", row->phase[0] ? row->phase : "queued");
    snprintf(r->ph_detail, sizeof(r->ph_detail), "%s", row->phase_detail ? row->phase_detail : "");
    r->steps = r->ph_steps = row->phase_step;
    r->pr = strcmp(row->pull_request, "draft") == 0   ? PR_DRAFT
            : strcmp(row->pull_request, "ready") == 0 ? PR_READY
                                                      : PR_NONE;
    r->timeout_ms = (uint64_t)row->timeout_ms;
    if (egress_mode_parse(row->network, &r->network) < 0)
        r->network = EGRESS_MODE_PUBLIC;
    snprintf(r->dir, sizeof(r->dir), "%s/runs/%s", e->data_dir, row->id);
    /* made by the node that holds the run (which need not be the one that took run_task) */
    if (mkdir(r->dir, 0700) < 0 && errno != EEXIST)
        snprintf(r->fail, sizeof(r->fail), "cannot create the run's directory: %s",
                 strerror(errno));
    if (r->repository) {
        struct err err = {0};
        repo_check(r->repository, true, &r->ref, &err);
        proxy_repo_of_url(e->github_base, r->repository, r->github_repo);
    }
    run_load_secrets(r);
    run_load_work_branch(r);
    struct run **pp = &e->runs;
    while (*pp)
        pp = &(*pp)->next;
    *pp = r;
    return r;
}

static void adopt(const struct store_run *row, void *ctx)
{
    struct runs *e = ctx;
    struct run *r = run_alloc(e, row);
    if (strcmp(row->status, "queued") == 0)
        return;
    r->began = true;
    int64_t elapsed = time_now_ms() - (row->started_at ? row->started_at : row->created_at);
    r->deadline = time_mono_ms() + ((int64_t)r->timeout_ms - elapsed);
    if (!row->phase[0]) /* a run from before phases were kept */
        snprintf(r->ph_name, sizeof(r->ph_name), "%s", row->agent_pid > 0 ? "agent" : "preparing");
    if (row->agent_pid <= 0) {
        /* The server went away while preparing: nothing of the agent ever ran. */
        snprintf(r->fail, sizeof(r->fail), "interrupted: the server restarted while preparing");
        r->phase = PH_PREPARE;
        return;
    }
    r->agent_pid = (int)row->agent_pid;
    r->offset = row->events_offset;
    snprintf(r->workdir, sizeof(r->workdir), "%s", row->workdir);
    snprintf(r->branch, sizeof(r->branch), "%s", row->branch);
    snprintf(r->base, sizeof(r->base), "%s", row->base_commit);
    r->prepared = true;
    r->phase = PH_AGENT;
    /* an agent that reports its thread's totals: its next step counts from those it reported
     * last (before the restart) */
    run_seed_totals(r);
}

/* --- a shared store: runs that wait for a node --- */

static void take_run(const struct store_run *row, void *ctx)
{
    struct runs *e = ctx;
    if (runs_find(e, row->id))
        return;
    run_alloc(e, row);
    log_info("run taken up run=%s session=%s user=%s", row->id, row->session_id, row->user_id);
}

/* Claim sessions waiting for a node while this one has room (a session at a time: its runs run
 * one after another), then take up every queued run of this node's sessions it does not hold
 * yet: the claimed sessions', and those a run_task on another node added to a session of this
 * one's. */
void runs_take_queued(struct runs *e)
{
    if (!e->shared)
        return;
    struct err err = {0};
    unsigned held = 0;
    for (struct run *r = e->runs; r; r = r->next)
        held++;
    char sid[64];
    for (int rc; held < e->cfg.max_running; held++) {
        int64_t prefer_before = time_now_ms() - ENV_CLAIM_PREFER_MS;
        if ((rc = store_session_claim(e->st, e->cfg.max_running_user, prefer_before, sid, &err)) <=
            0) {
            if (rc < 0)
                log_warn("sessions not claimed err=\"%s\"", err.msg);
            break;
        }
        log_info("session claimed session=%s", sid);
    }
    if (store_run_list_queued(e->st, take_run, e, &err) < 0)
        log_warn("queued runs not read err=\"%s\"", err.msg);
}

int runs_new(const struct runs_config *cfg, struct store *st, struct sandbox_manager *mgr,
             struct runs **ret, struct err *err)
{
    struct runs *e = xcalloc(1, sizeof(*e));
    e->cfg = *cfg;
    e->data_dir = xstrdup(cfg->data_dir);
    e->public_url = xstrdup(cfg->public_url ? cfg->public_url : "");
    for (size_t i = 0; i < cfg->nagents && i < RUNS_AGENTS_MAX; i++) {
        struct runs_agent_program *a = &e->agents[e->nagents++];
        snprintf(a->name, sizeof(a->name), "%s", cfg->agents[i].name);
        a->program = xstrdup(cfg->agents[i].program);
        a->dir = xstrdup(cfg->agents[i].dir);
        a->inside = xstrdup(cfg->agents[i].inside);
        size_t len = strlen(e->agents_installed);
        snprintf(e->agents_installed + len, sizeof(e->agents_installed) - len, "%s%s",
                 len ? ", " : "", a->name);
    }
    e->default_model = xstrdup(cfg->default_model ? cfg->default_model : RUNS_DEFAULT_MODEL);
    struct err model_err = {0};
    if (proxy_llm_check(cfg->llms, cfg->nllms, e->default_model, &model_err) < 0)
        log_warn("runs default-model=%s note=\"run_task without a model is refused: %s\"",
                 e->default_model, model_err.msg);
    /* runs_config_load checked the name */
    const struct agent_adapter *default_agent =
        agent_find(cfg->default_agent ? cfg->default_agent : RUNS_DEFAULT_AGENT);
    e->default_agent = default_agent->name;
    e->github_token = cfg->github_token && *cfg->github_token ? xstrdup(cfg->github_token) : NULL;
    e->github_base = xstrdup(cfg->github_base_url && *cfg->github_base_url ? cfg->github_base_url
                                                                           : "https://github.com");
    for (size_t n = strlen(e->github_base); n > 0 && e->github_base[n - 1] == '/';)
        e->github_base[--n] = '\0';
    e->github_repos = cfg->github_repos ? xstrdup(cfg->github_repos) : NULL;
    /* gh compares a remote's host without its port with GH_HOST, and names its API's host so */
    const char *host = strstr(e->github_base, "://");
    host = host ? host + 3 : e->github_base;
    size_t hl = strcspn(host, ":/");
    snprintf(e->gh_host, sizeof(e->gh_host), "%.*s", (int)(hl < 255 ? hl : 255), host);
    e->github_api = xstrdup(cfg->github_api_url && *cfg->github_api_url ? cfg->github_api_url
                                                                        : "https://api.github.com");
    if (cfg->seal_key) {
        memcpy(e->seal_key, cfg->seal_key, SEAL_KEY_BYTES);
        e->have_seal_key = true;
    }
    e->cfg.seal_key = NULL;
    e->cfg.github_api_url = e->github_api;
    e->deliverer = deliverer_new();
    e->gh = github_rest_new();
    github_rest_set_retries(deliverer_github(e->deliverer), cfg->github_retries,
                            cfg->github_retry_base_ms, GITHUB_RETRY_BUDGET_MS_DEFAULT);
    github_rest_set_retries(e->gh, cfg->github_retries, cfg->github_retry_base_ms,
                            GITHUB_RETRY_BUDGET_MS_DEFAULT);
    e->github_steerers = xstrdup(cfg->github_steerers ? cfg->github_steerers : "");
    e->cfg.github_steerers = e->github_steerers;
    if (cfg->github_poll_s)
        e->poller =
            review_poller_new(e, (uint64_t)cfg->github_poll_s * 1000,
                              cfg->github_mention ? cfg->github_mention : GITHUB_MENTION_DEFAULT);
    e->view_key = xmalloc(cfg->view_keylen ? cfg->view_keylen : 1);
    memcpy(e->view_key, cfg->view_key, cfg->view_keylen);
    e->cfg.data_dir = e->data_dir;
    e->cfg.public_url = e->public_url;
    e->cfg.agents = e->agents;
    e->cfg.nagents = e->nagents;
    e->cfg.default_model = e->default_model;
    e->cfg.default_agent = e->default_agent;
    e->cfg.github_token = e->github_token;
    e->cfg.github_base_url = e->github_base;
    e->cfg.github_repos = e->github_repos;
    e->cfg.view_key = e->view_key;
    e->view = (struct runs_view){e->view_key, cfg->view_keylen, e->public_url, st};
    e->cfg.fetch_allow = NULL; /* parsed below; the text is not kept */
    e->st = st;
    e->mgr = mgr;
    e->shared = store_is_shared(st);
    if (egress_rules_parse(cfg->fetch_allow, &e->fetch_rules, err) < 0 ||
        proxy_repos_check(e->github_repos, err) < 0) {
        runs_free(e);
        return -EINVAL;
    }
    /* the default agent must speak to the default model's provider */
    if (agent_model_check(default_agent, cfg->llms, cfg->nllms, e->default_model, &model_err) < 0) {
        err_set(err, -EINVAL, "RUN_DEFAULT_AGENT and RUN_DEFAULT_MODEL do not go together: %s",
                model_err.msg);
        runs_free(e);
        return -EINVAL;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/runs", e->data_dir);
    if (mkdir(path, 0700) < 0 && errno != EEXIST) {
        int r = err_set(err, -errno, "cannot create '%s': %s", path, strerror(errno));
        runs_free(e);
        return r;
    }
    e->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (e->inotify_fd < 0) {
        int r = err_set(err, -errno, "inotify: %s", strerror(errno));
        runs_free(e);
        return r;
    }
    e->inotify_sock = h2o_evloop_socket_create(loop_get(), e->inotify_fd, 0);
    e->inotify_sock->data = e;
    h2o_socket_read_start(e->inotify_sock, runs_on_inotify);
    int r = store_run_list_active(st, adopt, e, err);
    if (r < 0) {
        runs_free(e);
        return r;
    }
    /* Runs that were past queued: re-acquire their sandboxes (adopted agents resume ingest). A
     * run can end, and be freed, within its acquire; nothing starts meanwhile, so the next one
     * in the list stays. */
    e->scheduling = true;
    for (struct run *x = e->runs, *next; x; x = next) {
        next = x->next;
        if (x->phase == PH_QUEUED)
            continue;
        struct sandbox_acquire_opts o = {.user_id = x->user_id, .session_id = x->session_id};
        if (x->fail[0])
            x->phase = PH_ACQUIRE;
        run_acquire(x, &o, x->fail[0] ? run_on_sandbox_failed : run_on_sandbox);
    }
    e->scheduling = false;
    runs_tick_start(e);
    runs_take_queued(e);
    runs_schedule(e);
    *ret = e;
    return 0;
}

void runs_free(struct runs *e)
{
    if (!e)
        return;
    loop_timer_stop(&e->tick);
    runs_pool_check(e, true);
    deliverer_free(e->deliverer); /* before the runs its callbacks would end */
    review_poller_free(e->poller);
    review_release(e);
    github_rest_free(e->gh);
    while (e->runs) {
        struct run *r = e->runs;
        e->runs = r->next;
        if (r->sw)
            sandbox_acquire_cancel(r->sw);
        if (r->clone_active) {
            kill(r->clone.pid, SIGKILL);
            proc_watch_abandon(&r->clone);
        }
        egress_lookup_cancel(r->lookup);
        if (r->start_armed)
            loop_timer_stop(&r->start);
        /* A preparation command still running is left to finish on its own: the loop has
         * stopped, so its callback never comes. */
        run_free(r);
    }
    runs_asks_release(e);
    while (e->waiters) {
        struct runs_waiter *w = e->waiters;
        e->waiters = w->next;
        free(w);
    }
    if (e->inotify_sock) {
        h2o_socket_read_stop(e->inotify_sock);
        h2o_socket_close(e->inotify_sock);
    } else if (e->inotify_fd > 0) {
        close(e->inotify_fd);
    }
    free(e->data_dir);
    free(e->public_url);
    runs_agents_release(e->agents, e->nagents);
    free(e->default_model);
    if (e->github_token)
        explicit_bzero(e->github_token, strlen(e->github_token));
    free(e->github_token);
    free(e->github_base);
    free(e->github_repos);
    free(e->github_steerers);
    free(e->github_api);
    explicit_bzero(e->seal_key, sizeof(e->seal_key));
    if (e->view_key)
        explicit_bzero(e->view_key, e->cfg.view_keylen);
    free(e->view_key);
    free(e);
}

const char *runs_agents_installed(const struct runs *e)
{
    return e->agents_installed;
}

const char *runs_agent_inside(const struct runs *e, const char *name)
{
    for (size_t i = 0; i < e->nagents; i++)
        if (strcmp(e->agents[i].name, name) == 0)
            return e->agents[i].inside;
    return NULL;
}

void runs_web_url(const struct runs *e, bool session, const char *id, char *out, size_t cap)
{
    view_url(&e->view, session, id, out, cap);
}

void runs_web_url_gen(const struct runs *e, const char *run_id, int64_t gen, char *out, size_t cap)
{
    view_url_gen(&e->view, run_id, gen, out, cap);
}

void runs_page_url(const struct runs *e, bool session, const char *id, char *out, size_t cap)
{
    view_page_url(&e->view, session, id, out, cap);
}

int runs_view_token(const struct runs *e, bool session, const char *id,
                    char out[RUNS_VIEW_TOKEN_MAX], struct err *err)
{
    return view_token(&e->view, session, id, out, err);
}

bool runs_view_check(const struct runs *e, bool session, const char *id, const char *token)
{
    return view_check(&e->view, session, id, token);
}

void runs_group_url(const struct runs *e, const char *group_id, char *out, size_t cap)
{
    view_group_url(&e->view, group_id, out, cap);
}

bool runs_group_view_check(const struct runs *e, const char *group_id, const char *token)
{
    return view_group_check(&e->view, group_id, token);
}

static bool session_run(void *ctx, const char *session_id, char run_id[64], enum egress_mode *mode)
{
    return runs_session_run(ctx, session_id, run_id, mode);
}

void runs_network_set_runs(struct runs_network *n, struct runs *e)
{
    struct runs *old = runs_network_set_session(n, e ? session_run : NULL, e);
    if (old)
        old->network = NULL;
    if (e)
        e->network = n;
}

struct runs_network *runs_network_of(const struct runs *e)
{
    return e->network;
}

struct store *runs_store_of(const struct runs *e)
{
    return e->st;
}

const struct runs_config *runs_config_of(const struct runs *e)
{
    return &e->cfg;
}

bool runs_session_run(const struct runs *e, const char *session_id, char run_id[64],
                      enum egress_mode *mode)
{
    for (const struct run *r = e->runs; r; r = r->next)
        if (r->phase != PH_QUEUED && strcmp(r->session_id, session_id) == 0) {
            snprintf(run_id, 64, "%s", r->id);
            *mode = r->network;
            return true;
        }
    return false;
}

/* Stop a run whose end is decided (cancelled): whatever it is doing, it winds down and ends. */
static void stop_run(struct run *r)
{
    switch (r->phase) {
    case PH_QUEUED: run_record_end(r, NULL, NULL); break;
    case PH_ACQUIRE:
        if (r->sw) {
            sandbox_acquire_cancel(r->sw);
            r->sw = NULL;
        }
        run_record_end(r, NULL, NULL);
        break;
    case PH_FINISHING: break;
    default: run_finish(r);
    }
}

void runs_node_back(struct runs *e)
{
    /* the ids first: ending one can start or end others */
    struct buf ids;
    buf_init(&ids, 0);
    for (struct run *r = e->runs; r; r = r->next) {
        struct err err = {0};
        _cleanup_(store_run_release) struct store_run row = {0};
        if (store_run_get(e->st, NULL, r->id, &row, &err) == 0 &&
            strcmp(row.status, "queued") != 0 && strcmp(row.status, "running") != 0) {
            log_warn("run dropped run=%s status=%s note=\"it was ended through another node while "
                     "this one was cut off; its agent is stopped\"",
                     r->id, row.status);
            buf_append(&ids, r->id, strlen(r->id) + 1);
        }
    }
    for (size_t i = 0; i < ids.len; i += strlen(ids.data + i) + 1) {
        struct run *r = runs_find(e, ids.data + i);
        if (!r || r->dropped)
            continue;
        r->dropped = r->cancelled = r->ph_final = true;
        stop_run(r);
    }
    buf_release(&ids);
}

int runs_cancel(struct runs *e, const char *user_id, const char *run_id, struct err *err)
{
    struct store_run row = {0};
    int r = store_run_get(e->st, user_id, run_id, &row, err);
    bool ended = r == 0 && strcmp(row.status, "queued") != 0 && strcmp(row.status, "running") != 0;
    char status[STORE_RUN_STATUS_MAX];
    snprintf(status, sizeof(status), "%s", row.status);
    store_run_release(&row);
    if (r < 0)
        return r;
    if (ended)
        return err_set(err, -EALREADY, "run '%s' has already ended (%s)", run_id, status);
    struct run *run = runs_find(e, run_id);
    if (!run && e->shared && strcmp(status, "queued") == 0) {
        /* waiting for a node to claim it: cancelled in the store, unless one just started it */
        if ((r = end_unheld(e, run_id, "cancelled", "cancelled by the user", true, err)) ==
            -EALREADY)
            return err_set(err, -EAGAIN,
                           "run '%s' started on another node just now; call cancel_run again",
                           run_id);
        return r;
    }
    if (!run)
        return err_set(err, -EALREADY, "run '%s' is not active", run_id);
    run->cancelled = true;
    log_info("run cancel requested run=%s", run_id);
    /* The status is final now; the agent is stopped and the changes collected after. */
    run_set_final_phase(run, "cancelled");
    run_transition(run, "cancelled", "cancelled by the user");
    stop_run(run);
    return 0;
}

bool runs_active_elsewhere(struct runs *e, const char *run_id)
{
    if (runs_find(e, run_id))
        return true; /* taken up here since: its end tells its waiters */
    struct err err = {0};
    _cleanup_(store_run_release) struct store_run row = {0};
    if (store_run_get(e->st, NULL, run_id, &row, &err) < 0)
        return false;
    return strcmp(row.status, "queued") == 0 || strcmp(row.status, "running") == 0;
}

struct runs_waiter *runs_wait(struct runs *e, const char *run_id, uint64_t wait_ms,
                              void (*cb)(void *ctx), void *ctx)
{
    bool here = runs_find(e, run_id) != NULL;
    if (wait_ms == 0 || (!here && !(e->shared && runs_active_elsewhere(e, run_id)))) {
        cb(ctx);
        return NULL;
    }
    struct runs_waiter *w = xcalloc(1, sizeof(*w));
    w->elsewhere = !here;
    w->e = e;
    snprintf(w->run_id, sizeof(w->run_id), "%s", run_id);
    w->deadline = time_mono_ms() + (int64_t)wait_ms;
    w->cb = cb;
    w->ctx = ctx;
    w->next = e->waiters;
    e->waiters = w;
    return w;
}

void runs_wait_progress(struct runs_waiter *w, void (*progress)(void *ctx))
{
    w->progress = progress;
}

void runs_wait_cancel(struct runs_waiter *w)
{
    for (struct runs_waiter **pp = &w->e->waiters; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            free(w);
            return;
        }
}

/* End run_id, which no engine here holds, with status and reason in the store alone: only if
 * it is still queued (queued_only), else if it has not ended. */
static int end_unheld(struct runs *e, const char *run_id, const char *status, const char *reason,
                      bool queued_only, struct err *err)
{
    int64_t now = time_now_ms();
    struct store_run row = {0};
    char detail[RUNS_PHASE_TEXT_MAX] = "";
    if (store_run_get(e->st, NULL, run_id, &row, err) == 0)
        snprintf(detail, sizeof(detail), "while %s", row.phase[0] ? row.phase : "queued");
    int64_t step = row.phase_step;
    store_run_release(&row);
    /* the phase before the status, as for every run that ends: whoever the end wakes reads it;
     * but a run that may start meanwhile elsewhere keeps its phase unless it did end here */
    int r = 0;
    if (queued_only)
        r = store_run_end_queued(e->st, run_id, status, reason, now, err);
    if (r == 0)
        r = store_run_set_phase(e->st, run_id, status, step, detail, now, err);
    if (r == 0 && !queued_only)
        r = store_run_transition(e->st, run_id, status, reason, now, err);
    if (r < 0)
        return r;
    if (store_proxy_token_revoke_run(e->st, run_id, err) < 0)
        log_error("run tokens not revoked run=%s err=\"%s\"", run_id, err->msg);
    log_info("run %s run=%s reason=\"%s\"", status, run_id, reason);
    runs_notify_waiters(e, run_id);
    return 0;
}

static void fail_lost(const char *run_id, void *ctx)
{
    struct runs *e = ctx;
    struct err err = {0};
    /* -EALREADY: ended meanwhile (the sweep and a take-over may both come to it) */
    if (end_unheld(e, run_id, "failed", RUNS_NODE_LOST, false, &err) < 0 && err.code != -EALREADY)
        log_error("run not ended run=%s err=\"%s\"", run_id, err.msg);
}

void runs_node_lost(struct runs *e, const char *node_id)
{
    struct err err = {0};
    if (store_run_list_active_on(e->st, node_id, NULL, fail_lost, e, &err) < 0)
        log_error("runs of lost node not ended node=%s err=\"%s\"", node_id, err.msg);
}

void runs_session_taken(struct runs *e, const char *session_id)
{
    struct err err = {0};
    if (store_run_list_active_on(e->st, NULL, session_id, fail_lost, e, &err) < 0)
        log_error("runs of taken-over session not ended session=%s err=\"%s\"", session_id,
                  err.msg);
}

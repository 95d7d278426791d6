/* run_task's side of the engine: a request checked against what this server offers and allows
 * (the agent, the model and its provider, the repository and where it may be fetched from, the
 * branch, the network mode within the user's bound, the timeout, the user's queue, the session's
 * agent and its delivery branch, the pull request a credential can serve), then the session made
 * when new and the run written queued. It returns at once: the node that holds the session takes
 * the run up (runs.c).
 *
 * The rule of this file: every refusal is decided here, before anything is written, with a
 * message that says what to ask for instead; nothing here waits on the network or the sandbox. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "store/store.h"

struct last_model {
    const char *agent;
    char *out;
    bool seen;
};

static void on_last_run(const struct store_run *row, void *ctx)
{
    struct last_model *m = ctx;
    if (!m->seen && strcmp(row->agent, m->agent) == 0)
        snprintf(m->out, sizeof(row->model), "%s", row->model);
    m->seen = true;
}

/* The model of session's newest run, into out, when that run was agent's */
static void session_last_model(struct runs *e, const char *user_id, const char *session,
                               const char *agent, char *out)
{
    struct last_model m = {.agent = agent, .out = out};
    struct store_run_list_opts o = {.user_id = user_id, .session_id = session, .limit = 1};
    struct err err = {0};
    bool more;
    store_run_list(e->st, &o, on_last_run, &m, &more, &err);
}

int runs_submit(struct runs *e, const struct runs_submit *s, char run_id[64], char session_id[64],
                struct err *err)
{
    const char *agent = s->agent && *s->agent ? s->agent : e->default_agent;
    if (!agent_find(agent))
        return err_set(err, -EINVAL, "agent '%s' is not available; agents: %s", agent,
                       agent_names());
    /* a session's later run without an agent named is its agent's */
    struct store_session known = {0};
    if ((!s->agent || !*s->agent) && s->session_id && *s->session_id &&
        store_session_get(e->st, s->user_id, s->session_id, &known, err) == 0 &&
        agent_find(known.agent))
        agent = agent_find(known.agent)->name;
    /* and of the model its last run used, when that was the same agent's */
    char session_model[sizeof(((struct store_run *)0)->model)] = "";
    if ((!s->model || !*s->model) && known.id[0])
        session_last_model(e, s->user_id, known.id, agent, session_model);
    const char *model = s->model && *s->model ? s->model
                        : session_model[0]    ? session_model
                                              : e->default_model;
    if (proxy_llm_check(e->cfg.llms, e->cfg.nllms, model, err) < 0)
        return model == e->default_model
                   ? err_wrap(err, "no model was given, so the server's default "
                                   "(RUN_DEFAULT_MODEL) was tried")
                   : -EINVAL;
    if (agent_model_check(agent_find(agent), e->cfg.llms, e->cfg.nllms, model, err) < 0)
        return -EINVAL;
    if (!scripts_model_valid(model))
        return err_set(err, -EINVAL,
                       "model '%.120s' has characters a model name does not (letters, digits and "
                       "/._:-@, at most 120 bytes)",
                       model);
    struct repo_ref ref;
    if (s->repository && repo_check(s->repository, e->cfg.allow_local_repos, &ref, err) < 0)
        return -EINVAL;
    /* an address written out is checked now; a name when the run resolves it */
    struct egress_addr literal;
    bool by_rule;
    if (s->repository && !ref.local && egress_addr_parse(ref.host, &literal) == 0) {
        if (egress_check(&e->fetch_rules, ref.host, &literal, 1, ref.port, &by_rule, err) < 0) {
            err_wrap(err, "cannot clone '%s'", s->repository);
            return -EINVAL;
        }
        if (ref.http && !by_rule)
            return err_set(err, -EINVAL,
                           "cannot clone '%s': http:// is fetched only from hosts the operator "
                           "allows with FETCH_ALLOW; use https://",
                           s->repository);
    }
    if (s->setup && strlen(s->setup) > RUNS_SETUP_MAX)
        return err_set(err, -EINVAL,
                       "setup is at most %d bytes; put a longer one in the "
                       "repository's .sandbox-mcp/setup.sh",
                       RUNS_SETUP_MAX);
    if (s->branch && !repo_branch_valid(s->branch))
        return err_set(err, -EINVAL, "branch '%s' is not a valid branch name", s->branch);
    if (s->branch && !s->repository)
        return err_set(err, -EINVAL, "branch needs a repository");
    enum egress_mode bound = runs_network_bound(e->cfg.network, e->st, s->user_id), network = bound;
    if (s->network) {
        if (egress_mode_parse(s->network, &network) < 0)
            return err_set(err, -EINVAL, "network '%s' is not one of none, allowlist, public",
                           s->network);
        if (egress_mode_narrow(network, bound) != network)
            return err_set(err, -EINVAL,
                           "network '%s' is wider than this server allows you ('%s'); ask for "
                           "'%s' or less",
                           s->network, egress_mode_name(bound), egress_mode_name(bound));
    }
    uint64_t timeout = s->timeout_ms ? s->timeout_ms : e->cfg.timeout_ms;
    if (timeout > e->cfg.timeout_max_ms)
        return err_set(err, -EINVAL, "timeout_minutes is at most %llu on this server",
                       (unsigned long long)(e->cfg.timeout_max_ms / 60000));
    unsigned mine, waiting;
    runs_user_runs(e, s->user_id, &mine, &waiting);
    /* Shared by nodes: every node's runs count. A new session stays on this node when it has
     * room for the run now; else it waits for a node with room to claim it. */
    bool keep = true;
    if (e->shared) {
        int64_t running, queued;
        int r = store_user_runs(e->st, s->user_id, &running, &queued, err);
        if (r < 0)
            return r;
        waiting = (unsigned)queued;
        unsigned held = 0;
        for (const struct run *o = e->runs; o; o = o->next)
            held++;
        keep = held < e->cfg.max_running && running < (int64_t)e->cfg.max_running_user;
        /* a new session whose repository has a snapshot on another node and none here is
         * left for that node to claim (store_session_claim), so that it starts on it */
        bool here = false, elsewhere = false;
        if (keep && !(s->session_id && *s->session_id) && s->repository && envs_enabled(e) &&
            store_env_held(e->st, s->user_id, s->repository, &here, &elsewhere, err) < 0)
            return err->code;
        if (elsewhere && !here)
            keep = false;
    }
    if (waiting >= e->cfg.max_queued_user)
        return err_set(err, -EBUSY,
                       "you have %u runs waiting to start, the most one user may have on this "
                       "server; wait for some to start (list_runs) or cancel one (cancel_run)",
                       waiting);
    int64_t now = time_now_ms();
    struct store_session ses = {0};
    if (s->session_id && *s->session_id) {
        int r = store_session_get(e->st, s->user_id, s->session_id, &ses, err);
        if (r < 0)
            return r;
        if (ses.cleaned_at)
            return err_set(err, -ENOENT,
                           "session '%s' has expired (its workspace was removed); start a new one",
                           s->session_id);
    }
    /* A later run of a session without a repository works where the session's last one did:
     * the agent's conversation belongs to that directory. That is the repository of the
     * session's newest run still to end, else the one its workspace holds (recorded once it was
     * unpacked there: a repository that could not be cloned is not the session's). */
    const char *repository = s->repository;
    _cleanup_free_ char *pending = NULL;
    if (!repository && ses.id[0]) {
        int r = store_session_run_repository(e->st, ses.id, &pending, err);
        if (r < 0)
            return r;
        repository = pending;
    }
    if (!repository && ses.repository[0])
        repository = ses.repository;
    /* Delivery: a pull request on a GitHub repository a credential serves; by default a draft
     * when one can be opened, else none (get_result says why). */
    const char *pr = "none";
    char gh[PROXY_REPO_MAX] = "";
    if (repository)
        proxy_repo_of_url(e->github_base, repository, gh);
    if (s->pull_request && strcmp(s->pull_request, "none") != 0 &&
        strcmp(s->pull_request, "draft") != 0 && strcmp(s->pull_request, "ready") != 0)
        return err_set(err, -EINVAL, "pull_request '%s' is not one of none, draft, ready",
                       s->pull_request);
    if (s->pull_request && strcmp(s->pull_request, "none") != 0) {
        if (!gh[0])
            return err_set(err, -EINVAL,
                           "pull_request '%s' needs a repository on GitHub (%s/OWNER/NAME)%s",
                           s->pull_request, e->github_base,
                           repository ? "" : "; this run names no repository");
        char *cred = runs_github_credential(e, s->user_id, gh);
        bool served = cred != NULL;
        runs_wipe_free(cred);
        if (!served)
            return err_set(err, -EINVAL,
                           "pull_request '%s' needs a GitHub credential for %s: set yours with "
                           "`sandbox-mcp user credential set NAME github` or on the account page",
                           s->pull_request, gh);
        pr = s->pull_request;
    } else if (!s->pull_request && gh[0]) {
        char *cred = runs_github_credential(e, s->user_id, gh);
        pr = cred ? "draft" : "none";
        runs_wipe_free(cred);
    }
    /* a new session on a repository whose user's settings fix failing CI does so by default */
    enum runs_fix_ci fix_ci = s->fix_ci;
    char slug[STORE_REPO_NAME_MAX + 1];
    struct store_repo_setting rs = {0};
    struct err serr = {0};
    if (fix_ci == RUNS_FIX_CI_KEEP && !ses.id[0] && strcmp(pr, "none") != 0 && repository &&
        runs_repo_slug(repository, slug, sizeof(slug)) &&
        store_repo_setting_get(e->st, s->user_id, slug, &rs, &serr) == 0 && rs.fix_ci)
        fix_ci = RUNS_FIX_CI_ON;
    store_repo_setting_release(&rs);
    if (s->fix_ci == RUNS_FIX_CI_ON && strcmp(pr, "none") == 0)
        return err_set(err, -EINVAL,
                       "fix_ci needs a pull request: a GitHub repository your credential serves, "
                       "and pull_request draft or ready");
    if (ses.work_branch[0] && strcmp(pr, "none") != 0 && s->repository &&
        strcmp(s->repository, ses.repository) != 0)
        return err_set(err, -EINVAL,
                       "session '%s' delivers to branch '%s' of %s; start a new session for "
                       "another repository",
                       ses.id, ses.work_branch, ses.repository);
    if (ses.work_branch[0] && ses.base_branch[0] && strcmp(pr, "none") != 0 && s->branch &&
        strcmp(s->branch, ses.base_branch) != 0)
        return err_set(err, -EINVAL,
                       "session '%s' delivers to branch '%s', made from '%s'; start a new "
                       "session to work from '%s'",
                       ses.id, ses.work_branch, ses.base_branch, s->branch);
    if (!ses.id[0]) {
        id_new("ses", ses.id);
        snprintf(ses.user_id, sizeof(ses.user_id), "%s", s->user_id);
        snprintf(ses.agent, sizeof(ses.agent), "%s", agent);
        snprintf(ses.node_id, sizeof(ses.node_id), "%s",
                 keep ? store_node(e->st) : STORE_SESSION_UNCLAIMED);
        ses.created_at = ses.last_run_at = now;
        int r = store_session_create(e->st, &ses, err);
        if (r < 0)
            return r;
    }
    struct store_run row = {0};
    id_new("run", row.id);
    snprintf(row.user_id, sizeof(row.user_id), "%s", s->user_id);
    snprintf(row.session_id, sizeof(row.session_id), "%s", ses.id);
    snprintf(row.model, sizeof(row.model), "%s", model);
    snprintf(row.agent, sizeof(row.agent), "%s", agent);
    snprintf(row.branch, sizeof(row.branch), "%s", s->branch ? s->branch : "");
    row.task = (char *)s->task;
    row.title = (char *)s->title;
    row.repository = (char *)repository;
    row.setup = (char *)s->setup;
    row.origin = (char *)s->origin;
    row.plan_first = s->plan_first;
    row.question_timeout_s = (int64_t)s->question_timeout_s;
    row.status_reason = (char *)"accepted";
    row.timeout_ms = (int64_t)timeout;
    row.created_at = now;
    snprintf(row.network, sizeof(row.network), "%s", egress_mode_name(network));
    snprintf(row.pull_request, sizeof(row.pull_request), "%s", pr);
    snprintf(row.group_id, sizeof(row.group_id), "%s", s->group_id ? s->group_id : "");
    int r = store_run_insert(e->st, &row, err);
    if (r < 0)
        return r;
    if (fix_ci != RUNS_FIX_CI_KEEP &&
        store_session_set_fix_ci(e->st, ses.id, fix_ci == RUNS_FIX_CI_ON, err) < 0)
        log_error("fix_ci not recorded session=%s err=\"%s\"", ses.id, err->msg);
    log_info("run queued run=%s session=%s user=%s agent=%s model=%s repository=%s network=%s "
             "pull_request=%s",
             row.id, ses.id, s->user_id, agent, model, s->repository ? s->repository : "-",
             row.network, pr);
    snprintf(run_id, 64, "%s", row.id);
    snprintf(session_id, 64, "%s", ses.id);
    run_queued(e, &row, ses.node_id);
    return 0;
}

int runs_submit_attempts(struct runs *e, const struct runs_submit *s, unsigned n,
                         const struct runs_variant *variants, size_t nvariants, char group_id[64],
                         char run_ids[][64], char session_ids[][64], struct err *err)
{
    if (n < 1 || n > RUNS_ATTEMPTS_MAX)
        return err_set(err, -EINVAL, "attempts is 1 to %d", RUNS_ATTEMPTS_MAX);
    if (nvariants > RUNS_ATTEMPTS_MAX)
        return err_set(err, -EINVAL, "at most %d agents and models to spread attempts over",
                       RUNS_ATTEMPTS_MAX);
    if (s->session_id && *s->session_id)
        return err_set(err, -EINVAL,
                       "attempts start sessions of their own: leave out session_id (continue "
                       "an attempt later by its session_id)");
    /* what can be told of each variant before any is queued */
    for (size_t i = 0; i < nvariants; i++) {
        const char *agent = variants[i].agent ? variants[i].agent
                            : s->agent        ? s->agent
                                              : e->default_agent;
        const char *model = variants[i].model ? variants[i].model
                            : s->model        ? s->model
                                              : e->default_model;
        const struct agent_adapter *ad = agent_find(agent);
        if (!ad)
            return err_set(err, -EINVAL,
                           "attempts[%zu]: agent '%.40s' is not available; agents: %s", i, agent,
                           agent_names());
        if (proxy_llm_check(e->cfg.llms, e->cfg.nllms, model, err) < 0 ||
            agent_model_check(ad, e->cfg.llms, e->cfg.nllms, model, err) < 0)
            return err_wrap(err, "attempts[%zu]", i);
    }
    id_new("grp", group_id);
    for (unsigned i = 0; i < n; i++) {
        struct runs_submit one = *s;
        one.group_id = group_id;
        if (nvariants) {
            const struct runs_variant *v = &variants[i % nvariants];
            one.agent = v->agent ? v->agent : s->agent;
            one.model = v->model ? v->model : s->model;
        }
        int r = runs_submit(e, &one, run_ids[i], session_ids[i], err);
        if (r < 0) {
            /* none of them, then: those queued already go, before any has started */
            for (unsigned k = 0; k < i; k++) {
                struct err ignored = {0};
                runs_cancel(e, s->user_id, run_ids[k], &ignored);
            }
            return n > 1 ? err_wrap(err, "attempt %u of %u", i + 1, n) : r;
        }
    }
    log_info("run attempts queued group=%s user=%s attempts=%u", group_id, s->user_id, n);
    return 0;
}

#pragma once
/* Runs: coding tasks handed to an agent that works in a session's sandbox while the client is
 * gone. The engine queues runs (a maximum run at once, one at a time per session), prepares the
 * sandbox and repository, starts the agent as a process of the sandbox (it outlives this server),
 * stores the agent's events as they arrive in its event file, and records the outcome. State
 * lives in the store and the run's directory, so a restarted server re-adopts what is running.
 * With a store shared by nodes, a new session whose node has no room waits in the store until a
 * node with room claims it, and a user's limits count every node's runs (docs/SCALING.md).
 * Main loop thread only. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"
#include "egress/egress.h"
#include "runs/envcache.h"

#define RUNS_DEFAULT_MODEL "anthropic/claude-sonnet-4-5"
#define RUNS_DEFAULT_AGENT "opencode" /* without RUN_DEFAULT_AGENT */

struct config;
struct runs;
struct sandbox_manager;
struct store;
struct proxy_llm;

#define RUNS_AGENTS_MAX 4 /* coding agents a server knows */

/* A coding agent's program as the server found it on the host */
struct runs_agent_program {
    char name[16]; /* its adapter's: "opencode", "claude-code", "codex" */
    char *program; /* the program's real path */
    char *dir;     /* mounted read-only into every sandbox at /opt/agents/<name>: the program's
                      directory, or its package's platform directory */
    char *inside;  /* the program's path inside a sandbox */
};

struct runs_config {
    const char *data_dir;   /* runs/<id>/ below it */
    const char *public_url; /* base of web URLs */
    /* The coding agents' programs found on the host (runs_agents_find), nagents of them */
    const struct runs_agent_program *agents;
    size_t nagents;
    const char *default_model;   /* provider/model */
    const char *default_agent;   /* run_task's agent when it names none (RUN_DEFAULT_AGENT) */
    const char *github_token;    /* for host-side clones of the repositories below, or NULL */
    const char *github_base_url; /* GitHub's address (GITHUB_BASE_URL), NULL for github.com */
    const char *github_repos;    /* GITHUB_REPOS: repositories the token serves (proxy.h) */
    const char *fetch_allow;     /* FETCH_ALLOW: what clones may reach beyond public addresses */
    bool allow_local_repos;      /* file:// and absolute paths (tests, single-user setups) */
    uint64_t timeout_ms;         /* default per-run timeout */
    uint64_t timeout_max_ms;     /* the largest a client may ask for */
    unsigned max_running;        /* runs at once; the rest wait in order */
    unsigned max_running_user;   /* runs of one user at once (the rest of theirs wait) */
    unsigned max_queued_user;    /* runs one user may have waiting; more are refused */
    uint64_t retention_ms;       /* workspaces of sessions idle this long are removed */
    /* What an agent may write to the host: its event file (stdout) ends the run when it reaches
     * events_max_bytes; its log (stderr) keeps agent_log_max_bytes and drops the rest. */
    uint64_t events_max_bytes, agent_log_max_bytes;
    /* Keep each session's OpenCode server running this long after its last run, so the next run
     * of the session is handed to it instead of starting a process (0: a process per run). */
    unsigned agent_warm_s;
    unsigned ci_fix_attempts; /* fix runs per pull request head lineage (CI_FIX_ATTEMPTS) */
    /* the server's GitHub calls refused for now are made again this many times, the first after
     * this long when GitHub names no wait (GITHUB_RETRIES, GITHUB_RETRY_BASE_MS) */
    unsigned github_retries;
    uint64_t github_retry_base_ms;
    /* how long an agent's question waits for its answer by default (RUN_QUESTION_TIMEOUT_MINUTES)
     */
    uint64_t question_timeout_s;
    /* How often the open pull requests of active sessions are read, for a server GitHub cannot
     * reach (GITHUB_POLL_SECONDS; by default every 180 s without GITHUB_WEBHOOK_SECRET, else
     * never); 0: never */
    unsigned github_poll_s;
    const char *github_mention; /* what addresses the server in a comment (GITHUB_MENTION) */
    /* ids kept of what was acted on, with the webhook's deliveries (GITHUB_DELIVERIES_MAX) */
    uint64_t github_kept;
    /* With agent_warm_s: how many of the warm pool's sandboxes get an agent booted ahead of any
     * run, on the default model (runs_pool_prepare) */
    unsigned agent_pool;
    /* With agent_warm_s and a warm pool: how many of the environment snapshots runs started on or
     * saved most recently have a pooled sandbox kept on them, its agent readied (at most 8) */
    unsigned env_pool;
    unsigned setup_timeout_s; /* a run's setup is stopped, and failed, after this long */
    /* The node's caches (ENV_CACHE_*): repository mirrors a clone fetches into (envcache.h), and
     * environment snapshots (envs.c: its bytes, one user's, their age, from cache) */
    struct envcache_config cache;
    uint64_t env_cache_bytes, env_user_bytes, env_max_age_ms;
    bool env_share_public; /* a public repository's snapshot serves every user */
    const void *jwt_key;   /* signs the runs' proxy tokens */
    size_t jwt_keylen;
    const void *view_key; /* signs view tokens; a key of its own, not jwt_key */
    size_t view_keylen;
    const struct egress_policy *network; /* the deployment's sandbox network (borrowed) */
    /* Opens users' own credentials (store_credential_open); NULL: only the operator's token */
    const unsigned char *seal_key;
    const char *github_api_url; /* GitHub's REST API, for pull requests */
    /* GitHub logins that may steer every session from its pull request (GITHUB_STEERERS,
     * comma-separated), besides the login that opened it; NULL: none */
    const char *github_steerers;
    /* The LLM providers a run's model may name (proxy_llms; borrowed: must outlive the engine).
     * run_task refuses a model whose provider is not among them or has no key. */
    const struct proxy_llm *llms;
    size_t nllms;
};

/* Fill rc from the configuration table (RUN_*, RUNS_*, GITHUB_*, FETCH_ALLOW: minutes and days,
 * as operators write them); the keys, the network, the LLMs and the agents are left for the
 * caller. Strings point into cfg, which must outlive rc. Returns 0, or -EINVAL with err naming
 * the key (runs/config.c). */
int runs_config_load(const struct config *cfg, struct runs_config *rc, struct err *err);
/* Each coding agent's program: its setting (OPENCODE_BIN, CLAUDE_CODE_BIN, CODEX_BIN), else next
 * to this binary, else where `make deps` installs it in the source tree
 * (build/<variant>/../../src/runs/<agent>). Fills out with those found (release them with
 * runs_agents_release) and returns how many; a setting that names no program finds none. */
size_t runs_agents_find(const struct config *cfg, struct runs_agent_program out[RUNS_AGENTS_MAX]);
void runs_agents_release(struct runs_agent_program *a, size_t n);

/* Create the engine and adopt the runs the store has as queued or running. Strings and keys in
 * cfg are copied (jwt_key excepted: it must outlive the engine). -EINVAL for a malformed
 * FETCH_ALLOW or GITHUB_REPOS. mgr is needed (runs cannot work without sandboxes). */
int runs_new(const struct runs_config *cfg, struct store *st, struct sandbox_manager *mgr,
             struct runs **ret, struct err *err);
/* Stop watching; agents keep running (the next server adopts them). */
void runs_free(struct runs *e);

/* The run whose agent is running in sandbox sandbox_id for user_id, and what its token grants,
 * into *out: true when there is one (proxy_run_lookup_fn, for the tokens of warm agents). ctx is
 * the engine. */
struct proxy_run_grant;
bool runs_sandbox_run(void *ctx, const char *sandbox_id, const char *user_id,
                      struct proxy_run_grant *out);

/* Start a run's agent in a pooled sandbox ahead of any run (sandbox_pool_prepare_fn; ctx is the
 * engine): true when it was started. Given to sandbox_manager_pool_prepare with agent_pool. */
struct sandbox;
bool runs_pool_prepare(void *ctx, struct sandbox *sbx);

/* The words an event of agent's shows in full (a text's, an error's), read again from the line
 * of its output it came from (raw) by the agent's adapter: malloc'd, or NULL when the event of
 * that type on that line has none. */
char *runs_event_words(const char *agent, const char *type, const char *raw);

/* The agents this server can run, ", "-separated (for messages and the tools' descriptions). */
const char *runs_agents_installed(const struct runs *e);

#define RUNS_SETUP_MAX (64 * 1024) /* bytes of a run's setup script */

/* The "owner/name" a user's repository settings are kept under (store_repo_setting_*), into out
 * (cap bytes): the last two path segments of repository ("owner/name" itself, an https:// URL,
 * a local path), ".git" and trailing slashes left out, in lowercase, as GitHub compares names.
 * False when those are not two names of letters, digits, '.', '_' and '-' (1 to 100 each). */
bool runs_repo_slug(const char *repository, char *out, size_t cap);

struct runs_submit {
    const char *user_id;
    const char *task;
    const char *repository; /* NULL: the agent works in /workspace */
    const char *branch;     /* NULL: the remote's default */
    const char *session_id; /* NULL: a new session */
    const char *model;      /* NULL: the default */
    const char *title;      /* NULL: none */
    const char *agent;      /* NULL: "opencode" */
    uint64_t timeout_ms;    /* 0: the default */
    const char *network;    /* "none", "allowlist", "public"; NULL: the most the user may have */
    /* "none", "draft", "ready"; NULL: draft for a GitHub repository a credential serves */
    const char *pull_request;
    const char *setup; /* a setup script to run before the agent (NULL: the repository's own) */
    /* One of a group's attempts (runs_submit_attempts): its delivery is held until it is picked */
    const char *group_id;
    /* What asked for it when not its owner's call (the review loop's JSON), NULL for none */
    const char *origin;
    /* Its agent's plan is approved before it changes anything (runs/ask.c) */
    bool plan_first;
    /* How long its agent's questions wait for an answer (s); 0: the server's default */
    uint64_t question_timeout_s;
    /* Whether the session's pull request has its failing CI fixed by runs from now on */
    enum runs_fix_ci { RUNS_FIX_CI_KEEP, RUNS_FIX_CI_ON, RUNS_FIX_CI_OFF } fix_ci;
};

#define RUNS_ATTEMPTS_MAX 4 /* attempts of one task */

/* An attempt's agent and model (NULLs: the task's) */
struct runs_variant {
    const char *agent, *model;
};

/* Several attempts at s's task at once: n runs (1..RUNS_ATTEMPTS_MAX), each in a new session of
 * its own, spread over variants in turn (nvariants of them, 0: all s's own agent and model),
 * sharing a group whose id fills group_id. Nothing is pushed until one is picked
 * (runs_deliver_attempt). Fills run_ids and session_ids (n each). All are queued, or none:
 * -EINVAL for bad input with err set, as runs_submit says. */
int runs_submit_attempts(struct runs *e, const struct runs_submit *s, unsigned n,
                         const struct runs_variant *variants, size_t nvariants, char group_id[64],
                         char run_ids[][64], char session_ids[][64], struct err *err);

/* Deliver attempt run_id of user_id's: a run without an agent, queued in the attempt's session,
 * pushes the attempt's commits to its session's branch and opens its pull request, as a run on
 * its own would have at its end. Fills delivery_run. -ENOENT: no such run of the user's;
 * -EINVAL: not an attempt, not ended well, or asked for no pull request; -EALREADY: another
 * attempt of its group was picked (delivery_run names that one's delivery). Picking the same
 * attempt again answers with its delivery run. */
int runs_deliver_attempt(struct runs *e, const char *user_id, const char *run_id,
                         char delivery_run[64], struct err *err);

/* The review loop's acts on a GitHub event (a github_event_fn for github/receiver.h, ctx the
 * engine): a follow-up run for an authorized comment, review or review comment addressed to the
 * server on a session's pull request, or the end of a session's steering. */
struct github_event;
struct github_outcome;
void runs_review_event(void *ctx, const struct github_event *ev, struct github_outcome *o);

/* Check and record a run (status queued) and schedule it. Fills run_id and session_id. Returns
 * 0, -EINVAL for bad input, -ENOENT for a session that is not the user's, with err set. */
int runs_submit(struct runs *e, const struct runs_submit *s, char run_id[64], char session_id[64],
                struct err *err);

/* Whether session_id has a run under way: its id and the network mode it was given. */
bool runs_session_run(const struct runs *e, const char *session_id, char run_id[64],
                      enum egress_mode *mode);

/* Cancel a queued or running run of user_id. -ENOENT when it is not the user's, -EALREADY when
 * it has ended. */
int runs_cancel(struct runs *e, const char *user_id, const char *run_id, struct err *err);

/* A node sharing the store was marked lost (cluster.h): the queued and running runs of its
 * sessions end failed, with RUNS_NODE_LOST as the reason. */
#define RUNS_NODE_LOST "node lost: the node running it stopped answering"
void runs_node_lost(struct runs *e, const char *node_id);
/* This node took session_id over from a silent node (cluster_on_taken): its queued and running
 * runs end failed as a lost node's do. */
void runs_session_taken(struct runs *e, const char *session_id);
/* This node was marked lost while it could not reach the store (cluster_on_back): the runs it
 * holds that another node ended meanwhile are stopped here, their agents killed, and dropped with
 * nothing more written for them. */
void runs_node_back(struct runs *e);

/* Call cb once when run_id ends or after wait_ms, whichever is first (at once when it is not
 * active). Returns a handle for runs_wait_cancel, or NULL when cb has already run. */
struct runs_waiter;
struct runs_waiter *runs_wait(struct runs *e, const char *run_id, uint64_t wait_ms,
                              void (*cb)(void *ctx), void *ctx);
void runs_wait_cancel(struct runs_waiter *w);

/* The address of a run's page (session false) or a session's, with its view token, into out.
 * "" when the run or session does not exist. */
void runs_web_url(const struct runs *e, bool session, const char *id, char *out, size_t cap);

/* The same for a run whose view generation is known (no store lookup). */
void runs_web_url_gen(const struct runs *e, const char *run_id, int64_t gen, char *out, size_t cap);

/* The address of a run's page (session false) or a session's without a view token: it opens for
 * the owner signed in at /login (src/web/web.c), for no one else. No store lookup. */
void runs_page_url(const struct runs *e, bool session, const char *id, char *out, size_t cap);

/* --- view tokens (the capability in a web address; read-only, revocable) --- */

#define RUNS_VIEW_TOKEN_MAX 32
int runs_view_token(const struct runs *e, bool session, const char *id,
                    char out[RUNS_VIEW_TOKEN_MAX], struct err *err);
/* Whether token opens the page of run (or session) id. Constant time; false for unknown ids. */
bool runs_view_check(const struct runs *e, bool session, const char *id, const char *token);

/* The page of a group of attempts, with its view token, into out ("" for no such group); the
 * token moves with the first attempt's view generation. */
void runs_group_url(const struct runs *e, const char *group_id, char *out, size_t cap);
/* Whether token opens the page of group group_id. Constant time; false for unknown ids. */
bool runs_group_view_check(const struct runs *e, const char *group_id, const char *token);

/* --- descriptions (tools and web pages show the same) --- */

struct store_run;
/* A run as get_result shows it (new reference). */
json_t *runs_describe(struct runs *e, const struct store_run *r);
/* A group of attempts of user_id's (any user's when NULL), as get_result and its page show it
 * (new reference): {group_id, web_url, picked, delivery_run, attempts: [{run_id, session_id,
 * agent, model, status, summary, error, files_changed, insertions, deletions, commits, tests,
 * cost, input_tokens, output_tokens, delivery, web_url}]}; NULL with err set (-ENOENT) for none. */
json_t *runs_describe_group(struct runs *e, const char *user_id, const char *group_id,
                            struct err *err);
/* A run as list_runs shows it (new reference). */
json_t *runs_describe_short(struct runs *e, const struct store_run *r);

/* --- phases (phase.c): what a run is doing now, or how it ended --- */

#define RUNS_PHASE_TEXT_MAX 320

/* The run's phase in one line, into out: "preparing the sandbox", "cloning <repository>", "step
 * 3: ran `make test`", "collecting the changes", "succeeded after 4 steps", "failed while
 * cloning". */
void runs_phase_text(const struct store_run *r, char *out, size_t cap);
/* The phase as get_result and the run's page show it: {name, step, detail, text, since} (new
 * reference). */
json_t *runs_phase_describe(const struct store_run *r);
/* How long the run has been going (since it started, or was queued when it has not), or how
 * long it went once it ended, in ms. */
int64_t runs_elapsed_ms(const struct store_run *r, int64_t now_ms);
/* "14s", "2m 05s", "1h 02m" */
void runs_duration_text(int64_t ms, char *out, size_t cap);
/* Up to n of the run's latest events that tell of its work (tool calls, the agent's words,
 * errors, refused pushes; not a turn's start and end), oldest first: [{seq, time, type,
 * summary}] (new reference). */
json_t *runs_recent_events(struct store *st, const char *run_id, unsigned n);

/* Also call progress(ctx) of waiter w whenever its run moves to another phase or records an
 * event that tells of its work, until w's callback runs or it is cancelled. */
void runs_wait_progress(struct runs_waiter *w, void (*progress)(void *ctx));

/* The store and configuration the engine uses. */
struct store *runs_store_of(const struct runs *e);
const struct runs_config *runs_config_of(const struct runs *e);

/* --- sandbox network (network.c): how much each sandbox may reach, and what it tried --- */

/* The widest mode user_id's sandboxes may have: the deployment's, narrowed by the user's own
 * setting (`sandbox-mcp user network`). EGRESS_MODE_NONE when the user cannot be read. */
enum egress_mode runs_network_bound(const struct egress_policy *p, struct store *st,
                                    const char *user_id);

/* The egress proxy's two questions, answered for every sandbox: the mode it is judged under
 * (its user's bound, narrowed by the run under way in its session), and where each attempt is
 * counted (per sandbox and run, in the store, a moment later; on /metrics; in the log, at most
 * a few lines a second). Main loop only. */
struct runs_network;
struct runs_network *runs_network_new(struct store *st, struct sandbox_manager *mgr,
                                      const struct egress_policy *p);
/* The run under way in session_id, as runs_session_run tells it (the engine's ctx). */
typedef bool (*runs_network_session_fn)(void *ctx, const char *session_id, char run_id[64],
                                        enum egress_mode *mode);
/* Who tells n the run under way in a session, whose mode narrows its sandbox's (fn NULL: no
 * one). Returns the ctx it replaces (NULL when none). */
void *runs_network_set_session(struct runs_network *n, runs_network_session_fn fn, void *ctx);
/* Wire engine e to n both ways (runs.c): n asks e for the runs under way, and e's descriptions
 * read n's counts. NULL: unwire the engine n had. */
void runs_network_set_runs(struct runs_network *n, struct runs *e);
/* Writes what it still holds to the store. */
void runs_network_free(struct runs_network *n);
/* Match egress_mode_fn and egress_recorder_fn, with n as ctx. */
enum egress_mode runs_network_mode(void *n, const char *sandbox_id, char user_id[64]);
void runs_network_record(void *n, const struct egress_attempt *a);
/* Write what is held to the store now. */
void runs_network_flush(struct runs_network *n);

/* A run's network as get_result shows it: its mode, the hosts reached with connections and
 * bytes, the attempts denied with their reasons, those that failed (new reference). */
json_t *runs_network_summary(struct store *st, const struct store_run *r);

/* --- an agent's questions to its run's owner (ask.c) --- */

#define RUNS_ASK_QUESTION "question"
#define RUNS_ASK_PLAN "plan"
#define RUNS_QUESTION_MAX (4 * 1024) /* bytes of a question */
#define RUNS_PLAN_MAX (32 * 1024)    /* bytes of a plan */
#define RUNS_ANSWER_MAX (16 * 1024)  /* bytes of an answer */
#define RUNS_CHOICES_MAX 10          /* choices a question offers */
#define RUNS_CHOICE_MAX 200          /* bytes of one */
#define RUNS_QUESTIONS_MAX 20        /* questions one run may ask */
#define RUNS_QUESTION_WAIT_MAX_S (24 * 3600)

struct runs_ask {
    const char *user_id, *run_id; /* what the agent's token acts for */
    const char *kind;             /* RUNS_ASK_QUESTION or RUNS_ASK_PLAN */
    const char *text;             /* checked by the caller: UTF-8, within its cap */
    const json_t *choices;        /* an array of strings, or NULL */
};
/* What the agent is told: reply (borrowed for the call) once answered, or err when it cannot be
 * asked or the run ended. */
typedef void (*runs_answer_fn)(void *ctx, const char *reply, const struct err *err);
/* Ask a's question for the run working here, and hold the agent's call until it is answered (or
 * its deadline passes: "no answer"). Returns a handle for runs_ask_cancel (the agent's call went
 * away), or NULL when cb has been called already. */
void *runs_ask(struct runs *e, const struct runs_ask *a, runs_answer_fn cb, void *ctx);
void runs_ask_cancel(struct runs *e, void *handle);
/* Answer run_id's waiting question (question_id: that one only; NULL or "": whichever waits) for
 * its owner user_id, through `by` ("tool", "tasks", "mrtr", "page"). A plan's answer is "" to
 * approve it as written, else the changes it is approved with. 0; -ENOENT: no such run of the
 * user's; -EALREADY: it waits for no answer (or for another question); -EINVAL, -E2BIG: the
 * answer (err says why). */
int runs_answer(struct runs *e, const char *user_id, const char *run_id, const char *question_id,
                const char *answer, const char *by, struct err *err);
/* run_id's waiting question as get_result shows it ({id, kind, text, choices, asked_at,
 * answer_by, how}), or NULL when it waits for none. */
json_t *runs_question_json(struct store *st, const char *run_id);
/* How a client asks its user for the answer to a question of kind (elicitation/create): the
 * requested schema (new reference), the answer in an accepted content ("" for none), and the
 * message (the question and its choices; malloc'd). */
json_t *runs_question_elicit_schema(const char *kind);
const char *runs_question_elicit_answer(const char *kind, const json_t *content);
char *runs_question_message(const char *kind, const char *text, const char *choices_json);

/* The sandbox and session of run_id of user_id, working on this node (ask.c): 0, or -ENOENT. */
int runs_run_sandbox(struct runs *e, const char *user_id, const char *run_id, char sandbox_id[64],
                     char session_id[64]);
/* Note in run_id's timeline what its agent opened (a preview: type "preview", its summary and
 * JSON). */
void runs_note(struct runs *e, const char *run_id, const char *type, const char *summary,
               json_t *raw);
/* What runs_describe lists under "previews": the run's open previews (src/preview), as the wiring
 * gives them (NULL: none). */
typedef json_t *(*runs_previews_fn)(void *ctx, const char *run_id);
void runs_set_previews(struct runs *e, runs_previews_fn fn, void *ctx);

/* --- evidence: images a run's agent marks as showing its work (evidence.c) --- */

#define RUNS_EVIDENCE_MAX 8              /* images a run */
#define RUNS_EVIDENCE_BYTES (512 * 1024) /* bytes of one */
/* The image kept: item ({n, file, mime, bytes, caption}, stolen), or err. */
typedef void (*runs_evidence_fn)(void *ctx, json_t *item, const struct err *err);
/* Read image path (relative to /workspace) whole from the sandbox of run_id, working here for
 * user_id, and keep it as the run's next evidence with caption (NULL: none); cb later. 0, or a
 * negative errno with err (cb not called): not working here, RUNS_EVIDENCE_MAX kept already. */
int runs_add_evidence(struct runs *e, const char *user_id, const char *run_id, const char *path,
                      const char *caption, runs_evidence_fn cb, void *ctx, struct err *err);
/* The run's evidence, [{n, file, mime, bytes, caption}] (new reference), from this node's run
 * directory; [] when none. */
json_t *runs_evidence(struct runs *e, const char *run_id);
/* Where evidence n (from 1) of run_id is, and its type: 0, or -ENOENT. */
int runs_evidence_file(struct runs *e, const char *run_id, unsigned n, char *path, size_t cap,
                       char mime[32]);
/* Evidence n's bytes (malloc'd, *len of them) and type, or NULL when there is none. */
char *runs_evidence_data(struct runs *e, const char *run_id, unsigned n, size_t *len,
                         char mime[32]);

#pragma once

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/loop.h"
#include "base/proc_watch.h"
#include "base/seal.h"
#include "egress/egress.h"
#include "proxy/proxy.h"
#include "proxy/token.h"
#include "runs/runs.h"
#include "sandbox/sandbox.h"

struct proxy_llm;

/* --- agent adapters (opencode.c) --- */

/* How an agent is started: its program inside the sandbox, its arguments and environment. The
 * task goes to its stdin; its stdout (one JSON event per line) to the run's event file. */
struct agent_launch {
    const char *model;       /* provider/model */
    const char *session;     /* the agent's conversation to continue, or "" */
    const char *proxy_token; /* the run's proxy JWT */
    const char *proxy_url;   /* the sandbox's proxy listener, ".../proxy" */
    const char *program;     /* the agent's program inside the sandbox */
    /* The LLM providers the run's token grants, the model's own first: the agent is pointed at
     * each through the proxy (proxy_url/<name><base_path>) */
    const struct proxy_llm *providers;
    size_t nproviders;
    /* Hand the run to the agent's server kept warm in the sandbox on this port (the sandbox
     * helper's agent bridge, src/sandbox/helper/agent.c), started if need be and stopped after
     * warm_idle_s seconds without a run; NULL: a process of the agent's own for this run. */
    const char *warm_port;
    unsigned warm_idle_s;
    /* With warm_port: only start that server, ahead of the run and without a task (the same
     * environment, so the bridge finds it serving) */
    bool start_ahead;
    /* With start_ahead: then have the server ready its work for this directory, a run's there
     * (a pooled sandbox's agent, whose warm-up prompt the proxy refuses: no run is running) */
    const char *warm_dir;
    /* GitHub's host for gh (GitHub's own, or an Enterprise one, without a port), or NULL for
     * none: gh then reads the run's repository through the sandbox's socket */
    const char *gh_host;
    char **argv, **env; /* filled by the adapter (malloc'd, NULL-terminated) */
};
void agent_launch_release(struct agent_launch *l);
/* What every agent's environment has, from env[0] on (at most AGENT_COMMON_ENV entries): the
 * name and address its commits carry, and gh pointed at the sandbox's socket with the run's
 * token (opencode.c). Returns how many. */
#define AGENT_COMMON_ENV 10
size_t agent_common_env(const struct agent_launch *l, char **env);
/* The server's own MCP tools for the agent (ask_user, submit_plan: mcp/tools_agent.c), on the
 * sandbox's proxy listener beside the proxy: its URL (malloc'd), reached with the run's token as
 * a bearer from AGENT_TOKEN_ENV; its calls wait up to AGENT_MCP_TIMEOUT_S for a person. */
#define AGENT_MCP_NAME "sandbox-mcp"
#define AGENT_TOKEN_ENV "SANDBOX_MCP_PROXY_TOKEN"
#define AGENT_MCP_TIMEOUT_S (25 * 3600)
char *agent_mcp_url(const struct agent_launch *l);

/* Claude Code: `claude -p --output-format stream-json` with its Anthropic base URL the proxy's
 * provider of the model and the run's token as its key, every permission granted
 * (claude_code.c). */
void claude_code_launch(struct agent_launch *l);
/* Codex: `codex exec --json` with a model provider of its own pointed at the proxy's provider of
 * the model (the Responses API), the run's token read from the environment (codex.c). */
void codex_launch(struct agent_launch *l);

/* OpenCode: `opencode run --format json` with its providers pointed at the proxy; warm, the
 * bridge ("sandbox-agent PROGRAM PORT IDLE_S MODEL [SESSION]") with the same environment, which
 * is the server's; started ahead, "sandbox-agent --start PROGRAM PORT IDLE_S [MODEL DIR]". */
void opencode_launch(struct agent_launch *l);
/* OpenCode's configuration for l (OPENCODE_CONFIG_CONTENT, compact JSON, malloc'd): each of
 * l's providers with the AI SDK package of its wire format (all bundled in OpenCode, so nothing
 * is fetched), its base URL on the proxy and the run's token (from the environment) as its key;
 * the model's own provider lists the model, so a provider OpenCode has never heard of works;
 * only those providers enabled; every permission granted. Pure. */
char *opencode_config(const struct agent_launch *l);

struct agent_event;

/* An agent adapter: everything the engine knows about one coding agent. Adding an agent (Claude
 * Code, Codex) means adding an entry to the table in agents.c and the adapter's own files, not
 * changing the stages. */
struct agent_reader;
struct agent_adapter {
    const char *name;
    void (*launch)(struct agent_launch *l); /* argv and env */
    /* One line of its stdout into 1 to AGENT_LINE_EVENTS events (agent.h), with what rd keeps of
     * the lines before; -EINVAL for a line that is not a JSON object. */
    int (*parse)(struct agent_reader *rd, const char *line, size_t len, struct agent_event *evs);
    /* A shell script the agent is started under when it is not warm (/bin/sh -c seed agent
     * ARGV...), which ends by exec'ing "$@"; NULL: the agent's argv as launch made it. */
    const char *seed;
    /* launch honours warm_port (a server of the agent kept in the sandbox between runs) */
    bool warm;
    /* It keeps a conversation with the directory it began in: asked to continue one elsewhere
     * it does not, so a run in another directory starts a new conversation. */
    bool conversation_per_dir;
    /* Where its program is: the setting that names it, and where `make deps` installs it below
     * src/runs/; the directory mounted into sandboxes is the program's, or mount_up above it */
    const char *program_env;
    const char *installed;
    unsigned mount_up;
    /* The APIs it speaks to models in: bits of 1 << enum proxy_wire */
    unsigned wires;
    /* For an agent that reports its conversation's token totals rather than each step's: the
     * totals a line reports (true when it reports them), which a continued conversation's run
     * starts from (agent_reader.total_in, total_out); NULL for the others */
    bool (*totals)(const char *line, size_t len, int64_t *in, int64_t *out);
};
struct run;
/* For an agent that reports its conversation's token totals rather than each step's
 * (agent_adapter.totals), so that r's next step counts only its own: r's reader starts from the
 * totals of r's own last step's end (a run adopted after a restart), else of the session's last
 * run that this agent spoke in (a run continuing its conversation). Totals that then go down
 * belong to a new conversation and count whole (codex_parse_line). */
void run_seed_totals(struct run *r);

/* --- attempts (attempts.c) --- */

/* r delivers an attempt (r->delivers): its workspace is the attempt's, ready; its changes are
 * counted from the attempt's start, and it ends as a run that delivers does, without an agent. */
void attempt_deliver_now(struct run *r);

/* The program of agent name inside a sandbox, or NULL when this server has none (runs.c) */
const char *runs_agent_inside(const struct runs *e, const char *name);
/* The adapter called name, or NULL (agents.c). */
const struct agent_adapter *agent_find(const char *name);
/* The adapters in order: the first, and the one after ad (NULL after the last). */
const struct agent_adapter *agent_first(void);
const struct agent_adapter *agent_next(const struct agent_adapter *ad);
/* Whether ad can speak to a model of provider llm */
bool agent_speaks(const struct agent_adapter *ad, const struct proxy_llm *llm);
/* Whether ad can run model ("provider/model") of llms (n of them): 0, or -EINVAL with err naming
 * the API the provider speaks and the agents that can. A provider not among llms is left to
 * proxy_llm_check. Pure. */
int agent_model_check(const struct agent_adapter *ad, const struct proxy_llm *llms, size_t n,
                      const char *model, struct err *err);
/* Names of the adapters, ", "-separated (for messages). */
const char *agent_names(void);

/* --- repositories (repo.c) --- */

/* A repository a run names. */
struct repo_ref {
    bool local;     /* file:// or an absolute path */
    bool http;      /* http:// (fetched only from hosts the operator allows) */
    char host[256]; /* network URLs: lowercase name or address (IPv6 without brackets) */
    uint16_t port;  /* explicit, or the scheme's */
    char name[128]; /* the directory it is cloned to, from its last path segment */
};

/* Check a repository reference: https:// and http:// URLs (no credentials, query or fragment in
 * them), and file:// URLs or absolute paths when local repositories are allowed; every other
 * transport (ssh, git://, ext::) is refused. Fills *ref. Where it may be fetched from is not
 * decided here (egress). */
int repo_check(const char *url, bool allow_local, struct repo_ref *ref, struct err *err);
/* Check a branch name the way git does, roughly (no "..", no leading '-', printable). */
bool repo_branch_valid(const char *branch);
/* Shell commands that print the branch checked out in the current directory's repository
 * ("HEAD" when detached) and its commit ("-" when it has none), a line each. */
extern const char repo_head_script[];

/* --- phases (phase.c) --- */

struct agent_event;
/* What ev says the agent did, for the phase line, into out: "thinking" (a step's start),
 * "ran `make test` (exit 1)", "edited src/x.c" (paths under workdir relative to it), "said
 * \"...\"", "error: ..."; false (out untouched) when it says nothing of that (a step's end). */
bool phase_activity(const struct agent_event *ev, const char *workdir, char *out, size_t cap);
/* What ev says of a test command the agent ran ("passed: npm test", "failed: npm test (exit
 * 1)") into out: false when it is not a command that runs tests. */
bool phase_tests(const struct agent_event *ev, char *out, size_t cap);
/* Whether events of this type are among a run's recent events (runs_recent_events). */
bool phase_event_shown(const char *type);

/* --- the engine's pure parts (scripts.c): no I/O, safe from any thread --- */

struct buf;

#define SCRIPTS_CHANGES_LIST_MAX 1000 /* files and commits each in a change list */

/* Append s to b as one shell word: 'x', each ' written as '\''. */
void scripts_sh_quote(struct buf *b, const char *s);
/* A run's changes from what scripts_changes printed ("<branch>\n---\n<numstat>---\n<log>"),
 * as compact JSON {files_changed, insertions, deletions, files: [{path, insertions, deletions,
 * binary}], commits: [{sha, message}], branch}: numstat lines without two tabs and log lines
 * without a space are skipped, "-" counts (binary files) count 0, each list stops at
 * SCRIPTS_CHANGES_LIST_MAX while the totals go on; branch is null when nothing came before the
 * first "---". A file or commit that is not valid UTF-8 is left out of its list (its counts
 * still add up); a branch that is not makes the result NULL. malloc'd. */
char *scripts_parse_changes(const char *out);
/* Overwrite, in place, everything in s shaped like a JWT (three base64url parts joined by dots,
 * the first two beginning "eyJ", more than 40 bytes in all) with "[redacted]" followed by 'x'
 * to its full length, so the text keeps its length and nothing of the token. NULL is allowed. */
void scripts_redact_tokens(char *s);
/* Values shorter than this are not redacted: they would blot out ordinary words. */
#define SCRIPTS_REDACT_MIN 4
/* Overwrite, in place, every occurrence in s of each of the n values (those of at least
 * SCRIPTS_REDACT_MIN bytes) the way scripts_redact_tokens does: "[redacted]" and 'x' to the
 * value's length (cut to it when shorter). NULL s is allowed. */
void scripts_redact_values(char *s, const char *const *values, size_t n);
/* What went wrong in a clone, in a few words of our own (a static string) from git's output: git
 * carries what the remote answered, which may be an internal service's words and must not reach
 * the user. "git failed" when nothing is recognized. */
const char *scripts_clone_reason(const char *out);
/* The branches a clone listed when its HEAD names a branch it lacks: out ends with
 * "smcp-branches <n>\n" (at the start of a line; the last such line counts) and up to ten names,
 * a line each. Sets *total to n, appends the valid names to names as "'a', 'b'" (up to ten, and
 * stopping before 300 bytes or at the first name that is not a valid branch), returns how many.
 * out is cut up (strtok). */
unsigned scripts_clone_branches(char *out, struct buf *names, unsigned long *total);
/* Whether m reads as a model name: "provider/model", at most 120 bytes of letters, digits and
 * /._:-@, neither part empty. */
bool scripts_model_valid(const char *m);
/* Whether s is a full commit id as git prints it: 40 (SHA-1) or 64 (SHA-256) lowercase hex */
bool scripts_sha_valid(const char *s);
/* Shell commands that move the checkout in workdir, and its branch, to commit sha (a full id,
 * scripts_sha_valid), failing when the repository does not have it (malloc'd) */
char *scripts_reset_to(const char *workdir, const char *sha);

/* The host-side clone, run by /bin/sh -c with the environment SMCP_URL, SMCP_DEST (made afresh,
 * removed on exit), SMCP_TAR (the archive written) and SMCP_BRANCH ("" for the remote's HEAD).
 * Exit 0: SMCP_TAR holds the work tree with the git directory as .GIT; 3: HEAD names a branch the
 * remote lacks and it has several ("smcp-branches <n>" and up to ten names on stdout); 4:
 * SMCP_BRANCH is not there. */
extern const char scripts_clone[];

/* The workspace's preparation in the sandbox (scripts_prepare). */
struct scripts_prepare {
    const char *workdir;
    bool unpack;             /* the clone's archive comes on stdin: unpack it into workdir */
    bool over;               /* ... over a checkout (a snapshot's): its tracked files go first */
    bool repository;         /* the run names a repository (else workdir is only made) */
    const char *checkout;    /* a branch to check out (born unborn without commits), or NULL */
    const char *make_branch; /* the session's branch to make from HEAD, or NULL */
    /* The repository's own URL on GitHub ("https://github.com/owner/name.git"), set as the
     * remote "github", never fetched (skipFetchAll), by which gh finds the repository it reads
     * through the sandbox's socket (origin is the proxy, which gh does not know); or NULL */
    const char *gh_remote;
};
/* The preparation as one shell command (malloc'd): with a repository it prints the branch and
 * the starting commit (repo_head_script), then "made" or "empty" with make_branch. Without
 * unpack it first prints only "absent" (exit 0) when workdir holds no repository. The archive
 * carries .GIT, renamed .git once all is unpacked, so a half-unpacked workspace is made afresh. */
char *scripts_prepare(const struct scripts_prepare *p);
/* The command that tells a run's changes in workdir (malloc'd): the branch, then "---", `git diff
 * --numstat` against base (the empty tree when base is ""), "---", and the commits since base
 * (every commit when base is ""). commit_left: what the agent left uncommitted is first committed
 * with the message in $SMCP_MSG. */
char *scripts_changes(const char *workdir, const char *base, bool commit_left);
/* The wrapper the agent starts under (/bin/sh -c scripts_agent_seed agent ARGV...): it seeds
 * OpenCode's config directory so that it installs no plugin, then execs ARGV. */
extern const char scripts_agent_seed[];

/* --- view tokens (view.c): what they need, handed over by the engine --- */

struct store;
struct runs_view {
    const unsigned char *key; /* the view key (not jwt_key) */
    size_t keylen;
    const char *public_url;
    struct store *st; /* the view generations */
};
/* The runs.h calls of the same names without the engine: runs_web_url (view_url),
 * runs_web_url_gen, runs_page_url, runs_view_token, runs_view_check. */
void view_url(const struct runs_view *v, bool session, const char *id, char *out, size_t cap);
void view_url_gen(const struct runs_view *v, const char *run_id, int64_t gen, char *out,
                  size_t cap);
void view_page_url(const struct runs_view *v, bool session, const char *id, char *out, size_t cap);
int view_token(const struct runs_view *v, bool session, const char *id,
               char out[RUNS_VIEW_TOKEN_MAX], struct err *err);
bool view_check(const struct runs_view *v, bool session, const char *id, const char *token);
/* A group of attempts' page: its address with its view token ("" for no such group), and
 * whether a token opens it (runs_group_url, runs_group_view_check) */
void view_group_url(const struct runs_view *v, const char *group_id, char *out, size_t cap);
bool view_group_check(const struct runs_view *v, const char *group_id, const char *token);

/* --- sandbox network (network.c) --- */

struct runs;
struct runs_network;
/* The network record the engine's descriptions read (set by runs_network_set_runs). */
struct runs_network *runs_network_of(const struct runs *e);

/* --- the engine (runs.c and its stages) ---
 *
 * A run moves through stages, a file each, all on the loop: submit.c (run_task's checks and
 * policy) -> runs.c (the queue, the tick, adoption, the public calls) -> workspace.c (the
 * sandbox, the host-side clone, the preparation in the sandbox) -> setup.c (the repository's
 * setup, or the run's own) -> launch.c (the agent's token and its start through its adapter) ->
 * ingest.c (its events into the store) -> finish.c (the changes, the diff, the hand-off to
 * delivery, the end). The stages share struct run and these
 * steps; nothing outside src/runs/ sees them. */

/* The sandbox's proxy listener, as agents see it */
#define PROXY_URL "http://127.0.0.1:8788/proxy"
/* Where the agents' program is mounted in sandboxes, and a warm agent's server on the
 * sandbox's loopback */
#define AGENT_DIR "/opt/agents"
#define AGENT_SERVE_PORT "8789"

enum phase {
    PH_QUEUED,    /* waiting for a slot or for its session */
    PH_ACQUIRE,   /* waiting for the sandbox */
    PH_CLONE,     /* host-side clone running */
    PH_PREPARE,   /* unpacking / probing in the sandbox */
    PH_AGENT,     /* the agent runs; events are ingested */
    PH_FINISHING, /* collecting the changes, delivering them */
};

enum pr_mode { PR_NONE, PR_DRAFT, PR_READY };

struct run_secret {
    char name[72];
    char *env; /* "NAME=VALUE" */
    bool agent;
};

struct run {
    struct runs *e;
    struct run *next;
    int64_t n;
    char id[64], user_id[64], session_id[64];
    char agent[32], model[128];
    char *task, *repository, *title;
    char branch_req[256];
    uint64_t timeout_ms;
    const struct agent_adapter *adapter;
    enum phase phase;
    int64_t deadline; /* monotonic ms, from when it started running */
    int64_t retry_at; /* queued again after "at capacity": not before this (monotonic ms) */
    struct sandbox *sbx;
    struct sandbox_waiter *sw;
    struct sandbox_exec *ex;
    struct proc_watch clone;
    bool clone_active;
    /* The repository's mirror the clone fetches into, held (locked) while it runs */
    struct envcache_entry mirror;
    bool mirror_held;
    struct egress_lookup *lookup; /* resolving the repository's host */
    char dir[PATH_MAX];           /* DATA_DIR/runs/<id> */
    struct repo_ref ref;
    char github_repo[PROXY_REPO_MAX]; /* "owner/name" when the repository is on GitHub */
    enum pr_mode pr;                  /* what the run delivers */
    char work_branch[256];            /* delivering: the session's branch, pushed to */
    char base_branch[256];            /* delivering: what work_branch was made from */
    bool new_work_branch;             /* made by this run (recorded on the session once made) */
    struct delivery *dv;
    char workdir[512];
    char branch[256];
    /* What the agent's token grants (a warm agent's token stands for the running run): its LLM
     * providers and github when git through the proxy is granted */
    char grant_services[PROXY_SERVICES_MAX * (PROXY_NAME_MAX + 1) + 8];
    bool grant_git;
    char agent_jti[64];      /* the agent's last minted token's: a pooled agent's usage row */
    char base[64];           /* the starting commit; "" in a repository without commits */
    bool prepared;           /* the workspace is ready: changes are told against base */
    bool probing;            /* the preparation also looks for the repository in the workspace */
    struct loop_timer start; /* starts the agent once the run_task reply is out */
    bool start_armed;
    int agent_pid;
    int64_t offset;
    bool offset_unsure;   /* a batch's storing failed: the store's offset says whether it landed */
    bool end_waits;       /* its end waits for the store to answer (logged once) */
    bool end_pending;     /* its end is to be recorded again (the tick does): the store failed */
    json_t *end_delivery; /* what its delivery came to, kept for that */
    int wd, wd_status;    /* inotify watches of the event and status files, -1 when none */
    bool skip_line;       /* inside an oversized event line */
    struct agent_reader *reader; /* what its adapter's parser keeps between lines, or NULL */
    bool began; /* moved to running (a retry after "at capacity" does not move it again) */
    bool cancelled, timed_out, exited, adopted_dead;
    bool dropped;    /* ended through another node: stopped here with nothing more written */
    int exit_code;   /* as a shell reports it: 128 + the signal for a killed agent */
    int exit_signal; /* the signal that killed the agent, 0 when it exited */
    enum egress_mode network; /* its sandbox's, at most (public: no narrowing of its own) */
    char fail[512];           /* a failure before or around the agent */
    char *changes;            /* the diff stat and commits, while the full diff is read */
    struct diff *diff;        /* the full diff, parsed as git writes it */
    /* Its phase as recorded (phase.c), and the agent's steps counted so far */
    char ph_name[16], ph_detail[RUNS_PHASE_TEXT_MAX], ended_in[64];
    int64_t steps, ph_steps;
    bool ph_final; /* the final one is recorded: nothing changes it */
    /* Its setup (setup.c): the script run_task gave (NULL: the repository's own), whether the
     * workspace was cloned afresh for it, and the source of the setup under way */
    char *setup_arg;
    bool fresh;
    char setup_source[64];
    /* Its environment (envs.c): the snapshot a new session's sandbox starts on ("" for none),
     * its key and scope, whether the session's sandbox is new for this run, whether this run
     * is the first on the snapshot (its clone goes over the
     * snapshot's, its fingerprint is compared), the checkout's fingerprint, and whether a
     * snapshot is being taken (run_finish waits for it). What the snapshot it starts on was
     * built from (its fingerprint, base commit and size), as it was chosen: a rebuild may
     * replace its row under the same key before the checkout is compared with it. */
    char env_id[64], env_key[80], env_scope[64];
    bool env_new, env_first, snapshotting;
    char *env_chosen_fp, env_chosen_base[64];
    int64_t env_chosen_bytes;
    /* An environment's rebuild (envs.c): the snapshot it replaces ("" for every other run), and
     * whether its new snapshot was saved */
    char rebuild[64];
    /* run_task's plan_first, and how long its questions wait (0: the server's default) */
    bool plan_first;
    uint64_t question_timeout_s;
    int64_t wait_since;  /* monotonic ms: it waits for an answer since (its timeout stopped) */
    char group_id[64];   /* the attempts it is one of: its delivery is held until picked */
    char delivers[64];   /* the attempt it delivers (no agent runs), or "" */
    char group_base[64]; /* the commit its group's attempts start from */
    bool rebuilt;
    char *env_fp;
    bool setup_stop;   /* its user's settings for the repository: a failed setup ends it */
    uint64_t setup_ms; /* a setup that timed out: how long it ran, while its output is read */
    /* The user's secrets that apply to its repository (secrets.c), and what its redactor takes
     * out of everything the run keeps: their values and JSON-escaped spellings */
    struct run_secret *secrets;
    size_t nsecrets;
    char **redact;
    size_t nredact;
};

struct runs_waiter {
    struct runs *e;
    struct runs_waiter *next;
    char run_id[64];
    int64_t deadline;
    void (*cb)(void *ctx);
    void (*progress)(void *ctx); /* NULL: only the end */
    uint64_t told;               /* the round of notify_progress that told it last */
    void *ctx;
    bool elsewhere; /* a run no node holds yet, or another node: its end is looked up */
};

struct runs {
    struct runs_config cfg;
    char *data_dir, *public_url, *opencode_dir, *default_model, *github_token;
    const char *default_agent; /* an adapter's name */
    struct runs_agent_program agents[RUNS_AGENTS_MAX];
    size_t nagents;
    char agents_installed[RUNS_AGENTS_MAX * 20];
    char *github_base, *github_repos, *github_api;
    unsigned char *view_key;
    struct runs_view view; /* view.c's keys */
    unsigned char seal_key[SEAL_KEY_BYTES];
    bool have_seal_key;
    struct deliverer *deliverer;
    struct github_rest *gh;  /* the review loop's answers on pull requests */
    char gh_host[256];       /* github_base's host without its port, for gh (GH_HOST) */
    struct ci_fix *ci_fixes; /* fix runs being prepared (review.c) */
    struct poller *poller;   /* review_poll.c, NULL when GitHub's webhooks come instead */
    char *github_steerers;
    struct egress_rules fetch_rules;
    struct store *st;
    struct sandbox_manager *mgr;
    struct run *runs; /* active runs, in creation order */
    struct runs_network *network;
    struct runs_waiter *waiters;
    struct ask_wait *asks;     /* agents' calls waiting for answers (ask.c) */
    runs_previews_fn previews; /* a run's previews, for runs_describe */
    void *previews_ctx;
    int64_t next_ask_sweep;
    int inotify_fd;
    h2o_socket_t *inotify_sock;
    struct loop_timer tick;
    int64_t next_retention;
    int64_t next_env_sweep;
    /* Agents booting in pooled sandboxes (runs_pool_prepare), each told ready or not to the pool
     * when its warm-up ends (runs_pool_check); after one that failed, none for a while. */
    struct pool_warmup {
        char sandbox[64];
        int status_fd; /* where the sandbox's init writes the warm-up's end */
        int64_t started;
        struct pool_warmup *next;
    } * warmups;
    int64_t pool_retry_at;
    /* the environment snapshots the pool keeps a sandbox on (sandbox_pool_keep_envs), those runs
     * started on or saved most recently first, and the directory each one's agent is readied for */
    char pool_envs[SANDBOX_POOL_ENVS_MAX][64], pool_env_dirs[SANDBOX_POOL_ENVS_MAX][512];
    size_t npool_envs;
    bool scheduling, reschedule;
    /* The store is shared by nodes: a new session waits for a node with room to claim it, and
     * the limits on a user's runs count every node's. */
    bool shared;
    int64_t last_removed; /* retention: the last run whose directory was removed */
    uint64_t progress_round;
};

/* runs.c: bookkeeping. A run's status moves in the store (a final status written once); its
 * phase is recorded when it differs and its waiters told (run_set_phase: true when it was
 * another phase). */
void run_transition(struct run *r, const char *status, const char *reason);
bool run_set_phase(struct run *r, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Where r ended ("at step 3", "while cloning"), noted once when it stops working; then its final
 * phase (status, and where), recorded before the final transition. */
void run_note_end(struct run *r);
/* An event of the server's own in r's timeline (raw, whose "type" is set to type, taken), its
 * offset in the agent's file kept; redacted like the agent's. */
void run_server_event(struct run *r, const char *type, const char *summary, json_t *raw);
/* The same with words that become the run's summary (as the agent's text would) */
void run_server_words(struct run *r, const char *type, const char *summary, const char *words,
                      json_t *raw);
void run_set_final_phase(struct run *r, const char *status);
/* ask.c: the questions of a run that stops working: the one waiting is closed, the agent's calls
 * held for it are failed; the look at answers and deadlines (from the tick); whether a
 * plan_first run's newest plan was approved (else why not, into why). */
void run_questions_end(struct run *r);
void runs_ask_tick(struct runs *e);
/* ask.c: the server stops: the agents' calls held are answered so (their questions stay, for
 * the calls made again to the next server) */
void runs_asks_release(struct runs *e);
bool run_plan_approved(struct run *r, char *why, size_t cap);
void run_free(struct run *r);
void run_unlink(struct run *r);
struct run *runs_find(struct runs *e, const char *id);
/* Wake run_id's waiters (all of them for NULL) and forget them; or tell those that asked for
 * progress that it moved on, each once. */
void runs_notify_waiters(struct runs *e, const char *run_id);
void runs_notify_progress(struct runs *e, const char *run_id);
/* Start queued runs while there is room (runs.c); safe to call from within a start. */
void runs_schedule(struct runs *e);
/* Take up the queued runs the shared store holds for this node (runs.c). */
void runs_take_queued(struct runs *e);
/* Whether run_id, which this node does not hold, is still queued or running (runs.c). */
bool runs_active_elsewhere(struct runs *e, const char *run_id);
/* The periodic look (tick.c), every RUNS_TICK_MS from now. */
#define RUNS_TICK_MS 500
void runs_tick_start(struct runs *e);
/* Runs of user_id held here past queued, and queued. */
void runs_user_runs(struct runs *e, const char *user_id, unsigned *active, unsigned *queued);
/* A run held here for row (its directory made, its branch loaded), appended to the active list. */
/* row, just stored as queued in a session of node_id: taken up here when that is this node
 * (row->n filled), and the queue looked at */
void run_queued(struct runs *e, struct store_run *row, const char *node_id);
struct run *run_alloc(struct runs *e, const struct store_run *row);
/* The GitHub token that serves repo ("owner/name") for user_id: their own, else the operator's
 * for the repositories the operator lists; NULL when none does (malloc'd: runs_wipe_free it). */
char *runs_github_credential(struct runs *e, const char *user_id, const char *repo);
void runs_wipe_free(char *s);
/* Whether r delivers: a pull request asked for, on GitHub, with the session's branch known. */
bool run_delivering(const struct run *r);
/* A file of the run's directory, opened O_CLOEXEC (created 0600): an fd, or a negative errno. */
int run_open_file(struct run *r, const char *name, int flags, struct err *err);

/* workspace.c: acquire r's sandbox (the callback may end r before this returns); the callbacks
 * that go on from it (run_on_sandbox: clone or prepare, or resume an adopted agent;
 * run_on_sandbox_failed: only to release it); a delivering run's branch (the session's, or the
 * one it makes); the host-side clone and the preparation in the sandbox. */
void run_acquire(struct run *r, const struct sandbox_acquire_opts *o, sandbox_ready_fn cb);
void run_on_sandbox(void *ctx, struct sandbox *sbx, const struct err *err);
void run_on_sandbox_failed(void *ctx, struct sandbox *sbx, const struct err *err);
void run_load_work_branch(struct run *r);
void run_clone(struct run *r);
void run_prepare_workspace(struct run *r, bool unpack);

/* setup.c: r's setup in its prepared workspace (the setup argument, else in a new workspace its
 * user's script for the repository, else the repository's .sandbox-mcp/setup.sh or
 * devcontainer.json), then the agent's start (a failure is told to the agent before its task),
 * or, when its user's settings say so, the run's failure. */
void run_setup(struct run *r);
/* setup.c: on a snapshot whose fingerprint matches, only the repository's
 * .sandbox-mcp/maintenance.sh runs (when it has one), then the agent starts. */
void run_maintenance(struct run *r);

/* envs.c: environment snapshots (see there). envs_choose picks, before a new session's sandbox
 * is acquired, a snapshot for it to start on (o->env); envs_start_failed, when the start on it
 * failed, drops it and acquires again on the template (true), or says it was not that (false);
 * envs_before_setup takes the fingerprint of a fresh checkout and goes on to run_setup, or to
 * run_maintenance on a snapshot that matches; envs_after_setup takes a snapshot after a
 * successful setup in a fresh clone, then starts the agent; envs_sweep drops what aged out and
 * removes what is dropped and unused. */
bool envs_enabled(const struct runs *e);
void envs_choose(struct run *r, struct sandbox_acquire_opts *o);
bool envs_start_failed(struct run *r, const struct err *err);
void envs_before_setup(struct run *r);
void envs_after_setup(struct run *r, bool ok);
void envs_sweep(struct runs *e);
/* envs.c: background rebuilds. A snapshot past its age that was used since it was built, whose
 * setup can be replayed (not a run_task `setup` argument), keeps serving while a rebuild of it
 * is queued or running: envs_rebuild_due queues one (a run of its owner, r->rebuild set) when
 * none is on this node. run_setup_over goes on after a setup (or none): the agent's start, or
 * for a rebuild its end; envs_rebuild_ended, from run_record_end once its sandbox is released,
 * drops the old snapshot when the rebuild failed and removes the rebuild's session. */
void envs_rebuild_due(struct runs *e);
void run_setup_over(struct run *r);
void envs_rebuild_ended(struct run *r, bool ok);
/* The bytes environment snapshots hold on this node, in all and of owner's (a user's id, or
 * ENVCACHE_PUBLIC for the shared ones): the caches' budget counts them with the mirrors. */
void envs_usage(struct runs *e, const char *owner, uint64_t *all, uint64_t *mine);

/* secrets.c: the user's secrets that apply to r's repository (every one when it has none on
 * GitHub: only "*" ones), read again (values once known stay redacted); released (wiped) by
 * run_free. run_secret_env: base (NULL-terminated, may be NULL) and the secrets' NAME=VALUE
 * entries (agent: only those marked agent), a NULL-terminated array the caller frees (not its
 * strings, which r keeps). run_secret_names: their names, comma-separated, into out; how many.
 * run_redact: s with r's proxy tokens and secret values overwritten in place (NULL allowed);
 * every text of the agent's or the setup's that the run keeps or shows goes through it. */
void run_load_secrets(struct run *r);
void run_secrets_release(struct run *r);
const char **run_secret_env(const struct run *r, bool agent, const char *const *base);
size_t run_secret_names(const struct run *r, bool agent, char *out, size_t cap);
void run_redact(const struct run *r, char *s);

/* launch.c: what r's token grants (into r->grant_*; fills llms when not NULL, returns how many
 * LLM providers), and the agent's start through r's adapter (run_fail when it cannot). */
size_t run_grant(struct run *r, struct proxy_llm llms[PROXY_SERVICES_MAX]);
void run_start_agent(struct run *r);
/* launch.c: the LLM providers a token for model grants and its agent is pointed at: every one
 * with a key, the model's own first, as many as a token holds beside github (when git). Fills
 * out and services (their names and github, comma-separated); returns how many. */
size_t run_llms(const struct runs_config *c, const char *model, bool git,
                struct proxy_llm out[PROXY_SERVICES_MAX], char *services, size_t cap);
/* launch.c: r's warm agent's server started as soon as r has its sandbox, before its workspace
 * and setup (nothing when r's agent is not kept warm, or a server is there already); failures
 * are logged only: the agent's start makes its own. */
void run_start_agent_ahead(struct run *r);
/* The tick's look at the pooled agents' warm-ups (pool_agent.c); with all, every one is dropped
 * (the engine's end). */
void runs_pool_check(struct runs *e, bool all);
/* pool_agent.c: have the pool keep a sandbox on snapshot env, its agent readied for dir (a run's
 * workdir there), among the RUNS_ENV_POOL snapshots used most recently; dir NULL: no longer (it is
 * dropped). */
void runs_pool_keep_env(struct runs *e, const char *env, const char *dir);

/* ingest.c: store the agent's new events, each once; its end as the init recorded it (1 ended,
 * 0 not yet, negative errno without a status file); whether it ended by any sign; the event
 * file's cap; the inotify watches and their reader. */
void run_ingest(struct run *r);
int run_read_exit(struct run *r);
bool run_agent_ended(struct run *r);
void run_check_output(struct run *r);
void run_watch_events(struct run *r);
void runs_on_inotify(h2o_socket_t *sock, const char *errstr);

/* finish.c: the run is over (or fails with a reason): its changes, its diff, its delivery, and
 * its end recorded (run_record_end frees r and schedules the next). */
void run_finish(struct run *r);
void run_fail(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void run_record_end(struct run *r, const char *changes, json_t *delivery);

/* review.c */
/* In every comment the server makes on a pull request; comments that carry it are never acted
 * on (GitHub shows no one an HTML comment). */
#define REVIEW_MARK "<!-- sandbox-mcp -->"
struct github_event;
/* The task of the follow-up run that ev (a comment, review or review comment) asks for. */
void review_task(const struct github_event *ev, struct buf *out);
/* r, started by the review loop (row->origin), ended with status and delivery (NULL: none):
 * unless the delivery commented on the pull request, say how it ended there. */
void review_run_ended(struct run *r, const struct store_run *row, const char *status,
                      const json_t *delivery);
/* Drop the fix runs being prepared (the engine stops). */
void review_release(struct runs *e);

/* review_poll.c: the poller, looking every interval_ms; mention addresses the server. */
struct poller *review_poller_new(struct runs *e, uint64_t interval_ms, const char *mention);
void review_poller_free(struct poller *pl);

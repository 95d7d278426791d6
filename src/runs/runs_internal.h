#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

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
    char **argv, **env; /* filled by the adapter (malloc'd, NULL-terminated) */
};
void agent_launch_release(struct agent_launch *l);

/* OpenCode: `opencode run --format json` with its providers pointed at the proxy; warm, the
 * bridge ("sandbox-agent PROGRAM PORT IDLE_S MODEL [SESSION]") with the same environment, which
 * is the server's. */
void opencode_launch(struct agent_launch *l);
/* OpenCode's configuration for l (OPENCODE_CONFIG_CONTENT, compact JSON, malloc'd): each of
 * l's providers with the AI SDK package of its wire format (all bundled in OpenCode, so nothing
 * is fetched), its base URL on the proxy and the run's token (from the environment) as its key;
 * the model's own provider lists the model, so a provider OpenCode has never heard of works;
 * only those providers enabled; every permission granted. Pure. */
char *opencode_config(const struct agent_launch *l);

struct agent_event;

/* An agent adapter: everything the engine knows about one coding agent. Adding an agent (Claude
 * Code, Codex) means adding an entry to agent_adapters, not changing the engine. */
struct agent_adapter {
    const char *name;
    void (*launch)(struct agent_launch *l);                             /* argv and env */
    int (*parse)(const char *line, size_t len, struct agent_event *ev); /* one stdout line */
};
/* The adapter called name, or NULL. */
const struct agent_adapter *agent_find(const char *name);
/* Names of the adapters, comma-separated (for messages). */
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
    bool repository;         /* the run names a repository (else workdir is only made) */
    const char *checkout;    /* a branch to check out (born unborn without commits), or NULL */
    const char *make_branch; /* the session's branch to make from HEAD, or NULL */
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

/* --- sandbox network (network.c) --- */

struct runs;
struct runs_network;
/* The network record the engine's descriptions read (set by runs_network_set_runs). */
void runs_set_network(struct runs *e, struct runs_network *n);
struct runs_network *runs_network_of(const struct runs *e);

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

/* --- sandbox network (network.c) --- */

struct runs;
struct runs_network;
/* The network record the engine's descriptions read (set by runs_network_set_runs). */
void runs_set_network(struct runs *e, struct runs_network *n);
struct runs_network *runs_network_of(const struct runs *e);

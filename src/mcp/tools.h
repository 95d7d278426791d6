#pragma once
/* Registration of each tool family (one file per family in src/mcp/tools_*.c). */

#include <stddef.h>
#include <stdint.h>

struct mcp_server;
struct proxy_llm;
struct sandbox_config;

/* What the tools' descriptions, schemas and annotations, and the server's instructions, say
 * about this server: read from its configuration at start, so that they state the real limits. */
struct tools_facts {
    const struct sandbox_config *sandbox; /* exec timeouts, output and file caps, idle stop */
    size_t reply_max_bytes;               /* the reply budget (REPLY_MAX_BYTES) */
    const char *network;                  /* the widest a sandbox may reach: "none", "allowlist"
                                             or "public" (the egress mode) */
    uint64_t run_timeout_ms;              /* a run's default timeout */
    uint64_t run_timeout_max_ms;          /* the largest run_task accepts */
    const char *default_model;            /* provider/model a run uses without model */
    const char *default_agent;            /* the agent a run uses without agent */
    const struct proxy_llm *llms;         /* the LLM providers a model may name (proxy_llms), */
    size_t nllms;                         /* or none known yet (0) */
};

/* The server's instructions for a model that has never seen it (allocated; the caller frees). */
char *tools_instructions(const struct tools_facts *f);

/* server_info */
void tools_server_register(struct mcp_server *srv);

struct sandbox_manager;

/* container_* on mgr; when mgr is NULL the tools are listed but answer with `unavailable`. */
/* Previews for container_preview (tools_container_preview.c); NULL: it answers unavailable. */
struct previews;
void tools_container_set_previews(struct previews *pv);
void tools_container_register(struct mcp_server *srv, struct sandbox_manager *mgr,
                              const char *unavailable, const struct tools_facts *f);

struct runs;
struct store;

/* run_task, get_result, list_runs, cancel_run (and the opencode_* aliases) on runs; when runs is
 * NULL they are listed but answer with `unavailable`. */
void tools_runs_register(struct mcp_server *srv, struct runs *runs, struct store *st,
                         const char *unavailable, const struct tools_facts *f);

/* ask_user, submit_plan, open_preview and add_evidence, the coding agents' own tools
 * (tools_agent.c), on the server the sandboxes reach at /agent/mcp. */
void tools_agent_register(struct mcp_server *srv, struct runs *runs, struct previews *previews);

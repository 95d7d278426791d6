#pragma once
/* Shared between the files of the protocol layer (mcp.c: revisions and dispatch; registry.c: the
 * server and its registries; call.c: a call's life and its replies; core.c: the core methods;
 * tasks.c; input.c); not for tools, which see only mcp.h. */

#include "mcp/mcp.h"

#include "base/seal.h"
#include "mcp/headers.h"

#define MCP_META_RELATED_TASK "io.modelcontextprotocol/related-task"
#define MCP_TASKS_EXTENSION "io.modelcontextprotocol/tasks"

/* The task source that owns task_id (by its prefix), or NULL when none does; *ctx is set to its
 * context. */
const struct mcp_task_source *mcp_server_task_source(const struct mcp_server *srv,
                                                     const char *task_id, void **ctx);
/* The i-th source in the order they were added, or NULL past the last. */
const struct mcp_task_source *mcp_server_task_source_at(const struct mcp_server *srv, size_t i,
                                                        void **ctx);

/* Whether the call speaks the stateless revision. */
bool mcp_call_modern(const struct mcp_call *call);

/* The call only waits to read: a client that goes away cancels it under every revision (older
 * ones otherwise let a call run on with its answer dropped). */
void mcp_call_cancel_on_close(struct mcp_call *call);

/* tasks.c: register tasks/get, tasks/result, tasks/list, tasks/cancel and tasks/update on srv. */
void mcp_tasks_register_methods(struct mcp_server *srv);

/* tasks.c: the task the call asked for, if the `task` parameter (2025-11-25 revisions) or the
 * extension (stateless revision) asks for one; the tool's support is checked by the caller.
 * Returns 0, or a JSON-RPC error code with msg. */
int mcp_tasks_check_request(const struct mcp_call *call, const json_t *params, bool *requested,
                            char *msg, size_t msglen);

/* input.c: what a request of the stateless revision carries for an input-required result
 * (SEP-2322); kept on the call, released by call.c when the call answers. */
struct mcp_input_slots {
    json_t *responses; /* params.inputResponses, checked to be an object of objects, or NULL */
    json_t *state;     /* the opened requestState, or NULL */
    char *target;      /* the tool or prompt name or resource URI, or NULL */
};
struct mcp_input_slots *mcp_call_input_slots(const struct mcp_call *call);
/* The JSON-RPC method of the call. */
const char *mcp_call_method(const struct mcp_call *call);
/* The request id of the HTTP request, for logs. */
const char *mcp_call_request_id(const struct mcp_call *call);
/* The key requestState is sealed with (SEAL_KEY_BYTES) and how long a state is good for. */
const unsigned char *mcp_call_input_key(const struct mcp_call *call, int64_t *ttl_ms);

/* input.c: whether method may be answered with an input-required result. */
bool mcp_input_method(const char *method);
/* input.c: check and keep the inputResponses and requestState of a request of the stateless
 * revision for method (mcp_input_method) before its handler runs. Returns 0, or a JSON-RPC error
 * code with msg. */
int mcp_input_begin(struct mcp_call *call, const json_t *params, char *msg, size_t msglen);

/* registry.c: the method registered under name, or NULL. */
const struct mcp_method_entry *mcp_server_find_method(const struct mcp_server *srv,
                                                      const char *name);
/* registry.c: the tool registered under name (hidden ones too), or NULL. */
const struct mcp_tool_entry *mcp_server_find_tool(const struct mcp_server *srv, const char *name);
/* registry.c: the server's name, version and the rest of its info as serverInfo shows them;
 * the caller owns the object. */
json_t *mcp_server_info_json(const struct mcp_server *srv);
/* registry.c: a failed call's structured content, {"error": {"code", "message"}}; the caller
 * owns the object. */
json_t *mcp_tool_error_json(enum mcp_tool_error code, const char *message);

/* call.c: the HTTP status of a JSON-RPC error: 200 under the older revisions except for
 * malformed requests, the code's own status under the stateless one. */
int mcp_error_status(int code, bool modern);
/* call.c: answer the exchange once with body (owned; NULL for an empty 202) unless it was
 * answered or detached already; it is answered afterwards. */
void mcp_exchange_reply_json(struct mcp_exchange *ex, int status, json_t *body);
/* call.c: the exchange's last call answered (or none was made): send a batch's replies and free
 * the exchange. */
void mcp_exchange_complete(struct mcp_exchange *ex);
/* call.c: the call was answered (by whatever sent its reply): free it, and complete its exchange
 * after the last one. */
void mcp_call_done(struct mcp_call *call);
/* call.c: add to result what the stateless revision puts in every result (resultType,
 * serverInfo, and for cacheable methods ttlMs and cacheScope); nothing for older revisions. */
void mcp_call_decorate_result(struct mcp_call *call, json_t *result);

/* mcp.c: whether v is one of the revisions before the stateless one. */
bool mcp_version_legacy(const char *v);
/* mcp.c: every revision this server speaks, newest first, as an array the caller owns. */
json_t *mcp_supported_versions(void);

/* core.c: the methods every server answers (initialize, ping, server/discover, tools/list,
 * tools/call); called by mcp_server_new. */
void mcp_core_register_methods(struct mcp_server *srv);

/* ---------- the protocol layer's objects ---------- */

struct mcp_method_entry {
    char *name;
    mcp_method_fn fn;
    void *ctx;
};

struct mcp_tool_entry {
    struct mcp_tool_def def;
    json_t *input_schema;
    json_t *output_schema;
    struct mcp_param_decl *params; /* its x-mcp-header annotations (SEP-2243), or NULL */
    size_t nparams;
};

struct mcp_source_entry {
    const char *prefix;
    const struct mcp_task_source *ops;
    void *ctx;
};

struct mcp_server {
    struct mcp_server_info info;
    struct mcp_method_entry *methods;
    size_t nmethods;
    struct mcp_tool_entry *tools;
    size_t ntools;
    json_t *capabilities;
    mcp_tool_observer_fn observer;
    /* the tools/list array and its whole result serialized, built on first use after the last
     * change: [0] legacy revisions, [1] the stateless revision */
    json_t *tools_listed[2];
    char *tools_result[2];
    struct mcp_source_entry sources[MCP_TASK_SOURCES_MAX];
    size_t nsources; /* 0: no tasks */
    size_t reply_budget;
    unsigned char input_key[SEAL_KEY_BYTES]; /* seals requestState */
    int64_t input_ttl_ms;
};

struct mcp_exchange {
    struct mcp_server *srv;
    const struct mcp_sink_ops *ops; /* NULL once detached or answered */
    void *sink;
    struct mcp_call *calls; /* pending calls */
    int pending;
    bool starting;
    bool batch;
    bool streaming;
    bool accepts_sse;
    json_t *batch_replies;
    struct mcp_principal principal;
    char request_id[64];
    const struct mcp_request_info *info; /* while mcp_exchange_start() runs, else NULL */
};

struct mcp_call {
    struct mcp_exchange *ex;
    struct mcp_call *next;
    json_t *id;
    json_t *progress_token;
    json_t *client_caps; /* _meta clientCapabilities (stateless revision), or NULL */
    char method[64];
    char version[16];
    bool modern;
    bool log_enabled;
    bool cancelled;
    bool cancel_on_close; /* cancelled by a client that goes away, whatever the revision */
    bool task_requested;
    const struct mcp_tool_entry *tool;
    int64_t started_ms;
    void (*on_cancel)(struct mcp_call *call, void *ctx);
    void *cancel_ctx;
    struct mcp_input_slots input;
};

#pragma once
/* The MCP server: protocol versions, the method and tool registries, and the processing of one
 * HTTP POST body (an "exchange") into JSON-RPC responses. Transport-neutral: the HTTP layer
 * checks method, auth and Origin, then hands the body here with a sink that writes the reply.
 * Everything here runs on the main loop thread. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define MCP_VERSION_MODERN "2026-07-28"
#define MCP_VERSION_LATEST_LEGACY "2025-11-25"
#define MCP_VERSION_DEFAULT "2025-03-26" /* assumed when a legacy request names none */

struct mcp_server;
struct mcp_exchange;
struct mcp_call;

/* Who is calling; filled by the HTTP layer from the bearer token. */
struct mcp_principal {
    char user_id[64];
    char user_name[128];
    /* What the credential acts for besides its user: a coding agent's token names its run ("" for
     * a person's token, and for an agent's sandbox none of whose runs is working now) */
    char acting_for[64];
};

/* One header of a request, not NUL-terminated: for Mcp-Param-{Name}, name is {Name}. */
struct mcp_header_value {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

/* How many Mcp-Param-* headers of one request the HTTP layer hands on (mcp/headers.h). */
#define MCP_PARAM_HEADERS_MAX 32

/* Headers and facts about one POST that the protocol layer needs. Strings are borrowed for the
 * duration of mcp_exchange_start(); NULL when absent. */
struct mcp_request_info {
    const char *protocol_version;          /* MCP-Protocol-Version */
    const char *mcp_method;                /* Mcp-Method */
    const char *mcp_name;                  /* Mcp-Name (may be =?base64?...?= encoded) */
    const struct mcp_header_value *params; /* Mcp-Param-* headers, at most MCP_PARAM_HEADERS_MAX */
    size_t nparams;
    bool params_truncated;  /* the request carried more Mcp-Param-* headers than params holds */
    bool accepts_sse;       /* Accept allows text/event-stream */
    const char *request_id; /* for logs */
    struct mcp_principal principal;
};

/* How an exchange writes its reply; implemented by the HTTP layer. After end() or reply() the
 * exchange never touches the sink again. */
struct mcp_sink_ops {
    /* One complete response: status and a JSON body (NULL for an empty 202). */
    void (*reply)(void *sink, int status, const char *body, size_t len);
    /* Start (on first call) or continue a text/event-stream response with one message. */
    void (*event)(void *sink, const char *json, size_t len);
    /* Finish the event stream. */
    void (*end)(void *sink);
};

/* --- server and registries --- */

struct mcp_server_info {
    const char *name;
    const char *title;
    const char *version;
    const char *description;
    const char *instructions;
    const char *website_url;
};

struct mcp_server *mcp_server_new(const struct mcp_server_info *info);
void mcp_server_free(struct mcp_server *srv);

/* Handler for a JSON-RPC method. params is never NULL (an empty object when absent). It must
 * eventually answer with mcp_call_reply() or mcp_call_error(), possibly later on the loop. */
typedef void (*mcp_method_fn)(struct mcp_call *call, const json_t *params, void *ctx);

/* Register an extra method (resources/..., prompts/...). The capability named (e.g. "resources")
 * is advertised with the given object (stolen, may be NULL for none). A method registered again
 * gets the new handler in place of the earlier one. */
void mcp_server_add_method(struct mcp_server *srv, const char *method, mcp_method_fn fn, void *ctx,
                           const char *capability, json_t *capability_value);
/* The handler registered for method and its context (*ctx), or NULL: for a module that takes
 * over a method to handle some of its requests and pass the others on. */
mcp_method_fn mcp_server_method(const struct mcp_server *srv, const char *method, void **ctx);

enum {
    MCP_TOOL_READ_ONLY = 1 << 0,
    MCP_TOOL_DESTRUCTIVE = 1 << 1,
    MCP_TOOL_IDEMPOTENT = 1 << 2,
    MCP_TOOL_OPEN_WORLD = 1 << 3,
    MCP_TOOL_HIDDEN = 1 << 4, /* callable but not listed (aliases) */
    MCP_TOOL_TASK = 1 << 5,   /* may run as a task (execution.taskSupport "optional") */
    /* must run as a task (execution.taskSupport "required"; implies MCP_TOOL_TASK): a call that
     * cannot have one is refused before the handler runs, with -32021 naming the tasks extension
     * under the stateless revision and -32601 under 2025-11-25 */
    MCP_TOOL_TASK_REQUIRED = 1 << 6,
};

/* A tool's handler: args has been validated against the input schema and is borrowed only for
 * the duration of the call (copy what an asynchronous handler keeps). */
typedef void (*mcp_tool_fn)(struct mcp_call *call, const json_t *args, void *ctx);

struct mcp_tool_def {
    const char *name;
    const char *title;
    const char *description;
    const char *input_schema;  /* JSON text */
    const char *output_schema; /* JSON text: the structuredContent of a success, or NULL */
    unsigned flags;
    mcp_tool_fn fn;
    void *ctx;
};

/* Register a tool; the schemas are parsed and checked, and a bad built-in schema aborts (a
 * programmer error). The output schema describes a successful call's structuredContent; the
 * registry adds the shape every failed call has (mcp_call_tool_fail): a property "error", and
 * the success's "required" moved into anyOf [{required: those}, {required: ["error"]}], so the
 * listed schema holds for both. Strings in def must outlive the server. */
void mcp_server_add_tool(struct mcp_server *srv, const struct mcp_tool_def *def);

/* The reply budget (REPLY_MAX_BYTES): the most bytes a tool's result, its content and
 * structuredContent together, should take as serialized JSON, so that model clients take it
 * whole. Tools that return large data (command output, file contents, listings) cut it to fit and
 * say so in the text. Set it before the tools are registered (some derive their limits from it). */
#define MCP_REPLY_BUDGET_DEFAULT 100000
void mcp_server_set_reply_budget(struct mcp_server *srv, size_t bytes);
size_t mcp_server_reply_budget(const struct mcp_server *srv);
size_t mcp_call_reply_budget(const struct mcp_call *call);

/* Names of the listed tools, in registration order (new reference). */
json_t *mcp_server_tool_names(const struct mcp_server *srv);

/* Observer called once per finished tools/call (for metrics). */
typedef void (*mcp_tool_observer_fn)(const char *tool, const char *outcome, double seconds);
void mcp_server_set_tool_observer(struct mcp_server *srv, mcp_tool_observer_fn fn);

/* --- exchanges --- */

/* Process one POST body. The reply is written through ops/sink, synchronously or later when
 * asynchronous tools finish. Returns the exchange while it is still pending (the transport calls
 * mcp_exchange_detach() if the client goes away first), or NULL when already complete. */
struct mcp_exchange *mcp_exchange_start(struct mcp_server *srv, const struct mcp_request_info *info,
                                        const char *body, size_t len,
                                        const struct mcp_sink_ops *ops, void *sink);

/* The client went away: drop the sink, cancel calls that honour cancellation, and log each call
 * still pending with what became of it (`mcp client-left ... call=cancelled|kept`). The exchange
 * frees itself once its calls have answered. */
void mcp_exchange_detach(struct mcp_exchange *ex);

/* --- calls (one JSON-RPC request) --- */

const struct mcp_principal *mcp_call_principal(const struct mcp_call *call);
/* The negotiated protocol version of this request. */
const char *mcp_call_protocol_version(const struct mcp_call *call);
/* The client capabilities this request declared in _meta (stateless revision; borrowed, valid
 * until the call answers), or NULL when it declared none or uses an older revision. */
const json_t *mcp_call_client_capabilities(const struct mcp_call *call);
/* Answer with a result object (stolen). For the modern revision resultType and serverInfo are
 * added here. */
void mcp_call_reply(struct mcp_call *call, json_t *result);
/* Answer with a JSON-RPC error; data is stolen (may be NULL). */
void mcp_call_error(struct mcp_call *call, int code, const char *message, json_t *data);
/* Tool results: content array (stolen, NULL: the structured content as JSON text), structured
 * content (stolen, may be NULL). Structured content is checked against the tool's output schema
 * (a mismatch is logged). An error result without structured content gets the error shape, code
 * failed, with the first text of content as its message. */
void mcp_call_tool_result(struct mcp_call *call, json_t *content, json_t *structured,
                          bool is_error);

/* Why a tool call failed, as clients see it in structuredContent.error.code. */
enum mcp_tool_error {
    MCP_TOOL_FAILED,            /* "failed": anything else */
    MCP_TOOL_INVALID_ARGUMENTS, /* "invalid_arguments": the arguments, as the message says */
    MCP_TOOL_NOT_FOUND,         /* "not_found": no such run, session, file or directory */
    MCP_TOOL_ALREADY_EXISTS,    /* "already_exists" */
    MCP_TOOL_PERMISSION_DENIED, /* "permission_denied" */
    MCP_TOOL_IS_A_DIRECTORY,    /* "is_a_directory" */
    MCP_TOOL_NOT_A_DIRECTORY,   /* "not_a_directory" */
    MCP_TOOL_NOT_EMPTY,         /* "not_empty": a directory deleted without recursive */
    MCP_TOOL_TOO_LARGE,         /* "too_large" */
    MCP_TOOL_NO_SPACE,          /* "no_space": the sandbox's disk is full */
    MCP_TOOL_BUSY,              /* "busy": at capacity or starting; retry later */
    MCP_TOOL_TIMED_OUT,         /* "timed_out" */
    MCP_TOOL_CANCELLED,         /* "cancelled": the client cancelled the call */
    MCP_TOOL_UNAVAILABLE,       /* "unavailable": this server cannot offer the tool now */
};
/* The code's name ("not_found"). */
const char *mcp_tool_error_name(enum mcp_tool_error code);
/* The code for a negative errno (-ENOENT: MCP_TOOL_NOT_FOUND; unknown ones MCP_TOOL_FAILED). */
enum mcp_tool_error mcp_tool_error_from_errno(int neg_errno);

/* A tool execution error: isError, the formatted message as text content and structuredContent
 * {"error": {"code": name of code, "message": the message}}. */
void mcp_call_tool_fail(struct mcp_call *call, enum mcp_tool_error code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with code MCP_TOOL_FAILED. */
void mcp_call_tool_error(struct mcp_call *call, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same from a struct err: its message, and the code its errno maps to. */
struct err;
void mcp_call_tool_err(struct mcp_call *call, const struct err *err);

/* Send notifications/progress if the request carried a progress token (else nothing).
 * total < 0 means unknown; message may be NULL. Progress values must increase. */
void mcp_call_progress(struct mcp_call *call, double progress, double total, const char *message);
/* Send notifications/message (a log line for this request); data is stolen. */
void mcp_call_log(struct mcp_call *call, const char *level, const char *logger, json_t *data);
/* Whether the request carried a progress token (a long tool may then stream). */
bool mcp_call_wants_progress(const struct mcp_call *call);

/* Register a callback run once if the request is cancelled (client closed its stream under the
 * stateless revision). The handler must still answer afterwards. */
void mcp_call_on_cancel(struct mcp_call *call, void (*fn)(struct mcp_call *call, void *ctx),
                        void *ctx);
bool mcp_call_cancelled(const struct mcp_call *call);

/* Whether the caller asked for this tools/call to run as a task: a `task` parameter under the
 * 2025-11-25 revisions, or the io.modelcontextprotocol/tasks extension among the request's
 * client capabilities under the stateless one. Only for tools flagged MCP_TOOL_TASK or
 * MCP_TOOL_TASK_REQUIRED, and only once a task source is registered. The handler then answers
 * with mcp_call_task_created(), or with a tool error when it refuses the call (sent as a -32602
 * error where a task was due under 2025-11-25). */
bool mcp_call_task_requested(const struct mcp_call *call);

/* --- tasks: long work a client polls (2025-11-25 experimental tasks; the stateless revision's
 * io.modelcontextprotocol/tasks extension). The protocol layer owns the wire shapes and methods
 * (tasks/get, tasks/result, tasks/list, tasks/cancel, tasks/update); a source says what a task
 * is. */

enum mcp_task_status {
    MCP_TASK_WORKING,
    MCP_TASK_INPUT_REQUIRED, /* waiting for the client: input_requests holds what it asks */
    MCP_TASK_COMPLETED,      /* result is the tool's CallToolResult (isError as tool_error says) */
    MCP_TASK_FAILED,         /* result is a JSON-RPC error object {code, message} */
    MCP_TASK_CANCELLED,      /* result, when set, is the CallToolResult the cancelled work left */
};

struct mcp_task {
    char id[64];
    enum mcp_task_status status;
    char *status_message; /* owned, or NULL */
    int64_t created_ms;   /* wall clock, ms since the epoch */
    int64_t updated_ms;
    int64_t ttl_ms;  /* kept this long after creation; -1 for as long as the server keeps it */
    int64_t poll_ms; /* suggested interval between polls; 0 for none */
    bool tool_error; /* completed with a tool error (2025-11-25 calls that `failed`) */
    json_t *result;  /* owned, or NULL; see the statuses */
    /* owned, or NULL: while MCP_TASK_INPUT_REQUIRED the outstanding requests by key, each an
     * InputRequest ({method, params}, e.g. elicitation/create) */
    json_t *input_requests;
};
void mcp_task_release(struct mcp_task *t);

/* Where tasks come from (the runs; the conformance fixtures). Every function is called on the
 * loop thread with the caller's user id; a task of another user is "not found". A task is
 * WORKING or INPUT_REQUIRED until it ends (the other statuses are terminal). */
struct mcp_task_source {
    /* Fill *out with task id (result too when want_result and the task has ended). 0, -ENOENT
     * when unknown, or another negative errno with err set. */
    int (*get)(void *ctx, const char *user_id, const char *id, bool want_result,
               struct mcp_task *out, struct err *err);
    /* Call cb(cb_ctx) once when task id may have ended (its end, or a while without one; the
     * caller looks again). Returns a handle for wait_cancel, or NULL when cb has already run. */
    void *(*wait)(void *ctx, const char *id, void (*cb)(void *cb_ctx), void *cb_ctx);
    void (*wait_cancel)(void *ctx, void *handle);
    /* Stop a task that has not ended; once this returns 0 get() reports MCP_TASK_CANCELLED.
     * -ENOENT, -EALREADY when it has ended, or another negative errno with err set. */
    int (*cancel)(void *ctx, const char *user_id, const char *id, struct err *err);
    /* The user's tasks, newest first, at most limit, after cursor (a value this function wrote
     * to next, or NULL for the first page): each() for every one, next set to "" on the last
     * page. -EINVAL for a cursor it did not issue. */
    int (*list)(void *ctx, const char *user_id, const char *cursor, unsigned limit,
                void (*each)(const struct mcp_task *t, void *each_ctx), void *each_ctx,
                char next[64], struct err *err);
    /* Deliver input to a task that is INPUT_REQUIRED: responses maps keys of its outstanding
     * input_requests to the client's results (borrowed; copy what is kept). Keys that are not
     * outstanding are ignored; an answered key leaves input_requests, and the task goes on
     * (WORKING, or INPUT_REQUIRED again with new keys) once none is left. 0; -ENOENT when
     * unknown; -EBUSY (err set) when the task is not waiting for input; another negative errno
     * with err set. NULL for a source whose tasks never ask for input. */
    int (*update)(void *ctx, const char *user_id, const char *id, const json_t *responses,
                  struct err *err);
};

/* Add a source of tasks (id_prefix, ops and ctx must outlive the server). The first one turns
 * tasks on: the capability (`tasks` for the 2025-11-25 revision, the extension in
 * server/discover), the methods, and execution.taskSupport on tools flagged MCP_TOOL_TASK or
 * MCP_TOOL_TASK_REQUIRED. A source owns the task ids that begin with id_prefix (non-empty; the
 * runs "run_", the fixtures "ftask_"), and makes only such ids: tasks/get, tasks/cancel,
 * tasks/update and tasks/result go to the source whose prefix the id has, and an id no source
 * claims is "not found". No prefix may begin another; at most MCP_TASK_SOURCES_MAX sources
 * (programmer errors abort). tasks/list pages through the sources in the order they were added,
 * each newest first. */
#define MCP_TASK_SOURCES_MAX 4
void mcp_server_add_task_source(struct mcp_server *srv, const char *id_prefix,
                                const struct mcp_task_source *ops, void *ctx);

/* Answer a tools/call for which mcp_call_task_requested() with the task it made, in the shape
 * the call's revision wants. note: what a model may be told meanwhile (2025-11-25's
 * model-immediate-response), or NULL. */
void mcp_call_task_created(struct mcp_call *call, const struct mcp_task *t, const char *note);

/* --- input-required results (SEP-2322, the stateless revision) ---
 * A tools/call, prompts/get or resources/read handler that needs something from the client (the
 * user's answer, a model's completion, the client's roots) answers with an InputRequiredResult
 * naming what it needs; the client gathers it and sends the same request again with the answers
 * in params.inputResponses and the requestState the server issued. Each round is a request of
 * its own: nothing waits on the server between rounds. What the handler must remember between
 * rounds goes into the state, which is sealed (the client can neither read nor alter it) and
 * bound to the user, the method, the tool, prompt or resource, and an expiry.
 * The protocol layer checks a retry before the handler runs: inputResponses must be an object of
 * result objects (at most MCP_INPUT_RESPONSES_MAX), requestState must open for this user and
 * request; else the client gets -32602 and the handler is not called. */

#define MCP_INPUT_RESPONSES_MAX 32
/* How long an issued requestState is good for when the server sets none (see
 * mcp_server_set_input_state). */
#define MCP_INPUT_STATE_TTL_DEFAULT_MS (3600 * 1000)

/* The key requestState is sealed with (SEAL_KEY_BYTES; copied) and how long a state is good for.
 * Nodes that serve the same users must share the key. Without a call a random key of the
 * process's own is used, with MCP_INPUT_STATE_TTL_DEFAULT_MS. */
void mcp_server_set_input_state(struct mcp_server *srv, const unsigned char *key, int64_t ttl_ms);

/* Input requests (a map value of inputRequests), new references. */
/* elicitation/create: message and requestedSchema (stolen; a flat object schema). */
json_t *mcp_input_elicit(const char *message, json_t *requested_schema);
/* sampling/createMessage: one user message of text, at most max_tokens. */
json_t *mcp_input_sample(const char *text, int max_tokens);
/* roots/list. */
json_t *mcp_input_roots(void);

/* Whether this call may ask the client for input by method ("elicitation/create",
 * "sampling/createMessage", "roots/list"): a request of the stateless revision that may be
 * answered so, whose client declared the capability the method needs. */
bool mcp_call_can_ask(const struct mcp_call *call, const char *method);

/* The client's answer to the input request key, when it is a well-formed result of method
 * (ElicitResult, CreateMessageResult, ListRootsResult), else NULL: absent, or not what was asked
 * (ask again). Borrowed, valid until the call answers. */
const json_t *mcp_call_input_response(const struct mcp_call *call, const char *key,
                                      const char *method);

/* The accepted content of an elicitation response when it matches schema (the requestedSchema
 * the request carried), else NULL; *declined is set when the user declined or cancelled. */
const json_t *mcp_input_accepted(const json_t *response, const json_t *schema, bool *declined);

/* The state this call's requestState carried, opened and checked, or NULL when it carried none.
 * Borrowed, valid until the call answers. */
const json_t *mcp_call_input_state(const struct mcp_call *call);

/* Answer with an InputRequiredResult: requests maps keys to input requests (stolen, at least
 * one), state is what the next round gets from mcp_call_input_state() (stolen, may be NULL: no
 * requestState). A request for a capability the client did not declare answers -32021 with the
 * missing capabilities instead (ask with mcp_call_can_ask() first where there is another way);
 * a call that cannot ask at all (an older revision, another method) is a programmer error,
 * answered -32603. */
void mcp_call_input_required(struct mcp_call *call, json_t *requests, json_t *state);

/* Whether a protocol version string is one this server speaks. */
bool mcp_version_supported(const char *v);

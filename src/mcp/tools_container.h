#pragma once
/* Shared by the files of the container_* tools (tools_container.c: the job, the sandbox's
 * acquisition, the schemas and registration; tools_container_exec.c; tools_container_files.c);
 * nothing outside them includes it. A job is one tool call: made by container_job_new, started
 * by container_job_start (which acquires the sandbox, then runs the operation its op names), and
 * freed by container_job_end once its call has been answered. Everything runs on the loop. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcp/mcp.h"
#include "mcp/reply.h"
#include "mcp/tools.h"
#include "sandbox/fsops.h"
#include "sandbox/sandbox.h"

#define COMMAND_MAX_BYTES (1 << 20) /* of a container_exec command line */
/* Where the output a reply leaves out is kept inside the sandbox: in its writable layer (so it
 * survives idle stops, and container_initialize discards it), outside /workspace (no noise in a
 * repository), the newest few files only (bounded disk). */
#define EXEC_SAVE_DIR "/var/tmp/exec-output"

enum op { OP_INIT, OP_PING, OP_EXEC, OP_WRITE, OP_READ, OP_LIST, OP_DELETE, OP_PREVIEW };

struct tools_container {
    struct sandbox_manager *mgr; /* NULL when sandboxes are unavailable */
    char *unavailable;           /* why, when mgr is NULL */
    uint64_t timeout_max;
    size_t output_bytes;
    size_t file_max_bytes;
    size_t read_max; /* the most a file read returns: what fits the reply budget as base64 */
};

/* A stream of a finished command, and how the reply shows it. */
struct saved_stream {
    struct reply_cut cut;
    char *path;  /* where the sandbox keeps it, when the reply leaves part of it out */
    char *error; /* why it could not be kept */
};

struct job {
    struct tools_container *t;
    struct mcp_call *call;
    enum op op;
    json_t *args;
    struct sandbox *sbx;
    struct sandbox_waiter *waiter;
    struct sandbox_exec *exec;
    int64_t t0;
    /* exec */
    char *command;
    char *cwd;
    char **env;
    char *stdin_data;
    size_t stdin_len;
    uint64_t timeout_ms;
    uint64_t streamed;
    bool cancelled;
    /* exec result (out and err copied), kept while the parts a reply leaves out are saved */
    struct sandbox_exec_result res;
    struct saved_stream saved[2];
    int saving;
    /* file operations */
    struct fsop_request req;
    unsigned char *data;
    size_t data_len;
};

static inline const char *container_str_arg(const json_t *args, const char *key)
{
    return json_string_value(json_object_get(args, key));
}

/* A job for call on the family's state t, holding args; NULL (the call answered unavailable)
 * when this server has no sandboxes. */
struct job *container_job_new(struct tools_container *t, struct mcp_call *call, const json_t *args,
                              enum op op);
/* Acquire the caller's sandbox (or its session's) and run the job's operation in it; the job is
 * answered and freed later, or before this returns. */
void container_job_start(struct job *j);
/* Release the job's sandbox and free the job. */
void container_job_end(struct job *j);
/* Free the job, which holds no sandbox. */
void container_job_free(struct job *j);

/* tools_container_exec.c: the sandbox_exec_start callbacks of a container_exec (and of
 * container_ping's probe, which has no output callback); ctx is the job. */
void container_exec_output(void *ctx, enum sandbox_stream s, const char *data, size_t len);
void container_exec_done(void *ctx, struct sandbox_exec_result *r, const struct err *err);
/* tools_container_exec.c: the container_exec tool; ctx is the struct tools_container. */
void container_tool_exec(struct mcp_call *call, const json_t *args, void *ctx);

/* tools_container_files.c: the sandbox_fs callback of the file tools; ctx is the job. */
void container_fs_done(void *ctx, json_t *res, const struct err *err);
/* tools_container_files.c: the largest image container_file_read returns as an image. */
size_t container_image_max(const struct tools_container *t);
/* tools_container_files.c: the file tools; ctx is the struct tools_container. */
void container_tool_file_write(struct mcp_call *call, const json_t *args, void *ctx);
void container_tool_file_read(struct mcp_call *call, const json_t *args, void *ctx);
void container_tool_files_list(struct mcp_call *call, const json_t *args, void *ctx);
void container_tool_file_delete(struct mcp_call *call, const json_t *args, void *ctx);

/* tools_container_preview.c: container_preview (ctx the struct tools_container), and its work
 * once the sandbox is up (the job answered and ended). */
void container_tool_preview(struct mcp_call *call, const json_t *args, void *ctx);
void container_preview_ready(struct job *j);

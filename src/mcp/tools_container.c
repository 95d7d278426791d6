/* container_*: the caller's own Linux sandbox (or a run session's, with session_id). Every tool
 * first acquires the sandbox (starting it when it is stopped), then runs a command or a file
 * operation in it, and answers when that finishes. */
#include "mcp/tools.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/utf8.h"
#include "base/util.h"
#include "mcp/mcp.h"
#include "sandbox/fsops.h"
#include "sandbox/sandbox.h"

#define ENV_MAX_VARS 256
#define ENV_MAX_BYTES (128 << 10)
#define COMMAND_MAX_BYTES (1 << 20)
#define PROGRESS_CHUNK_MAX (16 << 10)

enum op { OP_INIT, OP_PING, OP_EXEC, OP_WRITE, OP_READ, OP_LIST, OP_DELETE };

struct tools_container {
    struct sandbox_manager *mgr; /* NULL when sandboxes are unavailable */
    char *unavailable;           /* why, when mgr is NULL */
    uint64_t timeout_max;
    size_t output_bytes;
    size_t file_max_bytes;
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
    /* file operations */
    struct fsop_request req;
    unsigned char *data;
    size_t data_len;
};

static const char session_prop[] =
    "\"session_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
    "\"description\":\"Act on this run session's sandbox instead of your own\"}";

static void job_free(struct job *j)
{
    json_decref(j->args);
    free(j->command);
    free(j->cwd);
    for (size_t i = 0; j->env && j->env[i]; i++)
        free(j->env[i]);
    free(j->env);
    free(j->stdin_data);
    free(j->data);
    free(j);
}

static void job_end(struct job *j)
{
    if (j->sbx)
        sandbox_release(j->sbx);
    job_free(j);
}

static const char *str_arg(const json_t *args, const char *key)
{
    return json_string_value(json_object_get(args, key));
}

/* --- exec --- */

static void on_exec_output(void *ctx, enum sandbox_stream s, const char *data, size_t len)
{
    struct job *j = ctx;
    if (!mcp_call_wants_progress(j->call) || j->streamed >= j->t->output_bytes)
        return;
    /* Stream output as progress messages, up to the same cap as the final result. */
    while (len > 0 && j->streamed < j->t->output_bytes) {
        size_t n = len < PROGRESS_CHUNK_MAX ? len : PROGRESS_CHUNK_MAX;
        size_t clean_len;
        char *clean = utf8_sanitize(data, n, &clean_len);
        char *msg = xasprintf("%s%s", s == SANDBOX_STDERR ? "[stderr] " : "", clean);
        j->streamed += n;
        mcp_call_progress(j->call, (double)j->streamed, -1, msg);
        free(msg);
        free(clean);
        data += n;
        len -= n;
    }
}

static json_t *exec_text(const struct sandbox_exec_result *r)
{
    struct buf b;
    buf_init(&b, 0);
    if (r->signal)
        buf_printf(&b, "killed by signal %d%s (%llu ms)\n", r->signal,
                   r->timed_out ? " after the timeout" : "", (unsigned long long)r->duration_ms);
    else
        buf_printf(&b, "exit code %d (%llu ms)\n", r->exit_code,
                   (unsigned long long)r->duration_ms);
    /* the streams can be large: appended, not formatted */
    if (r->out_len) {
        buf_printf(&b, "--- stdout%s ---\n", r->out_truncated ? " (truncated)" : "");
        buf_append(&b, r->out, r->out_len);
        if (r->out[r->out_len - 1] != '\n')
            buf_puts(&b, "\n");
    }
    if (r->err_len) {
        buf_printf(&b, "--- stderr%s ---\n", r->err_truncated ? " (truncated)" : "");
        buf_append(&b, r->err, r->err_len);
        if (r->err[r->err_len - 1] != '\n')
            buf_puts(&b, "\n");
    }
    size_t n;
    char *text = buf_steal(&b, &n);
    /* The streams are valid UTF-8 already (sanitized when captured): no second check. */
    json_t *content =
        json_pack("[{s:s, s:o}]", "type", "text", "text", json_stringn_nocheck(text, n));
    free(text);
    return content;
}

static void on_exec_done(void *ctx, const struct sandbox_exec_result *r, const struct err *err)
{
    struct job *j = ctx;
    j->exec = NULL;
    if (err) {
        mcp_call_tool_error(j->call, "%s", err->msg);
        job_end(j);
        return;
    }
    if (j->op == OP_PING) {
        uint64_t mem = 0, procs = 0;
        sandbox_usage(j->sbx, &mem, &procs);
        json_t *d = sandbox_describe(j->sbx);
        json_object_set_new(d, "up", json_boolean(r->exit_code == 0));
        json_object_set_new(d, "memory_bytes", json_integer((json_int_t)mem));
        json_object_set_new(d, "processes", json_integer((json_int_t)procs));
        json_object_set_new(d, "answer_ms", json_integer((json_int_t)r->duration_ms));
        char *text = xasprintf(
            "sandbox %s is up: uptime %lld s, %llu processes, %.1f MiB in use", sandbox_id(j->sbx),
            (long long)json_integer_value(json_object_get(d, "uptime_ms")) / 1000,
            (unsigned long long)procs, (double)mem / (1 << 20));
        mcp_call_tool_result(j->call, json_pack("[{s:s, s:s}]", "type", "text", "text", text), d,
                             false);
        free(text);
        job_end(j);
        return;
    }
    json_t *sc = json_pack(
        "{s:i, s:b, s:o, s:o, s:b, s:b, s:I, s:I, s:I, s:b, s:s}", "exit_code", r->exit_code,
        "timed_out", r->timed_out, "stdout", json_stringn_nocheck(r->out, r->out_len), "stderr",
        json_stringn_nocheck(r->err, r->err_len), "stdout_truncated", r->out_truncated,
        "stderr_truncated", r->err_truncated, "stdout_bytes", (json_int_t)r->out_total,
        "stderr_bytes", (json_int_t)r->err_total, "duration_ms", (json_int_t)r->duration_ms,
        "truncated", r->out_truncated || r->err_truncated, "sandbox_id", sandbox_id(j->sbx));
    if (r->signal)
        json_object_set_new(sc, "signal", json_integer(r->signal));
    else
        json_object_set_new(sc, "signal", json_null());
    mcp_call_tool_result(j->call, exec_text(r), sc, false);
    job_end(j);
}

static void on_cancel(struct mcp_call *call, void *ctx)
{
    struct job *j = ctx;
    j->cancelled = true;
    if (j->exec)
        sandbox_exec_kill(j->exec);
    if (j->waiter) {
        sandbox_acquire_cancel(j->waiter);
        j->waiter = NULL;
        mcp_call_tool_error(j->call, "cancelled");
        job_end(j);
    }
}

/* --- file operations --- */

static json_t *fs_error(const json_t *res)
{
    const char *msg = json_string_value(json_object_get(res, "error"));
    return json_pack("[{s:s, s:s}]", "type", "text", "text", msg ? msg : "file operation failed");
}

static const char *type_mark(const char *type)
{
    return strcmp(type, "directory") == 0 ? "/" : strcmp(type, "symlink") == 0 ? "@" : "";
}

static json_t *listing_text(const json_t *res)
{
    struct buf b;
    buf_init(&b, 0);
    const json_t *entries = json_object_get(res, "entries");
    buf_printf(&b, "%s: %zu entries%s\n", json_string_value(json_object_get(res, "path")),
               json_array_size(entries),
               json_is_true(json_object_get(res, "truncated")) ? " (truncated)" : "");
    size_t i;
    const json_t *e;
    json_array_foreach(entries, i, e)
    {
        buf_printf(&b, "%s %10lld %s %s%s\n", json_string_value(json_object_get(e, "mode")),
                   (long long)json_integer_value(json_object_get(e, "size")),
                   json_string_value(json_object_get(e, "mtime")),
                   json_string_value(json_object_get(e, "name")),
                   type_mark(json_string_value(json_object_get(e, "type"))));
    }
    size_t n;
    char *text = buf_steal(&b, &n);
    /* The streams are valid UTF-8 already (sanitized when captured): no second check. */
    json_t *content =
        json_pack("[{s:s, s:o}]", "type", "text", "text", json_stringn_nocheck(text, n));
    free(text);
    return content;
}

static char *file_uri(const char *path)
{
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "file://");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (isalnum(*p) || strchr("/-._~", *p))
            buf_append(&b, p, 1);
        else
            buf_printf(&b, "%%%02X", *p);
    }
    return buf_steal(&b, NULL);
}

static void on_fs_done(void *ctx, json_t *res, const struct err *err)
{
    struct job *j = ctx;
    if (err) {
        mcp_call_tool_error(j->call, "%s", err->msg);
        job_end(j);
        return;
    }
    if (json_object_get(res, "error")) {
        json_t *sc = json_pack("{s:O, s:O}", "error", json_object_get(res, "error"), "errno",
                               json_object_get(res, "errno"));
        mcp_call_tool_result(j->call, fs_error(res), sc, true);
        json_decref(res);
        job_end(j);
        return;
    }
    json_t *content = NULL;
    const char *path = json_string_value(json_object_get(res, "path"));
    switch (j->op) {
    case OP_READ: {
        const char *type = json_string_value(json_object_get(res, "type"));
        if (type && strcmp(type, "directory") == 0) {
            content = listing_text(res);
            break;
        }
        char *uri = file_uri(path);
        json_t *resource =
            json_pack("{s:s, s:O}", "uri", uri, "mimeType", json_object_get(res, "mime_type"));
        free(uri);
        bool binary = json_is_true(json_object_get(res, "binary"));
        const char *key = binary ? "base64" : "text";
        json_object_set(resource, binary ? "blob" : "text", json_object_get(res, key));
        json_object_del(res, key);
        content = json_pack("[{s:s, s:o}]", "type", "resource", "resource", resource);
        break;
    }
    case OP_WRITE: {
        char *text =
            xasprintf("wrote %lld bytes to %s%s",
                      (long long)json_integer_value(json_object_get(res, "bytes_written")), path,
                      json_is_true(json_object_get(res, "created")) ? " (new file)" : "");
        content = json_pack("[{s:s, s:s}]", "type", "text", "text", text);
        free(text);
        break;
    }
    case OP_LIST: content = listing_text(res); break;
    case OP_DELETE: {
        char *text = xasprintf("deleted %s (%lld entries)", path,
                               (long long)json_integer_value(json_object_get(res, "deleted")));
        content = json_pack("[{s:s, s:s}]", "type", "text", "text", text);
        free(text);
        break;
    }
    default: break;
    }
    json_object_set_new(res, "sandbox_id", json_string(sandbox_id(j->sbx)));
    mcp_call_tool_result(j->call, content, res, false);
    job_end(j);
}

/* --- dispatch once the sandbox is up --- */

static void on_ready(void *ctx, struct sandbox *sbx, const struct err *err)
{
    struct job *j = ctx;
    j->waiter = NULL;
    if (err) {
        mcp_call_tool_error(j->call, "%s", err->msg);
        job_free(j);
        return;
    }
    j->sbx = sbx;
    if (j->cancelled) {
        mcp_call_tool_error(j->call, "cancelled");
        job_end(j);
        return;
    }
    struct err e = {0};
    switch (j->op) {
    case OP_INIT: {
        json_t *d = sandbox_describe(sbx);
        char *text = xasprintf("sandbox %s started fresh in %lld ms (template %s)", sandbox_id(sbx),
                               (long long)json_integer_value(json_object_get(d, "start_ms")),
                               json_string_value(json_object_get(d, "template")));
        mcp_call_tool_result(j->call, json_pack("[{s:s, s:s}]", "type", "text", "text", text), d,
                             false);
        free(text);
        job_end(j);
        return;
    }
    case OP_PING:
    case OP_EXEC: {
        struct sandbox_exec_opts o = {
            .command = j->op == OP_PING ? ":" : j->command,
            .cwd = j->cwd,
            .env = (const char *const *)j->env,
            .stdin_data = j->stdin_data,
            .stdin_len = j->stdin_len,
            .timeout_ms = j->op == OP_PING ? 10000 : j->timeout_ms,
        };
        j->exec = sandbox_exec_start(sbx, &o, j->op == OP_EXEC ? on_exec_output : NULL,
                                     on_exec_done, j, &e);
        if (!j->exec) {
            mcp_call_tool_error(j->call, "%s", e.msg);
            job_end(j);
        }
        return;
    }
    default:
        if (sandbox_fs(sbx, &j->req, on_fs_done, j, &e) < 0) {
            mcp_call_tool_error(j->call, "%s", e.msg);
            job_end(j);
        }
        return;
    }
}

static void start_job(struct job *j)
{
    const struct mcp_principal *who = mcp_call_principal(j->call);
    struct sandbox_acquire_opts o = {
        .user_id = who->user_id,
        .session_id = str_arg(j->args, "session_id"),
        .fresh = j->op == OP_INIT,
    };
    mcp_call_on_cancel(j->call, on_cancel, j);
    /* on_ready may run (and free j) before this returns; then no waiter comes back */
    struct sandbox_waiter *w = sandbox_acquire(j->t->mgr, &o, on_ready, j);
    if (w)
        j->waiter = w;
}

static struct job *job_new(struct tools_container *t, struct mcp_call *call, const json_t *args,
                           enum op op)
{
    if (!t->mgr) {
        mcp_call_tool_error(call, "sandboxes are not available on this server: %s", t->unavailable);
        return NULL;
    }
    struct job *j = xcalloc(1, sizeof(*j));
    j->t = t;
    j->call = call;
    j->op = op;
    j->args = json_incref((json_t *)args);
    j->t0 = time_mono_ms();
    return j;
}

/* --- tools --- */

static void tool_initialize(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct job *j = job_new(ctx, call, args, OP_INIT);
    if (j)
        start_job(j);
}

static void tool_ping(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct job *j = job_new(ctx, call, args, OP_PING);
    if (j)
        start_job(j);
}

static bool env_name_valid(const char *s)
{
    if (!*s || !(isalpha((unsigned char)*s) || *s == '_'))
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

static void tool_exec(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_container *t = ctx;
    const json_t *nested = json_object_get(args, "args");
    const char *command = str_arg(args, "command");
    size_t command_len = json_string_length(json_object_get(args, "command"));
    json_int_t timeout = json_integer_value(json_object_get(args, "timeout_ms"));
    if (nested) {
        /* The Cloudflare container server's form: {"args": {"args": "cmd", "timeout": ms}} */
        if (command)
            return mcp_call_tool_error(call, "give either command or args.args, not both");
        command = str_arg(nested, "args");
        command_len = json_string_length(json_object_get(nested, "args"));
        if (!timeout)
            timeout = json_integer_value(json_object_get(nested, "timeout"));
    }
    if (!command || !*command)
        return mcp_call_tool_error(call, "command is required (a shell command line)");
    if (strlen(command) != command_len)
        return mcp_call_tool_error(call, "command must not contain NUL bytes");
    if (timeout < 0 || (uint64_t)timeout > t->timeout_max)
        return mcp_call_tool_error(call, "timeout_ms must be between 1 and %llu",
                                   (unsigned long long)t->timeout_max);
    const json_t *env = json_object_get(args, "env");
    if (json_object_size(env) > ENV_MAX_VARS)
        return mcp_call_tool_error(call, "env has more than %d variables", ENV_MAX_VARS);
    const char *key;
    const json_t *val;
    size_t env_bytes = 0;
    json_object_foreach((json_t *)env, key, val)
    {
        if (!env_name_valid(key))
            return mcp_call_tool_error(
                call,
                "env name '%s' is not valid (letters, digits and '_', not starting with a "
                "digit)",
                key);
        if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val))
            return mcp_call_tool_error(call, "env.%s must be a string without NUL bytes", key);
        env_bytes += strlen(key) + json_string_length(val) + 2;
    }
    if (env_bytes > ENV_MAX_BYTES)
        return mcp_call_tool_error(call, "env is larger than %d bytes", ENV_MAX_BYTES);
    const char *cwd = str_arg(args, "cwd");
    if (cwd && strlen(cwd) != json_string_length(json_object_get(args, "cwd")))
        return mcp_call_tool_error(call, "cwd must not contain NUL bytes");
    struct job *j = job_new(t, call, args, OP_EXEC);
    if (!j)
        return;
    j->command = xstrdup(command);
    j->timeout_ms = (uint64_t)timeout;
    if (cwd) {
        /* relative to /workspace, like the file tools */
        char *norm = NULL;
        struct err e = {0};
        if (fsop_path_normalize("/workspace", cwd, strlen(cwd), &norm, &e) < 0) {
            mcp_call_tool_error(call, "cwd: %s", e.msg);
            job_free(j);
            return;
        }
        j->cwd = norm;
    }
    if (env) {
        j->env = xcalloc(json_object_size(env) + 1, sizeof(char *));
        size_t i = 0;
        json_object_foreach((json_t *)env, key, val) j->env[i++] =
            xasprintf("%s=%s", key, json_string_value(val));
    }
    const json_t *in = json_object_get(args, "stdin");
    if (in && json_string_length(in)) {
        j->stdin_len = json_string_length(in);
        j->stdin_data = xmalloc(j->stdin_len);
        memcpy(j->stdin_data, json_string_value(in), j->stdin_len);
    }
    start_job(j);
}

static int parse_mode(const json_t *v, int *out)
{
    if (!v) {
        *out = -1;
        return 0;
    }
    if (json_is_integer(v)) {
        json_int_t m = json_integer_value(v);
        if (m < 0 || m > 07777)
            return -1;
        *out = (int)m;
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s || !*s || strlen(s) > 5)
        return -1;
    int m = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '7')
            return -1;
        m = m * 8 + (*s - '0');
    }
    *out = m;
    return 0;
}

static bool set_path(struct job *j, const char *key)
{
    const json_t *p = json_object_get(j->args, key);
    j->req.path = json_string_value(p);
    j->req.path_len = json_string_length(p);
    j->req.cwd = "/workspace";
    j->req.protected_paths[0] = "/workspace";
    return true;
}

static void tool_file_write(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_container *t = ctx;
    const json_t *content = json_object_get(args, "content");
    const char *encoding = str_arg(args, "encoding");
    bool b64 = encoding && strcmp(encoding, "base64") == 0;
    int mode;
    if (parse_mode(json_object_get(args, "mode"), &mode) < 0)
        return mcp_call_tool_error(call, "mode must be octal digits like \"0644\" (or an integer "
                                         "up to 4095)");
    unsigned char *data = NULL;
    size_t len = json_string_length(content);
    if (b64) {
        data = xmalloc(len / 4 * 3 + 4);
        ssize_t n = base64_decode(json_string_value(content), len, data);
        if (n < 0) {
            free(data);
            return mcp_call_tool_error(call, "content is not valid base64");
        }
        len = (size_t)n;
    } else {
        data = xmalloc(len + 1);
        memcpy(data, json_string_value(content), len);
    }
    if (len > t->file_max_bytes) {
        free(data);
        return mcp_call_tool_error(call, "content is %zu bytes; the limit is %zu bytes", len,
                                   t->file_max_bytes);
    }
    struct job *j = job_new(t, call, args, OP_WRITE);
    if (!j) {
        free(data);
        return;
    }
    j->data = data;
    set_path(j, "path");
    j->req.kind = FSOP_WRITE;
    j->req.data = data;
    j->req.data_len = len;
    j->req.append = json_is_true(json_object_get(args, "append"));
    j->req.mode = mode;
    start_job(j);
}

static void tool_file_read(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_container *t = ctx;
    struct job *j = job_new(t, call, args, OP_READ);
    if (!j)
        return;
    set_path(j, "path");
    j->req.kind = FSOP_READ;
    j->req.offset = (uint64_t)json_integer_value(json_object_get(args, "offset"));
    j->req.max_bytes = (size_t)json_integer_value(json_object_get(args, "max_bytes"));
    start_job(j);
}

static void tool_files_list(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_container *t = ctx;
    struct job *j = job_new(t, call, args, OP_LIST);
    if (!j)
        return;
    set_path(j, "path");
    j->req.kind = FSOP_LIST;
    j->req.recursive = json_is_true(json_object_get(args, "recursive"));
    j->req.max_entries = (size_t)json_integer_value(json_object_get(args, "max_entries"));
    start_job(j);
}

static void tool_file_delete(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_container *t = ctx;
    struct job *j = job_new(t, call, args, OP_DELETE);
    if (!j)
        return;
    set_path(j, "path");
    j->req.kind = FSOP_DELETE;
    j->req.recursive = json_is_true(json_object_get(args, "recursive"));
    start_job(j);
}

/* --- schemas and registration --- */

#define OBJ(props) "{\"type\":\"object\",\"properties\":{" props "},\"additionalProperties\":false}"
#define OBJ_REQ(props, req)                                                                        \
    "{\"type\":\"object\",\"properties\":{" props "},\"required\":[" req                           \
    "],\"additionalProperties\":false}"
#define PATH_PROP(desc)                                                                            \
    "\"path\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,\"description\":\"" desc "\"}"

static const char schema_session_only[] = OBJ("\"session_id\":{\"type\":\"string\",\"minLength\":1,"
                                              "\"maxLength\":64,\"description\":\"Act on this run "
                                              "session's sandbox instead of your own\"}");

static char *exec_schema(uint64_t timeout_max)
{
    return xasprintf(
        "{\"type\":\"object\",\"properties\":{"
        "\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":%d,"
        "\"description\":\"Shell command line, run as /bin/sh -c COMMAND\"},"
        "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":%llu,"
        "\"description\":\"Kill the command and everything it started after this long "
        "(default 60000)\"},"
        "\"cwd\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,"
        "\"description\":\"Working directory; relative paths are under /workspace (the "
        "default)\"},"
        "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
        "\"description\":\"Extra environment variables\"},"
        "\"stdin\":{\"type\":\"string\",\"description\":\"Text fed to the command's standard "
        "input\"},"
        "\"args\":{\"type\":\"object\",\"properties\":{\"args\":{\"type\":\"string\"},"
        "\"timeout\":{\"type\":\"integer\",\"minimum\":1}},\"required\":[\"args\"],"
        "\"description\":\"Alternative form {args: command, timeout: ms}, as the Cloudflare "
        "container server takes it\"},"
        "%s},\"additionalProperties\":false}",
        COMMAND_MAX_BYTES, (unsigned long long)timeout_max, session_prop);
}

static const char exec_output[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"exit_code\":{\"type\":\"integer\"},\"signal\":{\"type\":[\"integer\",\"null\"]},"
    "\"timed_out\":{\"type\":\"boolean\"},\"stdout\":{\"type\":\"string\"},"
    "\"stderr\":{\"type\":\"string\"},\"stdout_truncated\":{\"type\":\"boolean\"},"
    "\"stderr_truncated\":{\"type\":\"boolean\"},\"truncated\":{\"type\":\"boolean\"},"
    "\"stdout_bytes\":{\"type\":\"integer\"},\"stderr_bytes\":{\"type\":\"integer\"},"
    "\"duration_ms\":{\"type\":\"integer\"},\"sandbox_id\":{\"type\":\"string\"}},"
    "\"required\":[\"exit_code\",\"timed_out\",\"stdout\",\"stderr\",\"duration_ms\"]}";

static const char write_schema[] = OBJ_REQ(
    PATH_PROP(
        "File path; relative paths are under /workspace") ","
                                                          "\"content\":{\"type\":\"string\","
                                                          "\"description\":\"File content, as text "
                                                          "or base64\"},"
                                                          "\"encoding\":{\"type\":\"string\","
                                                          "\"enum\":[\"utf8\",\"base64\"],"
                                                          "\"description\":\"How "
                                                          "content is encoded (default utf8)\"},"
                                                          "\"append\":{\"type\":\"boolean\","
                                                          "\"description\":\"Append instead of "
                                                          "replacing\"},"
                                                          "\"mode\":{\"anyOf\":[{\"type\":"
                                                          "\"string\",\"minLength\":1,"
                                                          "\"maxLength\":5},{\"type\":"
                                                          "\"integer\",\"minimum\":0,\"maximum\":"
                                                          "4095}],\"description\":\"Permissions, "
                                                          "octal like "
                                                          "\\\"0755\\\"\"},"
                                                          "\"session_id\":{\"type\":\"string\","
                                                          "\"minLength\":1,\"maxLength\":64}",
    "\"path\",\"content\"");

static const char read_schema[] =
    OBJ_REQ(PATH_PROP("File or directory path; relative paths are under "
                      "/workspace") ","
                                    "\"offset\":{\"type\":\"integer\","
                                    "\"minimum\":0,\"description\":\"Byte "
                                    "offset to start at\"},"
                                    "\"max_bytes\":{\"type\":\"integer\","
                                    "\"minimum\":1,\"maximum\":8388608,"
                                    "\"description\":"
                                    "\"Most bytes to return (default 1 "
                                    "MiB)\"},"
                                    "\"session_id\":{\"type\":\"string\","
                                    "\"minLength\":1,\"maxLength\":64}",
            "\"path\"");

static const char list_schema[] = OBJ(PATH_PROP(
    "Directory to list (default /workspace)") ","
                                              "\"recursive\":{\"type\":\"boolean\",\"description\":"
                                              "\"Descend into subdirectories\"},"
                                              "\"max_entries\":{\"type\":\"integer\",\"minimum\":1,"
                                              "\"maximum\":100000,\"description\":"
                                              "\"Most entries to return (default 1000)\"},"
                                              "\"session_id\":{\"type\":\"string\",\"minLength\":1,"
                                              "\"maxLength\":64}");

static const char delete_schema[] =
    OBJ_REQ(PATH_PROP("File or directory to delete; relative paths are under "
                      "/workspace") ","
                                    "\"recursive\":{\"type\":\"boolean\","
                                    "\"description\":\"Delete a directory and "
                                    "everything "
                                    "in it\"},"
                                    "\"session_id\":{\"type\":\"string\","
                                    "\"minLength\":1,\"maxLength\":64}",
            "\"path\"");

static struct tools_container the_tools;

void tools_container_register(struct mcp_server *srv, struct sandbox_manager *mgr,
                              const char *unavailable, const struct sandbox_config *cfg)
{
    struct tools_container *t = &the_tools;
    t->mgr = mgr;
    free(t->unavailable);
    t->unavailable = xstrdup(unavailable ? unavailable : "unknown reason");
    t->timeout_max = cfg->exec_timeout_max;
    t->output_bytes = cfg->output_bytes;
    t->file_max_bytes = cfg->file_max_bytes;
    static char *exec_in;
    free(exec_in);
    exec_in = exec_schema(cfg->exec_timeout_max);
    const struct mcp_tool_def defs[] = {
        {"container_initialize", "Start a fresh sandbox",
         "(Re)start your Linux sandbox from a clean state: its processes are killed and its "
         "files (writable layer and /workspace) discarded. Returns the sandbox id, template, "
         "limits and how long the start took. The other container tools start the sandbox by "
         "themselves; call this only to start over.",
         schema_session_only, NULL, MCP_TOOL_DESTRUCTIVE, tool_initialize, t},
        {"container_ping", "Check the sandbox",
         "Check that your sandbox is up and answering (runs a trivial process in it); reports "
         "uptime, memory in use and the number of processes.",
         schema_session_only, NULL, MCP_TOOL_READ_ONLY, tool_ping, t},
        {"container_exec", "Run a command",
         "Run a shell command (/bin/sh -c) in your isolated Linux sandbox, in /workspace by "
         "default. Returns stdout, stderr, the exit code or signal, and whether it timed out. "
         "Output is capped at 1 MiB per stream (head and tail kept). Background processes "
         "(nohup cmd &) keep running after the call returns. Send a progress token to get "
         "output as it arrives.",
         exec_in, exec_output, MCP_TOOL_DESTRUCTIVE | MCP_TOOL_OPEN_WORLD, tool_exec, t},
        {"container_file_write", "Write a file",
         "Write a file in your sandbox (relative paths are under /workspace), creating parent "
         "directories. The write is atomic: a failed write leaves the old file as it was.",
         write_schema, NULL, MCP_TOOL_DESTRUCTIVE | MCP_TOOL_IDEMPOTENT, tool_file_write, t},
        {"container_file_read", "Read a file",
         "Read a file from your sandbox (relative paths are under /workspace). Text comes back "
         "as text, binary content as base64; a directory returns its listing.",
         read_schema, NULL, MCP_TOOL_READ_ONLY, tool_file_read, t},
        {"container_files_list", "List files",
         "List a directory in your sandbox (default /workspace) with type, size, mtime and "
         "mode of each entry; optionally recursive.",
         list_schema, NULL, MCP_TOOL_READ_ONLY, tool_files_list, t},
        {"container_file_delete", "Delete a file",
         "Delete a file or directory (recursive) in your sandbox. Refuses / and /workspace "
         "itself; a missing path is an error.",
         delete_schema, NULL, MCP_TOOL_DESTRUCTIVE, tool_file_delete, t},
    };
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++)
        mcp_server_add_tool(srv, &defs[i]);
}

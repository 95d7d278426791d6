/* container_exec: a command in the sandbox, its output streamed as progress while it runs, and
 * its reply: what fits the reply budget, head and tail of each stream, with the rest kept in a
 * file inside the sandbox (EXEC_SAVE_DIR) that the reply names. */
#include "mcp/tools_container.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/ids.h"
#include "base/json_write.h"
#include "base/log.h"
#include "base/utf8.h"
#include "base/util.h"

#define ENV_MAX_VARS 256
#define ENV_MAX_BYTES (128 << 10)
#define PROGRESS_CHUNK_MAX (16 << 10)
#define EXEC_SAVE_KEEP 8

void container_exec_output(void *ctx, enum sandbox_stream s, const char *data, size_t len)
{
    struct job *j = ctx;
    /* Stream output as progress messages, up to what the sandbox keeps and the reply budget. */
    size_t cap = j->t->output_bytes;
    if (cap > mcp_call_reply_budget(j->call))
        cap = mcp_call_reply_budget(j->call);
    if (!mcp_call_wants_progress(j->call) || j->streamed >= cap)
        return;
    while (len > 0 && j->streamed < cap) {
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

/* --- exec replies: what fits the reply budget, the rest kept in the sandbox --- */

struct stream_view {
    const char *name;
    const char *data;
    size_t len;
    uint64_t total; /* bytes the command wrote */
    bool kept_all;  /* the sandbox kept all of them (else its head and tail) */
};

static struct stream_view stream_of(const struct job *j, int i)
{
    const struct sandbox_exec_result *r = &j->res;
    if (i == 0)
        return (struct stream_view){"stdout", r->out, r->out_len, r->out_total, !r->out_truncated};
    return (struct stream_view){"stderr", r->err, r->err_len, r->err_total, !r->err_truncated};
}

static bool stream_cut(const struct job *j, int i)
{
    return j->saved[i].cut.head < stream_of(j, i).len;
}

/* head, the note on a line of its own, tail */
static void append_cut(struct buf *b, const struct stream_view *v, struct reply_cut cut,
                       const char *note)
{
    buf_append(b, v->data, cut.head);
    if (cut.head && v->data[cut.head - 1] != '\n')
        buf_puts(b, "\n");
    buf_printf(b, "%s\n", note);
    buf_append(b, v->data + cut.tail, v->len - cut.tail);
}

/* What the model reads about the part of a stream the reply leaves out: how much, where the
 * sandbox keeps it and the call that reads on. */
static char *cut_note(const struct job *j, int i)
{
    struct stream_view v = stream_of(j, i);
    const struct saved_stream *s = &j->saved[i];
    size_t left = s->cut.tail - s->cut.head;
    if (s->error)
        return xasprintf("[... %zu bytes not shown; they could not be kept in the sandbox: %s ...]",
                         left, s->error);
    if (!s->path)
        return xasprintf("[... %zu bytes not shown ...]", left);
    struct buf b;
    buf_init(&b, 0);
    buf_printf(&b,
               "[... %zu bytes not shown. The sandbox keeps this %s in %s (%zu bytes): continue "
               "with container_file_read {\"path\": \"%s\", \"offset\": %zu}; the part shown "
               "below starts at offset %zu.",
               left, v.name, s->path, v.len, s->path, s->cut.head, s->cut.tail);
    if (!v.kept_all)
        buf_printf(
            &b,
            " That file holds the first and last %zu bytes the command wrote; the %llu "
            "between them were not kept (redirect the output to a file to keep all of it).",
            j->t->output_bytes / 2,
            (unsigned long long)(v.total > j->t->output_bytes ? v.total - j->t->output_bytes : 0));
    buf_puts(&b, " ...]");
    return buf_steal(&b, NULL);
}

static void stream_text(struct buf *b, const struct job *j, int i)
{
    struct stream_view v = stream_of(j, i);
    if (!v.len)
        return;
    struct reply_cut cut = j->saved[i].cut;
    if (!stream_cut(j, i)) {
        if (v.kept_all)
            buf_printf(b, "--- %s ---\n", v.name);
        else
            buf_printf(b,
                       "--- %s (truncated: %llu bytes written, the first and last %zu kept) ---\n",
                       v.name, (unsigned long long)v.total, j->t->output_bytes / 2);
        buf_append(b, v.data, v.len);
    } else {
        buf_printf(b, "--- %s (%llu bytes written; shown: the first %zu and the last %zu) ---\n",
                   v.name, (unsigned long long)v.total, cut.head, v.len - cut.tail);
        char *note = cut_note(j, i);
        append_cut(b, &v, cut, note);
        free(note);
    }
    if (b->data[b->len - 1] != '\n')
        buf_puts(b, "\n");
}

static json_t *exec_content(const struct job *j)
{
    const struct sandbox_exec_result *r = &j->res;
    struct buf b;
    buf_init(&b, 0);
    if (r->signal)
        buf_printf(&b, "killed by signal %d%s (%llu ms)\n", r->signal,
                   r->timed_out ? " after the timeout" : "", (unsigned long long)r->duration_ms);
    else
        buf_printf(&b, "exit code %d (%llu ms)\n", r->exit_code,
                   (unsigned long long)r->duration_ms);
    stream_text(&b, j, 0);
    stream_text(&b, j, 1);
    char disk[400];
    if (r->exit_code != 0 && sandbox_disk_note(j->sbx, disk, sizeof(disk)))
        buf_printf(&b, "\nnote: %s\n", disk);
    /* The streams are valid UTF-8 already (sanitized when captured, cut on character
     * boundaries): no second check. */
    return reply_text_content(&b);
}

/* The stream as structuredContent carries it: whole, or head and tail around a short note. */
static json_t *stream_json(const struct job *j, int i)
{
    struct stream_view v = stream_of(j, i);
    if (!stream_cut(j, i))
        return json_stringn_nocheck(v.data, v.len);
    const struct saved_stream *s = &j->saved[i];
    char note[160];
    snprintf(note, sizeof(note), "[... %zu bytes not shown%s%s%s ...]", s->cut.tail - s->cut.head,
             s->path ? ": read " : "", s->path ? v.name : "",
             s->path ? "_file from its offset" : "");
    struct buf b;
    buf_init(&b, 0);
    append_cut(&b, &v, s->cut, note);
    size_t n;
    char *text = buf_steal(&b, &n);
    json_t *str = json_stringn_nocheck(text, n);
    free(text);
    return str;
}

static json_t *exec_structured(const struct job *j)
{
    const struct sandbox_exec_result *r = &j->res;
    bool out_cut = stream_cut(j, 0), err_cut = stream_cut(j, 1);
    json_t *sc = json_pack(
        "{s:i, s:b, s:o, s:o, s:b, s:b, s:I, s:I, s:I, s:b, s:s}", "exit_code", r->exit_code,
        "timed_out", r->timed_out, "stdout", stream_json(j, 0), "stderr", stream_json(j, 1),
        "stdout_truncated", r->out_truncated || out_cut, "stderr_truncated",
        r->err_truncated || err_cut, "stdout_bytes", (json_int_t)r->out_total, "stderr_bytes",
        (json_int_t)r->err_total, "duration_ms", (json_int_t)r->duration_ms, "truncated",
        r->out_truncated || r->err_truncated || out_cut || err_cut, "sandbox_id",
        sandbox_id(j->sbx));
    json_object_set_new(sc, "signal", r->signal ? json_integer(r->signal) : json_null());
    char disk[400];
    if (r->exit_code != 0 && sandbox_disk_note(j->sbx, disk, sizeof(disk)))
        json_object_set_new(sc, "note", json_string(disk));
    for (int i = 0; i < 2; i++) {
        const struct saved_stream *s = &j->saved[i];
        bool kept = stream_cut(j, i) && s->path;
        char key[32];
        snprintf(key, sizeof(key), "%s_file", stream_of(j, i).name);
        json_object_set_new(sc, key, kept ? json_string(s->path) : json_null());
        snprintf(key, sizeof(key), "%s_file_offset", stream_of(j, i).name);
        json_object_set_new(sc, key, kept ? json_integer((json_int_t)s->cut.head) : json_null());
    }
    return sc;
}

/* What a result holds besides its two streams, at most, as serialized JSON in both copies: the
 * text's headers, the structured fields and names, a sandbox id, a disk note (under 400 bytes
 * of plain text). */
#define EXEC_FIXED_MAX 8192

/* Name the files the streams would be kept in, should the reply cut them (named after the
 * time, so that pruning by name drops the oldest). */
static void exec_name_files(struct job *j)
{
    char stamp[32], rnd[8];
    int64_t now = time_now_ms();
    time_t secs = (time_t)(now / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
    unsigned char raw[3];
    rand_bytes(raw, sizeof(raw));
    rnd[base64url_encode(raw, sizeof(raw), rnd)] = '\0';
    for (int i = 0; i < 2; i++)
        j->saved[i].path = xasprintf("%s/%s.%03dZ-%s.%s", EXEC_SAVE_DIR, stamp, (int)(now % 1000),
                                     rnd, stream_of(j, i).name);
}

/* Choose the cuts of both streams so that the whole result fits the budget, and build it into
 * *content and *sc. Each stream is shown twice, in the text and in structuredContent, so each
 * copy gets half of what is left after the rest of the result; the smaller stream keeps up to
 * half of that, the larger the rest. */
static void exec_fit(struct job *j, json_t **content, json_t **sc)
{
    size_t budget = mcp_call_reply_budget(j->call);
    size_t avail = budget > REPLY_SLACK ? budget - REPLY_SLACK : 0;
    size_t per_copy = avail / 2, cost[2];
    for (int i = 0; i < 2; i++) {
        /* past what one copy may take, the exact cost does not change the shares */
        struct stream_view v = stream_of(j, i);
        cost[i] = json_string_cost_upto(v.data, v.len, per_copy);
    }
    /* Streams this small fit whole with room to spare: nothing to cut, keep or measure. */
    if (cost[0] + cost[1] <= per_copy && 2 * (cost[0] + cost[1]) + EXEC_FIXED_MAX <= avail) {
        for (int i = 0; i < 2; i++)
            j->saved[i].cut = (struct reply_cut){stream_of(j, i).len, stream_of(j, i).len};
        *content = exec_content(j);
        *sc = exec_structured(j);
        return;
    }
    exec_name_files(j);
    for (int round = 0;; round++) {
        size_t share[2];
        reply_share(cost[0], cost[1], per_copy, &share[0], &share[1]);
        for (int i = 0; i < 2; i++) {
            struct stream_view v = stream_of(j, i);
            j->saved[i].cut = reply_cut_text(v.data, v.len, share[i]);
        }
        *content = exec_content(j);
        *sc = exec_structured(j);
        size_t total = reply_result_cost(*content, *sc);
        if (total <= avail || per_copy == 0 || round == 7)
            return;
        json_decref(*content);
        json_decref(*sc);
        size_t step = (total - avail) / 2 + 64;
        per_copy = per_copy > step ? per_copy - step : 0;
    }
}

static void save_failed(struct saved_stream *s, const char *msg)
{
    free(s->path);
    s->path = NULL;
    free(s->error);
    s->error = xstrndup(msg, 200);
}

static void exec_save_next(struct job *j);

static void on_saved(void *ctx, json_t *res, const struct err *err)
{
    struct job *j = ctx;
    struct saved_stream *s = &j->saved[j->saving - 1];
    const char *msg = err ? err->msg : json_string_value(json_object_get(res, "error"));
    if (msg) {
        log_warn("mcp exec-output-save-failed sbx=%s path=%s err=\"%s\"", sandbox_id(j->sbx),
                 s->path, msg);
        save_failed(s, msg);
    }
    json_decref(res);
    exec_save_next(j);
}

/* Write the streams the reply cut into the sandbox, one after the other, then let the calls
 * held back meanwhile in. */
static void exec_save_next(struct job *j)
{
    while (j->saving < 2) {
        struct saved_stream *s = &j->saved[j->saving++];
        if (!s->path)
            continue;
        struct stream_view v = stream_of(j, j->saving - 1);
        j->req = (struct fsop_request){
            .kind = FSOP_WRITE,
            .path = s->path,
            .path_len = strlen(s->path),
            .cwd = "/",
            .data = (const unsigned char *)v.data,
            .data_len = v.len,
            .mode = -1,
            .keep = EXEC_SAVE_KEEP,
        };
        struct err e = {0};
        if (sandbox_fs(j->sbx, &j->req, on_saved, j, &e) == 0)
            return;
        log_warn("mcp exec-output-save-failed sbx=%s path=%s err=\"%s\"", sandbox_id(j->sbx),
                 s->path, e.msg);
        save_failed(s, e.msg);
    }
    sandbox_barrier(j->sbx, false);
    container_job_end(j);
}

/* The command has finished: keep its result, fit it to the budget, and save what the reply
 * cannot show (streams are named after the time, so that pruning by name drops the oldest). */
static void exec_finished(struct job *j, struct sandbox_exec_result *r)
{
    j->res = *r; /* the streams taken, not copied */
    r->out = r->err = NULL;
    /* The path of a stream shown whole appears nowhere in the result: dropping it after the
     * fit changes nothing of it. */
    json_t *content, *sc;
    exec_fit(j, &content, &sc);
    for (int i = 0; i < 2; i++)
        if (!stream_cut(j, i)) {
            free(j->saved[i].path);
            j->saved[i].path = NULL;
        }
    /* The reply goes at once; what it cut is saved after it, and the sandbox's next call waits
     * for that (sandbox_barrier), so that a read of stdout_file finds it whole. */
    mcp_call_tool_result(j->call, content, sc, false);
    j->call = NULL;
    if (!j->saved[0].path && !j->saved[1].path) {
        container_job_end(j);
        return;
    }
    sandbox_barrier(j->sbx, true);
    exec_save_next(j);
}

void container_exec_done(void *ctx, struct sandbox_exec_result *r, const struct err *err)
{
    struct job *j = ctx;
    j->exec = NULL;
    if (err) {
        mcp_call_tool_err(j->call, err);
        container_job_end(j);
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
        const char *note = json_string_value(json_object_get(d, "template_note"));
        char *text = xasprintf(
            "sandbox %s is up: uptime %lld s, %llu processes, %.1f MiB in use (template %s)%s%s",
            sandbox_id(j->sbx),
            (long long)json_integer_value(json_object_get(d, "uptime_ms")) / 1000,
            (unsigned long long)procs, (double)mem / (1 << 20),
            json_string_value(json_object_get(d, "template")), note ? "\n\n" : "",
            note ? note : "");
        mcp_call_tool_result(j->call, json_pack("[{s:s, s:s}]", "type", "text", "text", text), d,
                             false);
        free(text);
        container_job_end(j);
        return;
    }
    exec_finished(j, r);
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

void container_tool_exec(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_container *t = ctx;
    const json_t *nested = json_object_get(args, "args");
    const char *command = container_str_arg(args, "command");
    size_t command_len = json_string_length(json_object_get(args, "command"));
    json_int_t timeout = json_integer_value(json_object_get(args, "timeout_ms"));
    if (nested) {
        /* The Cloudflare container server's form: {"args": {"args": "cmd", "timeout": ms}} */
        if (command)
            return mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                                      "give either command or args.args, not both");
        command = container_str_arg(nested, "args");
        command_len = json_string_length(json_object_get(nested, "args"));
        if (!timeout)
            timeout = json_integer_value(json_object_get(nested, "timeout"));
    }
    if (!command || !*command)
        return mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                                  "command is required (a shell command line)");
    if (strlen(command) != command_len)
        return mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                                  "command must not contain NUL bytes");
    if (timeout < 0 || (uint64_t)timeout > t->timeout_max)
        return mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                                  "timeout_ms must be between 1 and %llu",
                                  (unsigned long long)t->timeout_max);
    const json_t *env = json_object_get(args, "env");
    if (json_object_size(env) > ENV_MAX_VARS)
        return mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                                  "env has more than %d variables", ENV_MAX_VARS);
    const char *key;
    const json_t *val;
    size_t env_bytes = 0;
    json_object_foreach((json_t *)env, key, val)
    {
        if (!env_name_valid(key))
            return mcp_call_tool_fail(
                call, MCP_TOOL_INVALID_ARGUMENTS,
                "env name '%s' is not valid (letters, digits and '_', not starting with a "
                "digit)",
                key);
        if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val))
            return mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                                      "env.%s must be a string without NUL bytes", key);
        env_bytes += strlen(key) + json_string_length(val) + 2;
    }
    if (env_bytes > ENV_MAX_BYTES)
        return mcp_call_tool_fail(call, MCP_TOOL_TOO_LARGE, "env is larger than %d bytes",
                                  ENV_MAX_BYTES);
    const char *cwd = container_str_arg(args, "cwd");
    if (cwd && strlen(cwd) != json_string_length(json_object_get(args, "cwd")))
        return mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                                  "cwd must not contain NUL bytes");
    struct job *j = container_job_new(t, call, args, OP_EXEC);
    if (!j)
        return;
    j->command = xstrdup(command);
    j->timeout_ms = (uint64_t)timeout;
    if (cwd) {
        /* relative to /workspace, like the file tools */
        char *norm = NULL;
        struct err e = {0};
        if (fsop_path_normalize("/workspace", cwd, strlen(cwd), &norm, &e) < 0) {
            mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS, "cwd: %s", e.msg);
            container_job_free(j);
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
    container_job_start(j);
}

/* container_*: the caller's own Linux sandbox (or a run session's, with session_id). Every tool
 * first acquires the sandbox (starting it when it is stopped), then runs a command or a file
 * operation in it, and answers when that finishes. */
#include "mcp/tools_container.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
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
#include "mcp/mcp.h"
#include "mcp/reply.h"
#include "sandbox/fsops.h"
#include "sandbox/sandbox.h"

void container_job_free(struct job *j)
{
    json_decref(j->args);
    free(j->command);
    free(j->cwd);
    for (size_t i = 0; j->env && j->env[i]; i++)
        free(j->env[i]);
    free(j->env);
    free(j->stdin_data);
    free(j->data);
    free(j->res.out);
    free(j->res.err);
    for (int i = 0; i < 2; i++) {
        free(j->saved[i].path);
        free(j->saved[i].error);
    }
    free(j);
}

void container_job_end(struct job *j)
{
    if (j->sbx)
        sandbox_release(j->sbx);
    container_job_free(j);
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
        mcp_call_tool_fail(j->call, MCP_TOOL_CANCELLED, "cancelled");
        container_job_end(j);
    }
}

/* --- file operations --- */

static const char *type_mark(const char *type)
{
    return strcmp(type, "directory") == 0 ? "/" : strcmp(type, "symlink") == 0 ? "@" : "";
}

/* The listing as text; dropped: entries left out to fit the reply. */
static json_t *listing_text(const json_t *res, size_t dropped)
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
    if (dropped)
        buf_printf(&b,
                   "[... %zu more entries not shown, to keep this reply small: list a "
                   "subdirectory, or without recursive, to see the rest]\n",
                   dropped);
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

static size_t reply_avail(const struct job *j)
{
    size_t budget = mcp_call_reply_budget(j->call);
    return budget > REPLY_SLACK ? budget - REPLY_SLACK : 0;
}

/* The listing's text, with entries dropped from the end of res (its truncated flag and count
 * set) until the whole result fits the reply budget. */
static json_t *listing_fit(const struct job *j, json_t *res)
{
    size_t avail = reply_avail(j), dropped = 0;
    json_t *entries = json_object_get(res, "entries");
    for (;;) {
        json_t *content = listing_text(res, dropped);
        size_t cost = reply_result_cost(content, res);
        size_t n = json_array_size(entries);
        if (cost <= avail || n == 0)
            return content;
        json_decref(content);
        /* drop about what the excess holds, by the entries' average cost */
        size_t drop = (cost - avail) / (cost / n + 1) + 1;
        if (drop > n)
            drop = n;
        for (size_t k = 0; k < drop; k++)
            json_array_remove(entries, n - 1 - k);
        dropped += drop;
        json_object_set_new(res, "truncated", json_true());
        json_object_set_new(res, "count", json_integer((json_int_t)(n - drop)));
    }
}

/* A file read as a resource (text or base64 blob), cut further when the result would not fit
 * the reply budget (the read was sized for base64; escapes in text or a long path can still
 * exceed it), with lead (when not NULL) and a note on what follows and where to continue after
 * it. Sets "bytes", "truncated", "next_offset" and "eof" in res. */
static json_t *read_fit(const struct job *j, json_t *res, const char *lead)
{
    const char *path = json_string_value(json_object_get(res, "path"));
    bool binary = json_is_true(json_object_get(res, "binary"));
    const char *key = binary ? "base64" : "text";
    json_t *data = json_incref(json_object_get(res, key));
    json_object_del(res, key);
    const char *s = json_string_value(data);
    size_t len = json_string_length(data), n = len;
    uint64_t offset = (uint64_t)json_integer_value(json_object_get(res, "offset"));
    uint64_t size = (uint64_t)json_integer_value(json_object_get(res, "size"));
    uint64_t bytes = (uint64_t)json_integer_value(json_object_get(res, "bytes"));
    bool more = json_is_true(json_object_get(res, "truncated"));
    char *uri = file_uri(path);
    size_t avail = reply_avail(j);
    json_t *content = NULL;
    for (int round = 0; round < 8; round++) {
        if (n < len) {
            /* base64 is cut at whole groups of 4 characters (3 bytes) */
            bytes = binary ? n / 4 * 3 : n;
            more = true;
        }
        uint64_t next = offset + bytes;
        json_object_set_new(res, "bytes", json_integer((json_int_t)bytes));
        json_object_set_new(res, "truncated", json_boolean(more));
        json_object_set_new(res, "next_offset", json_integer((json_int_t)next));
        json_object_set_new(res, "eof", json_boolean(!more));
        json_t *resource =
            json_pack("{s:s, s:O, s:o}", "uri", uri, "mimeType", json_object_get(res, "mime_type"),
                      binary ? "blob" : "text", json_stringn_nocheck(s, n));
        content = json_pack("[{s:s, s:o}]", "type", "resource", "resource", resource);
        if (lead)
            json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", lead));
        char *note = NULL;
        if (more && size > next)
            note = xasprintf("[... %llu more bytes (the file has %llu): continue with "
                             "container_file_read {\"path\": \"%s\", \"offset\": %llu}]",
                             (unsigned long long)(size - next), (unsigned long long)size, path,
                             (unsigned long long)next);
        else if (more)
            note = xasprintf("[... more bytes follow: continue with container_file_read "
                             "{\"path\": \"%s\", \"offset\": %llu}]",
                             path, (unsigned long long)next);
        else if (bytes == 0 && offset > 0)
            note = xasprintf("[nothing to read: offset %llu is at or past the end of the file "
                             "(%llu bytes)]",
                             (unsigned long long)offset, (unsigned long long)size);
        if (note)
            json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", note));
        free(note);
        size_t cost = reply_result_cost(content, res);
        if (cost <= avail || n == 0)
            break;
        json_decref(content);
        content = NULL;
        size_t over = cost - avail + 16;
        if (binary) {
            n = n > over ? (n - over) / 4 * 4 : 0;
        } else {
            size_t have = json_string_cost(s, n);
            n = json_prefix_fit(s, n, have > over ? have - over : 0);
        }
    }
    if (!content) /* only when 8 rounds did not fit: nothing of the data */
        content = json_pack("[{s:s, s:s}]", "type", "text", "text", "the file could not be shown");
    free(uri);
    json_decref(data);
    return content;
}

/* A read from the start without max_bytes: the one that returns an image as an image. */
static bool read_is_whole(const struct job *j)
{
    return j->req.offset == 0 && !json_object_get(j->args, "max_bytes");
}

/* The largest image returned whole: what fits the reply as base64, and never more than
 * IMAGE_MAX_BYTES. */
static size_t image_max(const struct tools_container *t)
{
    return t->read_max < IMAGE_MAX_BYTES ? t->read_max : IMAGE_MAX_BYTES;
}

static const char *image_name(const char *mime_type)
{
    return strcmp(mime_type, "image/png") == 0    ? "PNG"
           : strcmp(mime_type, "image/jpeg") == 0 ? "JPEG"
           : strcmp(mime_type, "image/gif") == 0  ? "GIF"
                                                  : "WebP";
}

/* Why a whole read of an image of size bytes (at least more than fit) is refused, and what to
 * do instead. */
static void image_refuse(struct job *j, const json_t *res, uint64_t size, size_t cap)
{
    const char *path = json_string_value(json_object_get(res, "path"));
    const char *mime = json_string_value(json_object_get(res, "mime_type"));
    char have[48];
    if (size > cap)
        snprintf(have, sizeof(have), "%llu bytes", (unsigned long long)size);
    else
        snprintf(have, sizeof(have), "more than %zu bytes", cap);
    mcp_call_tool_fail(j->call, MCP_TOOL_TOO_LARGE,
                       "'%s' is a %s image of %s; images come back whole as images up to %zu "
                       "bytes. Save a smaller one (matplotlib: a lower dpi or figsize, or JPEG), "
                       "or read its bytes as base64 blobs with max_bytes and offset",
                       path, image_name(mime), have, cap);
}

/* The image content of a whole read of an image, with a line of text for a model that reads
 * only text; NULL, with the call failed, when it does not fit. The base64 goes into the content
 * only, not into res as well. */
static json_t *image_fit(struct job *j, json_t *res)
{
    const char *path = json_string_value(json_object_get(res, "path"));
    const char *mime = json_string_value(json_object_get(res, "mime_type"));
    uint64_t bytes = (uint64_t)json_integer_value(json_object_get(res, "bytes"));
    size_t cap = image_max(j->t);
    if (bytes > cap) {
        image_refuse(j, res, bytes, cap);
        return NULL;
    }
    json_t *data = json_incref(json_object_get(res, "base64"));
    json_object_del(res, "base64");
    json_object_set_new(res, "next_offset", json_integer((json_int_t)bytes));
    json_object_set_new(res, "eof", json_true());
    char *note = xasprintf("%s: %s image (%s), %llu bytes", path, image_name(mime), mime,
                           (unsigned long long)bytes);
    json_t *content = json_pack("[{s:s, s:o, s:s}, {s:s, s:s}]", "type", "image", "data", data,
                                "mimeType", mime, "type", "text", "text", note);
    free(note);
    size_t cost = reply_result_cost(content, res), avail = reply_avail(j);
    if (cost > avail) {
        /* only a path long enough to take the room left beside the largest image */
        size_t other = cost - json_string_length(data);
        json_decref(content);
        image_refuse(j, res, bytes, avail > other ? (avail - other) / 4 * 3 : 0);
        return NULL;
    }
    return content;
}

/* The content of a file read: an image when a whole read found a whole one, else the bytes as a
 * resource; NULL when the call failed (an image too large to return whole). */
static json_t *file_read_content(struct job *j, json_t *res)
{
    const char *mime = json_string_value(json_object_get(res, "mime_type"));
    bool binary = json_is_true(json_object_get(res, "binary"));
    bool image = json_is_true(json_object_get(res, "image"));
    /* from here on "image" says what the reply holds, not what the bytes are */
    if (image && read_is_whole(j))
        return image_fit(j, res);
    json_object_set_new(res, "image", json_false());
    if (!read_is_whole(j) || !binary || !mime || !fsop_image_type(mime))
        return read_fit(j, res, NULL);
    if (json_is_true(json_object_get(res, "truncated"))) {
        image_refuse(j, res, (uint64_t)json_integer_value(json_object_get(res, "size")),
                     image_max(j->t));
        return NULL;
    }
    char *lead = xasprintf("[%s starts like a %s image but does not end like one (cut short, or "
                           "still being written?), so its bytes come back instead of the image]",
                           json_string_value(json_object_get(res, "path")), image_name(mime));
    json_t *content = read_fit(j, res, lead);
    free(lead);
    return content;
}

static void on_fs_done(void *ctx, json_t *res, const struct err *err)
{
    struct job *j = ctx;
    if (err) {
        mcp_call_tool_err(j->call, err);
        container_job_end(j);
        return;
    }
    if (json_object_get(res, "error")) {
        const char *msg = json_string_value(json_object_get(res, "error"));
        int code = (int)json_integer_value(json_object_get(res, "errno"));
        mcp_call_tool_fail(j->call, mcp_tool_error_from_errno(-code), "%s",
                           msg ? msg : "file operation failed");
        json_decref(res);
        container_job_end(j);
        return;
    }
    json_t *content = NULL;
    const char *path = json_string_value(json_object_get(res, "path"));
    json_object_set_new(res, "sandbox_id", json_string(sandbox_id(j->sbx)));
    switch (j->op) {
    case OP_READ: {
        const char *type = json_string_value(json_object_get(res, "type"));
        content = type && strcmp(type, "directory") == 0 ? listing_fit(j, res)
                                                         : file_read_content(j, res);
        if (!content) {
            json_decref(res);
            container_job_end(j);
            return;
        }
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
    case OP_LIST: content = listing_fit(j, res); break;
    case OP_DELETE: {
        char *text = xasprintf("deleted %s (%lld entries)", path,
                               (long long)json_integer_value(json_object_get(res, "deleted")));
        content = json_pack("[{s:s, s:s}]", "type", "text", "text", text);
        free(text);
        break;
    }
    default: break;
    }
    mcp_call_tool_result(j->call, content, res, false);
    container_job_end(j);
}

/* --- dispatch once the sandbox is up --- */

static void on_ready(void *ctx, struct sandbox *sbx, const struct err *err)
{
    struct job *j = ctx;
    j->waiter = NULL;
    if (err) {
        mcp_call_tool_err(j->call, err);
        container_job_free(j);
        return;
    }
    j->sbx = sbx;
    if (j->cancelled) {
        mcp_call_tool_fail(j->call, MCP_TOOL_CANCELLED, "cancelled");
        container_job_end(j);
        return;
    }
    struct err e = {0};
    switch (j->op) {
    case OP_INIT: {
        json_t *d = sandbox_describe(sbx);
        const char *note = json_string_value(json_object_get(d, "template_note"));
        bool warm = json_is_true(json_object_get(d, "warm"));
        char *text = xasprintf("sandbox %s started fresh %s %lld ms (template %s)%s%s",
                               sandbox_id(sbx), warm ? "from the warm pool; its start took" : "in",
                               (long long)json_integer_value(json_object_get(d, "start_ms")),
                               json_string_value(json_object_get(d, "template")),
                               note ? "\n\n" : "", note ? note : "");
        mcp_call_tool_result(j->call, json_pack("[{s:s, s:s}]", "type", "text", "text", text), d,
                             false);
        free(text);
        container_job_end(j);
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
        j->exec = sandbox_exec_start(sbx, &o, j->op == OP_EXEC ? container_exec_output : NULL,
                                     container_exec_done, j, &e);
        if (!j->exec) {
            mcp_call_tool_err(j->call, &e);
            container_job_end(j);
        }
        return;
    }
    default:
        if (sandbox_fs(sbx, &j->req, on_fs_done, j, &e) < 0) {
            mcp_call_tool_err(j->call, &e);
            container_job_end(j);
        }
        return;
    }
}

void container_job_start(struct job *j)
{
    const struct mcp_principal *who = mcp_call_principal(j->call);
    struct sandbox_acquire_opts o = {
        .user_id = who->user_id,
        .session_id = container_str_arg(j->args, "session_id"),
        .fresh = j->op == OP_INIT,
    };
    mcp_call_on_cancel(j->call, on_cancel, j);
    /* on_ready may run (and free j) before this returns; then no waiter comes back */
    struct sandbox_waiter *w = sandbox_acquire(j->t->mgr, &o, on_ready, j);
    if (w)
        j->waiter = w;
}

struct job *container_job_new(struct tools_container *t, struct mcp_call *call, const json_t *args,
                              enum op op)
{
    if (!t->mgr) {
        mcp_call_tool_fail(call, MCP_TOOL_UNAVAILABLE,
                           "sandboxes are not available on this server: %s", t->unavailable);
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
    struct job *j = container_job_new(ctx, call, args, OP_INIT);
    if (j)
        container_job_start(j);
}

static void tool_ping(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct job *j = container_job_new(ctx, call, args, OP_PING);
    if (j)
        container_job_start(j);
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
    const char *encoding = container_str_arg(args, "encoding");
    bool b64 = encoding && strcmp(encoding, "base64") == 0;
    int mode;
    if (parse_mode(json_object_get(args, "mode"), &mode) < 0)
        return mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                                  "mode must be octal digits like \"0644\" (or an integer up "
                                  "to 4095)");
    unsigned char *data = NULL;
    size_t len = json_string_length(content);
    if (b64) {
        data = xmalloc(len / 4 * 3 + 4);
        ssize_t n = base64_decode(json_string_value(content), len, data);
        if (n < 0) {
            free(data);
            return mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                                      "content is not valid base64");
        }
        len = (size_t)n;
    } else {
        data = xmalloc(len + 1);
        memcpy(data, json_string_value(content), len);
    }
    if (len > t->file_max_bytes) {
        free(data);
        return mcp_call_tool_fail(call, MCP_TOOL_TOO_LARGE,
                                  "content is %zu bytes; the limit is %zu bytes a call: write "
                                  "larger files in pieces, the first replacing the file and "
                                  "the others with append",
                                  len, t->file_max_bytes);
    }
    struct job *j = container_job_new(t, call, args, OP_WRITE);
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
    container_job_start(j);
}

static void tool_file_read(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_container *t = ctx;
    struct job *j = container_job_new(t, call, args, OP_READ);
    if (!j)
        return;
    set_path(j, "path");
    j->req.kind = FSOP_READ;
    j->req.offset = (uint64_t)json_integer_value(json_object_get(args, "offset"));
    size_t max = (size_t)json_integer_value(json_object_get(args, "max_bytes"));
    j->req.max_bytes = max && max < t->read_max ? max : t->read_max;
    container_job_start(j);
}

static void tool_files_list(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_container *t = ctx;
    struct job *j = container_job_new(t, call, args, OP_LIST);
    if (!j)
        return;
    set_path(j, "path");
    j->req.kind = FSOP_LIST;
    j->req.recursive = json_is_true(json_object_get(args, "recursive"));
    j->req.max_entries = (size_t)json_integer_value(json_object_get(args, "max_entries"));
    container_job_start(j);
}

static void tool_file_delete(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct tools_container *t = ctx;
    struct job *j = container_job_new(t, call, args, OP_DELETE);
    if (!j)
        return;
    set_path(j, "path");
    j->req.kind = FSOP_DELETE;
    j->req.recursive = json_is_true(json_object_get(args, "recursive"));
    container_job_start(j);
}

/* --- schemas and registration --- */

/* The JSON Schema text of the tools, one property a line (clang-format would scatter them).
 * Descriptions are written for a model that has never seen this server; those with a limit the
 * operator configures are made in tools_container_register. */
/* clang-format off */
#define SESSION_PROP                                                                               \
    "\"session_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"                        \
    "\"description\":\"Work in the sandbox of this run session (the session_id run_task "          \
    "returned) instead of your own\"}"
#define PATH_PROP(desc)                                                                            \
    "\"path\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,\"description\":\"" desc "\"}"
/* Output schemas: every field a success gives, and the ones it always gives. */
#define OUTPUT(props, req) "{\"type\":\"object\",\"properties\":{" props "},\"required\":[" req "]}"
#define NULLABLE(type) "{\"anyOf\":[{\"type\":\"" type "\"},{\"type\":\"null\"}]}"
#define SANDBOX_ID_OUT "\"sandbox_id\":{\"type\":\"string\",\"description\":\"The sandbox used\"}"

static const char session_only_schema[] =
    "{\"type\":\"object\",\"properties\":{" SESSION_PROP "},\"additionalProperties\":false}";

/* container_initialize and container_ping: sandbox_describe() */
#define SANDBOX_OUT                                                                                \
    SANDBOX_ID_OUT ","                                                                             \
    "\"template\":{\"type\":\"string\",\"description\":\"The root file system it runs on: "          \
        "debian (the default toolset) or host\"},"                                                  \
    "\"template_note\":{\"type\":\"string\",\"description\":\"When the sandbox is not on the "       \
        "default template: why (being built, failed) and how to move onto it\"},"                  \
    "\"cgroup\":{\"type\":\"string\"},"                                                            \
    "\"limits\":{\"type\":\"object\",\"description\":\"memory_bytes, processes, disk_bytes, "      \
        "tmp_bytes, and cpus when capped\"},"                                                      \
    "\"started_at\":{\"type\":\"string\"},"                                                        \
    "\"uptime_ms\":{\"type\":\"integer\"},"                                                        \
    "\"start_ms\":{\"type\":\"integer\",\"description\":\"How long its last start took\"},"        \
    "\"warm\":{\"type\":\"boolean\",\"description\":\"Taken from the warm pool: started before "    \
        "the call, never used by anyone\"}"

static const char initialize_output[] = OUTPUT(SANDBOX_OUT, "\"sandbox_id\"");

static const char ping_output[] = OUTPUT(
    SANDBOX_OUT ","
    "\"up\":{\"type\":\"boolean\"},"
    "\"memory_bytes\":{\"type\":\"integer\",\"description\":\"Memory in use\"},"
    "\"processes\":{\"type\":\"integer\"},"
    "\"answer_ms\":{\"type\":\"integer\"}",
    "\"sandbox_id\",\"up\"");

static char *exec_schema(const struct sandbox_config *c)
{
    char def[32], max[32];
    format_span_ms(c->exec_timeout_ms, def);
    format_span_ms(c->exec_timeout_max, max);
    return xasprintf("{\"type\":\"object\",\"properties\":{"
        "\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":%d,"
            "\"description\":\"Shell command line, run as /bin/sh -c COMMAND (pipes, && and "
            "redirections work)\"},"
        "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":%llu,"
            "\"description\":\"Kill the command and everything it started after this many "
            "milliseconds (default %llu, that is %s; at most %s)\"},"
        "\"cwd\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,"
            "\"description\":\"Working directory; relative paths are under /workspace (the "
            "default)\"},"
        "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
            "\"description\":\"Extra environment variables for this command, {NAME: value}\"},"
        "\"stdin\":{\"type\":\"string\","
            "\"description\":\"Text fed to the command's standard input (default: none)\"},"
        "\"args\":{\"type\":\"object\",\"properties\":{"
                "\"args\":{\"type\":\"string\",\"description\":\"Shell command line\"},"
                "\"timeout\":{\"type\":\"integer\",\"minimum\":1,"
                    "\"description\":\"Timeout in milliseconds\"}},"
            "\"required\":[\"args\"],"
            "\"description\":\"The same as command and timeout_ms, in the form the Cloudflare "
            "container server takes; give either this or command\"},"
        SESSION_PROP
        "},\"additionalProperties\":false}",
        COMMAND_MAX_BYTES, (unsigned long long)c->exec_timeout_max,
        (unsigned long long)c->exec_timeout_ms, def, max);
}

static const char exec_output[] = OUTPUT(
    "\"exit_code\":{\"type\":\"integer\","
        "\"description\":\"The command's exit status (-1 when a signal ended it)\"},"
    "\"signal\":" NULLABLE("integer") ","
    "\"timed_out\":{\"type\":\"boolean\",\"description\":\"Killed for running past timeout_ms\"},"
    "\"stdout\":{\"type\":\"string\"},"
    "\"stderr\":{\"type\":\"string\"},"
    "\"stdout_truncated\":{\"type\":\"boolean\","
        "\"description\":\"stdout was longer than the cap: its middle is left out\"},"
    "\"stderr_truncated\":{\"type\":\"boolean\"},"
    "\"truncated\":{\"type\":\"boolean\",\"description\":\"Either stream was cut\"},"
    "\"stdout_bytes\":{\"type\":\"integer\","
        "\"description\":\"All the bytes written to stdout, kept or not\"},"
    "\"stderr_bytes\":{\"type\":\"integer\"},"
    "\"duration_ms\":{\"type\":\"integer\"},"
    SANDBOX_ID_OUT ","
    "\"stdout_file\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],"
        "\"description\":\"Where the sandbox keeps stdout when this reply leaves part of it out "
        "(read it with container_file_read)\"},"
    "\"stdout_file_offset\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}],"
        "\"description\":\"Offset in stdout_file where the part left out begins\"},"
    "\"stderr_file\":" NULLABLE("string") ","
    "\"stderr_file_offset\":" NULLABLE("integer"),
    "\"exit_code\",\"timed_out\",\"stdout\",\"stderr\",\"duration_ms\"");

static char *write_schema(size_t file_max)
{
    return xasprintf("{\"type\":\"object\",\"properties\":{"
        PATH_PROP("File path; relative paths are under /workspace") ","
        "\"content\":{\"type\":\"string\",\"description\":\"The file's content: text, or base64 "
            "when encoding is base64; at most %zu bytes (decoded) a call: write larger files "
            "in pieces with append\"},"
        "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"],"
            "\"description\":\"utf8 (the default) for text, base64 for any bytes\"},"
        "\"append\":{\"type\":\"boolean\",\"description\":\"Add content at the end of the file "
            "instead of replacing it (default false)\"},"
        "\"mode\":{\"anyOf\":[{\"type\":\"string\",\"minLength\":1,\"maxLength\":5},"
                "{\"type\":\"integer\",\"minimum\":0,\"maximum\":4095}],"
            "\"description\":\"Permission bits in octal, like \\\"0755\\\" for a program "
            "(default: the file's own, 0644 for a new file)\"},"
        SESSION_PROP
        "},\"required\":[\"path\",\"content\"],\"additionalProperties\":false}", file_max);
}

static const char write_output[] = OUTPUT(
    "\"path\":{\"type\":\"string\",\"description\":\"The absolute path written\"},"
    "\"bytes_written\":{\"type\":\"integer\"},"
    "\"size\":{\"type\":\"integer\",\"description\":\"The file's size after the write\"},"
    "\"created\":{\"type\":\"boolean\",\"description\":\"The file did not exist before\"},"
    SANDBOX_ID_OUT,
    "\"path\",\"bytes_written\"");

#define ENTRIES_OUT                                                                                \
    "\"entries\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"              \
        "\"name\":{\"type\":\"string\"},"                                                          \
        "\"type\":{\"type\":\"string\",\"enum\":[\"file\",\"directory\",\"symlink\",\"other\"]},"  \
        "\"size\":{\"type\":\"integer\"},"                                                         \
        "\"mtime\":{\"type\":\"string\"},"                                                         \
        "\"mode\":{\"type\":\"string\",\"description\":\"Permission bits in octal\"}}}},"          \
    "\"count\":{\"type\":\"integer\"}"

static char *read_schema(size_t read_max)
{
    return xasprintf("{\"type\":\"object\",\"properties\":{"
        PATH_PROP("File or directory path; relative paths are under /workspace") ","
        "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"Byte offset to start "
            "at (default 0); a read that stops before the end gives the offset to continue from "
            "as next_offset. Past 0, an image comes back as bytes (a base64 blob)\"},"
        "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":%zu,"
            "\"description\":\"Most bytes to return (default and largest %zu). Given, an image "
            "comes back as bytes (a base64 blob), not as an image\"},"
        SESSION_PROP
        "},\"required\":[\"path\"],\"additionalProperties\":false}", read_max, read_max);
}

static const char read_output[] = OUTPUT(
    "\"type\":{\"type\":\"string\",\"enum\":[\"file\",\"directory\"]},"
    "\"path\":{\"type\":\"string\",\"description\":\"The absolute path read\"},"
    "\"size\":{\"type\":\"integer\",\"description\":\"The whole file's size\"},"
    "\"offset\":{\"type\":\"integer\"},"
    "\"bytes\":{\"type\":\"integer\",\"description\":\"Bytes returned from offset on\"},"
    "\"truncated\":{\"type\":\"boolean\",\"description\":\"More follows (for a directory: "
        "more entries than listed)\"},"
    "\"next_offset\":{\"type\":\"integer\",\"description\":\"The offset to continue from\"},"
    "\"eof\":{\"type\":\"boolean\",\"description\":\"The read reached the end of the file\"},"
    "\"binary\":{\"type\":\"boolean\","
        "\"description\":\"Not text: the content is a base64 blob, or an image\"},"
    "\"image\":{\"type\":\"boolean\","
        "\"description\":\"The content is the whole file as an image (type image, its base64 "
        "data there and not here) of mime_type\"},"
    "\"mime_type\":{\"type\":\"string\"},"
    ENTRIES_OUT ","
    SANDBOX_ID_OUT,
    "\"type\",\"path\"");

static const char list_schema[] = "{\"type\":\"object\",\"properties\":{"
    PATH_PROP("Directory to list (default /workspace)") ","
    "\"recursive\":{\"type\":\"boolean\","
        "\"description\":\"Descend into subdirectories (default false)\"},"
    "\"max_entries\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,"
        "\"description\":\"Most entries to return (default 1000)\"},"
    SESSION_PROP
    "},\"additionalProperties\":false}";

static const char list_output[] = OUTPUT(
    "\"path\":{\"type\":\"string\"},"
    ENTRIES_OUT ","
    "\"truncated\":{\"type\":\"boolean\",\"description\":\"There were more than max_entries\"},"
    SANDBOX_ID_OUT,
    "\"path\",\"entries\"");

static const char delete_schema[] = "{\"type\":\"object\",\"properties\":{"
    PATH_PROP("File or directory to delete; relative paths are under /workspace") ","
    "\"recursive\":{\"type\":\"boolean\",\"description\":\"Delete a directory and everything "
        "in it (default false: a directory must be empty)\"},"
    SESSION_PROP
    "},\"required\":[\"path\"],\"additionalProperties\":false}";

static const char delete_output[] = OUTPUT(
    "\"path\":{\"type\":\"string\"},"
    "\"deleted\":{\"type\":\"integer\",\"description\":\"Files and directories removed\"},"
    SANDBOX_ID_OUT,
    "\"path\",\"deleted\"");
/* clang-format on */

/* What a sandbox may reach, in a sentence, for container_exec's description. */
static const char *network_sentence(const char *mode)
{
    if (strcmp(mode, "public") == 0)
        return "Network: any public internet host, through the HTTP(S) proxy that HTTP_PROXY and "
               "HTTPS_PROXY name (curl, pip, npm, git and apt use it); private and loopback "
               "addresses are refused, and raw TCP or UDP has no way out.";
    if (strcmp(mode, "allowlist") == 0)
        return "Network: only the hosts on this server's allow list (by default package "
               "registries such as pypi.org, registry.npmjs.org, deb.debian.org and crates.io, "
               "and git hosts such as github.com), through the HTTP(S) proxy that HTTP_PROXY and "
               "HTTPS_PROXY name (curl, pip, npm, git and apt use it); other hosts are refused "
               "with 403 and the reason, and raw TCP or UDP has no way out.";
    return "The sandbox has no network: connections to other hosts are refused.";
}

static struct tools_container the_tools;

void tools_container_register(struct mcp_server *srv, struct sandbox_manager *mgr,
                              const char *unavailable, const struct tools_facts *f)
{
    const struct sandbox_config *cfg = f->sandbox;
    struct tools_container *t = &the_tools;
    t->mgr = mgr;
    free(t->unavailable);
    t->unavailable = xstrdup(unavailable ? unavailable : "unknown reason");
    t->timeout_max = cfg->exec_timeout_max;
    t->output_bytes = cfg->output_bytes;
    t->file_max_bytes = cfg->file_max_bytes;
    /* a read's bytes go out as base64 at worst (4 for 3), beside a few KiB of the rest */
    size_t budget = mcp_server_reply_budget(srv);
    size_t room = budget > REPLY_SLACK + 3072 ? budget - REPLY_SLACK - 3072 : 0;
    t->read_max = room / 4 * 3;
    if (t->read_max > FSOP_READ_MAX_BYTES)
        t->read_max = FSOP_READ_MAX_BYTES;
    if (t->read_max < 1024)
        t->read_max = 1024;
    /* built once per server start; the strings must outlive the server, as registered tools do */
    static char *exec_in, *exec_desc, *write_in, *write_desc, *read_in, *read_desc, *init_desc;
    free(exec_in);
    free(exec_desc);
    free(write_in);
    free(write_desc);
    free(read_in);
    free(read_desc);
    free(init_desc);
    char def[32], max[32], out[32], shown[32], read_max[32], image[32], idle[32];
    format_span_ms(cfg->exec_timeout_ms, def);
    format_span_ms(cfg->exec_timeout_max, max);
    format_bytes(cfg->output_bytes / 2, out);
    format_bytes((budget - REPLY_SLACK) / 2, shown);
    format_bytes(t->read_max, read_max);
    format_bytes(image_max(t), image);
    format_span_ms(cfg->idle_ms, idle);
    exec_in = exec_schema(cfg);
    exec_desc = xasprintf(
        "Run a shell command line (/bin/sh -c) in your own isolated Linux sandbox, as root "
        "inside it, in /workspace unless cwd says otherwise. Files, installed packages and "
        "background processes (nohup cmd > log 2>&1 &) stay between calls until "
        "container_initialize; the sandbox stops after %s idle and starts again with its files "
        "on the next call. The command is killed with everything it started after timeout_ms "
        "(default %s, at most %s). Returns stdout, stderr, the exit code or signal, and whether "
        "it timed out. Each stream keeps its first and last %s. A reply shows about %s of "
        "output: when there is more, it shows the head and tail and keeps the whole output in a "
        "file under " EXEC_SAVE_DIR ", whose path and the container_file_read offset to "
        "continue from are in the reply (stdout_file, stdout_file_offset). %s With a progress "
        "token, output arrives as progress notifications while the command runs.",
        idle, def, max, out, shown, network_sentence(f->network));
    write_in = write_schema(cfg->file_max_bytes);
    write_desc = xasprintf(
        "Write a file in your sandbox (relative paths are under /workspace), creating missing "
        "parent directories; with append, add to its end instead of replacing it. Content is "
        "UTF-8 text, or any bytes with encoding base64. At most %zu bytes of content a call (what "
        "one "
        "request carries as base64): write larger files in pieces, the first replacing the file "
        "and the others with append. The file is replaced atomically: a failed write leaves it "
        "as it was.",
        cfg->file_max_bytes);
    read_in = read_schema(t->read_max);
    read_desc = xasprintf(
        "Read a file from your sandbox (relative paths are under /workspace). A PNG, JPEG, GIF "
        "or WebP image comes back as an image you see, whole, up to %s (save plots as PNG to "
        "look at them; a larger image is refused: save it smaller). Valid UTF-8 text (SVG "
        "included) comes back as a text resource, anything else as a base64 blob, with its "
        "mimeType; a directory gives its listing. At most %s a call: a read that stops before "
        "the end says so and gives the offset to continue from (next_offset; eof is true at the "
        "end). With max_bytes, or an offset past 0, an image comes back as bytes like any other "
        "file.",
        image, read_max);
    init_desc = xasprintf(
        "Start your sandbox over from a clean state: every process in it is killed and all its "
        "files, /workspace included, are deleted. You do not need this to begin: the other "
        "container_* tools start the sandbox by themselves and its files stay between calls "
        "(it stops after %s idle and starts again with them). Returns the sandbox id, its "
        "template, limits and how long the start took.",
        idle);
    /* Whether a command may reach hosts outside the sandbox depends on the egress mode. */
    unsigned exec_world = strcmp(f->network, "none") != 0 ? MCP_TOOL_OPEN_WORLD : 0;
    const struct mcp_tool_def defs[] = {
        {"container_initialize", "Start a fresh sandbox", init_desc, session_only_schema,
         initialize_output, MCP_TOOL_DESTRUCTIVE | MCP_TOOL_IDEMPOTENT, tool_initialize, t},
        {"container_ping", "Check the sandbox",
         "Check that your sandbox is up and answers (starting it when it is stopped): uptime, "
         "memory in use and the number of processes.",
         session_only_schema, ping_output, MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT, tool_ping, t},
        {"container_exec", "Run a command", exec_desc, exec_in, exec_output,
         MCP_TOOL_DESTRUCTIVE | exec_world, container_tool_exec, t},
        {"container_file_write", "Write a file", write_desc, write_in, write_output,
         MCP_TOOL_DESTRUCTIVE, tool_file_write, t},
        {"container_file_read", "Read a file", read_desc, read_in, read_output,
         MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT, tool_file_read, t},
        {"container_files_list", "List files",
         "List a directory of your sandbox (default /workspace): name, type, size, mtime and "
         "mode of each entry, descending into subdirectories with recursive. At most "
         "max_entries entries (default 1000); truncated says when there were more.",
         list_schema, list_output, MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT, tool_files_list, t},
        {"container_file_delete", "Delete a file",
         "Delete a file, or with recursive a directory and everything in it, in your sandbox "
         "(relative paths are under /workspace). A missing path is an error (not_found); / and "
         "/workspace themselves are refused.",
         delete_schema, delete_output, MCP_TOOL_DESTRUCTIVE, tool_file_delete, t},
    };
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++)
        mcp_server_add_tool(srv, &defs[i]);
}

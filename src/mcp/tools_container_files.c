/* container_file_write, container_file_read, container_files_list and container_file_delete:
 * the requests they make of the sandbox's file worker, and their replies, fitted to the reply
 * budget (a listing cut with a count of what it left out, a read as text, a blob or an image,
 * and images refused past what a client's model takes). */
#include "mcp/tools_container.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/ids.h"
#include "base/json_write.h"
#include "base/util.h"

/* The largest image a read returns as an image, whatever the reply budget: 5 MiB as base64, the
 * most the Claude API takes in one image (a client whose model refuses an image can lose the
 * whole conversation). */
#define IMAGE_MAX_BYTES ((5u << 20) / 4 * 3)

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
    /* The streams are valid UTF-8 already (sanitized when captured): no second check. */
    return reply_text_content(&b);
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
size_t container_image_max(const struct tools_container *t)
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
    size_t cap = container_image_max(j->t);
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
                     container_image_max(j->t));
        return NULL;
    }
    char *lead = xasprintf("[%s starts like a %s image but does not end like one (cut short, or "
                           "still being written?), so its bytes come back instead of the image]",
                           json_string_value(json_object_get(res, "path")), image_name(mime));
    json_t *content = read_fit(j, res, lead);
    free(lead);
    return content;
}

void container_fs_done(void *ctx, json_t *res, const struct err *err)
{
    struct job *j = ctx;
    if (err) {
        mcp_call_tool_err(j->call, err);
        container_job_end(j);
        return;
    }
    if (json_object_get(res, "error")) {
        const char *msg = json_string_value(json_object_get(res, "error"));
        char disk[400];
        bool short_disk = sandbox_disk_note(j->sbx, disk, sizeof(disk));
        int code = (int)json_integer_value(json_object_get(res, "errno"));
        mcp_call_tool_fail(j->call, mcp_tool_error_from_errno(-code), "%s%s%s",
                           msg ? msg : "file operation failed", short_disk ? ": " : "",
                           short_disk ? disk : "");
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

void container_tool_file_write(struct mcp_call *call, const json_t *args, void *ctx)
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

void container_tool_file_read(struct mcp_call *call, const json_t *args, void *ctx)
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

void container_tool_files_list(struct mcp_call *call, const json_t *args, void *ctx)
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

void container_tool_file_delete(struct mcp_call *call, const json_t *args, void *ctx)
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

/* libFuzzer target: the run diff parser (src/runs/diff.c) on what a sandbox might print. The
 * first byte picks the limits (small ones half the time, so every cut is reached) and the
 * second the size of the pieces it is fed in; the rest is git's output. Whatever the bytes, the
 * result keeps its limits, its strings are valid UTF-8, and feeding the same text in pieces
 * gives the same result as feeding it at once. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "runs/diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *string(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (!s || !utf8_valid(s, strlen(s)))
        abort();
    return s;
}

static json_int_t count(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        abort();
    return json_integer_value(v);
}

static void check(json_t *d, const struct diff_limits *lim)
{
    json_t *files = json_object_get(d, "files");
    if (!json_is_array(files) || json_array_size(files) > lim->files)
        abort();
    bool cut = count(d, "more_files") > 0;
    size_t bytes = 0;
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i);
        bytes += strlen(string(f, "path"));
        if (json_object_get(f, "old_path"))
            bytes += strlen(string(f, "old_path"));
        const char *st = string(f, "status");
        if (strcmp(st, "added") && strcmp(st, "deleted") && strcmp(st, "modified") &&
            strcmp(st, "renamed") && strcmp(st, "copied"))
            abort();
        if (!json_is_boolean(json_object_get(f, "binary")))
            abort();
        count(f, "insertions");
        count(f, "deletions");
        cut |= count(f, "more_lines") > 0;
        const char *h = string(f, "hunks");
        size_t lines = *h ? 1 : 0;
        for (const char *p = h; *p; p++)
            lines += *p == '\n';
        if (lines > lim->file_lines)
            abort();
        bytes += strlen(h) + (lines > 0);
    }
    if (bytes > lim->bytes)
        abort();
    if (cut && !json_is_true(json_object_get(d, "truncated")))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    struct diff_limits lim = {DIFF_FILES_MAX, DIFF_FILE_LINES_MAX, DIFF_BYTES_MAX,
                              DIFF_LINE_BYTES_MAX};
    if (data[0] & 1)
        lim = (struct diff_limits){.files = (data[0] >> 1) & 7,
                                   .file_lines = 1 + (data[0] >> 4),
                                   .bytes = 8u * data[1],
                                   .line_bytes = (data[0] >> 3) & 31};
    size_t piece = 1 + data[1] % 97;
    const char *text = (const char *)data + 2;
    size_t len = size - 2;

    json_t *whole = diff_parse(text, len, &lim);
    check(whole, &lim);
    struct diff *p = diff_new(&lim);
    for (size_t at = 0; at < len; at += piece)
        diff_feed(p, text + at, len - at < piece ? len - at : piece);
    json_t *pieces = diff_finish(p, true);
    diff_free(p);
    char *a = json_dumps(whole, JSON_COMPACT | JSON_SORT_KEYS);
    char *b = json_dumps(pieces, JSON_COMPACT | JSON_SORT_KEYS);
    if (!a || !b || strcmp(a, b) != 0)
        abort();
    free(a);
    free(b);
    json_decref(whole);
    json_decref(pieces);
    return 0;
}

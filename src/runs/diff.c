/* A run's full diff, cut to its limits as it streams in (diff.h).
 *
 * git's output is read line by line. A file begins with "diff --git a/X b/Y"; its extended header
 * follows (new/deleted file mode, old/new mode, rename/copy from/to, index, "Binary files ...
 * differ", "--- a/X", "+++ b/Y"), then its hunks from the first "@@". Every hunk line begins with
 * ' ', '+', '-', '\' or "@@", so "diff --git" always starts the next file. The header ends at the
 * first hunk or the next file; only then is the path known (the names in "diff --git" are
 * ambiguous when they hold spaces), so only then is the file listed, or counted as one more. A
 * name with a quote, backslash or control character in it is C-quoted by git ("a/x\"y"); others
 * are as they are, and "--- a/x y" ends in a tab when the name holds a space. */
#include "runs/diff.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/utf8.h"
#include "base/util.h"

/* Bytes of one line kept to parse it: a header line carries up to two quoted paths. */
#define LINE_KEEP (32u << 10)
#define PATH_BYTES_MAX 4096

enum state {
    ST_NONE,   /* before the first file, or in one not listed */
    ST_HEADER, /* in a file's extended header */
    ST_HUNKS,  /* in a listed file's hunks */
};

struct diff_file {
    char status; /* 'A', 'D', 'M', 'R', 'C' */
    bool binary;
    /* header lines as git wrote them (quoted or not), until the path is resolved */
    struct buf git, minus, plus, from, to;
    char old_mode[8], new_mode[8];
    char *path, *old_path; /* valid UTF-8 */
    int64_t insertions, deletions;
    struct buf hunks; /* valid UTF-8 lines joined with '\n' */
    unsigned shown;
    int64_t more_lines;
};

struct diff {
    struct diff_limits lim;
    char *line; /* the line being read: its first LINE_KEEP bytes */
    size_t line_len;
    uint64_t line_total; /* its length so far */
    bool line_open;      /* bytes of it have arrived */
    enum state state;
    struct diff_file *cur; /* the file being read (in files[] once listed) */
    struct diff_file **files;
    size_t nfiles, files_cap;
    size_t bytes; /* paths and lines kept */
    bool full;    /* the byte limit is reached: nothing more is kept */
    bool cut;     /* some line lost its end */
    int64_t more_files;
};

static bool starts(const char *s, size_t n, const char *prefix)
{
    size_t p = strlen(prefix);
    return n >= p && memcmp(s, prefix, p) == 0;
}

static void file_free(struct diff_file *f)
{
    if (!f)
        return;
    buf_release(&f->git);
    buf_release(&f->minus);
    buf_release(&f->plus);
    buf_release(&f->from);
    buf_release(&f->to);
    buf_release(&f->hunks);
    free(f->path);
    free(f->old_path);
    free(f);
}

struct diff *diff_new(const struct diff_limits *lim)
{
    struct diff *d = xcalloc(1, sizeof(*d));
    if (lim)
        d->lim = *lim;
    else
        d->lim = (struct diff_limits){.files = DIFF_FILES_MAX,
                                      .file_lines = DIFF_FILE_LINES_MAX,
                                      .bytes = DIFF_BYTES_MAX,
                                      .line_bytes = DIFF_LINE_BYTES_MAX};
    if (d->lim.line_bytes > LINE_KEEP)
        d->lim.line_bytes = LINE_KEEP;
    d->line = xmalloc(LINE_KEEP);
    return d;
}

void diff_free(struct diff *d)
{
    if (!d)
        return;
    /* cur is in files[] once listed */
    if (d->cur && (d->nfiles == 0 || d->files[d->nfiles - 1] != d->cur))
        file_free(d->cur);
    for (size_t i = 0; i < d->nfiles; i++)
        file_free(d->files[i]);
    free(d->files);
    free(d->line);
    free(d);
}

/* --- names --- */

/* A C-quoted name at s ('"' first), as git's quote_c_style writes it, decoded into out. Returns
 * the bytes read up to and with the closing quote, or 0 when there is none. */
static size_t unquote(const char *s, size_t n, struct buf *out)
{
    static const char esc[] = "a\ab\bt\tn\nv\vf\fr\r\"\"\\\\";
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (c == '"')
            return i + 1;
        if (c != '\\' || i + 1 >= n) {
            buf_append(out, &c, 1);
            continue;
        }
        c = s[++i];
        const char *e = c ? strchr(esc, c) : NULL;
        if (e && (e - esc) % 2 == 0) {
            buf_append(out, e + 1, 1);
        } else if (c >= '0' && c <= '3' && i + 2 < n && s[i + 1] >= '0' && s[i + 1] <= '7' &&
                   s[i + 2] >= '0' && s[i + 2] <= '7') {
            char v = (char)((c - '0') << 6 | (s[i + 1] - '0') << 3 | (s[i + 2] - '0'));
            buf_append(out, &v, 1);
            i += 2;
        } else {
            buf_append(out, &c, 1);
        }
    }
    return 0;
}

/* A name of a "---"/"+++" or "rename from/to" line: quoted, or as it is without the tab git
 * adds after a name with a space. */
static void name_of(const char *s, size_t n, struct buf *out)
{
    buf_reset(out);
    if (n && s[0] == '"' && unquote(s, n, out))
        return;
    buf_reset(out);
    if (n && s[n - 1] == '\t')
        n--;
    buf_append(out, s, n);
}

static void strip_prefix(struct buf *b, char prefix)
{
    if (b->len >= 2 && b->data[0] == prefix && b->data[1] == '/') {
        memmove(b->data, b->data + 2, b->len - 2);
        b->len -= 2;
        b->data[b->len] = '\0';
    }
}

/* The new name in "a/X b/Y" (the rest of a "diff --git" line), without its "b/". Without a
 * rename both names are the same, which settles where an unquoted pair splits. */
static void name_of_git_line(const char *s, size_t n, struct buf *out)
{
    struct buf a;
    buf_init(&a, 0);
    size_t used = n && s[0] == '"' ? unquote(s, n, &a) : 0;
    buf_release(&a);
    const char *b = NULL;
    if (used && used < n && s[used] == ' ') {
        b = s + used + 1;
    } else if (n >= 5 && n % 2 == 1) {
        size_t p = (n - 5) / 2;
        if (starts(s, n, "a/") && s[2 + p] == ' ' && s[3 + p] == 'b' && s[4 + p] == '/' &&
            memcmp(s + 2, s + 5 + p, p) == 0)
            b = s + 3 + p;
    }
    if (!b) {
        b = memmem(s, n, " \"b/", 4);
        b = b ? b + 1 : memmem(s, n, " b/", 3);
        b = b ? b + (*b == ' ') : s;
    }
    name_of(b, (size_t)(s + n - b), out);
    strip_prefix(out, 'b');
}

/* A path for the page: at most PATH_BYTES_MAX bytes of valid UTF-8. */
static char *path_text(const struct buf *b, size_t *len)
{
    size_t n = b->len > PATH_BYTES_MAX ? utf8_boundary(b->data, PATH_BYTES_MAX) : b->len;
    return utf8_sanitize(n ? b->data : "", n, len);
}

/* --- files --- */

static void end_header(struct diff *d)
{
    if (d->state != ST_HEADER)
        return;
    struct diff_file *f = d->cur;
    struct buf name;
    buf_init(&name, 0);
    size_t len = 0, old_len = 0;
    if (f->to.len) {
        name_of(f->to.data, f->to.len, &name);
        f->path = path_text(&name, &len);
        name_of(f->from.data, f->from.len, &name);
        f->old_path = path_text(&name, &old_len);
    } else {
        if (f->plus.len && strcmp(f->plus.data, "/dev/null") != 0) {
            name_of(f->plus.data, f->plus.len, &name);
            strip_prefix(&name, 'b');
        } else if (f->minus.len && strcmp(f->minus.data, "/dev/null") != 0) {
            name_of(f->minus.data, f->minus.len, &name);
            strip_prefix(&name, 'a');
        } else {
            name_of_git_line(f->git.data ? f->git.data : "", f->git.len, &name);
        }
        f->path = path_text(&name, &len);
    }
    buf_release(&name);
    if (d->full || d->bytes + len + old_len > d->lim.bytes) {
        d->full = true;
        d->more_files++;
        file_free(f);
        d->cur = NULL;
        d->state = ST_NONE;
        return;
    }
    d->bytes += len + old_len;
    if (d->nfiles == d->files_cap) {
        d->files_cap = d->files_cap ? 2 * d->files_cap : 16;
        d->files = xrealloc(d->files, d->files_cap * sizeof(*d->files));
    }
    d->files[d->nfiles++] = f;
    d->state = ST_HUNKS;
}

static void begin_file(struct diff *d, const char *rest, size_t n)
{
    end_header(d);
    d->cur = NULL;
    d->state = ST_NONE;
    if (d->full || d->nfiles >= d->lim.files) {
        d->more_files++;
        return;
    }
    struct diff_file *f = xcalloc(1, sizeof(*f));
    f->status = 'M';
    buf_init(&f->git, 0);
    buf_init(&f->minus, 0);
    buf_init(&f->plus, 0);
    buf_init(&f->from, 0);
    buf_init(&f->to, 0);
    buf_init(&f->hunks, 0);
    buf_append(&f->git, rest, n);
    d->cur = f;
    d->state = ST_HEADER;
}

static void set_text(struct buf *b, const char *s, size_t n)
{
    buf_reset(b);
    buf_append(b, s, n);
}

static void set_mode(char mode[8], const char *s, size_t n)
{
    size_t m = 0;
    while (m < n && m < 7 && s[m] >= '0' && s[m] <= '7')
        m++;
    memcpy(mode, s, m);
    mode[m] = '\0';
}

static void header_line(struct diff *d, const char *s, size_t n)
{
    struct diff_file *f = d->cur;
#define REST(prefix) (s + sizeof(prefix) - 1), (n - (sizeof(prefix) - 1))
    if (starts(s, n, "--- "))
        set_text(&f->minus, REST("--- "));
    else if (starts(s, n, "+++ "))
        set_text(&f->plus, REST("+++ "));
    else if (starts(s, n, "new file mode "))
        f->status = 'A';
    else if (starts(s, n, "deleted file mode "))
        f->status = 'D';
    else if (starts(s, n, "old mode "))
        set_mode(f->old_mode, REST("old mode "));
    else if (starts(s, n, "new mode "))
        set_mode(f->new_mode, REST("new mode "));
    else if (starts(s, n, "rename from ") || starts(s, n, "copy from ")) {
        f->status = s[0] == 'r' ? 'R' : 'C';
        size_t p = s[0] == 'r' ? sizeof("rename from ") - 1 : sizeof("copy from ") - 1;
        set_text(&f->from, s + p, n - p);
    } else if (starts(s, n, "rename to ") || starts(s, n, "copy to ")) {
        size_t p = s[0] == 'r' ? sizeof("rename to ") - 1 : sizeof("copy to ") - 1;
        set_text(&f->to, s + p, n - p);
    } else if ((starts(s, n, "Binary files ") && n >= 7 && memcmp(s + n - 7, " differ", 7) == 0) ||
               starts(s, n, "GIT binary patch"))
        f->binary = true;
#undef REST
}

/* A line of a listed file's hunks: counted, and kept while the limits allow. total is its
 * length, of which the first n bytes are at s. */
static void hunk_line(struct diff *d, const char *s, size_t n, uint64_t total)
{
    struct diff_file *f = d->cur;
    if (n && s[0] == '+')
        f->insertions++;
    else if (n && s[0] == '-')
        f->deletions++;
    if (d->full || f->shown >= d->lim.file_lines) {
        f->more_lines++;
        return;
    }
    size_t keep = total > d->lim.line_bytes ? utf8_boundary(s, d->lim.line_bytes) : n;
    size_t len;
    char *text = utf8_sanitize(keep ? s : "", keep, &len);
    char mark[48] = "";
    if (total > keep)
        snprintf(mark, sizeof(mark), " [... %llu more bytes]", (unsigned long long)(total - keep));
    size_t need = len + strlen(mark) + 1;
    if (d->bytes + need > d->lim.bytes) {
        d->full = true;
        f->more_lines++;
        free(text);
        return;
    }
    d->bytes += need;
    if (f->shown)
        buf_puts(&f->hunks, "\n");
    buf_append(&f->hunks, text, len);
    buf_puts(&f->hunks, mark);
    d->cut |= total > keep;
    f->shown++;
    free(text);
}

static void on_line(struct diff *d, const char *s, size_t n, uint64_t total)
{
    if (starts(s, n, "diff --git ")) {
        begin_file(d, s + 11, n - 11);
        return;
    }
    if (d->state == ST_HEADER) {
        if (!starts(s, n, "@@")) {
            header_line(d, s, n);
            return;
        }
        end_header(d);
    }
    if (d->state == ST_HUNKS)
        hunk_line(d, s, n, total);
}

/* --- input --- */

static void end_line(struct diff *d)
{
    on_line(d, d->line, d->line_len, d->line_total);
    d->line_len = 0;
    d->line_total = 0;
    d->line_open = false;
}

void diff_feed(struct diff *d, const char *data, size_t len)
{
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t n = nl ? (size_t)(nl - data) : len;
        size_t room = LINE_KEEP - d->line_len;
        memcpy(d->line + d->line_len, data, n < room ? n : room);
        d->line_len += n < room ? n : room;
        d->line_total += n;
        d->line_open = true;
        if (!nl)
            return;
        end_line(d);
        data += n + 1;
        len -= n + 1;
    }
}

/* --- the result --- */

static const char *status_name(char s)
{
    switch (s) {
    case 'A': return "added";
    case 'D': return "deleted";
    case 'R': return "renamed";
    case 'C': return "copied";
    default: return "modified";
    }
}

json_t *diff_finish(struct diff *d, bool complete)
{
    if (d->line_open)
        end_line(d);
    end_header(d);
    d->cur = NULL;
    json_t *files = json_array();
    bool truncated = !complete || d->cut || d->more_files > 0;
    for (size_t i = 0; i < d->nfiles; i++) {
        struct diff_file *f = d->files[i];
        json_t *j = json_pack("{s:s, s:s, s:b, s:I, s:I}", "path", f->path, "status",
                              status_name(f->status), "binary", f->binary, "insertions",
                              (json_int_t)f->insertions, "deletions", (json_int_t)f->deletions);
        if (f->old_path)
            json_object_set_new(j, "old_path", json_string(f->old_path));
        if (f->old_mode[0] && f->new_mode[0] && strcmp(f->old_mode, f->new_mode) != 0) {
            json_object_set_new(j, "old_mode", json_string(f->old_mode));
            json_object_set_new(j, "new_mode", json_string(f->new_mode));
        }
        /* the lines are valid UTF-8 already (utf8_sanitize) */
        json_object_set_new(j, "hunks",
                            json_stringn_nocheck(f->hunks.len ? f->hunks.data : "", f->hunks.len));
        json_object_set_new(j, "more_lines", json_integer((json_int_t)f->more_lines));
        truncated |= f->more_lines > 0;
        json_array_append_new(files, j);
    }
    return json_pack("{s:o, s:I, s:b}", "files", files, "more_files", (json_int_t)d->more_files,
                     "truncated", truncated);
}

json_t *diff_parse(const char *text, size_t len, const struct diff_limits *lim)
{
    struct diff *d = diff_new(lim);
    diff_feed(d, text, len);
    json_t *j = diff_finish(d, true);
    diff_free(d);
    return j;
}

char *diff_command(const char *base)
{
    size_t n = base ? strlen(base) : 0;
    if (n < 4 || n > 64 || strspn(base, "0123456789abcdef") != n)
        return NULL;
    /* the intent-to-add entries make new files part of the diff, as in the diff stat */
    return xasprintf("git add -A -N . 2>/dev/null; exec git -c core.quotepath=off diff --no-color "
                     "--no-ext-diff --no-textconv --no-relative --submodule=short -M "
                     "--src-prefix=a/ --dst-prefix=b/ %s --",
                     base);
}

#pragma once
/* A run's full diff as its web page shows it: git's unified diff of the workspace against the
 * run's starting commit, read as it streams out of the sandbox and cut to what a phone can show.
 * The text comes from the sandbox, so nothing in it is trusted: any bytes give a well-formed
 * result within the limits (invalid UTF-8 and NULs become U+FFFD; what is cut is counted).
 *
 * The result, as JSON:
 *   {"files": [{"path", "old_path"?, "status", "binary", "insertions", "deletions",
 *               "old_mode"?, "new_mode"?, "hunks", "more_lines"}, ...],
 *    "more_files": N, "truncated": bool}
 * status is "added", "deleted", "modified", "renamed" or "copied"; old_path only for the last two;
 * old_mode and new_mode only when the mode changed. hunks is the file's diff lines from its first
 * "@@" on, joined with "\n" (empty for a binary file, which git only names); a line longer than
 * the limit ends in " [... N more bytes]". insertions and deletions count every line of the file,
 * shown or not. more_lines counts the file's lines not shown, more_files the files not listed;
 * truncated says something was left out (lines, files, the end of a long line, or the end of
 * the diff when the command did not complete).
 *
 * Pure (no I/O); one parser is used by one thread. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct diff_limits {
    unsigned files;      /* files listed; more are counted in more_files */
    unsigned file_lines; /* diff lines shown per file; more are counted in more_lines */
    size_t bytes;        /* of paths and diff lines in all; past it, lines and files are counted */
    size_t line_bytes;   /* of one diff line; the rest of a longer line is counted */
};

/* What a run's page gets. */
#define DIFF_FILES_MAX 300
#define DIFF_FILE_LINES_MAX 400
#define DIFF_BYTES_MAX (512u << 10)
#define DIFF_LINE_BYTES_MAX 1000

struct diff;
/* A parser with these limits (NULL: the DIFF_*_MAX above). Never NULL (aborts on out of memory). */
struct diff *diff_new(const struct diff_limits *lim);
void diff_free(struct diff *d);
/* Feed the next bytes of git's output, in pieces of any size. Memory stays within the limits
 * whatever the input. */
void diff_feed(struct diff *d, const char *data, size_t len);
/* The result (new reference), after the last piece; complete false when the command was cut
 * short, which marks the result truncated. The parser is spent after this. */
json_t *diff_finish(struct diff *d, bool complete);

/* The whole text at once: diff_new, diff_feed, diff_finish (complete) and diff_free. */
json_t *diff_parse(const char *text, size_t len, const struct diff_limits *lim);

/* The shell command that prints the diff, for a sandbox exec in the workspace: committed and
 * uncommitted changes against base, new files included, renames found, paths unquoted where git
 * allows (core.quotepath=off), no colour, external diff or textconv. base must be a commit's
 * hex name (what `git rev-parse` prints); NULL otherwise. Caller frees. */
char *diff_command(const char *base);

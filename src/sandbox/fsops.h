#pragma once
/* File operations carried out by a worker process that has joined a sandbox: its "/" is the
 * sandbox's root and it calls fsop_run(open("/", O_PATH), req).
 *
 * Confinement comes only from how paths are resolved, so the same code is safe (and tested) on
 * the host with root_fd = any directory: every lookup is openat2() from root_fd with
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS (absolute symlinks and ".." stay inside root_fd,
 * /proc/<pid>/root and /proc/<pid>/fd/N are refused), then the final component is handled with
 * *at() calls on its parent directory without following it. WRITE never writes through a
 * symlink; DELETE removes a symlink itself and never descends through one.
 *
 * Paths: a client path is a counted string; empty, containing a NUL byte or longer than
 * FSOP_PATH_MAX bytes is an error (EINVAL / ENAMETOOLONG). A relative path is taken relative to
 * req->cwd. Paths are normalized lexically ("." and duplicate slashes dropped, ".." removes the
 * previous component and stops at "/"), and results report the normalized absolute path.
 *
 * Results (every string is valid UTF-8; names that are not have U+FFFD substituted):
 *
 *   READ of a regular file:
 *     {"type": "file", "path": "/workspace/a.py", "size": <file size>, "offset": <n>,
 *      "bytes": <bytes returned>, "truncated": <more data after offset + bytes>,
 *      "binary": false, "mime_type": "text/x-python", "text": "..."}
 *   with "binary": true and "base64": "..." (standard, padded) instead of "text" when what was
 *   read is not valid UTF-8 or contains a NUL byte. A text read cut at max_bytes ends on a
 *   character boundary, so "bytes" can be up to 3 less than max_bytes. The mime type of text
 *   comes from the extension (default text/plain; .svg gives image/svg+xml only when the file
 *   starts with markup holding an <svg element), of binary data from its magic bytes (default
 *   application/octet-stream), both sniffed from the start of the file whatever the offset.
 *   "image" is true when what was read is a whole file (offset 0, not truncated) of a type
 *   fsop_image_type() names that also ends as its format ends a file (PNG's IEND chunk, JPEG's
 *   end of image marker, GIF's trailer, WebP's RIFF size); a file cut short or still being
 *   written is not one. An offset at or past the end gives empty content.
 *   READ of a directory: the LIST result (not recursive) plus "type": "directory".
 *   Other file types (FIFOs, devices, sockets) are refused with EINVAL, files on procfs with
 *   EACCES (the worker's own /proc/self/environ and /proc/self/mem are the server's).
 *
 *   WRITE: {"path", "bytes_written", "size", "created": bool}
 *     Missing parent directories are created (0755). The content goes to a temporary file in
 *     the target's directory that is renamed over the target, so the target is never left
 *     half-written. append writes the existing content followed by data. The mode is req->mode
 *     (setuid and setgid bits dropped) when >= 0, else the existing file's (the same way),
 *     else 0644. A directory target is refused with EISDIR, a symlink with ELOOP
 *     ("is a symlink"), other non-regular files with EINVAL. With keep > 0 the target's
 *     directory is then pruned to its keep newest regular files, by name (the names that sort
 *     last): older regular files are removed; symlinks, directories and names starting with '.'
 *     are left alone, and the file just written is never removed. For a directory the server
 *     keeps for itself, whose names start with a time stamp.
 *
 *   LIST: {"path", "entries": [{"name", "type": "file|directory|symlink|other", "size",
 *          "mtime": "2026-01-02T03:04:05.678Z", "mode": "0644"}, ...],
 *          "count", "truncated": bool}
 *     Entries are sorted by name (bytewise). A recursive listing puts each directory's contents
 *     right after it, with names relative to the listed path ("src", "src/a.c"), never follows
 *     symlinks and descends at most FSOP_MAX_DEPTH levels. truncated is set when entries were
 *     left out (max_entries reached, or a deeper level not listed). A path that is not a
 *     directory (or a symlink to one) gives that one entry.
 *
 *   DELETE: {"path", "deleted": <number of entries removed>}
 *     A missing path is an error (ENOENT). A non-empty directory needs recursive (else
 *     ENOTEMPTY). "/", every path in protected_paths, an ancestor of one, or anything that is
 *     the same file as one is refused with EPERM ("refusing to delete '/workspace'"). Before a
 *     recursive delete removes anything the tree is checked: more than max_entries entries
 *     (E2BIG), a protected directory or a mount point inside it (EPERM / EBUSY), or more than
 *     FSOP_MAX_DEPTH levels (ELOOP) refuse the whole operation.
 *
 *   Failure of any kind: {"error": "cannot read '/workspace/x': No such file or directory",
 *                         "errno": 2} (positive errno).
 */

#include <jansson.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define FSOP_PATH_MAX 4096
#define FSOP_MAX_DEPTH 128
/* max_bytes / max_entries of 0 mean the default; larger values are capped at the maximum. */
#define FSOP_READ_DEFAULT_BYTES (1u << 20)
#define FSOP_READ_MAX_BYTES (8u << 20)
#define FSOP_LIST_DEFAULT_ENTRIES 1000
#define FSOP_LIST_MAX_ENTRIES 100000
#define FSOP_DELETE_DEFAULT_ENTRIES 100000
#define FSOP_DELETE_MAX_ENTRIES 1000000
#define FSOP_PROTECTED_MAX 4

enum fsop_kind { FSOP_READ, FSOP_WRITE, FSOP_LIST, FSOP_DELETE };

struct fsop_request {
    enum fsop_kind kind;
    /* client path of path_len bytes, not necessarily NUL-terminated; NULL/0 lists the cwd */
    const char *path;
    size_t path_len;
    const char *cwd; /* absolute, e.g. "/workspace"; NULL means "/" */

    /* WRITE */
    const unsigned char *data;
    size_t data_len;
    bool append;
    int mode;    /* < 0: keep the existing file's mode, or 0644 for a new file */
    size_t keep; /* > 0: prune the directory to this many files afterwards (see WRITE) */

    /* READ */
    uint64_t offset;
    size_t max_bytes;

    /* LIST, DELETE (max_entries also bounds the directory listing of a READ) */
    bool recursive;
    size_t max_entries;

    /* DELETE refuses these (e.g. "/workspace"); NULL-terminated when fewer than
     * FSOP_PROTECTED_MAX. "/" is always refused. */
    const char *protected_paths[FSOP_PROTECTED_MAX];
};

/* Normalize a client path (rules above) against cwd into a malloc'd absolute path in *ret
 * (caller frees; untouched on failure). Returns 0, or -EINVAL / -ENAMETOOLONG with err set.
 * Purely lexical: touches no file system. */
int fsop_path_normalize(const char *cwd, const char *path, size_t len, char **ret, struct err *err);

/* Whether mime_type (as READ gives it) is an image type model clients display: PNG, JPEG, GIF
 * or WebP. SVG is not: the vision APIs behind them take none. */
bool fsop_image_type(const char *mime_type);

/* Carry out req confined to root_fd (a directory fd, O_PATH is enough). Returns a new JSON
 * object owned by the caller: the result, or {"error", "errno"} on failure. Never returns NULL
 * (aborts on out of memory). Synchronous and blocking: meant for a worker process, not the
 * event loop; not thread-safe (uses strerror). */
json_t *fsop_run(int root_fd, const struct fsop_request *req);

/* --- the file worker's request ---
 *
 * A file operation runs in the sandbox helper's "sandbox-fs" role, a fresh static program that
 * holds nothing of the server's memory. The server writes this request into a memfd the worker
 * reads: which cgroups to join, the seccomp program to load once it has entered the sandbox,
 * and the operation. */
struct fsop_worker_request {
    int ncg;
    const char *cg_procs[4]; /* cgroup.procs files to write the worker's pid into */
    int nfilters;            /* seccomp programs to load in order (at most 2) */
    const struct sock_filter *filter[2];
    unsigned short filter_len[2]; /* instructions */
    struct fsop_request op;
};

/* Serialize w into a malloc'd buffer (caller frees) of *len bytes. */
void *fsop_worker_encode(const struct fsop_worker_request *w, size_t *len);
/* The same without the last bytes: those of w->op.data and a NUL, when it has data. */
void *fsop_worker_encode_head(const struct fsop_worker_request *w, size_t *len);
/* Parse buf (len bytes, which must stay alive and unchanged: the result points into it) into w.
 * Returns 0, or -EINVAL when buf is not a whole, well-formed request. */
int fsop_worker_decode(const void *buf, size_t len, struct fsop_worker_request *w);

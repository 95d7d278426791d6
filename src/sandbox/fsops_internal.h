#pragma once
/* Shared between the files of the file operations (fsops.h): fsops.c, the operations;
 * fsops_path.c, paths and their resolution below the root; fsops_sniff.c, type sniffing. Every path
 * here is normalized (fsop_path_normalize) and absolute. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"

/* err_set with "cannot <verb> '<path>': <strerror>"; returns code (a negative errno). */
static inline int fsop_fail(struct err *err, int code, const char *verb, const char *path)
{
    return err_set(err, code, "cannot %s '%s': %s", verb, path, strerror(-code));
}

/* --- paths (fsops_path.c) --- */

/* The last component of path (not "/"); the part before it is its parent ("/" for "/x"). Points
 * into path. */
const char *fsop_path_base(const char *path);
/* path's parent, malloc'd (caller frees); path is not "/". */
char *fsop_path_parent(const char *path);
/* Whether a is b or one of its ancestors. */
bool fsop_path_covers(const char *a, const char *b);
/* Open path below root_fd with openat2 flags (O_CLOEXEC added). Every component, symlink
 * targets included, resolves as if root_fd were "/"; magic links are refused. 0 and *ret, or
 * -errno. */
int fsop_resolve(int root_fd, const char *path, uint64_t flags, int *ret);
/* Open the directory that holds path's last component (path is not "/"), as an O_PATH fd (or
 * O_RDONLY when just made) in *ret. With create, missing directories are made with mode 0755
 * one at a time, each looked up again from root_fd. 0, or -errno with err ("cannot <verb>"). */
int fsop_open_parent(int root_fd, const char *path, bool create, const char *verb, int *ret,
                     struct err *err);

/* --- type sniffing (fsops_sniff.c): pure, any thread --- */

/* The mime type of a text file named path, from its extension (case-insensitive); "text/plain"
 * without one (a dot file such as .bashrc has none) or for one not known. A static string. */
const char *fsop_text_mime_type(const char *path);
/* Whether the start of a file (p[0..n)) is an SVG's: markup (after a byte order mark and white
 * space) that holds an <svg element, behind an XML declaration, a doctype or comments. */
bool fsop_svg_like(const unsigned char *p, size_t n);
/* The mime type of binary data from its first bytes p[0..n) (PNG, JPEG, GIF, WebP, PDF, zip,
 * gzip, ELF); "application/octet-stream" when none matches. A static string. */
const char *fsop_binary_mime_type(const unsigned char *p, size_t n);
/* Whether p[0..n), whose magic bytes say mime_type (fsop_image_type), is a whole image: it ends
 * the way its format ends a file, so a file cut short or still being written is not taken for
 * one (a client that cannot decode an image may refuse the conversation that holds it). */
bool fsop_image_whole(const char *mime_type, const unsigned char *p, size_t n);

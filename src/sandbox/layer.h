#pragma once
/* A sandbox's layer copied out (layer.c): the files a sandbox wrote above its template (its
 * overlay's upper directory, its workspace) copied into a directory of the host, with the
 * sandbox's ids moved to the template's range, so that another sandbox can later mount the copy
 * below its own layer, idmapped as the template is: an environment snapshot. */

#include <stdint.h>

#include "base/err.h"

struct layer_limits {
    uint64_t max_bytes;      /* the files' contents, in all */
    uint64_t max_entries;    /* files, directories, links and whiteouts, in all */
    const char *const *skip; /* directories not copied, relative to the root; NULL-terminated */
    uint64_t max_link_bytes; /* memory for remembering hard links (their first copies' paths);
                                past it, further hard-linked files are copied whole; 0: 64 MiB */
};

struct layer_stats {
    uint64_t bytes;   /* of file contents copied */
    uint64_t entries; /* copied */
    uint64_t skipped; /* entries no layer holds: sockets, device nodes (not whiteouts) */
};

/* Copy the tree below the directory src into dst, which must not exist yet (its parent must).
 * src may be written to meanwhile by the sandbox that owns it, which is hostile: nothing is
 * followed (no symlink, no other filesystem), every entry is opened relative to its directory,
 * and what changes kind between a look and an open is skipped. Kept: regular files (their
 * contents, hard links between them), directories, symlinks, fifos, overlayfs whiteouts (the
 * 0/0 character device) and opaque directories (trusted.overlay.opaque), user.* extended
 * attributes, modes (set-id bits too), owners and times (hard links while their table fits in
 * lim->max_link_bytes, else as copies). Owners in [from, from + ids) move to
 * [to, to + ids); any other owner becomes to + 65534 (nobody), so a layer never carries an id
 * of the host. Past a limit, or at any error, dst is removed and the result is -E2BIG (limits)
 * or the error's, with err set. Returns 0; stats (may be NULL) says what was copied. */
int layer_copy(const char *src, const char *dst, uint32_t from, uint32_t to, uint32_t ids,
               const struct layer_limits *lim, struct layer_stats *stats, struct err *err);

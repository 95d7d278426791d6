/* Walking directory trees without following symlinks or crossing into other filesystems, for
 * removing and chowning sandbox layers and templates. */
#include "sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WALK_DEPTH_MAX 256

/* Call fn for name (below dirfd) and everything under it, directories after their contents,
 * without following symlinks or leaving the filesystem of name (entries on another one are
 * skipped). Stops at the first error fn returns. */
static int walk(int dirfd, const char *name, dev_t dev, int depth, tree_fn fn, void *ctx)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (depth == 0)
        dev = st.st_dev;
    else if (st.st_dev != dev)
        return 0;
    if (S_ISDIR(st.st_mode)) {
        if (depth >= WALK_DEPTH_MAX)
            return -ELOOP;
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
            close(fd);
            return -errno;
        }
        int r = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d)))
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                r = walk(fd, de->d_name, dev, depth + 1, fn, ctx);
        closedir(d);
        if (r < 0)
            return r;
    }
    return fn(dirfd, name, &st, ctx);
}

int tree_walk(int dirfd, const char *name, tree_fn fn, void *ctx)
{
    return walk(dirfd, name, 0, 0, fn, ctx);
}

static int remove_entry(int dirfd, const char *name, const struct stat *st, void *ctx)
{
    return unlinkat(dirfd, name, S_ISDIR(st->st_mode) ? AT_REMOVEDIR : 0) < 0 ? -errno : 0;
}

int tree_remove(int dirfd, const char *name)
{
    return walk(dirfd, name, 0, 0, remove_entry, NULL);
}

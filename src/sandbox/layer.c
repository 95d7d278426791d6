/* Copying a sandbox's layer out to the host (layer.h). It runs on a worker thread while the
 * sandbox may still run, so it reads a tree its tenant can change under it: one directory
 * descriptor per level, every name opened relative to it with O_NOFOLLOW, the kind checked
 * again on the descriptor (a name that became something else is skipped), and nothing on
 * another filesystem. It allocates (the hard-link table, directory streams): it is not called
 * between fork and exec. */
#include "sandbox/layer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/util.h"
#include "sandbox/sandbox_internal.h"

#define LAYER_DEPTH_MAX 200 /* below tree_remove's own depth, so a copy refused can go */
#define NOBODY 65534u
#define OPAQUE_XATTR "trusted.overlay.opaque"

/* A file with more than one link, first copied to path (relative to the copy's root). */
struct hardlink {
    dev_t dev;
    ino_t ino;
    char *path;
};

struct copy {
    const struct layer_limits *lim;
    struct layer_stats st;
    uint32_t from, to, ids;
    dev_t dev;           /* of the source's root: nothing on another filesystem is copied */
    int dst_root;        /* the copy's root, for links to a first copy */
    char path[PATH_MAX]; /* of the directory being copied, relative to the root ("" at it) */
    int unnamed;         /* levels below a directory whose path did not fit in path */
    struct hardlink *links;
    size_t nlinks, links_cap;
    uint64_t link_bytes; /* what the table holds: its slots and their paths */
    struct err *err;
};

static uint32_t move_id(const struct copy *c, uint32_t id)
{
    return id >= c->from && id - c->from < c->ids ? id - c->from + c->to : c->to + NOBODY;
}

static int count_entry(struct copy *c)
{
    if (++c->st.entries > c->lim->max_entries)
        return err_set(c->err, -E2BIG, "the layer holds more than %llu files",
                       (unsigned long long)c->lim->max_entries);
    return 0;
}

/* The extended attributes a layer keeps: the user's own, and overlayfs's mark of a directory
 * that hides what is below it. */
static bool kept_xattr(const char *name)
{
    return strcmp(name, OPAQUE_XATTR) == 0 ||
           (strncmp(name, "user.", 5) == 0 && strncmp(name, "user.overlay.", 13) != 0);
}

static int copy_xattrs(struct copy *c, int sfd, int dfd, const char *what)
{
    char names[4096], value[4096];
    ssize_t n = flistxattr(sfd, names, sizeof(names));
    if (n < 0) {
        if (errno == ENOTSUP)
            return 0;
        return err_set(c->err, -errno, "list the extended attributes of '%s'", what);
    }
    for (ssize_t off = 0; off < n; off += (ssize_t)strlen(names + off) + 1) {
        const char *name = names + off;
        if (!kept_xattr(name))
            continue;
        ssize_t len = fgetxattr(sfd, name, value, sizeof(value));
        if (len < 0 && errno == ENODATA)
            continue; /* removed meanwhile */
        if (len < 0 || fsetxattr(dfd, name, value, (size_t)len, 0) < 0)
            return err_set(c->err, -errno, "copy the attribute %s of '%s'", name, what);
    }
    return 0;
}

/* Owner, mode (after the owner: chown drops set-id bits) and times of a copied entry. */
static int copy_attrs(struct copy *c, int dfd, const struct stat *st, const char *what)
{
    struct timespec times[2] = {st->st_atim, st->st_mtim};
    if (fchown(dfd, move_id(c, st->st_uid), move_id(c, st->st_gid)) < 0 ||
        fchmod(dfd, st->st_mode & 07777) < 0 || futimens(dfd, times) < 0)
        return err_set(c->err, -errno, "set the owner, mode and times of '%s'", what);
    return 0;
}

/* The hard-link table: open addressing on the inode number, at most half full. */
static size_t link_slot(const struct copy *c, dev_t dev, ino_t ino)
{
    size_t mask = c->links_cap - 1, i = (size_t)(ino * 0x9e3779b97f4a7c15ull) & mask;
    while (c->links[i].path && (c->links[i].dev != dev || c->links[i].ino != ino))
        i = (i + 1) & mask;
    return i;
}

static const char *link_find(const struct copy *c, const struct stat *st)
{
    return c->links_cap ? c->links[link_slot(c, st->st_dev, st->st_ino)].path : NULL;
}

/* Remember path as the first copy of st's inode, unless the table would pass its memory bound
 * (a tenant's tree may hold millions of hard links with long paths): such files are then
 * copied whole, which the byte limit bounds. */
static void link_add(struct copy *c, const struct stat *st, const char *path)
{
    uint64_t cap = c->lim->max_link_bytes ? c->lim->max_link_bytes : 64ull << 20;
    size_t grow = 2 * (c->nlinks + 1) > c->links_cap ? (c->links_cap ? c->links_cap : 32) : 0;
    if (c->link_bytes + strlen(path) + 1 + 2 * grow * sizeof(*c->links) > cap)
        return;
    c->link_bytes += strlen(path) + 1 + 2 * grow * sizeof(*c->links);
    if (2 * (c->nlinks + 1) > c->links_cap) {
        struct hardlink *old = c->links;
        size_t old_cap = c->links_cap;
        c->links_cap = old_cap ? old_cap * 2 : 64;
        c->links = xcalloc(c->links_cap, sizeof(*c->links));
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].path)
                c->links[link_slot(c, old[i].dev, old[i].ino)] = old[i];
        free(old);
    }
    c->links[link_slot(c, st->st_dev, st->st_ino)] =
        (struct hardlink){st->st_dev, st->st_ino, xstrdup(path)};
    c->nlinks++;
}

/* Copy the rest of sfd to dfd, within the byte limit: in the kernel when both files allow it,
 * else through a buffer. */
static int copy_data(struct copy *c, int sfd, int dfd, const char *what)
{
    bool by_kernel = true;
    char buf[65536];
    for (;;) {
        uint64_t room = c->lim->max_bytes - c->st.bytes;
        size_t want = room < (1u << 30) ? (size_t)room + 1 : 1u << 30;
        ssize_t n;
        if (by_kernel) {
            n = copy_file_range(sfd, NULL, dfd, NULL, want, 0);
            if (n < 0 &&
                (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
                by_kernel = false;
                continue;
            }
        } else {
            n = read(sfd, buf, want < sizeof(buf) ? want : sizeof(buf));
            int w = n > 0 && (uint64_t)n <= room ? write_full(dfd, buf, (size_t)n) : 0;
            if (w < 0) {
                errno = -w;
                n = -1;
            }
        }
        if (n < 0)
            return err_set(c->err, -errno, "copy '%s'", what);
        if (n == 0)
            return 0;
        if ((uint64_t)n > room)
            return err_set(c->err, -E2BIG, "the layer holds more than %llu MiB",
                           (unsigned long long)(c->lim->max_bytes >> 20));
        c->st.bytes += (uint64_t)n;
    }
}

/* Relative path of name in the directory being copied, or NULL when it does not fit. */
static const char *rel_path(const struct copy *c, const char *name, char *buf, size_t cap)
{
    if (c->unnamed)
        return NULL;
    int n = snprintf(buf, cap, "%s%s%s", c->path, c->path[0] ? "/" : "", name);
    return n >= 0 && (size_t)n < cap ? buf : NULL;
}

static int copy_file(struct copy *c, int sdir, int ddir, const char *name, const char *what)
{
    int sfd = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (sfd < 0)
        return errno == ENOENT || errno == ELOOP ? 0 : err_set(c->err, -errno, "open '%s'", what);
    struct stat st;
    int r = 0, dfd = -1;
    if (fstat(sfd, &st) < 0) {
        r = err_set(c->err, -errno, "stat '%s'", what);
        goto out;
    }
    if (!S_ISREG(st.st_mode) || st.st_dev != c->dev)
        goto out; /* it changed kind since the directory was read */
    char rel[PATH_MAX];
    if (st.st_nlink > 1) {
        const char *first = link_find(c, &st);
        if (first) {
            if (linkat(c->dst_root, first, ddir, name, 0) < 0)
                r = err_set(c->err, -errno, "link '%s'", what);
            else
                r = count_entry(c);
            goto out;
        }
    }
    if ((r = count_entry(c)) < 0)
        goto out;
    dfd = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (dfd < 0) {
        r = err_set(c->err, -errno, "create the copy of '%s'", what);
        goto out;
    }
    if ((r = copy_data(c, sfd, dfd, what)) < 0)
        goto out;
    if ((r = copy_xattrs(c, sfd, dfd, what)) < 0 || (r = copy_attrs(c, dfd, &st, what)) < 0)
        goto out;
    const char *path = st.st_nlink > 1 ? rel_path(c, name, rel, sizeof(rel)) : NULL;
    if (path)
        link_add(c, &st, path);
out:
    if (dfd >= 0)
        close(dfd);
    close(sfd);
    return r;
}

static int copy_special(struct copy *c, int sdir, int ddir, const char *name, const struct stat *st,
                        const char *what)
{
    int r;
    if (S_ISLNK(st->st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(sdir, name, target, sizeof(target));
        if (n < 0)
            return errno == ENOENT || errno == EINVAL ? 0
                                                      : err_set(c->err, -errno, "read '%s'", what);
        if ((size_t)n == sizeof(target))
            return err_set(c->err, -ENAMETOOLONG, "the link '%s' is too long", what);
        target[n] = '\0';
        if ((r = count_entry(c)) < 0)
            return r;
        if (symlinkat(target, ddir, name) < 0)
            return err_set(c->err, -errno, "create the link '%s'", what);
    } else if (S_ISFIFO(st->st_mode) || (S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0))) {
        if ((r = count_entry(c)) < 0)
            return r;
        if (mknodat(ddir, name, (st->st_mode & S_IFMT) | 0600, st->st_rdev) < 0)
            return err_set(c->err, -errno, "create '%s'", what);
    } else {
        c->st.skipped++;
        return 0;
    }
    /* no descriptor of a link or a device to set attributes through: by name, not followed */
    struct timespec times[2] = {st->st_atim, st->st_mtim};
    if (fchownat(ddir, name, move_id(c, st->st_uid), move_id(c, st->st_gid), AT_SYMLINK_NOFOLLOW) <
            0 ||
        (!S_ISLNK(st->st_mode) && fchmodat(ddir, name, st->st_mode & 07777, 0) < 0) ||
        utimensat(ddir, name, times, AT_SYMLINK_NOFOLLOW) < 0)
        return err_set(c->err, -errno, "set the owner, mode and times of '%s'", what);
    return 0;
}

static int copy_dir(struct copy *c, int sfd, int dfd, int depth);

static int copy_subdir(struct copy *c, int sdir, int ddir, const char *name, const char *what,
                       int depth)
{
    if (depth >= LAYER_DEPTH_MAX)
        return err_set(c->err, -ELOOP, "the layer nests directories deeper than %d",
                       LAYER_DEPTH_MAX);
    int sfd = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0)
        return errno == ENOENT || errno == ENOTDIR || errno == ELOOP
                   ? 0
                   : err_set(c->err, -errno, "open '%s'", what);
    struct stat st;
    int r = 0, dfd = -1;
    if (fstat(sfd, &st) < 0) {
        r = err_set(c->err, -errno, "stat '%s'", what);
        goto out;
    }
    if (st.st_dev != c->dev)
        goto out; /* a mount point: not the layer's */
    char rel[PATH_MAX];
    bool named = rel_path(c, name, rel, sizeof(rel)) != NULL;
    for (const char *const *k = c->lim->skip; named && k && *k; k++)
        if (strcmp(rel, *k) == 0)
            goto out;
    if ((r = count_entry(c)) < 0)
        goto out;
    if (mkdirat(ddir, name, 0700) < 0 ||
        (dfd = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        r = err_set(c->err, -errno, "create the copy of '%s'", what);
        goto out;
    }
    /* c->path becomes this directory's; when it does not fit, files below are copied, not
     * linked (nothing can link to them) */
    size_t len = strlen(c->path);
    if (named)
        memcpy(c->path, rel, strlen(rel) + 1);
    else
        c->unnamed++;
    if ((r = copy_dir(c, sfd, dfd, depth + 1)) >= 0 && (r = copy_xattrs(c, sfd, dfd, what)) >= 0)
        r = copy_attrs(c, dfd, &st, what);
    if (named)
        c->path[len] = '\0';
    else
        c->unnamed--;
out:
    if (dfd >= 0)
        close(dfd);
    close(sfd);
    return r;
}

static int copy_dir(struct copy *c, int sfd, int dfd, int depth)
{
    int fd = dup(sfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return err_set(c->err, -errno, "read the directory '%s'", c->path[0] ? c->path : ".");
    }
    int r = 0;
    struct dirent *de;
    while (r >= 0 && (errno = 0, de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        char what[PATH_MAX];
        if (!rel_path(c, name, what, sizeof(what)))
            snprintf(what, sizeof(what), ".../%s", name);
        struct stat st;
        if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                r = err_set(c->err, -errno, "stat '%s'", what);
            continue;
        }
        if (S_ISDIR(st.st_mode))
            r = copy_subdir(c, sfd, dfd, name, what, depth);
        else if (S_ISREG(st.st_mode))
            r = copy_file(c, sfd, dfd, name, what);
        else
            r = copy_special(c, sfd, dfd, name, &st, what);
    }
    if (r >= 0 && errno != 0)
        r = err_set(c->err, -errno, "read the directory '%s'", c->path[0] ? c->path : ".");
    closedir(d);
    return r;
}

int layer_copy(const char *src, const char *dst, uint32_t from, uint32_t to, uint32_t ids,
               const struct layer_limits *lim, struct layer_stats *stats, struct err *err)
{
    struct copy c = {.lim = lim, .from = from, .to = to, .ids = ids, .dst_root = -1, .err = err};
    bool made = false;
    int r = 0, sfd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (sfd < 0 || fstat(sfd, &st) < 0) {
        r = err_set(err, -errno, "open the layer '%s'", src);
        goto out;
    }
    c.dev = st.st_dev;
    if (mkdir(dst, 0700) < 0) {
        r = err_set(err, -errno, "create '%s'", dst);
        goto out;
    }
    made = true;
    c.dst_root = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (c.dst_root < 0) {
        r = err_set(err, -errno, "open '%s'", dst);
    } else if ((r = copy_dir(&c, sfd, c.dst_root, 0)) >= 0 &&
               (r = copy_xattrs(&c, sfd, c.dst_root, ".")) >= 0) {
        r = copy_attrs(&c, c.dst_root, &st, ".");
    }
    if (r < 0 && made)
        tree_remove(AT_FDCWD, dst);
out:
    if (c.dst_root >= 0)
        close(c.dst_root);
    if (sfd >= 0)
        close(sfd);
    for (size_t i = 0; i < c.links_cap; i++)
        free(c.links[i].path);
    free(c.links);
    if (stats)
        *stats = c.st;
    return r;
}

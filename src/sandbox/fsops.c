#include "sandbox/fsops.h"
#include "sandbox/fsops_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/ids.h"
#include "base/utf8.h"
#include "base/util.h"

static inline void cleanup_closedirp(DIR **d)
{
    if (*d)
        closedir(*d);
}
#define _cleanup_closedir_ _cleanup_(cleanup_closedirp)

/* A JSON string from bytes that may not be UTF-8 (file names, client paths). */
static json_t *json_str(const char *s, size_t n)
{
    size_t len;
    _cleanup_free_ char *clean = utf8_sanitize(s, n, &len);
    return json_stringn_nocheck(clean, len);
}

static json_t *json_path(const char *path)
{
    return json_str(path, strlen(path));
}

/* ---- helpers for file contents ---- */

static int read_full(int fd, void *buf, size_t len, off_t off, size_t *got)
{
    size_t n = 0;
    while (n < len) {
        ssize_t r = pread(fd, (char *)buf + n, len - n, off + (off_t)n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    *got = n;
    return 0;
}

static const char *type_name(mode_t mode)
{
    if (S_ISREG(mode))
        return "file";
    if (S_ISDIR(mode))
        return "directory";
    if (S_ISLNK(mode))
        return "symlink";
    return "other";
}

static json_t *entry_json(const char *name, const struct stat *st)
{
    char mtime[32], mode[8];
    time_format_rfc3339((int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000, mtime);
    snprintf(mode, sizeof(mode), "%04o", (unsigned)(st->st_mode & 07777));
    return json_pack("{s:o,s:s,s:I,s:s,s:s}", "name", json_path(name), "type",
                     type_name(st->st_mode), "size", (json_int_t)st->st_size, "mtime", mtime,
                     "mode", mode);
}

/* ---- directory names ---- */

struct names {
    char **v;
    size_t n, cap;
};

static void names_release(struct names *names)
{
    for (size_t i = 0; i < names->n; i++)
        free(names->v[i]);
    free(names->v);
}

static int names_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every name in d except "." and "..", in readdir order. */
static int names_read(DIR *d, struct names *names)
{
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de)
            return errno ? -errno : 0;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (names->n == names->cap) {
            names->cap = names->cap ? 2 * names->cap : 32;
            names->v = xrealloc(names->v, names->cap * sizeof(*names->v));
        }
        names->v[names->n++] = xstrdup(de->d_name);
    }
}

/* ---- LIST ---- */

struct lister {
    json_t *entries;
    size_t max;
    bool recursive;
    bool truncated;
};

static size_t clamp_entries(size_t n, size_t def, size_t max)
{
    return n == 0 ? def : n > max ? max : n;
}

/* List the directory open at fd (taken over), prefixing names with prefix/ unless NULL. */
static int list_dir(struct lister *l, int fd, const char *prefix, int depth)
{
    _cleanup_closedir_ DIR *d = fdopendir(fd);
    if (!d) {
        int r = -errno;
        close(fd);
        return r;
    }
    _cleanup_(names_release) struct names names = {0};
    int r = names_read(d, &names);
    if (r < 0)
        return r;
    if (names.n > 1)
        qsort(names.v, names.n, sizeof(*names.v), names_cmp);
    for (size_t i = 0; i < names.n && !l->truncated; i++) {
        struct stat st;
        if (fstatat(dirfd(d), names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* removed since readdir */
        if (json_array_size(l->entries) >= l->max) {
            l->truncated = true;
            break;
        }
        _cleanup_free_ char *name =
            prefix ? xasprintf("%s/%s", prefix, names.v[i]) : xstrdup(names.v[i]);
        json_array_append_new(l->entries, entry_json(name, &st));
        if (!l->recursive || !S_ISDIR(st.st_mode))
            continue;
        if (depth + 1 >= FSOP_MAX_DEPTH) {
            l->truncated = true;
            break;
        }
        /* a single component opened with O_NOFOLLOW: a real subdirectory, never a link */
        int sub = openat(dirfd(d), names.v[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            continue; /* unreadable or replaced: listed, not descended */
        list_dir(l, sub, name, depth + 1);
    }
    return 0;
}

static json_t *list_result(const char *path, struct lister *l)
{
    return json_pack("{s:o,s:O,s:I,s:b}", "path", json_path(path), "entries", l->entries, "count",
                     (json_int_t)json_array_size(l->entries), "truncated", l->truncated);
}

/* List the directory at path, whose O_PATH fd says it is one. */
static int list_directory(int root_fd, const char *path, bool recursive, size_t max_entries,
                          json_t **ret, struct err *err)
{
    int fd;
    int r = fsop_resolve(root_fd, path, O_RDONLY | O_DIRECTORY, &fd);
    if (r < 0)
        return fsop_fail(err, r, "list", path);
    json_auto_t *entries = json_array();
    struct lister l = {
        .entries = entries,
        .max = clamp_entries(max_entries, FSOP_LIST_DEFAULT_ENTRIES, FSOP_LIST_MAX_ENTRIES),
        .recursive = recursive,
    };
    r = list_dir(&l, fd, NULL, 0);
    if (r < 0)
        return fsop_fail(err, r, "list", path);
    *ret = list_result(path, &l);
    return 0;
}

static int fsop_list(int root_fd, const struct fsop_request *req, const char *path, json_t **ret,
                     struct err *err)
{
    _cleanup_close_ int fd = -1;
    int r = fsop_resolve(root_fd, path, O_PATH, &fd);
    struct stat st;
    if (r == 0 && fstat(fd, &st) < 0)
        r = -errno;
    if (r == 0 && S_ISDIR(st.st_mode))
        return list_directory(root_fd, path, req->recursive, req->max_entries, ret, err);

    /* Not a directory: the entry itself, as the directory holding it would list it (so a
     * dangling symlink shows up as the symlink it is). */
    _cleanup_close_ int dir = -1;
    int r2 = fsop_open_parent(root_fd, path, false, "list", &dir, err);
    if (r2 < 0)
        return r < 0 ? fsop_fail(err, r, "list", path) : r2;
    if (fstatat(dir, fsop_path_base(path), &st, AT_SYMLINK_NOFOLLOW) < 0)
        return fsop_fail(err, r < 0 ? r : -errno, "list", path);
    json_auto_t *entries = json_array();
    json_array_append_new(entries, entry_json(fsop_path_base(path), &st));
    struct lister l = {.entries = entries};
    *ret = list_result(path, &l);
    return 0;
}

/* ---- READ ---- */

/* How much of a file's start its type is sniffed from (an SVG's <svg> element comes after its
 * XML declaration, doctype and comments). */
#define SNIFF_BYTES 4096

/* Fill head (SNIFF_BYTES) with the start of the file, whichever part of it buf holds (n bytes
 * read at offset, more following when truncated); returns its length (0 when it cannot be
 * read). */
static size_t sniff_head(int fd, uint64_t offset, const unsigned char *buf, size_t n,
                         bool truncated, unsigned char *head)
{
    size_t hn = n < SNIFF_BYTES ? n : SNIFF_BYTES;
    if (offset == 0 && (hn == SNIFF_BYTES || !truncated))
        memcpy(head, buf, hn);
    else if (read_full(fd, head, SNIFF_BYTES, 0, &hn) < 0)
        hn = 0;
    return hn;
}

static int fsop_read(int root_fd, const struct fsop_request *req, const char *path, json_t **ret,
                     struct err *err)
{
    _cleanup_close_ int opath = -1;
    int r = fsop_resolve(root_fd, path, O_PATH, &opath);
    if (r < 0)
        return fsop_fail(err, r, "read", path);
    struct stat st;
    if (fstat(opath, &st) < 0)
        return fsop_fail(err, -errno, "read", path);
    if (S_ISDIR(st.st_mode)) {
        r = list_directory(root_fd, path, false, req->max_entries, ret, err);
        if (r == 0)
            json_object_set_new(*ret, "type", json_string("directory"));
        return r;
    }
    if (!S_ISREG(st.st_mode))
        return err_set(err, -EINVAL, "cannot read '%s': not a regular file", path);

    /* O_NONBLOCK: should the file have been swapped for a FIFO since, open must not hang. */
    _cleanup_close_ int fd = -1;
    r = fsop_resolve(root_fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, &fd);
    if (r < 0)
        return fsop_fail(err, r, "read", path);
    if (fstat(fd, &st) < 0)
        return fsop_fail(err, -errno, "read", path);
    if (!S_ISREG(st.st_mode))
        return err_set(err, -EINVAL, "cannot read '%s': not a regular file", path);
    /* The worker is forked from the server: its own /proc/self/environ and /proc/self/mem
     * would hand out the server's environment and memory. */
    struct statfs sfs;
    if (fstatfs(fd, &sfs) < 0)
        return fsop_fail(err, -errno, "read", path);
    if (sfs.f_type == PROC_SUPER_MAGIC)
        return err_set(err, -EACCES, "cannot read '%s': files in /proc are not readable here",
                       path);

    size_t max = clamp_entries(req->max_bytes, FSOP_READ_DEFAULT_BYTES, FSOP_READ_MAX_BYTES);
    /* one byte more than asked tells whether anything follows (st_size is not exact on every
     * file system) */
    _cleanup_free_ unsigned char *buf = xmalloc(max + 1);
    size_t n = 0;
    if (req->offset <= (uint64_t)INT64_MAX - max - 1) {
        r = read_full(fd, buf, max + 1, (off_t)req->offset, &n);
        if (r < 0)
            return fsop_fail(err, r, "read", path);
    }
    bool truncated = n > max;
    if (truncated)
        n = max;

    /* Text is whatever is valid UTF-8 without NUL bytes; a read cut at max ends on a
     * character boundary (unless that leaves nothing, then the bytes go out as binary). */
    size_t m = truncated ? utf8_boundary((const char *)buf, n) : n;
    bool text = (m > 0 || n == 0) && !memchr(buf, '\0', m) && utf8_valid((const char *)buf, m);
    json_auto_t *res =
        json_pack("{s:s,s:o,s:I,s:I,s:I,s:b,s:b}", "type", "file", "path", json_path(path), "size",
                  (json_int_t)st.st_size, "offset",
                  (json_int_t)(req->offset > INT64_MAX ? INT64_MAX : req->offset), "bytes",
                  (json_int_t)(text ? m : n), "truncated", truncated, "binary", !text);
    /* the type is sniffed from the start of the file, whichever part of it was read */
    unsigned char head[SNIFF_BYTES];
    bool image = false;
    if (text) {
        const char *type = fsop_text_mime_type(path);
        if (strcmp(type, "image/svg+xml") == 0 &&
            !fsop_svg_like(head, sniff_head(fd, req->offset, buf, n, truncated, head)))
            type = "text/plain";
        json_object_set_new(res, "mime_type", json_string(type));
        json_object_set_new(res, "text", json_stringn_nocheck((const char *)buf, m));
    } else {
        size_t hn = sniff_head(fd, req->offset, buf, n, truncated, head);
        const char *type = fsop_binary_mime_type(head, hn);
        image = req->offset == 0 && !truncated && fsop_image_type(type) &&
                fsop_image_whole(type, buf, n);
        json_object_set_new(res, "mime_type", json_string(type));
        _cleanup_free_ char *b64 = xmalloc(4 * ((n + 2) / 3) + 1);
        size_t len = base64_encode(buf, n, b64);
        json_object_set_new(res, "base64", json_stringn_nocheck(b64, len));
    }
    json_object_set_new(res, "image", json_boolean(image));
    *ret = TAKE_PTR(res);
    return 0;
}

/* ---- WRITE ---- */

/* Copy all of in to out. */
static int copy_fd(int in, int out)
{
    char buf[65536];
    for (off_t off = 0;;) {
        size_t n;
        int r = read_full(in, buf, sizeof(buf), off, &n);
        if (r < 0)
            return r;
        if (n == 0)
            return 0;
        r = write_full(out, buf, n);
        if (r < 0)
            return r;
        off += (off_t)n;
    }
}

/* Create a new empty file next to name, in dir, and return its fd and name. */
static int temp_create(int dir, const char *name, char **tmp_name)
{
    /* keep the name under NAME_MAX with the decoration added */
    int keep = (int)strnlen(name, 200);
    for (int tries = 0; tries < 16; tries++) {
        unsigned char raw[6];
        char rnd[16];
        rand_bytes(raw, sizeof(raw));
        base64url_encode(raw, sizeof(raw), rnd);
        char *tmp = xasprintf(".%.*s.%s.tmp", keep, name, rnd);
        int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            *tmp_name = tmp;
            return fd;
        }
        int r = -errno;
        free(tmp);
        if (r != -EEXIST)
            return r;
    }
    return -EEXIST;
}

/* Remove the regular files of dir that sort before its keep last ones, except name. Best
 * effort: what cannot be listed or removed stays. */
static void prune_dir(int dir, const char *name, size_t keep)
{
    int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    _cleanup_closedir_ DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    _cleanup_(names_release) struct names all = {0};
    if (names_read(d, &all) < 0)
        return;
    _cleanup_free_ char **files = xmalloc((all.n + 1) * sizeof(*files));
    size_t n = 0;
    for (size_t i = 0; i < all.n; i++) {
        struct stat st;
        if (all.v[i][0] != '.' && fstatat(dirfd(d), all.v[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode))
            files[n++] = all.v[i];
    }
    if (n > 1)
        qsort(files, n, sizeof(*files), names_cmp);
    for (size_t i = 0; i + keep < n; i++)
        if (strcmp(files[i], name) != 0)
            unlinkat(dirfd(d), files[i], 0);
}

static int fsop_write(int root_fd, const struct fsop_request *req, const char *path, json_t **ret,
                      struct err *err)
{
    if (strcmp(path, "/") == 0)
        return fsop_fail(err, -EISDIR, "write", path);
    _cleanup_close_ int dir = -1;
    int r = fsop_open_parent(root_fd, path, true, "write", &dir, err);
    if (r < 0)
        return r;
    const char *name = fsop_path_base(path);

    struct stat st;
    bool created = false;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            return fsop_fail(err, -errno, "write", path);
        created = true;
    } else if (S_ISLNK(st.st_mode)) {
        return err_set(err, -ELOOP, "cannot write '%s': is a symlink", path);
    } else if (S_ISDIR(st.st_mode)) {
        return fsop_fail(err, -EISDIR, "write", path);
    } else if (!S_ISREG(st.st_mode)) {
        return err_set(err, -EINVAL, "cannot write '%s': not a regular file", path);
    }
    /* like chmod by the owner, and like the kernel when a file is written: no setuid/setgid */
    mode_t mode = req->mode >= 0 ? (mode_t)req->mode : created ? 0644 : st.st_mode;
    mode &= 0777 | S_ISVTX;

    _cleanup_close_ int old = -1;
    if (req->append && !created) {
        old = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (old < 0)
            return fsop_fail(err, -errno, "write", path);
        if (fstat(old, &st) < 0)
            return fsop_fail(err, -errno, "write", path);
        if (!S_ISREG(st.st_mode))
            return err_set(err, -EINVAL, "cannot write '%s': not a regular file", path);
    }

    _cleanup_free_ char *tmp_name = NULL;
    _cleanup_close_ int tmp = temp_create(dir, name, &tmp_name);
    if (tmp < 0)
        return fsop_fail(err, tmp, "write", path);
    struct stat tst;
    r = old >= 0 ? copy_fd(old, tmp) : 0;
    if (r == 0)
        r = write_full(tmp, req->data, req->data_len);
    if (r == 0 && fchmod(tmp, mode) < 0)
        r = -errno;
    if (r == 0 && !created && (st.st_uid != geteuid() || st.st_gid != getegid())) {
        if (fchown(tmp, st.st_uid, st.st_gid) < 0) {
            /* keeping the owner is best effort: an unprivileged worker cannot */
        }
    }
    if (r == 0 && fstat(tmp, &tst) < 0)
        r = -errno;
    if (r == 0 && renameat(dir, tmp_name, dir, name) < 0)
        r = -errno;
    if (r < 0) {
        unlinkat(dir, tmp_name, 0);
        return fsop_fail(err, r, "write", path);
    }
    if (req->keep > 0)
        prune_dir(dir, name, req->keep);
    *ret =
        json_pack("{s:o,s:I,s:I,s:b}", "path", json_path(path), "bytes_written",
                  (json_int_t)req->data_len, "size", (json_int_t)tst.st_size, "created", created);
    return 0;
}

/* ---- DELETE ---- */

struct file_id {
    dev_t dev;
    ino_t ino;
    const char *path; /* the protected path it belongs to */
};

struct remover {
    bool remove; /* false: only check and count */
    size_t count, limit;
    char *protected_paths[FSOP_PROTECTED_MAX]; /* normalized */
    struct file_id protect[2 * FSOP_PROTECTED_MAX + 1];
    size_t nprotect;
    const char *hit; /* the protected path found, for the message */
};

static void remover_release(struct remover *rm)
{
    for (size_t i = 0; i < FSOP_PROTECTED_MAX; i++)
        free(rm->protected_paths[i]);
}

static void protect_add(struct remover *rm, int fd, const char *name, int flags, const char *p)
{
    struct stat st;
    if (fstatat(fd, name, &st, flags) == 0 && rm->nprotect < ARRAY_SIZE(rm->protect))
        rm->protect[rm->nprotect++] = (struct file_id){st.st_dev, st.st_ino, p};
}

/* Record what the protected paths are on disk: the entry itself and, for a symlink, its target,
 * so that no other name for them can be deleted either. */
static void protect_resolve(struct remover *rm, int root_fd, const char *path)
{
    int fd;
    if (fsop_resolve(root_fd, path, O_PATH, &fd) == 0) {
        protect_add(rm, fd, "", AT_EMPTY_PATH, path);
        close(fd);
    }
    if (strcmp(path, "/") != 0 && fsop_resolve(root_fd, path, O_PATH | O_NOFOLLOW, &fd) == 0) {
        protect_add(rm, fd, "", AT_EMPTY_PATH, path);
        close(fd);
    }
}

static const char *protected_by(const struct remover *rm, const struct stat *st)
{
    for (size_t i = 0; i < rm->nprotect; i++) {
        if (rm->protect[i].dev == st->st_dev && rm->protect[i].ino == st->st_ino)
            return rm->protect[i].path;
    }
    return NULL;
}

static bool is_mount_root(int dir, const char *name)
{
    struct statx stx;
    if (statx(dir, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE, &stx) < 0)
        return false;
    return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
           (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* Check and count (rm->remove false) or remove (true) name in dir and everything below it,
 * never following a symlink. Returns 0 or -errno; -EPERM sets rm->hit. */
static int remove_walk(struct remover *rm, int dir, const char *name, int depth)
{
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if ((rm->hit = protected_by(rm, &st)))
        return -EPERM;
    if (S_ISDIR(st.st_mode)) {
        if (is_mount_root(dir, name))
            return -EBUSY;
        if (depth >= FSOP_MAX_DEPTH)
            return -ELOOP;
        int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        _cleanup_closedir_ DIR *d = fdopendir(fd);
        if (!d) {
            int r = -errno;
            close(fd);
            return r;
        }
        _cleanup_(names_release) struct names names = {0};
        int r = names_read(d, &names);
        for (size_t i = 0; r == 0 && i < names.n; i++)
            r = remove_walk(rm, dirfd(d), names.v[i], depth + 1);
        if (r < 0)
            return r;
    }
    if (!rm->remove)
        return ++rm->count > rm->limit ? -E2BIG : 0;
    if (unlinkat(dir, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
        return -errno;
    rm->count++;
    return 0;
}

static int fsop_delete(int root_fd, const struct fsop_request *req, const char *path, json_t **ret,
                       struct err *err)
{
    _cleanup_(remover_release) struct remover rm = {
        .limit =
            clamp_entries(req->max_entries, FSOP_DELETE_DEFAULT_ENTRIES, FSOP_DELETE_MAX_ENTRIES),
    };
    if (strcmp(path, "/") == 0)
        return err_set(err, -EPERM, "refusing to delete '/'");
    protect_resolve(&rm, root_fd, "/");
    for (size_t i = 0; i < FSOP_PROTECTED_MAX && req->protected_paths[i]; i++) {
        const char *p = req->protected_paths[i];
        char **norm = &rm.protected_paths[i];
        if (fsop_path_normalize("/", p, strlen(p), norm, NULL) < 0)
            continue;
        if (fsop_path_covers(path, *norm))
            return err_set(err, -EPERM, "refusing to delete '%s'", path);
        protect_resolve(&rm, root_fd, *norm);
    }

    _cleanup_close_ int dir = -1;
    int r = fsop_open_parent(root_fd, path, false, "delete", &dir, err);
    if (r < 0)
        return r;
    const char *name = fsop_path_base(path);
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return fsop_fail(err, -errno, "delete", path);
    const char *hit = protected_by(&rm, &st);
    if (hit)
        return err_set(err, -EPERM, "refusing to delete '%s': it is '%s'", path, hit);

    if (S_ISDIR(st.st_mode) && req->recursive) {
        r = remove_walk(&rm, dir, name, 0);
        if (r == 0) {
            rm.remove = true;
            rm.count = 0;
            r = remove_walk(&rm, dir, name, 0);
        } else if (r == -EPERM) {
            return err_set(err, r, "refusing to delete '%s': it contains '%s'", path, rm.hit);
        } else if (r == -EBUSY) {
            return err_set(err, r, "refusing to delete '%s': it is or contains a mount point",
                           path);
        } else if (r == -E2BIG) {
            return err_set(err, r, "refusing to delete '%s': it holds more than %zu entries", path,
                           rm.limit);
        } else if (r == -ELOOP) {
            return err_set(err, r, "refusing to delete '%s': it is nested deeper than %d levels",
                           path, FSOP_MAX_DEPTH);
        }
        if (r < 0)
            return rm.count ? err_set(err, r, "cannot delete '%s' (%zu entries deleted): %s", path,
                                      rm.count, strerror(-r))
                            : fsop_fail(err, r, "delete", path);
    } else {
        if (unlinkat(dir, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0) {
            if (errno == ENOTEMPTY || errno == EEXIST)
                return err_set(err, -ENOTEMPTY,
                               "cannot delete '%s': directory not empty (needs recursive)", path);
            return fsop_fail(err, -errno, "delete", path);
        }
        rm.count = 1;
    }
    *ret = json_pack("{s:o,s:I}", "path", json_path(path), "deleted", (json_int_t)rm.count);
    return 0;
}

/* ---- entry point ---- */

json_t *fsop_run(int root_fd, const struct fsop_request *req)
{
    struct err err = {0};
    json_t *res = NULL;
    _cleanup_free_ char *path = NULL;
    const char *cwd = req->cwd && req->cwd[0] ? req->cwd : "/";
    int r;
    if (req->kind == FSOP_LIST && (!req->path || req->path_len == 0))
        r = fsop_path_normalize("/", cwd, strlen(cwd), &path, &err);
    else
        r = fsop_path_normalize(cwd, req->path, req->path_len, &path, &err);
    if (r == 0) {
        switch (req->kind) {
        case FSOP_READ: r = fsop_read(root_fd, req, path, &res, &err); break;
        case FSOP_WRITE: r = fsop_write(root_fd, req, path, &res, &err); break;
        case FSOP_LIST: r = fsop_list(root_fd, req, path, &res, &err); break;
        case FSOP_DELETE: r = fsop_delete(root_fd, req, path, &res, &err); break;
        default: r = err_set(&err, -EINVAL, "unknown file operation %d", (int)req->kind);
        }
    }
    if (r < 0) {
        json_decref(res);
        return json_pack("{s:o,s:i}", "error", json_path(err.msg), "errno", -r);
    }
    if (!res) /* json_pack fails only on out of memory */
        abort();
    return res;
}

/* Paths of the file operations: a client path normalized lexically (pure, the server checks a
 * cwd with it too), and a normalized path opened below the root with openat2, never leaving it
 * (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS). The rules are in fsops.h. */
#include "sandbox/fsops.h"
#include "sandbox/fsops_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"

/* Append the components of s[0..n) to the normalized path out[0..*o). */
static void path_push(char *out, size_t *o, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && s[i] == '/')
            i++;
        size_t start = i;
        while (i < n && s[i] != '/')
            i++;
        size_t len = i - start;
        if (len == 0 || (len == 1 && s[start] == '.'))
            continue;
        if (len == 2 && s[start] == '.' && s[start + 1] == '.') {
            while (*o > 0 && out[*o - 1] != '/')
                (*o)--;
            if (*o > 0)
                (*o)--; /* the slash */
            continue;
        }
        out[(*o)++] = '/';
        memcpy(out + *o, s + start, len);
        *o += len;
    }
}

int fsop_path_normalize(const char *cwd, const char *path, size_t len, char **ret, struct err *err)
{
    if (!path || len == 0)
        return err_set(err, -EINVAL, "path is empty");
    if (len > FSOP_PATH_MAX)
        return err_set(err, -ENAMETOOLONG, "path is longer than %d bytes", FSOP_PATH_MAX);
    if (memchr(path, '\0', len))
        return err_set(err, -EINVAL, "path contains a NUL byte");
    size_t cwd_len = cwd && path[0] != '/' ? strlen(cwd) : 0;
    /* each of the two parts may gain a leading slash */
    char *out = xmalloc(cwd_len + len + 3);
    size_t o = 0;
    path_push(out, &o, cwd, cwd_len);
    path_push(out, &o, path, len);
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    if (o > FSOP_PATH_MAX) {
        free(out);
        return err_set(err, -ENAMETOOLONG, "path is longer than %d bytes", FSOP_PATH_MAX);
    }
    *ret = out;
    return 0;
}

/* The last component of a normalized path other than "/"; the part before it is its parent
 * ("/" for "/x"). */
const char *fsop_path_base(const char *path)
{
    return strrchr(path, '/') + 1;
}

char *fsop_path_parent(const char *path)
{
    size_t n = (size_t)(fsop_path_base(path) - path) - 1;
    return n == 0 ? xstrdup("/") : xstrndup(path, n);
}

/* Whether a is b or one of its ancestors (both normalized). */
bool fsop_path_covers(const char *a, const char *b)
{
    if (strcmp(a, "/") == 0)
        return true;
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

/* Open a normalized absolute path below root_fd with openat2 flags (O_CLOEXEC added). Every
 * component, including symlink targets, resolves as if root_fd were "/". Returns 0 or -errno. */
int fsop_resolve(int root_fd, const char *path, uint64_t flags, int *ret)
{
    struct open_how how = {
        .flags = flags | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    const char *rel = path[1] ? path + 1 : ".";
    /* EAGAIN: a concurrent rename or mount made the kernel unsure that ".." stayed inside. */
    for (int tries = 0;; tries++) {
        long fd = syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));
        if (fd >= 0) {
            *ret = (int)fd;
            return 0;
        }
        if ((errno != EAGAIN && errno != EINTR) || tries >= 32)
            return -errno;
    }
}

/* Open the directory that holds path's last component (path is not "/"). With create, missing
 * directories are made with mode 0755 one at a time, each looked up again from root_fd. */
int fsop_open_parent(int root_fd, const char *path, bool create, const char *verb, int *ret,
                     struct err *err)
{
    _cleanup_free_ char *dir = fsop_path_parent(path);
    int r = fsop_resolve(root_fd, dir, O_PATH | O_DIRECTORY, ret);
    if (r == 0)
        return 0;
    if (r != -ENOENT || !create)
        return fsop_fail(err, r, verb, path);

    _cleanup_close_ int cur = -1;
    r = fsop_resolve(root_fd, "/", O_PATH | O_DIRECTORY, &cur);
    if (r < 0)
        return fsop_fail(err, r, verb, path);
    for (char *p = dir + 1;;) {
        /* cut dir after each component in turn: "/a", then "/a/b", then "/a/b/c" */
        char *slash = strchr(p, '/');
        if (slash)
            *slash = '\0';
        int next = -1;
        r = fsop_resolve(root_fd, dir, O_PATH | O_DIRECTORY, &next);
        if (r == -ENOENT) {
            if (mkdirat(cur, fsop_path_base(dir), 0755) == 0) {
                /* the exact mode whatever the umask; the new directory is ours */
                r = fsop_resolve(root_fd, dir, O_RDONLY | O_DIRECTORY, &next);
                if (r == 0 && fchmod(next, 0755) < 0)
                    r = -errno;
            } else if (errno == EEXIST) {
                r = fsop_resolve(root_fd, dir, O_PATH | O_DIRECTORY, &next);
            } else {
                return fsop_fail(err, -errno, "create directory", dir);
            }
        }
        if (r < 0) {
            if (next >= 0)
                close(next);
            return fsop_fail(err, r, verb, path);
        }
        close(cur);
        cur = next;
        if (!slash)
            break;
        *slash = '/';
        p = slash + 1;
    }
    *ret = TAKE_FD(cur);
    return 0;
}

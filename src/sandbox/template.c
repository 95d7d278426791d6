/* Templates: the read-only lower layer of a sandbox's root.
 *
 * Templates keep plain ids (root is 0) and each sandbox mounts its template idmapped into its
 * own id range, so the template's root is the sandbox's root whichever range that is.
 *
 * "host" is assembled from the host itself: an almost empty tree owned by root (the sandbox's
 * root, once idmapped, so root inside can create files in /etc, /root, ...), symlinks mirroring
 * the host's merged /bin, /lib*, a synthesized /etc holding only what programs need (users,
 * hosts, loader cache, alternatives, public CA certificates), and the host's /usr bind-mounted
 * read-only at start. Nothing else of the host (/root, /home, /var, /srv, the data dir, private
 * keys, git's system configuration) exists in it, and of what is copied only what any host user
 * may read: a file or directory the host keeps from other users is a secret there and stays out.
 *
 * "host" lives in TEMPLATE_DIR/host-<recipe hash>; a changed recipe (or changed host files it
 * copies) gives a new directory, so running sandboxes keep their lower layer. Beside each is its
 * marker, host-<hash>.used: a server holds a shared lock (flock) on it while it runs on that
 * template, and each sandbox start sets its time. At its start a server removes the other host
 * templates whose marker no server holds and that no running sandbox may be on: one is kept while
 * a sandbox that started when it was last used still runs, since which template a sandbox mounts
 * cannot be told from its mount table, and a server that starts again adopts the sandboxes of the
 * one before.
 *
 * "debian" is a debootstrap tree in TEMPLATE_DIR/debian/rootfs, built by `sandbox-mcp template
 * build debian` (template_build.c; the server runs it itself, template_keeper.c), which also keeps
 * replaced trees while sandboxes use them. TEMPLATE_DIR is SANDBOX_TEMPLATE_DIR, by default
 * DATA_DIR/templates. */
#include "sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"

#define HOST_RECIPE "host-template-6"

static const char *const top_links[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};
static const char *const empty_dirs[] = {
    "usr", "proc",    "dev",     "tmp",       "workspace", "root", "home", "opt", "mnt",    "run",
    "var", "var/tmp", "var/lib", "var/cache", "var/log",   "srv",  "sys",  "etc", "etc/ssl"};
/* Host files copied into /etc (missing ones are skipped). */
static const char *const etc_files[] = {
    "ld.so.cache",    "ld.so.conf", "nsswitch.conf",  "localtime", "mime.types",
    "protocols",      "services",   "bash.bashrc",    "profile",   "inputrc",
    "debian_version", "os-release", "ssl/openssl.cnf"};
/* Host trees copied into /etc (symlinks stay symlinks). Of /etc/ssl only the public CA
 * certificates: its private/ holds the host's keys. */
static const char *const etc_trees[] = {"alternatives", "ld.so.conf.d", "ssl/certs",
                                        "profile.d",    "python3",      "perl"};

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char group[] = "root:x:0:\nnogroup:x:65534:\n";
static const char hosts[] = "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n";

static int write_text(const char *path, const char *text, uid_t uid)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n)
        return -errno;
    if (fchown(fd, uid, uid) < 0)
        return -errno;
    return 0;
}

static int copy_file(const char *src, const char *dst, const struct stat *st, uid_t uid)
{
    _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return errno == EACCES ? 0 : -errno;
    _cleanup_close_ int out =
        open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, st->st_mode & 0755);
    if (out < 0)
        return -errno;
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n)
            return -errno;
    if (n < 0)
        return -errno;
    return fchown(out, uid, uid) < 0 ? -errno : 0;
}

/* Copy src to dst: files, symlinks and directories (recursively); others are skipped. */
static int copy_tree(const char *src, const char *dst, uid_t uid, int depth)
{
    struct stat st;
    if (lstat(src, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlink(src, target, sizeof(target) - 1);
        if (n < 0)
            return -errno;
        target[n] = '\0';
        if (symlink(target, dst) < 0 && errno != EEXIST)
            return -errno;
        return lchown(dst, uid, uid) < 0 ? -errno : 0;
    }
    /* what the host keeps from its other users is not for the sandbox either */
    if (!(st.st_mode & S_IROTH) || (S_ISDIR(st.st_mode) && !(st.st_mode & S_IXOTH)))
        return 0;
    if (S_ISREG(st.st_mode))
        return copy_file(src, dst, &st, uid);
    if (!S_ISDIR(st.st_mode) || depth > 8)
        return 0;
    if (mkdir(dst, 0755) < 0 && errno != EEXIST)
        return -errno;
    if (chown(dst, uid, uid) < 0)
        return -errno;
    DIR *d = opendir(src);
    if (!d)
        return errno == EACCES ? 0 : -errno;
    int r = 0;
    struct dirent *de;
    while (r == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char s[PATH_MAX], t[PATH_MAX];
        if (snprintf(s, sizeof(s), "%s/%s", src, de->d_name) >= (int)sizeof(s) ||
            snprintf(t, sizeof(t), "%s/%s", dst, de->d_name) >= (int)sizeof(t))
            continue;
        r = copy_tree(s, t, uid, depth + 1);
    }
    closedir(d);
    return r;
}

/* The recipe hash: recipe version and the change times of the host files copied. */
static void host_recipe_hash(char out[17])
{
    char buf[8192];
    int n = snprintf(buf, sizeof(buf), "%s", HOST_RECIPE);
    for (size_t i = 0; i < ARRAY_SIZE(etc_files) + ARRAY_SIZE(etc_trees); i++) {
        const char *name =
            i < ARRAY_SIZE(etc_files) ? etc_files[i] : etc_trees[i - ARRAY_SIZE(etc_files)];
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof(path), "/etc/%s", name);
        if (stat(path, &st) == 0 && n < (int)sizeof(buf))
            n += snprintf(buf + n, sizeof(buf) - (size_t)n, " %s:%lld.%ld", name,
                          (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    }
    for (size_t i = 0; i < ARRAY_SIZE(top_links); i++) {
        char path[32], target[PATH_MAX];
        snprintf(path, sizeof(path), "/%s", top_links[i]);
        ssize_t t = readlink(path, target, sizeof(target) - 1);
        if (t > 0 && n < (int)sizeof(buf))
            n += snprintf(buf + n, sizeof(buf) - (size_t)n, " %s->%.*s", path, (int)t, target);
    }
    char hex[65];
    sha256_hex(buf, strlen(buf), hex);
    memcpy(out, hex, 16);
    out[16] = '\0';
}

/* The host template's tree, assembled in tmp. */
static int assemble_host(const char *tmp, uid_t uid, struct template_info *out, struct err *err)
{
    char path[PATH_MAX];
    int r;
    if (chown(tmp, uid, uid) < 0)
        return err_set(err, -errno, "cannot chown '%s': %s", tmp, strerror(errno));
    for (size_t i = 0; i < ARRAY_SIZE(empty_dirs); i++) {
        snprintf(path, sizeof(path), "%s/%s", tmp, empty_dirs[i]);
        mode_t mode = strcmp(empty_dirs[i], "root") == 0 ? 0700
                      : strcmp(empty_dirs[i], "tmp") == 0 || strcmp(empty_dirs[i], "var/tmp") == 0
                          ? 01777
                          : 0755;
        if (mkdir(path, mode) < 0 && errno != EEXIST)
            return err_set(err, -errno, "cannot create '%s': %s", path, strerror(errno));
        chmod(path, mode);
        if (chown(path, uid, uid) < 0)
            return err_set(err, -errno, "cannot chown '%s': %s", path, strerror(errno));
    }
    for (size_t i = 0; i < ARRAY_SIZE(top_links); i++) {
        char host[32], target[PATH_MAX];
        struct stat st;
        snprintf(host, sizeof(host), "/%s", top_links[i]);
        snprintf(path, sizeof(path), "%s/%s", tmp, top_links[i]);
        if (lstat(host, &st) < 0)
            continue;
        if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlink(host, target, sizeof(target) - 1);
            if (n < 0)
                continue;
            target[n] = '\0';
            if (symlink(target, path) < 0 && errno != EEXIST)
                return err_set(err, -errno, "cannot link '%s': %s", path, strerror(errno));
            lchown(path, uid, uid);
        } else if (S_ISDIR(st.st_mode) && out->nbinds < (int)ARRAY_SIZE(out->binds)) {
            /* a host without merged /usr: bind the directory itself */
            mkdir(path, 0755);
            snprintf(out->binds[out->nbinds++], sizeof(out->binds[0]), "%s", host);
        }
    }
    snprintf(out->binds[out->nbinds++], sizeof(out->binds[0]), "/usr");
    for (size_t i = 0; i < ARRAY_SIZE(etc_files); i++) {
        char src[PATH_MAX];
        snprintf(src, sizeof(src), "/etc/%s", etc_files[i]);
        snprintf(path, sizeof(path), "%s/etc/%s", tmp, etc_files[i]);
        if ((r = copy_tree(src, path, uid, 7)) < 0)
            return err_set(err, r, "cannot copy '%s': %s", src, strerror(-r));
    }
    for (size_t i = 0; i < ARRAY_SIZE(etc_trees); i++) {
        char src[PATH_MAX];
        snprintf(src, sizeof(src), "/etc/%s", etc_trees[i]);
        snprintf(path, sizeof(path), "%s/etc/%s", tmp, etc_trees[i]);
        if ((r = copy_tree(src, path, uid, 0)) < 0)
            return err_set(err, r, "cannot copy '%s': %s", src, strerror(-r));
    }
    static const struct {
        const char *name, *text;
    } synth[] = {
        {"passwd", passwd},        {"group", group},    {"hosts", hosts},
        {"hostname", "sandbox\n"}, {"resolv.conf", ""}, {"shells", "/bin/sh\n/bin/bash\n"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(synth); i++) {
        snprintf(path, sizeof(path), "%s/etc/%s", tmp, synth[i].name);
        unlink(path);
        if ((r = write_text(path, synth[i].text, uid)) < 0)
            return err_set(err, r, "cannot write '%s': %s", path, strerror(-r));
    }
    return 0;
}

/* Assemble the host template beside dir and move it into place. Servers sharing a template
 * directory may build it at once: the first to move its tree in wins, and the others remove
 * theirs, as a build that fails does. A tree of this process id already there is what a server
 * that died while building left. */
int template_build_host(const char *dir, uid_t uid, struct template_info *out, struct err *err)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s.building.%d", dir, (int)getpid());
    if (mkdir(tmp, 0755) < 0 &&
        (errno != EEXIST || tree_remove(AT_FDCWD, tmp) < 0 || mkdir(tmp, 0755) < 0))
        return err_set(err, -errno, "cannot create '%s': %s", tmp, strerror(errno));
    int r = assemble_host(tmp, uid, out, err);
    if (r == 0 && rename(tmp, dir) == 0)
        return 0;
    if (r == 0 && errno != ENOTEMPTY && errno != EEXIST)
        r = err_set(err, -errno, "cannot rename '%s': %s", tmp, strerror(errno));
    tree_remove(AT_FDCWD, tmp);
    return r;
}

/* A sandbox starting on a host template marks it used (template_mark_used) before its processes
 * exist: one that started within this margin after the mark may be on it. */
#define HOST_USE_MARGIN_S 60

void template_mark_used(const struct template_info *t)
{
    if (t->lock >= 0)
        futimens(t->lock, NULL);
}

/* The marker of the host template dir, made when missing (a template made before there were
 * markers is then as if used just now). */
static int open_marker(const char *dir, char *path, size_t cap)
{
    snprintf(path, cap, "%s.used", dir);
    return open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
}

/* A host template's directory name: "host-" and the 16 hex digits of its hash, nothing more
 * (then *rest is ""), or followed by what rest points at. */
static bool host_dir_name(const char *name, const char **rest)
{
    if (strncmp(name, "host-", 5) != 0 || strlen(name) < 5 + 16 ||
        strspn(name + 5, "0123456789abcdef") < 16)
        return false;
    *rest = name + 5 + 16;
    return true;
}

/* What a removal left: a tree moved aside (".old.<pid>") whose removal did not finish because
 * that server stopped, which nothing can use, or the marker of a template that is gone. */
static void remove_leftover(const char *base, const char *name, const char *rest)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", base, name);
    bool old = strncmp(rest, ".old.", 5) == 0 && rest[5] &&
               strspn(rest + 5, "0123456789") == strlen(rest + 5);
    if (old && kill((pid_t)atoi(rest + 5), 0) < 0 && errno == ESRCH) {
        int r = tree_remove(AT_FDCWD, path);
        if (r < 0)
            log_warn("sandbox template-remove-failed dir=%s err=\"%s\"", path, strerror(-r));
    } else if (strcmp(rest, ".used") == 0) {
        /* unless a server holds it: one may be building its template again */
        char tree[PATH_MAX];
        struct stat st;
        snprintf(tree, sizeof(tree), "%s/%.*s", base, (int)(rest - name), name);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 && lstat(tree, &st) < 0 && errno == ENOENT)
            unlink(path);
    }
}

void template_prune_hosts(const char *base, const char *keep, int64_t (*oldest_sandbox)(void))
{
    DIR *d = opendir(base);
    struct dirent *de;
    int64_t oldest = -1;
    while (d && (de = readdir(d))) {
        const char *rest;
        if (!host_dir_name(de->d_name, &rest) || strcmp(de->d_name, keep) == 0)
            continue;
        if (*rest) {
            remove_leftover(base, de->d_name, rest);
            continue;
        }
        char path[PATH_MAX], aside[PATH_MAX], used[PATH_MAX + 8];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", base, de->d_name);
        _cleanup_close_ int fd = open_marker(path, used, sizeof(used));
        if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0 || fstat(fd, &st) < 0)
            continue; /* a server runs on it */
        if (oldest < 0)
            oldest = oldest_sandbox();
        if (oldest <= (int64_t)st.st_mtim.tv_sec + HOST_USE_MARGIN_S)
            continue; /* a sandbox that started when it was last used may be on it */
        snprintf(aside, sizeof(aside), "%s.old.%d", path, (int)getpid());
        if (rename(path, aside) < 0)
            continue;
        int r = tree_remove(AT_FDCWD, aside);
        if (r < 0)
            log_warn("sandbox template-remove-failed dir=%s err=\"%s\"", aside, strerror(-r));
        else
            log_info("sandbox template removed name=host dir=%s", path);
        unlink(used);
    }
    if (d)
        closedir(d);
}

/* A shared lock on the host template dir's marker, which must still be the marker at its path,
 * beside the tree, once it is held (a server removing the template may have taken both away
 * meanwhile): the descriptor, -EAGAIN when they went, or another negative errno. */
static int hold_host(const char *dir)
{
    char used[PATH_MAX + 8];
    struct stat held, now;
    int fd = open_marker(dir, used, sizeof(used));
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_SH) < 0 || fstat(fd, &held) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (stat(used, &now) < 0 || now.st_ino != held.st_ino || now.st_dev != held.st_dev ||
        stat(dir, &now) < 0) {
        close(fd);
        return -EAGAIN;
    }
    return fd;
}

int template_prepare(const char *base, const char *name, struct template_info *out, struct err *err)
{
    char dir[PATH_MAX], hash[17];
    memset(out, 0, sizeof(*out));
    out->lock = -1;
    snprintf(out->name, sizeof(out->name), "%s", name);
    if (mkdir(base, 0700) < 0 && errno != EEXIST)
        return err_set(err, -errno, "cannot create '%s': %s", base, strerror(errno));
    if (strcmp(name, "debian") == 0) {
        snprintf(dir, sizeof(dir), "%s/debian/rootfs", base);
        struct stat st;
        if (stat(dir, &st) < 0)
            return err_set(err, -ENOENT, "template 'debian' is not built yet");
        /* Built by an older server, which handed parts of it to one shared id range. */
        if (st.st_uid != 0)
            return err_set(err, -EINVAL,
                           "template 'debian' was built for another id layout: run "
                           "'sandbox-mcp template build debian'");
        snprintf(out->rootfs, sizeof(out->rootfs), "%s", dir);
        return 0;
    }
    if (strcmp(name, "host") != 0)
        return err_set(err, -EINVAL, "unknown template '%s' (host or debian)", name);
    host_recipe_hash(hash);
    snprintf(dir, sizeof(dir), "%s/host-%s", base, hash);
    struct stat st;
    int64_t t0 = time_mono_ms();
    int lock = -EAGAIN;
    for (int tries = 0; lock == -EAGAIN && tries < 3; tries++) {
        if (stat(dir, &st) < 0) {
            out->nbinds = 0;
            if (template_build_host(dir, 0, out, err) < 0)
                return err_wrap(err, "template 'host'");
            log_info("sandbox template built name=host dir=%s ms=%lld", dir,
                     (long long)(time_mono_ms() - t0));
        }
        lock = hold_host(dir);
    }
    if (lock < 0)
        return err_set(err, lock, "template 'host': cannot hold '%s.used': %s", dir,
                       strerror(-lock));
    out->lock = lock;
    template_prune_hosts(base, dir + strlen(base) + 1, template_oldest_sandbox);
    if (out->nbinds == 0) {
        /* Cached: work out the binds again (they depend only on the host's top level). */
        for (size_t i = 0; i < ARRAY_SIZE(top_links); i++) {
            char host[32];
            snprintf(host, sizeof(host), "/%s", top_links[i]);
            if (lstat(host, &st) == 0 && S_ISDIR(st.st_mode) &&
                out->nbinds < (int)ARRAY_SIZE(out->binds))
                snprintf(out->binds[out->nbinds++], sizeof(out->binds[0]), "%s", host);
        }
        snprintf(out->binds[out->nbinds++], sizeof(out->binds[0]), "/usr");
    }
    snprintf(out->rootfs, sizeof(out->rootfs), "%s", dir);
    return 0;
}

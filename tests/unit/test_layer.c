/* A sandbox's layer copied out (src/sandbox/layer.c), on real files: every kind of entry an
 * overlay's upper directory holds keeps its kind, contents, links, attributes and times; owners
 * move from the sandbox's id range to the template's (others become nobody); links are never
 * followed; limits and errors leave nothing behind. Runs as root (owners, whiteouts, trusted
 * attributes), as make test does. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "harness.h"
#include "sandbox/layer.h"
#include "sandbox/sandbox_internal.h"

#define FROM 3000000u /* a sandbox's range */
#define IDS 65536u

static char base[64];

static void in_base(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", base, rel);
}

static void make_base(void)
{
    snprintf(base, sizeof(base), "/tmp/smcp-layer-XXXXXX");
    if (!mkdtemp(base))
        abort();
}

static void remove_base(void)
{
    tree_remove(AT_FDCWD, base);
}

static void put(const char *rel, const char *text, mode_t mode, uid_t uid)
{
    char p[1024];
    in_base(p, sizeof(p), rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    CHECK(fchown(fd, uid, uid) == 0);
    CHECK(fchmod(fd, mode) == 0);
    close(fd);
}

static void dir(const char *rel, uid_t uid)
{
    char p[1024];
    in_base(p, sizeof(p), rel);
    CHECK(mkdir(p, 0755) == 0);
    CHECK(chown(p, uid, uid) == 0);
}

static struct stat look(const char *rel)
{
    char p[1024];
    struct stat st;
    memset(&st, 0, sizeof(st));
    in_base(p, sizeof(p), rel);
    if (lstat(p, &st) < 0)
        CHECK_FAIL_("lstat %s: %s", rel, strerror(errno));
    return st;
}

static char *slurp(const char *rel)
{
    static char buf[256];
    char p[1024];
    in_base(p, sizeof(p), rel);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    buf[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
    return buf;
}

static int copy(const char *dst, const struct layer_limits *lim, struct layer_stats *st,
                struct err *err)
{
    char s[1024], d[1024];
    in_base(s, sizeof(s), "src");
    in_base(d, sizeof(d), dst);
    return layer_copy(s, d, FROM, 0, IDS, lim, st, err);
}

static const struct layer_limits roomy = {.max_bytes = 1 << 20, .max_entries = 1000};

TEST(every_kind_of_entry_is_kept_with_its_owner_moved)
{
    make_base();
    dir("src", FROM);
    dir("src/etc", FROM);
    put("src/etc/tool", "#!/bin/sh\necho hi\n", 04755, FROM);
    put("src/etc/mine", "owned by uid 1000 inside", 0640, FROM + 1000);
    put("src/etc/stray", "owned by a host id", 0644, 1234);
    char p[1024], q[256];
    in_base(p, sizeof(p), "src/etc/tool");
    in_base(q, sizeof(q), "src/etc/tool-link");
    CHECK(link(p, q) == 0);
    CHECK(setxattr(p, "user.note", "kept", 4, 0) == 0);
    CHECK(setxattr(p, "trusted.other", "dropped", 7, 0) == 0);
    struct timespec times[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1234567890, .tv_nsec = 5}};
    CHECK(utimensat(AT_FDCWD, p, times, 0) == 0);
    in_base(p, sizeof(p), "src/passwd");
    CHECK(symlink("/etc/passwd", p) == 0);
    CHECK(lchown(p, FROM + 5, FROM + 5) == 0);
    in_base(p, sizeof(p), "src/hosts");
    CHECK(symlink("/etc", p) == 0); /* a link to a directory: copied as a link, not followed */
    in_base(p, sizeof(p), "src/fifo");
    CHECK(mkfifo(p, 0600) == 0);
    in_base(p, sizeof(p), "src/gone");
    CHECK(mknod(p, S_IFCHR | 0, makedev(0, 0)) == 0); /* an overlayfs whiteout */
    dir("src/opaque", FROM);
    in_base(p, sizeof(p), "src/opaque");
    CHECK(setxattr(p, "trusted.overlay.opaque", "y", 1, 0) == 0);
    in_base(p, sizeof(p), "src/sock");
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", p);
    CHECK(s >= 0 && bind(s, (struct sockaddr *)&sun, sizeof(sun)) == 0);
    close(s);

    struct layer_stats st;
    struct err err = {0};
    CHECK_INT_EQ(copy("dst", &roomy, &st, &err), 0);
    CHECK_STR_EQ(err.msg, "");
    CHECK_INT_EQ(st.entries,
                 10);            /* etc, 4 files (a link among them), 2 links, fifo, gone, opaque */
    CHECK_INT_EQ(st.skipped, 1); /* the socket */
    CHECK_INT_EQ(st.bytes, strlen("#!/bin/sh\necho hi\n") + strlen("owned by uid 1000 inside") +
                               strlen("owned by a host id"));

    struct stat t = look("dst/etc/tool");
    CHECK_INT_EQ(t.st_uid, 0);
    CHECK_INT_EQ(t.st_mode & 07777, 04755); /* the set-id bit survives the owner's change */
    CHECK_INT_EQ(t.st_nlink, 2);
    CHECK_INT_EQ(t.st_ino, look("dst/etc/tool-link").st_ino);
    CHECK_INT_EQ(t.st_mtim.tv_sec, 1234567890);
    CHECK_INT_EQ(t.st_mtim.tv_nsec, 5);
    CHECK_STR_EQ(slurp("dst/etc/tool"), "#!/bin/sh\necho hi\n");
    char v[16] = "";
    in_base(p, sizeof(p), "dst/etc/tool");
    CHECK_INT_EQ(getxattr(p, "user.note", v, sizeof(v)), 4);
    CHECK(getxattr(p, "trusted.other", v, sizeof(v)) < 0);
    CHECK_INT_EQ(look("dst/etc/mine").st_uid, 1000);
    CHECK_INT_EQ(look("dst/etc/mine").st_mode & 07777, 0640);
    CHECK_INT_EQ(look("dst/etc/stray").st_uid, 65534);
    CHECK_INT_EQ(look("dst/etc").st_uid, 0);
    CHECK_INT_EQ(look("dst").st_uid, 0);

    struct stat l = look("dst/passwd");
    CHECK(S_ISLNK(l.st_mode));
    CHECK_INT_EQ(l.st_uid, 5);
    in_base(p, sizeof(p), "dst/passwd");
    char target[64] = "";
    CHECK_INT_EQ(readlink(p, target, sizeof(target) - 1), strlen("/etc/passwd"));
    CHECK_STR_EQ(target, "/etc/passwd");
    CHECK(S_ISLNK(look("dst/hosts").st_mode));
    CHECK(S_ISFIFO(look("dst/fifo").st_mode));
    struct stat w = look("dst/gone");
    CHECK(S_ISCHR(w.st_mode));
    CHECK_INT_EQ(w.st_rdev, makedev(0, 0));
    in_base(p, sizeof(p), "dst/opaque");
    CHECK_INT_EQ(getxattr(p, "trusted.overlay.opaque", v, sizeof(v)), 1);
    in_base(p, sizeof(p), "dst/sock");
    CHECK(access(p, F_OK) < 0);
    remove_base();
}

/* Past a limit, nothing is left of the copy, and the error says which. */
TEST(limits_leave_nothing_behind)
{
    make_base();
    dir("src", FROM);
    dir("src/a", FROM);
    put("src/a/big", "0123456789abcdef", 0644, FROM);
    put("src/a/small", "x", 0644, FROM);
    struct err err = {0};
    struct layer_limits bytes = {.max_bytes = 10, .max_entries = 100};
    CHECK_INT_EQ(copy("dst", &bytes, NULL, &err), -E2BIG);
    CHECK_STR_CONTAINS(err.msg, "MiB");
    char p[1024];
    in_base(p, sizeof(p), "dst");
    CHECK(access(p, F_OK) < 0);
    struct layer_limits entries = {.max_bytes = 1 << 20, .max_entries = 2};
    err_clear(&err);
    CHECK_INT_EQ(copy("dst", &entries, NULL, &err), -E2BIG);
    CHECK_STR_CONTAINS(err.msg, "more than 2 files");
    CHECK(access(p, F_OK) < 0);
    remove_base();
}

/* Directories the caller names (an agent's own state, say) are left out. */
TEST(skipped_directories_are_left_out)
{
    make_base();
    dir("src", FROM);
    dir("src/home", FROM);
    dir("src/home/agent", FROM);
    put("src/home/agent/state", "private", 0600, FROM);
    put("src/home/keep", "kept", 0644, FROM);
    static const char *const skip[] = {"home/agent", NULL};
    struct layer_limits lim = roomy;
    lim.skip = skip;
    struct layer_stats st;
    struct err err = {0};
    CHECK_INT_EQ(copy("dst", &lim, &st, &err), 0);
    CHECK_STR_EQ(slurp("dst/home/keep"), "kept");
    char p[1024];
    in_base(p, sizeof(p), "dst/home/agent");
    CHECK(access(p, F_OK) < 0);
    CHECK_INT_EQ(st.entries, 2);
    remove_base();
}

/* Hard links are remembered only within their memory bound: past it they are copied whole. */
TEST(hard_links_past_their_bound_are_copied)
{
    make_base();
    dir("src", FROM);
    put("src/a", "same", 0644, FROM);
    char p[1024], q[1024];
    in_base(p, sizeof(p), "src/a");
    in_base(q, sizeof(q), "src/b");
    CHECK(link(p, q) == 0);
    struct layer_limits lim = roomy;
    lim.max_link_bytes = 1;
    struct layer_stats st;
    struct err err = {0};
    CHECK_INT_EQ(copy("dst", &lim, &st, &err), 0);
    CHECK_INT_EQ(look("dst/a").st_nlink, 1);
    CHECK_INT_EQ(look("dst/b").st_nlink, 1);
    CHECK_STR_EQ(slurp("dst/b"), "same");
    CHECK_INT_EQ(st.bytes, 8);
    remove_base();
}

/* A destination that exists is refused and left as it was. */
TEST(an_existing_destination_is_untouched)
{
    make_base();
    dir("src", FROM);
    put("src/f", "new", 0644, FROM);
    dir("dst", 0);
    put("dst/f", "old", 0644, 0);
    struct err err = {0};
    CHECK_INT_EQ(copy("dst", &roomy, NULL, &err), -EEXIST);
    CHECK_STR_EQ(slurp("dst/f"), "old");
    remove_base();
}

/* Directories nested past the depth a layer may have are refused, not walked to the end. */
TEST(deep_nesting_is_refused)
{
    make_base();
    dir("src", FROM);
    char rel[2048] = "src";
    for (int i = 0; i < 220; i++) {
        strcat(rel, "/d");
        dir(rel, FROM);
    }
    struct err err = {0};
    struct layer_limits lim = {.max_bytes = 1 << 20, .max_entries = 10000};
    CHECK_INT_EQ(copy("dst", &lim, NULL, &err), -ELOOP);
    CHECK_STR_CONTAINS(err.msg, "deeper than");
    char p[1024];
    in_base(p, sizeof(p), "dst");
    CHECK(access(p, F_OK) < 0);
    remove_base();
}

/* What the copy is for: an overlay's upper directory, copied, serves as a lower layer of another
 * overlay, its whiteouts hiding the template's files and its opaque directories the template's
 * directories. Mounted in a child's own mount namespace. */
static int mounted_view(void)
{
    char opts[1024], merged[256];
    snprintf(opts, sizeof(opts), "lowerdir=%s/copy:%s/tmpl,upperdir=%s/up2,workdir=%s/work2", base,
             base, base, base);
    snprintf(merged, sizeof(merged), "%s/merged", base);
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("overlay", merged, "overlay", 0, opts) < 0)
        return 2;
    char p[1024];
    int bad = 0;
    snprintf(p, sizeof(p), "%s/gone", merged);
    bad |= access(p, F_OK) == 0; /* hidden by the layer's whiteout */
    snprintf(p, sizeof(p), "%s/kept", merged);
    bad |= (access(p, F_OK) != 0) << 1; /* the template's, untouched */
    snprintf(p, sizeof(p), "%s/d/old", merged);
    bad |= (access(p, F_OK) == 0) << 2; /* hidden by the opaque directory */
    snprintf(p, sizeof(p), "%s/d/new", merged);
    bad |= (access(p, F_OK) != 0) << 3; /* the layer's own */
    return bad ? 10 + bad : 0;
}

TEST(a_copied_upper_directory_serves_as_a_lower_layer)
{
    make_base();
    dir("tmpl", 0);
    put("tmpl/gone", "template", 0644, 0);
    put("tmpl/kept", "template", 0644, 0);
    dir("tmpl/d", 0);
    put("tmpl/d/old", "template", 0644, 0);
    dir("up", FROM);
    dir("work", 0);
    dir("merged", 0);
    dir("up2", 0);
    dir("work2", 0);
    /* the sandbox's side: an overlay that deletes one file and replaces a directory */
    pid_t pid = fork();
    if (pid == 0) {
        char opts[1024], p[1024];
        snprintf(opts, sizeof(opts), "lowerdir=%s/tmpl,upperdir=%s/up,workdir=%s/work", base, base,
                 base);
        snprintf(p, sizeof(p), "%s/merged", base);
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("overlay", p, "overlay", 0, opts) < 0)
            _exit(2);
        snprintf(p, sizeof(p), "%s/merged/gone", base);
        if (unlink(p) < 0)
            _exit(3);
        snprintf(p, sizeof(p), "%s/merged/d/old", base);
        unlink(p);
        snprintf(p, sizeof(p), "%s/merged/d", base);
        if (rmdir(p) < 0 || mkdir(p, 0755) < 0)
            _exit(4);
        snprintf(p, sizeof(p), "%s/merged/d/new", base);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        _exit(fd < 0 ? 5 : 0);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK_INT_EQ(status, 0);
    char s[1024], d[1024];
    in_base(s, sizeof(s), "up");
    in_base(d, sizeof(d), "copy");
    struct err err = {0};
    CHECK_INT_EQ(layer_copy(s, d, FROM, 0, IDS, &roomy, NULL, &err), 0);
    CHECK_STR_EQ(err.msg, "");
    pid = fork();
    if (pid == 0)
        _exit(mounted_view());
    waitpid(pid, &status, 0);
    CHECK_INT_EQ(WEXITSTATUS(status), 0);
    remove_base();
}

TEST_MAIN()

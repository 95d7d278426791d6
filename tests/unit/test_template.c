/* The host template (src/sandbox/template.c) on real files: assembled once per recipe in the
 * templates directory and found there afterwards; servers sharing that directory may build it at
 * once, and a build that loses the race, or finds what a dead build left, leaves nothing behind;
 * a server holds the one it uses, and older ones nothing holds or may use are removed. Runs as
 * root (owners), as make test does. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "sandbox/sandbox_internal.h"

static char base[64];

static void make_base(void)
{
    snprintf(base, sizeof(base), "/tmp/smcp-template-XXXXXX");
    if (!mkdtemp(base))
        abort();
}

/* Entries of base whose names contain part, and the last of them in last. */
static int entries(const char *part, char *last, size_t cap)
{
    int n = 0;
    DIR *d = opendir(base);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, part)) {
            n++;
            if (last)
                snprintf(last, cap, "%s/%s", base, de->d_name);
        }
    if (d)
        closedir(d);
    return n;
}

/* dir/rel, good until the next call */
static const char *at(const char *dir, const char *rel)
{
    static char p[4096];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    return p;
}

static bool exists(const char *dir, const char *rel)
{
    struct stat st;
    return lstat(at(dir, rel), &st) == 0;
}

/* Where the tests below build the host template: base/host-<a hash>. */
static void build_as(char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/host-0123456789abcdef", base);
}

/* Build the host template as dir, and check that it succeeded and left no building tree. */
static void build_leaving_nothing(const char *dir)
{
    struct template_info t = {0};
    struct err err = {0};
    CHECK_INT_EQ(template_build_host(dir, 0, &t, &err), 0);
    CHECK_STR_EQ(err.msg, "");
    CHECK_INT_EQ(entries(".building.", NULL, 0), 0);
}

/* The first server assembles it; the next finds it in place. */
TEST(the_host_template_is_built_once_and_found_after)
{
    make_base();
    struct template_info t = {0};
    struct err err = {0};
    CHECK_INT_EQ(template_prepare(base, "host", &t, &err), 0);
    CHECK_STR_EQ(err.msg, "");
    char dir[4096], used[4200];
    CHECK_INT_EQ(entries("host-", dir, sizeof(dir)), 2); /* the tree and its marker */
    snprintf(dir, sizeof(dir), "%s", t.rootfs);
    snprintf(used, sizeof(used), "%s.used", dir);
    CHECK(strncmp(dir, base, strlen(base)) == 0);
    CHECK(access(used, F_OK) == 0);
    CHECK(exists(dir, "etc/passwd"));
    CHECK(exists(dir, "workspace"));
    CHECK_INT_EQ(entries(".building.", NULL, 0), 0);
    struct stat before, after;
    CHECK(stat(dir, &before) == 0);
    struct template_info again = {0};
    CHECK_INT_EQ(template_prepare(base, "host", &again, &err), 0);
    CHECK_STR_EQ(again.rootfs, dir);
    CHECK_INT_EQ(again.nbinds, t.nbinds);
    CHECK(stat(dir, &after) == 0);
    CHECK(before.st_ino == after.st_ino);
    close(t.lock);
    close(again.lock);
    tree_remove(AT_FDCWD, base);
}

/* Another server moved its tree in first: that tree stays, and this build's goes. */
TEST(a_build_that_loses_the_race_leaves_nothing)
{
    make_base();
    char dir[4096];
    build_as(dir, sizeof(dir));
    CHECK(mkdir(dir, 0755) == 0);
    CHECK(mkdir(at(dir, "winner"), 0755) == 0);
    build_leaving_nothing(dir);
    CHECK(exists(dir, "winner"));
    CHECK(!exists(dir, "etc"));
    CHECK_INT_EQ(entries("host-", NULL, 0), 1);
    tree_remove(AT_FDCWD, base);
}

/* A tree under this process's building name is what a server that died while building left
 * (a process id comes back): it is replaced, not a reason to fail the start. */
TEST(a_dead_builds_tree_is_replaced)
{
    make_base();
    char dir[4096], left[4096];
    build_as(dir, sizeof(dir));
    snprintf(left, sizeof(left), "%s.building.%d", dir, (int)getpid());
    CHECK(mkdir(left, 0755) == 0);
    CHECK(mkdir(at(left, "etc"), 0755) == 0);
    int fd = open(at(left, "etc/half"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    close(fd);
    build_leaving_nothing(dir);
    CHECK(exists(dir, "etc/passwd"));
    CHECK(!exists(dir, "etc/half"));
    tree_remove(AT_FDCWD, base);
}

/* What the machine's sandboxes are, as the pruning asks: none, or one older than any template. */
static int64_t no_sandbox(void)
{
    return INT64_MAX;
}

static int64_t an_old_sandbox(void)
{
    return 1;
}

static int64_t a_sandbox_started_now(void)
{
    return (int64_t)time(NULL);
}

/* A directory name of base, as an earlier host or recipe, or something else, left it; with
 * used_ago >= 0, its marker, last used that many seconds ago. */
static void make_old(const char *name, long used_ago)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", base, name);
    CHECK(mkdir(p, 0755) == 0);
    CHECK(mkdir(at(p, "etc"), 0755) == 0);
    if (used_ago < 0)
        return;
    strcat(p, ".used");
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    struct timespec t[2] = {{time(NULL) - used_ago, 0}, {time(NULL) - used_ago, 0}};
    CHECK(futimens(fd, t) == 0);
    close(fd);
}

/* A lock on the marker of the host template dir, as a server takes one (LOCK_SH) or a removal. */
static int hold(const char *dir, int how)
{
    char used[4200];
    snprintf(used, sizeof(used), "%s.used", dir);
    int fd = open(used, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    return flock(fd, how) == 0 ? fd : (close(fd), -1);
}

/* Kept while a sandbox that started when one was last used runs (it may be on it) and while a
 * server holds one; removed, and nothing left aside, once neither is so. */
TEST(older_host_templates_are_removed_once_no_server_holds_and_no_sandbox_may_use_them)
{
    make_base();
    char dir[4096], held_dir[4096];
    build_as(dir, sizeof(dir));
    build_leaving_nothing(dir);
    make_old("host-00000000000000aa", 0);    /* used just now */
    make_old("host-00000000000000bb", 3600); /* held by a server */
    make_old("host-00000000000000cc", 3600); /* used an hour ago */
    make_old("host-00000000000000dd", -1);   /* from before markers: as if used now */
    make_old("host-short", -1);
    make_old("debian", -1);
    snprintf(held_dir, sizeof(held_dir), "%s/host-00000000000000bb", base);
    int held = hold(held_dir, LOCK_SH);
    CHECK(held >= 0);
    template_prune_hosts(base, "host-0123456789abcdef", an_old_sandbox);
    CHECK_INT_EQ(entries("host-", NULL, 0), 10); /* all kept; dd now has a marker, made now */
    CHECK(exists(base, "host-00000000000000dd.used"));
    template_prune_hosts(base, "host-0123456789abcdef", a_sandbox_started_now);
    CHECK(!exists(base, "host-00000000000000cc"));
    CHECK(!exists(base, "host-00000000000000cc.used"));
    CHECK(exists(base, "host-00000000000000aa"));
    CHECK(exists(base, "host-00000000000000dd"));
    template_prune_hosts(base, "host-0123456789abcdef", no_sandbox);
    CHECK(!exists(base, "host-00000000000000aa"));
    CHECK(exists(base, "host-00000000000000bb"));
    CHECK(exists(base, "host-short"));
    CHECK(exists(base, "debian"));
    CHECK(exists(dir, "etc/passwd"));
    CHECK(!exists(base, "host-00000000000000dd"));
    close(held);
    template_prune_hosts(base, "host-0123456789abcdef", no_sandbox);
    CHECK(!exists(base, "host-00000000000000bb"));
    CHECK_INT_EQ(entries(".old.", NULL, 0), 0);
    CHECK_INT_EQ(entries(".used", NULL, 0), 0);
    CHECK_INT_EQ(entries("host-", NULL, 0), 2);
    tree_remove(AT_FDCWD, base);
}

/* What removals left: a tree moved aside by a server that stopped before it was removed goes,
 * one a running server is removing stays to it; a marker whose template is gone goes. */
TEST(what_a_removal_left_is_removed)
{
    make_base();
    char dir[4096], name[64];
    build_as(dir, sizeof(dir));
    build_leaving_nothing(dir);
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    CHECK(gone > 0 && waitpid(gone, NULL, 0) == gone);
    snprintf(name, sizeof(name), "host-00000000000000aa.old.%d", (int)gone);
    make_old(name, -1);
    snprintf(name, sizeof(name), "host-00000000000000bb.old.%d", (int)getpid());
    make_old(name, -1);
    int fd = open(at(base, "host-00000000000000cc.used"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    close(fd);
    template_prune_hosts(base, "host-0123456789abcdef", an_old_sandbox);
    CHECK_INT_EQ(entries("host-00000000000000aa", NULL, 0), 0);
    CHECK(exists(base, name));
    CHECK(!exists(base, "host-00000000000000cc.used"));
    CHECK(exists(dir, "etc/passwd"));
    tree_remove(AT_FDCWD, base);
}

/* A server holds the host template it prepared until it lets go: another's pruning keeps it. */
TEST(a_server_holds_its_host_template_while_it_runs)
{
    make_base();
    struct template_info t = {0};
    struct err err = {0};
    CHECK_INT_EQ(template_prepare(base, "host", &t, &err), 0);
    CHECK(t.lock >= 0);
    CHECK_INT_EQ(hold(t.rootfs, LOCK_EX | LOCK_NB), -1);
    /* a sandbox starting on it marks it used: its marker, not the tree */
    struct timespec long_ago[2] = {{1000, 0}, {1000, 0}};
    struct stat st, tree;
    char used[4200];
    snprintf(used, sizeof(used), "%s.used", t.rootfs);
    CHECK(utimensat(AT_FDCWD, used, long_ago, 0) == 0);
    CHECK(stat(t.rootfs, &tree) == 0);
    template_mark_used(&t);
    CHECK(stat(used, &st) == 0);
    CHECK(st.st_mtim.tv_sec > time(NULL) - 60);
    struct stat tree_after;
    CHECK(stat(t.rootfs, &tree_after) == 0);
    CHECK(tree_after.st_mtim.tv_sec == tree.st_mtim.tv_sec &&
          tree_after.st_mtim.tv_nsec == tree.st_mtim.tv_nsec);
    char other[4096];
    build_as(other, sizeof(other));
    if (strcmp(other, t.rootfs) != 0) {
        build_leaving_nothing(other);
        template_prune_hosts(base, "host-0123456789abcdef", no_sandbox);
        CHECK(exists(t.rootfs, "etc/passwd"));
    }
    close(t.lock);
    int fd = hold(t.rootfs, LOCK_EX | LOCK_NB);
    CHECK(fd >= 0);
    close(fd);
    tree_remove(AT_FDCWD, base);
}

TEST_MAIN()

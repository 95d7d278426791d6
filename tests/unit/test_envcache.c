/* The node's cache accounting (src/runs/envcache.c): entries taken, recorded and let go, a busy
 * entry refused, eviction least recently used first under the user's cap and the node's budget
 * (other users' entries untouched, environment snapshots counted), entries past their age, drop
 * and list; and the clone script against real repositories. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "harness.h"
#include "runs/envcache.h"
#include "runs/runs_internal.h"

static char root[64];

static void setup_cc(struct envcache_config *cc, uint64_t max, uint64_t user_max)
{
    if (!root[0]) {
        snprintf(root, sizeof(root), "/tmp/smcp-envcache-XXXXXX");
        if (!mkdtemp(root))
            CHECK_FAIL_("mkdtemp: %s", strerror(errno));
    }
    char rm[128];
    snprintf(rm, sizeof(rm), "rm -rf '%s/cache'", root);
    CHECK_INT_EQ(system(rm), 0);
    memset(cc, 0, sizeof(*cc));
    snprintf(cc->dir, sizeof(cc->dir), "%s/cache", root);
    cc->max_bytes = max;
    cc->user_max_bytes = user_max;
    cc->max_age_ms = 3600 * 1000;
}

/* Make an entry of owner/key holding bytes, last used at used (ms): its meta rewritten so that
 * the order of use does not depend on the clock. */
static void put(const struct envcache_config *cc, const char *owner, const char *key,
                uint64_t bytes, int64_t used)
{
    struct envcache_entry e;
    struct err err = {0};
    CHECK_INT_EQ(envcache_acquire(cc, "mirrors", owner, key, "https://x/y.git", &e, &err), 0);
    CHECK(e.fresh);
    CHECK_INT_EQ(mkdir(e.data, 0700), 0);
    CHECK_INT_EQ(envcache_commit(&e, bytes, &err), 0);
    char meta[PATH_MAX + 8];
    snprintf(meta, sizeof(meta), "%s/meta", e.path);
    FILE *f = fopen(meta, "w");
    fprintf(f, "label https://x/%s.git\nbytes %llu\nused %lld\ncreated %lld\n", key,
            (unsigned long long)bytes, (long long)used, (long long)time_now_ms());
    fclose(f);
    envcache_release(&e);
}

static bool exists(const struct envcache_config *cc, const char *owner, const char *key)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/mirrors/%s/%s", cc->dir, owner, key);
    return access(p, F_OK) == 0;
}

TEST(acquire_commit_reuse_busy)
{
    struct envcache_config cc;
    setup_cc(&cc, 1 << 20, 1 << 20);
    struct envcache_entry a, b;
    struct err err = {0};
    CHECK_INT_EQ(envcache_acquire(&cc, "mirrors", "u_1", "k1", "https://x/a.git", &a, &err), 0);
    CHECK(a.fresh);
    /* held: a second taker is told at once */
    CHECK_INT_EQ(envcache_acquire(&cc, "mirrors", "u_1", "k1", "https://x/a.git", &b, &err),
                 -EBUSY);
    CHECK_INT_EQ(b.lock_fd, -1);
    CHECK_INT_EQ(mkdir(a.data, 0700), 0);
    CHECK_INT_EQ(envcache_commit(&a, 1234, &err), 0);
    envcache_release(&a);
    err = (struct err){0};
    CHECK_INT_EQ(envcache_acquire(&cc, "mirrors", "u_1", "k1", "https://x/a.git", &b, &err), 0);
    CHECK(!b.fresh); /* kept */
    envcache_release(&b);
    /* malformed names are refused */
    CHECK_INT_EQ(envcache_acquire(&cc, "mirrors", "../x", "k1", "l", &b, &err), -EINVAL);
    CHECK_INT_EQ(envcache_acquire(&cc, "mirrors", "u_1", ".", "l", &b, &err), -EINVAL);
}

static void count_one(const struct envcache_info *i, void *ctx)
{
    (void)i;
    (*(int *)ctx)++;
}

static void first_key(const struct envcache_info *i, void *ctx)
{
    char *out = ctx;
    if (!out[0])
        snprintf(out, 64, "%s", i->key);
}

TEST(user_cap_evicts_their_least_recently_used_only)
{
    struct envcache_config cc;
    setup_cc(&cc, 1000, 300);
    put(&cc, "u_a", "a1", 100, 1000);
    put(&cc, "u_b", "b1", 100, 500); /* the oldest of all: another user's, untouched */
    put(&cc, "u_a", "a2", 100, 2000);
    put(&cc, "u_a", "a3", 100, 3000);
    struct err err = {0};
    CHECK_INT_EQ(envcache_evict(&cc, "u_a", 0, 0, &err), 0); /* 300: at the cap, not over */
    put(&cc, "u_a", "a4", 100, 4000);
    CHECK_INT_EQ(envcache_evict(&cc, "u_a", 0, 0, &err), 1);
    CHECK(!exists(&cc, "u_a", "a1"));
    CHECK(exists(&cc, "u_a", "a2") && exists(&cc, "u_a", "a3") && exists(&cc, "u_a", "a4"));
    CHECK(exists(&cc, "u_b", "b1"));
    int n = 0;
    CHECK_INT_EQ(envcache_list(&cc, "u_a", count_one, &n, &err), 3);
    CHECK_INT_EQ(n, 3);
    char oldest[64] = "";
    envcache_list(&cc, NULL, first_key, oldest, &err);
    CHECK_STR_EQ(oldest, "b1");
}

/* Environment snapshots count against the same budget: what they hold makes mirrors go. */
TEST(other_caches_count_against_the_budget)
{
    struct envcache_config cc;
    setup_cc(&cc, 1000, 300);
    put(&cc, "u_a", "a1", 100, 1000);
    put(&cc, "u_a", "a2", 100, 2000);
    struct err err = {0};
    CHECK_INT_EQ(envcache_evict(&cc, "u_a", 0, 100, &err), 0); /* 300 with the user's snapshots */
    CHECK_INT_EQ(envcache_evict(&cc, "u_a", 0, 150, &err), 1); /* 350: the older mirror goes */
    CHECK(!exists(&cc, "u_a", "a1"));
    CHECK(exists(&cc, "u_a", "a2"));
    put(&cc, "u_b", "b1", 100, 3000);
    CHECK_INT_EQ(envcache_evict(&cc, NULL, 850, 0, &err), 1); /* 1050 in all */
    CHECK(!exists(&cc, "u_a", "a2"));
    CHECK(exists(&cc, "u_b", "b1"));
}

TEST(budget_evicts_least_recently_used_of_all_and_skips_busy)
{
    struct envcache_config cc;
    setup_cc(&cc, 250, 250);
    put(&cc, "u_a", "a1", 100, 1000);
    put(&cc, "u_b", "b1", 100, 2000);
    put(&cc, ENVCACHE_PUBLIC, "p1", 100, 3000);
    /* a1, the least recently used, is in use: the next goes instead */
    struct envcache_entry held;
    struct err err = {0};
    CHECK_INT_EQ(envcache_acquire(&cc, "mirrors", "u_a", "a1", "l", &held, &err), 0);
    CHECK_INT_EQ(envcache_evict(&cc, NULL, 0, 0, &err), 1);
    CHECK(exists(&cc, "u_a", "a1"));
    CHECK(!exists(&cc, "u_b", "b1"));
    CHECK(exists(&cc, ENVCACHE_PUBLIC, "p1"));
    envcache_release(&held);
}

TEST(aged_entries_are_made_afresh_and_evicted)
{
    struct envcache_config cc;
    setup_cc(&cc, 1 << 20, 1 << 20);
    put(&cc, "u_a", "old", 10, 1000);
    char meta[PATH_MAX];
    snprintf(meta, sizeof(meta), "%s/mirrors/u_a/old/meta", cc.dir);
    FILE *f = fopen(meta, "w");
    fprintf(f, "label l\nbytes 10\nused 1000\ncreated %lld\n",
            (long long)(time_now_ms() - 2 * 3600 * 1000));
    fclose(f);
    struct envcache_entry e;
    struct err err = {0};
    CHECK_INT_EQ(envcache_acquire(&cc, "mirrors", "u_a", "old", "l", &e, &err), 0);
    CHECK(e.fresh); /* its data was removed */
    CHECK(access(e.data, F_OK) < 0);
    envcache_release(&e);
    CHECK_INT_EQ(envcache_evict(&cc, NULL, 0, 0, &err), 1);
    CHECK(!exists(&cc, "u_a", "old"));
}

TEST(drop)
{
    struct envcache_config cc;
    setup_cc(&cc, 1 << 20, 1 << 20);
    put(&cc, "u_a", "a1", 10, 1000);
    struct err err = {0};
    CHECK_INT_EQ(envcache_drop(&cc, "mirrors", "u_a", "a1", &err), 0);
    CHECK(!exists(&cc, "u_a", "a1"));
    err = (struct err){0};
    CHECK_INT_EQ(envcache_drop(&cc, "mirrors", "u_a", "a1", &err), -ENOENT);
}

/* Run the host-side clone script from root with a mirror: its exit status. */
static int clone_with_mirror(const char *remote, const char *mirror)
{
    char cmd[2048];
    setenv("SMCP_SCRIPT", scripts_clone, 1);
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ALLOW_PROTOCOL=file "
             "SMCP_URL='%s/%s' SMCP_DEST='%s/dest' SMCP_TAR='%s/repo.tar' SMCP_BRANCH= "
             "SMCP_MIRROR='%s/%s' SMCP_MIRROR_KB='%s/kb' sh -c \"$SMCP_SCRIPT\" > '%s/out' 2>&1",
             root, root, remote, root, root, root, mirror, root, root);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool out_has(const char *needle)
{
    char path[128], buf[8192] = "";
    snprintf(path, sizeof(path), "%s/out", root);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strstr(buf, needle) != NULL;
}

static void sh(const char *body)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "set -e; cd '%s'; export GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t "
             "GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; %s",
             root, body);
    CHECK_INT_EQ(system(cmd), 0);
}

TEST(clone_script_with_a_mirror)
{
    struct envcache_config cc;
    setup_cc(&cc, 1, 1); /* for root */
    sh("rm -rf r.git w m dest repo.tar kb; git init -q --bare r.git; "
       "git -C r.git symbolic-ref HEAD refs/heads/main; git init -q -b main w; cd w; "
       "echo one > a; git add a; git commit -q -m one; git push -q ../r.git main");
    /* the first clone makes the mirror; the archive holds the clone, its origin the remote */
    CHECK_INT_EQ(clone_with_mirror("r.git", "m"), 0);
    sh("test -s kb; test \"$(git -C m symbolic-ref HEAD)\" = refs/heads/main; "
       "rm -rf x; mkdir x; tar -xf repo.tar -C x; mv x/.GIT x/.git; "
       "test \"$(git -C x remote get-url origin)\" = \"$PWD/r.git\"; "
       "git -C x fsck --no-dangling; test \"$(cat x/a)\" = one");
    /* a commit pushed since comes through the mirror */
    sh("cd w; echo two > b; git add b; git commit -q -m two; git push -q ../r.git main");
    CHECK_INT_EQ(clone_with_mirror("r.git", "m"), 0);
    CHECK(!out_has("smcp-mirror-recreated"));
    sh("rm -rf x; mkdir x; tar -xf repo.tar -C x; test \"$(cat x/b)\" = two; "
       "test \"$(git -C m rev-parse main)\" = \"$(git -C r.git rev-parse main)\"");
    /* a corrupt mirror is made afresh */
    sh("for f in m/objects/pack/*; do chmod u+w \"$f\"; echo garbage > \"$f\"; done; "
       "echo junk > m/HEAD");
    CHECK_INT_EQ(clone_with_mirror("r.git", "m"), 0);
    CHECK(out_has("smcp-mirror-recreated"));
    sh("git -C m fsck --no-dangling; rm -rf x; mkdir x; tar -xf repo.tar -C x; "
       "test \"$(cat x/b)\" = two");
    /* a repository that is not there fails without remaking anything */
    CHECK_INT_EQ(clone_with_mirror("none.git", "m2"), 1);
    CHECK(!out_has("smcp-mirror-recreated"));
    /* a HEAD naming no branch, with several branches: they are listed (exit 3) */
    sh("rm -rf d.git; git init -q --bare d.git; git -C w push -q ../d.git main main:other; "
       "git -C d.git symbolic-ref HEAD refs/heads/gone");
    CHECK_INT_EQ(clone_with_mirror("d.git", "m3"), 3);
    CHECK(out_has("smcp-branches 2"));
    /* a repository without commits: HEAD as the remote names it */
    sh("rm -rf e.git; git init -q --bare e.git; git -C e.git symbolic-ref HEAD refs/heads/trunk");
    CHECK_INT_EQ(clone_with_mirror("e.git", "m4"), 0);
    sh("rm -rf x; mkdir x; tar -xf repo.tar -C x; mv x/.GIT x/.git; "
       "test \"$(git -C x symbolic-ref HEAD)\" = refs/heads/trunk");
    char rm[128];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", root);
    CHECK_INT_EQ(system(rm), 0);
}

TEST_MAIN()

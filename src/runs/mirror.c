/* What a repository's mirror tells without a checkout: the lock files at a commit, for the
 * environment snapshots that are keyed by them. Rule: git is asked, never the files read; the
 * parse of what git prints is pure and reachable from tests/unit/test_envcache.c. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/util.h"

#define LS_TREE_MAX (4u << 20) /* a root tree's listing read, at most */

bool mirror_lockfile_name(const char *name)
{
    static const char *const names[] = {
        "package-lock.json", "pnpm-lock.yaml", "yarn.lock",  "poetry.lock",  "uv.lock",
        "Pipfile.lock",      "go.sum",         "Cargo.lock", "Gemfile.lock",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return strlen(name) < MIRROR_LOCKFILE_NAME_MAX && fnmatch("requirements*.txt", name, 0) == 0;
}

size_t mirror_lockfiles_parse(const char *out, size_t len, struct mirror_lockfile *v, size_t cap)
{
    size_t n = 0;
    for (const char *p = out, *end = out + len; p < end && n < cap;) {
        const char *z = memchr(p, '\0', (size_t)(end - p));
        const char *e = z ? z : end;
        /* "<mode> blob <sha>\t<name>" */
        const char *tab = memchr(p, '\t', (size_t)(e - p));
        if (tab && (size_t)(e - tab - 1) < MIRROR_LOCKFILE_NAME_MAX) {
            char name[MIRROR_LOCKFILE_NAME_MAX];
            memcpy(name, tab + 1, (size_t)(e - tab - 1));
            name[e - tab - 1] = '\0';
            const char *sp1 = memchr(p, ' ', (size_t)(tab - p));
            const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(tab - sp1 - 1)) : NULL;
            size_t shalen = sp2 ? (size_t)(tab - sp2 - 1) : 0;
            bool hex = shalen == 40 || shalen == 64;
            for (size_t i = 0; hex && i < shalen; i++)
                hex = strchr("0123456789abcdef", sp2[1 + i]) != NULL;
            if (sp2 && (size_t)(sp2 - sp1 - 1) == 4 && memcmp(sp1 + 1, "blob", 4) == 0 && hex &&
                strchr(name, '/') == NULL && mirror_lockfile_name(name)) {
                snprintf(v[n].path, sizeof(v[n].path), "%s", name);
                memcpy(v[n].blob, sp2 + 1, shalen);
                v[n].blob[shalen] = '\0';
                n++;
            }
        }
        p = e + 1;
    }
    return n;
}

static bool commit_valid(const char *c)
{
    size_t n = strlen(c);
    if (n == 0 || n > 200 || c[0] == '-')
        return false;
    return repo_branch_valid(c) || strcmp(c, "HEAD") == 0;
}

int mirror_lockfiles(const char *git_dir, const char *commit, struct mirror_lockfile *v, size_t cap,
                     size_t *n, struct err *err)
{
    *n = 0;
    if (!commit_valid(commit))
        return err_set(err, -EINVAL, "'%s' is not a commit", commit);
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return err_set(err, -errno, "pipe: %s", strerror(errno));
    char *gd = xasprintf("--git-dir=%s", git_dir);
    char *argv[] = {(char *)"git", gd, (char *)"ls-tree", (char *)"-z", (char *)commit, NULL};
    char *env[] = {(char *)"PATH=/usr/local/bin:/usr/bin:/bin", (char *)"GIT_CONFIG_NOSYSTEM=1",
                   (char *)"GIT_CONFIG_GLOBAL=/dev/null", (char *)"LANG=C", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, "git", &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(gd);
    close(pipefd[1]);
    if (rc != 0) {
        close(pipefd[0]);
        return err_set(err, -rc, "cannot run git: %s", strerror(rc));
    }
    struct buf out;
    buf_init(&out, 0);
    char chunk[8192];
    ssize_t k;
    bool over = false;
    while ((k = read(pipefd[0], chunk, sizeof(chunk))) != 0) {
        if (k < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (out.len + (size_t)k > LS_TREE_MAX) {
            over = true;
            kill(pid, SIGKILL);
            break;
        }
        buf_append(&out, chunk, (size_t)k);
    }
    close(pipefd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (over) {
        buf_release(&out);
        return err_set(err, -EFBIG, "the tree of '%s' lists more than %u bytes", commit,
                       LS_TREE_MAX);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        buf_release(&out);
        return err_set(err, -ENOENT, "no commit '%s' in '%s'", commit, git_dir);
    }
    *n = mirror_lockfiles_parse(out.data ? out.data : "", out.len, v, cap);
    buf_release(&out);
    return 0;
}

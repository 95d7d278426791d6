/* proc_fork_into_cgroup: the setup child of a sandbox starts in the sandbox's v2 group instead of
 * joining it after the fork. Run against the host's cgroup v2 hierarchy, in a group made for the
 * test; where the host has none this process may create a group in, the test says so and passes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "sandbox/sandbox_internal.h"

/* Where cgroup2 is mounted, from /proc/self/mountinfo; "" when nowhere. */
static void cgroup2_mount(char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096];
    while (f && fgets(line, sizeof(line), f)) {
        char *sep = strstr(line, " - cgroup2 ");
        if (!sep)
            continue;
        char mnt[1024];
        if (sscanf(line, "%*s %*s %*s %*s %1023s", mnt) == 1) {
            snprintf(out, len, "%s", mnt);
            break;
        }
    }
    if (f)
        fclose(f);
}

TEST(child_starts_in_the_group)
{
    char mnt[1024], group[1200], rel[64];
    cgroup2_mount(mnt, sizeof(mnt));
    snprintf(rel, sizeof(rel), "/sandbox-mcp-test-%d", (int)getpid());
    snprintf(group, sizeof(group), "%s%s", mnt, rel);
    if (!mnt[0] || mkdir(group, 0755) < 0) {
        printf("  (no cgroup v2 group can be made here: %s)\n", mnt[0] ? strerror(errno) : "none");
        return;
    }
    int cgfd = open(group, O_PATH | O_DIRECTORY | O_CLOEXEC);
    CHECK(cgfd >= 0);
    pid_t pid = proc_fork_into_cgroup(cgfd);
    if (pid < 0 && (errno == ENOSYS || errno == EOPNOTSUPP || errno == EBUSY)) {
        printf("  (this kernel cannot: %s)\n", strerror(errno));
    } else {
        CHECK(pid >= 0);
        if (pid == 0) {
            /* In the child: its cgroup from the start, before it did anything. */
            char want[128], buf[4096];
            snprintf(want, sizeof(want), "0::%s\n", rel);
            int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
            ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
            buf[n > 0 ? n : 0] = '\0';
            _exit(strstr(buf, want) ? 0 : 1);
        }
        int status = -1;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    close(cgfd);
    CHECK(rmdir(group) == 0);
}

TEST(a_bad_group_fails_and_nothing_runs)
{
    /* Not a cgroup directory: the kernel refuses, and no child exists. */
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    pid_t pid = proc_fork_into_cgroup(fd);
    if (pid == 0)
        _exit(0);
    CHECK(pid < 0);
    CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
    close(fd);
}

TEST_MAIN()

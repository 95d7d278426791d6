/* sandbox-fs: one file operation of the file tools, inside a sandbox. The server starts it
 * on the host (so nothing of the server's memory, its keys among it, ever enters a sandbox):
 *   fd 3  a pipe: the operation's JSON result, or a line "<stage>: <error>"
 *   fd 4  a pidfd of the sandbox's init
 *   fd 5  a memfd with the request (fsops.h, fsop_worker_request)
 * It joins the sandbox's cgroups and namespaces, becomes root of its user namespace, confines
 * itself as every process of the sandbox is, and carries the operation out against the
 * sandbox's root. */
#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/util.h"
#include "helper.h"
#include "sandbox/confine.h"
#include "sandbox/fsops.h"

#define OUT_FD 3
#define PIDFD 4
#define REQ_FD 5
/* every namespace of the sandbox but its pid namespace, which a file operation does not need */
#define ENTER_NS (CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP)

static int fail(const char *stage)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "%s: %s\n", stage, strerror(errno));
    if (write(OUT_FD, buf, (size_t)n) < 0)
        return 127;
    return 127;
}

int fs_main(void)
{
    /* Nothing in the sandbox may trace or read this process once it is in there. */
    prctl(PR_SET_DUMPABLE, 0);
    struct stat st;
    if (fstat(REQ_FD, &st) < 0 || st.st_size <= 0 || st.st_size > (off_t)(64 << 20)) {
        errno = EINVAL;
        return fail("read request");
    }
    size_t len = (size_t)st.st_size;
    char *buf = malloc(len);
    int rd = buf ? pread_full(REQ_FD, buf, len, 0) : -ENOMEM;
    if (rd < 0) {
        errno = -rd;
        return fail("read request");
    }
    struct fsop_worker_request w;
    if (!buf || fsop_worker_decode(buf, len, &w) < 0) {
        errno = EPROTO;
        return fail("read request");
    }
    close(REQ_FD);
    for (int i = 0; i < w.ncg; i++) {
        int fd = open(w.cg_procs[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
            return fail("join cgroup");
        close(fd);
    }
    if (setns(PIDFD, ENTER_NS) < 0)
        return fail("enter sandbox namespaces");
    if (setns(PIDFD, CLONE_NEWUSER) < 0)
        return fail("enter sandbox user namespace");
    close(PIDFD);
    if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0)
        return fail("become root in the sandbox");
    struct sock_fprog progs[2];
    for (int i = 0; i < w.nfilters; i++)
        progs[i] = (struct sock_fprog){.len = w.filter_len[i],
                                       .filter = (struct sock_filter *)w.filter[i]};
    int r = confine_apply(progs, (size_t)w.nfilters);
    if (r < 0) {
        errno = -r;
        return fail("apply sandbox policy");
    }
    int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return fail("open /");
    json_t *res = fsop_run(root, &w.op);
    char *text = json_dumps(res, JSON_COMPACT);
    if (!text || write_full(OUT_FD, text, strlen(text)) < 0)
        return 1;
    return 0;
}

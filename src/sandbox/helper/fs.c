/* sandbox-fs: the file worker of one sandbox, for the file tools. The server starts it on the
 * host the first time the sandbox's files are asked for (so nothing of the server's memory, its
 * keys among it, ever enters a sandbox), and it stays until the server closes its socket or the
 * sandbox stops:
 *   fd 3  a SOCK_SEQPACKET socket from the server: one message per operation, a byte with two
 *         descriptors, a memfd holding the operation (fsops.h, fsop_worker_request) and the
 *         pipe for its JSON result (or a line "<stage>: <error>")
 *   fd 4  a pidfd of the sandbox's init
 *   fd 5  a memfd with the cgroups to join and the seccomp programs to load (fsop_worker_request,
 *         its operation unused)
 * It joins the sandbox's cgroups and namespaces, becomes root of its user namespace and confines
 * itself as every process of the sandbox is, once. Each operation then runs in a child forked for
 * it, which inherits all of that, so that operations run side by side and one that fails or is
 * killed leaves the worker as it was; when the sandbox is at its process limit the worker does
 * the operation itself. It stays outside the pid namespace and is non-dumpable, so nothing inside
 * can see, signal or trace it. */
#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/util.h"
#include "helper.h"
#include "sandbox/confine.h"
#include "sandbox/fdpass.h"
#include "sandbox/fsops.h"

#define CTL_FD 3
#define PIDFD 4
#define SETUP_FD 5
/* every namespace of the sandbox but its pid namespace, which a file operation does not need */
#define ENTER_NS (CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP)
#define REQUEST_MAX ((off_t)64 << 20)

struct request {
    void *map;
    size_t len;
    struct fsop_worker_request w;
};

/* Map a request memfd (read-only: its pages are the server's, not copied, which matters for a
 * large write) and decode it into req->w. Returns NULL, or the stage that failed with errno set;
 * request_release() either way. */
static const char *request_read(int fd, struct request *req)
{
    struct stat st;
    req->map = MAP_FAILED;
    if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size > REQUEST_MAX) {
        errno = EINVAL;
        return "read request";
    }
    req->len = (size_t)st.st_size;
    req->map = mmap(NULL, req->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (req->map == MAP_FAILED)
        return "read request";
    if (fsop_worker_decode(req->map, req->len, &req->w) < 0) {
        errno = EPROTO;
        return "read request";
    }
    return NULL;
}

static void request_release(struct request *req)
{
    if (req->map != MAP_FAILED)
        munmap(req->map, req->len);
}

static const char *setup(void)
{
    /* kept mapped for the worker's life: the cgroup paths and filters point into it */
    struct request req;
    const char *stage = request_read(SETUP_FD, &req);
    if (stage)
        return stage;
    struct fsop_worker_request w = req.w;
    close(SETUP_FD);
    for (int i = 0; i < w.ncg; i++) {
        int fd = open(w.cg_procs[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
            return "join cgroup";
        close(fd);
    }
    if (setns(PIDFD, ENTER_NS) < 0)
        return "enter sandbox namespaces";
    if (setns(PIDFD, CLONE_NEWUSER) < 0)
        return "enter sandbox user namespace";
    close(PIDFD);
    if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0)
        return "become root in the sandbox";
    struct sock_fprog progs[2];
    for (int i = 0; i < w.nfilters; i++)
        progs[i] = (struct sock_fprog){.len = w.filter_len[i],
                                       .filter = (struct sock_filter *)w.filter[i]};
    int r = confine_apply(progs, (size_t)w.nfilters);
    if (r < 0) {
        errno = -r;
        return "apply sandbox policy";
    }
    return NULL;
}

static void say_failed(int out, const char *stage, int e)
{
    char line[256];
    int n = snprintf(line, sizeof(line), "%s: %s\n", stage, strerror(e));
    (void)!write(out, line, (size_t)n);
}

/* One operation: the request in req, its result written to out. */
static void answer(int root, int req, int out)
{
    struct request r;
    const char *stage = request_read(req, &r);
    if (stage) {
        say_failed(out, stage, errno);
        request_release(&r);
        return;
    }
    json_t *res = fsop_run(root, &r.w.op);
    char *text = json_dumps(res, JSON_COMPACT);
    if (text)
        (void)!write_full(out, text, strlen(text));
    free(text);
    json_decref(res);
    request_release(&r);
}

int fs_main(void)
{
    /* Nothing in the sandbox may trace or read this process once it is in there. */
    prctl(PR_SET_DUMPABLE, 0);
    /* the children of the operations are reaped by the kernel */
    signal(SIGCHLD, SIG_IGN);
    const char *failed = setup();
    int failed_errno = errno;
    int root = failed ? -1 : open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (!failed && root < 0) {
        failed = "open /";
        failed_errno = errno;
    }
    for (;;) {
        int fds[2];
        char byte;
        size_t got;
        int n = fdpass_recv(CTL_FD, fds, 2, &byte, 1, &got, 0);
        if (n == -EINTR)
            continue;
        if (n < 0 || got == 0)
            return failed ? 127 : 0; /* the server is gone, or has stopped asking */
        if (n != 2) {
            for (int i = 0; i < n; i++)
                close(fds[i]);
            continue;
        }
        if (failed) { /* answer with the reason, and leave: the server starts a new worker */
            say_failed(fds[1], failed, failed_errno);
            return 127;
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(CTL_FD);
            answer(root, fds[0], fds[1]);
            _exit(0);
        }
        if (pid < 0)
            answer(root, fds[0], fds[1]);
        close(fds[0]);
        close(fds[1]);
    }
}

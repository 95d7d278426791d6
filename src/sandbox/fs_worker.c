/* File operations in a running sandbox (sandbox_fs), server side: they run in the sandbox's
 * file worker, the sandbox helper's "sandbox-fs" role (helper/fs.c), started from the sealed
 * memfd at the sandbox's first file operation: a fresh static program, so nothing of the
 * server's memory (keys, tokens, other users' data) ever enters a sandbox. It joins the
 * sandbox's cgroup and namespaces (pidfd setns) and applies the sandbox policy once; each
 * operation is then a memfd and a result pipe sent on its socket, and a child it forks does the
 * operation and writes its JSON result on the pipe. It stays outside the pid namespace and is
 * non-dumpable, so nothing inside can see or trace it. */
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "sandbox/fdpass.h"
#include "sandbox/fsops.h"

struct fs_job {
    struct proc_watch watch;
    struct sandbox *sbx;
    sandbox_fs_done_fn cb;
    void *ctx;
};

static void on_fs_done(struct proc_watch *w, int status)
{
    struct fs_job *job = container_of(w, struct fs_job, watch);
    struct err err = {0};
    json_t *res = NULL;
    if (w->overflow) {
        err_set(&err, -EFBIG, "file operation result is too large");
    } else if (w->len && w->data[0] == '{') {
        json_error_t jerr;
        res = json_loadb(w->data, w->len, 0, &jerr);
        if (!res)
            err_set(&err, -EIO, "file operation returned a bad result: %s", jerr.text);
    } else {
        size_t n = strcspn(w->data, "\n");
        err_set(&err, -EIO, "file operation failed: %.*s", (int)n, n ? w->data : "worker died");
    }
    (void)status;
    free(w->data);
    w->data = NULL;
    job->sbx->last_used = time_mono_ms();
    job->sbx->fs_ops--;
    job->cb(job->ctx, res, res ? NULL : &err);
    free(job);
}

/* A memfd holding w, encoded: the data of a write goes in from where it is, not copied first.
 * Returns it, or a negative errno with err set. */
static int request_memfd(const struct fsop_worker_request *w, struct err *err)
{
    size_t len;
    _cleanup_free_ char *head = fsop_worker_encode_head(w, &len);
    int memfd = memfd_create("sandbox-fs-request", MFD_CLOEXEC);
    if (memfd < 0)
        return err_set(err, -errno, "memfd_create: %s", strerror(errno));
    int r = write_full(memfd, head, len);
    if (r == 0 && w->op.data)
        r = write_full(memfd, w->op.data, w->op.data_len);
    if (r == 0 && w->op.data)
        r = write_full(memfd, "", 1);
    if (r < 0) {
        close(memfd);
        return err_set(err, r, "write file request: %s", strerror(-r));
    }
    return memfd;
}

/* Start sbx's file worker (helper/fs.c): it joins the sandbox's cgroups, namespaces and policy
 * once, then takes operations on sbx->fs_sock until that closes or the sandbox stops. */
static int fs_worker_start(struct sandbox *sbx, struct err *err)
{
    char cg[4][4096];
    const struct sock_fprog *filters;
    size_t nf = policy_filters_loaded(&filters);
    struct fsop_worker_request w = {.ncg = cgroup_procs_paths(sbx->cgroup, cg, 4)};
    for (int i = 0; i < w.ncg; i++)
        w.cg_procs[i] = cg[i];
    for (size_t i = 0; i < nf && i < ARRAY_SIZE(w.filter); i++, w.nfilters++) {
        w.filter[i] = filters[i].filter;
        w.filter_len[i] = filters[i].len;
    }
    _cleanup_close_ int memfd = request_memfd(&w, err);
    if (memfd < 0)
        return memfd;
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return err_set(err, -errno, "socketpair: %s", strerror(errno));
    /* The server's end never blocks: a worker that cannot keep up (a frozen sandbox) refuses
     * new operations once its queue is full rather than stall the loop. */
    fcntl(sp[0], F_SETFL, O_NONBLOCK);
    int fds[3] = {sp[1], sbx->pidfd, memfd};
    pid_t pid;
    static const char *const fs_argv[] = {"sandbox-fs", NULL};
    int r = sandbox_spawn_helper(sbx->m, fs_argv, fds, 3, &pid);
    close(sp[1]);
    if (r != 0) {
        close(sp[0]);
        return err_set(err, -r, "spawn file worker: %s", strerror(r));
    }
    sbx->fs_sock = sp[0];
    sbx->fs_pid = pid;
    return 0;
}

void sandbox_fs_worker_stop(struct sandbox *sbx)
{
    if (sbx->fs_sock >= 0)
        close(sbx->fs_sock); /* the worker leaves once it has read what was sent */
    sbx->fs_sock = -1;
    if (sbx->fs_pid > 0)
        proc_reap_later(sbx->fs_pid);
    sbx->fs_pid = 0;
}

int sandbox_fs(struct sandbox *sbx, const struct fsop_request *req, sandbox_fs_done_fn cb,
               void *ctx, struct err *err)
{
    if (sbx->state != SBX_RUNNING)
        return err_set(err, -ESRCH, "sandbox '%s' is not running", sbx->id);
    if (sbx->fs_ops >= SANDBOX_FS_OPS_MAX)
        return err_set(err, -EBUSY,
                       "too many file operations are under way on sandbox '%s' (at most %d); "
                       "retry when one has finished",
                       sbx->id, SANDBOX_FS_OPS_MAX);
    _cleanup_close_ int memfd = request_memfd(&(struct fsop_worker_request){.op = *req}, err);
    if (memfd < 0)
        return memfd;
    int rep[2];
    if (pipe2(rep, O_CLOEXEC) < 0)
        return err_set(err, -errno, "pipe: %s", strerror(errno));
    /* A worker that has died since the last operation (killed by the sandbox's OOM killer, or
     * one that could not join) refuses the message: start a new one, once. */
    int fds[2] = {memfd, rep[1]}, r = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (sbx->fs_sock < 0 && (r = fs_worker_start(sbx, err)) < 0)
            break;
        r = fdpass_send(sbx->fs_sock, fds, 2, "F", 1);
        if (r == -EAGAIN)
            r = err_set(err, -EBUSY,
                        "too many file operations are under way on sandbox '%s'; retry when one "
                        "has finished",
                        sbx->id);
        else if (r < 0)
            r = err_set(err, r, "cannot reach the file worker: %s", strerror(-r));
        if (r != -EPIPE && r != -ECONNRESET && r != -ECONNREFUSED)
            break;
        sandbox_fs_worker_stop(sbx);
    }
    close(rep[1]);
    if (r < 0) {
        close(rep[0]);
        return r;
    }
    struct fs_job *job = xcalloc(1, sizeof(*job));
    job->sbx = sbx;
    job->cb = cb;
    job->ctx = ctx;
    sbx->fs_ops++;
    /* base64 of the largest read plus the JSON around it */
    size_t max = FSOP_READ_MAX_BYTES / 3 * 4 + (1 << 20);
    proc_watch_start(&job->watch, 0, rep[0], max, on_fs_done);
    return 0;
}

/* See fdpass.h. */
#include "sandbox/fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

union fdpass_cmsg {
    char buf[CMSG_SPACE(FDPASS_MAX * sizeof(int))];
    struct cmsghdr align;
};

int fdpass_send(int sock, const int *fds, int n, const void *data, size_t len)
{
    if (n < 1 || n > FDPASS_MAX || len == 0)
        return -EINVAL;
    union fdpass_cmsg u;
    memset(&u, 0, sizeof(u));
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = u.buf,
                         .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)n * sizeof(int));
    ssize_t sent;
    do
        sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    return sent < 0 ? -errno : 0;
}

int fdpass_recv(int sock, int *fds, int max, void *buf, size_t cap, size_t *got, int flags)
{
    union fdpass_cmsg u;
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    *got = 0;
    ssize_t n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
    if (n < 0)
        return -errno;
    *got = (size_t)n;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
        return 0;
    int nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)), all[FDPASS_MAX];
    if (nfds > FDPASS_MAX)
        nfds = FDPASS_MAX;
    memcpy(all, CMSG_DATA(c), (size_t)nfds * sizeof(int));
    for (int i = max; i < nfds; i++)
        close(all[i]);
    if (nfds > max)
        nfds = max;
    memcpy(fds, all, (size_t)nfds * sizeof(int));
    return nfds;
}

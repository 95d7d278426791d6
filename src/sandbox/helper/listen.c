/* sandbox-listen: open the sandbox's proxy listener, 127.0.0.1:8788 inside its network
 * namespace, and hand the listening socket to the server.
 *   fd 3  a unix socket: the listener is sent on it (SCM_RIGHTS), or an error line
 *   fd 4  a pidfd of the sandbox's init
 * The server accepts on it from its own loop, so it knows which sandbox every connection on it
 * comes from. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helper.h"

#define LISTEN_PORT 8788

static int fail(const char *stage)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "%s: %s\n", stage, strerror(errno));
    if (write(3, buf, (size_t)n) < 0)
        return 127;
    return 127;
}

int listen_main(void)
{
    if (setns(4, CLONE_NEWNET) < 0)
        return fail("enter sandbox network namespace");
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return fail("socket");
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(LISTEN_PORT)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return fail("bind 127.0.0.1:8788");
    if (listen(s, 128) < 0)
        return fail("listen");
    char byte = 'L';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &s, sizeof(int));
    if (sendmsg(3, &msg, 0) < 0)
        return fail("send listener");
    return 0;
}

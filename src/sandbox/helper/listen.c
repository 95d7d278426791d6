/* sandbox-listen PORT...: open listening sockets on 127.0.0.1:PORT inside a sandbox's network
 * namespace (the proxy listener at 8788, the egress proxy at 3128) and hand them to the server.
 *   fd 3  a unix socket: the listeners are sent on it in one message (SCM_RIGHTS, in the order
 *         of the arguments), or an error line
 *   fd 4  a pidfd of the sandbox's init
 * The server accepts on them from its own loop, so it knows which sandbox every connection on
 * them comes from. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helper.h"

#define LISTEN_MAX 4

static int fail(const char *stage, const char *arg)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "%s%s: %s\n", stage, arg, strerror(errno));
    if (write(3, buf, (size_t)n) < 0)
        return 127;
    return 127;
}

int listen_main(int nports, char **ports)
{
    if (nports < 1 || nports > LISTEN_MAX) {
        errno = EINVAL;
        return fail("ports", "");
    }
    if (setns(4, CLONE_NEWNET) < 0)
        return fail("enter sandbox network namespace", "");
    int fds[LISTEN_MAX];
    for (int i = 0; i < nports; i++) {
        char *end;
        unsigned long port = strtoul(ports[i], &end, 10);
        if (*end || port == 0 || port > 65535) {
            errno = EINVAL;
            return fail("port ", ports[i]);
        }
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0)
            return fail("socket", "");
        int one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
            return fail("bind 127.0.0.1:", ports[i]);
        if (listen(s, 128) < 0)
            return fail("listen", "");
        fds[i] = s;
    }
    char byte = 'L';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(LISTEN_MAX * sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = u.buf,
                         .msg_controllen = CMSG_SPACE((size_t)nports * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)nports * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)nports * sizeof(int));
    if (sendmsg(3, &msg, 0) < 0)
        return fail("send listeners", "");
    return 0;
}

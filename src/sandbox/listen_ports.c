/* See listen_ports.h. */
#include "sandbox/listen_ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int fail(const int *fds, int n, const char *what, const char **stage)
{
    int e = errno;
    for (int i = 0; i < n; i++)
        close(fds[i]);
    *stage = what;
    return -e;
}

int listen_ports_send(int sock, const uint16_t *ports, int n, const char **stage)
{
    int fds[LISTEN_PORTS_MAX] = {-1, -1, -1, -1};
    if (n < 1 || n > LISTEN_PORTS_MAX) {
        errno = EINVAL;
        return fail(fds, 0, "ports", stage);
    }
    for (int i = 0; i < n; i++) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0)
            return fail(fds, i, "listener socket", stage);
        fds[i] = s;
        int one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(ports[i])};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 128) < 0)
            return fail(fds, i + 1, "listener bind", stage);
    }
    char byte = 'L';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(LISTEN_PORTS_MAX * sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = u.buf,
                         .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)n * sizeof(int));
    if (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0)
        return fail(fds, n, "send listeners", stage);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    return 0;
}

int listen_ports_recv(int sock, int *fds, int max, char *text, size_t cap)
{
    char byte, *buf = text && cap > 1 ? text : &byte;
    size_t len = text && cap > 1 ? cap - 1 : 1;
    union {
        char buf[CMSG_SPACE(LISTEN_PORTS_MAX * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t got = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (text && cap)
        text[got > 0 && buf == text ? (size_t)got : 0] = '\0';
    struct cmsghdr *c = got > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
    if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
        return 0;
    int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)), got_fds[LISTEN_PORTS_MAX];
    if (n > LISTEN_PORTS_MAX)
        n = LISTEN_PORTS_MAX;
    memcpy(got_fds, CMSG_DATA(c), (size_t)n * sizeof(int));
    for (int i = max; i < n; i++)
        close(got_fds[i]);
    if (n > max)
        n = max;
    memcpy(fds, got_fds, (size_t)n * sizeof(int));
    return n;
}

int listen_loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    memcpy(ifr.ifr_name, "lo", 3);
    int r = 0;
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        r = -errno;
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (r == 0 && ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        r = -errno;
    close(s);
    return r;
}

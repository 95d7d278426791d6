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

#include "sandbox/fdpass.h"

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
    int r = fdpass_send(sock, fds, n, "L", 1);
    if (r < 0) {
        errno = -r;
        return fail(fds, n, "send listeners", stage);
    }
    for (int i = 0; i < n; i++)
        close(fds[i]);
    return 0;
}

int listen_ports_recv(int sock, int *fds, int max, char *text, size_t cap)
{
    char byte, *buf = text && cap > 1 ? text : &byte;
    size_t got, len = text && cap > 1 ? cap - 1 : 1;
    int n = fdpass_recv(sock, fds, max < LISTEN_PORTS_MAX ? max : LISTEN_PORTS_MAX, buf, len, &got,
                        MSG_DONTWAIT);
    if (text && cap)
        text[buf == text ? got : 0] = '\0';
    return n > 0 ? n : 0;
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

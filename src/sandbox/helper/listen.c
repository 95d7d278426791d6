/* sandbox-listen PORT...: open listening sockets on 127.0.0.1:PORT inside a sandbox's network
 * namespace (the proxy listener at 8788, the egress proxy at 3128) and hand them to the server.
 *   fd 3  a unix socket: the listeners are sent on it in one message (SCM_RIGHTS, in the order
 *         of the arguments), or an error line
 *   fd 4  a pidfd of the sandbox's init
 * The server accepts on them from its own loop, so it knows which sandbox every connection on
 * them comes from. */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper.h"
#include "sandbox/listen_ports.h"

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
    if (nports < 1 || nports > LISTEN_PORTS_MAX) {
        errno = EINVAL;
        return fail("ports", "");
    }
    if (setns(4, CLONE_NEWNET) < 0)
        return fail("enter sandbox network namespace", "");
    uint16_t nums[LISTEN_PORTS_MAX];
    for (int i = 0; i < nports; i++) {
        char *end;
        unsigned long port = strtoul(ports[i], &end, 10);
        if (*end || port == 0 || port > 65535) {
            errno = EINVAL;
            return fail("port ", ports[i]);
        }
        nums[i] = (uint16_t)port;
    }
    const char *stage = "";
    int r = listen_ports_send(3, nums, nports, &stage);
    if (r < 0) {
        errno = -r;
        return fail(stage, "");
    }
    return 0;
}

/* Whether an address is this host's own, asked of the kernel when it matters: a route lookup
 * (rtnetlink RTM_GETROUTE) for the address, whose answer is a local route (RTN_LOCAL) for every
 * address on the host's interfaces, all of 127.0.0.0/8, and any prefix routed to the host itself
 * (AnyIP). A list read at start would miss what the host gains later (a DHCP lease, IPv6 privacy
 * addresses, a new interface); a list kept current from address notifications would lag the
 * kernel by a turn of the loop and miss locally routed prefixes. The lookup costs one send and
 * one receive on a netlink socket per address checked (at most EGRESS_ADDRS_MAX a connection),
 * answered synchronously by the kernel: small beside the name lookup's thread and the connect
 * that follow. */
#include "egress/egress.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int nl_fd = -1;
static uint32_t nl_seq;

int egress_local_init(struct err *err)
{
    pthread_mutex_lock(&lock);
    if (nl_fd < 0)
        nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    int fd = nl_fd, e = errno;
    pthread_mutex_unlock(&lock);
    if (fd < 0)
        return err_set(err, -e, "cannot open a netlink socket to look up local routes: %s",
                       strerror(e));
    return 0;
}

bool egress_addr_is_local(const struct egress_addr *a)
{
    struct {
        struct nlmsghdr nh;
        struct rtmsg rt;
        struct rtattr dst;
        uint8_t addr[16];
    } req;
    memset(&req, 0, sizeof(req));
    bool v4 = egress_addr_is_v4(a);
    size_t alen = v4 ? 4 : 16;
    req.nh.nlmsg_len = (uint32_t)(NLMSG_LENGTH(sizeof(struct rtmsg)) + RTA_LENGTH(alen));
    req.nh.nlmsg_type = RTM_GETROUTE;
    req.nh.nlmsg_flags = NLM_F_REQUEST;
    req.rt.rtm_family = v4 ? AF_INET : AF_INET6;
    req.rt.rtm_dst_len = (unsigned char)(alen * 8);
    req.dst.rta_type = RTA_DST;
    req.dst.rta_len = (unsigned short)RTA_LENGTH(alen);
    memcpy(req.addr, v4 ? a->b + 12 : a->b, alen);

    bool local = true; /* a lookup that cannot be made counts as local: refused, not let out */
    pthread_mutex_lock(&lock);
    uint32_t seq = req.nh.nlmsg_seq = ++nl_seq;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    ssize_t sent = -1;
    if (nl_fd >= 0)
        do
            sent = sendto(nl_fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel,
                          sizeof(kernel));
        while (sent < 0 && errno == EINTR);
    /* the kernel answers before sendto returns; older answers (of a lookup that gave up) are
     * skipped by their sequence number, and a bounded number of reads ends the wait */
    for (int tries = 0; sent > 0 && tries < 8; tries++) {
        union {
            struct nlmsghdr nh;
            char b[4096];
        } buf;
        ssize_t n = recv(nl_fd, &buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        bool done = false;
        for (struct nlmsghdr *h = &buf.nh; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_seq != seq)
                continue;
            done = true;
            if (h->nlmsg_type == NLMSG_ERROR) {
                /* no route at all (ENETUNREACH and the like): nothing local to reach */
                const struct nlmsgerr *e = NLMSG_DATA(h);
                local = h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)) || e->error == 0;
            } else if (h->nlmsg_type == RTM_NEWROUTE &&
                       h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct rtmsg))) {
                const struct rtmsg *rt = NLMSG_DATA(h);
                local = rt->rtm_type == RTN_LOCAL;
            }
            break;
        }
        if (done)
            break;
    }
    pthread_mutex_unlock(&lock);
    return local;
}

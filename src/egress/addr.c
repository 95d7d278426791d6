/* The address policy: address classes, the operator's allow list, and the decision. Pure
 * functions of their arguments (no resolution, no clock, no globals), safe from any thread. */
#include "egress/egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const uint8_t mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool egress_addr_is_v4(const struct egress_addr *a)
{
    return memcmp(a->b, mapped_prefix, sizeof(mapped_prefix)) == 0;
}

int egress_addr_parse(const char *text, struct egress_addr *out)
{
    struct in_addr v4;
    if (inet_pton(AF_INET, text, &v4) == 1) {
        memcpy(out->b, mapped_prefix, sizeof(mapped_prefix));
        memcpy(out->b + 12, &v4, 4);
        return 0;
    }
    struct in6_addr v6;
    if (inet_pton(AF_INET6, text, &v6) == 1) {
        memcpy(out->b, &v6, 16);
        return 0;
    }
    return -EINVAL;
}

void egress_addr_format(const struct egress_addr *a, char out[EGRESS_ADDR_TEXT_MAX])
{
    if (egress_addr_is_v4(a))
        inet_ntop(AF_INET, a->b + 12, out, EGRESS_ADDR_TEXT_MAX);
    else
        inet_ntop(AF_INET6, a->b, out, EGRESS_ADDR_TEXT_MAX);
}

/* Whether the first bits of a equal those of net. */
static bool prefix_match(const uint8_t *a, const uint8_t *net, int bits)
{
    int whole = bits / 8, rest = bits % 8;
    if (memcmp(a, net, (size_t)whole) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (net[whole] & mask);
}

/* Cloud providers' instance metadata and host services: what a VM reaches without a route
 * anywhere else, and which hands out its credentials, its configuration or its health to
 * whoever asks from inside it. Most live in ranges that are never public anyway; each entry names
 * its source and, when a range below already covers it, that range:
 *   169.254.169.254     instance metadata of AWS (IMDS), Google Cloud (metadata.google.internal),
 *                       Azure (IMDS), Oracle Cloud, DigitalOcean, OpenStack, Alibaba (ECS also
 *                       at 100.100.100.200), Hetzner, Linode, Vultr: each provider's metadata
 *                       documentation. Link-local.
 *   169.254.169.253     AWS: the Amazon DNS server's link-local address (VPC "DNS attributes").
 *                       Link-local.
 *   169.254.169.123     AWS: Amazon Time Sync Service (EC2 user guide, "Set the time").
 *                       Link-local.
 *   169.254.170.2       AWS: ECS task metadata and task role credentials (ECS developer guide,
 *                       "Task IAM role"). Link-local.
 *   169.254.170.23      AWS: EKS Pod Identity agent (EKS user guide). Link-local.
 *   169.254.0.23        Tencent Cloud: metadata.tencentyun.com (CVM "Instance metadata").
 *                       Link-local.
 *   169.254.42.42       Scaleway: instance metadata (Scaleway docs). Link-local.
 *   fd00:ec2::254       AWS: IMDS over IPv6 (EC2 user guide, "Instance metadata service").
 *                       Unique local.
 *   fd00:ec2::253       AWS: Route 53 Resolver over IPv6. Unique local.
 *   fd00:ec2::123       AWS: Time Sync over IPv6. Unique local.
 *   fd00:ec2::23        AWS: EKS Pod Identity agent over IPv6. Unique local.
 *   fd20:ce::254        Google Cloud: metadata server over IPv6 (Compute Engine, "About VM
 *                       metadata"). Unique local.
 *   fe80::a9fe:a9fe     OpenStack: metadata over IPv6 (Neutron spec "IPv6 support in Metadata
 *                       service"). Link-local.
 *   100.100.100.200     Alibaba Cloud: ECS instance metadata (ECS "Instance metadata").
 *                       Carrier-grade NAT range.
 *   192.0.0.192         Oracle Cloud: metadata's second address (OCI "Getting instance
 *                       metadata"). IETF protocol assignments (192.0.0.0/24).
 *   168.63.129.16       Azure: the WireServer and virtual public IP (Microsoft Learn, "What is
 *                       IP address 168.63.129.16?"): the VM agent's channel to the host, DNS,
 *                       DHCP and the load balancer's probes. A public address Microsoft owns,
 *                       served by the host of every Azure VM: the host-service range below.
 *   161.26.0.0/16       IBM Cloud: the service network (IBM Cloud docs, "IBM Cloud IP ranges":
 *                       service networks; VPC DNS resolvers 161.26.0.7 and 161.26.0.8, NTP
 *                       161.26.0.6): addresses IBM owns that VMs reach only inside IBM's network.
 *                       The host-service range below. */
static enum egress_class classify_v4(const uint8_t *p)
{
    static const struct {
        uint8_t net[4];
        int bits;
        enum egress_class cls;
    } ranges[] = {
        {{0, 0, 0, 0}, 8, EGRESS_UNSPECIFIED},
        {{10, 0, 0, 0}, 8, EGRESS_PRIVATE},
        {{100, 64, 0, 0}, 10, EGRESS_SHARED},
        {{127, 0, 0, 0}, 8, EGRESS_LOOPBACK},
        {{161, 26, 0, 0}, 16, EGRESS_HOST_SERVICE},    /* IBM Cloud service network */
        {{168, 63, 129, 16}, 32, EGRESS_HOST_SERVICE}, /* Azure WireServer */
        {{169, 254, 0, 0}, 16, EGRESS_LINK_LOCAL},
        {{172, 16, 0, 0}, 12, EGRESS_PRIVATE},
        {{192, 0, 0, 0}, 24, EGRESS_RESERVED}, /* IETF protocol assignments */
        {{192, 0, 2, 0}, 24, EGRESS_DOCUMENTATION},
        {{192, 88, 99, 0}, 24, EGRESS_RESERVED}, /* 6to4 relay anycast, deprecated */
        {{192, 168, 0, 0}, 16, EGRESS_PRIVATE},
        {{198, 18, 0, 0}, 15, EGRESS_BENCHMARK},
        {{198, 51, 100, 0}, 24, EGRESS_DOCUMENTATION},
        {{203, 0, 113, 0}, 24, EGRESS_DOCUMENTATION},
        {{224, 0, 0, 0}, 4, EGRESS_MULTICAST},
        {{240, 0, 0, 0}, 4, EGRESS_RESERVED}, /* future use, and the broadcast address */
    };
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
        if (prefix_match(p, ranges[i].net, ranges[i].bits))
            return ranges[i].cls;
    return EGRESS_PUBLIC;
}

enum egress_class egress_classify(const struct egress_addr *a)
{
    const uint8_t *b = a->b;
    static const uint8_t zero[16] = {0};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
    if (egress_addr_is_v4(a))
        return classify_v4(b + 12);
    if (memcmp(b, zero, 16) == 0)
        return EGRESS_UNSPECIFIED;
    if (memcmp(b, zero, 15) == 0 && b[15] == 1)
        return EGRESS_LOOPBACK;
    if (memcmp(b, nat64, 12) == 0) /* 64:ff9b::/96: a translator connects to the IPv4 address */
        return classify_v4(b + 12);
    if (b[0] == 0x20 && b[1] == 0x02) /* 6to4: 2002:AABB:CCDD::/48 tunnels to AA.BB.CC.DD */
        return classify_v4(b + 2);
    static const struct {
        uint8_t net[6];
        int bits;
        enum egress_class cls;
    } ranges[] = {
        {{0xfe, 0x80}, 10, EGRESS_LINK_LOCAL},
        {{0xfe, 0xc0}, 10, EGRESS_UNIQUE_LOCAL}, /* site-local, deprecated */
        {{0xfc, 0x00}, 7, EGRESS_UNIQUE_LOCAL},
        {{0xff, 0x00}, 8, EGRESS_MULTICAST},
        {{0x20, 0x01, 0x0d, 0xb8}, 32, EGRESS_DOCUMENTATION},
        {{0x3f, 0xff}, 20, EGRESS_DOCUMENTATION},
        {{0x20, 0x01, 0x00, 0x02, 0x00, 0x00}, 48, EGRESS_BENCHMARK},
        {{0x20, 0x01}, 23, EGRESS_RESERVED}, /* IETF assignments: Teredo, ORCHID, ... */
        {{0x20, 0x00}, 3, EGRESS_PUBLIC},    /* global unicast */
    };
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
        if (prefix_match(b, ranges[i].net, ranges[i].bits))
            return ranges[i].cls;
    /* the rest of ::/8 (IPv4-compatible, 64:ff9b:1::/48, discard-only 100::/64) and every block
     * not yet allocated */
    return EGRESS_RESERVED;
}

const char *egress_class_name(enum egress_class c)
{
    switch (c) {
    case EGRESS_PUBLIC: return "a public address";
    case EGRESS_LOOPBACK: return "a loopback address";
    case EGRESS_PRIVATE: return "a private address (RFC 1918)";
    case EGRESS_SHARED: return "a carrier-grade NAT address (100.64.0.0/10)";
    case EGRESS_LINK_LOCAL: return "a link-local address";
    case EGRESS_UNIQUE_LOCAL: return "a unique local (private) IPv6 address";
    case EGRESS_MULTICAST: return "a multicast address";
    case EGRESS_UNSPECIFIED: return "an unspecified address";
    case EGRESS_DOCUMENTATION: return "a documentation address";
    case EGRESS_BENCHMARK: return "a benchmarking address";
    case EGRESS_RESERVED: return "a reserved address";
    case EGRESS_HOST_SERVICE: return "a cloud provider's host service address";
    }
    return "an unknown kind of address";
}

static int parse_port(const char *s, uint16_t *out)
{
    if (!*s || strlen(s) > 5)
        return -1;
    unsigned v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return -1;
        v = v * 10 + (unsigned)(*p - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

static bool host_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253 || s[0] == '-' || s[0] == '.')
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.' && *p != '_')
            return false;
    return true;
}

static int parse_entry(char *e, struct egress_rule *r)
{
    memset(r, 0, sizeof(*r));
    char *port = NULL;
    if (e[0] == '[') {
        char *close = strchr(e, ']');
        if (!close || (close[1] && close[1] != ':'))
            return -1;
        *close = '\0';
        port = close[1] ? close + 2 : NULL;
        if (egress_addr_parse(e + 1, &r->net) < 0 || egress_addr_is_v4(&r->net))
            return -1;
        r->prefix = 128;
    } else if (strchr(e, '/')) {
        char *slash = strchr(e, '/');
        *slash = '\0';
        char *end;
        long bits = strtol(slash + 1, &end, 10);
        if (egress_addr_parse(e, &r->net) < 0 || end == slash + 1 || *end || bits < 0)
            return -1;
        bool v4 = egress_addr_is_v4(&r->net) && !strchr(e, ':');
        if (bits > (v4 ? 32 : 128))
            return -1;
        r->prefix = (int)bits + (v4 ? 96 : 0);
    } else {
        char *colon = strchr(e, ':');
        if (colon && strchr(colon + 1, ':')) { /* a bare IPv6 address */
            if (egress_addr_parse(e, &r->net) < 0)
                return -1;
            r->prefix = 128;
        } else {
            if (colon) {
                *colon = '\0';
                port = colon + 1;
            }
            if (egress_addr_parse(e, &r->net) == 0) {
                r->prefix = 128;
            } else if (host_name_valid(e)) {
                r->is_host = true;
                for (size_t i = 0; e[i]; i++)
                    r->host[i] = (char)tolower((unsigned char)e[i]);
            } else {
                return -1;
            }
        }
    }
    if (port && parse_port(port, &r->port) < 0)
        return -1;
    return 0;
}

int egress_rules_parse(const char *spec, struct egress_rules *out, struct err *err)
{
    return egress_rules_parse_key(spec, "FETCH_ALLOW", out, err);
}

int egress_rules_parse_key(const char *spec, const char *key, struct egress_rules *out,
                           struct err *err)
{
    out->n = 0;
    if (!spec)
        return 0;
    const char *p = spec;
    while (*p) {
        size_t len = strcspn(p, ",");
        char entry[300];
        const char *s = p, *e = p + len;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        p += len + (p[len] == ',');
        if (s == e)
            continue;
        if ((size_t)(e - s) >= sizeof(entry))
            return err_set(err, -EINVAL, "%s entry '%.40s...' is too long", key, s);
        memcpy(entry, s, (size_t)(e - s));
        entry[e - s] = '\0';
        char shown[300];
        memcpy(shown, entry, sizeof(shown));
        if (out->n == EGRESS_RULES_MAX)
            return err_set(err, -EINVAL, "%s has more than %d entries", key, EGRESS_RULES_MAX);
        if (parse_entry(entry, &out->rule[out->n]) < 0)
            return err_set(err, -EINVAL,
                           "%s entry '%s' is not an address, a network (address/bits) or a host "
                           "name, with an optional :port",
                           key, shown);
        out->n++;
    }
    return 0;
}

enum egress_verdict egress_decide(const struct egress_rules *rules, const char *host,
                                  const struct egress_addr *a, uint16_t port)
{
    for (int i = 0; rules && i < rules->n; i++) {
        const struct egress_rule *r = &rules->rule[i];
        if (r->port && r->port != port)
            continue;
        if (r->is_host ? host && strcasecmp(host, r->host) == 0
                       : prefix_match(a->b, r->net.b, r->prefix))
            return EGRESS_ALLOWED_BY_RULE;
    }
    return egress_classify(a) == EGRESS_PUBLIC ? EGRESS_ALLOWED_PUBLIC : EGRESS_DENIED;
}

int egress_check(const struct egress_rules *rules, const char *host, const struct egress_addr *a,
                 int n, uint16_t port, bool *by_rule, struct err *err)
{
    *by_rule = false;
    if (n <= 0)
        return err_set(err, -EHOSTUNREACH, "'%s' has no address", host);
    for (int i = 0; i < n; i++) {
        enum egress_verdict v = egress_decide(rules, host, &a[i], port);
        if (v == EGRESS_ALLOWED_BY_RULE)
            *by_rule = true;
        if (v != EGRESS_DENIED)
            continue;
        char text[EGRESS_ADDR_TEXT_MAX];
        egress_addr_format(&a[i], text);
        struct egress_addr literal;
        const char *cls = egress_class_name(egress_classify(&a[i]));
        if (egress_addr_parse(host, &literal) == 0)
            return err_set(err, -EACCES,
                           "%s is %s, which this server does not fetch from; an operator may "
                           "allow it with FETCH_ALLOW",
                           text, cls);
        return err_set(err, -EACCES,
                       "'%s' resolves to %s, %s, which this server does not fetch from; an "
                       "operator may allow it with FETCH_ALLOW",
                       host, text, cls);
    }
    return 0;
}

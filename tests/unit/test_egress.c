/* The address policy (src/egress/addr.c): classes of resolved addresses, IPv4 and IPv6 (mapped
 * and tunnelled forms included), the operator's allow list, and the decision on both. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress.h"
#include "harness.h"

static enum egress_class cls(const char *text)
{
    struct egress_addr a;
    if (egress_addr_parse(text, &a) < 0) {
        CHECK_FAIL_("cannot parse '%s'", text);
        return EGRESS_RESERVED;
    }
    return egress_classify(&a);
}

#define CHECK_CLASS(text, want)                                                                    \
    do {                                                                                           \
        enum egress_class got_ = cls(text);                                                        \
        if (got_ != (want))                                                                        \
            CHECK_FAIL_("%s: %s, not %s", text, egress_class_name(got_), egress_class_name(want)); \
    } while (0)

TEST(classes_ipv4)
{
    CHECK_CLASS("8.8.8.8", EGRESS_PUBLIC);
    CHECK_CLASS("140.82.112.3", EGRESS_PUBLIC);
    CHECK_CLASS("1.1.1.1", EGRESS_PUBLIC);
    CHECK_CLASS("127.0.0.1", EGRESS_LOOPBACK);
    CHECK_CLASS("127.255.255.254", EGRESS_LOOPBACK);
    CHECK_CLASS("10.0.0.1", EGRESS_PRIVATE);
    CHECK_CLASS("10.255.255.255", EGRESS_PRIVATE);
    CHECK_CLASS("172.16.0.1", EGRESS_PRIVATE);
    CHECK_CLASS("172.31.255.255", EGRESS_PRIVATE);
    CHECK_CLASS("172.15.255.255", EGRESS_PUBLIC);
    CHECK_CLASS("172.32.0.0", EGRESS_PUBLIC);
    CHECK_CLASS("192.168.1.1", EGRESS_PRIVATE);
    CHECK_CLASS("100.64.0.1", EGRESS_SHARED);
    CHECK_CLASS("100.127.255.255", EGRESS_SHARED);
    CHECK_CLASS("100.63.255.255", EGRESS_PUBLIC);
    CHECK_CLASS("100.128.0.0", EGRESS_PUBLIC);
    CHECK_CLASS("169.254.169.254", EGRESS_LINK_LOCAL); /* cloud metadata */
    CHECK_CLASS("169.254.0.1", EGRESS_LINK_LOCAL);
    CHECK_CLASS("224.0.0.1", EGRESS_MULTICAST);
    CHECK_CLASS("239.255.255.250", EGRESS_MULTICAST);
    CHECK_CLASS("0.0.0.0", EGRESS_UNSPECIFIED);
    CHECK_CLASS("0.1.2.3", EGRESS_UNSPECIFIED);
    CHECK_CLASS("192.0.2.1", EGRESS_DOCUMENTATION);
    CHECK_CLASS("198.51.100.7", EGRESS_DOCUMENTATION);
    CHECK_CLASS("203.0.113.9", EGRESS_DOCUMENTATION);
    CHECK_CLASS("198.18.0.1", EGRESS_BENCHMARK);
    CHECK_CLASS("198.19.255.255", EGRESS_BENCHMARK);
    CHECK_CLASS("198.20.0.0", EGRESS_PUBLIC);
    CHECK_CLASS("240.0.0.1", EGRESS_RESERVED);
    CHECK_CLASS("255.255.255.255", EGRESS_RESERVED);
    CHECK_CLASS("192.0.0.170", EGRESS_RESERVED);
    CHECK_CLASS("192.88.99.1", EGRESS_RESERVED);
    CHECK_CLASS("223.255.255.255", EGRESS_PUBLIC);
}

TEST(classes_ipv6)
{
    CHECK_CLASS("2606:4700:4700::1111", EGRESS_PUBLIC);
    CHECK_CLASS("2a00:1450:4001:80b::200e", EGRESS_PUBLIC);
    CHECK_CLASS("::1", EGRESS_LOOPBACK);
    CHECK_CLASS("::", EGRESS_UNSPECIFIED);
    CHECK_CLASS("fe80::1", EGRESS_LINK_LOCAL);
    CHECK_CLASS("febf:ffff::1", EGRESS_LINK_LOCAL);
    CHECK_CLASS("fc00::1", EGRESS_UNIQUE_LOCAL);
    CHECK_CLASS("fd12:3456:789a::1", EGRESS_UNIQUE_LOCAL);
    CHECK_CLASS("fec0::1", EGRESS_UNIQUE_LOCAL);
    CHECK_CLASS("ff02::1", EGRESS_MULTICAST);
    CHECK_CLASS("ff05::1:3", EGRESS_MULTICAST);
    CHECK_CLASS("2001:db8::1", EGRESS_DOCUMENTATION);
    CHECK_CLASS("3fff::1", EGRESS_DOCUMENTATION);
    CHECK_CLASS("2001:2::1", EGRESS_BENCHMARK);
    CHECK_CLASS("2001::1", EGRESS_RESERVED);      /* Teredo */
    CHECK_CLASS("2001:20::1", EGRESS_RESERVED);   /* ORCHIDv2 */
    CHECK_CLASS("100::1", EGRESS_RESERVED);       /* discard-only */
    CHECK_CLASS("::7f00:1", EGRESS_RESERVED);     /* IPv4-compatible, deprecated */
    CHECK_CLASS("64:ff9b:1::1", EGRESS_RESERVED); /* local-use NAT64 */
    CHECK_CLASS("4000::1", EGRESS_RESERVED);      /* outside global unicast */
    CHECK_CLASS("2400:cb00::1", EGRESS_PUBLIC);
}

/* Cloud metadata and host-service addresses (the list in addr.c, with its sources): none is
 * public, and a public-mode sandbox's proxy refuses each, naming its class. */
static void check_never_public(const char *text, enum egress_class want)
{
    CHECK_CLASS(text, want);
    struct egress_addr a;
    struct err err = {0};
    bool by_rule;
    if (egress_addr_parse(text, &a) == 0 &&
        egress_check(NULL, "metadata.example", &a, 1, 80, &by_rule, &err) != -EACCES)
        CHECK_FAIL_("%s: allowed without a rule", text);
}

TEST(cloud_aws_metadata_dns_ntp_and_task_credentials)
{
    check_never_public("169.254.169.254", EGRESS_LINK_LOCAL); /* IMDS */
    check_never_public("fd00:ec2::254", EGRESS_UNIQUE_LOCAL); /* IMDS over IPv6 */
    check_never_public("169.254.169.253", EGRESS_LINK_LOCAL); /* Amazon DNS */
    check_never_public("fd00:ec2::253", EGRESS_UNIQUE_LOCAL); /* Amazon DNS over IPv6 */
    check_never_public("169.254.169.123", EGRESS_LINK_LOCAL); /* Time Sync */
    check_never_public("fd00:ec2::123", EGRESS_UNIQUE_LOCAL); /* Time Sync over IPv6 */
    check_never_public("169.254.170.2", EGRESS_LINK_LOCAL);   /* ECS task credentials */
    check_never_public("169.254.170.23", EGRESS_LINK_LOCAL);  /* EKS Pod Identity */
    check_never_public("fd00:ec2::23", EGRESS_UNIQUE_LOCAL);  /* EKS Pod Identity over IPv6 */
}

TEST(cloud_google_metadata)
{
    check_never_public("169.254.169.254", EGRESS_LINK_LOCAL); /* metadata.google.internal */
    check_never_public("fd20:ce::254", EGRESS_UNIQUE_LOCAL);  /* over IPv6 */
}

TEST(cloud_azure_imds_and_wireserver)
{
    check_never_public("169.254.169.254", EGRESS_LINK_LOCAL); /* IMDS */
    check_never_public("168.63.129.16", EGRESS_HOST_SERVICE); /* WireServer, DNS, probes */
    check_never_public("::ffff:168.63.129.16", EGRESS_HOST_SERVICE);
    check_never_public("64:ff9b::a83f:8110", EGRESS_HOST_SERVICE); /* through NAT64 */
    check_never_public("2002:a83f:8110::1", EGRESS_HOST_SERVICE);  /* through 6to4 */
    /* its neighbours are ordinary public addresses */
    CHECK_CLASS("168.63.129.15", EGRESS_PUBLIC);
    CHECK_CLASS("168.63.129.17", EGRESS_PUBLIC);
}

TEST(cloud_oracle_alibaba_ibm_tencent_scaleway_openstack)
{
    check_never_public("169.254.169.254", EGRESS_LINK_LOCAL);  /* Oracle */
    check_never_public("192.0.0.192", EGRESS_RESERVED);        /* Oracle's second address */
    check_never_public("100.100.100.200", EGRESS_SHARED);      /* Alibaba */
    check_never_public("161.26.0.7", EGRESS_HOST_SERVICE);     /* IBM VPC DNS */
    check_never_public("161.26.0.8", EGRESS_HOST_SERVICE);     /* IBM VPC DNS */
    check_never_public("161.26.0.6", EGRESS_HOST_SERVICE);     /* IBM NTP */
    check_never_public("161.26.255.255", EGRESS_HOST_SERVICE); /* the whole service network */
    CHECK_CLASS("161.27.0.1", EGRESS_PUBLIC);
    CHECK_CLASS("161.25.255.255", EGRESS_PUBLIC);
    check_never_public("169.254.0.23", EGRESS_LINK_LOCAL);    /* Tencent */
    check_never_public("169.254.42.42", EGRESS_LINK_LOCAL);   /* Scaleway */
    check_never_public("fe80::a9fe:a9fe", EGRESS_LINK_LOCAL); /* OpenStack over IPv6 */
}

TEST(classes_of_ipv4_inside_ipv6)
{
    /* IPv4-mapped: the IPv4 address decides */
    CHECK_CLASS("::ffff:127.0.0.1", EGRESS_LOOPBACK);
    CHECK_CLASS("::ffff:7f00:1", EGRESS_LOOPBACK);
    CHECK_CLASS("::ffff:169.254.169.254", EGRESS_LINK_LOCAL);
    CHECK_CLASS("::ffff:10.1.2.3", EGRESS_PRIVATE);
    CHECK_CLASS("::ffff:8.8.8.8", EGRESS_PUBLIC);
    /* NAT64 and 6to4 reach the IPv4 address they carry */
    CHECK_CLASS("64:ff9b::127.0.0.1", EGRESS_LOOPBACK);
    CHECK_CLASS("64:ff9b::a00:1", EGRESS_PRIVATE);
    CHECK_CLASS("64:ff9b::8.8.8.8", EGRESS_PUBLIC);
    CHECK_CLASS("2002:7f00:1::1", EGRESS_LOOPBACK);
    CHECK_CLASS("2002:a9fe:a9fe::", EGRESS_LINK_LOCAL);
    CHECK_CLASS("2002:808:808::1", EGRESS_PUBLIC);
    /* one address for the policy, whichever form it came in */
    struct egress_addr a, b;
    CHECK_INT_EQ(egress_addr_parse("127.0.0.1", &a), 0);
    CHECK_INT_EQ(egress_addr_parse("::ffff:127.0.0.1", &b), 0);
    CHECK(memcmp(&a, &b, sizeof(a)) == 0);
    char text[EGRESS_ADDR_TEXT_MAX];
    egress_addr_format(&b, text);
    CHECK_STR_EQ(text, "127.0.0.1");
    CHECK_INT_EQ(egress_addr_parse("fe80::1", &a), 0);
    egress_addr_format(&a, text);
    CHECK_STR_EQ(text, "fe80::1");
}

TEST(addresses_are_strictly_numeric)
{
    struct egress_addr a;
    CHECK_INT_EQ(egress_addr_parse("127.1", &a), -EINVAL);
    CHECK_INT_EQ(egress_addr_parse("2130706433", &a), -EINVAL);
    CHECK_INT_EQ(egress_addr_parse("0x7f.0.0.1", &a), -EINVAL);
    CHECK_INT_EQ(egress_addr_parse("localhost", &a), -EINVAL);
    CHECK_INT_EQ(egress_addr_parse("[::1]", &a), -EINVAL);
    CHECK_INT_EQ(egress_addr_parse("", &a), -EINVAL);
}

static enum egress_verdict decide(const struct egress_rules *r, const char *host, const char *addr,
                                  uint16_t port)
{
    struct egress_addr a;
    CHECK_INT_EQ(egress_addr_parse(addr, &a), 0);
    return egress_decide(r, host, &a, port);
}

TEST(without_a_list_only_public_addresses)
{
    struct egress_rules r;
    struct err err = {0};
    CHECK_INT_EQ(egress_rules_parse(NULL, &r, &err), 0);
    CHECK_INT_EQ(r.n, 0);
    CHECK_INT_EQ(decide(&r, "github.com", "140.82.112.3", 443), EGRESS_ALLOWED_PUBLIC);
    CHECK_INT_EQ(decide(&r, "2606:4700::1", "2606:4700::1", 443), EGRESS_ALLOWED_PUBLIC);
    static const char *const denied[] = {
        "127.0.0.1",
        "::1",
        "10.0.0.1",
        "172.20.1.1",
        "192.168.0.10",
        "100.64.1.1",
        "169.254.169.254",
        "fe80::1",
        "fd00::1",
        "224.0.0.1",
        "ff02::1",
        "0.0.0.0",
        "::",
        "192.0.2.1",
        "2001:db8::1",
        "198.18.0.1",
        "240.0.0.1",
        "::ffff:127.0.0.1",
        "64:ff9b::10.0.0.1",
        "2002:c0a8:1::1",
    };
    for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
        if (decide(&r, "example.org", denied[i], 443) != EGRESS_DENIED)
            CHECK_FAIL_("%s was not denied", denied[i]);
    /* an empty list written out is the same */
    CHECK_INT_EQ(egress_rules_parse(" , ,", &r, &err), 0);
    CHECK_INT_EQ(r.n, 0);
    CHECK_INT_EQ(decide(&r, "localhost", "127.0.0.1", 443), EGRESS_DENIED);
}

TEST(allow_list_addresses_networks_hosts_ports)
{
    struct egress_rules r;
    struct err err = {0};
    CHECK_INT_EQ(egress_rules_parse("127.0.0.1, 10.0.0.0/8,git.internal:443,[::1]:8443,"
                                    "fd00::/8,192.168.1.5:80,Mirror.Example",
                                    &r, &err),
                 0);
    CHECK_INT_EQ(r.n, 7);
    /* an address, any port */
    CHECK_INT_EQ(decide(&r, "127.0.0.1", "127.0.0.1", 8080), EGRESS_ALLOWED_BY_RULE);
    CHECK_INT_EQ(decide(&r, "localhost", "127.0.0.1", 443), EGRESS_ALLOWED_BY_RULE);
    CHECK_INT_EQ(decide(&r, "x", "::ffff:127.0.0.1", 443), EGRESS_ALLOWED_BY_RULE);
    CHECK_INT_EQ(decide(&r, "x", "127.0.0.2", 443), EGRESS_DENIED);
    /* a network */
    CHECK_INT_EQ(decide(&r, "x", "10.200.3.4", 22), EGRESS_ALLOWED_BY_RULE);
    CHECK_INT_EQ(decide(&r, "x", "11.0.0.1", 22), EGRESS_ALLOWED_PUBLIC);
    CHECK_INT_EQ(decide(&r, "x", "fd12::1", 443), EGRESS_ALLOWED_BY_RULE);
    CHECK_INT_EQ(decide(&r, "x", "fc00::1", 443), EGRESS_DENIED);
    /* a host name with a port: whatever it resolves to, on that port only */
    CHECK_INT_EQ(decide(&r, "git.internal", "172.16.5.5", 443), EGRESS_ALLOWED_BY_RULE);
    CHECK_INT_EQ(decide(&r, "GIT.Internal", "172.16.5.5", 443), EGRESS_ALLOWED_BY_RULE);
    CHECK_INT_EQ(decide(&r, "git.internal", "172.16.5.5", 80), EGRESS_DENIED);
    CHECK_INT_EQ(decide(&r, "other.internal", "172.16.5.5", 443), EGRESS_DENIED);
    CHECK_INT_EQ(decide(&r, "mirror.example", "169.254.1.1", 9418), EGRESS_ALLOWED_BY_RULE);
    /* a bracketed IPv6 address with a port */
    CHECK_INT_EQ(decide(&r, "::1", "::1", 8443), EGRESS_ALLOWED_BY_RULE);
    CHECK_INT_EQ(decide(&r, "::1", "::1", 443), EGRESS_DENIED);
    /* an address with a port */
    CHECK_INT_EQ(decide(&r, "x", "192.168.1.5", 80), EGRESS_ALLOWED_BY_RULE);
    CHECK_INT_EQ(decide(&r, "x", "192.168.1.5", 443), EGRESS_DENIED);
    /* a public address named by the list is allowed by it (which lets http through) */
    CHECK_INT_EQ(egress_rules_parse("8.8.8.8", &r, &err), 0);
    CHECK_INT_EQ(decide(&r, "x", "8.8.8.8", 80), EGRESS_ALLOWED_BY_RULE);
    CHECK_INT_EQ(decide(&r, "x", "8.8.4.4", 80), EGRESS_ALLOWED_PUBLIC);
    /* bare IPv6 and whole-space networks */
    CHECK_INT_EQ(egress_rules_parse("fe80::1,0.0.0.0/0", &r, &err), 0);
    CHECK_INT_EQ(decide(&r, "x", "fe80::1", 1), EGRESS_ALLOWED_BY_RULE);
    CHECK_INT_EQ(decide(&r, "x", "169.254.169.254", 80), EGRESS_ALLOWED_BY_RULE);
    CHECK_INT_EQ(decide(&r, "x", "fe80::2", 1), EGRESS_DENIED);
}

TEST(allow_list_errors_name_the_entry)
{
    struct egress_rules r;
    static const char *const bad[] = {
        "10.0.0.0/33", "::/129",     "10.0.0.0/x", "10.0.0.0/8:443", "host:0",
        "host:65536",  "host:https", "[::1",       "[127.0.0.1]",    "[::1]x",
        "bad host",    "-host",      "a/b",        "ho$t",           "::1:2:3:4:5:6:7:8:9",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct err err = {0};
        if (egress_rules_parse(bad[i], &r, &err) != -EINVAL)
            CHECK_FAIL_("'%s' was accepted", bad[i]);
        else
            CHECK_STR_CONTAINS(err.msg, "FETCH_ALLOW entry");
    }
    char many[2000] = "";
    for (int i = 0; i < EGRESS_RULES_MAX + 1; i++)
        strcat(many, "10.0.0.1,");
    struct err err = {0};
    CHECK_INT_EQ(egress_rules_parse(many, &r, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "more than");
}

TEST(check_every_address_and_say_which)
{
    struct egress_rules r;
    struct err err = {0};
    CHECK_INT_EQ(egress_rules_parse("", &r, &err), 0);
    struct egress_addr a[3];
    egress_addr_parse("140.82.112.3", &a[0]);
    egress_addr_parse("127.0.0.1", &a[1]);
    egress_addr_parse("2606:4700::1", &a[2]);
    bool by_rule = true;
    /* one bad address among good ones refuses the name */
    CHECK_INT_EQ(egress_check(&r, "rebind.example", a, 3, 443, &by_rule, &err), -EACCES);
    CHECK_STR_EQ(err.msg, "'rebind.example' resolves to 127.0.0.1, a loopback address, which this "
                          "server does not fetch from; an operator may allow it with FETCH_ALLOW");
    CHECK(!by_rule);
    CHECK_INT_EQ(egress_check(&r, "127.0.0.1", &a[1], 1, 443, &by_rule, &err), -EACCES);
    CHECK_STR_EQ(err.msg, "127.0.0.1 is a loopback address, which this server does not fetch "
                          "from; an operator may allow it with FETCH_ALLOW");
    egress_addr_parse("169.254.169.254", &a[1]);
    CHECK_INT_EQ(egress_check(&r, "metadata", a, 2, 80, &by_rule, &err), -EACCES);
    CHECK_STR_CONTAINS(err.msg, "169.254.169.254, a link-local address");
    /* all public */
    egress_addr_parse("8.8.8.8", &a[1]);
    CHECK_INT_EQ(egress_check(&r, "dns.example", a, 3, 443, &by_rule, &err), 0);
    CHECK(!by_rule);
    CHECK_INT_EQ(egress_check(&r, "nothing.example", a, 0, 443, &by_rule, &err), -EHOSTUNREACH);
    /* allowed by the list: by_rule says so */
    CHECK_INT_EQ(egress_rules_parse("127.0.0.0/8", &r, &err), 0);
    egress_addr_parse("127.0.0.1", &a[1]);
    CHECK_INT_EQ(egress_check(&r, "localhost", &a[1], 1, 443, &by_rule, &err), 0);
    CHECK(by_rule);
}

/* The server's own fetches (client metadata documents, notifications) refuse a public address
 * the host holds, one it gained after start included: in a network namespace of this test's own,
 * with no route out, an address is added to lo after a first check let it through. */
TEST(the_servers_fetches_refuse_the_hosts_own_public_addresses)
{
    if (unshare(CLONE_NEWNET) < 0) {
        CHECK_FAIL_("unshare(CLONE_NEWNET): %s", strerror(errno));
        return;
    }
    CHECK_INT_EQ(system("ip link set lo up"), 0);
    struct egress_addr a;
    struct err err = {0};
    CHECK_INT_EQ(egress_addr_parse("1.2.3.4", &a), 0);
    CHECK_INT_EQ(egress_public_only("docs.example", 443, false, &a, 1, &err), 0);
    CHECK_INT_EQ(system("ip addr add 1.2.3.4/32 dev lo"), 0);
    CHECK_INT_EQ(egress_public_only("docs.example", 443, false, &a, 1, &err), -EACCES);
    CHECK_STR_EQ(err.msg, "'docs.example' resolves to 1.2.3.4, this host's own address");
    CHECK_INT_EQ(egress_public_only("1.2.3.4", 443, false, &a, 1, &err), -EACCES);
    CHECK_STR_EQ(err.msg, "1.2.3.4 is this host's own address");
    /* the tests' loopback documents name their address themselves */
    CHECK_INT_EQ(egress_public_only("1.2.3.4", 443, true, &a, 1, &err), 0);
}

TEST_MAIN()

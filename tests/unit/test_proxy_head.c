/* The egress proxy's reading of a request's target (src/egress/proxy_head.c): the authority of a
 * CONNECT or of an absolute-form URL, which a sandbox writes and the policy then judges. Names
 * come out lower case and without brackets; a port is required for CONNECT and defaults to 80
 * for http://; anything that could make the name judged differ from the name reached (userinfo,
 * a path, percent-encoding, control or non-ASCII bytes) is refused. */
#include <stdint.h>
#include <string.h>

#include "egress/proxy_internal.h"
#include "harness.h"

static int parse(const char *s, uint16_t def_port, char host[256], uint16_t *port)
{
    *port = 0;
    host[0] = '\0';
    return egress_parse_authority(s, strlen(s), def_port, host, 256, port);
}

TEST(names_and_ports)
{
    char host[256];
    uint16_t port;
    CHECK_INT_EQ(parse("Example.COM:443", 0, host, &port), 0);
    CHECK_STR_EQ(host, "example.com");
    CHECK_INT_EQ(port, 443);
    CHECK_INT_EQ(parse("example.com", 80, host, &port), 0);
    CHECK_STR_EQ(host, "example.com");
    CHECK_INT_EQ(port, 80);
    CHECK_INT_EQ(parse("192.0.2.1:65535", 0, host, &port), 0);
    CHECK_STR_EQ(host, "192.0.2.1");
    CHECK_INT_EQ(port, 65535);
}

TEST(bracketed_v6)
{
    char host[256];
    uint16_t port;
    CHECK_INT_EQ(parse("[2001:DB8::1]:8443", 0, host, &port), 0);
    CHECK_STR_EQ(host, "2001:db8::1");
    CHECK_INT_EQ(port, 8443);
    CHECK_INT_EQ(parse("[::1]", 80, host, &port), 0);
    CHECK_STR_EQ(host, "::1");
    CHECK_INT_EQ(port, 80);
    CHECK_INT_EQ(parse("[::1", 80, host, &port), -1);
    CHECK_INT_EQ(parse("[::1]x", 80, host, &port), -1);
    CHECK_INT_EQ(parse("[]:80", 0, host, &port), -1);
}

TEST(connect_needs_a_port)
{
    char host[256];
    uint16_t port;
    CHECK_INT_EQ(parse("example.com", 0, host, &port), -1);
    CHECK_INT_EQ(parse("example.com:", 0, host, &port), -1);
    CHECK_INT_EQ(parse("[::1]", 0, host, &port), -1);
}

TEST(bad_ports)
{
    char host[256];
    uint16_t port;
    CHECK_INT_EQ(parse("example.com:0", 0, host, &port), -1);
    CHECK_INT_EQ(parse("example.com:65536", 0, host, &port), -1);
    CHECK_INT_EQ(parse("example.com:000443", 0, host, &port), -1);
    CHECK_INT_EQ(parse("example.com:+443", 0, host, &port), -1);
    CHECK_INT_EQ(parse("example.com:44 3", 0, host, &port), -1);
}

TEST(names_that_could_mean_another_host)
{
    char host[256];
    uint16_t port;
    CHECK_INT_EQ(parse("user@evil.example:443", 0, host, &port), -1);
    CHECK_INT_EQ(parse("a.example/b:443", 0, host, &port), -1);
    CHECK_INT_EQ(parse("a.example\\b:443", 0, host, &port), -1);
    CHECK_INT_EQ(parse("%31%32%37.0.0.1:80", 0, host, &port), -1);
    CHECK_INT_EQ(parse("a b.example:443", 0, host, &port), -1);
    CHECK_INT_EQ(parse("a\x7f.example:443", 0, host, &port), -1);
    CHECK_INT_EQ(parse("\xc3\xa9.example:443", 0, host, &port), -1);
    CHECK_INT_EQ(parse(":443", 0, host, &port), -1);
    CHECK_INT_EQ(parse("", 80, host, &port), -1);
}

TEST(a_name_must_fit)
{
    char name[300], host[256];
    uint16_t port;
    memset(name, 'a', 255);
    strcpy(name + 255, ":443");
    CHECK_INT_EQ(parse(name, 0, host, &port), 0);
    CHECK_INT_EQ(strlen(host), 255);
    memset(name, 'a', 256);
    strcpy(name + 256, ":443");
    CHECK_INT_EQ(parse(name, 0, host, &port), -1);
}

TEST_MAIN()

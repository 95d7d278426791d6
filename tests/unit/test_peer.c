/* Trusted proxies (TRUSTED_PROXIES) and the client behind them: the list's parser, and the walk
 * of X-Forwarded-For from the right, against spoofing, garbage and oversized headers. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "http/peer.h"

static struct sockaddr_storage addr(const char *ip)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(40000);
    } else if (inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(40000);
    }
    return ss;
}

static const char *text_of(const struct sockaddr_storage *ss, char *buf, size_t cap)
{
    if (ss->ss_family == AF_INET)
        return inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, buf, (socklen_t)cap);
    if (ss->ss_family == AF_INET6)
        return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, buf,
                         (socklen_t)cap);
    return "?";
}

static struct http_trust trust(const char *list)
{
    struct http_trust t;
    struct err err = {0};
    if (http_trust_parse(list, &t, &err) < 0)
        CHECK_FAIL_("parse '%s': %s", list, err.msg);
    return t;
}

/* The client for a request from peer through X-Forwarded-For headers xff (NULL-terminated),
 * as text (a static buffer). */
static const char *client_of(const char *list, const char *peer, const char *const *xff)
{
    static char buf[INET6_ADDRSTRLEN];
    struct http_trust t = trust(list);
    struct http_text v[64];
    size_t n = 0;
    for (; xff && xff[n]; n++)
        v[n] = (struct http_text){xff[n], strlen(xff[n])};
    struct sockaddr_storage p = addr(peer), out;
    http_trust_client(&t, (struct sockaddr *)&p, v, n, &out);
    return text_of(&out, buf, sizeof(buf));
}

#define XFF(...) ((const char *const[]){__VA_ARGS__, NULL})

static bool trusted(const char *list, const char *ip)
{
    struct http_trust t = trust(list);
    struct sockaddr_storage ss = addr(ip);
    return http_trust_contains(&t, (struct sockaddr *)&ss);
}

TEST(trust_list_parses_addresses_and_cidrs)
{
    struct http_trust t = trust(" 127.0.0.1 , 10.0.0.0/8,::1,fd00::/8,, 192.0.2.77/24 ");
    CHECK_INT_EQ(t.n, 5);
    CHECK_INT_EQ(t.e[0].family, AF_INET);
    CHECK_INT_EQ(t.e[0].bits, 32);
    CHECK_INT_EQ(t.e[3].family, AF_INET6);
    CHECK_INT_EQ(t.e[3].bits, 8);
    /* host bits of a CIDR are dropped */
    CHECK_INT_EQ(t.e[4].addr[3], 0);
    CHECK_INT_EQ(trust(NULL).n, 0);
    CHECK_INT_EQ(trust("").n, 0);
    CHECK_INT_EQ(trust(" , ").n, 0);
}

TEST(trust_list_contains)
{
    const char *list = "127.0.0.1, 10.0.0.0/8, fd00::/8, 2001:db8::/33, 192.0.2.128/25";
    CHECK(trusted(list, "127.0.0.1"));
    CHECK(!trusted(list, "127.0.0.2"));
    CHECK(trusted(list, "10.255.1.2"));
    CHECK(!trusted(list, "11.0.0.1"));
    CHECK(trusted(list, "fd12::1"));
    CHECK(!trusted(list, "fe80::1"));
    CHECK(trusted(list, "2001:db8:7fff::1"));
    CHECK(!trusted(list, "2001:db8:8000::1"));
    CHECK(trusted(list, "192.0.2.200"));
    CHECK(!trusted(list, "192.0.2.127"));
    /* an IPv4-mapped peer (a listener on [::]) is the IPv4 one */
    CHECK(trusted(list, "::ffff:127.0.0.1"));
    CHECK(trusted("::ffff:10.0.0.0/104", "10.1.2.3"));
    CHECK(trusted("0.0.0.0/0", "203.0.113.9"));
    CHECK(!trusted("0.0.0.0/0", "2001:db8::1"));
    CHECK(trusted("::/0", "2001:db8::1"));
    CHECK(!trusted("", "127.0.0.1"));
}

TEST(trust_list_bad_entry_is_an_error_naming_it)
{
    static const char *const bad[] = {
        "localhost",   "10.0.0.0/33",        "::1/129",      "10.0.0.0/",
        "10.0.0.0/8x", "10.0.0/8",           "1.2.3.4:80",   "[::1]",
        "10.0.0.0/-1", "::ffff:10.0.0.0/64", "1.2.3.4/08/1",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char list[128];
        snprintf(list, sizeof(list), "127.0.0.1, %s", bad[i]);
        struct http_trust t;
        struct err err = {0};
        CHECK_INT_EQ(http_trust_parse(list, &t, &err), -EINVAL);
        CHECK_INT_EQ(t.n, 0);
        char want[64];
        snprintf(want, sizeof(want), "TRUSTED_PROXIES entry '%s'", bad[i]);
        CHECK_STR_CONTAINS(err.msg, want);
    }
}

TEST(trust_list_capped)
{
    char list[HTTP_TRUST_MAX * 16 + 32];
    size_t len = 0;
    for (int i = 0; i <= HTTP_TRUST_MAX; i++)
        len += (size_t)snprintf(list + len, sizeof(list) - len, "10.0.%d.1,", i);
    struct http_trust t;
    struct err err = {0};
    CHECK_INT_EQ(http_trust_parse(list, &t, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "more than 64 entries");
}

TEST(xff_entry_forms)
{
    static const struct {
        const char *in, *want;
    } ok[] = {
        {"203.0.113.9", "203.0.113.9"},        {" 203.0.113.9\t", "203.0.113.9"},
        {"203.0.113.9:51234", "203.0.113.9"},  {"2001:db8::1", "2001:db8::1"},
        {"[2001:db8::1]", "2001:db8::1"},      {"[2001:db8::1]:443", "2001:db8::1"},
        {"::ffff:203.0.113.9", "203.0.113.9"}, {"[::ffff:203.0.113.9]:8", "203.0.113.9"},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct sockaddr_storage ss;
        char buf[INET6_ADDRSTRLEN];
        CHECK(http_xff_entry(ok[i].in, strlen(ok[i].in), &ss));
        CHECK_STR_EQ(text_of(&ss, buf, sizeof(buf)), ok[i].want);
    }
    static const char *const bad[] = {
        "",
        " ",
        "unknown",
        "_hidden",
        "203.0.113.9:",
        "1.2.3.4:99999",
        "1.2.3.4:8a",
        "[2001:db8::1",
        "[2001:db8::1]x",
        "[1.2.3.4]",
        "fe80::1%eth0",
        "1.2.3",
        "01.2.3.4",
        "1.2.3.4 5.6.7.8",
        "2001:db8::1:80:",
        "[]",
        "\"1.2.3.4\"",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct sockaddr_storage ss;
        if (http_xff_entry(bad[i], strlen(bad[i]), &ss))
            CHECK_FAIL_("'%s' taken as an address", bad[i]);
    }
}

TEST(xff_of_an_untrusted_peer_is_ignored)
{
    /* a client that is not a trusted proxy is counted by its own address, whatever it sends */
    CHECK_STR_EQ(client_of("127.0.0.1", "198.51.100.7", XFF("203.0.113.9")), "198.51.100.7");
    CHECK_STR_EQ(client_of("", "127.0.0.1", XFF("203.0.113.9")), "127.0.0.1");
    CHECK_STR_EQ(client_of(NULL, "2001:db8::5", XFF("203.0.113.9")), "2001:db8::5");
    CHECK_STR_EQ(client_of("10.0.0.0/8", "127.0.0.2", XFF("10.0.0.1")), "127.0.0.2");
}

TEST(xff_through_one_trusted_proxy)
{
    CHECK_STR_EQ(client_of("127.0.0.1", "127.0.0.1", XFF("203.0.113.9")), "203.0.113.9");
    /* the client wrote "spoofed", the proxy appended the address it saw */
    CHECK_STR_EQ(client_of("127.0.0.1", "127.0.0.1", XFF("192.0.2.66, 203.0.113.9")),
                 "203.0.113.9");
    CHECK_STR_EQ(client_of("127.0.0.1", "127.0.0.1", XFF("192.0.2.66", "203.0.113.9")),
                 "203.0.113.9");
    /* a client naming the proxy itself does not make the walk go further than its own entry */
    CHECK_STR_EQ(client_of("127.0.0.1", "127.0.0.1", XFF("192.0.2.66, 127.0.0.1, 203.0.113.9")),
                 "203.0.113.9");
    /* no header: the proxy itself */
    CHECK_STR_EQ(client_of("127.0.0.1", "127.0.0.1", NULL), "127.0.0.1");
    CHECK_STR_EQ(client_of("127.0.0.1", "::ffff:127.0.0.1", XFF("203.0.113.9")), "203.0.113.9");
}

TEST(xff_through_recursive_trusted_hops)
{
    const char *list = "127.0.0.1, 10.0.0.0/8, fd00::/8";
    CHECK_STR_EQ(client_of(list, "127.0.0.1", XFF("192.0.2.66, 203.0.113.9, 10.1.1.1, 10.2.2.2")),
                 "203.0.113.9");
    CHECK_STR_EQ(client_of(list, "127.0.0.1", XFF("203.0.113.9, 10.1.1.1", "[fd00::7]:443")),
                 "203.0.113.9");
    CHECK_STR_EQ(client_of(list, "fd00::1", XFF("2001:db8::42", "fd00::2")), "2001:db8::42");
    CHECK_STR_EQ(client_of(list, "127.0.0.1", XFF("[2001:db8::42]:5555,10.0.0.9")), "2001:db8::42");
    /* every hop trusted: the farthest of them */
    CHECK_STR_EQ(client_of(list, "127.0.0.1", XFF("10.9.9.9, 10.1.1.1")), "10.9.9.9");
}

TEST(xff_garbage_stops_at_the_last_trusted_hop)
{
    const char *list = "127.0.0.1, 10.0.0.0/8";
    CHECK_STR_EQ(client_of(list, "127.0.0.1", XFF("203.0.113.9, unknown")), "127.0.0.1");
    CHECK_STR_EQ(client_of(list, "127.0.0.1", XFF("203.0.113.9, garbage, 10.1.1.1")), "10.1.1.1");
    CHECK_STR_EQ(client_of(list, "127.0.0.1", XFF("203.0.113.9,,10.1.1.1")), "10.1.1.1");
    CHECK_STR_EQ(client_of(list, "127.0.0.1", XFF("203.0.113.9", "")), "127.0.0.1");
    CHECK_STR_EQ(client_of(list, "127.0.0.1", XFF("203.0.113.9, ")), "127.0.0.1");
    CHECK_STR_EQ(client_of(list, "127.0.0.1", XFF("1.2.3.4:99999")), "127.0.0.1");
    CHECK_STR_EQ(client_of(list, "127.0.0.1", XFF("\xff\xfe")), "127.0.0.1");
}

TEST(xff_walk_capped_hops_and_bytes)
{
    /* 40 trusted hops after the client: the walk stops after HTTP_XFF_MAX_HOPS (32) of them
     * and the client is the last trusted hop it reached */
    char list[2048];
    size_t len = (size_t)snprintf(list, sizeof(list), "203.0.113.9");
    for (int i = 40; i >= 1; i--)
        len += (size_t)snprintf(list + len, sizeof(list) - len, ", 10.0.0.%d", i);
    CHECK_STR_EQ(client_of("127.0.0.1, 10.0.0.0/8", "127.0.0.1", XFF(list)), "10.0.0.32");
    /* 31 trusted hops: the client is within reach */
    len = (size_t)snprintf(list, sizeof(list), "203.0.113.9");
    for (int i = 31; i >= 1; i--)
        len += (size_t)snprintf(list + len, sizeof(list) - len, ",10.0.0.%d", i);
    CHECK_STR_EQ(client_of("127.0.0.1, 10.0.0.0/8", "127.0.0.1", XFF(list)), "203.0.113.9");
    /* more than HTTP_XFF_MAX_BYTES (4 KiB) before the client: never reached, the walk ends at
     * the trusted hop it read last */
    static char big[8192];
    memset(big, ' ', sizeof(big) - 1);
    memcpy(big, "203.0.113.9,", 12);
    memcpy(big + sizeof(big) - 12, ", 10.0.0.1", 10);
    big[sizeof(big) - 2] = '\0';
    CHECK_STR_EQ(client_of("127.0.0.1, 10.0.0.0/8", "127.0.0.1", XFF(big)), "10.0.0.1");
    big[sizeof(big) - 12] = '\0';
    CHECK_STR_EQ(client_of("127.0.0.1, 10.0.0.0/8", "127.0.0.1", XFF(big)), "127.0.0.1");
    /* one header a hop, past the cap */
    const char *many[41];
    many[0] = "203.0.113.9";
    for (int i = 1; i < 40; i++)
        many[i] = "10.0.0.1";
    many[40] = NULL;
    CHECK_STR_EQ(client_of("127.0.0.1, 10.0.0.0/8", "127.0.0.1", many), "10.0.0.1");
}

TEST_MAIN()

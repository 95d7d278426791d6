/* The gate's count of unauthenticated connections per client address: which addresses count
 * together (an IPv4 address alone, an IPv6 /64, an IPv4-mapped address as its IPv4 one), and
 * the cap. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sodium.h>
#include <string.h>

#include "harness.h"
#include "http/gate_internal.h"

static struct http_peer_key key_of(const char *text)
{
    struct sockaddr_storage ss = {0};
    struct http_peer_key key;
    if (strchr(text, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(443);
        if (inet_pton(AF_INET6, text, &a->sin6_addr) != 1)
            CHECK_FAIL_("bad address '%s'", text);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(443);
        if (inet_pton(AF_INET, text, &a->sin_addr) != 1)
            CHECK_FAIL_("bad address '%s'", text);
    }
    CHECK_INT_EQ(http_peer_key((struct sockaddr *)&ss, &key), 0);
    return key;
}

static bool same(const char *a, const char *b)
{
    struct http_peer_key ka = key_of(a), kb = key_of(b);
    return memcmp(&ka, &kb, sizeof(ka)) == 0;
}

TEST(an_ipv6_address_counts_by_its_64)
{
    CHECK(same("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"));
    CHECK(same("2001:db8:1:2:aaaa::", "2001:db8:1:2::"));
    CHECK(!same("2001:db8:1:2::1", "2001:db8:1:3::1"));
    CHECK(!same("2001:db8:1:2::1", "2001:db9:1:2::1"));
    CHECK(same("::1", "::2"));
}

TEST(an_ipv4_address_counts_alone_also_when_mapped)
{
    CHECK(!same("192.0.2.1", "192.0.2.2"));
    CHECK(!same("127.0.0.1", "127.0.0.2"));
    CHECK(same("192.0.2.1", "::ffff:192.0.2.1"));
    CHECK(!same("::ffff:192.0.2.1", "::ffff:192.0.2.2"));
    /* not the /64 of the mapped range, which would put every IPv4 client together */
    CHECK(!same("::ffff:192.0.2.1", "::ffff:198.51.100.1"));
    /* an IPv6 address never counts with an IPv4 one */
    CHECK(!same("::c000:201", "192.0.2.1"));
}

TEST(other_families_are_not_counted)
{
    struct sockaddr_storage ss = {.ss_family = AF_UNIX};
    struct http_peer_key key;
    CHECK_INT_EQ(http_peer_key((struct sockaddr *)&ss, &key), -EAFNOSUPPORT);
}

TEST(an_address_holds_at_most_max_and_gets_its_place_back)
{
    CHECK(sodium_init() >= 0);
    struct http_peers *t = http_peers_new(16);
    struct http_peer_key a = key_of("2001:db8::1"), a2 = key_of("2001:db8::2:3"),
                         b = key_of("2001:db8:0:1::1");
    struct http_peer *held[3];
    held[0] = http_peers_hold(t, &a, 3);
    held[1] = http_peers_hold(t, &a2, 3);
    held[2] = http_peers_hold(t, &a, 3);
    CHECK(held[0] && held[1] && held[2]);
    CHECK(held[0] == held[1]);
    CHECK(h2o_linklist_is_empty(http_peer_waiting(held[0])));
    CHECK(http_peers_hold(t, &a2, 3) == NULL);
    /* another /64 has its own count */
    struct http_peer *other = http_peers_hold(t, &b, 3);
    CHECK(other && other != held[0]);
    CHECK_INT_EQ(http_peers_count(t), 2);
    http_peers_release(t, held[2]);
    CHECK(http_peers_hold(t, &a, 3) == held[0]);
    for (int i = 0; i < 3; i++)
        http_peers_release(t, held[0]);
    CHECK_INT_EQ(http_peers_count(t), 1);
    http_peers_release(t, other);
    CHECK_INT_EQ(http_peers_count(t), 0);
    /* a cap of 0 holds nothing */
    CHECK(http_peers_hold(t, &a, 0) == NULL);
    CHECK_INT_EQ(http_peers_count(t), 0);
    http_peers_free(t);
}

TEST(many_addresses_share_a_small_table)
{
    CHECK(sodium_init() >= 0);
    struct http_peers *t = http_peers_new(8);
    struct http_peer *held[1000];
    for (int i = 0; i < 1000; i++) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a000000u + i)};
        struct http_peer_key k;
        http_peer_key((struct sockaddr *)&sa, &k);
        held[i] = http_peers_hold(t, &k, 1);
        CHECK(held[i] != NULL);
        CHECK(http_peers_hold(t, &k, 1) == NULL);
    }
    CHECK_INT_EQ(http_peers_count(t), 1000);
    for (int i = 0; i < 500; i++)
        http_peers_release(t, held[i]);
    CHECK_INT_EQ(http_peers_count(t), 500);
    http_peers_free(t); /* frees the 500 still held */
}

TEST_MAIN()

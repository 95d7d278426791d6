/* The server name of a TLS ClientHello (src/egress/tlshello.c): a real hello as OpenSSL sends
 * it, hellos built here with the extensions under test and split into records as a client may,
 * every prefix of them (more bytes needed), and what is not a hello, breaks its format or is
 * larger than EGRESS_HELLO_MAX (16 KiB). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "egress/egress.h"
#include "harness.h"

/* OpenSSL 3.0's ClientHello for allowed.example with TLS 1.2 at most (python's ssl module). */
static const char real_hex[] =
    "16030100b5010000b1030377ff9d0c3751ad5c0b0950cba97dcbee21aa99147242faa7217a053dda"
    "65f20000001ec02cc030c02bc02fcca9cca8c024c028c023c027009f009e006b006700ff0100006a"
    "00000014001200000f616c6c6f7765642e6578616d706c65000b000403000102000a000c000a001d"
    "0017001e00190018002300000016000000170000000d002a0028040305030603080708080809080a"
    "080b080408050806040105010601030303010302040205020602";

static size_t unhex(const char *hex, uint8_t *out)
{
    size_t n = 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[n++] = (uint8_t)v;
    }
    return n;
}

static uint8_t *put16(uint8_t *p, size_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

/* A server_name extension naming name (n bytes; a second name when name2). */
static size_t ext_sni(uint8_t *out, const char *name, size_t n, const char *name2)
{
    size_t n2 = name2 ? strlen(name2) : 0, list = 3 + n + (name2 ? 3 + n2 : 0);
    uint8_t *p = put16(out, 0x0000);
    p = put16(p, list + 2);
    p = put16(p, list);
    *p++ = 0;
    p = put16(p, n);
    memcpy(p, name, n);
    p += n;
    if (name2) {
        *p++ = 0;
        p = put16(p, n2);
        memcpy(p, name2, n2);
        p += n2;
    }
    return (size_t)(p - out);
}

/* An extension of type with len bytes of zeros. */
static size_t ext_other(uint8_t *out, unsigned type, size_t len)
{
    uint8_t *p = put16(out, type);
    p = put16(p, len);
    memset(p, 0, len);
    return 4 + len;
}

/* A ClientHello with the extensions ext (elen bytes; none at all when elen is SIZE_MAX), in
 * handshake records of at most rec bytes each. Returns its length. */
static size_t build(uint8_t *out, const uint8_t *ext, size_t elen, size_t rec)
{
    static uint8_t hs[70000];
    uint8_t *p = hs + 4;
    p = put16(p, 0x0303);
    memset(p, 7, 32);
    p += 32;
    *p++ = 0;             /* session id */
    p = put16(p, 2);      /* cipher suites */
    p = put16(p, 0x1301); /* TLS_AES_128_GCM_SHA256 */
    *p++ = 1;             /* compression methods */
    *p++ = 0;
    if (elen != SIZE_MAX) {
        p = put16(p, elen);
        memcpy(p, ext, elen);
        p += elen;
    }
    size_t body = (size_t)(p - hs) - 4, total = (size_t)(p - hs);
    hs[0] = 1;
    hs[1] = (uint8_t)(body >> 16);
    hs[2] = (uint8_t)(body >> 8);
    hs[3] = (uint8_t)body;
    size_t n = 0;
    for (size_t off = 0; off < total; off += rec) {
        size_t k = total - off < rec ? total - off : rec;
        out[n] = 22;
        out[n + 1] = 3;
        out[n + 2] = 1;
        put16(out + n + 3, k);
        memcpy(out + n + 5, hs + off, k);
        n += 5 + k;
    }
    return n;
}

static struct egress_hello h;

static int parse(const uint8_t *b, size_t n)
{
    return egress_hello_parse(b, n, &h);
}

TEST(a_real_hello_names_its_server)
{
    uint8_t b[512];
    size_t n = unhex(real_hex, b);
    CHECK_INT_EQ(parse(b, n), 0);
    CHECK(h.has_sni);
    CHECK(!h.ech);
    CHECK_STR_EQ(h.sni, "allowed.example");
    /* every shorter prefix asks for more */
    for (size_t k = 0; k < n; k++)
        if (parse(b, k) != -EAGAIN)
            CHECK_FAIL_("a prefix of %zu bytes: %d", k, parse(b, k));
}

TEST(hellos_split_into_records_and_read_in_pieces)
{
    static uint8_t e[512], b[4096];
    size_t el = ext_sni(e, "Allowed.Example", 15, NULL);
    el += ext_other(e + el, 0x002b, 3);   /* supported_versions */
    el += ext_other(e + el, 0x0033, 200); /* a key share */
    size_t sizes[] = {16384, 100, 17, 1};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = build(b, e, el, sizes[i]);
        CHECK_INT_EQ(parse(b, n), 0);
        CHECK_STR_EQ(h.sni, "allowed.example"); /* lowercased */
        for (size_t k = 0; k < n; k++)
            if (parse(b, k) != -EAGAIN)
                CHECK_FAIL_("records of %zu, a prefix of %zu bytes: %d", sizes[i], k, parse(b, k));
    }
    /* what follows the hello (the client's next records) does not matter */
    size_t n = build(b, e, el, 16384);
    memcpy(b + n, "\x17\x03\x03\x00\x01x", 6);
    CHECK_INT_EQ(parse(b, n + 6), 0);
}

TEST(no_name_and_encrypted_client_hello_are_told)
{
    static uint8_t e[512], b[4096];
    size_t el = ext_other(e, 0x002b, 3);
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), 0);
    CHECK(!h.has_sni);
    CHECK_INT_EQ(parse(b, build(b, e, SIZE_MAX, 16384)), 0); /* no extensions at all */
    CHECK(!h.has_sni);
    CHECK_INT_EQ(parse(b, build(b, e, 0, 16384)), 0); /* an empty list of them */
    CHECK(!h.has_sni);
    /* ECH: the name shown is the outer one */
    el = ext_sni(e, "allowed.example", 15, NULL);
    el += ext_other(e + el, 0xfe0d, 40);
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), 0);
    CHECK(h.has_sni && h.ech);
    el = ext_other(e, 0xffce, 40); /* the older encrypted_server_name */
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), 0);
    CHECK(h.ech);
    /* a name entry of another type than host_name is skipped */
    el = ext_sni(e, "allowed.example", 15, NULL);
    e[6] = 1;
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), 0);
    CHECK(!h.has_sni);
}

TEST(what_is_not_a_hello_is_refused)
{
    static uint8_t b[4096], e[512];
    const char *http = "GET / HTTP/1.1\r\nHost: other.example\r\n\r\n";
    CHECK_INT_EQ(parse((const uint8_t *)http, strlen(http)), -EPROTO);
    CHECK_INT_EQ(parse((const uint8_t *)"SSH-2.0-OpenSSH_9.6\r\n", 21), -EPROTO);
    CHECK_INT_EQ(parse((const uint8_t *)"\x80\x2e\x01\x03\x01", 5), -EPROTO); /* SSLv2 hello */
    CHECK_INT_EQ(parse((const uint8_t *)"\x15\x03\x01\x00\x02\x02\x28", 7), -EPROTO); /* alert */
    CHECK_INT_EQ(parse((const uint8_t *)"\x16\x03\x01\x00\x00", 5), -EPROTO); /* empty record */
    CHECK_INT_EQ(parse((const uint8_t *)"\x16\x03\x01\x40\x01", 5), -EPROTO); /* over 16 KiB */
    CHECK_INT_EQ(parse((const uint8_t *)"\x16\x02\x01\x00\x05", 5), -EPROTO); /* not TLS 3.x */
    /* a ServerHello is told from its first byte, before the record is whole */
    CHECK_INT_EQ(parse((const uint8_t *)"\x16\x03\x03\x00\x50\x02", 6), -EPROTO);
    CHECK_INT_EQ(parse((const uint8_t *)"\x16\x03\x03\x00\x50\x01", 6), -EAGAIN);
    /* a record of another type in the middle of the hello */
    size_t el = ext_sni(e, "allowed.example", 15, NULL);
    size_t n = build(b, e, el, 20);
    b[25] = 23;
    CHECK_INT_EQ(parse(b, n), -EPROTO);
}

TEST(a_broken_hello_is_refused)
{
    static uint8_t e[512], b[4096];
    size_t el;
    /* two server_name extensions, or two host names in one */
    el = ext_sni(e, "allowed.example", 15, NULL);
    el += ext_sni(e + el, "other.example", 13, NULL);
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), -EPROTO);
    el = ext_sni(e, "allowed.example", 15, "other.example");
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), -EPROTO);
    /* a name with a NUL, a space, a byte past ASCII; an empty one; one of 254 bytes */
    el = ext_sni(e, "allowed.example\0other.example", 29, NULL);
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), -EPROTO);
    el = ext_sni(e, "allowed example", 15, NULL);
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), -EPROTO);
    el = ext_sni(e,
                 "b\xc3\xbc"
                 "cher.example",
                 15, NULL);
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), -EPROTO);
    el = ext_sni(e, "", 0, NULL);
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), -EPROTO);
    char long_name[260];
    memset(long_name, 'a', sizeof(long_name));
    el = ext_sni(e, long_name, 253, NULL);
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), 0);
    el = ext_sni(e, long_name, 254, NULL);
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), -EPROTO);
    /* lengths that overrun what holds them */
    el = ext_sni(e, "allowed.example", 15, NULL);
    e[3] += 1; /* the extension's */
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), -EPROTO);
    el = ext_sni(e, "allowed.example", 15, NULL);
    e[5] += 1; /* the name list's */
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), -EPROTO);
    el = ext_sni(e, "allowed.example", 15, NULL);
    e[8] += 1; /* the name's */
    CHECK_INT_EQ(parse(b, build(b, e, el, 16384)), -EPROTO);
    el = ext_sni(e, "allowed.example", 15, NULL);
    size_t n = build(b, e, el, 16384);
    b[5 + 4 + 34] = 33; /* a session id of 33 bytes */
    CHECK_INT_EQ(parse(b, n), -EPROTO);
    n = build(b, e, el, 16384);
    b[5 + 4 + 35] = 0xff; /* cipher suites longer than the hello */
    CHECK_INT_EQ(parse(b, n), -EPROTO);
    n = build(b, e, el, 16384);
    b[5 + 3] += 1; /* the handshake one byte longer than its records: more is awaited */
    CHECK_INT_EQ(parse(b, n), -EAGAIN);
}

TEST(a_hello_larger_than_16_KiB_is_refused_without_waiting_for_it)
{
    static uint8_t e[20000], b[40000];
    /* a handshake that says it is larger, as soon as its length is read */
    CHECK_INT_EQ(parse((const uint8_t *)"\x16\x03\x01\x00\x04\x01\x00\x40\x00", 9), -EMSGSIZE);
    /* records that would end past 16 KiB */
    size_t el = ext_sni(e, "allowed.example", 15, NULL);
    el += ext_other(e + el, 0x0015, 16400); /* padding: two records */
    size_t n = build(b, e, el, 16384);
    CHECK_INT_EQ(parse(b, n), -EMSGSIZE);
    CHECK_INT_EQ(parse(b, 5), -EMSGSIZE);
    /* tiny records: their headers count */
    el = ext_sni(e, "allowed.example", 15, NULL);
    el += ext_other(e + el, 0x0015, 3000);
    CHECK_INT_EQ(parse(b, build(b, e, el, 1)), -EMSGSIZE);
    /* just under: fits */
    el = ext_sni(e, "allowed.example", 15, NULL);
    el += ext_other(e + el, 0x0015, EGRESS_HELLO_MAX - 5 - 4 - 41 - 2 - el - 4);
    n = build(b, e, el, 16384);
    CHECK_INT_EQ(n, EGRESS_HELLO_MAX);
    CHECK_INT_EQ(parse(b, n), 0);
    CHECK_STR_EQ(h.sni, "allowed.example");
}

TEST_MAIN()

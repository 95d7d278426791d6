/* The proxy client's wire (src/proxy/upstream_wire.c): how a response's body is framed (RFC
 * 9112, 6.3), which answers leave the connection fit for another, and chunked decoding, whole
 * and split at every byte. fuzz_upstream checks the same on any bytes. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proxy/upstream.h"

static int parse(const char *s, bool head_method, struct up_head *h)
{
    return up_parse_head(s, strlen(s), head_method, h);
}

TEST(head_framing_and_reuse)
{
    struct up_head h;
    const char *plain = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    CHECK_INT_EQ(parse(plain, false, &h), (int)strlen(plain) - 5);
    CHECK_INT_EQ(h.status, 200);
    CHECK_INT_EQ(h.body, UP_BODY_LENGTH);
    CHECK(h.length == 5 && h.keep);
    /* the same head to HEAD has no body, whatever its Content-Length says */
    CHECK(parse(plain, true, &h) > 0 && h.body == UP_BODY_NONE && h.keep);
    CHECK(parse("HTTP/1.1 204 No Content\r\n\r\n", false, &h) > 0 && h.body == UP_BODY_NONE);
    CHECK(parse("HTTP/1.1 304 Not Modified\r\ncontent-length: 9\r\n\r\n", false, &h) > 0 &&
          h.body == UP_BODY_NONE);
    CHECK(parse("HTTP/1.1 100 Continue\r\n\r\n", false, &h) > 0 && h.status == 100 &&
          h.body == UP_BODY_NONE);
    CHECK(parse("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", false, &h) > 0 &&
          h.body == UP_BODY_CHUNKED && h.keep);
    CHECK(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip , Chunked\r\n\r\n", false, &h) > 0 &&
          h.body == UP_BODY_CHUNKED && h.keep);
    /* chunked not last: read to the close */
    CHECK(parse("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\n", false, &h) > 0 &&
          h.body == UP_BODY_CLOSE && !h.keep);
    /* both: Transfer-Encoding wins and the connection is not used again */
    CHECK(parse("HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n", false,
                &h) > 0 &&
          h.body == UP_BODY_CHUNKED && !h.keep);
    /* no length at all: until the close */
    CHECK(parse("HTTP/1.1 200 OK\r\n\r\n", false, &h) > 0 && h.body == UP_BODY_CLOSE && !h.keep);
    CHECK(parse("HTTP/1.1 200 OK\r\nconnection: Keep-Alive, close\r\ncontent-length: 0\r\n\r\n",
                false, &h) > 0 &&
          !h.keep);
    CHECK(parse("HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n", false, &h) > 0 && !h.keep);
    CHECK(parse("HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n", false,
                &h) > 0 &&
          h.keep);
    /* the same length twice is one length; two different ones are refused */
    CHECK(parse("HTTP/1.1 200 OK\r\ncontent-length: 7\r\ncontent-length:  7 \r\n\r\n", false, &h) >
              0 &&
          h.length == 7);
    CHECK_INT_EQ(
        parse("HTTP/1.1 200 OK\r\ncontent-length: 7\r\ncontent-length: 8\r\n\r\n", false, &h), -1);
    CHECK_INT_EQ(parse("HTTP/1.1 200 OK\r\ncontent-length: 7, 7\r\n\r\n", false, &h), -1);
    CHECK_INT_EQ(parse("HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n", false, &h), -1);
    CHECK_INT_EQ(parse("HTTP/1.1 200 OK\r\ncontent-length: 1234567890123456789\r\n\r\n", false, &h),
                 -1);
    CHECK_INT_EQ(parse("HTTP/1.1 200 OK\r\nx: a\r\n folded\r\n\r\n", false, &h), -1);
    CHECK_INT_EQ(parse("HTTP/1.1 099 Low\r\n\r\n", false, &h), -1);
    CHECK_INT_EQ(parse("SSH-2.0-OpenSSH\r\n\r\n", false, &h), -1);
    /* incomplete until it is too long to be a head */
    CHECK_INT_EQ(parse("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n", false, &h), -2);
    size_t big = UP_HEAD_MAX + 100;
    char *s = malloc(big + 1);
    memcpy(s, "HTTP/1.1 200 OK\r\nx: ", 20);
    memset(s + 20, 'a', big - 20);
    s[big] = '\0';
    CHECK_INT_EQ(parse(s, false, &h), -1);
    free(s);
}

/* Decode s split into pieces of step bytes: the result, the data in out. */
static int decode_split(const char *s, size_t step, char *out, size_t *outlen, size_t *used)
{
    struct up_chunked c = {0};
    size_t n = strlen(s), off = 0;
    int r = 0;
    *outlen = 0;
    char piece[128];
    while (off < n && r == 0) {
        size_t len = n - off < step ? n - off : step, got = 0;
        memcpy(piece, s + off, len);
        r = up_chunked_decode(&c, piece, &len, &got);
        if (r < 0)
            return r;
        memcpy(out + *outlen, piece, got);
        *outlen += got;
        off += len;
    }
    *used = off;
    return r;
}

TEST(chunked_decoding_at_every_split)
{
    const char *body = "5\r\nhello\r\n1A;name=\"v\"\r\nabcdefghijklmnopqrstuvwxyz\r\n"
                       "0\r\nx-trailer: 1\r\n\r\nNEXT";
    for (size_t step = 1; step <= strlen(body); step++) {
        char out[128];
        size_t outlen, used;
        CHECK_INT_EQ(decode_split(body, step, out, &outlen, &used), 1);
        CHECK_INT_EQ(outlen, 31);
        CHECK(memcmp(out, "helloabcdefghijklmnopqrstuvwxyz", 31) == 0);
        CHECK_INT_EQ(used, strlen(body) - 4); /* NEXT is not the body's */
    }
    char out[128];
    size_t outlen, used;
    /* bare LF line ends are taken, as most clients take them */
    CHECK_INT_EQ(decode_split("3\nabc\n0\n\n", 2, out, &outlen, &used), 1);
    CHECK_INT_EQ(outlen, 3);
    /* incomplete: wants more */
    CHECK_INT_EQ(decode_split("5\r\nhel", 4, out, &outlen, &used), 0);
    CHECK_INT_EQ(outlen, 3);
    /* broken framing */
    CHECK_INT_EQ(decode_split("x\r\n", 1, out, &outlen, &used), -1);
    CHECK_INT_EQ(decode_split("3\r\nabcX\r\n", 3, out, &outlen, &used), -1);
    CHECK_INT_EQ(decode_split("3\r\nabc\rX", 64, out, &outlen, &used), -1);
    CHECK_INT_EQ(decode_split("11111111111111111\r\n", 64, out, &outlen, &used), -1);
    /* a size line's extensions are bounded */
    size_t n = 5000;
    char *ext = malloc(n + 1);
    memset(ext, 'e', n);
    memcpy(ext, "1;", 2);
    ext[n] = '\0';
    struct up_chunked c = {0};
    size_t len = n, got;
    CHECK_INT_EQ(up_chunked_decode(&c, ext, &len, &got), -1);
    free(ext);
}

TEST_MAIN()

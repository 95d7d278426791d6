/* Fuzz the proxy client's wire (src/proxy/upstream_wire.c): a response head, then a chunked body
 * fed in pieces of a size the input picks. It must never crash, never write past what it was
 * given, and decode the same bytes however the body is split. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/upstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decode body (n bytes) in pieces of step: the data into out (room for n), its length in
 * *outlen; the decoder's last result. */
static int decode(const uint8_t *body, size_t n, size_t step, char *out, size_t *outlen)
{
    struct up_chunked c = {0};
    char *piece = malloc(step);
    int r = 0;
    *outlen = 0;
    for (size_t off = 0; off < n && r == 0;) {
        size_t len = n - off < step ? n - off : step, got = 0, given = len;
        memcpy(piece, body + off, len);
        r = up_chunked_decode(&c, piece, &len, &got);
        if (r < 0)
            break;
        if (got > given || len > given || (r == 0 && len != given))
            __builtin_trap();
        memcpy(out + *outlen, piece, got);
        *outlen += got;
        off += len;
    }
    free(piece);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool head_method = data[0] & 1;
    size_t step = (size_t)data[1] % 64 + 1;
    data += 2;
    size -= 2;
    struct up_head h;
    int r = up_parse_head((const char *)data, size, head_method, &h);
    if (r == -2 || r == -1)
        return 0;
    if (r <= 0 || (size_t)r > size || h.status < 100 || h.nheaders > UP_HEADERS_MAX)
        __builtin_trap();
    if (head_method && h.body != UP_BODY_NONE)
        __builtin_trap();
    if ((h.body == UP_BODY_CLOSE && h.keep) || (h.body != UP_BODY_LENGTH && h.length))
        __builtin_trap();
    if (h.body != UP_BODY_CHUNKED)
        return 0;
    const uint8_t *body = data + r;
    size_t n = size - (size_t)r, whole_len, split_len;
    char *whole = malloc(n + 1), *split = malloc(n + 1);
    int rw = decode(body, n, n ? n : 1, whole, &whole_len);
    int rs = decode(body, n, step, split, &split_len);
    /* split anywhere, the same bytes and the same end (an error may come sooner whole) */
    if (rw >= 0 && rs >= 0 &&
        (rw != rs || whole_len != split_len || memcmp(whole, split, whole_len) != 0))
        __builtin_trap();
    free(whole);
    free(split);
    return 0;
}

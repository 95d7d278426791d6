/* The server name a TLS ClientHello asks for (RFC 8446 section 4.1.2, RFC 6066 section 3), read
 * from the first bytes a sandbox sends into a CONNECT tunnel. The bytes are the sandbox's, so
 * every length is checked against what precedes it and against EGRESS_HELLO_MAX before it is
 * used, and nothing is read past len. The hello may come in several records (a client with a
 * large key share splits it); they are joined in a buffer of EGRESS_HELLO_MAX bytes on the
 * stack. */
#include "egress/egress.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

#define REC_HANDSHAKE 22
#define HS_CLIENT_HELLO 1
#define REC_MAX 16384 /* a plaintext record's most (RFC 8446 section 5.1) */
#define EXT_SERVER_NAME 0x0000
#define EXT_ECH 0xfe0d  /* encrypted_client_hello (draft-ietf-tls-esni) */
#define EXT_ESNI 0xffce /* encrypted_server_name, its draft predecessor */

struct reader {
    const uint8_t *p, *end;
};

static bool take(struct reader *r, size_t n, const uint8_t **out)
{
    if ((size_t)(r->end - r->p) < n)
        return false;
    *out = r->p;
    r->p += n;
    return true;
}

static bool u8(struct reader *r, size_t *v)
{
    const uint8_t *b;
    if (!take(r, 1, &b))
        return false;
    *v = b[0];
    return true;
}

static bool u16(struct reader *r, size_t *v)
{
    const uint8_t *b;
    if (!take(r, 2, &b))
        return false;
    *v = (size_t)b[0] << 8 | b[1];
    return true;
}

/* A vector whose length takes len_bytes (1 or 2) bytes: *out covers its contents. */
static bool vec(struct reader *r, int len_bytes, struct reader *out)
{
    size_t n;
    const uint8_t *b;
    if (!(len_bytes == 1 ? u8(r, &n) : u16(r, &n)) || !take(r, n, &b))
        return false;
    out->p = b;
    out->end = b + n;
    return true;
}

/* server_name's contents: a list of names, of which one host_name (type 0), a host name. */
static int server_name(struct reader ext, struct egress_hello *out)
{
    struct reader list;
    if (!vec(&ext, 2, &list) || ext.p != ext.end || list.p == list.end)
        return -EPROTO;
    while (list.p < list.end) {
        size_t type;
        struct reader name;
        if (!u8(&list, &type) || !vec(&list, 2, &name))
            return -EPROTO;
        if (type != 0)
            continue;
        size_t n = (size_t)(name.end - name.p);
        if (out->has_sni || n == 0 || n >= sizeof(out->sni))
            return -EPROTO;
        for (size_t i = 0; i < n; i++) {
            uint8_t ch = name.p[i];
            if (!isalnum(ch) && ch != '-' && ch != '.' && ch != '_')
                return -EPROTO;
            out->sni[i] = (char)tolower(ch);
        }
        out->sni[n] = '\0';
        out->has_sni = true;
    }
    return 0;
}

/* The ClientHello's body (after its type and length). */
static int client_hello(struct reader r, struct egress_hello *out)
{
    const uint8_t *skip;
    struct reader v, exts;
    if (!take(&r, 2 + 32, &skip)) /* legacy_version, random */
        return -EPROTO;
    if (!vec(&r, 1, &v) || v.end - v.p > 32) /* legacy_session_id */
        return -EPROTO;
    if (!vec(&r, 2, &v) || v.p == v.end || (v.end - v.p) % 2) /* cipher_suites */
        return -EPROTO;
    if (!vec(&r, 1, &v) || v.p == v.end) /* legacy_compression_methods */
        return -EPROTO;
    if (r.p == r.end) /* no extensions (TLS 1.2 allows it): no name */
        return 0;
    if (!vec(&r, 2, &exts) || r.p != r.end)
        return -EPROTO;
    bool seen_name = false;
    while (exts.p < exts.end) {
        size_t type;
        struct reader ext;
        if (!u16(&exts, &type) || !vec(&exts, 2, &ext))
            return -EPROTO;
        if (type == EXT_SERVER_NAME) {
            if (seen_name) /* an extension appears once (RFC 8446 section 4.2) */
                return -EPROTO;
            seen_name = true;
            int e = server_name(ext, out);
            if (e < 0)
                return e;
        } else if (type == EXT_ECH || type == EXT_ESNI) {
            out->ech = true;
        }
    }
    return 0;
}

int egress_hello_parse(const uint8_t *buf, size_t len, struct egress_hello *out)
{
    uint8_t msg[EGRESS_HELLO_MAX]; /* the handshake message, joined from its records */
    size_t have = 0, need = 0, off = 0;
    memset(out, 0, sizeof(*out));
    while (need == 0 || have < need) {
        if (off + 5 > len)
            return off + 5 > EGRESS_HELLO_MAX ? -EMSGSIZE : -EAGAIN;
        const uint8_t *rec = buf + off;
        size_t rlen = (size_t)rec[3] << 8 | rec[4];
        /* a handshake record, of a TLS version (3.1 to 3.4; 3.0 in some first records) */
        if (rec[0] != REC_HANDSHAKE || rec[1] != 3 || rec[2] > 4 || rlen == 0 || rlen > REC_MAX)
            return -EPROTO;
        if (off + 5 + rlen > EGRESS_HELLO_MAX)
            return -EMSGSIZE;
        if (off + 5 + rlen > len) {
            /* what has come may already show this is no ClientHello */
            if (have == 0 && len > off + 5 && rec[5] != HS_CLIENT_HELLO)
                return -EPROTO;
            return -EAGAIN;
        }
        memcpy(msg + have, rec + 5, rlen); /* have + rlen <= off + 5 + rlen <= the buffer */
        have += rlen;
        off += 5 + rlen;
        if (msg[0] != HS_CLIENT_HELLO)
            return -EPROTO;
        if (need == 0 && have >= 4) {
            need = 4 + ((size_t)msg[1] << 16 | (size_t)msg[2] << 8 | msg[3]);
            if (need + 5 > EGRESS_HELLO_MAX)
                return -EMSGSIZE;
        }
    }
    struct reader body = {msg + 4, msg + need};
    return client_hello(body, out);
}

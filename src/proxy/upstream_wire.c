/* The proxy client's wire: a response head and how its body is framed (RFC 9112, 6.3), and
 * chunked decoding (7.1). Pure: what arrives from an upstream is parsed here and nowhere else,
 * so this is what tests/fuzz/fuzz_upstream.c feeds. Its rule: anything ambiguous is refused or
 * ends the connection, since a framing read differently from the upstream would mix answers. */
#include "proxy/upstream.h"

#include <string.h>
#include <strings.h>

#include "base/util.h"

#define LINE_MAX_ 4096 /* a chunk's size line, extensions included */

/* --- head --- */

static bool name_is(const struct phr_header *h, const char *name, size_t len)
{
    return h->name_len == len && strncasecmp(h->name, name, len) == 0;
}

/* The value's comma-separated elements, each trimmed of blanks, one at a time: *at moves on. */
static bool next_element(const char *v, size_t vlen, size_t *at, const char **e, size_t *elen)
{
    size_t i = *at;
    while (i < vlen && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
        i++;
    if (i == vlen)
        return false;
    size_t start = i;
    while (i < vlen && v[i] != ',')
        i++;
    size_t end = i;
    while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\t'))
        end--;
    *e = v + start;
    *elen = end - start;
    *at = i;
    return true;
}

static bool element_is(const char *e, size_t elen, const char *word)
{
    size_t wl = strlen(word);
    return elen == wl && strncasecmp(e, word, wl) == 0;
}

/* Content-Length: digits only (blanks around them), no more than 18 of them. */
static bool parse_length(const char *v, size_t vlen, uint64_t *out)
{
    size_t i = 0, end = vlen;
    while (i < end && (v[i] == ' ' || v[i] == '\t'))
        i++;
    while (end > i && (v[end - 1] == ' ' || v[end - 1] == '\t'))
        end--;
    if (i == end || end - i > 18)
        return false;
    uint64_t n = 0;
    for (; i < end; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        n = n * 10 + (uint64_t)(v[i] - '0');
    }
    *out = n;
    return true;
}

int up_parse_head(const char *buf, size_t len, bool head_method, struct up_head *h)
{
    const char *msg;
    size_t mlen;
    size_t scan = len > UP_HEAD_MAX ? UP_HEAD_MAX : len;
    h->nheaders = UP_HEADERS_MAX;
    int r = phr_parse_response(buf, scan, &h->minor, &h->status, &msg, &mlen, h->headers,
                               &h->nheaders, 0);
    if (r == -2)
        return scan == UP_HEAD_MAX ? -1 : -2;
    if (r < 0 || h->status < 100)
        return -1;
    bool te = false, chunked = false, has_length = false, close = false, keep_alive = false;
    uint64_t length = 0;
    for (size_t i = 0; i < h->nheaders; i++) {
        const struct phr_header *hd = &h->headers[i];
        if (!hd->name) /* a folded line (obsolete): refused, as RFC 9112 5.2 allows */
            return -1;
        const char *e;
        size_t elen, at = 0;
        if (name_is(hd, "transfer-encoding", 17)) {
            te = true;
            chunked = false; /* only the last coding of the last header counts */
            while (next_element(hd->value, hd->value_len, &at, &e, &elen))
                chunked = element_is(e, elen, "chunked");
        } else if (name_is(hd, "content-length", 14)) {
            uint64_t n;
            if (!parse_length(hd->value, hd->value_len, &n) || (has_length && n != length))
                return -1;
            has_length = true;
            length = n;
        } else if (name_is(hd, "connection", 10)) {
            while (next_element(hd->value, hd->value_len, &at, &e, &elen)) {
                close |= element_is(e, elen, "close");
                keep_alive |= element_is(e, elen, "keep-alive");
            }
        }
    }
    h->keep = h->minor >= 1 ? !close : keep_alive && !close;
    h->length = 0;
    if (head_method || h->status < 200 || h->status == 204 || h->status == 304) {
        h->body = UP_BODY_NONE;
    } else if (te) {
        /* Transfer-Encoding overrides Content-Length, and a message that has both may be an
         * attempt to smuggle one: its connection is not used again */
        h->body = chunked ? UP_BODY_CHUNKED : UP_BODY_CLOSE;
        if (!chunked || has_length)
            h->keep = false;
    } else if (has_length) {
        h->body = UP_BODY_LENGTH;
        h->length = length;
    } else {
        h->body = UP_BODY_CLOSE;
        h->keep = false;
    }
    return r;
}

/* --- chunked --- */

enum {
    C_SIZE0,        /* a size's first digit */
    C_SIZE,         /* its further digits, or what ends them */
    C_EXT,          /* an extension, skipped to the end of the line */
    C_SIZE_LF,      /* the size line's LF */
    C_DATA,         /* the chunk's bytes */
    C_DATA_CR,      /* the CRLF after them */
    C_DATA_LF,      /* its LF */
    C_TRAILER,      /* the start of a trailer line, or the empty line that ends the body */
    C_TRAILER_LINE, /* a trailer field, skipped */
    C_END_LF,       /* the final LF */
    C_DONE,
};

int up_chunked_decode(struct up_chunked *c, char *buf, size_t *len, size_t *out)
{
    size_t i = 0, o = 0, n = *len;
    while (i < n && c->state != C_DONE) {
        char ch = buf[i];
        switch (c->state) {
        case C_DATA: {
            size_t take = n - i < c->left ? n - i : (size_t)c->left;
            if (o != i)
                memmove(buf + o, buf + i, take);
            o += take;
            i += take;
            c->left -= take;
            if (c->left == 0)
                c->state = C_DATA_CR;
            continue;
        }
        case C_SIZE0:
        case C_SIZE: {
            int d = hex_value((unsigned char)ch);
            if (d >= 0) {
                if (c->left > (UINT64_MAX >> 4))
                    return -1;
                c->left = c->left << 4 | (uint64_t)d;
                c->state = C_SIZE;
            } else if (c->state == C_SIZE0) {
                return -1;
            } else if (ch == ';' || ch == ' ' || ch == '\t') {
                c->state = C_EXT;
            } else if (ch == '\r') {
                c->state = C_SIZE_LF;
            } else if (ch == '\n') {
                c->state = c->left ? C_DATA : C_TRAILER;
                c->count = 0;
            } else {
                return -1;
            }
            break;
        }
        case C_EXT:
            if (ch == '\n') {
                c->state = c->left ? C_DATA : C_TRAILER;
                c->count = 0;
            }
            break;
        case C_SIZE_LF:
            if (ch != '\n')
                return -1;
            c->state = c->left ? C_DATA : C_TRAILER;
            c->count = 0;
            break;
        case C_DATA_CR:
            if (ch == '\r')
                c->state = C_DATA_LF;
            else if (ch == '\n')
                c->state = C_SIZE0;
            else
                return -1;
            break;
        case C_DATA_LF:
            if (ch != '\n')
                return -1;
            c->state = C_SIZE0;
            break;
        case C_TRAILER:
            if (ch == '\r')
                c->state = C_END_LF;
            else if (ch == '\n')
                c->state = C_DONE;
            else
                c->state = C_TRAILER_LINE;
            break;
        case C_TRAILER_LINE:
            if (ch == '\n')
                c->state = C_TRAILER;
            break;
        case C_END_LF:
            if (ch != '\n')
                return -1;
            c->state = C_DONE;
            break;
        }
        i++;
        /* a size line (its extensions) and the trailer are bounded; the data is not */
        if (c->state != C_DATA && ++c->count > (c->state >= C_TRAILER ? UP_HEAD_MAX : LINE_MAX_))
            return -1;
        if (c->state == C_SIZE0 || c->state == C_DATA)
            c->count = 0;
    }
    *out = o;
    if (c->state == C_DONE) {
        *len = i;
        return 1;
    }
    return 0;
}

/* Trusted proxies (TRUSTED_PROXIES) and the client a request came from through them. */
#include "http/peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "http/http_internal.h"

/* The longest entry worth reading: an IPv6 address in brackets with a port. */
#define ENTRY_MAX (INET6_ADDRSTRLEN + 8)

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

static void trim(const char **s, size_t *len)
{
    while (*len && blank(**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len && blank((*s)[*len - 1]))
        (*len)--;
}

/* sa as out, an IPv4-mapped IPv6 address as IPv4 (its port kept); false for other families. */
static bool normalize(const struct sockaddr *sa, struct sockaddr_storage *out)
{
    memset(out, 0, sizeof(*out));
    if (!sa)
        return false;
    if (sa->sa_family == AF_INET) {
        memcpy(out, sa, sizeof(struct sockaddr_in));
        return true;
    }
    if (sa->sa_family != AF_INET6)
        return false;
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;
    if (!IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
        memcpy(out, sa, sizeof(struct sockaddr_in6));
        return true;
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)out;
    a4->sin_family = AF_INET;
    a4->sin_port = a6->sin6_port;
    memcpy(&a4->sin_addr, a6->sin6_addr.s6_addr + 12, 4);
    return true;
}

/* s[0..len) exactly an IPv4 or (v6) an IPv6 address: out filled with port 0 (mapped made
 * IPv4). */
static bool parse_addr(const char *s, size_t len, bool v6, struct sockaddr_storage *out)
{
    char text[ENTRY_MAX + 1];
    if (len == 0 || len > ENTRY_MAX)
        return false;
    memcpy(text, s, len);
    text[len] = '\0';
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (v6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        a6->sin6_family = AF_INET6;
        if (inet_pton(AF_INET6, text, &a6->sin6_addr) != 1)
            return false;
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        a4->sin_family = AF_INET;
        if (inet_pton(AF_INET, text, &a4->sin_addr) != 1)
            return false;
    }
    return normalize((struct sockaddr *)&ss, out);
}

static bool port_ok(const char *s, size_t len)
{
    if (len == 0 || len > 5)
        return false;
    unsigned v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    return v <= 65535;
}

bool http_xff_entry(const char *s, size_t len, struct sockaddr_storage *out)
{
    trim(&s, &len);
    if (len == 0 || len > ENTRY_MAX)
        return false;
    if (s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close)
            return false;
        size_t rest = len - (size_t)(close + 1 - s);
        if (rest && (close[1] != ':' || !port_ok(close + 2, rest - 1)))
            return false;
        return parse_addr(s + 1, (size_t)(close - s - 1), true, out);
    }
    const char *colon = memchr(s, ':', len);
    if (!colon)
        return parse_addr(s, len, false, out);
    if (memchr(colon + 1, ':', len - (size_t)(colon + 1 - s)))
        return parse_addr(s, len, true, out); /* bare IPv6, no port */
    return port_ok(colon + 1, len - (size_t)(colon + 1 - s)) &&
           parse_addr(s, (size_t)(colon - s), false, out);
}

static int parse_cidr(const char *s, size_t len, struct http_cidr *out, struct err *err)
{
    const char *slash = memchr(s, '/', len);
    size_t alen = slash ? (size_t)(slash - s) : len;
    struct sockaddr_storage ss;
    bool v6 = memchr(s, ':', alen) != NULL;
    if (!parse_addr(s, alen, v6, &ss))
        goto bad;
    memset(out, 0, sizeof(*out));
    out->family = (uint8_t)ss.ss_family;
    unsigned max = ss.ss_family == AF_INET ? 32 : 128;
    if (ss.ss_family == AF_INET)
        memcpy(out->addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
    else
        memcpy(out->addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
    unsigned bits = max;
    if (slash) {
        size_t blen = len - alen - 1;
        if (blen == 0 || blen > 3)
            goto bad;
        bits = 0;
        for (size_t i = 0; i < blen; i++) {
            if (slash[1 + i] < '0' || slash[1 + i] > '9')
                goto bad;
            bits = bits * 10 + (unsigned)(slash[1 + i] - '0');
        }
        /* an IPv4-mapped range ("::ffff:10.0.0.0/104") was made IPv4 above */
        if (v6 && ss.ss_family == AF_INET) {
            if (bits < 96)
                goto bad;
            bits -= 96;
        }
        if (bits > max)
            goto bad;
    }
    out->bits = (uint8_t)bits;
    for (unsigned i = bits; i < max; i++)
        out->addr[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
    return 0;
bad:
    return err_set(err, -EINVAL,
                   "TRUSTED_PROXIES entry '%.*s' is not an IPv4 or IPv6 address or CIDR "
                   "(\"10.0.0.0/8\", \"::1\")",
                   (int)(len > 80 ? 80 : len), s);
}

int http_trust_parse(const char *text, struct http_trust *out, struct err *err)
{
    out->n = 0;
    if (!text)
        return 0;
    const char *p = text;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *s = p;
        trim(&s, &len);
        if (len) {
            if (out->n == HTTP_TRUST_MAX) {
                out->n = 0;
                return err_set(err, -EINVAL, "TRUSTED_PROXIES has more than %d entries",
                               HTTP_TRUST_MAX);
            }
            int r = parse_cidr(s, len, &out->e[out->n], err);
            if (r < 0) {
                out->n = 0;
                return r;
            }
            out->n++;
        }
        if (!e)
            return 0;
        p = e + 1;
    }
}

static bool cidr_match(const struct http_cidr *c, const uint8_t *a)
{
    unsigned full = c->bits / 8, rest = c->bits % 8;
    if (memcmp(c->addr, a, full) != 0)
        return false;
    if (!rest)
        return true;
    uint8_t mask = (uint8_t)(0xffu << (8 - rest));
    return (a[full] & mask) == c->addr[full];
}

static bool contains(const struct http_trust *t, const struct sockaddr_storage *ss)
{
    const uint8_t *a = ss->ss_family == AF_INET
                           ? (const uint8_t *)&((const struct sockaddr_in *)ss)->sin_addr
                           : ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
    for (size_t i = 0; i < t->n; i++)
        if (t->e[i].family == ss->ss_family && cidr_match(&t->e[i], a))
            return true;
    return false;
}

bool http_trust_contains(const struct http_trust *t, const struct sockaddr *sa)
{
    struct sockaddr_storage ss;
    return t->n && normalize(sa, &ss) && contains(t, &ss);
}

void http_trust_client(const struct http_trust *t, const struct sockaddr *peer,
                       const struct http_text *xff, size_t n, struct sockaddr_storage *out)
{
    if (!normalize(peer, out) || !t->n || !contains(t, out))
        return;
    size_t bytes = 0, hops = 0;
    for (size_t v = n; v-- > 0;) {
        const char *start = xff[v].base, *end = start + xff[v].len;
        for (;;) {
            const char *p = end;
            while (p > start && p[-1] != ',')
                p--;
            bytes += (size_t)(end - p) + 1;
            struct sockaddr_storage hop;
            if (bytes > HTTP_XFF_MAX_BYTES || ++hops > HTTP_XFF_MAX_HOPS ||
                !http_xff_entry(p, (size_t)(end - p), &hop))
                return;
            *out = hop;
            if (!contains(t, out))
                return;
            if (p == start)
                break;
            end = p - 1;
        }
    }
}

/* Read at start (http_peer_configure), before any request; loop thread only after that. */
static struct http_trust trusted;

int http_peer_configure(const char *list, struct err *err)
{
    return http_trust_parse(list, &trusted, err);
}

size_t http_peer_trusted_count(void)
{
    return trusted.n;
}

bool http_peer_trusted(const struct sockaddr *sa)
{
    return http_trust_contains(&trusted, sa);
}

bool http_client_addr(h2o_req_t *req, struct sockaddr_storage *out)
{
    struct sockaddr_storage peer;
    memset(out, 0, sizeof(*out));
    if (!req->conn->callbacks->get_peername ||
        !req->conn->callbacks->get_peername(req->conn, (struct sockaddr *)&peer))
        return false;
    if (!http_trust_contains(&trusted, (struct sockaddr *)&peer)) {
        normalize((struct sockaddr *)&peer, out);
        return out->ss_family != 0;
    }
    /* the request's X-Forwarded-For headers in order; past HTTP_XFF_MAX_HOPS of them the walk
     * stops anyway, so only the last ones are kept */
    struct http_text xff[HTTP_XFF_MAX_HOPS];
    size_t n = 0;
    for (size_t i = req->headers.size; i-- > 0 && n < HTTP_XFF_MAX_HOPS;) {
        const h2o_header_t *h = &req->headers.entries[i];
        if (h->name == &H2O_TOKEN_X_FORWARDED_FOR->buf)
            n++;
    }
    size_t k = n;
    for (size_t i = req->headers.size; i-- > 0 && k > 0;) {
        const h2o_header_t *h = &req->headers.entries[i];
        if (h->name == &H2O_TOKEN_X_FORWARDED_FOR->buf)
            xff[--k] = (struct http_text){h->value.base, h->value.len};
    }
    http_trust_client(&trusted, (struct sockaddr *)&peer, xff, n, out);
    return true;
}

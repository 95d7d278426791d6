/* The egress proxy's first stage (see proxy.c): the request head read (at most HEAD_MAX bytes)
 * and parsed into its target, CONNECT host:port or an absolute-form http:// URL, which is
 * rewritten to origin form (Host of the authority judged, Connection: close, no hop-by-hop or
 * Proxy-* headers). A head the proxy cannot take is answered here; a good one goes on to
 * egress_judge. */
#include "egress/proxy_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/picohttp.h"
#include "base/util.h"

/* --- head --- */

int egress_parse_authority(const char *s, size_t len, uint16_t def_port, char *host,
                           size_t host_cap, uint16_t *port)
{
    const char *end = s + len, *colon = NULL;
    const char *h = s, *he;
    if (len > 0 && s[0] == '[') {
        const char *rb = memchr(s, ']', len);
        if (!rb)
            return -1;
        h = s + 1;
        he = rb;
        if (rb + 1 < end) {
            if (rb[1] != ':')
                return -1;
            colon = rb + 1;
        }
    } else {
        colon = memrchr(s, ':', len);
        he = colon ? colon : end;
    }
    size_t hl = (size_t)(he - h);
    if (hl == 0 || hl >= host_cap)
        return -1;
    for (const char *q = h; q < he; q++)
        if (*q <= ' ' || *q == '/' || *q == '@' || *q == '\\' || *q == '%' ||
            (unsigned char)*q >= 0x7f)
            return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    for (char *q = host; *q; q++)
        if (*q >= 'A' && *q <= 'Z')
            *q = (char)(*q - 'A' + 'a');
    if (!colon) {
        if (!def_port)
            return -1;
        *port = def_port;
        return 0;
    }
    unsigned long v = 0;
    const char *q = colon + 1;
    if (q == end || end - q > 5)
        return -1;
    for (; q < end; q++) {
        if (*q < '0' || *q > '9')
            return -1;
        v = v * 10 + (unsigned long)(*q - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

static bool header_dropped(const struct phr_header *h)
{
    /* and Host, which is written from the authority judged */
    static const char *const hop[] = {"connection", "keep-alive", "te",
                                      "trailer",    "upgrade",    "host"};
    if (h->name_len >= 6 && strncasecmp(h->name, "proxy-", 6) == 0)
        return true;
    for (size_t i = 0; i < ARRAY_SIZE(hop); i++)
        if (h->name_len == strlen(hop[i]) && strncasecmp(h->name, hop[i], h->name_len) == 0)
            return true;
    return false;
}

static void append(char **buf, size_t *len, size_t cap, const void *data, size_t n)
{
    if (*len + n <= cap) {
        memcpy(*buf + *len, data, n);
        *len += n;
    }
}

/* The head is complete (hlen bytes of c->head): parse it into the target and, for an
 * absolute-form request, the rewritten head. */
static void on_head(struct conn *c, size_t hlen, const char *method, size_t mlen, const char *path,
                    size_t plen, const struct phr_header *hdrs, size_t nh)
{
    snprintf(c->method, sizeof(c->method), "%.*s", (int)(mlen < 15 ? mlen : 15), method);
    c->head_end = hlen;
    if (mlen == 7 && memcmp(method, "CONNECT", 7) == 0) {
        c->is_connect = true;
        if (egress_parse_authority(path, plen, 0, c->host, sizeof(c->host), &c->port) < 0) {
            egress_conn_answer(c, 400, "denied", "bad_request", "CONNECT takes host:port");
            return;
        }
    } else {
        static const char scheme[] = "http://";
        if (plen < sizeof(scheme) - 1 || strncasecmp(path, scheme, sizeof(scheme) - 1) != 0) {
            egress_conn_answer(
                c, 400, "denied", "bad_request",
                plen >= 8 && strncasecmp(path, "https://", 8) == 0
                    ? "https goes through CONNECT host:443"
                    : "this is a proxy: ask for an absolute http:// URL, or CONNECT host:port");
            return;
        }
        const char *auth = path + sizeof(scheme) - 1, *pend = path + plen;
        const char *slash = memchr(auth, '/', (size_t)(pend - auth));
        const char *q = memchr(auth, '?', (size_t)(pend - auth));
        const char *aend = slash && (!q || slash < q) ? slash : q ? q : pend;
        if (egress_parse_authority(auth, (size_t)(aend - auth), 80, c->host, sizeof(c->host),
                                   &c->port) < 0) {
            egress_conn_answer(c, 400, "denied", "bad_request", "the URL's host is malformed");
            return;
        }
        /* METHOD origin-form HTTP/1.1, the headers but hop-by-hop and Proxy-* ones, then
         * Host of the authority judged, Connection: close and whatever of the body came with the
         * head */
        char host[sizeof(c->host) + 16];
        bool v6 = strchr(c->host, ':') != NULL;
        int hl =
            snprintf(host, sizeof(host), "Host: %s%s%s", v6 ? "[" : "", c->host, v6 ? "]" : "");
        if (c->port != 80)
            hl += snprintf(host + hl, sizeof(host) - (size_t)hl, ":%u", (unsigned)c->port);
        size_t cap = HEAD_MAX + 64 + (size_t)hl + (c->head_len - hlen), len = 0;
        c->forward = xmalloc(cap);
        append(&c->forward, &len, cap, method, mlen);
        append(&c->forward, &len, cap, " ", 1);
        if (aend == pend || *aend == '?')
            append(&c->forward, &len, cap, "/", 1);
        append(&c->forward, &len, cap, aend, (size_t)(pend - aend));
        append(&c->forward, &len, cap, " HTTP/1.1\r\n", 11);
        /* the name judged, whatever Host the request gave: a front shared by many sites (a CDN)
         * picks the site by Host */
        append(&c->forward, &len, cap, host, (size_t)hl);
        append(&c->forward, &len, cap, "\r\n", 2);
        for (size_t i = 0; i < nh; i++) {
            if (!hdrs[i].name || header_dropped(&hdrs[i]))
                continue;
            append(&c->forward, &len, cap, hdrs[i].name, hdrs[i].name_len);
            append(&c->forward, &len, cap, ": ", 2);
            append(&c->forward, &len, cap, hdrs[i].value, hdrs[i].value_len);
            append(&c->forward, &len, cap, "\r\n", 2);
        }
        append(&c->forward, &len, cap, "Connection: close\r\n\r\n", 21);
        append(&c->forward, &len, cap, c->head + hlen, c->head_len - hlen);
        c->forward_len = len;
        c->head_len = hlen; /* what followed is in forward */
    }
    egress_judge(c);
}

void egress_head_read(h2o_socket_t *sock, const char *err)
{
    struct conn *c = sock->data;
    size_t prev = c->head_len;
    ssize_t n;
    do
        n = read(h2o_socket_get_fd(sock), c->head + c->head_len, sizeof(c->head) - c->head_len);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n <= 0) {
        c->silent = c->head_len == 0;
        c->reason = "bad_request";
        egress_conn_finish(c);
        return;
    }
    c->head_len += (size_t)n;
    const char *method, *path;
    size_t mlen, plen, nh = 64;
    int minor;
    struct phr_header hdrs[64];
    int r = phr_parse_request(c->head, c->head_len, &method, &mlen, &path, &plen, &minor, hdrs, &nh,
                              prev);
    if (r == -2 && c->head_len < sizeof(c->head))
        return;
    h2o_socket_read_stop(sock);
    if (r == -2) {
        egress_conn_answer(c, 431, "denied", "bad_request",
                           "the request head is larger than 8 KiB");
        return;
    }
    if (r < 0) {
        egress_conn_answer(c, 400, "denied", "bad_request", "malformed request");
        return;
    }
    on_head(c, (size_t)r, method, mlen, path, plen, hdrs, nh);
}

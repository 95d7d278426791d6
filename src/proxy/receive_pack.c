/* Receive-pack request bodies, the pkt-line side: the command list, read the way git's
 * receive-pack reads it (read_head_info), so that the proxy judges the same commands the server
 * will run, and the refusal git's client reads back. The packfile after the commands is
 * pack_walk.c's. Its rule: the body is hostile; every length is checked before it is used. */
#include "proxy/receive_pack.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/util.h"

#define HEXSZ 40
#define PKT_MAX 65520 /* git's LARGE_PACKET_MAX: receive-pack refuses longer pkt-lines */

/* --- object ids --- */

bool rp_is_lower_hex(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* An id as the protocol carries it. SHA-256 ids get their own message: they are well formed,
 * just not something this parser handles. */
static int check_id(const unsigned char *s, size_t n, struct err *err)
{
    if (n == HEXSZ && rp_is_lower_hex(s, n))
        return 0;
    bool hex = true;
    for (size_t i = 0; i < n && hex; i++)
        hex = hex_value((unsigned char)s[i]) >= 0;
    if (n == 64 && hex)
        return err_set(err, -EINVAL,
                       "object id '%.64s' is SHA-256: only SHA-1 repositories are supported",
                       (const char *)s);
    return err_set(err, -EINVAL, "object id is not 40 lowercase hex digits");
}

/* --- the command list --- */

/* One pkt-line at *pos: 1 with its payload in *line and *n, 0 for a flush-pkt, or -EINVAL. The
 * delim and response-end packets (0001, 0002) belong to protocol v2, which push does not use. */
static int pkt_next(const unsigned char *buf, size_t len, size_t *pos, const unsigned char **line,
                    size_t *n, struct err *err)
{
    if (len - *pos < 4)
        return err_set(err, -EINVAL, "pkt-line at byte %zu is truncated", *pos);
    size_t plen = 0;
    for (int i = 0; i < 4; i++) {
        int v = hex_value((unsigned char)buf[*pos + i]);
        if (v < 0)
            return err_set(err, -EINVAL, "pkt-line at byte %zu has no hex length", *pos);
        plen = plen << 4 | (size_t)v;
    }
    if (plen == 0) {
        *pos += 4;
        return 0;
    }
    if (plen < 4 || plen > PKT_MAX)
        return err_set(err, -EINVAL, "pkt-line at byte %zu has length %zu", *pos, plen);
    if (plen > len - *pos)
        return err_set(err, -EINVAL, "pkt-line at byte %zu is truncated", *pos);
    *line = buf + *pos + 4;
    *n = plen - 4;
    *pos += plen;
    return 1;
}

static const char ref_forbidden[] = "~^:?*[\\";

/* Roughly git check-ref-format, and printable ASCII only: the proxy matches these names against
 * rules and shows them to people. */
static int check_ref(const unsigned char *s, size_t n, struct err *err)
{
    if (n > RP_REF_MAX)
        return err_set(err, -EINVAL, "ref name is longer than %d bytes", RP_REF_MAX);
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] >= 0x7f || strchr(ref_forbidden, s[i]))
            return err_set(err, -EINVAL, "ref name has the forbidden byte 0x%02x", s[i]);
    const char *r = (const char *)s;
    int rn = (int)n;
    if (n < 6 || memcmp(s, "refs/", 5) != 0)
        return err_set(err, -EINVAL, "ref '%.*s' is not under refs/", rn, r);
    if (memmem(s, n, "..", 2) || memmem(s, n, "@{", 2) || s[n - 1] == '.' || s[n - 1] == '/')
        return err_set(err, -EINVAL, "ref '%.*s' is not a valid ref name", rn, r);
    for (size_t i = 0; i < n;) {
        const unsigned char *slash = memchr(s + i, '/', n - i);
        size_t end = slash ? (size_t)(slash - s) : n;
        if (end == i || s[i] == '.' || (end - i >= 5 && memcmp(s + end - 5, ".lock", 5) == 0))
            return err_set(err, -EINVAL, "ref '%.*s' has an invalid component", rn, r);
        i = end + 1;
    }
    return 0;
}

/* "<old> <new> <ref>", without capabilities or newline. */
static int add_command(const unsigned char *s, size_t n, struct rp_request *out, struct err *err)
{
    if (out->ncmds == RP_COMMANDS_MAX)
        return err_set(err, -E2BIG, "push has more than %d commands", RP_COMMANDS_MAX);
    const unsigned char *sp1 = memchr(s, ' ', n);
    const unsigned char *sp2 = sp1 ? memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - s)) : NULL;
    if (!sp2)
        return err_set(err, -EINVAL, "command %zu is not '<old> <new> <ref>'", out->ncmds + 1);
    const unsigned char *ref = sp2 + 1;
    size_t oldn = (size_t)(sp1 - s), newn = (size_t)(sp2 - sp1 - 1), refn = n - (size_t)(ref - s);
    int r = check_id(s, oldn, err);
    if (r == 0)
        r = check_id(sp1 + 1, newn, err);
    if (r == 0)
        r = check_ref(ref, refn, err);
    if (r < 0)
        return err_wrap(err, "command %zu", out->ncmds + 1);
    struct rp_command *c = &out->cmds[out->ncmds++];
    memcpy(c->old_id, s, HEXSZ);
    c->old_id[HEXSZ] = '\0';
    memcpy(c->new_id, sp1 + 1, HEXSZ);
    c->new_id[HEXSZ] = '\0';
    memcpy(c->ref, ref, refn);
    c->ref[refn] = '\0';
    return 0;
}

/* The value of capability `name` in a space-separated list ("name" or "name=value"), as git's
 * parse_feature_value finds it: the value (empty for a bare name) or NULL when absent. */
static const unsigned char *cap_find(const unsigned char *caps, size_t n, const char *name,
                                     size_t *vlen)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < n;) {
        const unsigned char *sp = memchr(caps + i, ' ', n - i);
        size_t end = sp ? (size_t)(sp - caps) : n;
        if (end - i >= nl && memcmp(caps + i, name, nl) == 0) {
            if (end - i == nl) {
                *vlen = 0;
                return caps + end;
            }
            if (caps[i + nl] == '=') {
                *vlen = end - i - nl - 1;
                return caps + i + nl + 1;
            }
        }
        i = end + 1;
    }
    return NULL;
}

static int read_caps(const unsigned char *caps, size_t n, bool *options, struct rp_request *out,
                     struct err *err)
{
    const unsigned char *nul = memchr(caps, '\0', n); /* receive-pack reads them as a C string */
    if (nul)
        n = (size_t)(nul - caps);
    size_t vn;
    if (cap_find(caps, n, "push-options", &vn))
        *options = true;
    if (cap_find(caps, n, "report-status", &vn) || cap_find(caps, n, "report-status-v2", &vn))
        out->report_status = true;
    if (cap_find(caps, n, "side-band-64k", &vn))
        out->side_band = true;
    const unsigned char *fmt = cap_find(caps, n, "object-format", &vn);
    if (fmt && !(vn == 4 && memcmp(fmt, "sha1", 4) == 0))
        return err_set(err, -EINVAL,
                       "object-format is not sha1: only SHA-1 repositories are supported");
    return 0;
}

/* The pkt-lines of a push certificate up to "push-cert-end\n", appended to cert: 0 then, 1 when a
 * flush-pkt ends it instead (which ends the command list too, as in receive-pack), or -EINVAL. */
static int read_cert(const unsigned char *buf, size_t len, size_t *pos, unsigned char *cert,
                     size_t *certlen, struct err *err)
{
    for (;;) {
        const unsigned char *line;
        size_t n;
        int r = pkt_next(buf, len, pos, &line, &n, err);
        if (r <= 0)
            return r < 0 ? r : 1;
        const unsigned char *nul = memchr(line, '\0', n); /* a C string to receive-pack too */
        if (nul)
            n = (size_t)(nul - line);
        if (n == 14 && memcmp(line, "push-cert-end\n", 14) == 0)
            return 0;
        memcpy(cert + *certlen, line, n);
        *certlen += n;
    }
}

static bool is_signature_start(const unsigned char *s, size_t n)
{
    static const char *const starts[] = {
        "-----BEGIN PGP SIGNATURE-----",
        "-----BEGIN PGP MESSAGE-----",
        "-----BEGIN SSH SIGNATURE-----",
        "-----BEGIN SIGNED MESSAGE-----",
    };
    for (size_t i = 0; i < ARRAY_SIZE(starts); i++) {
        size_t sl = strlen(starts[i]);
        if (n >= sl && memcmp(s, starts[i], sl) == 0)
            return true;
    }
    return false;
}

/* A certificate's commands are the lines between the blank line after its header and the last
 * line that starts a signature; receive-pack runs those, so they are the push's commands. */
static int commands_from_cert(const unsigned char *cert, size_t n, struct rp_request *out,
                              struct err *err)
{
    const unsigned char *blank = memmem(cert, n, "\n\n", 2);
    if (!blank)
        return err_set(err, -EINVAL, "push certificate has no blank line after its header");
    size_t boc = (size_t)(blank - cert) + 2, eoc = n;
    for (size_t i = 0; i < n;) {
        if (is_signature_start(cert + i, n - i))
            eoc = i;
        const unsigned char *nl = memchr(cert + i, '\n', n - i);
        i = nl ? (size_t)(nl - cert) + 1 : n;
    }
    while (boc < eoc) {
        const unsigned char *nl = memchr(cert + boc, '\n', eoc - boc);
        size_t end = nl ? (size_t)(nl - cert) : eoc;
        int r = add_command(cert + boc, end - boc, out, err);
        if (r < 0)
            return r == -E2BIG ? r : err_wrap(err, "push certificate");
        boc = nl ? end + 1 : eoc;
    }
    return 0;
}

/* "shallow <id>", which receive-pack takes before anything else on a line. */
static int shallow_line(const unsigned char *line, size_t n, struct err *err)
{
    if (n != 8 + HEXSZ || !rp_is_lower_hex(line + 8, HEXSZ))
        return err_set(err, -EINVAL, "shallow line is not 'shallow <id>'");
    return 0;
}

/* Push options are for hooks; they say nothing about what the push changes. */
static int skip_options(const unsigned char *buf, size_t len, size_t *pos, struct err *err)
{
    for (;;) {
        const unsigned char *line;
        size_t n;
        int r = pkt_next(buf, len, pos, &line, &n, err);
        if (r < 0)
            return err_wrap(err, "push options");
        if (r == 0)
            return 0;
    }
}

int rp_parse(const void *body, size_t len, struct rp_request *out, struct err *err)
{
    const unsigned char *buf = body;
    _cleanup_free_ unsigned char *cert = NULL;
    size_t pos = 0, certlen = 0;
    bool options = false, unsigned_cmds = false;
    memset(out, 0, sizeof(*out));
    for (;;) {
        const unsigned char *line;
        size_t n;
        int r = pkt_next(buf, len, &pos, &line, &n, err);
        if (r < 0)
            return r;
        if (r == 0)
            break;
        if (n && line[n - 1] == '\n')
            n--;
        if (n > 8 && memcmp(line, "shallow ", 8) == 0) {
            if ((r = shallow_line(line, n, err)) < 0)
                return r;
            continue;
        }
        const unsigned char *nul = memchr(line, '\0', n);
        size_t cmdn = nul ? (size_t)(nul - line) : n;
        if (nul && (r = read_caps(nul + 1, n - cmdn - 1, &options, out, err)) < 0)
            return r;
        if (cmdn == 9 && memcmp(line, "push-cert", 9) == 0) {
            if (!cert)
                cert = xmalloc(len); /* the certificate's lines are a part of the body */
            if ((r = read_cert(buf, len, &pos, cert, &certlen, err)) < 0)
                return r;
            if (r == 1)
                break;
            continue;
        }
        if ((r = add_command(line, cmdn, out, err)) < 0)
            return r;
        unsigned_cmds = true;
    }
    if (certlen) {
        /* receive-pack would run both lists; a client never sends both */
        if (unsigned_cmds)
            return err_set(err, -EINVAL, "push has both a certificate and unsigned commands");
        int r = commands_from_cert(cert, certlen, out, err);
        if (r < 0)
            return r;
    }
    if (out->ncmds == 0)
        return 0; /* receive-pack reads nothing more */
    if (options) {
        int r = skip_options(buf, len, &pos, err);
        if (r < 0)
            return r;
    }
    if (pos < len) {
        out->pack = buf + pos;
        out->pack_len = len - pos;
    }
    return 0;
}

/* --- refusing a push --- */

static void pkt_append(struct buf *b, const void *data, size_t n)
{
    buf_printf(b, "%04zx", n + 4);
    buf_append(b, data, n);
}

void rp_refusal(const struct rp_request *push, const char *why, struct buf *out)
{
    /* one line of printable text, within a pkt-line however many commands share it */
    char reason[512];
    size_t n = 0;
    for (; why[n] && n < sizeof(reason) - 1; n++)
        reason[n] = why[n] >= ' ' && why[n] < 0x7f ? why[n] : ' ';
    reason[n] = '\0';
    struct buf report;
    buf_init(&report, 0);
    pkt_append(&report, "unpack ok\n", 10);
    char line[RP_REF_MAX + sizeof(reason) + 8];
    for (size_t i = 0; i < push->ncmds; i++) {
        int len = snprintf(line, sizeof(line), "ng %s %s\n", push->cmds[i].ref, reason);
        pkt_append(&report, line, (size_t)len);
    }
    buf_append(&report, "0000", 4);
    if (!push->side_band) {
        buf_append(out, report.data, report.len);
    } else {
        /* band 1 carries the report, in packets of at most PKT_MAX bytes */
        for (size_t at = 0; at < report.len;) {
            size_t chunk = report.len - at < PKT_MAX - 5 ? report.len - at : PKT_MAX - 5;
            buf_printf(out, "%04zx\001", chunk + 5);
            buf_append(out, report.data + at, chunk);
            at += chunk;
        }
        buf_append(out, "0000", 4);
    }
    buf_release(&report);
}

/* Receive-pack bodies (src/proxy/receive_pack.c): requests around packs that real git makes in a
 * temporary repository (whole, deltified both ways, thin, empty), and packs built by hand for
 * what git never sends (corrupt deltas, deep chains, odd commits). With RP_CORPUS_DIR set, a few
 * of the bodies are also written there, as seeds for tests/fuzz/fuzz_receive_pack.c. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <zlib.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/util.h"
#include "harness.h"
#include "proxy/receive_pack.h"

#define ZERO "0000000000000000000000000000000000000000"
#define CAPS "report-status side-band-64k agent=git/2.39.5"
#define MAX_INFLATE (64u << 20)

/* --- a repository, and git run in it --- */

static char repo[64];

/* Run a shell command in the repository; its output (malloc'd, NUL-terminated) or NULL when it
 * fails. */
__attribute__((format(printf, 2, 3))) static char *run(size_t *n, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int len = snprintf(cmd, sizeof(cmd), "cd %s && ", repo);
    vsnprintf(cmd + len, sizeof(cmd) - (size_t)len, fmt, ap);
    va_end(ap);
    FILE *f = popen(cmd, "r");
    if (!f)
        abort();
    size_t cap = 4096, got = 0, r;
    char *out = xmalloc(cap);
    while ((r = fread(out + got, 1, cap - got - 1, f)) > 0) {
        got += r;
        if (cap - got < 2)
            out = xrealloc(out, cap *= 2);
    }
    out[got] = '\0';
    int st = pclose(f);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        free(out);
        return NULL;
    }
    if (n)
        *n = got;
    return out;
}

static void run_ok(const char *cmd)
{
    char *out = run(NULL, "%s", cmd);
    if (!out) {
        fprintf(stderr, "'%s' failed\n", cmd);
        abort();
    }
    free(out);
}

static void rev(const char *name, char id[41])
{
    char *out = run(NULL, "git rev-parse --verify -q '%s'", name);
    if (!out || strlen(out) < 40)
        abort();
    memcpy(id, out, 40);
    id[40] = '\0';
    free(out);
}

static void write_file(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", repo, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        abort();
}

/* A commit on the current branch changing file `name`, with a message that is the same long
 * text each time but for its number, so that git deltifies the commits against each other. */
static void commit(const char *name, int n, char id[41])
{
    char text[4096];
    size_t len = 0;
    len += (size_t)snprintf(text + len, sizeof(text) - len, "Change number %d\n\n", n);
    for (int i = 0; i < 30; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len,
                                "Line %d of a message that says the same in every commit.\n", i);
    write_file(".msg", text);
    char content[64];
    snprintf(content, sizeof(content), "content %d\n", n);
    write_file(name, content);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "git add '%s' && git commit -q -F .msg", name);
    run_ok(cmd);
    rev("HEAD", id);
}

/* main: a0 <- a1 <- ... <- a11, long similar messages; side: a1 <- s (a rewrite of a2 onwards);
 * orphan: o, unrelated to all. */
static char a[12][41], s_id[41], o_id[41];

static void repo_remove(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", repo);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", repo);
}

static void repo_setup(void)
{
    if (repo[0])
        return;
    snprintf(repo, sizeof(repo), "/var/tmp/rp-unit-XXXXXX");
    if (!mkdtemp(repo))
        abort();
    atexit(repo_remove);
    setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
    setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
    setenv("GIT_AUTHOR_NAME", "Test", 1);
    setenv("GIT_AUTHOR_EMAIL", "test@example.com", 1);
    setenv("GIT_COMMITTER_NAME", "Test", 1);
    setenv("GIT_COMMITTER_EMAIL", "test@example.com", 1);
    run_ok("git init -q -b main . && echo .msg > .git/info/exclude");
    for (int i = 0; i < 12; i++)
        commit("f", i, a[i]);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "git checkout -q -b side %s", a[1]);
    run_ok(cmd);
    commit("g", 100, s_id);
    run_ok("git checkout -q --orphan orphan && git rm -rq --cached . && rm -f f g");
    commit("h", 200, o_id);
    run_ok("git checkout -q -f main");
}

/* git pack-objects --revs for "new ^old" (or all of new's history when old is NULL). */
static unsigned char *pack_range(size_t *n, const char *opts, const char *new_id,
                                 const char *old_id)
{
    char *out = run(n, "printf '%%s\\n' %s %s%s | git pack-objects -q --stdout --revs %s", new_id,
                    old_id ? "^" : "", old_id ? old_id : "", opts);
    if (!out)
        abort();
    return (unsigned char *)out;
}

/* An entry of a pack as git verify-pack lists it. */
struct listed {
    char id[41], type[8], base[41];
    size_t off;
    int depth;
};

static size_t pack_list(const unsigned char *pack, size_t n, struct listed *out, size_t max)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/.git/t.pack", repo);
    FILE *f = fopen(path, "w");
    if (!f || fwrite(pack, 1, n, f) != n || fclose(f) != 0)
        abort();
    char *text =
        run(NULL, "rm -f .git/t.idx && git index-pack -o .git/t.idx .git/t.pack >/dev/null "
                  "&& git verify-pack -v .git/t.idx");
    if (!text)
        abort();
    size_t count = 0;
    for (char *line = strtok(text, "\n"); line && count < max; line = strtok(NULL, "\n")) {
        struct listed *l = &out[count];
        size_t size, packed;
        l->depth = 0;
        l->base[0] = '\0';
        int got = sscanf(line, "%40s %7s %zu %zu %zu %d %40s", l->id, l->type, &size, &packed,
                         &l->off, &l->depth, l->base);
        if (got == 5 || got == 7)
            count++;
    }
    free(text);
    return count;
}

/* --- request bodies --- */

struct body {
    unsigned char *p;
    size_t n;
};

static void put(struct body *b, const void *d, size_t n)
{
    if (!n)
        return;
    b->p = xrealloc(b->p, b->n + n + 1);
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void pkt(struct body *b, const void *d, size_t n)
{
    char hdr[8];
    snprintf(hdr, sizeof(hdr), "%04zx", n + 4);
    put(b, hdr, 4);
    put(b, d, n);
}

static void pkt_str(struct body *b, const char *s)
{
    pkt(b, s, strlen(s));
}

static void flush(struct body *b)
{
    put(b, "0000", 4);
}

static void command(struct body *b, const char *old_id, const char *new_id, const char *ref,
                    const char *caps)
{
    char line[1024];
    size_t n = (size_t)snprintf(line, sizeof(line), "%s %s %s", old_id, new_id, ref);
    if (caps) {
        line[n++] = '\0';
        n += (size_t)snprintf(line + n, sizeof(line) - n, "%s", caps);
    }
    line[n++] = '\n';
    pkt(b, line, n);
}

/* A push of one ref from old to new with the pack git would send. */
static struct body push(const char *old_id, const char *new_id, const char *opts)
{
    struct body b = {0};
    command(&b, old_id, new_id, "refs/heads/main", CAPS);
    flush(&b);
    size_t n;
    unsigned char *pack = pack_range(&n, opts, new_id, strcmp(old_id, ZERO) == 0 ? NULL : old_id);
    put(&b, pack, n);
    free(pack);
    return b;
}

static void save_seed(const char *name, const struct body *b)
{
    const char *dir = getenv("RP_CORPUS_DIR");
    if (!dir || b->n > 8192)
        return;
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fwrite(b->p, 1, b->n, f) != b->n || fclose(f) != 0)
        abort();
}

/* A hand-built pack as the body of a push from ancestor to tip. */
static void save_pack_seed(const char *name, const struct body *pack, const char *tip,
                           const char *ancestor)
{
    struct body b = {0};
    command(&b, ancestor, tip, "refs/heads/main", CAPS);
    flush(&b);
    put(&b, pack->p, pack->n);
    save_seed(name, &b);
    free(b.p);
}

static int descends(const struct rp_request *req, const char *tip, const char *ancestor)
{
    struct err err = {0};
    int r = rp_descends(req->pack, req->pack_len, tip, ancestor, MAX_INFLATE, &err);
    if (r < 0)
        fprintf(stderr, "  rp_descends: %s\n", err.msg);
    return r;
}

/* Parse a body that must parse. */
static void parse_ok(const struct body *b, struct rp_request *req)
{
    struct err err = {0};
    int r = rp_parse(b->p, b->n, req, &err);
    if (r != 0)
        CHECK_FAIL_("rp_parse: %d %s", r, err.msg);
}

static int parse_err(const struct body *b, struct err *err)
{
    struct rp_request req;
    return rp_parse(b->p, b->n, &req, err);
}

/* --- git's own packs --- */

TEST(fast_forward_descends)
{
    repo_setup();
    struct body b = push(a[10], a[11], "");
    struct rp_request req;
    parse_ok(&b, &req);
    CHECK_INT_EQ(req.ncmds, 1);
    CHECK_STR_EQ(req.cmds[0].old_id, a[10]);
    CHECK_STR_EQ(req.cmds[0].new_id, a[11]);
    CHECK_STR_EQ(req.cmds[0].ref, "refs/heads/main");
    CHECK(req.pack && req.pack_len > 32 && memcmp(req.pack, "PACK", 4) == 0);
    CHECK_INT_EQ(descends(&req, a[11], a[10]), 1);
    CHECK_INT_EQ(descends(&req, a[11], a[11]), 1);
    /* a9 is a10's parent, but a10 is not in this pack: nothing shows the link */
    CHECK_INT_EQ(descends(&req, a[11], a[9]), 0);
    CHECK_INT_EQ(descends(&req, a[10], a[11]), 0);
    save_seed("fast_forward", &b);
    free(b.p);

    b = push(a[5], a[11], "");
    parse_ok(&b, &req);
    CHECK_INT_EQ(descends(&req, a[11], a[5]), 1);
    CHECK_INT_EQ(descends(&req, a[11], a[7]), 1);
    CHECK_INT_EQ(descends(&req, a[8], a[6]), 1);
    CHECK_INT_EQ(descends(&req, a[11], a[4]), 0);
    CHECK_INT_EQ(descends(&req, a[11], s_id), 0);
    free(b.p);
}

TEST(force_pushes_do_not_descend)
{
    repo_setup();
    /* a rewrite: s branches off a1, so it does not contain a11 */
    struct body b = push(a[11], s_id, "");
    struct rp_request req;
    parse_ok(&b, &req);
    CHECK_INT_EQ(descends(&req, s_id, a[11]), 0);
    CHECK_INT_EQ(descends(&req, s_id, a[1]), 1);
    save_seed("rewrite", &b);
    free(b.p);
    /* an unrelated history */
    b = push(a[11], o_id, "");
    parse_ok(&b, &req);
    CHECK_INT_EQ(descends(&req, o_id, a[11]), 0);
    free(b.p);
}

TEST(rewind_with_an_empty_pack)
{
    repo_setup();
    struct body b = push(a[11], a[3], "");
    struct rp_request req;
    parse_ok(&b, &req);
    CHECK_INT_EQ(req.pack_len, 32); /* header and checksum, no objects */
    CHECK_INT_EQ(descends(&req, a[3], a[11]), 0);
    free(b.p);
    /* no pack at all */
    struct err err = {0};
    CHECK_INT_EQ(rp_descends(NULL, 0, a[3], a[11], MAX_INFLATE, &err), 0);
    CHECK_INT_EQ(rp_descends(NULL, 0, a[3], a[3], MAX_INFLATE, &err), 1);
}

TEST(creation_carries_the_whole_history)
{
    repo_setup();
    struct body b = push(ZERO, a[11], "");
    struct rp_request req;
    parse_ok(&b, &req);
    CHECK_STR_EQ(req.cmds[0].old_id, ZERO);
    CHECK_INT_EQ(descends(&req, a[11], a[0]), 1);
    CHECK_INT_EQ(descends(&req, a[11], ZERO), 0);
    free(b.p);
}

TEST(several_commands_and_a_delete)
{
    repo_setup();
    struct body b = {0};
    command(&b, a[10], a[11], "refs/heads/main", CAPS " atomic");
    command(&b, ZERO, a[11], "refs/tags/v1.0", NULL);
    command(&b, s_id, ZERO, "refs/heads/side", NULL);
    flush(&b);
    size_t n;
    unsigned char *pack = pack_range(&n, "", a[11], a[10]);
    put(&b, pack, n);
    free(pack);
    struct rp_request req;
    parse_ok(&b, &req);
    CHECK_INT_EQ(req.ncmds, 3);
    CHECK_STR_EQ(req.cmds[1].ref, "refs/tags/v1.0");
    CHECK_STR_EQ(req.cmds[1].old_id, ZERO);
    CHECK_STR_EQ(req.cmds[2].ref, "refs/heads/side");
    CHECK_STR_EQ(req.cmds[2].new_id, ZERO);
    CHECK_INT_EQ(req.pack_len, n);
    CHECK_INT_EQ(descends(&req, a[11], a[10]), 1);
    save_seed("several", &b);
    free(b.p);

    /* a delete alone sends no pack */
    b = (struct body){0};
    command(&b, s_id, ZERO, "refs/heads/side", CAPS);
    flush(&b);
    parse_ok(&b, &req);
    CHECK_INT_EQ(req.ncmds, 1);
    CHECK(req.pack == NULL && req.pack_len == 0);
    free(b.p);

    /* nor does a body without commands */
    b = (struct body){0};
    flush(&b);
    parse_ok(&b, &req);
    CHECK_INT_EQ(req.ncmds, 0);
    CHECK(req.pack == NULL);
    free(b.p);
}

static struct body with_options(const char *caps)
{
    struct body b = {0};
    command(&b, a[10], a[11], "refs/heads/main", caps);
    flush(&b);
    pkt_str(&b, "ci.skip\n");
    pkt_str(&b, "merge_request.create");
    flush(&b);
    size_t n;
    unsigned char *pack = pack_range(&n, "", a[11], a[10]);
    put(&b, pack, n);
    free(pack);
    return b;
}

TEST(push_options_are_skipped)
{
    repo_setup();
    struct body b = with_options(CAPS " push-options");
    struct rp_request req;
    parse_ok(&b, &req);
    CHECK(req.pack && memcmp(req.pack, "PACK", 4) == 0);
    CHECK_INT_EQ(descends(&req, a[11], a[10]), 1);
    save_seed("push_options", &b);
    free(b.p);
    /* without the capability, the options are where the pack should be */
    b = with_options(CAPS);
    parse_ok(&b, &req);
    struct err err = {0};
    CHECK_INT_EQ(rp_descends(req.pack, req.pack_len, a[11], a[10], MAX_INFLATE, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "PACK");
    free(b.p);
}

/* The first commit of a pack git stored as a delta, with the raw type of its entry. */
static int delta_commit(const unsigned char *pack, size_t n, struct listed *d)
{
    struct listed l[64];
    size_t count = pack_list(pack, n, l, 64);
    for (size_t i = 0; i < count; i++)
        if (strcmp(l[i].type, "commit") == 0 && l[i].depth > 0) {
            *d = l[i];
            return (pack[l[i].off] >> 4) & 7;
        }
    return 0;
}

TEST(deltified_commits_ofs_delta)
{
    repo_setup();
    struct body b =
        push(a[0], a[11], "--window=50 --depth=50 --no-reuse-delta --delta-base-offset");
    struct rp_request req;
    parse_ok(&b, &req);
    struct listed d;
    CHECK_INT_EQ(delta_commit(req.pack, req.pack_len, &d), 6);
    CHECK_INT_EQ(descends(&req, a[11], a[0]), 1);
    CHECK_INT_EQ(descends(&req, a[11], a[6]), 1);
    CHECK_INT_EQ(descends(&req, a[6], a[11]), 0);
    CHECK_INT_EQ(descends(&req, d.id, a[0]), 1);
    CHECK_INT_EQ(descends(&req, a[11], s_id), 0);
    save_seed("ofs_delta", &b);
    free(b.p);
}

TEST(deltified_commits_ref_delta)
{
    repo_setup();
    struct body b = push(a[0], a[11], "--window=50 --depth=50 --no-reuse-delta");
    struct rp_request req;
    parse_ok(&b, &req);
    struct listed d;
    CHECK_INT_EQ(delta_commit(req.pack, req.pack_len, &d), 7);
    CHECK_INT_EQ(descends(&req, a[11], a[0]), 1);
    CHECK_INT_EQ(descends(&req, a[11], a[6]), 1);
    CHECK_INT_EQ(descends(&req, d.id, a[0]), 1);
    CHECK_INT_EQ(descends(&req, a[6], a[11]), 0);
    save_seed("ref_delta", &b);
    free(b.p);
}

static void sha1(const void *d, size_t n, unsigned char out[20])
{
    unsigned int len = 0;
    if (!EVP_Digest(d, n, out, &len, EVP_sha1(), NULL))
        abort();
}

TEST(thin_packs)
{
    repo_setup();
    /* git's thin packs deltify trees and blobs against what the other side has; commits travel
     * whole, so the walk still works */
    static char big[8192];
    for (size_t i = 0; i + 1 < sizeof(big); i++)
        big[i] = (char)('a' + (i * 7 + i / 64) % 26);
    write_file("big", big);
    run_ok("git checkout -q -b thin main && git add big && git commit -qm big");
    big[100] = '!';
    write_file("big", big);
    run_ok("git commit -qam 'big, changed'");
    char t1[41], t0[41];
    rev("thin", t1);
    rev("thin~1", t0);
    run_ok("git checkout -q main");
    size_t n;
    unsigned char *pack = pack_range(&n, "--thin", t1, t0);
    char path[128];
    snprintf(path, sizeof(path), "%s/.git/thin.pack", repo);
    FILE *f = fopen(path, "w");
    CHECK(f && fwrite(pack, 1, n, f) == n && fclose(f) == 0);
    char *out = run(NULL, "git index-pack --stdin < .git/thin.pack 2>&1");
    CHECK(out == NULL); /* unresolved deltas: it is thin */
    free(out);
    struct err err = {0};
    CHECK_INT_EQ(rp_descends(pack, n, t1, t0, MAX_INFLATE, &err), 1);
    free(pack);

    /* a commit stored as a delta against a base that is not in the pack is unusable: drop the
     * base of a REF_DELTA commit from a pack git made and rebuild the pack around the rest */
    pack = pack_range(&n, "--window=50 --depth=50 --no-reuse-delta", a[11], a[0]);
    struct listed l[64], d = {0};
    size_t count = pack_list(pack, n, l, 64);
    for (size_t i = 0; i < count && !d.id[0]; i++)
        if (strcmp(l[i].type, "commit") == 0 && l[i].depth == 1)
            d = l[i];
    CHECK(d.id[0]);
    char parent[41], spec[64];
    snprintf(spec, sizeof(spec), "%s^", d.id);
    rev(spec, parent);
    CHECK_INT_EQ(rp_descends(pack, n, d.id, parent, MAX_INFLATE, &err), 1);
    size_t start = 0, end = 0; /* the base's entry: from its offset to the next one's */
    for (size_t i = 0; i < count; i++)
        if (strcmp(l[i].id, d.base) == 0)
            start = l[i].off;
    end = n - 20;
    for (size_t i = 0; i < count; i++)
        if (l[i].off > start && l[i].off < end)
            end = l[i].off;
    CHECK(start > 0);
    unsigned char *thin = xmalloc(n);
    memcpy(thin, pack, start);
    memcpy(thin + start, pack + end, n - 20 - end);
    size_t tn = start + (n - 20 - end);
    uint32_t objs = (uint32_t)count - 1;
    thin[8] = (unsigned char)(objs >> 24), thin[9] = (unsigned char)(objs >> 16);
    thin[10] = (unsigned char)(objs >> 8), thin[11] = (unsigned char)objs;
    sha1(thin, tn, thin + tn);
    CHECK_INT_EQ(rp_descends(thin, tn + 20, d.id, parent, MAX_INFLATE, &err), 0);
    free(thin);
    free(pack);
}

TEST(damaged_packs_are_refused)
{
    repo_setup();
    struct body b = push(a[5], a[11], "");
    struct rp_request req;
    parse_ok(&b, &req);
    const unsigned char *pack = req.pack;
    size_t n = req.pack_len;
    struct err err = {0};

    /* cut short */
    CHECK_INT_EQ(rp_descends(pack, n / 2, a[11], a[5], MAX_INFLATE, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "checksum");
    /* cut short with a checksum that matches what is left */
    unsigned char *cut = xmalloc(n);
    memcpy(cut, pack, n / 2);
    sha1(cut, n / 2, cut + n / 2);
    CHECK_INT_EQ(rp_descends(cut, n / 2 + 20, a[11], a[5], MAX_INFLATE, &err), -EINVAL);
    CHECK(strstr(err.msg, "truncated") || strstr(err.msg, "ends before"));
    free(cut);
    /* a wrong checksum */
    unsigned char *bad = xmalloc(n);
    memcpy(bad, pack, n);
    bad[n - 1] ^= 1;
    CHECK_INT_EQ(rp_descends(bad, n, a[11], a[5], MAX_INFLATE, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "checksum");
    /* a byte changed inside, checksum fixed up: zlib's own check catches it */
    memcpy(bad, pack, n);
    bad[n / 2] ^= 0x55;
    sha1(bad, n - 20, bad + n - 20);
    CHECK_INT_EQ(rp_descends(bad, n, a[11], a[5], MAX_INFLATE, &err), -EINVAL);
    /* more objects claimed than the bytes can hold */
    memcpy(bad, pack, n);
    bad[8] = 0x7f;
    sha1(bad, n - 20, bad + n - 20);
    CHECK_INT_EQ(rp_descends(bad, n, a[11], a[5], MAX_INFLATE, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "claims");
    /* version 4 */
    memcpy(bad, pack, n);
    bad[7] = 4;
    sha1(bad, n - 20, bad + n - 20);
    CHECK_INT_EQ(rp_descends(bad, n, a[11], a[5], MAX_INFLATE, &err), -EINVAL);
    free(bad);
    /* ids that are not ids */
    CHECK_INT_EQ(rp_descends(pack, n, "HEAD", a[5], MAX_INFLATE, &err), -EINVAL);
    free(b.p);
}

TEST(inflate_cap)
{
    repo_setup();
    struct body b = push(a[0], a[11], "");
    struct rp_request req;
    parse_ok(&b, &req);
    struct err err = {0};
    CHECK_INT_EQ(rp_descends(req.pack, req.pack_len, a[11], a[0], 1000, &err), -E2BIG);
    CHECK_STR_CONTAINS(err.msg, "inflates to more than 1000 bytes");
    CHECK_INT_EQ(rp_descends(req.pack, req.pack_len, a[11], a[0], 1 << 20, &err), 1);
    free(b.p);
}

/* --- the command list --- */

static void check_refused(const char *line, size_t n, int code, const char *says)
{
    struct body b = {0};
    pkt(&b, line, n);
    flush(&b);
    struct err err = {0};
    int r = parse_err(&b, &err);
    if (r != code || !strstr(err.msg, says))
        CHECK_FAIL_("'%.*s': %d '%s', wanted %d '%s'", (int)n, line, r, err.msg, code, says);
    free(b.p);
}

static void check_ref(const char *ref, bool ok)
{
    char line[512];
    int n = snprintf(line, sizeof(line), "%s %s %s", ZERO, ZERO, ref);
    struct body b = {0};
    pkt(&b, line, (size_t)n);
    flush(&b);
    struct err err = {0};
    int r = parse_err(&b, &err);
    if ((r == 0) != ok)
        CHECK_FAIL_("ref '%s': %d %s", ref, r, err.msg);
    free(b.p);
}

TEST(ids_must_be_sha1_hex)
{
    static const char good[] = "1111111111111111111111111111111111111111";
    char line[256];
    int n = snprintf(line, sizeof(line), "%s %s refs/heads/main",
                     "zz11111111111111111111111111111111111111", good);
    check_refused(line, (size_t)n, -EINVAL, "40 lowercase hex");
    n = snprintf(line, sizeof(line), "%s %s refs/heads/main", good,
                 "ABCDEF1111111111111111111111111111111111");
    check_refused(line, (size_t)n, -EINVAL, "40 lowercase hex");
    n = snprintf(line, sizeof(line), "%s1 %s refs/heads/main", good, good);
    check_refused(line, (size_t)n, -EINVAL, "40 lowercase hex");
    n = snprintf(line, sizeof(line), "%s%s %s refs/heads/main", good, "111111111111111111111111",
                 good);
    check_refused(line, (size_t)n, -EINVAL, "SHA-256");
    n = snprintf(line, sizeof(line), "%s %s refs/heads/main%cobject-format=sha256", good, good, 0);
    check_refused(line, (size_t)n, -EINVAL, "SHA-1 repositories");
    n = snprintf(line, sizeof(line), "%s %s refs/heads/main%cobject-format=sha1", good, good, 0);
    struct body b = {0};
    pkt(&b, line, (size_t)n);
    flush(&b);
    struct rp_request req;
    parse_ok(&b, &req);
    free(b.p);
    check_refused("refs/heads/main", 15, -EINVAL, "<old> <new> <ref>");
    n = snprintf(line, sizeof(line), "%s %s", good, good);
    check_refused(line, (size_t)n, -EINVAL, "<old> <new> <ref>");
}

TEST(refs_are_checked)
{
    check_ref("refs/heads/main", true);
    check_ref("refs/heads/feature/x-1.2_b", true);
    check_ref("refs/tags/v1.0", true);
    check_ref("refs/heads/a..b", false);
    check_ref("refs/heads/../../etc", false);
    check_ref("HEAD", false);
    check_ref("heads/main", false);
    check_ref("refs/", false);
    check_ref("refs/heads/x\x01", false);
    check_ref("refs/heads/x\x7f", false);
    check_ref("refs/heads/caf\xc3\xa9", false);
    check_ref("refs/heads/a b", false);
    check_ref("refs/heads/a~1", false);
    check_ref("refs/heads/a^", false);
    check_ref("refs/heads/a:b", false);
    check_ref("refs/heads/a?", false);
    check_ref("refs/heads/a*", false);
    check_ref("refs/heads/a[", false);
    check_ref("refs/heads/a\\b", false);
    check_ref("refs/heads/x.lock", false);
    check_ref("refs/heads/x.lock/y", false);
    check_ref("refs/heads/.hidden", false);
    check_ref("refs/heads//x", false);
    check_ref("refs/heads/x/", false);
    check_ref("refs/heads/x.", false);
    check_ref("refs/heads/a@{1}", false);
    char longref[300];
    memset(longref, 'x', sizeof(longref));
    memcpy(longref, "refs/heads/", 11);
    longref[RP_REF_MAX] = '\0';
    check_ref(longref, true);
    longref[RP_REF_MAX] = 'x';
    longref[RP_REF_MAX + 1] = '\0';
    check_ref(longref, false);
    /* a NUL ends the ref: what follows is capabilities */
    char line[256];
    int n = snprintf(line, sizeof(line), "%s %s refs/heads/a%c..", ZERO, ZERO, 0);
    struct body b = {0};
    pkt(&b, line, (size_t)n);
    flush(&b);
    struct rp_request req;
    parse_ok(&b, &req);
    CHECK_STR_EQ(req.cmds[0].ref, "refs/heads/a");
    free(b.p);
}

TEST(too_many_commands)
{
    struct body b = {0};
    for (int i = 0; i < RP_COMMANDS_MAX; i++) {
        char ref[64];
        snprintf(ref, sizeof(ref), "refs/heads/b%d", i);
        command(&b, ZERO, "1111111111111111111111111111111111111111", ref, i ? NULL : CAPS);
    }
    struct body full = {0};
    put(&full, b.p, b.n);
    flush(&full);
    struct rp_request req;
    parse_ok(&full, &req);
    CHECK_INT_EQ(req.ncmds, RP_COMMANDS_MAX);
    CHECK_STR_EQ(req.cmds[RP_COMMANDS_MAX - 1].ref, "refs/heads/b63");
    command(&b, ZERO, "1111111111111111111111111111111111111111", "refs/heads/one-more", NULL);
    flush(&b);
    struct err err = {0};
    CHECK_INT_EQ(parse_err(&b, &err), -E2BIG);
    CHECK_STR_CONTAINS(err.msg, "more than 64 commands");
    free(b.p);
    free(full.p);
}

TEST(pkt_lines_are_checked)
{
    static const struct {
        const char *body;
        const char *says;
    } bad[] = {
        {"", "truncated"},        {"00", "truncated"},      {"zzzz", "hex length"},
        {"0003", "length 3"},     {"0001", "length 1"},     {"0004", "<old> <new> <ref>"},
        {"0010abc", "truncated"}, {"fff1", "length 65521"}, {"0009hello", "<old> <new> <ref>"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct err err = {0};
        struct rp_request req;
        int r = rp_parse(bad[i].body, strlen(bad[i].body), &req, &err);
        if (r != -EINVAL || !strstr(err.msg, bad[i].says))
            CHECK_FAIL_("'%s': %d '%s'", bad[i].body, r, err.msg);
    }
    /* a command list without its flush-pkt */
    struct body b = {0};
    command(&b, ZERO, "1111111111111111111111111111111111111111", "refs/heads/x", CAPS);
    struct err err = {0};
    CHECK_INT_EQ(parse_err(&b, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "truncated");
    /* push options that never end */
    b.n = 0;
    command(&b, ZERO, "1111111111111111111111111111111111111111", "refs/heads/x", "push-options");
    flush(&b);
    pkt_str(&b, "an option");
    CHECK_INT_EQ(parse_err(&b, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "push options");
    free(b.p);
}

TEST(shallow_lines_are_skipped)
{
    struct body b = {0};
    pkt_str(&b, "shallow 2222222222222222222222222222222222222222\n");
    command(&b, ZERO, "1111111111111111111111111111111111111111", "refs/heads/x", CAPS);
    flush(&b);
    struct rp_request req;
    parse_ok(&b, &req);
    CHECK_INT_EQ(req.ncmds, 1);
    free(b.p);
    b = (struct body){0};
    pkt_str(&b, "shallow 22222\n");
    flush(&b);
    struct err err = {0};
    CHECK_INT_EQ(parse_err(&b, &err), -EINVAL);
    free(b.p);
}

static struct body signed_push(const char *cmds_before)
{
    struct body b = {0};
    if (cmds_before)
        command(&b, ZERO, "1111111111111111111111111111111111111111", cmds_before, CAPS);
    static const char first[] = "push-cert\0" CAPS " push-cert=1700000000-abc\n";
    pkt(&b, first, sizeof(first) - 1);
    pkt_str(&b, "certificate version 0.1\n");
    pkt_str(&b, "pusher Test <test@example.com> 1700000000 +0000\n");
    pkt_str(&b, "pushee https://example.com/o/r.git\n");
    pkt_str(&b, "nonce 1700000000-abc\n");
    pkt_str(&b, "\n");
    pkt_str(&b, "1111111111111111111111111111111111111111 "
                "2222222222222222222222222222222222222222 refs/heads/main\n");
    pkt_str(&b, ZERO " 3333333333333333333333333333333333333333 refs/tags/v2\n");
    pkt_str(&b, "-----BEGIN PGP SIGNATURE-----\n");
    pkt_str(&b, "iQEzBAABCAAdFiEE\n");
    pkt_str(&b, "-----END PGP SIGNATURE-----\n");
    pkt_str(&b, "push-cert-end\n");
    flush(&b);
    return b;
}

TEST(signed_pushes_carry_their_commands_in_the_certificate)
{
    struct body b = signed_push(NULL);
    struct rp_request req;
    parse_ok(&b, &req);
    CHECK_INT_EQ(req.ncmds, 2);
    CHECK_STR_EQ(req.cmds[0].old_id, "1111111111111111111111111111111111111111");
    CHECK_STR_EQ(req.cmds[0].new_id, "2222222222222222222222222222222222222222");
    CHECK_STR_EQ(req.cmds[0].ref, "refs/heads/main");
    CHECK_STR_EQ(req.cmds[1].ref, "refs/tags/v2");
    CHECK(req.pack == NULL);
    save_seed("push_cert", &b);
    free(b.p);

    b = signed_push("refs/heads/other");
    struct err err = {0};
    CHECK_INT_EQ(parse_err(&b, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "both a certificate and unsigned commands");
    free(b.p);

    /* a malformed command inside the certificate is as malformed as outside */
    b = (struct body){0};
    pkt_str(&b, "push-cert\n");
    pkt_str(&b, "certificate version 0.1\n\n");
    pkt_str(&b, "1111 2222 refs/heads/main\n");
    pkt_str(&b, "push-cert-end\n");
    flush(&b);
    CHECK_INT_EQ(parse_err(&b, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "push certificate");
    free(b.p);
}

/* --- packs built by hand, for what git does not send --- */

#define TREE "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

static void id_hex(const char *type, const char *content, size_t n, char out[41])
{
    char hdr[64];
    int hn = snprintf(hdr, sizeof(hdr), "%s %zu", type, n);
    unsigned char *buf = xmalloc((size_t)hn + 1 + n);
    memcpy(buf, hdr, (size_t)hn + 1);
    memcpy(buf + hn + 1, content, n);
    unsigned char raw[20];
    sha1(buf, (size_t)hn + 1 + n, raw);
    free(buf);
    for (int i = 0; i < 20; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

static char *commit_text(const char *parent, int n)
{
    return xasprintf("tree " TREE "\nparent %s\nauthor A <a@b> %d +0000\ncommitter A <a@b> %d "
                     "+0000\n\nCommit number %d, with some words to copy from its base.\n",
                     parent, n, n, n);
}

static void pack_start(struct body *b)
{
    put(b, "PACK\0\0\0\2\0\0\0\0", 12);
}

/* Append an entry: a header declaring `size` bytes, then `extra` (an OFS_DELTA distance or a
 * REF_DELTA base id), then data deflated. Returns its offset. */
static size_t pack_add_sized(struct body *b, int type, size_t size, const void *data, size_t n,
                             const void *extra, size_t extran)
{
    size_t off = b->n;
    unsigned char hdr[16];
    size_t hn = 0;
    hdr[hn] = (unsigned char)(type << 4 | (size & 15));
    size >>= 4;
    while (size) {
        hdr[hn++] |= 0x80;
        hdr[hn] = size & 0x7f;
        size >>= 7;
    }
    put(b, hdr, hn + 1);
    put(b, extra, extran);
    uLongf zn = compressBound(n);
    unsigned char *z = xmalloc(zn);
    if (compress2(z, &zn, data, n, 6) != Z_OK)
        abort();
    put(b, z, zn);
    free(z);
    return off;
}

static size_t pack_add(struct body *b, int type, const void *data, size_t n, const void *extra,
                       size_t extran)
{
    return pack_add_sized(b, type, n, data, n, extra, extran);
}

static size_t ofs_bytes(size_t dist, unsigned char out[16])
{
    unsigned char tmp[16];
    size_t pos = sizeof(tmp) - 1;
    tmp[pos] = dist & 0x7f;
    while (dist >>= 7)
        tmp[--pos] = 0x80 | (--dist & 0x7f);
    memcpy(out, tmp + pos, sizeof(tmp) - pos);
    return sizeof(tmp) - pos;
}

static void pack_finish(struct body *b, uint32_t count)
{
    b->p[8] = (unsigned char)(count >> 24), b->p[9] = (unsigned char)(count >> 16);
    b->p[10] = (unsigned char)(count >> 8), b->p[11] = (unsigned char)count;
    unsigned char sum[20];
    sha1(b->p, b->n, sum);
    put(b, sum, 20);
}

static size_t varint(size_t v, unsigned char *out)
{
    size_t n = 0;
    do {
        out[n] = v & 0x7f;
        v >>= 7;
        if (v)
            out[n] |= 0x80;
        n++;
    } while (v);
    return n;
}

/* A delta from base to target: copy their common prefix, insert the rest. */
static struct body make_delta(const char *base, const char *target)
{
    struct body d = {0};
    unsigned char tmp[16];
    size_t bn = strlen(base), tn = strlen(target), p = 0;
    put(&d, tmp, varint(bn, tmp));
    put(&d, tmp, varint(tn, tmp));
    while (p < bn && p < tn && base[p] == target[p] && p < 0xffff)
        p++;
    if (p) {
        unsigned char op[3] = {0x80 | 0x10 | 0x20, (unsigned char)(p & 0xff),
                               (unsigned char)(p >> 8)};
        put(&d, op, 3);
    }
    for (size_t i = p; i < tn; i += 127) {
        unsigned char k = (unsigned char)(tn - i < 127 ? tn - i : 127);
        put(&d, &k, 1);
        put(&d, target + i, k);
    }
    return d;
}

static int hand_descends(const struct body *pack, const char *tip, const char *ancestor,
                         struct err *err)
{
    return rp_descends(pack->p, pack->n, tip, ancestor, MAX_INFLATE, err);
}

/* A chain of `depth` OFS_DELTA commits on a whole one, each the next commit; the last one's
 * id in tip. Every commit names base as its parent. */
static struct body delta_chain(int depth, const char *base, char tip[41])
{
    struct body b = {0};
    pack_start(&b);
    char *prev = commit_text(base, 0);
    size_t prev_off = pack_add(&b, 1, prev, strlen(prev), NULL, 0);
    id_hex("commit", prev, strlen(prev), tip);
    for (int i = 1; i <= depth; i++) {
        char *next = commit_text(base, i);
        struct body d = make_delta(prev, next);
        unsigned char ofs[16];
        size_t here = b.n;
        size_t on = ofs_bytes(here - prev_off, ofs);
        prev_off = pack_add(&b, 6, d.p, d.n, ofs, on);
        id_hex("commit", next, strlen(next), tip);
        free(d.p);
        free(prev);
        prev = next;
    }
    free(prev);
    pack_finish(&b, (uint32_t)depth + 1);
    return b;
}

TEST(delta_chains_are_followed_to_a_bound)
{
    static const char base[] = "5555555555555555555555555555555555555555";
    char tip[41];
    struct err err = {0};
    struct body b = delta_chain(RP_DELTA_DEPTH_MAX, base, tip);
    CHECK_INT_EQ(hand_descends(&b, tip, base, &err), 1);
    save_pack_seed("hand_chain", &b, tip, base);
    free(b.p);
    b = delta_chain(RP_DELTA_DEPTH_MAX + 1, base, tip);
    CHECK_INT_EQ(hand_descends(&b, tip, base, &err), 0);
    free(b.p);
}

TEST(ref_delta_before_its_base)
{
    /* git writes bases first, but nothing in the format says so */
    static const char base[] = "5555555555555555555555555555555555555555";
    char *whole = commit_text(base, 1), *next = commit_text(base, 2);
    char whole_id[41], next_id[41];
    id_hex("commit", whole, strlen(whole), whole_id);
    id_hex("commit", next, strlen(next), next_id);
    unsigned char raw[20];
    for (int i = 0; i < 20; i++)
        sscanf(whole_id + 2 * i, "%2hhx", &raw[i]);
    struct body d = make_delta(whole, next);
    struct body b = {0};
    pack_start(&b);
    pack_add(&b, 7, d.p, d.n, raw, 20);
    pack_add(&b, 1, whole, strlen(whole), NULL, 0);
    pack_finish(&b, 2);
    struct err err = {0};
    CHECK_INT_EQ(hand_descends(&b, next_id, base, &err), 1);
    save_pack_seed("hand_ref_first", &b, next_id, base);
    free(b.p);

    /* the same base many times over, with two deltas against it: each resolves once */
    char *other = commit_text(base, 3);
    char other_id[41];
    id_hex("commit", other, strlen(other), other_id);
    struct body d2 = make_delta(whole, other);
    b = (struct body){0};
    pack_start(&b);
    for (int i = 0; i < 3; i++)
        pack_add(&b, 1, whole, strlen(whole), NULL, 0);
    pack_add(&b, 7, d.p, d.n, raw, 20);
    pack_add(&b, 7, d2.p, d2.n, raw, 20);
    pack_finish(&b, 5);
    CHECK_INT_EQ(hand_descends(&b, next_id, base, &err), 1);
    CHECK_INT_EQ(hand_descends(&b, other_id, base, &err), 1);
    free(b.p);
    free(d2.p);
    free(other);
    free(d.p);
    free(whole);
    free(next);
}

TEST(corrupt_deltas_are_refused)
{
    static const char base[] = "5555555555555555555555555555555555555555";
    char *whole = commit_text(base, 1);
    size_t wn = strlen(whole);
    /* what follows the base size, which is right but in the first case */
    static const struct {
        unsigned char d[8];
        size_t n;
        const char *says;
    } bad[] = {
        {{0x05, 0x80}, 2, "-byte base"},                         /* wrong base size */
        {{0x05, 0x93, 0xff, 0xff, 0x05}, 5, "corrupt"},          /* copy past the base */
        {{0x05, 0x00}, 2, "corrupt"},                            /* reserved opcode */
        {{0x05, 0x09, 'a', 'b'}, 4, "corrupt"},                  /* insert past the delta */
        {{0x02, 0x03, 'a', 'b', 'c'}, 5, "corrupt"},             /* insert past the result */
        {{0x09, 0x02, 'a', 'b'}, 4, "corrupt"},                  /* result too short */
        {{0xff, 0xff, 0xff, 0xff, 0xff}, 5, "bad sizes"},        /* unterminated size */
        {{0x05, 0x90}, 2, "corrupt"},                            /* copy missing its size */
        {{0xff, 0xff, 0xff, 0xff, 0x7f}, 5, "inflates to more"}, /* huge result */
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        unsigned char hdr[8];
        struct body delta = {0};
        put(&delta, hdr, varint(i == 0 ? wn + 1 : wn, hdr));
        put(&delta, bad[i].d, bad[i].n);
        struct body b = {0};
        pack_start(&b);
        size_t off = pack_add(&b, 1, whole, wn, NULL, 0);
        unsigned char ofs[16];
        size_t on = ofs_bytes(b.n - off, ofs);
        pack_add(&b, 6, delta.p, delta.n, ofs, on);
        pack_finish(&b, 2);
        struct err err = {0};
        int r =
            rp_descends(b.p, b.n, base, "6666666666666666666666666666666666666666", 1 << 20, &err);
        if (r >= 0 || !strstr(err.msg, bad[i].says))
            CHECK_FAIL_("case %zu: %d '%s'", i, r, err.msg);
        free(b.p);
        free(delta.p);
    }
    free(whole);
}

TEST(odd_entries_are_refused)
{
    static const char base[] = "5555555555555555555555555555555555555555";
    char *whole = commit_text(base, 1);
    size_t wn = strlen(whole);
    char id[41];
    id_hex("commit", whole, wn, id);
    struct err err = {0};

    /* an OFS_DELTA pointing before the pack, and at no entry */
    static const unsigned char dists[][2] = {{0x7f}, {0x03}};
    for (size_t i = 0; i < ARRAY_SIZE(dists); i++) {
        struct body b = {0};
        pack_start(&b);
        pack_add(&b, 1, whole, wn, NULL, 0);
        pack_add(&b, 6, "\x01\x01\x01x", 4, dists[i], 1);
        pack_finish(&b, 2);
        CHECK_INT_EQ(hand_descends(&b, id, base, &err), -EINVAL);
        CHECK_STR_CONTAINS(err.msg, "no base entry");
        free(b.p);
    }
    /* types 0 and 5 do not exist */
    for (int type = 0; type <= 5; type += 5) {
        struct body b = {0};
        pack_start(&b);
        pack_add(&b, type, whole, wn, NULL, 0);
        pack_finish(&b, 1);
        CHECK_INT_EQ(hand_descends(&b, id, base, &err), -EINVAL);
        CHECK_STR_CONTAINS(err.msg, "type");
        free(b.p);
    }
    /* a size in the header that the stream does not match, either way */
    for (int more = 0; more <= 1; more++) {
        struct body b = {0};
        pack_start(&b);
        pack_add_sized(&b, 1, more ? wn + 1 : wn - 1, whole, wn, NULL, 0);
        pack_finish(&b, 1);
        CHECK_INT_EQ(hand_descends(&b, id, base, &err), -EINVAL);
        CHECK_STR_CONTAINS(err.msg, "inflates");
        free(b.p);
    }
    /* garbage after the last object */
    struct body b = {0};
    pack_start(&b);
    pack_add(&b, 1, whole, wn, NULL, 0);
    put(&b, "junk", 4);
    pack_finish(&b, 1);
    CHECK_INT_EQ(hand_descends(&b, id, base, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "after its last object");
    free(b.p);
    /* the same commit twice, and blobs and trees around it, are fine */
    b = (struct body){0};
    pack_start(&b);
    pack_add(&b, 3, "blob", 4, NULL, 0);
    pack_add(&b, 1, whole, wn, NULL, 0);
    pack_add(&b, 2, "", 0, NULL, 0);
    pack_add(&b, 1, whole, wn, NULL, 0);
    pack_finish(&b, 4);
    CHECK_INT_EQ(hand_descends(&b, id, base, &err), 1);
    free(b.p);
    free(whole);
}

/* Commits read as git reads them: the parent lines right after the tree line, and only when
 * something follows them. */
TEST(commit_headers_read_as_git_reads_them)
{
    static const char base[] = "5555555555555555555555555555555555555555";
    static const struct {
        const char *text;
        int want;
    } cases[] = {
        {"tree " TREE "\nparent 5555555555555555555555555555555555555555\nauthor x\n", 1},
        {"tree " TREE "\nparent 5555555555555555555555555555555555555555\n", -EINVAL},
        {"tree " TREE "\nparent 5555555555555555555555555555555555555555\nx", 1},
        {"tree " TREE "\nparent 5555555555555555555555555555555555555555", 0},
        {"tree " TREE "\nparent 4444444444444444444444444444444444444444\n"
         "parent 5555555555555555555555555555555555555555\nauthor x\n",
         1},
        {"tree " TREE "\nauthor x\nparent 5555555555555555555555555555555555555555\nx\n", 0},
        {"tree " TREE "\nparent 555555555555555555555555555555555555555X\nauthor x\n", -EINVAL},
        {"tree " TREE "\nparent 5555555555555555555555555555555555555555 \nauthor x\n", -EINVAL},
        {"parent 5555555555555555555555555555555555555555\nauthor x\n", -EINVAL},
        {"tree " TREE "\n", -EINVAL},
        {"", -EINVAL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        size_t n = strlen(cases[i].text);
        char id[41];
        id_hex("commit", cases[i].text, n, id);
        struct body b = {0};
        pack_start(&b);
        pack_add(&b, 1, cases[i].text, n, NULL, 0);
        pack_finish(&b, 1);
        struct err err = {0};
        int r = hand_descends(&b, id, base, &err);
        if (r != cases[i].want)
            CHECK_FAIL_("case %zu: %d, wanted %d (%s)", i, r, cases[i].want, err.msg);
        free(b.p);
    }
}

/* --- refusals in git's words --- */

TEST(refusal_reports_each_ref_as_git_reads_it)
{
    struct body b = {0};
    command(&b, ZERO, "1111111111111111111111111111111111111111", "refs/heads/a",
            "report-status agent=git/2.39.5");
    command(&b, ZERO, "2222222222222222222222222222222222222222", "refs/tags/v1", NULL);
    flush(&b);
    struct rp_request req;
    parse_ok(&b, &req);
    CHECK(req.report_status);
    CHECK(!req.side_band);
    struct buf out;
    buf_init(&out, 0);
    rp_refusal(&req, "no\nway", &out); /* one line, whatever the reason holds */
    static const char want[] = "000eunpack ok\n"
                               "001bng refs/heads/a no way\n"
                               "001bng refs/tags/v1 no way\n"
                               "0000";
    CHECK_INT_EQ(out.len, sizeof(want) - 1);
    CHECK(memcmp(out.data, want, sizeof(want) - 1) == 0);
    buf_release(&out);
    free(b.p);

    /* with side-band-64k the report travels in band 1, then a flush */
    b = (struct body){0};
    command(&b, ZERO, "1111111111111111111111111111111111111111", "refs/heads/a",
            "report-status-v2 side-band-64k quiet");
    flush(&b);
    parse_ok(&b, &req);
    CHECK(req.report_status);
    CHECK(req.side_band);
    buf_init(&out, 0);
    rp_refusal(&req, "held back", &out);
    static const char band[] = "0035\001"
                               "000eunpack ok\n"
                               "001eng refs/heads/a held back\n"
                               "0000"
                               "0000";
    CHECK_INT_EQ(out.len, sizeof(band) - 1);
    CHECK(memcmp(out.data, band, sizeof(band) - 1) == 0);
    buf_release(&out);
    free(b.p);

    /* without the capabilities nothing is asked for */
    b = (struct body){0};
    command(&b, ZERO, "1111111111111111111111111111111111111111", "refs/heads/a", "agent=x");
    flush(&b);
    parse_ok(&b, &req);
    CHECK(!req.report_status && !req.side_band);
    free(b.p);
}

TEST_MAIN()

/* The file worker's request (src/sandbox/fsops_wire.c): what the server encodes decodes to the
 * same request, and the decoder refuses whatever the encoder would not have made. fuzz_fsreq
 * checks the same on any bytes. */
#include <errno.h>
#include <linux/filter.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sandbox/fsops.h"

TEST(worker_request_round_trip_and_refuses_damage)
{
    struct sock_filter prog[3] = {{0x20, 0, 0, 4}, {0x15, 0, 1, 62}, {0x06, 0, 0, 0x7fff0000}};
    const unsigned char data[] = {'a', 0, 'b', 0xff};
    struct fsop_worker_request w = {
        .ncg = 2,
        .cg_procs = {"/sys/fs/cgroup/memory/x/cgroup.procs", "/sys/fs/cgroup/pids/x/cgroup.procs"},
        .nfilters = 2,
        .filter = {prog, prog + 1},
        .filter_len = {3, 2},
        .op = {.kind = FSOP_WRITE,
               .path = "dir/f\0x",
               .path_len = 7,
               .cwd = "/workspace",
               .data = data,
               .data_len = sizeof(data),
               .append = true,
               .mode = -1,
               .keep = 5,
               .offset = 1ull << 40,
               .max_bytes = 77,
               .recursive = true,
               .max_entries = 9,
               .protected_paths = {"/workspace", "/tmp"}}};
    size_t len;
    char *buf = fsop_worker_encode(&w, &len);
    struct fsop_worker_request got;
    CHECK_INT_EQ(fsop_worker_decode(buf, len, &got), 0);
    CHECK_INT_EQ(got.ncg, 2);
    CHECK_STR_EQ(got.cg_procs[1], "/sys/fs/cgroup/pids/x/cgroup.procs");
    CHECK_INT_EQ(got.nfilters, 2);
    CHECK_INT_EQ(got.filter_len[0], 3);
    CHECK_INT_EQ(got.filter_len[1], 2);
    CHECK(memcmp(got.filter[0], prog, sizeof(prog)) == 0);
    CHECK(memcmp(got.filter[1], prog + 1, 2 * sizeof(prog[0])) == 0);
    CHECK_INT_EQ(got.op.kind, FSOP_WRITE);
    CHECK_INT_EQ(got.op.path_len, 7);
    CHECK(memcmp(got.op.path, "dir/f\0x", 7) == 0);
    CHECK_STR_EQ(got.op.cwd, "/workspace");
    CHECK_INT_EQ(got.op.data_len, sizeof(data));
    CHECK(memcmp(got.op.data, data, sizeof(data)) == 0);
    CHECK(got.op.append && got.op.recursive);
    CHECK_INT_EQ(got.op.mode, -1);
    CHECK_INT_EQ(got.op.keep, 5);
    CHECK(got.op.offset == 1ull << 40);
    CHECK_INT_EQ(got.op.max_bytes, 77);
    CHECK_INT_EQ(got.op.max_entries, 9);
    CHECK_STR_EQ(got.op.protected_paths[0], "/workspace");
    CHECK_STR_EQ(got.op.protected_paths[1], "/tmp");
    CHECK(got.op.protected_paths[2] == NULL);
    /* NULL strings stay NULL */
    struct fsop_worker_request list = {.op = {.kind = FSOP_LIST}};
    size_t llen;
    char *lbuf = fsop_worker_encode(&list, &llen);
    CHECK_INT_EQ(fsop_worker_decode(lbuf, llen, &got), 0);
    CHECK(got.op.path == NULL && got.op.cwd == NULL && got.op.data == NULL && got.ncg == 0);
    free(lbuf);
    /* every cut, and a byte too many, is refused */
    for (size_t n = 0; n < len; n++)
        CHECK_INT_EQ(fsop_worker_decode(buf, n, &got), -EINVAL);
    char *more = malloc(len + 1);
    memcpy(more, buf, len);
    more[len] = 0;
    CHECK_INT_EQ(fsop_worker_decode(more, len + 1, &got), -EINVAL);
    free(more);
    buf[0] ^= 1; /* the magic */
    CHECK_INT_EQ(fsop_worker_decode(buf, len, &got), -EINVAL);
    free(buf);
}

/* A request with no cgroup, no filter and NULL strings: every field at a known offset. */
#define OFF_NCG 4
#define OFF_NFILTERS 8
#define OFF_KIND 12
#define OFF_APPEND 24
#define OFF_RECURSIVE 56
#define OFF_NPROT 68
#define EMPTY_LEN 76

static void put_u32(unsigned char *buf, size_t off, uint32_t v)
{
    memcpy(buf + off, &v, sizeof(v));
}

TEST(worker_request_refuses_counts_and_values_out_of_range)
{
    struct fsop_worker_request w = {.op = {.kind = FSOP_LIST}}, got;
    size_t len;
    unsigned char *buf = fsop_worker_encode(&w, &len);
    CHECK_INT_EQ(len, EMPTY_LEN);
    CHECK_INT_EQ(fsop_worker_decode(buf, len, &got), 0);
    const struct {
        size_t off;
        uint32_t v;
    } bad[] = {
        {OFF_NCG, 5},                /* more cgroups than cg_procs holds */
        {OFF_NCG, UINT32_MAX},       /* a count that would wrap */
        {OFF_NFILTERS, 3},           /* more than two seccomp programs */
        {OFF_KIND, FSOP_DELETE + 1}, /* no such operation */
        {OFF_APPEND, 2},             /* a bool is 0 or 1 */
        {OFF_RECURSIVE, 2},
        {OFF_NPROT, FSOP_PROTECTED_MAX + 1},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        unsigned char *copy = malloc(len);
        memcpy(copy, buf, len);
        put_u32(copy, bad[i].off, bad[i].v);
        if (fsop_worker_decode(copy, len, &got) != -EINVAL)
            CHECK_FAIL_("value %u at offset %zu accepted", bad[i].v, bad[i].off);
        free(copy);
    }
    free(buf);
}

TEST(worker_request_strings_are_whole)
{
    struct fsop_worker_request w = {.op = {.kind = FSOP_READ, .cwd = "/ab"}}, got;
    size_t len;
    unsigned char *buf = fsop_worker_encode(&w, &len);
    CHECK_INT_EQ(fsop_worker_decode(buf, len, &got), 0);
    CHECK_STR_EQ(got.op.cwd, "/ab");
    unsigned char *cwd = memmem(buf, len, "/ab", 4);
    CHECK(cwd != NULL);
    /* a C string holding a NUL of its own, and one without its terminator */
    cwd[1] = '\0';
    CHECK_INT_EQ(fsop_worker_decode(buf, len, &got), -EINVAL);
    cwd[1] = 'a';
    cwd[3] = 'x';
    CHECK_INT_EQ(fsop_worker_decode(buf, len, &got), -EINVAL);
    cwd[3] = '\0';
    /* a length past the end */
    put_u32(buf, (size_t)(cwd - buf) - 4, (uint32_t)len);
    CHECK_INT_EQ(fsop_worker_decode(buf, len, &got), -EINVAL);
    free(buf);
}

TEST_MAIN()

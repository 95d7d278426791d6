/* Fuzz the receive-pack parser: arbitrary bytes as a push body must be refused or parsed without
 * crashing, a parsed body must hold well-formed commands, and its pack is walked from the first
 * command's new id to its old one. The pack is walked twice: as it is, and with its trailing
 * checksum recomputed, since the fuzzer cannot forge a SHA-1 and would otherwise never get past
 * it to the objects. A parsed body's refusal in git's words is built too. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "proxy/receive_pack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const unsigned char *pack, size_t len, const struct rp_command *c)
{
    struct err err = {0};
    int r = rp_descends(pack, len, c->new_id, c->old_id, 1 << 20, &err);
    if (r != 0 && r != 1 && r != -EINVAL && r != -E2BIG)
        __builtin_trap();
    if (r < 0 && !err.msg[0])
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rp_request req;
    struct err err = {0};
    if (rp_parse(data, size, &req, &err) != 0)
        return 0;
    if (req.ncmds > RP_COMMANDS_MAX)
        __builtin_trap();
    for (size_t i = 0; i < req.ncmds; i++) {
        const struct rp_command *c = &req.cmds[i];
        if (strlen(c->old_id) != 40 || strlen(c->new_id) != 40 ||
            strncmp(c->ref, "refs/", 5) != 0 || strstr(c->ref, ".."))
            __builtin_trap();
    }
    if (req.pack && (req.pack < data || req.pack + req.pack_len != data + size))
        __builtin_trap();
    /* the refusal git would be shown: one pkt-line stream, ending in a flush */
    struct buf answer;
    buf_init(&answer, 0);
    rp_refusal(&req, "refused\nby the fuzzer", &answer);
    if (answer.len < 4 || memcmp(answer.data + answer.len - 4, "0000", 4) != 0)
        __builtin_trap();
    buf_release(&answer);
    if (req.ncmds == 0 || !req.pack)
        return 0;
    walk(req.pack, req.pack_len, &req.cmds[0]);
    if (req.pack_len < 32)
        return 0;
    unsigned char *fixed = malloc(req.pack_len);
    if (!fixed)
        return 0;
    memcpy(fixed, req.pack, req.pack_len);
    unsigned int n = 0;
    if (EVP_Digest(fixed, req.pack_len - 20, fixed + req.pack_len - 20, &n, EVP_sha1(), NULL))
        walk(fixed, req.pack_len, &req.cmds[0]);
    free(fixed);
    return 0;
}

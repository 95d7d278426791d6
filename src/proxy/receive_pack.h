#pragma once
/* The body of a git push (POST .../git-receive-pack): the ref update commands, and whether the
 * packfile after them shows one commit to descend from another, so that the git proxy can
 * enforce push rules (which refs, fast-forward only) before the request goes upstream.
 *
 * The body comes from code in a sandbox, so both functions treat it as hostile: every length is
 * checked, the work is linear in the input (plus sorting), and what is inflated is capped. They
 * are pure (no I/O, no globals) and safe from any thread. SHA-1 repositories only. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define RP_COMMANDS_MAX 64
/* The longest ref name accepted, in bytes. */
#define RP_REF_MAX 255
/* Longer delta chains are not followed (git's default pack.depth). */
#define RP_DELTA_DEPTH_MAX 50

struct rp_command {
    char old_id[41]; /* 40 lowercase hex digits; all zeros when the ref is created */
    char new_id[41]; /* all zeros when the ref is deleted */
    char ref[RP_REF_MAX + 1];
};

struct rp_request {
    struct rp_command cmds[RP_COMMANDS_MAX];
    size_t ncmds;
    /* the client asked for a report of each ref's fate (report-status or report-status-v2),
     * and for the answer in side-band-64k packets: how git's client can be told why a push is
     * refused */
    bool report_status, side_band;
    const unsigned char *pack; /* what follows the commands (and push options): the packfile, */
    size_t pack_len;           /* pointing into the body; NULL and 0 when nothing follows */
};

/* Parse the pkt-line command list up to its flush-pkt: "<old> <new> <ref>\0<capabilities>" first,
 * "<old> <new> <ref>" after, each pkt-line possibly ending in "\n"; "shallow <id>" lines are
 * skipped; of the capabilities, report_status and side_band are kept. Commands sent inside a push
 * certificate ("push-cert" ... "push-cert-end") are read from it, as receive-pack does. When the
 * capabilities include "push-options", the option pkt-lines up to the next flush-pkt are skipped.
 * Ids must be 40 lowercase hex digits; refs must start with "refs/", be printable ASCII and pass
 * roughly what git check-ref-format checks.
 *
 * Returns 0 and fills *out (whose pack points into body; a body without commands has none, as
 * receive-pack then reads nothing more), -EINVAL with err saying what is malformed, or -E2BIG for
 * more than RP_COMMANDS_MAX commands. *out is unspecified on failure. */
int rp_parse(const void *body, size_t len, struct rp_request *out, struct err *err);

/* Whether commit `ancestor` is reachable from commit `tip` (both 40 lowercase hex digits) through
 * the parent lines of the commits that the packfile pack[0..len) carries, its own and those that
 * resolve from deltas within it. Ids are computed from the objects' contents, never taken from
 * the pack on trust. A push updating a ref from old to new is a fast-forward when
 * rp_descends(pack, len, new, old, ...) is 1.
 *
 * Returns 1 when reachable (always when tip equals ancestor), 0 when not or when the pack cannot
 * show it (no pack, tip not in it, a link missing, a delta against a base outside the pack or
 * deeper than RP_DELTA_DEPTH_MAX), -EINVAL with err when the pack is malformed (checksum, sizes,
 * zlib streams, delta instructions, commit headers), or -E2BIG when its objects and resolved
 * deltas inflate to more than inflate_max bytes. Memory used is about the commits' contents plus
 * a few dozen bytes per object in the pack. */
int rp_descends(const unsigned char *pack, size_t len, const char *tip, const char *ancestor,
                uint64_t inflate_max, struct err *err);

/* Whether s[0..n) is all lowercase hex digits, as the protocol carries object ids. */
bool rp_is_lower_hex(const unsigned char *s, size_t n);

/* The answer git-receive-pack gives a push it refuses whole, as git's client reads it: "unpack
 * ok", then "ng <ref> <why>" for each of push's commands (why made one printable line), within
 * side-band-64k packets when push->side_band. git shows each as "! [remote rejected] ... (why)".
 * Meant for a push with report_status (without it a client reads no reasons). Appended to out. */
void rp_refusal(const struct rp_request *push, const char *why, struct buf *out);

#pragma once
/* The requestState of an input-required result (SEP-2322), sealed: the server's own state for a
 * request that waits for the client's input, carried by the client between rounds. Sealed with
 * XChaCha20-Poly1305 under a server key (base/seal.h), so the client can neither read nor alter
 * it, and bound to the user, the method and the tool, prompt or resource it was issued for, with
 * an expiry. Pure: no clock, no globals; the caller passes the time. */

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/seal.h"

/* The longest requestState issued or accepted, in characters (base64url). A state that would
 * be longer is not issued (-E2BIG); a longer one from a client is refused before it is opened. */
#define MCP_REQUEST_STATE_MAX 4096

/* What a state is bound to. Strings are borrowed. */
struct mcp_state_scope {
    const char *user;   /* the principal's user id */
    const char *method; /* "tools/call", "prompts/get", "resources/read" */
    const char *name;   /* the tool or prompt name, or the resource URI */
};

/* Seal state (any JSON value, borrowed) for scope, good until now_ms + ttl_ms: *out is a
 * malloc'd NUL-terminated string. 0, or -E2BIG (err set) when it would be longer than
 * MCP_REQUEST_STATE_MAX. */
int mcp_state_seal(const unsigned char key[SEAL_KEY_BYTES], const struct mcp_state_scope *scope,
                   const json_t *state, int64_t now_ms, int64_t ttl_ms, char **out,
                   struct err *err);

/* Open text (len bytes, not necessarily NUL-terminated) sealed by mcp_state_seal for scope at
 * now_ms: *state is a new reference. Errors, each with a message a client may see:
 *   -E2BIG    longer than MCP_REQUEST_STATE_MAX
 *   -EBADMSG  not a state this server sealed with this key (altered, truncated, forged)
 *   -EPERM    sealed for another user
 *   -EXDEV    sealed for another method, tool, prompt or resource
 *   -ETIME    expired */
int mcp_state_open(const unsigned char key[SEAL_KEY_BYTES], const struct mcp_state_scope *scope,
                   const char *text, size_t len, int64_t now_ms, json_t **state, struct err *err);

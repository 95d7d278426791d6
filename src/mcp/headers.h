#pragma once
/* SEP-2243 header values of the stateless revision's Streamable HTTP: the =?base64?...?= value
 * encoding that Mcp-Name and Mcp-Param-{Name} share, and the custom headers a tool asks for with
 * an `x-mcp-header` annotation on a property of its input schema, which a client must mirror into
 * `Mcp-Param-{Name}` and the server must find equal to the argument. Pure functions of their
 * arguments, no I/O; any thread. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "mcp/mcp.h"

#define MCP_PARAM_VALUE_MAX 4096 /* bytes of one header value as sent (encoded) */
#define MCP_PARAM_DECLS_MAX 16   /* x-mcp-header annotations of one tool */
#define MCP_PARAM_PATH_MAX 4     /* properties from the root to an annotated one */
#define MCP_PARAM_NAME_MAX 63    /* characters of a {Name} and of each property on its path */

/* Decode a header value. Optional whitespace around it is dropped (RFC 9110 5.5); a value with a
 * character outside visible ASCII, space and tab is refused; a value of the form
 * =?base64?<payload>?= is decoded as strict base64 (the standard alphabet, padded to a multiple
 * of four, pad bits zero) and refused when it is not; any other value is taken as it is.
 * Returns 0 with *out (malloc'd, NUL-terminated, and it may hold NUL bytes) and *out_len;
 * -E2BIG when the value is longer than MCP_PARAM_VALUE_MAX, -EINVAL when it is refused; msg then
 * says why ("has invalid base64 ..."). */
int mcp_header_decode(const char *v, size_t len, char **out, size_t *out_len, char *msg,
                      size_t msglen);

/* One x-mcp-header annotation of an input schema. */
struct mcp_param_decl {
    char name[MCP_PARAM_NAME_MAX + 1];                     /* {Name} of Mcp-Param-{Name} */
    char path[MCP_PARAM_PATH_MAX][MCP_PARAM_NAME_MAX + 1]; /* properties from the root */
    size_t depth;                                          /* entries of path used */
};

/* The annotations of a tool's input schema, checked against SEP-2243's rules: a name that is a
 * non-empty HTTP token, unique without regard to case; on a property of type string, integer or
 * boolean; reached from the root through `properties` alone (not items, anyOf, oneOf, allOf,
 * not, if/then/else, additionalProperties or $defs). Fills decls (room for
 * MCP_PARAM_DECLS_MAX) and returns how many, or -EINVAL with msg for a schema that breaks a
 * rule or a cap. */
int mcp_param_decls(const json_t *schema, struct mcp_param_decl *decls, char *msg, size_t msglen);

/* Check a tools/call's arguments against its Mcp-Param-* headers (headers[i].name is the part
 * after the prefix, compared without regard to case). Every annotated argument present in args
 * and not null needs its header, once, with a value that decodes to the argument: a string byte
 * for byte, an integer numerically ("42.0" is 42), a boolean as "true" or "false"; a header for
 * an argument that is absent is refused too. truncated says the request carried more
 * Mcp-Param-* headers than were collected, refused whenever decls are given. Headers no
 * annotation names are ignored. Returns 0, or -EINVAL with msg ("Header mismatch: ..."). */
int mcp_param_check(const struct mcp_param_decl *decls, size_t ndecls, const json_t *args,
                    const struct mcp_header_value *headers, size_t nheaders, bool truncated,
                    char *msg, size_t msglen);

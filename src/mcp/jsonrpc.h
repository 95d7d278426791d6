#pragma once
/* JSON-RPC 2.0 envelope: classify and validate one message, and build responses. Pure functions
 * with no I/O, fuzzed by tests/fuzz/fuzz_jsonrpc.c. */

#include <jansson.h>
#include <stddef.h>

/* Standard JSON-RPC codes and the MCP-specific ones. */
enum {
    JSONRPC_PARSE_ERROR = -32700,
    JSONRPC_INVALID_REQUEST = -32600,
    JSONRPC_METHOD_NOT_FOUND = -32601,
    JSONRPC_INVALID_PARAMS = -32602,
    JSONRPC_INTERNAL_ERROR = -32603,
    MCP_RESOURCE_NOT_FOUND = -32002,
    MCP_HEADER_MISMATCH = -32020,
    MCP_MISSING_CLIENT_CAPABILITY = -32021,
    MCP_UNSUPPORTED_PROTOCOL_VERSION = -32022,
};

enum jsonrpc_kind {
    JSONRPC_REQUEST,
    JSONRPC_NOTIFICATION,
    JSONRPC_RESPONSE,
};

struct jsonrpc_msg {
    enum jsonrpc_kind kind;
    const json_t *id;     /* borrowed; string or integer for requests, NULL for notifications */
    const char *method;   /* borrowed; NULL for responses */
    const json_t *params; /* borrowed; object or NULL */
};

/* Classify v as a request, notification or response. On failure returns a JSON-RPC error code
 * (negative) and writes a reason to msg; *id_out is set to the id when it could be read, so the
 * error response can echo it. */
int jsonrpc_classify(const json_t *v, struct jsonrpc_msg *out, const json_t **id_out, char *msg,
                     size_t msglen);

/* Parse a request body. Returns the value (new reference) or NULL with a reason in msg. */
json_t *jsonrpc_parse(const char *body, size_t len, char *msg, size_t msglen);

/* Build {"jsonrpc":"2.0","id":id,"result":result}. Steals result; id is copied (NULL -> null). */
json_t *jsonrpc_result(const json_t *id, json_t *result);

/* Build {"jsonrpc":"2.0","id":id,"error":{code,message[,data]}}. Steals data (may be NULL). */
json_t *jsonrpc_error(const json_t *id, int code, const char *message, json_t *data);

/* Build a notification {"jsonrpc":"2.0","method":m,"params":params}; steals params. */
json_t *jsonrpc_notification(const char *method, json_t *params);

#include "mcp/jsonrpc.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

json_t *jsonrpc_parse(const char *body, size_t len, char *msg, size_t msglen)
{
    json_error_t e;
    json_t *v =
        json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY, &e);
    if (!v)
        snprintf(msg, msglen, "parse error at line %d column %d: %s", e.line, e.column, e.text);
    return v;
}

int jsonrpc_classify(const json_t *v, struct jsonrpc_msg *out, const json_t **id_out, char *msg,
                     size_t msglen)
{
    *id_out = NULL;
    memset(out, 0, sizeof(*out));
    if (!json_is_object(v)) {
        snprintf(msg, msglen, "a JSON-RPC message must be an object");
        return JSONRPC_INVALID_REQUEST;
    }
    const json_t *id = json_object_get(v, "id");
    if (id && (json_is_string(id) || json_is_integer(id)))
        *id_out = id;
    const json_t *ver = json_object_get(v, "jsonrpc");
    if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0) {
        snprintf(msg, msglen, "'jsonrpc' must be \"2.0\"");
        return JSONRPC_INVALID_REQUEST;
    }
    const json_t *method = json_object_get(v, "method");
    if (!method) {
        bool has_result = json_object_get(v, "result") != NULL;
        bool has_error = json_object_get(v, "error") != NULL;
        if (has_result == has_error || !*id_out) {
            snprintf(msg, msglen,
                     "a message needs a 'method', or an 'id' with 'result' or 'error'");
            return JSONRPC_INVALID_REQUEST;
        }
        out->kind = JSONRPC_RESPONSE;
        out->id = *id_out;
        return 0;
    }
    if (!json_is_string(method) || json_string_length(method) == 0) {
        snprintf(msg, msglen, "'method' must be a non-empty string");
        return JSONRPC_INVALID_REQUEST;
    }
    if (id && !*id_out) {
        snprintf(msg, msglen, "'id' must be a string or an integer");
        return JSONRPC_INVALID_REQUEST;
    }
    const json_t *params = json_object_get(v, "params");
    if (params && !json_is_object(params)) {
        snprintf(msg, msglen, "'params' must be an object");
        return JSONRPC_INVALID_REQUEST;
    }
    out->kind = id ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION;
    out->id = *id_out;
    out->method = json_string_value(method);
    out->params = params;
    return 0;
}

json_t *jsonrpc_result(const json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result",
                     result ? result : json_object());
}

json_t *jsonrpc_error(const json_t *id, int code, const char *message, json_t *data)
{
    json_t *err = json_pack("{s:i, s:s}", "code", code, "message", message);
    if (data)
        json_object_set_new(err, "data", data);
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
                     err);
}

json_t *jsonrpc_notification(const char *method, json_t *params)
{
    return json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params",
                     params ? params : json_object());
}

/* Response and header helpers shared by the routes. */
#include "http/http_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

const char *http_status_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 302: return "Found";
    case 303: return "See Other";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request"; /* nginx's: logged, never read by the client */
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    }
    return "Unknown";
}

static const char *copy_value(h2o_req_t *req, ssize_t i)
{
    if (i < 0)
        return NULL;
    /* Optional whitespace around a field value is not part of it (RFC 9110 5.5). */
    h2o_iovec_t v = req->headers.entries[i].value;
    while (v.len && (v.base[0] == ' ' || v.base[0] == '\t'))
        v.base++, v.len--;
    while (v.len && (v.base[v.len - 1] == ' ' || v.base[v.len - 1] == '\t'))
        v.len--;
    return h2o_strdup(&req->pool, v.base, v.len).base;
}

const char *http_header(h2o_req_t *req, const h2o_token_t *token)
{
    return copy_value(req, h2o_find_header(&req->headers, token, -1));
}

const char *http_header_str(h2o_req_t *req, const char *name)
{
    return copy_value(req, h2o_find_header_by_str(&req->headers, name, strlen(name), -1));
}

void http_add_header(h2o_req_t *req, const h2o_token_t *token, const char *value)
{
    h2o_iovec_t v = h2o_strdup(&req->pool, value, strlen(value));
    h2o_add_header(&req->pool, &req->res.headers, token, NULL, v.base, v.len);
}

void http_add_header_str(h2o_req_t *req, const char *name, const char *value)
{
    h2o_iovec_t n = h2o_strdup(&req->pool, name, strlen(name));
    h2o_iovec_t v = h2o_strdup(&req->pool, value, strlen(value));
    h2o_add_header_by_str(&req->pool, &req->res.headers, n.base, n.len, 0, NULL, v.base, v.len);
}

void http_respond(h2o_req_t *req, int status, const char *content_type, const char *body,
                  size_t len)
{
    req->res.status = status;
    req->res.reason = http_status_reason(status);
    if (content_type)
        http_add_header(req, H2O_TOKEN_CONTENT_TYPE, content_type);
    req->res.content_length = len;
    h2o_send_inline(req, body ? body : "", len);
}

void http_respond_error(h2o_req_t *req, int status, const char *code, const char *message)
{
    json_t *o = json_pack("{s:s, s:s}", "error", message, "code", code);
    char *text = json_dumps(o, JSON_COMPACT);
    http_respond(req, status, "application/json", text, strlen(text));
    free(text);
    json_decref(o);
}

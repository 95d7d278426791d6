/* POST /mcp (Streamable HTTP, stateless) and the retired /sse transport. */
#include "mcp/mcp_endpoint.h"

#include "http/http_internal.h"
#include "http/watch.h"
#include "mcp/forward.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "auth/auth.h"
#include "base/cleanup.h"
#include "base/json_write.h"
#include "base/log.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp.h"
#include "store/store.h"

/* The transport side of one exchange; lives in the request pool. */
struct mcp_sink {
    h2o_req_t *req;
    struct http_stream *stream;
    struct mcp_exchange *ex;
    struct http_watch watch; /* the client, until the answer ends */
    bool answered;
};

static void sink_reply(void *p, int status, const char *body, size_t len)
{
    struct mcp_sink *s = p;
    http_watch_stop(&s->watch);
    s->ex = NULL;
    s->answered = true;
    if (status == 202 && !body) {
        http_respond(s->req, 202, NULL, NULL, 0);
        return;
    }
    http_respond(s->req, status, "application/json", body, len);
}

static void sink_closed(void *p)
{
    struct mcp_sink *s = p;
    struct mcp_exchange *ex = s->ex;
    s->ex = NULL;
    if (ex)
        mcp_exchange_detach(ex);
}

static void sink_event(void *p, const char *json, size_t len)
{
    struct mcp_sink *s = p;
    if (!s->stream)
        s->stream = http_stream_start(s->req, 200, "text/event-stream", sink_closed, s);
    http_stream_write(s->stream, "event: message\ndata: ", 21);
    http_stream_write(s->stream, json, len);
    http_stream_write(s->stream, "\n\n", 2);
}

static void sink_end(void *p)
{
    struct mcp_sink *s = p;
    http_watch_stop(&s->watch);
    s->ex = NULL;
    s->answered = true;
    if (s->stream)
        http_stream_end(s->stream);
}

static void sink_dispose(void *p)
{
    struct mcp_sink *s = p;
    http_watch_stop(&s->watch);
    sink_closed(p);
}

/* The client left before the answer ended (a stream that is quiet, or no answer yet). The
 * exchange is detached as when h2o sees the connection close: a call under the stateless
 * revision is cancelled (its command killed); under older revisions, where a disconnection is
 * not a cancellation, it runs on and its answer is dropped. Then a write lets h2o see the closed
 * connection and dispose of the request. */
static void sink_gone(struct http_watch *w)
{
    struct mcp_sink *s = container_of(w, struct mcp_sink, watch);
    sink_closed(s);
    s->answered = true;
    if (s->stream)
        http_stream_end(s->stream);
    else
        http_respond(s->req, 499, NULL, NULL, 0);
}

static const struct mcp_sink_ops sink_ops = {sink_reply, sink_event, sink_end};

static void rpc_error(h2o_req_t *req, int status, int code, const char *message)
{
    json_t *e = jsonrpc_error(NULL, code, message, NULL);
    char *text = json_dumps(e, JSON_COMPACT);
    http_respond(req, status, "application/json", text, strlen(text));
    free(text);
    json_decref(e);
}

/* Does the Accept header list the media type (or a wildcard covering it)? */
static bool accepts(const char *accept, const char *type)
{
    if (!accept)
        return false;
    const char *slash = strchr(type, '/');
    size_t major = (size_t)(slash - type);
    for (const char *p = accept; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ';')
            e++;
        size_t n = (size_t)(e - p);
        while (n && p[n - 1] == ' ')
            n--;
        if ((n == strlen(type) && strncasecmp(p, type, n) == 0) ||
            (n == 3 && strncmp(p, "*/*", 3) == 0) ||
            (n == major + 2 && strncasecmp(p, type, major + 1) == 0 && p[major + 1] == '*'))
            return true;
        while (*e && *e != ',')
            e++;
        p = e;
    }
    return false;
}

/* The scope one message needs: a tools/call's tool's, the runs' for a tasks/ method (the tasks
 * are runs), else 0. */
static unsigned message_scope(const json_t *m)
{
    const char *method = json_string_value(json_object_get(m, "method"));
    const char *name = json_string_value(json_object_get(json_object_get(m, "params"), "name"));
    if (method && name && strcmp(method, "tools/call") == 0)
        return auth_tool_scope(name);
    if (method && strncmp(method, "tasks/", 6) == 0)
        return SCOPE_RUNS;
    return 0;
}

/* The scopes the body's messages need (each of a batch). Read only for tokens that lack a tool
 * scope, so a full token's request is parsed once. */
static unsigned tool_scope(h2o_req_t *req)
{
    json_t *m = json_loadb(req->entity.base, req->entity.len, 0, NULL);
    unsigned needed = 0;
    if (json_is_array(m)) {
        size_t i;
        json_t *e;
        json_array_foreach(m, i, e) needed |= message_scope(e);
    } else {
        needed = message_scope(m);
    }
    json_decref(m);
    return needed;
}

/* The request's Mcp-Param-{Name} headers (SEP-2243), in the request's pool: the protocol layer
 * checks those a tool's schema names against its arguments and ignores the rest. */
static void param_headers(h2o_req_t *req, struct mcp_request_info *info)
{
    static const char prefix[] = "mcp-param-";
    const size_t plen = sizeof(prefix) - 1;
    struct mcp_header_value *out = NULL;
    for (size_t i = 0; i < req->headers.size; i++) {
        const h2o_header_t *h = &req->headers.entries[i];
        if (h->name->len <= plen || strncasecmp(h->name->base, prefix, plen) != 0)
            continue;
        if (info->nparams == MCP_PARAM_HEADERS_MAX) {
            info->params_truncated = true;
            break;
        }
        if (!out)
            out = h2o_mem_alloc_pool(&req->pool, MCP_PARAM_HEADERS_MAX * sizeof(*out));
        out[info->nparams++] = (struct mcp_header_value){h->name->base + plen, h->name->len - plen,
                                                         h->value.base, h->value.len};
    }
    info->params = out;
}

/* Whether the body's media type is JSON and the client takes an answer of either kind; else the
 * request is answered here. */
static bool body_acceptable(h2o_req_t *req)
{
    const char *ctype = http_header(req, H2O_TOKEN_CONTENT_TYPE);
    if (!ctype || strncasecmp(ctype, "application/json", 16) != 0 ||
        (ctype[16] && ctype[16] != ';' && ctype[16] != ' ')) {
        rpc_error(req, 415, JSONRPC_INVALID_REQUEST,
                  "Unsupported Media Type: Content-Type must be application/json");
        return false;
    }
    const char *accept = http_header(req, H2O_TOKEN_ACCEPT);
    if (accept && !accepts(accept, "application/json") && !accepts(accept, "text/event-stream")) {
        rpc_error(req, 406, JSONRPC_INVALID_REQUEST,
                  "Not Acceptable: Client must accept both application/json and text/event-stream");
        return false;
    }
    return true;
}

/* The request's MCP headers into *info (borrowed from req), its principal empty. */
static void request_info(h2o_req_t *req, const char *rid, struct mcp_request_info *info)
{
    const char *accept = http_header(req, H2O_TOKEN_ACCEPT);
    *info = (struct mcp_request_info){
        .protocol_version = http_header_str(req, "mcp-protocol-version"),
        .mcp_method = http_header_str(req, "mcp-method"),
        .mcp_name = http_header_str(req, "mcp-name"),
        .accepts_sse = accepts(accept, "text/event-stream"),
        .request_id = rid,
    };
    param_headers(req, info);
}

/* Hand the body to mcp, the answer written as the exchange goes. */
static void start_exchange(struct mcp_server *mcp, h2o_req_t *req,
                           const struct mcp_request_info *info)
{
    struct mcp_sink *s = h2o_mem_alloc_shared(&req->pool, sizeof(*s), sink_dispose);
    memset(s, 0, sizeof(*s));
    s->req = req;
    struct mcp_exchange *ex =
        mcp_exchange_start(mcp, info, req->entity.base, req->entity.len, &sink_ops, s);
    if (ex && !s->answered) {
        s->ex = ex;
        http_watch_start(&s->watch, req, sink_gone);
    }
}

static int on_mcp(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    struct http_server *srv = route->srv;
    const char *rid = http_request_track(route, req);
    /* /internal/mcp: a call another node forwarded, for the user its signature names */
    bool forwarded =
        h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/internal/mcp"));
    if (!forwarded &&
        !h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/mcp"))) {
        http_respond_error(req, 404, "not_found", "no such endpoint; MCP is served at /mcp");
        return 0;
    }
    if (!forwarded && !http_check_origin(srv, req))
        return 0;
    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"))) {
        http_add_header(req, H2O_TOKEN_ALLOW, "POST");
        rpc_error(req, 405, JSONRPC_INVALID_REQUEST,
                  "Method Not Allowed: this stateless server accepts only POST on /mcp");
        return 0;
    }
    struct store_user user;
    unsigned scopes;
    if (forwarded ? !mcp_forwarded_auth(srv, req, &user, &scopes)
                  : !http_authenticate(srv, req, &user, &scopes))
        return 0;
    if (!body_acceptable(req))
        return 0;
    unsigned needed = (scopes & SCOPES_TOOLS) == SCOPES_TOOLS ? 0 : tool_scope(req);
    if (needed & ~scopes) {
        http_insufficient_scope(srv, req, needed);
        return 0;
    }
    struct mcp_request_info info;
    request_info(req, rid, &info);
    snprintf(info.principal.user_id, sizeof(info.principal.user_id), "%s", user.id);
    snprintf(info.principal.user_name, sizeof(info.principal.user_name), "%s", user.name);

    if (!forwarded && mcp_forward_call(srv, req, &user, scopes, &info))
        return 0;
    start_exchange(route->ctx, req, &info);
    return 0;
}

static int on_sse(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    http_request_track(route, req);
    char link[600];
    snprintf(link, sizeof(link), "<%s/mcp>; rel=\"alternate\"", route->srv->cfg->public_url);
    http_add_header(req, H2O_TOKEN_LINK, link);
    json_t *p = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", "about:blank", "title", "Gone",
                          "status", 410, "detail",
                          "The HTTP+SSE transport has been removed; use Streamable HTTP at /mcp",
                          "endpoint", "/mcp");
    char *text = json_dumps(p, JSON_COMPACT);
    http_respond(req, 410, "application/problem+json", text, strlen(text));
    free(text);
    json_decref(p);
    return 0;
}

/* --- bodies over MAX_REQUEST_BYTES ---
 *
 * h2o refuses a request body over its limit itself, before any handler runs: at once when the
 * Content-Length says so, else once the chunked body read so far passes it; it answers 413 with
 * a plain-text body and closes the connection, without reading further. That response goes
 * through the filters of the host's fallback path (the request was never routed), so this
 * filter turns it, for POST /mcp, into a JSON-RPC error a client can show: the limit in bytes
 * and what to do instead. The id is null: the body, which holds it, is not read. */

struct too_large_filter {
    h2o_filter_t super;
    struct http_server *srv;
};

struct replace_body {
    h2o_ostream_t super;
    h2o_iovec_t body;
    bool sent;
};

static void replace_body_send(h2o_ostream_t *self, h2o_req_t *req, h2o_iovec_t *bufs, size_t bufcnt,
                              h2o_send_state_t state)
{
    struct replace_body *o = (struct replace_body *)self;
    (void)bufs, (void)bufcnt;
    h2o_iovec_t out = o->sent ? h2o_iovec_init(NULL, 0) : o->body;
    o->sent = true;
    h2o_ostream_send_next(&o->super, req, &out, out.len ? 1 : 0, state);
}

static void too_large_setup(h2o_filter_t *self, h2o_req_t *req, h2o_ostream_t **slot)
{
    struct too_large_filter *f = (struct too_large_filter *)self;
    if (req->res.status == 413 &&
        h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/mcp"))) {
        const struct config *cfg = f->srv->cfg;
        char msg[512];
        snprintf(msg, sizeof(msg),
                 "request body too large: this server takes at most %zu bytes a request "
                 "(MAX_REQUEST_BYTES); send less in one request, e.g. write a large file in "
                 "pieces with container_file_write, at most %zu bytes of content a call, the "
                 "first replacing the file and the others with append: true",
                 cfg->max_request_bytes, cfg->file_max_bytes);
        json_t *e = jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST, msg,
                                  json_pack("{s:I, s:I}", "max_request_bytes",
                                            (json_int_t)cfg->max_request_bytes, "file_max_bytes",
                                            (json_int_t)cfg->file_max_bytes));
        size_t len;
        char *text = json_write_text(e, &len);
        json_decref(e);
        struct replace_body *o =
            (struct replace_body *)h2o_add_ostream(req, sizeof(struct replace_body), slot);
        o->super.do_send = replace_body_send;
        o->body = h2o_strdup(&req->pool, text, len);
        o->sent = false;
        free(text);
        req->res.content_length = len;
        h2o_set_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE,
                       H2O_STRLIT("application/json"), 1);
        slot = &o->super.next;
        http_conn_linger(req);
    }
    h2o_setup_next_ostream(req, slot);
}

/* --- the agents' endpoint: POST /agent/mcp on a sandbox's listeners --- */

struct agent_endpoint {
    struct mcp_server *mcp;
    mcp_agent_auth_fn auth;
    void *auth_ctx;
};

static int on_agent_mcp(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    struct agent_endpoint *ae = route->ctx;
    const char *rid = http_request_track(route, req);
    const char *sbx = http_sandbox_of(req);
    if (!sbx ||
        !h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/agent/mcp"))) {
        http_respond_error(req, 404, "not_found", "no such endpoint; agents' MCP is /agent/mcp");
        return 0;
    }
    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"))) {
        http_add_header(req, H2O_TOKEN_ALLOW, "POST");
        rpc_error(req, 405, JSONRPC_INVALID_REQUEST,
                  "Method Not Allowed: this stateless server accepts only POST");
        return 0;
    }
    struct mcp_request_info info;
    request_info(req, rid, &info);
    if (!ae->auth(ae->auth_ctx, req, sbx, info.principal.user_id, info.principal.acting_for))
        return 0;
    if (!body_acceptable(req))
        return 0;
    start_exchange(ae->mcp, req, &info);
    return 0;
}

void mcp_endpoint_register_agent(struct http_server *http, struct mcp_server *mcp,
                                 mcp_agent_auth_fn auth, void *auth_ctx)
{
    static struct agent_endpoint ae;
    ae = (struct agent_endpoint){mcp, auth, auth_ctx};
    http_add_sandbox_route(http, "/agent/mcp", "/agent/mcp", on_agent_mcp, &ae);
}

void mcp_endpoint_register(struct http_server *http, struct mcp_server *mcp)
{
    http_add_route(http, "/mcp", "/mcp", on_mcp, mcp);
    http_add_route(http, "/internal/mcp", "/internal/mcp", on_mcp, mcp);
    http_add_route(http, "/sse", "/sse", on_sse, NULL);
    struct too_large_filter *f = (struct too_large_filter *)h2o_create_filter(
        &http_server_main_host(http)->fallback_path, sizeof(struct too_large_filter));
    f->super.on_setup_ostream = too_large_setup;
    f->srv = http;
}

/* The proxy's routes: /proxy on the main listener and on the sandboxes' listeners, and the gate's
 * check of a proxy token in a request head, registered with http/ with the proxy as context. */
#include "proxy/proxy.h"

#include <string.h>

#include "http/http_internal.h"

static int on_proxy(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    http_request_track(route, req);
    if (!http_check_origin(route->srv, req))
        return 0;
    return proxy_handle(route->ctx, req, "");
}

/* On a sandbox's listeners: /proxy/<service>/..., and GitHub's API as gh addresses it (over the
 * sandbox's socket, whose connections are served as its proxy listener's are). */
static int on_sandbox_proxy(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    http_request_track(route, req);
    const char *sbx = http_sandbox_of(req);
    if (!sbx) {
        http_respond_error(req, 404, "not_found", "no such endpoint");
        return 0;
    }
    h2o_iovec_t path = req->path_normalized;
    if (path.len >= 6 && memcmp(path.base, "/proxy", 6) == 0)
        return proxy_handle(route->ctx, req, sbx);
    return proxy_handle_rest(route->ctx, req, sbx);
}

static bool head_check(void *ctx, h2o_iovec_t x_api_key, h2o_iovec_t authorization,
                       const char *listener_sandbox)
{
    return proxy_head_authorized(ctx, x_api_key, authorization, listener_sandbox);
}

void proxy_register(struct http_server *http, struct proxy *p)
{
    http_add_route(http, "/proxy", "/proxy", on_proxy, p);
    http_add_sandbox_route(http, "/proxy", "/proxy (sandbox)", on_sandbox_proxy, p);
    static const char *const rest[] = {"/repos", "/api/v3", "/graphql", "/api/graphql"};
    for (size_t i = 0; i < sizeof(rest) / sizeof(rest[0]); i++)
        http_add_sandbox_route(http, rest[i], "/repos (sandbox)", on_sandbox_proxy, p);
    http_server_set_head_check(http, head_check, p);
}

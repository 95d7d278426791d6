/* The proxy's routes: /proxy on the main listener and on the sandboxes' listeners, and the gate's
 * check of a proxy token in a request head, registered with http/ with the proxy as context. */
#include "proxy/proxy.h"

#include "http/http_internal.h"

static int on_proxy(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    http_request_track(route, req);
    if (!http_check_origin(route->srv, req))
        return 0;
    return proxy_handle(route->ctx, req, "");
}

static int on_sandbox_proxy(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    http_request_track(route, req);
    const char *sbx = http_sandbox_of(req);
    if (!sbx) {
        http_respond_error(req, 404, "not_found", "no such endpoint");
        return 0;
    }
    return proxy_handle(route->ctx, req, sbx);
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
    http_server_set_head_check(http, head_check, p);
}

/* The metadata clients discover the server by: protected resource metadata (RFC 9728) and
 * authorization server metadata (RFC 8414, also at the OpenID discovery path). */
#include "auth/auth_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static json_t *scopes_json(void)
{
    return json_pack("[sss]", "sandbox", "runs", "offline_access");
}

static json_t *resource_metadata(struct auth *a)
{
    char resource[600];
    auth_resource(a, resource, sizeof(resource));
    return json_pack("{s:s, s:[s], s:o, s:[s], s:s}", "resource", resource, "authorization_servers",
                     auth_issuer(a), "scopes_supported", scopes_json(), "bearer_methods_supported",
                     "header", "resource_name", "sandbox-mcp");
}

static json_t *server_metadata(struct auth *a)
{
    char url[700];
    json_t *m = json_object();
    json_object_set_new(m, "issuer", json_string(auth_issuer(a)));
    static const char *const endpoints[][2] = {{"authorization_endpoint", "/authorize"},
                                               {"token_endpoint", "/token"},
                                               {"registration_endpoint", "/register"},
                                               {"revocation_endpoint", "/revoke"}};
    for (size_t i = 0; i < sizeof(endpoints) / sizeof(endpoints[0]); i++) {
        snprintf(url, sizeof(url), "%s%s", auth_issuer(a), endpoints[i][1]);
        json_object_set_new(m, endpoints[i][0], json_string(url));
    }
    json_object_set_new(m, "response_types_supported", json_pack("[s]", "code"));
    json_object_set_new(m, "response_modes_supported", json_pack("[s]", "query"));
    json_object_set_new(m, "grant_types_supported",
                        json_pack("[ss]", "authorization_code", "refresh_token"));
    json_object_set_new(m, "code_challenge_methods_supported", json_pack("[s]", "S256"));
    json_t *auth = json_pack("[sss]", "none", "client_secret_post", "client_secret_basic");
    json_object_set(m, "token_endpoint_auth_methods_supported", auth);
    json_object_set_new(m, "revocation_endpoint_auth_methods_supported", auth);
    json_object_set_new(m, "scopes_supported", scopes_json());
    json_object_set_new(m, "client_id_metadata_document_supported", json_true());
    json_object_set_new(m, "authorization_response_iss_parameter_supported", json_true());
    snprintf(url, sizeof(url), "%s/account", auth_issuer(a));
    json_object_set_new(m, "service_documentation", json_string(url));
    return m;
}

int auth_on_metadata(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    struct auth *a = route->ctx;
    http_request_track(route, req);
    h2o_iovec_t p = req->path_normalized;
    json_t *body = NULL;
    if (h2o_memis(p.base, p.len, H2O_STRLIT("/.well-known/oauth-protected-resource")) ||
        h2o_memis(p.base, p.len, H2O_STRLIT("/.well-known/oauth-protected-resource/mcp")))
        body = resource_metadata(a);
    else if (h2o_memis(p.base, p.len, H2O_STRLIT("/.well-known/oauth-authorization-server")) ||
             h2o_memis(p.base, p.len, H2O_STRLIT("/.well-known/openid-configuration")))
        body = server_metadata(a);
    if (!body) {
        http_respond_error(req, 404, "not_found", "no such metadata");
        return 0;
    }
    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) &&
        !h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"))) {
        json_decref(body);
        http_add_header(req, H2O_TOKEN_ALLOW, "GET");
        http_respond_error(req, 405, "method_not_allowed", "use GET");
        return 0;
    }
    /* public documents: any web client may read them */
    http_add_header_str(req, "access-control-allow-origin", "*");
    char *text = json_dumps(body, JSON_COMPACT);
    http_add_header(req, H2O_TOKEN_CACHE_CONTROL, "public, max-age=300");
    http_respond(req, 200, "application/json", text, strlen(text));
    free(text);
    json_decref(body);
    return 0;
}

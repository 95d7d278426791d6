/* POST /register: Dynamic Client Registration (RFC 7591). Anyone may register; what they get is
 * a client_id that still needs a user's approval. Each address may register
 * OAUTH_REGISTER_PER_ADDRESS clients an hour (429 beyond); registrations no user approves are
 * forgotten after a day, and when OAUTH_CLIENTS_MAX of them are kept the oldest makes room for
 * the next (admit.c). */
#include "auth/auth_internal.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth/cimd.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"

#define REGISTER_BODY_MAX (16 * 1024)

static void reg_error(h2o_req_t *req, const char *error, const char *description)
{
    auth_json_error(req, 400, error, description);
}

static bool subset(json_t *list, const char *const *allowed, size_t n)
{
    if (!list)
        return true;
    if (!json_is_array(list))
        return false;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        bool found = false;
        for (size_t k = 0; k < n && json_is_string(v); k++)
            found |= strcmp(json_string_value(v), allowed[k]) == 0;
        if (!found)
            return false;
    }
    return true;
}

int auth_on_register(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    struct auth *a = route->ctx;
    http_request_track(route, req);
    if (!auth_post_only(req, "/register"))
        return 0;
    char peer[INET6_ADDRSTRLEN];
    auth_peer(req, peer, sizeof(peer));
    int64_t wait_s = auth_admit_wait_s(a, peer);
    if (wait_s > 0) {
        log_warn("oauth registrations-refused addr=%s per_hour=%d retry_after=%lld", peer,
                 a->conf.register_per_address, (long long)wait_s);
        char retry[24], why[160];
        snprintf(retry, sizeof(retry), "%lld", (long long)wait_s);
        snprintf(why, sizeof(why),
                 "this address registered %d clients in the last hour; try again in %lld s",
                 a->conf.register_per_address, (long long)wait_s);
        http_add_header(req, H2O_TOKEN_RETRY_AFTER, retry);
        auth_json_error(req, 429, "temporarily_unavailable", why);
        return 0;
    }
    const char *ct = http_header(req, H2O_TOKEN_CONTENT_TYPE);
    if (!ct || strncasecmp(ct, "application/json", 16) != 0) {
        reg_error(req, "invalid_client_metadata", "the body must be application/json");
        return 0;
    }
    if (req->entity.len > REGISTER_BODY_MAX) {
        reg_error(req, "invalid_client_metadata", "the registration is too large");
        return 0;
    }
    json_error_t jerr;
    json_t *m = json_loadb(req->entity.base, req->entity.len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(m)) {
        json_decref(m);
        reg_error(req, "invalid_client_metadata", "the body is not a JSON object");
        return 0;
    }
    json_t *uris = json_object_get(m, "redirect_uris");
    size_t i;
    json_t *v;
    if (!json_is_array(uris) || json_array_size(uris) == 0 ||
        json_array_size(uris) > CIMD_REDIRECT_URIS_MAX) {
        json_decref(m);
        reg_error(req, "invalid_redirect_uri", "redirect_uris must list 1 to 10 URIs");
        return 0;
    }
    struct err err = {0};
    json_array_foreach(uris, i, v)
    {
        if (!json_is_string(v)) {
            json_decref(m);
            reg_error(req, "invalid_redirect_uri", "redirect_uris must hold strings");
            return 0;
        }
        if (auth_redirect_uri_check(json_string_value(v), json_string_length(v), i, &err) < 0) {
            json_decref(m);
            reg_error(req, "invalid_redirect_uri", err.msg);
            return 0;
        }
    }
    const char *method = json_string_value(json_object_get(m, "token_endpoint_auth_method"));
    if (!method)
        method = "client_secret_basic"; /* RFC 7591's default */
    if (strcmp(method, "none") != 0 && strcmp(method, "client_secret_post") != 0 &&
        strcmp(method, "client_secret_basic") != 0) {
        json_decref(m);
        reg_error(req, "invalid_client_metadata",
                  "token_endpoint_auth_method must be none, client_secret_post or "
                  "client_secret_basic");
        return 0;
    }
    static const char *const grants[] = {"authorization_code", "refresh_token"};
    static const char *const responses[] = {"code"};
    if (!subset(json_object_get(m, "grant_types"), grants, 2) ||
        !subset(json_object_get(m, "response_types"), responses, 1)) {
        json_decref(m);
        reg_error(req, "invalid_client_metadata",
                  "only the authorization_code and refresh_token grants (response type code) "
                  "are supported");
        return 0;
    }
    const char *name = json_string_value(json_object_get(m, "client_name"));
    if (auth_admit(a, peer, &err) < 0) {
        json_decref(m);
        log_error("oauth store-failure reason=\"%s\"", err.msg);
        auth_json_error(req, 500, "server_error", "the registration could not be saved");
        return 0;
    }
    struct store_oauth_client c = {.created_at = time_now_ms()};
    id_new("cli", c.id);
    snprintf(c.kind, sizeof(c.kind), "registered");
    snprintf(c.name, sizeof(c.name), "%s", name && *name ? name : "Unnamed app");
    snprintf(c.auth_method, sizeof(c.auth_method), "%s", method);
    c.redirect_uris = json_dumps(uris, JSON_COMPACT);
    char secret[64] = "";
    if (strcmp(method, "none") != 0) {
        unsigned char raw[32];
        rand_bytes(raw, sizeof(raw));
        base64url_encode(raw, sizeof(raw), secret);
        sha256_hex(secret, strlen(secret), c.secret_hash);
    }
    if (store_oauth_client_put(a->store, &c, &err) < 0) {
        json_decref(m);
        store_oauth_client_clear(&c);
        log_error("oauth store-failure reason=\"%s\"", err.msg);
        auth_json_error(req, 500, "server_error", "the registration could not be saved");
        return 0;
    }
    json_t *out =
        json_pack("{s:s, s:I, s:s, s:O, s:s, s:[ss], s:[s]}", "client_id", c.id,
                  "client_id_issued_at", (json_int_t)(c.created_at / 1000), "client_name", c.name,
                  "redirect_uris", uris, "token_endpoint_auth_method", method, "grant_types",
                  "authorization_code", "refresh_token", "response_types", "code");
    if (secret[0]) {
        json_object_set_new(out, "client_secret", json_string(secret));
        json_object_set_new(out, "client_secret_expires_at", json_integer(0));
    }
    log_info("oauth client-registered client=%s name=\"%.100s\" auth=%s", c.id, c.name, method);
    store_oauth_client_clear(&c);
    json_decref(m);
    auth_json(req, 201, out);
    return 0;
}

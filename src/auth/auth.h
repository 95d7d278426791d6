#pragma once
/* The OAuth 2.1 authorization server (sign-in, consent, clients, codes, tokens) and the account
 * page. It registers its routes with http/ (auth_register); the token check /mcp uses stays
 * http_bearer_check() in http/, whatever issued the token. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/scopes.h"
#include "base/seal.h"

/* The scope a tool needs (0 for none). */
unsigned auth_tool_scope(const char *tool);

struct config;
struct store;
struct http_server;
struct auth;

/* The settings an operator writes for the authorization server (OAUTH_*, SIGNIN_*), read from
 * the configuration table by auth_config_load (src/auth/config.c). */
struct auth_config {
    int64_t access_ttl_s;     /* OAuth access tokens live this long */
    int64_t refresh_ttl_s;    /* refresh tokens, unless used (and so rotated) before */
    bool cimd_loopback;       /* tests only: client metadata documents on http://127.0.0.1 */
    int register_per_address; /* new clients an address (IPv4, IPv6 /64) adds an hour */
    int clients_max;          /* clients no user approved kept; the oldest make room */
    /* a rotated refresh token is honoured again this long after its rotation (0: never), at
     * most refresh_reuse_max times: parallel refreshes of one client (docs/OAUTH.md) */
    int64_t refresh_reuse_s;
    int refresh_reuse_max;
    /* Sign-in: password checks of strangers under way at once per address (IPv4 address, IPv6
     * /64) and per network (IPv4 /24, IPv6 /48); places of the check queue kept for browsers
     * and networks that signed in before; how long those are trusted. */
    unsigned signin_inflight_per_address;
    unsigned signin_inflight_per_network;
    unsigned signin_reserved_checks;
    unsigned signin_trust_days;
    unsigned signin_password_memory_mb; /* of new password hashes */
    /* client metadata document fetches under way at once: in all, asked for by one address (an
     * IPv6 /64), to one host; how long one may take; how long a failed one's error is repeated */
    int cimd_fetches, cimd_per_address, cimd_per_host;
    int64_t cimd_timeout_ms, cimd_failure_ms;
    /* Not read here: whether the account page takes notification targets on http://127.0.0.1
     * (notify_config's allow_loopback_http, which the caller copies in). */
    bool notify_loopback;
};

/* Fill ac from cfg's table and the defaults, checking each value's range: 0, or -EINVAL with
 * err naming the key and its range ("OAUTH_ACCESS_TTL '5' is not a number between 60 and
 * 86400"). notify_loopback is left false. */
int auth_config_load(const struct config *cfg, struct auth_config *ac, struct err *err);

/* The authorization server for cfg, ac and st (cfg and st borrowed for its life, ac copied).
 * Never fails. Main loop thread. */
struct auth *auth_new(const struct config *cfg, const struct auth_config *ac, struct store *st);
/* The key users' credentials are sealed with (copied; see store_credential_key_load), with
 * which the account page sets a user's own. Until it is set, the page cannot store one. */
void auth_set_credential_key(struct auth *a, const unsigned char key[SEAL_KEY_BYTES]);
/* Serve the authorization server on http: metadata, /authorize, /token, /register, /revoke,
 * /login, /logout and /account, each route with a as its context (a must outlive http). */
void auth_register(struct http_server *http, struct auth *a);
/* Free a (NULL is fine), after the server that routes to it has stopped. */
void auth_free(struct auth *a);

/* The user a browser's request is signed in as (the session cookie /login sets): true and *user
 * filled; false without a cookie, or with one unknown, signed out or expired. One store read.
 * Main loop thread. */
struct st_h2o_req_t;
struct store_user;
bool auth_session_user(struct auth *a, struct st_h2o_req_t *req, struct store_user *user);
/* For an action of a page's owner signed in (src/web/web.c): the CSRF token this browser's forms
 * carry (set as its cookie when it has none), and whether value, a form's, is that token. */
const char *auth_page_csrf(struct auth *a, struct st_h2o_req_t *req);
bool auth_page_csrf_is(struct st_h2o_req_t *req, const char *value);

#pragma once
/* The OAuth 2.1 authorization server (sign-in, consent, clients, codes, tokens) and the account
 * page. It registers its routes with http/ (auth_register); the token check /mcp uses stays
 * http_bearer_check() in http/, whatever issued the token. */

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "base/scopes.h"
#include "base/seal.h"

/* The scope a tool needs (0 for none). */
unsigned auth_tool_scope(const char *tool);

struct config;
struct store;
struct http_server;
struct auth;
/* The authorization server for cfg and st (both borrowed for its life). Never fails. Main loop
 * thread. */
struct auth *auth_new(const struct config *cfg, struct store *st);
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

#pragma once
/* Shared by the authorization server's files. */

#include <h2o.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "auth/auth.h"
#include "auth/form.h"
#include "auth/redirect.h"
#include "auth/throttle.h"
#include "base/buf.h"
#include "http/http_internal.h"
#include "store/store.h"

#define AUTH_CODE_TTL_MS (60 * 1000)
#define AUTH_SESSION_TTL_S (30 * 86400)
#define AUTH_SESSION_COOKIE "smcp_session" /* set by /login, read by auth_session_user */
#define AUTH_FORM_MAX (64 * 1024)
#define AUTH_STATE_MAX 2048
#define AUTH_UNUSED_CLIENT_MS (24LL * 3600 * 1000) /* an unapproved registration is kept */
#define AUTH_REGISTER_WINDOW_MS (3600LL * 1000)    /* OAUTH_REGISTER_PER_ADDRESS counts an hour */
#define AUTH_PRUNE_EVERY_MS (10 * 60 * 1000)       /* stale clients are forgotten this often */

struct cimd;
struct auth_admit;

struct auth {
    const struct config *cfg;
    struct auth_config conf; /* OAUTH_*, SIGNIN_* (auth_config_load) */
    struct store *store;
    struct cimd *cimd;
    struct auth_admit *admit; /* admit.c */
    bool cimd_loopback;       /* test only: http://127.0.0.1 documents */
    int64_t access_ttl_ms, refresh_ttl_ms;
    unsigned char device_key[32]; /* signs device cookies (signin.c) */
    int64_t trust_s;              /* how long a device cookie is good for */
    /* the rotation overlap (OAUTH_REFRESH_REUSE_SECONDS, OAUTH_REFRESH_REUSE_MAX) */
    struct store_oauth_reuse refresh_reuse;
    unsigned char credential_key[SEAL_KEY_BYTES]; /* seals what the account page stores */
    bool has_credential_key;
};

/* PUBLIC_URL, the issuer. Read from the configuration at each use: with --listen HOST:0 the
 * server knows its URL only once it listens, after auth_new. */
const char *auth_issuer(const struct auth *a);
/* PUBLIC_URL/mcp, the one resource tokens are issued for, into out ("" when it does not fit). */
void auth_resource(const struct auth *a, char *out, size_t cap);

/* page.c: HTML pages, cookies, CSRF, forms, sessions */
/* The start of a page's handler: the request tracked, *post set, and a POST's Origin checked.
 * The authorization server (the route's context), or NULL when the check has answered 403. */
struct auth *auth_page_enter(h2o_handler_t *self, h2o_req_t *req, bool *post);
void html_text(struct buf *b, const char *s);
/* <input type="hidden" name=name value=value> */
void html_hidden(struct buf *b, const char *name, const char *value);
/* The shared head, the title, then body (HTML), with the headers every page carries. */
void auth_page(h2o_req_t *req, int status, const char *title, const char *body);
/* A page saying what went wrong, for errors that must not go back to the client's redirect. */
void auth_error_page(h2o_req_t *req, int status, const char *error, const char *description);
const char *auth_cookie(h2o_req_t *req, const char *name);
void auth_set_cookie(struct auth *a, h2o_req_t *req, const char *name, const char *value,
                     int64_t max_age_s);
/* The request's CSRF token (the smcp_csrf cookie), set when the client has none. */
const char *auth_csrf_token(struct auth *a, h2o_req_t *req);
/* Whether the form's csrf field matches the cookie. */
bool auth_csrf_ok(h2o_req_t *req, const struct form *f);
/* Parse a form body (application/x-www-form-urlencoded); answers 400/415 itself on false. */
bool auth_read_form(h2o_req_t *req, struct form *f, bool json_errors);
/* The query string's fields; answers 400 itself on false. */
bool auth_read_query(h2o_req_t *req, struct form *f);
/* Whether the request's path is exactly path; if not, answers 404 (JSON or page). */
bool auth_path_exact(h2o_req_t *req, const char *path, bool json);
/* auth_path_exact for a JSON endpoint that takes only POST: OPTIONS gets a CORS preflight
 * answer (these endpoints use no cookies), any other method 405. */
bool auth_post_only(h2o_req_t *req, const char *path);
/* A 302/303 to location (copied). */
void auth_redirect(h2o_req_t *req, int status, const char *location);
/* Append "name=value" URL-encoded with separator sep. */
void url_param(struct buf *b, char sep, const char *name, const char *value);
/* JSON {"error", "error_description"} with no-store, as the token endpoints answer; readable
 * by any origin (no cookies are involved). */
void auth_json_error(h2o_req_t *req, int status, const char *error, const char *description);
void auth_json(h2o_req_t *req, int status, json_t *body); /* takes body */

/* client.c: find a client by id: registered, or a metadata document fetched (and cached) */
struct auth_client_lookup;
typedef void (*auth_client_fn)(void *ctx, struct store_oauth_client *client, const struct err *err);
/* cb runs exactly once, maybe before this returns; client is NULL on failure (err->code
 * -ENOENT for an unknown client or a document that cannot be used, -EAGAIN when a document would
 * be a new client from an address over its OAUTH_REGISTER_PER_ADDRESS, -EBUSY when its document
 * cannot be fetched now: the server, the requester (req's address) or the document's host has
 * as many fetches or name lookups under way as it may; err->msg says which). The lookup is tied
 * to req: it is cancelled if req goes. */
void auth_client_find(struct auth *a, h2o_req_t *req, const char *client_id, bool may_fetch,
                      auth_client_fn cb, void *ctx);
/* Authenticate the client of a token or revocation request (Basic or form credentials, or a
 * public client's client_id): true with *out filled; otherwise answered 401 invalid_client. */
bool auth_client_authenticate(struct auth *a, h2o_req_t *req, const struct form *f,
                              struct store_oauth_client *out);

/* admit.c: room for new clients (registrations, and metadata documents cached the first time);
 * loop thread only */
/* Read the count of unapproved clients (pruning the stale ones; a store failure is logged and
 * the count starts at 0 until the next prune) and start the prune timer. */
void auth_admit_init(struct auth *a);
void auth_admit_release(struct auth *a);
/* The client a request came from (http_client_addr: behind a trusted proxy, the address it
 * forwarded) as every per-address limit of this module counts it
 * (throttle_peer_of: the IPv4 address or the IPv6 /64, and the wider network). auth_peer
 * writes the address part as text. */
void auth_peer_of(h2o_req_t *req, struct throttle_peer *out);
void auth_peer(h2o_req_t *req, char *out, size_t cap);

/* Seconds until addr (auth_peer's form) may add another client: 0 when it may now. */
int64_t auth_admit_wait_s(struct auth *a, const char *addr);
/* Count a new client against addr and make room for it in the store: when OAUTH_CLIENTS_MAX
 * unapproved clients are kept, the oldest is evicted. Call right before inserting the client.
 * 0, or < 0 when the store fails (err). */
int auth_admit(struct auth *a, const char *addr, struct err *err);
/* A client was approved for the first time: it no longer counts against OAUTH_CLIENTS_MAX. */
void auth_admit_approved(struct auth *a);

/* Handlers */
int auth_on_metadata(h2o_handler_t *self, h2o_req_t *req);
int auth_on_authorize(h2o_handler_t *self, h2o_req_t *req);
int auth_on_login(h2o_handler_t *self, h2o_req_t *req);
int auth_on_logout(h2o_handler_t *self, h2o_req_t *req);
int auth_on_token(h2o_handler_t *self, h2o_req_t *req);
int auth_on_revoke(h2o_handler_t *self, h2o_req_t *req);
int auth_on_register(h2o_handler_t *self, h2o_req_t *req);
int auth_on_account(h2o_handler_t *self, h2o_req_t *req);
/* The account page's card of cached environments (account_envs.c): the user's environment
 * snapshots, each with a button to drop it; account_env_drop drops the one with id if it is the
 * user's (built by them, or serving them): 0, -ENOENT, or the store's error. */
void account_envs_card(struct auth *a, struct buf *b, const char *csrf,
                       const struct store_user *user);
int account_env_drop(struct auth *a, const struct store_user *user, const char *id,
                     struct err *err);

/* The account page's secrets card (account_secrets.c): the user's secrets for runs, never a
 * value, with the forms to add and delete them (and problem, what was wrong with the one just
 * sent, or NULL). account_secret_apply: the form's secret set (name, value, repos, agent) or
 * deleted (name); 0, or -EINVAL or -ENOSPC with err a sentence for the page, -ENOENT, -EAGAIN,
 * or a store failure; the value is wiped from f in every case. */
void account_secrets_card(struct auth *a, struct buf *b, const char *csrf,
                          const struct store_user *user, const char *problem);
int account_secret_apply(struct auth *a, const struct store_user *user, struct form *f, bool set,
                         struct err *err);

/* signin.c: the sign-in form, for a request that needs a signed-in user */
void auth_signin_page(struct auth *a, h2o_req_t *req, int status, const char *return_to,
                      const char *message);
/* The one check of a page that needs a signed-in user: true with *user filled (auth_session_user);
 * otherwise it has answered with the sign-in form, which comes back to return_to: 200 when a page
 * is being opened, 401 "sign in again" when change (a form sent from a page whose session has
 * ended since). */
bool auth_page_user(struct auth *a, h2o_req_t *req, const char *return_to, bool change,
                    struct store_user *user);

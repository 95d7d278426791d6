#pragma once
/* The check of a user's bearer token (bearer.c): an API token, or an OAuth access token issued for
 * this server's /mcp, with a cache of recent answers. Loop thread only. */

#include <stddef.h>

#include "base/err.h"

struct store;
struct store_user;

/* Check tok (the text after "Bearer ", len bytes, surrounding spaces ignored) against st, an
 * OAuth token only when it was issued for public_url + "/mcp". 0 and user and scopes
 * (SCOPE_* bits; every one for an API token) filled; -ENOENT for an unknown, revoked or
 * expired token or one issued for another resource; another negative errno (err set) when the
 * store failed. scopes may be NULL. A success is remembered for a minute at most, while the
 * store's data version and this process's revocations (http_bearer_cache_flush) stay the same. */
int http_bearer_check(struct store *st, const char *public_url, const char *tok, size_t len,
                      struct store_user *user, unsigned *scopes, struct err *err);
/* Drop every remembered check (after a revocation in this process). */
void http_bearer_cache_flush(void);
/* After every turn of the loop: the next check reads the store's data version again. */
void http_bearer_after_loop(void);

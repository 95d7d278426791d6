/* The one check of a bearer token, whatever issued it (an API token, or an OAuth access token
 * for this server's /mcp), with a small cache of the tokens seen lately. A leaf: it knows the
 * store and the scope names, not HTTP; the gate (a request head's credential) and access.c (the
 * Authorization header of /mcp) both ask it. Loop thread only: the cache is not locked. */
#include "http/bearer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/scopes.h"
#include "base/ids.h"
#include "base/util.h"
#include "store/store.h"

/* Tokens seen lately, by their digest (token_digest): a client sends the same token with every
 * request. An entry
 * stays true while the database's data version (which any other process's write changes, the
 * CLI revoking a token say) and this process's revocation count are the ones it was checked at;
 * for a minute at most, so that last use is still recorded; and never past the token's expiry. */
#define BEARER_CACHE_SIZE 64
#define BEARER_RECHECK_MS 60000
struct bearer_entry {
    unsigned char hash[TOKEN_DIGEST_BYTES];
    bool used;
    struct store_user user;
    unsigned scopes;
    int64_t checked_ms;
    int64_t expires_ms; /* wall clock; 0 for API tokens */
    int64_t data_version;
    uint64_t generation;
};
static struct bearer_entry bearer_cache[BEARER_CACHE_SIZE];
static uint64_t bearer_generation;

void http_bearer_cache_flush(void)
{
    bearer_generation++;
}

/* The data version as read in this turn of the loop, or -1. Every request handled in a turn
 * arrived before the turn's first read of it, so one read serves them all, and a revocation
 * committed before that read is seen by all of them: reading it for each request (two locking
 * system calls) was a good part of the cost of a small request. */
static int64_t turn_version = -1;

void http_bearer_after_loop(void)
{
    turn_version = -1;
}

/* An OAuth access token: its user and scopes, if it is live and was issued for this server's
 * /mcp (a token for another resource is refused, whoever issued it). */
static int oauth_check(struct store *st, const char *public_url, const char *tok, size_t len,
                       struct store_user *user, unsigned *scopes, int64_t *expires, struct err *err)
{
    struct store_oauth_token t;
    int r = store_oauth_access_check(st, tok, len, user, &t, err);
    if (r < 0)
        return r;
    char resource[600];
    snprintf(resource, sizeof(resource), "%s/mcp", public_url);
    if (strcmp(t.resource, resource) != 0)
        return err_set(err, -ENOENT, "the token was issued for another resource");
    scopes_parse(t.scope, scopes, NULL);
    *expires = t.expires_at;
    return 0;
}

int http_bearer_check(struct store *st, const char *public_url, const char *tok, size_t len,
                      struct store_user *user, unsigned *scopes, struct err *err)
{
    while (len && *tok == ' ')
        tok++, len--;
    while (len && tok[len - 1] == ' ')
        len--;
    unsigned got = 0;
    if (!scopes)
        scopes = &got;
    unsigned char hash[TOKEN_DIGEST_BYTES];
    token_digest(tok, len, hash);
    struct bearer_entry *e = &bearer_cache[hash[0] % BEARER_CACHE_SIZE];
    bool same = e->used && memcmp(e->hash, hash, sizeof(hash)) == 0;
    int64_t now = time_mono_ms();
    if (turn_version < 0)
        turn_version = store_data_version(st);
    int64_t version = turn_version;
    if (same && now - e->checked_ms < BEARER_RECHECK_MS && version >= 0 &&
        version == e->data_version && e->generation == bearer_generation &&
        (!e->expires_ms || e->expires_ms > time_now_ms())) {
        *user = e->user;
        *scopes = e->scopes;
        return 0;
    }
    int64_t expires = 0;
    int r;
    if (len == STORE_OAUTH_TOKEN_LEN && strncmp(tok, STORE_OAUTH_ACCESS_PREFIX, 8) == 0) {
        r = oauth_check(st, public_url, tok, len, user, scopes, &expires, err);
    } else {
        r = len > 0 && len <= 256 ? store_token_authenticate(st, tok, len, user, err) : -ENOENT;
        *scopes = SCOPES_ALL;
    }
    if (r == 0) {
        memcpy(e->hash, hash, sizeof(hash));
        e->used = true;
        e->user = *user;
        e->scopes = *scopes;
        e->checked_ms = now;
        e->expires_ms = expires;
        e->data_version = version;
        e->generation = bearer_generation;
    } else if (same) {
        e->used = false;
    }
    return r;
}

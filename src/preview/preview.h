#pragma once
/* Previews: a port of a session's sandbox served at a capability URL,
 * PUBLIC_URL/preview/<id>-<mac>/..., the mac an HMAC-SHA256 of the id under a key of the
 * server's (so nothing secret is stored, and any node can verify and show it), HTTP and
 * WebSockets, proxied by the server into the sandbox's
 * network namespace (sandbox_connect: only that sandbox's loopback is reachable). A preview is
 * opened by its owner (container_preview) or by a run's agent for its own sandbox
 * (open_preview), expires (PREVIEW_TTL_MINUTES by default), may be revoked, and at most
 * PREVIEWS_PER_SANDBOX are open per sandbox. Its connections are counted per preview and per
 * user; what it answers runs in an opaque origin (CSP sandbox), never the server's, and carries
 * none of the server's cookies either way. Loop thread only. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct config;
struct http_server;
struct sandbox_manager;
struct store;
struct previews;

#define PREVIEWS_PER_SANDBOX 4
#define PREVIEW_TTL_MAX_MINUTES 1440

struct previews_config {
    uint64_t ttl_s;         /* PREVIEW_TTL_MINUTES */
    unsigned conns;         /* connections at once per preview (PREVIEW_CONNECTIONS) */
    unsigned conns_user;    /* per user, over all their previews (PREVIEW_CONNECTIONS_PER_USER) */
    const char *public_url; /* borrowed */
};
int previews_config_load(const struct config *cfg, struct previews_config *pc, struct err *err);

/* key: 32 bytes (copied), the same on every node */
struct previews *previews_new(const struct previews_config *cfg, struct store *st,
                              struct sandbox_manager *mgr, const unsigned char *key);
void previews_free(struct previews *pv);
/* Serve /preview/ on http's main listener. */
void previews_register(struct http_server *http, struct previews *pv);

/* Open a preview of port of sandbox_id (session_id's, of user_id) for ttl_s seconds (0: the
 * default; at most PREVIEW_TTL_MAX_MINUTES), for run_id's agent or NULL. Returns its JSON ({id,
 * url, port, expires_at, run_id}); NULL with err: -EINVAL (a port the server keeps), -EMFILE
 * (PREVIEWS_PER_SANDBOX open already). */
json_t *previews_open(struct previews *pv, const char *user_id, const char *session_id,
                      const char *sandbox_id, unsigned port, uint64_t ttl_s, const char *run_id,
                      struct err *err);
/* Revoke user_id's open preview id; its connections are closed. 0, or -ENOENT. */
int previews_revoke(struct previews *pv, const char *user_id, const char *id, struct err *err);
/* The open previews of sandbox_id (run_id NULL) or of run_id, as previews_open describes them. */
json_t *previews_list(struct previews *pv, const char *sandbox_id, const char *run_id);

#pragma once
/* Shared by preview.c (the capability, opening, serving HTTP) and preview_ws.c (WebSockets), and
 * by nothing else. */

#include <h2o.h>

#include "base/loop.h"
#include "http/watch.h"
#include "preview/preview.h"
#include "store/store.h"

/* connections open, per preview id and per user id */
struct preview_count {
    char key[64];
    unsigned n;
};

struct previews {
    struct previews_config cfg;
    char *public_url;
    struct store *st;
    struct sandbox_manager *mgr;
    unsigned char key[32];
    struct preview_count *counts;
    size_t ncounts;
    struct ws_conn *tunnels; /* WebSockets relayed now (preview_ws.c) */
    struct loop_timer tick;
    int64_t next_prune;
};

/* One counted connection of a preview: taken before the sandbox is reached, released when the
 * request or the WebSocket ends. */
struct preview_slot {
    struct previews *pv;
    char preview[64], user[64];
    int64_t expires_at; /* ms */
};
/* A slot for a connection to p, or NULL with *why when p or its user has as many as they may. */
struct preview_slot *preview_slot_take(struct previews *pv, const struct store_preview *p,
                                       const char **why);
void preview_slot_release(struct preview_slot *s);

/* A request to a preview being served (preview.c). */
struct pending {
    struct previews *pv;
    struct preview_slot *slot; /* NULL once a WebSocket took it */
    struct sandbox_connect *connecting;
    struct ws_conn *wsc; /* its WebSocket while it is set up */
    h2o_req_t *req;      /* NULL once the request is gone */
    struct http_watch watch;
    struct store_preview p;
    char prefix[160]; /* "/preview/<id>-<mac>" */
    size_t rest_at;   /* where the path after the prefix begins in req->path */
    bool ws;
};

/* The headers an answer of a preview gets (preview.c): the app's cookies dropped, its redirects
 * to its own paths kept in the preview (prefix), an opaque origin (CSP sandbox), CORS for its own
 * pages, no referrer. */
void preview_answer_headers(h2o_req_t *req, const char *prefix);

/* preview_ws.c: relay pd's WebSocket over fd (connected to the app): the app's handshake, then
 * the client's upgrade, then bytes both ways. The request has gone (its WebSocket stops if it
 * was not yet set up). Close preview id's WebSockets (revoked), those expired at now (ms), or
 * all of them. */
void preview_ws_start(struct pending *pd, int fd);
void preview_ws_req_gone(struct ws_conn *c);
void preview_ws_close(struct previews *pv, const char *preview_id);
void preview_ws_expire(struct previews *pv, int64_t now);
void preview_ws_close_all(struct previews *pv);

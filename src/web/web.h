#pragma once
/* The web pages of runs and sessions (web.c): /runs/, /sessions/, /static/ and /favicon.ico. */

struct http_server;
struct store;
struct auth;
struct runs;

/* Serve the pages on http. They read runs and sessions from st, know a signed-in owner by auth's
 * session cookie, and ask runs (NULL when the engine is unavailable: the pages answer 503) for
 * views and descriptions. All borrowed for http's life; the route context stays reachable from
 * the server's handlers. Before http_server_run, loop thread. */
void web_register(struct http_server *http, struct store *st, struct auth *auth, struct runs *runs);

#pragma once
/* Relaying one request to another server and streaming its answer back as it arrives: status,
 * headers (less hop-by-hop ones) and body, a Server-Sent Events stream's events one by one. The
 * upstream is held while the client reads slower than it sends; a client that goes away aborts
 * the upstream transfer. Used to forward a call to the node that holds its sandbox. Main loop
 * thread only. */

#include <curl/curl.h>
#include <h2o.h>

struct http_relay_opts {
    const char *url;
    struct curl_slist *headers; /* taken: freed when the relay ends */
    const char *what;           /* names the relay in logs, e.g. "forward node=n2" */
    long connect_timeout_ms;
};

/* Relay req (method POST or GET, its entity as the body) to o->url. Answers req in every case: a
 * 502 (or 504) JSON error when the upstream cannot be reached before it has answered. */
void http_relay(h2o_req_t *req, const struct http_relay_opts *o);

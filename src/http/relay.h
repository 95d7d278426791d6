#pragma once
/* Relaying one request to another server and streaming its answer back as it arrives: status,
 * headers (less hop-by-hop ones) and body, a Server-Sent Events stream's events one by one. The
 * upstream is held while the client reads slower than it sends; a client that goes away aborts
 * the upstream transfer. Used to forward a call to the node that holds its sandbox. Main loop
 * thread only. */

#include <curl/curl.h>
#include <h2o.h>
#include <stdbool.h>

struct http_relay_opts {
    const char *url;
    struct curl_slist *headers; /* taken: freed when the relay ends */
    const char *what;           /* names the relay in logs, e.g. "forward node=n2" */
    long connect_timeout_ms;
    /* With use_fd: the upstream is reached over fd, a socket (taken) that curl connects to the
     * URL's host, made where that host is (another network namespace), for this request alone
     * (no connection is reused for another) */
    bool use_fd;
    int fd;
    /* Called just before the answer starts, its status and headers (less hop-by-hop ones) in
     * req->res: to change them. NULL: none. */
    void (*on_start)(h2o_req_t *req, void *ctx);
    void *ctx;
};

/* Relay req (its method, its entity as the body) to o->url. Answers req in every case: a 502 (or
 * 504) JSON error when the upstream cannot be reached before it has answered. */
void http_relay(h2o_req_t *req, const struct http_relay_opts *o);

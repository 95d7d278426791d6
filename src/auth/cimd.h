#pragma once
/* Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document; MCP 2025-11-25):
 * a client_id that is an https URL names a JSON document, published by the client, that tells
 * the authorization server the client's name and redirect URIs. This module checks such URLs,
 * fetches the documents (on the loop, from public addresses only, small and quick, a few at once
 * for any one requester and any one host) and parses them. It keeps documents for nobody: the
 * caller keeps what it fetched for max_age_s seconds; it keeps failures itself, for a while, so
 * that a document that never answers is not fetched again and again. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/redirect.h"
#include "base/err.h"
#include "egress/egress.h"

#define CIMD_URL_MAX 2048         /* bytes of a client_id URL */
#define CIMD_NAME_MAX 200         /* bytes of client_name kept (cut at a character boundary) */
#define CIMD_REDIRECT_URIS_MAX 10 /* redirect_uris entries */
#define CIMD_URI_MAX 2000         /* bytes of one redirect_uri, client_uri or logo_uri */
#define CIMD_BODY_MAX (64 * 1024) /* bytes of a document */
#define CIMD_MAX_AGE_DEFAULT 300  /* seconds, when the answer says nothing about caching */
#define CIMD_MAX_AGE_MIN 60       /* a document is kept at least this long, unless no-store */
#define CIMD_MAX_AGE_MAX 86400    /* and at most this long */
#define CIMD_CONNECT_TIMEOUT_MS 3000
#define CIMD_TOTAL_TIMEOUT_MS 5000 /* the whole fetch, resolution included */
/* The limits of a new fetcher (struct cimd_limits) */
#define CIMD_FETCHES_DEFAULT 16       /* fetches under way at once */
#define CIMD_PER_REQUESTER_DEFAULT 2  /* of them asked for by one requester */
#define CIMD_PER_HOST_DEFAULT 4       /* of them to one host */
#define CIMD_FAILURE_MS_DEFAULT 60000 /* a failure is given again, without a fetch, this long */
#define CIMD_FAILURES_KEPT 256        /* failures remembered (a newer one takes its bucket) */

/* Whether url may name a client metadata document: https, a host, a path other than "/", no
 * fragment, no user name or password, no "." or ".." segments (percent-encoded ones included),
 * only characters a URI may hold, at most CIMD_URL_MAX bytes. A query and a port are allowed.
 * With allow_loopback_http (tests only), http://127.0.0.1[:port]/path and
 * http://[::1][:port]/path are accepted too. Says nothing about where the host's addresses are:
 * cimd_fetch checks those. Returns 0, or -EINVAL with a message. Pure. */
int cimd_url_check(const char *url, bool allow_loopback_http, struct err *err);

/* What a document says about its client. Every string is NUL-terminated, valid UTF-8, and
 * stored as the document has it except client_name (below). */
struct cimd_client {
    char client_id[CIMD_URL_MAX + 1];
    /* the document's client_name without control or bidirectional formatting characters, cut
     * to CIMD_NAME_MAX bytes; the URL's host when the document gives none */
    char client_name[CIMD_NAME_MAX + 1];
    int n_redirect_uris; /* 1..CIMD_REDIRECT_URIS_MAX */
    char redirect_uris[CIMD_REDIRECT_URIS_MAX][CIMD_URI_MAX + 1];
    char client_uri[CIMD_URI_MAX + 1]; /* "" unless the document gives an https URL */
    char logo_uri[CIMD_URI_MAX + 1];   /* "" unless the document gives an https URL */
};

/* Parse the document body (len bytes, at most CIMD_BODY_MAX) fetched from url (which
 * cimd_url_check accepted) into *out. Refused, with -EINVAL and a message naming the field: not
 * a JSON object; client_id missing or not exactly url; token_endpoint_auth_method other than
 * "none" (absent is "none"); any client_secret* member; client_name, client_uri or logo_uri
 * present but not a string; redirect_uris missing, empty, longer than CIMD_REDIRECT_URIS_MAX or
 * holding a non-string or a URI auth_redirect_uri_check refuses (redirect.h: the same rule as a
 * registration's). *out is unspecified on failure. Pure. */
int cimd_document_parse(const char *url, const char *body, size_t len, struct cimd_client *out,
                        struct err *err);

/* Seconds the answer may be kept, from the Cache-Control header value (NULL when there was
 * none): 0 for no-store or no-cache; else s-maxage, or max-age, clamped to
 * [CIMD_MAX_AGE_MIN, CIMD_MAX_AGE_MAX]; CIMD_MAX_AGE_DEFAULT when neither is given. Pure. */
int64_t cimd_max_age(const char *cache_control);

/* Whether a Content-Type header value (NULL when there was none) may carry a document:
 * application/json, any +json type, text/plain (raw file hosting) and none are; text/html and
 * every other type are not. Parameters (charset) are ignored. Pure. */
bool cimd_content_type_ok(const char *content_type);

/* Whether a fetch of url (which cimd_url_check accepts with allow_loopback_http) may connect
 * to addrs, what its host resolved to (for an address host, that address): 0 when every one is
 * public, or, for an http:// test URL, is the URL's own loopback address; else -EACCES naming
 * the first address refused and its class (-EHOSTUNREACH when n is 0, -EINVAL when url is
 * refused). cimd_fetch decides with this. Pure. */
int cimd_addrs_check(const char *url, bool allow_loopback_http, const struct egress_addr *addrs,
                     int n, struct err *err);

/* --- fetching, on the loop --- */

struct cimd;
struct cimd_fetch;

/* client (about 26 KB) is valid during the call only: copy what is kept. On success err is NULL and
 * max_age_s is what cimd_max_age said (0: do not keep it); on failure client is NULL, max_age_s is
 * 0 (the fetcher keeps errors itself) and err->code is one of -EACCES (an address is not public),
 * -ENOENT (the name does not resolve), -ECONNREFUSED/-EHOSTUNREACH (no connection), -ETIMEDOUT,
 * -EFBIG (the document is larger than CIMD_BODY_MAX), -EPROTO (TLS, an HTTP status other than 200
 * (a redirect included), a content type that is not JSON), -EIO, or -EINVAL (the document, as
 * cimd_document_parse says); err->msg names the URL. */
typedef void (*cimd_fetched_fn)(void *ctx, const struct cimd_client *client, int64_t max_age_s,
                                const struct err *err);

/* A fetcher with a curl multi handle of its own and the default limits. allow_loopback_http is
 * for tests: it lets http://127.0.0.1 and http://[::1] documents be fetched (https ones still
 * only from public addresses). Main loop thread only, as is everything below. */
struct cimd *cimd_new(bool allow_loopback_http);
/* Cancel every fetch under way (their callbacks are not called) and free c. NULL is accepted.
 * Not from a fetch's callback. */
void cimd_free(struct cimd *c);

/* What a fetcher allows. */
struct cimd_limits {
    int fetches;        /* under way at once (OAUTH_CIMD_FETCHES) */
    int per_requester;  /* of them asked for by one requester (OAUTH_CIMD_FETCHES_PER_ADDRESS) */
    int per_host;       /* of them to one host, by name or address (OAUTH_CIMD_FETCHES_PER_HOST) */
    long total_ms;      /* a whole fetch, resolution included (OAUTH_CIMD_TIMEOUT_SECONDS) */
    int64_t failure_ms; /* a failed fetch's error is given again for this long, without fetching
                           (OAUTH_CIMD_FAILURE_SECONDS; 0: never) */
};
/* For the fetches started after the call; the connection's own timeout stays
 * CIMD_CONNECT_TIMEOUT_MS, or total_ms when that is shorter. */
void cimd_set_limits(struct cimd *c, const struct cimd_limits *lim);
/* Tests: shorter timeouts than CIMD_CONNECT_TIMEOUT_MS and CIMD_TOTAL_TIMEOUT_MS. */
void cimd_set_timeouts(struct cimd *c, long connect_ms, long total_ms);

/* Fetch the document url names for requester (who asked: an IPv4 address or an IPv6 /64, at
 * most 63 bytes; NULL or "": counted in the total only): check url (cimd_url_check); resolve
 * its host on a thread; check every address with the egress policy and an empty allow list
 * (public addresses only, and the loopback address of an http:// test URL); then GET it with
 * libcurl on the loop, connecting to those addresses only, over https only, following no
 * redirect, within the timeouts and CIMD_BODY_MAX; and parse it. cb runs once, on the loop,
 * never from within this call. A fetch that failed is remembered for the limits' failure_ms:
 * until then the same url is answered at once with the same error code and message (which then
 * says so), whoever asks, and not fetched. Returns a handle for cimd_fetch_cancel, valid until cb
 * has run; or NULL with err set (cb never called) when url is refused, when url's host is an
 * address the policy refuses, with a remembered failure, with -EBUSY when the fetches under way
 * are as many as the limits allow in all, for requester or for url's host, or with -EAGAIN when
 * the resolver takes no more lookups (for requester, whose lookups count until their thread
 * ends, at most per_requester of them, or in all). */
struct cimd_fetch *cimd_fetch(struct cimd *c, const char *url, const char *requester,
                              cimd_fetched_fn cb, void *ctx, struct err *err);
/* Stop f; its callback will not run. NULL is accepted. Not after f's callback has run. */
void cimd_fetch_cancel(struct cimd_fetch *f);

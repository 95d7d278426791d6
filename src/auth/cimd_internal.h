#pragma once
/* Shared by cimd.c (the checks, pure) and cimd_fetch.c (the fetch), and by nothing else. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "egress/egress.h"

#define SHOWN 200 /* bytes of a URL or value a message repeats */

/* A client_id URL, parsed by cimd_url_parse. */
struct client_url {
    bool http;            /* the loopback test form */
    char host[254];       /* without brackets: a name or an address */
    char shown_host[256]; /* as the URL writes it ([::1] with brackets) */
    uint16_t port;
};

/* Parse and check url as a client_id (https, or with allow_loopback_http an http://localhost
 * test form). Returns 0, or a negative errno with err saying what is wrong with it. */
int cimd_url_parse(const char *url, bool allow_loopback_http, struct client_url *u,
                   struct err *err);
/* Whether every one of the n addresses url's host (parsed into u) resolved to may be fetched
 * from: public, or the test form's own loopback. Returns 0 or -EACCES (or another negative
 * errno) with err. */
int cimd_url_addrs_check(const char *url, const struct client_url *u, const struct egress_addr *a,
                         int n, struct err *err);
/* A header's number (a delta-seconds or a length, quotes allowed), past 2^40 no longer exact; -1
 * when the n bytes at s are not one. */
int64_t cimd_delta_seconds(const char *s, size_t n);

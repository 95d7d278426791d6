#pragma once
/* Redirect URIs: the one rule for which a client may name (in a registration, RFC 7591, or in a
 * client metadata document) and for whether an authorization request's redirect_uri is one of
 * them. Registration (register.c), documents (cimd.c) and /authorize (authorize.c) all ask here.
 *
 * Three kinds are accepted:
 * - https://host...: any host, no user name or password. Matched byte for byte.
 * - a private-use scheme with a dot in it (com.example.app:/cb, RFC 8252 7.1). Byte for byte.
 * - loopback: http:// on localhost, an IPv4 address in 127.0.0.0/8 written as four decimal
 *   numbers (127.0.0.1, 127.1.2.3) or [::1], with or without a port. A native app listens on a
 *   port the system gives it at each sign-in, so the port may differ from the registered one
 *   (RFC 8252 7.3); the scheme and host compare without regard to case, the path and query byte
 *   for byte, and the host must be the same one (localhost matches localhost only, not
 *   127.0.0.1).
 *
 * localhost is loopback here, although RFC 8252 8.3 says a client should not use it (a name may
 * resolve elsewhere, or listen on one of IPv4 and IPv6 only): the clients people use publish
 * http://localhost/callback (Claude Code, Codex) and send http://localhost:<random port>/callback,
 * and a user cannot change that. Letting the port vary adds no exposure an exact match did not
 * have: whoever may listen on localhost:1234 may listen on any port of it, and where the name
 * resolves is the user's own machine's answer (browsers resolve localhost to loopback
 * themselves). Only the name itself is localhost: "localhost." (a trailing dot), "localhost.evil.
 * example", percent-encoded spellings and every other name are not loopback, and so http:// on
 * them is refused. https:// on a loopback host is an ordinary https URI (exact match).
 *
 * Every URI: at most AUTH_REDIRECT_URI_MAX bytes of URI characters (auth_uri_chars_ok), no
 * fragment, no user name or password. Pure; any thread. */

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

#define AUTH_REDIRECT_URI_MAX 2000 /* bytes of one redirect URI */

/* Whether s (n bytes) is only RFC 3986 characters (unreserved, reserved, '%'), each '%'
 * followed by two hex digits: no spaces, controls, non-ASCII or "<>\^`{|}. */
bool auth_uri_chars_ok(const char *s, size_t n);

/* Whether s (n bytes) may be registered as a redirect URI, by the rule above. Returns 0, or
 * -EINVAL with a message naming it as redirect_uris[i] and saying what is wrong. */
int auth_redirect_uri_check(const char *s, size_t n, size_t i, struct err *err);

/* Whether requested (NUL-terminated) matches registered, a URI auth_redirect_uri_check accepted:
 * byte for byte, or both loopback on the same host with the same path and query, whatever their
 * ports. requested must itself pass auth_redirect_uri_check to match by the loopback rule. */
bool auth_redirect_uri_same(const char *registered, const char *requested);

/* Whether requested matches (auth_redirect_uri_same) one of a client's registered URIs, a JSON
 * array of strings as the store keeps it. False when the JSON is not such an array. */
bool auth_redirect_uri_match(const char *registered_json, const char *requested);

/* The host of a URI as it is written (with brackets for IPv6, without the port) into out, for
 * the consent page; the scheme when the URI has no "//" authority. */
void auth_uri_host(const char *uri, char *out, size_t cap);

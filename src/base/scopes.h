#pragma once
/* The scopes a token may carry (scopes.c): their bits, names and the text forms, a leaf below
 * the authorization server that issues them and the HTTP layer that checks them. Pure. */

#include <stddef.h>

#include "base/err.h"

/* Scopes: one for the sandbox tools, one for runs, offline_access for refresh tokens. */
#define SCOPE_SANDBOX 1u
#define SCOPE_RUNS 2u
#define SCOPE_OFFLINE 4u
#define SCOPES_TOOLS (SCOPE_SANDBOX | SCOPE_RUNS)
#define SCOPES_ALL (SCOPES_TOOLS | SCOPE_OFFLINE)
/* What a client is told to ask for (WWW-Authenticate, metadata). */
#define SCOPES_TEXT "sandbox runs offline_access"

/* Parse a space-separated scope list. -EINVAL (err names it) for an unknown scope. */
int scopes_parse(const char *text, unsigned *out, struct err *err);
/* "sandbox runs offline_access", in that order, of the bits set. */
void scopes_format(unsigned scopes, char *out, size_t cap);

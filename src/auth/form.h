#pragma once
/* application/x-www-form-urlencoded, as sent in a query string or a form body: the fields of an
 * authorization request, a token request, a sign-in form. Pure; fuzzed. */

#include <stddef.h>

#include "base/err.h"

#define FORM_FIELDS_MAX 32
#define FORM_VALUE_MAX 8192

struct form {
    size_t n;
    struct {
        char *name, *value; /* decoded, NUL-terminated; owned */
    } f[FORM_FIELDS_MAX];
};

/* Parse s (n bytes). Returns 0, or -EINVAL (err set) when a field repeats (OAuth forbids it), a
 * name or value is too long or decodes to a NUL or invalid escape, or there are too many
 * fields. *out is released on error. */
int form_parse(const char *s, size_t n, struct form *out, struct err *err);
/* The value of name, or NULL when absent. An empty value is "". */
const char *form_get(const struct form *f, const char *name);
void form_release(struct form *f);

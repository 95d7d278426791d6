/* Form and query-string decoding. */
#include "auth/form.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* Decode s[0..n) into a new string; NULL when it holds an invalid escape or a NUL. */
static char *decode(const char *s, size_t n)
{
    char *out = xmalloc(n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            int hi = i + 2 < n ? hex_value((unsigned char)s[i + 1]) : -1;
            int lo = i + 2 < n ? hex_value((unsigned char)s[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                free(out);
                return NULL;
            }
            c = (char)(hi << 4 | lo);
            i += 2;
        }
        if (c == '\0') {
            free(out);
            return NULL;
        }
        *o++ = c;
    }
    *o = '\0';
    return out;
}

int form_parse(const char *s, size_t n, struct form *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    size_t i = 0;
    while (i < n) {
        size_t end = i;
        while (end < n && s[end] != '&')
            end++;
        if (end > i) {
            const char *eq = memchr(s + i, '=', end - i);
            size_t nlen = eq ? (size_t)(eq - (s + i)) : end - i;
            size_t vlen = eq ? (size_t)(s + end - eq - 1) : 0;
            if (nlen > 64 || vlen > 3 * FORM_VALUE_MAX) {
                form_release(out);
                return nlen > 64
                           ? err_set(err, -EINVAL, "a form field's name is too long")
                           : err_set(err, -EINVAL, "a form field is over %d bytes", FORM_VALUE_MAX);
            }
            if (out->n == FORM_FIELDS_MAX) {
                form_release(out);
                return err_set(err, -EINVAL, "too many form fields");
            }
            char *name = decode(s + i, nlen);
            char *value = eq ? decode(eq + 1, vlen) : xstrdup("");
            if (!name || !value || strlen(value) > FORM_VALUE_MAX) {
                bool long_value = name && value;
                free(name);
                free(value);
                form_release(out);
                return long_value
                           ? err_set(err, -EINVAL, "a form field is over %d bytes", FORM_VALUE_MAX)
                           : err_set(err, -EINVAL, "a form field is not validly encoded");
            }
            if (form_get(out, name)) {
                err_set(err, -EINVAL, "parameter '%.64s' is repeated", name);
                free(name);
                free(value);
                form_release(out);
                return -EINVAL;
            }
            out->f[out->n].name = name;
            out->f[out->n].value = value;
            out->n++;
        }
        i = end + 1;
    }
    return 0;
}

const char *form_get(const struct form *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->f[i].name, name) == 0)
            return f->f[i].value;
    return NULL;
}

void form_release(struct form *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->f[i].name);
        free(f->f[i].value);
    }
    f->n = 0;
}

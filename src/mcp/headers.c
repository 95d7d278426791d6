/* SEP-2243 header values: the =?base64?...?= encoding, x-mcp-header annotations and the check of
 * Mcp-Param-{Name} against the arguments. */
#include "mcp/headers.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/ids.h"
#include "base/util.h"

#define SENTINEL_HEAD "=?base64?"
#define SENTINEL_TAIL "?="
#define SCHEMA_DEPTH_MAX 16 /* subschemas inside one another that the annotation walk enters */

int mcp_header_decode(const char *v, size_t len, char **out, size_t *out_len, char *msg,
                      size_t msglen)
{
    while (len && (v[0] == ' ' || v[0] == '\t'))
        v++, len--;
    while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    if (len > MCP_PARAM_VALUE_MAX) {
        snprintf(msg, msglen, "is longer than %d bytes", MCP_PARAM_VALUE_MAX);
        return -E2BIG;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c > 0x7e) {
            snprintf(msg, msglen,
                     "has a character a header value cannot carry (0x%02x); a value that needs "
                     "one is sent as " SENTINEL_HEAD "<base64>" SENTINEL_TAIL,
                     c);
            return -EINVAL;
        }
    }
    size_t hl = strlen(SENTINEL_HEAD), tl = strlen(SENTINEL_TAIL);
    char *buf = xmalloc(len + 1);
    if (len >= hl + tl && memcmp(v, SENTINEL_HEAD, hl) == 0 &&
        memcmp(v + len - tl, SENTINEL_TAIL, tl) == 0) {
        ssize_t n = base64_decode_strict(v + hl, len - hl - tl, (unsigned char *)buf);
        if (n < 0) {
            free(buf);
            snprintf(msg, msglen,
                     "has invalid base64 between " SENTINEL_HEAD " and " SENTINEL_TAIL
                     " (the standard alphabet, padded with '=' to a multiple of 4 characters)");
            return -EINVAL;
        }
        *out_len = (size_t)n;
    } else {
        memcpy(buf, v, len);
        *out_len = len;
    }
    buf[*out_len] = '\0';
    *out = buf;
    return 0;
}

/* ---------- x-mcp-header annotations ---------- */

/* RFC 9110 5.6.2: tchar. */
static bool is_token(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *s)))
            return false;
    return true;
}

struct walk {
    struct mcp_param_decl *decls;
    int n;
    char path[MCP_PARAM_PATH_MAX][MCP_PARAM_NAME_MAX + 1];
    char *msg;
    size_t msglen;
};

static int walk_fail(struct walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int walk_fail(struct walk *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, w->msglen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static int walk(struct walk *w, const json_t *node, size_t depth, bool reachable, int level);

/* Subschemas that are not `properties`: an annotation inside one is not statically reachable. */
static int walk_others(struct walk *w, const json_t *node, size_t depth, int level)
{
    static const char *const one[] = {"items", "additionalProperties", "not", "if", "then", "else"};
    static const char *const lists[] = {"anyOf", "oneOf", "allOf"};
    int r;
    for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++)
        if ((r = walk(w, json_object_get(node, one[i]), depth, false, level + 1)) < 0)
            return r;
    for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++) {
        size_t i;
        const json_t *e;
        json_array_foreach(json_object_get(node, lists[l]), i,
                           e) if ((r = walk(w, e, depth, false, level + 1)) < 0) return r;
    }
    const char *key;
    const json_t *e;
    json_object_foreach((json_t *)json_object_get(node, "$defs"), key, e)
    {
        if ((r = walk(w, e, depth, false, level + 1)) < 0)
            return r;
    }
    return 0;
}

static int walk(struct walk *w, const json_t *node, size_t depth, bool reachable, int level)
{
    if (!json_is_object(node))
        return 0;
    if (level > SCHEMA_DEPTH_MAX)
        return walk_fail(w, "x-mcp-header: the schema nests deeper than %d levels",
                         SCHEMA_DEPTH_MAX);
    const json_t *ann = json_object_get(node, "x-mcp-header");
    if (ann) {
        const char *name = json_string_value(ann);
        const char *type = json_string_value(json_object_get(node, "type"));
        if (!name || !is_token(name) || strlen(name) > MCP_PARAM_NAME_MAX)
            return walk_fail(w, "x-mcp-header '%s': not an HTTP token of 1 to %d characters",
                             name ? name : "(not a string)", MCP_PARAM_NAME_MAX);
        if (!reachable || depth == 0)
            return walk_fail(w,
                             "x-mcp-header '%s': not on a property reached from the root "
                             "through properties alone",
                             name);
        if (!type || (strcmp(type, "string") != 0 && strcmp(type, "integer") != 0 &&
                      strcmp(type, "boolean") != 0))
            return walk_fail(w,
                             "x-mcp-header '%s' is on a property of type %s (string, integer "
                             "or boolean only)",
                             name, type ? type : "(none)");
        for (int i = 0; i < w->n; i++)
            if (strcasecmp(w->decls[i].name, name) == 0)
                return walk_fail(w, "x-mcp-header '%s' is used twice", name);
        if (w->n == MCP_PARAM_DECLS_MAX)
            return walk_fail(w, "more than %d x-mcp-header annotations", MCP_PARAM_DECLS_MAX);
        struct mcp_param_decl *d = &w->decls[w->n++];
        memset(d, 0, sizeof(*d));
        snprintf(d->name, sizeof(d->name), "%s", name);
        memcpy(d->path, w->path, sizeof(d->path));
        d->depth = depth;
    }
    const char *key;
    const json_t *sub;
    json_object_foreach((json_t *)json_object_get(node, "properties"), key, sub)
    {
        bool deeper = reachable && depth < MCP_PARAM_PATH_MAX && strlen(key) <= MCP_PARAM_NAME_MAX;
        if (deeper)
            snprintf(w->path[depth], sizeof(w->path[depth]), "%s", key);
        else if (reachable && json_object_get(sub, "x-mcp-header"))
            return walk_fail(w,
                             "x-mcp-header on '%s': more than %d properties deep, or a name "
                             "longer than %d",
                             key, MCP_PARAM_PATH_MAX, MCP_PARAM_NAME_MAX);
        int r = walk(w, sub, deeper ? depth + 1 : depth, deeper, level + 1);
        if (r < 0)
            return r;
    }
    return walk_others(w, node, depth, level);
}

int mcp_param_decls(const json_t *schema, struct mcp_param_decl *decls, char *msg, size_t msglen)
{
    struct walk w = {.decls = decls, .msg = msg, .msglen = msglen};
    int r = walk(&w, schema, 0, true, 0);
    return r < 0 ? r : w.n;
}

/* ---------- the check ---------- */

/* A decimal number as JSON writes one: -?digits[.digits][e[+-]digits]. */
static bool parse_number(const char *s, double *out)
{
    const char *p = s;
    if (*p == '-')
        p++;
    if (!(*p >= '0' && *p <= '9'))
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p)
        return false;
    *out = strtod(s, NULL);
    return isfinite(*out);
}

static bool same_value(const json_t *body, const char *h, size_t hlen)
{
    switch (json_typeof(body)) {
    case JSON_STRING:
        return json_string_length(body) == hlen && memcmp(json_string_value(body), h, hlen) == 0;
    case JSON_INTEGER:
    case JSON_REAL: {
        double d;
        return strlen(h) == hlen && parse_number(h, &d) && d == json_number_value(body);
    }
    case JSON_TRUE: return hlen == 4 && memcmp(h, "true", 4) == 0;
    case JSON_FALSE: return hlen == 5 && memcmp(h, "false", 5) == 0;
    default: return false;
    }
}

/* A value cut short for a message, with what a header cannot print escaped (outlen >= 8). */
static void shown(char *out, size_t outlen, const char *s, size_t len)
{
    size_t o = 0, i = 0;
    for (; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool plain = c >= 0x20 && c < 0x7f;
        if (o + (plain ? 1 : 4) + 4 > outlen) /* room left for "..." and the NUL */
            break;
        if (plain)
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
    }
    if (i < len) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

int mcp_param_check(const struct mcp_param_decl *decls, size_t ndecls, const json_t *args,
                    const struct mcp_header_value *headers, size_t nheaders, bool truncated,
                    char *msg, size_t msglen)
{
    if (ndecls && truncated) {
        snprintf(msg, msglen, "Header mismatch: more than %d Mcp-Param-* headers",
                 MCP_PARAM_HEADERS_MAX);
        return -EINVAL;
    }
    for (size_t i = 0; i < ndecls; i++) {
        const struct mcp_param_decl *d = &decls[i];
        const json_t *body = args;
        char where[MCP_PARAM_PATH_MAX * (MCP_PARAM_NAME_MAX + 1) + 16] = "arguments";
        for (size_t k = 0; k < d->depth; k++) {
            body = json_is_object(body) ? json_object_get(body, d->path[k]) : NULL;
            size_t wl = strlen(where);
            snprintf(where + wl, sizeof(where) - wl, ".%s", d->path[k]);
        }
        if (json_is_null(body))
            body = NULL;
        const struct mcp_header_value *h = NULL;
        size_t nlen = strlen(d->name);
        for (size_t k = 0; k < nheaders; k++) {
            if (headers[k].name_len != nlen || strncasecmp(headers[k].name, d->name, nlen) != 0)
                continue;
            if (h) {
                snprintf(msg, msglen, "Header mismatch: Mcp-Param-%s header is sent twice",
                         d->name);
                return -EINVAL;
            }
            h = &headers[k];
        }
        if (!body && !h)
            continue;
        if (!h) {
            snprintf(msg, msglen,
                     "Header mismatch: Mcp-Param-%s header is required when %s is given", d->name,
                     where);
            return -EINVAL;
        }
        if (!body) {
            snprintf(msg, msglen,
                     "Header mismatch: Mcp-Param-%s header is sent but %s is absent or null",
                     d->name, where);
            return -EINVAL;
        }
        char *v = NULL, why[200];
        size_t vlen = 0;
        if (mcp_header_decode(h->value, h->value_len, &v, &vlen, why, sizeof(why)) < 0) {
            snprintf(msg, msglen, "Header mismatch: Mcp-Param-%s header %s", d->name, why);
            return -EINVAL;
        }
        bool same = same_value(body, v, vlen);
        if (!same) {
            char hv[104], bv[104];
            shown(hv, sizeof(hv), v, vlen);
            if (json_is_string(body))
                shown(bv, sizeof(bv), json_string_value(body), json_string_length(body));
            else {
                char *text = json_dumps(body, JSON_ENCODE_ANY | JSON_COMPACT);
                shown(bv, sizeof(bv), text ? text : "", text ? strlen(text) : 0);
                free(text);
            }
            snprintf(msg, msglen,
                     "Header mismatch: Mcp-Param-%s header value '%s' does not match body value "
                     "'%s' (%s)",
                     d->name, hv, bv, where);
        }
        free(v);
        if (!same)
            return -EINVAL;
    }
    return 0;
}

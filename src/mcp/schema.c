#include "mcp/schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* How many $ref a value may follow inside one another: a schema that refers to itself without
 * consuming the value (a: {$ref: a}) would otherwise recurse for ever. */
#define REF_DEPTH_MAX 32

/* Path of the field being checked, e.g. "args.timeout" or "items[3]". */
struct vctx {
    char path[256];
    char *msg;
    size_t msglen;
    const json_t *root; /* the schema $ref resolves in */
    int refs;           /* $ref followed to get here */
};

static bool fail(struct vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(struct vctx *c, const char *fmt, ...)
{
    char rule[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rule, sizeof(rule), fmt, ap);
    va_end(ap);
    if (c->path[0])
        snprintf(c->msg, c->msglen, "field '%s': %s", c->path, rule);
    else
        snprintf(c->msg, c->msglen, "arguments: %s", rule);
    return false;
}

static bool fail_num(struct vctx *c, const char *rule,
                     double bound) /* rule ends before the number */
{
    char b[64];
    if (bound == floor(bound) && fabs(bound) < 1e15)
        snprintf(b, sizeof(b), "%.0f", bound);
    else
        snprintf(b, sizeof(b), "%g", bound);
    return fail(c, "%s %s", rule, b);
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

static bool type_matches(const char *want, const json_t *v)
{
    if (strcmp(want, "number") == 0)
        return json_is_number(v);
    if (strcmp(want, "integer") == 0)
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    return strcmp(want, type_name(v)) == 0;
}

/* Count UTF-8 code points, as JSON Schema string lengths are in characters. */
static size_t utf8_len(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            count++;
    return count;
}

static bool validate(struct vctx *c, const json_t *schema, const json_t *v);

/* The schema a local reference names: "#" or "#/$defs/<name>" in root; NULL for any other. */
static const json_t *resolve_ref(const json_t *root, const char *ref)
{
    if (strcmp(ref, "#") == 0)
        return root;
    if (strncmp(ref, "#/$defs/", 8) != 0 || !ref[8] || strchr(ref + 8, '/') || strchr(ref + 8, '~'))
        return NULL;
    return json_object_get(json_object_get(root, "$defs"), ref + 8);
}

/* Whether v meets schema, without a message (the branch tests of anyOf, oneOf, not and if). */
static bool matches(const struct vctx *c, const json_t *schema, const json_t *v, char *m,
                    size_t mlen)
{
    struct vctx sub = *c;
    sub.msg = m;
    sub.msglen = mlen;
    return validate(&sub, schema, v);
}

static bool validate_object(struct vctx *c, const json_t *schema, const json_t *v)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *required = json_object_get(schema, "required");
    const json_t *additional = json_object_get(schema, "additionalProperties");
    size_t base = strlen(c->path);
    size_t i;
    const json_t *r;
    json_array_foreach(required, i, r)
    {
        if (json_is_string(r) && !json_object_get(v, json_string_value(r))) {
            char name[300];
            snprintf(name, sizeof(name), "%s%s%s", c->path, base ? "." : "", json_string_value(r));
            char saved[256];
            memcpy(saved, c->path, sizeof(saved));
            snprintf(c->path, sizeof(c->path), "%s", name);
            fail(c, "is required");
            memcpy(c->path, saved, sizeof(saved));
            return false;
        }
    }
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        snprintf(c->path + base, sizeof(c->path) - base, "%s%s", base ? "." : "", key);
        const json_t *sub = props ? json_object_get(props, key) : NULL;
        if (sub) {
            if (!validate(c, sub, val))
                return false;
        } else if (json_is_false(additional)) {
            bool ok = fail(c, "is not a known field");
            c->path[base] = '\0';
            return ok;
        } else if (json_is_object(additional)) {
            if (!validate(c, additional, val))
                return false;
        }
        c->path[base] = '\0';
    }
    return true;
}

static bool validate_array(struct vctx *c, const json_t *schema, const json_t *v)
{
    const json_t *items = json_object_get(schema, "items");
    const json_t *k;
    if ((k = json_object_get(schema, "minItems")) &&
        json_array_size(v) < (size_t)json_integer_value(k))
        return fail(c, "must have at least %lld items", (long long)json_integer_value(k));
    if ((k = json_object_get(schema, "maxItems")) &&
        json_array_size(v) > (size_t)json_integer_value(k))
        return fail(c, "must have at most %lld items", (long long)json_integer_value(k));
    if (!json_is_object(items))
        return true;
    size_t base = strlen(c->path), i;
    const json_t *e;
    json_array_foreach(v, i, e)
    {
        snprintf(c->path + base, sizeof(c->path) - base, "[%zu]", i);
        if (!validate(c, items, e))
            return false;
    }
    c->path[base] = '\0';
    return true;
}

static bool validate(struct vctx *c, const json_t *schema, const json_t *v)
{
    if (json_is_false(schema))
        return fail(c, "is not allowed");
    if (!json_is_object(schema))
        return true;
    const json_t *t = json_object_get(schema, "type"), *k;
    if (json_is_string(t) && !type_matches(json_string_value(t), v)) {
        char want[64];
        snprintf(want, sizeof(want), "%s", json_string_value(t));
        const char *article = strchr("aeiou", want[0]) ? "an" : "a";
        return fail(c, "must be %s %s, not %s", article, want, type_name(v));
    }
    if (json_is_array(t)) {
        bool any = false;
        size_t i;
        const json_t *e;
        json_array_foreach(t, i, e) any =
            any || (json_is_string(e) && type_matches(json_string_value(e), v));
        if (!any)
            return fail(c, "has the wrong type (%s)", type_name(v));
    }
    if ((k = json_object_get(schema, "const")) && !json_equal(k, v))
        return fail(c, "must equal the constant value");
    if ((k = json_object_get(schema, "enum"))) {
        bool any = false;
        size_t i;
        const json_t *e;
        json_array_foreach(k, i, e) any = any || json_equal(e, v);
        if (!any) {
            char list[200] = "";
            json_array_foreach(k, i, e)
            {
                if (json_is_string(e) &&
                    strlen(list) + strlen(json_string_value(e)) + 4 < sizeof(list))
                    snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                             i ? ", " : "", json_string_value(e));
            }
            return fail(c, "must be one of: %s", list);
        }
    }
    if (json_is_string(v)) {
        size_t n = utf8_len(json_string_value(v), json_string_length(v));
        if ((k = json_object_get(schema, "minLength")) && n < (size_t)json_integer_value(k))
            return fail(c, "must be at least %lld characters long",
                        (long long)json_integer_value(k));
        if ((k = json_object_get(schema, "maxLength")) && n > (size_t)json_integer_value(k))
            return fail(c, "must be at most %lld characters long",
                        (long long)json_integer_value(k));
    }
    if (json_is_number(v)) {
        double d = json_number_value(v);
        if ((k = json_object_get(schema, "minimum")) && d < json_number_value(k))
            return fail_num(c, "must be at least", json_number_value(k));
        if ((k = json_object_get(schema, "maximum")) && d > json_number_value(k))
            return fail_num(c, "must be at most", json_number_value(k));
        if ((k = json_object_get(schema, "exclusiveMinimum")) && d <= json_number_value(k))
            return fail_num(c, "must be greater than", json_number_value(k));
        if ((k = json_object_get(schema, "exclusiveMaximum")) && d >= json_number_value(k))
            return fail_num(c, "must be less than", json_number_value(k));
    }
    if (json_is_object(v) && !validate_object(c, schema, v))
        return false;
    if (json_is_array(v) && !validate_array(c, schema, v))
        return false;
    const json_t *alts = json_object_get(schema, "anyOf");
    if (!alts)
        alts = json_object_get(schema, "oneOf");
    if (json_is_array(alts)) {
        size_t i, matches_n = 0;
        const json_t *e;
        char first[512] = "";
        json_array_foreach(alts, i, e)
        {
            char m[512];
            if (matches(c, e, v, m, sizeof(m)))
                matches_n++;
            else if (!first[0])
                snprintf(first, sizeof(first), "%s", m);
        }
        bool one = json_object_get(schema, "oneOf") != NULL;
        if (matches_n == 0 || (one && matches_n > 1)) {
            if (matches_n == 0 && first[0]) {
                snprintf(c->msg, c->msglen, "%s", first);
                return false;
            }
            return fail(c, "matches none or several of the allowed forms");
        }
    }
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(schema, "allOf"), i, e) if (!validate(c, e, v)) return false;
    char m[512];
    if ((k = json_object_get(schema, "not")) && matches(c, k, v, m, sizeof(m)))
        return fail(c, "matches a form that is not allowed");
    if ((k = json_object_get(schema, "if"))) {
        const json_t *branch =
            json_object_get(schema, matches(c, k, v, m, sizeof(m)) ? "then" : "else");
        if (branch && !validate(c, branch, v))
            return false;
    }
    const char *ref = json_string_value(json_object_get(schema, "$ref"));
    if (ref) {
        const json_t *target = resolve_ref(c->root, ref);
        if (!target)
            return true; /* schema_check admits no other reference; an outside one is not fetched */
        if (c->refs >= REF_DEPTH_MAX)
            return fail(c, "the schema refers to itself too deeply");
        c->refs++;
        bool ok = validate(c, target, v);
        c->refs--;
        if (!ok)
            return false;
    }
    return true;
}

bool schema_validate(const json_t *schema, const json_t *value, char *msg, size_t msglen)
{
    struct vctx c = {.msg = msg, .msglen = msglen, .root = schema};
    msg[0] = '\0';
    return validate(&c, schema, value);
}

/* Keywords a built-in schema may use: those validate() enforces, the annotations it passes over,
 * and x-mcp-header (mcp/headers.c). Anything else is refused at registration, so that a typo
 * or a keyword this validator would silently ignore fails loudly at start. */
static const char *const known_keywords[] = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "description",
    "title",
    "default",
    "examples",
    "format",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$schema",
    "pattern",
    "$id",
    "$defs",
    "$ref",
    "$anchor",
    "$comment",
    "enumNames",
    "x-mcp-header",
    NULL,
};

static bool check(const json_t *root, const json_t *schema, char *msg, size_t msglen)
{
    if (json_is_boolean(schema))
        return true;
    if (!json_is_object(schema)) {
        snprintf(msg, msglen, "schema is not an object");
        return false;
    }
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)schema, key, val)
    {
        bool known = false;
        for (const char *const *k = known_keywords; *k && !known; k++)
            known = strcmp(*k, key) == 0;
        if (!known) {
            snprintf(msg, msglen, "unsupported schema keyword '%s'", key);
            return false;
        }
    }
    const json_t *ref = json_object_get(schema, "$ref");
    if (ref && (!json_is_string(ref) || !resolve_ref(root, json_string_value(ref)))) {
        snprintf(msg, msglen,
                 "unsupported $ref (only \"#\" and \"#/$defs/<name>\" of this schema)");
        return false;
    }
    const char *const maps[] = {"properties", "$defs"};
    for (int m = 0; m < 2; m++)
        json_object_foreach(json_object_get(schema, maps[m]), key,
                            val) if (!check(root, val, msg, msglen)) return false;
    const char *const subs[] = {"items", "additionalProperties", "not", "if", "then", "else"};
    const json_t *sub;
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        if ((sub = json_object_get(schema, subs[i])) && !check(root, sub, msg, msglen))
            return false;
    const char *const lists[] = {"anyOf", "oneOf", "allOf"};
    for (int a = 0; a < 3; a++) {
        size_t i;
        json_array_foreach(json_object_get(schema, lists[a]), i,
                           sub) if (!check(root, sub, msg, msglen)) return false;
    }
    return true;
}

bool schema_check(const json_t *schema, char *msg, size_t msglen)
{
    return check(schema, schema, msg, msglen);
}

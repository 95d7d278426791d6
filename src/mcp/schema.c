#include "mcp/schema.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
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
    bool quiet;         /* a branch test: only whether it matches, no message and no path */
};

static bool fail(struct vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(struct vctx *c, const char *fmt, ...)
{
    if (c->quiet)
        return false;
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
    if (c->quiet)
        return false;
    char b[64];
    if (bound == floor(bound) && fabs(bound) < 1e15)
        snprintf(b, sizeof(b), "%.0f", bound);
    else
        snprintf(b, sizeof(b), "%g", bound);
    return fail(c, "%s %s", rule, b);
}

/* Append to the path, cut at its end; returns where it ended before, to put back after. */
static size_t path_push(struct vctx *c, const char *sep, const char *name, size_t n)
{
    size_t base = strlen(c->path);
    if (c->quiet)
        return base;
    size_t room = sizeof(c->path) - 1 - base, k = base ? strlen(sep) : 0;
    if (k > room)
        k = room;
    memcpy(c->path + base, sep, k);
    if (n > room - k)
        n = room - k;
    memcpy(c->path + base + k, name, n);
    c->path[base + k + n] = '\0';
    return base;
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

/* The keywords of one schema object that validate() enforces, found in one pass over its keys
 * (a schema has a few; looking each keyword up by name was most of the cost of a check). */
struct keywords {
    const json_t *type, *constant, *enumeration, *min_length, *max_length, *minimum, *maximum,
        *exclusive_minimum, *exclusive_maximum, *properties, *required, *additional, *items,
        *min_items, *max_items, *any_of, *one_of, *all_of, *negated, *if_, *then, *else_, *ref;
};

static void keywords_of(const json_t *schema, struct keywords *k)
{
    static const struct {
        const char *name;
        size_t off;
    } known[] = {
#define KW(name, field) {name, offsetof(struct keywords, field)}
        KW("type", type),
        KW("const", constant),
        KW("enum", enumeration),
        KW("minLength", min_length),
        KW("maxLength", max_length),
        KW("minimum", minimum),
        KW("maximum", maximum),
        KW("exclusiveMinimum", exclusive_minimum),
        KW("exclusiveMaximum", exclusive_maximum),
        KW("properties", properties),
        KW("required", required),
        KW("additionalProperties", additional),
        KW("items", items),
        KW("minItems", min_items),
        KW("maxItems", max_items),
        KW("anyOf", any_of),
        KW("oneOf", one_of),
        KW("allOf", all_of),
        KW("not", negated),
        KW("if", if_),
        KW("then", then),
        KW("else", else_),
        KW("$ref", ref),
#undef KW
    };
    memset(k, 0, sizeof(*k));
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)schema, key, val)
    {
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
            if (key[0] == known[i].name[0] && strcmp(key, known[i].name) == 0) {
                *(const json_t **)((char *)k + known[i].off) = val;
                break;
            }
    }
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
static bool matches(const struct vctx *c, const json_t *schema, const json_t *v)
{
    struct vctx sub = *c;
    sub.quiet = true;
    return validate(&sub, schema, v);
}

static bool validate_object(struct vctx *c, const struct keywords *k, const json_t *v)
{
    size_t i;
    const json_t *r;
    json_array_foreach(k->required, i, r)
    {
        if (json_is_string(r) && !json_object_get(v, json_string_value(r))) {
            size_t base = path_push(c, ".", json_string_value(r), json_string_length(r));
            fail(c, "is required");
            c->path[base] = '\0';
            return false;
        }
    }
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        size_t base = path_push(c, ".", key, strlen(key));
        const json_t *sub = k->properties ? json_object_get(k->properties, key) : NULL;
        bool ok = true;
        if (sub)
            ok = validate(c, sub, val);
        else if (json_is_false(k->additional))
            ok = fail(c, "is not a known field");
        else if (json_is_object(k->additional))
            ok = validate(c, k->additional, val);
        c->path[base] = '\0';
        if (!ok)
            return false;
    }
    return true;
}

static bool validate_array(struct vctx *c, const struct keywords *k, const json_t *v)
{
    if (k->min_items && json_array_size(v) < (size_t)json_integer_value(k->min_items))
        return fail(c, "must have at least %lld items",
                    (long long)json_integer_value(k->min_items));
    if (k->max_items && json_array_size(v) > (size_t)json_integer_value(k->max_items))
        return fail(c, "must have at most %lld items", (long long)json_integer_value(k->max_items));
    if (!json_is_object(k->items))
        return true;
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e)
    {
        char at[24];
        size_t base = path_push(c, "", at, (size_t)snprintf(at, sizeof(at), "[%zu]", i));
        bool ok = validate(c, k->items, e);
        c->path[base] = '\0';
        if (!ok)
            return false;
    }
    return true;
}

static bool validate(struct vctx *c, const json_t *schema, const json_t *v)
{
    if (json_is_false(schema))
        return fail(c, "is not allowed");
    if (!json_is_object(schema))
        return true;
    struct keywords kw, *k = &kw;
    keywords_of(schema, k);
    if (json_is_string(k->type) && !type_matches(json_string_value(k->type), v)) {
        char want[64];
        snprintf(want, sizeof(want), "%s", json_string_value(k->type));
        const char *article = strchr("aeiou", want[0]) ? "an" : "a";
        return fail(c, "must be %s %s, not %s", article, want, type_name(v));
    }
    if (json_is_array(k->type)) {
        bool any = false;
        size_t i;
        const json_t *e;
        json_array_foreach(k->type, i, e) any =
            any || (json_is_string(e) && type_matches(json_string_value(e), v));
        if (!any)
            return fail(c, "has the wrong type (%s)", type_name(v));
    }
    if (k->constant && !json_equal(k->constant, v))
        return fail(c, "must equal the constant value");
    if (k->enumeration) {
        bool any = false;
        size_t i;
        const json_t *e;
        json_array_foreach(k->enumeration, i, e) any = any || json_equal(e, v);
        if (!any && c->quiet)
            return false;
        if (!any) {
            char list[200] = "";
            json_array_foreach(k->enumeration, i, e)
            {
                if (json_is_string(e) &&
                    strlen(list) + strlen(json_string_value(e)) + 4 < sizeof(list))
                    snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                             i ? ", " : "", json_string_value(e));
            }
            return fail(c, "must be one of: %s", list);
        }
    }
    if (json_is_string(v) && (k->min_length || k->max_length)) {
        size_t n = utf8_len(json_string_value(v), json_string_length(v));
        if (k->min_length && n < (size_t)json_integer_value(k->min_length))
            return fail(c, "must be at least %lld characters long",
                        (long long)json_integer_value(k->min_length));
        if (k->max_length && n > (size_t)json_integer_value(k->max_length))
            return fail(c, "must be at most %lld characters long",
                        (long long)json_integer_value(k->max_length));
    }
    if (json_is_number(v)) {
        double d = json_number_value(v);
        if (k->minimum && d < json_number_value(k->minimum))
            return fail_num(c, "must be at least", json_number_value(k->minimum));
        if (k->maximum && d > json_number_value(k->maximum))
            return fail_num(c, "must be at most", json_number_value(k->maximum));
        if (k->exclusive_minimum && d <= json_number_value(k->exclusive_minimum))
            return fail_num(c, "must be greater than", json_number_value(k->exclusive_minimum));
        if (k->exclusive_maximum && d >= json_number_value(k->exclusive_maximum))
            return fail_num(c, "must be less than", json_number_value(k->exclusive_maximum));
    }
    if (json_is_object(v) && !validate_object(c, k, v))
        return false;
    if (json_is_array(v) && !validate_array(c, k, v))
        return false;
    const json_t *alts = k->any_of ? k->any_of : k->one_of;
    if (json_is_array(alts)) {
        size_t i, matches_n = 0;
        const json_t *e;
        json_array_foreach(alts, i, e) if (matches(c, e, v)) matches_n++;
        bool one = k->one_of != NULL;
        if (matches_n == 0 || (one && matches_n > 1)) {
            /* the message of the first form, which none matched: checked again to say why */
            if (matches_n == 0 && json_array_size(alts) && !c->quiet &&
                !validate(c, json_array_get(alts, 0), v) && c->msg[0])
                return false;
            return fail(c, "matches none or several of the allowed forms");
        }
    }
    size_t i;
    const json_t *e;
    json_array_foreach(k->all_of, i, e) if (!validate(c, e, v)) return false;
    if (k->negated && matches(c, k->negated, v))
        return fail(c, "matches a form that is not allowed");
    if (k->if_) {
        const json_t *branch = matches(c, k->if_, v) ? k->then : k->else_;
        if (branch && !validate(c, branch, v))
            return false;
    }
    const char *ref = json_string_value(k->ref);
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

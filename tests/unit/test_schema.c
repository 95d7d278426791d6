#include <jansson.h>

#include "harness.h"
#include "mcp/schema.h"

static json_t *J(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v) {
        fprintf(stderr, "bad test json: %s: %s\n", text, e.text);
        abort();
    }
    return v;
}

/* Validate value against schema; returns the message ("" when valid). */
static const char *check(const char *schema, const char *value)
{
    static char msg[512];
    json_t *s = J(schema), *v = J(value);
    bool ok = schema_validate(s, v, msg, sizeof(msg));
    json_decref(s);
    json_decref(v);
    if (ok)
        msg[0] = '\0';
    return msg;
}

static const char *obj =
    "{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":5},"
    "\"timeout\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":600000},"
    "\"mode\":{\"enum\":[\"utf8\",\"base64\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":2},"
    "\"nested\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"boolean\"}},"
    "\"additionalProperties\":false}},"
    "\"required\":[\"command\"],\"additionalProperties\":false}";

TEST(valid_object)
{
    CHECK_STR_EQ(
        check(obj, "{\"command\":\"ls\",\"timeout\":5,\"mode\":\"utf8\",\"tags\":[\"a\"]}"), "");
}

TEST(missing_required_names_field)
{
    CHECK_STR_EQ(check(obj, "{}"), "field 'command': is required");
}

TEST(wrong_type_names_field_and_types)
{
    CHECK_STR_EQ(check(obj, "{\"command\":5}"), "field 'command': must be a string, not integer");
    CHECK_STR_EQ(check(obj, "{\"command\":\"x\",\"timeout\":\"5\"}"),
                 "field 'timeout': must be an integer, not string");
}

TEST(bounds)
{
    CHECK_STR_EQ(check(obj, "{\"command\":\"x\",\"timeout\":600001}"),
                 "field 'timeout': must be at most 600000");
    CHECK_STR_EQ(check(obj, "{\"command\":\"x\",\"timeout\":0}"),
                 "field 'timeout': must be at least 1");
    CHECK_STR_EQ(check(obj, "{\"command\":\"\"}"),
                 "field 'command': must be at least 1 characters long");
    CHECK_STR_EQ(check(obj, "{\"command\":\"abcdef\"}"),
                 "field 'command': must be at most 5 characters long");
    /* lengths count characters, not bytes */
    CHECK_STR_EQ(check(obj, "{\"command\":\"\xc3\xa9\xc3\xa9\xc3\xa9\"}"), "");
}

TEST(enum_lists_choices)
{
    CHECK_STR_EQ(check(obj, "{\"command\":\"x\",\"mode\":\"hex\"}"),
                 "field 'mode': must be one of: utf8, base64");
}

TEST(unknown_fields_rejected_with_path)
{
    CHECK_STR_EQ(check(obj, "{\"command\":\"x\",\"extra\":1}"),
                 "field 'extra': is not a known field");
    CHECK_STR_EQ(check(obj, "{\"command\":\"x\",\"nested\":{\"y\":1}}"),
                 "field 'nested.y': is not a known field");
}

TEST(arrays)
{
    CHECK_STR_EQ(check(obj, "{\"command\":\"x\",\"tags\":[\"a\",1]}"),
                 "field 'tags[1]': must be a string, not integer");
    CHECK_STR_EQ(check(obj, "{\"command\":\"x\",\"tags\":[\"a\",\"b\",\"c\"]}"),
                 "field 'tags': must have at most 2 items");
}

TEST(integer_accepts_whole_reals)
{
    CHECK_STR_EQ(check(obj, "{\"command\":\"x\",\"timeout\":5.0}"), "");
    CHECK_STR_EQ(check(obj, "{\"command\":\"x\",\"timeout\":5.5}"),
                 "field 'timeout': must be an integer, not number");
}

TEST(any_of_reports_first_branch)
{
    const char *s =
        "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"object\",\"required\":[\"args\"]}]}";
    CHECK_STR_EQ(check(s, "\"x\""), "");
    CHECK_STR_EQ(check(s, "{\"args\":1}"), "");
    CHECK(check(s, "5")[0] != '\0');
}

TEST(schema_check_rejects_unknown_keywords)
{
    char msg[200];
    json_t *s = J("{\"type\":\"object\",\"properties\":{\"a\":{\"typ\":\"string\"}}}");
    CHECK(!schema_check(s, msg, sizeof(msg)));
    CHECK_STR_CONTAINS(msg, "typ");
    json_decref(s);
    s = J(obj);
    CHECK(schema_check(s, msg, sizeof(msg)));
    json_decref(s);
}

/* The conformance suite's JSON Schema 2020-12 fixture (json_schema_2020_12_tool): composition,
 * conditionals, $anchor and a $ref into $defs, which the validator enforces. */
static const char *schema_2020 =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\","
    "\"$defs\":{\"address\":{\"$anchor\":\"addressDef\",\"type\":\"object\",\"properties\":{"
    "\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"}}}},"
    "\"properties\":{\"name\":{\"type\":\"string\"},\"address\":{\"$ref\":\"#/$defs/address\"},"
    "\"contactMethod\":{\"type\":\"string\",\"enum\":[\"phone\",\"email\"]},"
    "\"phone\":{\"type\":\"string\"},\"email\":{\"type\":\"string\"}},"
    "\"allOf\":[{\"anyOf\":[{\"required\":[\"phone\"]},{\"required\":[\"email\"]}]}],"
    "\"if\":{\"properties\":{\"contactMethod\":{\"const\":\"phone\"}},\"required\":["
    "\"contactMethod\"]},"
    "\"then\":{\"required\":[\"phone\"]},\"else\":{\"required\":[\"email\"]},"
    "\"additionalProperties\":false}";

TEST(composition_and_conditionals_are_enforced)
{
    CHECK_STR_EQ(check(schema_2020, "{\"name\":\"a\",\"email\":\"a@b\"}"), "");
    CHECK_STR_EQ(check(schema_2020, "{\"contactMethod\":\"phone\",\"phone\":\"1\"}"), "");
    /* allOf: neither phone nor email */
    CHECK_STR_EQ(check(schema_2020, "{\"name\":\"a\"}"), "field 'phone': is required");
    /* if contactMethod is phone, then phone is required */
    CHECK_STR_EQ(check(schema_2020, "{\"contactMethod\":\"phone\",\"email\":\"a@b\"}"),
                 "field 'phone': is required");
    /* else email is */
    CHECK_STR_EQ(check(schema_2020, "{\"contactMethod\":\"email\",\"phone\":\"1\"}"),
                 "field 'email': is required");
    /* the $ref into $defs is followed */
    CHECK_STR_EQ(check(schema_2020, "{\"email\":\"a@b\",\"address\":{\"street\":5}}"),
                 "field 'address.street': must be a string, not integer");
    CHECK_STR_EQ(check("{\"not\":{\"type\":\"string\"}}", "\"x\""),
                 "arguments: matches a form that is not allowed");
    CHECK_STR_EQ(check("{\"not\":{\"type\":\"string\"}}", "1"), "");
    CHECK_STR_EQ(check("{\"properties\":{\"a\":false}}", "{\"a\":1}"), "field 'a': is not allowed");
}

TEST(self_reference_is_bounded)
{
    CHECK_STR_EQ(check("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", "1"),
                 "arguments: the schema refers to itself too deeply");
    /* a recursive schema that consumes the value is fine */
    CHECK_STR_EQ(check("{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#\"}}}",
                       "{\"next\":{\"next\":{}}}"),
                 "");
}

TEST(schema_check_admits_2020_12_keywords_and_local_refs_only)
{
    char msg[200];
    json_t *s = J(schema_2020);
    CHECK(schema_check(s, msg, sizeof(msg)));
    json_decref(s);
    s = J("{\"properties\":{\"a\":{\"$ref\":\"https://example.com/s.json\"}}}");
    CHECK(!schema_check(s, msg, sizeof(msg)));
    CHECK_STR_CONTAINS(msg, "$ref");
    json_decref(s);
    s = J("{\"properties\":{\"a\":{\"$ref\":\"#/$defs/missing\"}}}");
    CHECK(!schema_check(s, msg, sizeof(msg)));
    json_decref(s);
    s = J("{\"allOf\":[{\"minLenght\":1}]}");
    CHECK(!schema_check(s, msg, sizeof(msg)));
    CHECK_STR_CONTAINS(msg, "minLenght");
    json_decref(s);
}

TEST_MAIN()

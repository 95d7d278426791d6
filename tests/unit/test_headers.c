/* SEP-2243 header values: the =?base64?...?= decoding, x-mcp-header annotations and the check of
 * Mcp-Param-{Name} headers against a tools/call's arguments (src/mcp/headers.c). */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "mcp/headers.h"

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

/* Decode v; returns the value, or "ERR <errno>: <message>" (static buffer). */
static const char *dec(const char *v)
{
    static char out[8192];
    char *d = NULL, msg[256];
    size_t n = 0;
    int r = mcp_header_decode(v, strlen(v), &d, &n, msg, sizeof(msg));
    if (r < 0) {
        snprintf(out, sizeof(out), "ERR %d: %s", -r, msg);
        return out;
    }
    snprintf(out, sizeof(out), "%.*s", (int)n, d);
    free(d);
    return out;
}

TEST(decode_plain_and_base64)
{
    CHECK_STR_EQ(dec("us-west1"), "us-west1");
    CHECK_STR_EQ(dec("  spaced out \t"), "spaced out"); /* OWS is not part of the value */
    CHECK_STR_EQ(dec("=?base64?SGVsbG8=?="), "Hello");
    CHECK_STR_EQ(dec("=?base64?SGVsbG8sIOS4lueVjA==?="), "Hello, \xe4\xb8\x96\xe7\x95\x8c");
    CHECK_STR_EQ(dec("=?base64?IHBhZGRlZCA=?="), " padded ");
    CHECK_STR_EQ(dec("=?base64?"
                     "?="),
                 ""); /* split: no trigraph */
    /* without both markers a value is literal */
    CHECK_STR_EQ(dec("SGVsbG8="), "SGVsbG8=");
    CHECK_STR_EQ(dec("=?base64?SGVsbG8="), "=?base64?SGVsbG8=");
    CHECK_STR_EQ(dec("SGVsbG8=?="), "SGVsbG8=?=");
    CHECK_STR_EQ(dec("=?BASE64?SGVsbG8=?="), "=?BASE64?SGVsbG8=?="); /* markers are lowercase */
}

TEST(decode_refuses_bad_base64)
{
    CHECK_STR_CONTAINS(dec("=?base64?SGVsbG8?="), "ERR 22: has invalid base64"); /* padding */
    CHECK_STR_CONTAINS(dec("=?base64?SGVs!!!bG8=?="), "ERR 22");                 /* alphabet */
    CHECK_STR_CONTAINS(dec("=?base64?SGVsbG9=?="), "ERR 22"); /* pad bits not zero */
    CHECK_STR_CONTAINS(dec("=?base64?SGVsbA=x?="), "ERR 22"); /* '=' inside */
    CHECK_STR_CONTAINS(dec("=?base64?SGVsbG8_?="), "ERR 22"); /* the URL-safe alphabet */
    CHECK_STR_CONTAINS(dec("=?base64?S===?="), "ERR 22");
}

TEST(decode_refuses_characters_a_header_cannot_carry)
{
    CHECK_STR_CONTAINS(dec("a\x01z"), "ERR 22: has a character a header value cannot carry (0x01)");
    CHECK_STR_CONTAINS(dec("caf\xc3\xa9"), "ERR 22");
    CHECK_STR_CONTAINS(dec("a\x7f"), "ERR 22");
    CHECK_STR_EQ(dec("tab\tinside"), "tab\tinside");
}

TEST(decode_caps_the_value)
{
    char *v = malloc(MCP_PARAM_VALUE_MAX + 2);
    memset(v, 'a', MCP_PARAM_VALUE_MAX);
    v[MCP_PARAM_VALUE_MAX] = '\0';
    CHECK_INT_EQ(strlen(dec(v)), MCP_PARAM_VALUE_MAX);
    v[MCP_PARAM_VALUE_MAX] = 'a';
    v[MCP_PARAM_VALUE_MAX + 1] = '\0';
    CHECK_STR_EQ(dec(v), "ERR 7: is longer than 4096 bytes");
    free(v);
}

/* Annotations of schema: their count, or "ERR: <message>". */
static const char *decls_of(const char *schema, struct mcp_param_decl *d)
{
    static char out[300];
    json_t *s = J(schema);
    char msg[256];
    int n = mcp_param_decls(s, d, msg, sizeof(msg));
    json_decref(s);
    if (n < 0)
        snprintf(out, sizeof(out), "ERR: %s", msg);
    else
        snprintf(out, sizeof(out), "%d", n);
    return out;
}

TEST(annotations_are_found_along_properties)
{
    struct mcp_param_decl d[MCP_PARAM_DECLS_MAX];
    CHECK_STR_EQ(decls_of("{\"type\":\"object\",\"properties\":{"
                          "\"region\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"},"
                          "\"opts\":{\"type\":\"object\",\"properties\":{"
                          "\"tenant\":{\"type\":\"integer\",\"x-mcp-header\":\"Tenant\"}}},"
                          "\"q\":{\"type\":\"string\"}}}",
                          d),
                 "2");
    CHECK_STR_EQ(d[0].name, "Region");
    CHECK_INT_EQ(d[0].depth, 1);
    CHECK_STR_EQ(d[0].path[0], "region");
    CHECK_STR_EQ(d[1].name, "Tenant");
    CHECK_INT_EQ(d[1].depth, 2);
    CHECK_STR_EQ(d[1].path[0], "opts");
    CHECK_STR_EQ(d[1].path[1], "tenant");
    CHECK_STR_EQ(decls_of("{\"type\":\"object\"}", d), "0");
}

TEST(annotations_that_break_the_rules_are_refused)
{
    struct mcp_param_decl d[MCP_PARAM_DECLS_MAX];
    CHECK_STR_CONTAINS(
        decls_of("{\"properties\":{\"s\":{\"type\":\"number\",\"x-mcp-header\":\"Score\"}}}", d),
        "of type number");
    CHECK_STR_CONTAINS(
        decls_of("{\"properties\":{\"o\":{\"type\":\"object\",\"x-mcp-header\":\"O\"}}}", d),
        "of type object");
    CHECK_STR_CONTAINS(
        decls_of("{\"properties\":{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"My Region\"}}}",
                 d),
        "not an HTTP token");
    CHECK_STR_CONTAINS(
        decls_of("{\"properties\":{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"R:1\"}}}", d),
        "not an HTTP token");
    CHECK_STR_CONTAINS(
        decls_of("{\"properties\":{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"\"}}}", d),
        "not an HTTP token");
    CHECK_STR_CONTAINS(decls_of("{\"properties\":{"
                                "\"a\":{\"type\":\"string\",\"x-mcp-header\":\"MyField\"},"
                                "\"b\":{\"type\":\"string\",\"x-mcp-header\":\"myfield\"}}}",
                                d),
                       "used twice");
    /* reachable through properties alone */
    CHECK_STR_CONTAINS(
        decls_of("{\"properties\":{\"l\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
                 "\"x-mcp-header\":\"Item\"}}}}",
                 d),
        "through properties alone");
    CHECK_STR_CONTAINS(decls_of("{\"anyOf\":[{\"properties\":{\"a\":{\"type\":\"string\","
                                "\"x-mcp-header\":\"A\"}}}]}",
                                d),
                       "through properties alone");
    CHECK_STR_CONTAINS(decls_of("{\"$defs\":{\"x\":{\"type\":\"string\",\"x-mcp-header\":\"X\"}},"
                                "\"properties\":{\"a\":{\"$ref\":\"#/$defs/x\"}}}",
                                d),
                       "through properties alone");
    CHECK_STR_CONTAINS(decls_of("{\"type\":\"string\",\"x-mcp-header\":\"Root\"}", d),
                       "through properties alone");
    /* caps: how many, and how deep */
    char big[4096] = "{\"properties\":{";
    for (int i = 0; i <= MCP_PARAM_DECLS_MAX; i++)
        snprintf(big + strlen(big), sizeof(big) - strlen(big),
                 "%s\"p%d\":{\"type\":\"string\",\"x-mcp-header\":\"H%d\"}", i ? "," : "", i, i);
    strcat(big, "}}");
    CHECK_STR_CONTAINS(decls_of(big, d), "more than 16 x-mcp-header annotations");
    CHECK_STR_CONTAINS(
        decls_of("{\"properties\":{\"a\":{\"properties\":{\"b\":{\"properties\":{\"c\":{"
                 "\"properties\":{\"d\":{\"properties\":{\"e\":{\"type\":\"string\","
                 "\"x-mcp-header\":\"Deep\"}}}}}}}}}}}",
                 d),
        "more than 4 properties deep");
    /* a name of 63 characters is the longest */
    char name[80], schema[300];
    memset(name, 'N', 63);
    name[63] = '\0';
    snprintf(schema, sizeof(schema),
             "{\"properties\":{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"%s\"}}}", name);
    CHECK_STR_EQ(decls_of(schema, d), "1");
    strcat(name, "N");
    snprintf(schema, sizeof(schema),
             "{\"properties\":{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"%s\"}}}", name);
    CHECK_STR_CONTAINS(decls_of(schema, d), "not an HTTP token of 1 to 63 characters");
    /* subschemas nested past 16 levels are refused rather than walked */
    char deep[1024] = "";
    for (int i = 0; i < 17; i++)
        strcat(deep, "{\"not\":");
    strcat(deep, "{}");
    for (int i = 0; i < 17; i++)
        strcat(deep, "}");
    CHECK_STR_CONTAINS(decls_of(deep, d), "nests deeper than 16 levels");
    deep[0] = '\0';
    for (int i = 0; i < 16; i++)
        strcat(deep, "{\"not\":");
    strcat(deep, "{}");
    for (int i = 0; i < 16; i++)
        strcat(deep, "}");
    CHECK_STR_EQ(decls_of(deep, d), "0");
}

static struct mcp_param_decl fixture[MCP_PARAM_DECLS_MAX];
static int nfixture;

static void load_fixture(void)
{
    json_t *s = J("{\"type\":\"object\",\"properties\":{"
                  "\"region\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"},"
                  "\"priority\":{\"type\":\"integer\",\"x-mcp-header\":\"Priority\"},"
                  "\"verbose\":{\"type\":\"boolean\",\"x-mcp-header\":\"Verbose\"},"
                  "\"opts\":{\"type\":\"object\",\"properties\":{"
                  "\"tenant\":{\"type\":\"string\",\"x-mcp-header\":\"Tenant\"}}}}}");
    char msg[256];
    nfixture = mcp_param_decls(s, fixture, msg, sizeof(msg));
    json_decref(s);
}

/* Check args against headers given as "Name: value" lines; "" when they agree, else the message. */
static const char *param_check(const char *args, const char *const *lines, bool truncated)
{
    static char msg[512];
    struct mcp_header_value h[8];
    size_t n = 0;
    for (; lines && lines[n]; n++) {
        const char *colon = strchr(lines[n], ':');
        h[n] = (struct mcp_header_value){lines[n], (size_t)(colon - lines[n]), colon + 2,
                                         strlen(colon + 2)};
    }
    json_t *a = J(args);
    int r = mcp_param_check(fixture, (size_t)nfixture, a, h, n, truncated, msg, sizeof(msg));
    json_decref(a);
    if (r == 0)
        msg[0] = '\0';
    return msg;
}

TEST(headers_must_match_the_arguments)
{
    load_fixture();
    CHECK_INT_EQ(nfixture, 4);
    /* nothing annotated given, nothing sent */
    CHECK_STR_EQ(param_check("{\"q\":1}", NULL, false), "");
    /* plain, base64, names without regard to case */
    const char *ok1[] = {"Region: us-west1", NULL};
    CHECK_STR_EQ(param_check("{\"region\":\"us-west1\"}", ok1, false), "");
    const char *ok2[] = {"region: =?base64?SGVsbG8sIOS4lueVjA==?=", NULL};
    CHECK_STR_EQ(param_check("{\"region\":\"Hello, \xe4\xb8\x96\xe7\x95\x8c\"}", ok2, false), "");
    /* integers numerically, booleans by name, a nested property by its path */
    const char *ok3[] = {"Priority: 42.0", "VERBOSE: false", "Tenant: acme", NULL};
    CHECK_STR_EQ(param_check("{\"priority\":42,\"verbose\":false,\"opts\":{\"tenant\":\"acme\"}}",
                             ok3, false),
                 "");
    /* a null argument is an absent one */
    CHECK_STR_EQ(param_check("{\"region\":null}", NULL, false), "");
    /* headers nothing declares are ignored */
    const char *other[] = {"Unknown: x", NULL};
    CHECK_STR_EQ(param_check("{}", other, false), "");
}

TEST(headers_that_disagree_are_refused)
{
    load_fixture();
    CHECK_STR_EQ(param_check("{\"region\":\"eu\"}", NULL, false),
                 "Header mismatch: Mcp-Param-Region header is required when arguments.region is "
                 "given");
    const char *us[] = {"Region: us", NULL};
    CHECK_STR_EQ(param_check("{\"region\":\"eu\"}", us, false),
                 "Header mismatch: Mcp-Param-Region header value 'us' does not match body value "
                 "'eu' (arguments.region)");
    CHECK_STR_EQ(param_check("{}", us, false),
                 "Header mismatch: Mcp-Param-Region header is sent but arguments.region is absent "
                 "or null");
    const char *twice[] = {"Region: eu", "region: eu", NULL};
    CHECK_STR_EQ(param_check("{\"region\":\"eu\"}", twice, false),
                 "Header mismatch: Mcp-Param-Region header is sent twice");
    const char *bad[] = {"Region: =?base64?ZXU?=", NULL};
    CHECK_STR_CONTAINS(param_check("{\"region\":\"eu\"}", bad, false),
                       "Header mismatch: Mcp-Param-Region header has invalid base64");
    const char *num[] = {"Priority: 42x", NULL};
    CHECK_STR_CONTAINS(param_check("{\"priority\":42}", num, false), "does not match");
    const char *hex[] = {"Priority: 0x2a", NULL};
    CHECK_STR_CONTAINS(param_check("{\"priority\":42}", hex, false), "does not match");
    const char *yes[] = {"Verbose: TRUE", NULL};
    CHECK_STR_CONTAINS(param_check("{\"verbose\":true}", yes, false), "does not match");
    const char *tenant[] = {"Tenant: acme", NULL};
    CHECK_STR_CONTAINS(param_check("{\"opts\":{\"tenant\":\"other\"}}", tenant, false),
                       "(arguments.opts.tenant)");
    /* a NUL byte decoded from base64 does not end the comparison early */
    const char *nul[] = {"Region: =?base64?ZXUAeA==?=", NULL};
    CHECK_STR_CONTAINS(param_check("{\"region\":\"eu\"}", nul, false), "'eu\\x00x'");
    /* more headers than were collected: refused when the tool declares any */
    CHECK_STR_EQ(param_check("{\"region\":\"us\"}", us, true),
                 "Header mismatch: more than 32 Mcp-Param-* headers");
    char msg[128];
    CHECK_INT_EQ(mcp_param_check(NULL, 0, NULL, NULL, 0, true, msg, sizeof(msg)), 0);
}

TEST_MAIN()

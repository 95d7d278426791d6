/* libFuzzer target: SEP-2243 header values (src/mcp/headers.c). The input is one header value:
 * decoded on its own, where a =?base64?...?= value that decodes must be the one strict encoding
 * of what it decodes to; then sent as each Mcp-Param-* header of a tool with annotations of
 * every type, against fixed arguments. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "mcp/headers.h"

static struct mcp_param_decl decls[MCP_PARAM_DECLS_MAX];
static int ndecls;
static json_t *args;

static void setup(void)
{
    json_t *schema = json_loads("{\"type\":\"object\",\"properties\":{"
                                "\"region\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"},"
                                "\"priority\":{\"type\":\"integer\",\"x-mcp-header\":\"Priority\"},"
                                "\"verbose\":{\"type\":\"boolean\",\"x-mcp-header\":\"Verbose\"},"
                                "\"o\":{\"type\":\"object\",\"properties\":{"
                                "\"t\":{\"type\":\"string\",\"x-mcp-header\":\"Tenant\"}}}}}",
                                0, NULL);
    char msg[256];
    ndecls = mcp_param_decls(schema, decls, msg, sizeof(msg));
    if (ndecls != 4)
        abort();
    json_decref(schema);
    args = json_loads("{\"region\":\"Hello\",\"priority\":42,\"verbose\":true,\"o\":{\"t\":\"a\"}}",
                      0, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!args)
        setup();
    const char *v = (const char *)data;
    char *out = NULL, msg[256];
    size_t n = 0;
    int r = mcp_header_decode(v, size, &out, &n, msg, sizeof(msg));
    if (r != 0 && r != -EINVAL && r != -E2BIG)
        abort();
    if (r == 0) {
        if (out[n] != '\0')
            abort();
        size_t a = 0, b = size;
        while (a < b && (v[a] == ' ' || v[a] == '\t'))
            a++;
        while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
            b--;
        if (b - a >= 11 && memcmp(v + a, "=?base64?", 9) == 0 && memcmp(v + b - 2, "?=", 2) == 0) {
            char *again = malloc(4 * (n / 3 + 1) + 1);
            size_t len = base64_encode(out, n, again);
            if (len != b - a - 11 || memcmp(again, v + a + 9, len) != 0)
                abort();
            free(again);
        } else if (n != b - a || memcmp(out, v + a, n) != 0) {
            abort();
        }
        free(out);
    }
    static const char *const names[] = {"Region", "priority", "VERBOSE", "Tenant"};
    struct mcp_header_value h[4];
    for (int i = 0; i < 4; i++)
        h[i] = (struct mcp_header_value){names[i], strlen(names[i]), v, size};
    char why[512];
    for (size_t k = 0; k <= 4; k++) {
        r = mcp_param_check(decls, (size_t)ndecls, args, h, k, false, why, sizeof(why));
        if (r != 0 && r != -EINVAL)
            abort();
        /* every annotated argument is given, so a request without all four headers fails */
        if (k < 4 && r == 0)
            abort();
    }
    return 0;
}

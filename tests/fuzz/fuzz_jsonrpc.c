/* libFuzzer target: one POST /mcp body through the whole protocol layer (envelope, version era,
 * header checks, dispatch, schema validation, replies). The first input byte picks the headers. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcp/mcp.h"
#include "mcp/tools.h"

static void sink_reply(void *p, int status, const char *body, size_t len)
{
    (void)p, (void)body, (void)len;
    if (status < 200 || status > 599)
        __builtin_trap();
}
static void sink_event(void *p, const char *json, size_t len)
{
    (void)p, (void)json, (void)len;
}
static void sink_end(void *p)
{
    (void)p;
}
static const struct mcp_sink_ops ops = {sink_reply, sink_event, sink_end};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct mcp_server *srv;
    if (!srv) {
        static const struct mcp_server_info info = {.name = "fuzz", .version = "0"};
        srv = mcp_server_new(&info);
        tools_server_register(srv);
    }
    static const char *const versions[] = {NULL,         "2025-03-26", "2025-06-18",
                                           "2025-11-25", "2026-07-28", "bogus"};
    static const char *const methods[] = {NULL, "tools/call", "tools/list", "server/discover"};
    static const char *const names[] = {NULL, "server_info",
                                        "=?base64?c2VydmVyX2luZm8=?=", "=?base64?!!?="};
    uint8_t sel = size ? data[0] : 0;
    struct mcp_request_info info = {
        .protocol_version = versions[sel % 6],
        .mcp_method = methods[(sel / 6) % 4],
        .mcp_name = names[(sel / 24) % 4],
        .accepts_sse = sel & 0x80,
    };
    strcpy(info.principal.user_name, "fuzz");
    if (size)
        data++, size--;
    /* Every built-in tool answers synchronously, so the exchange must complete here. */
    if (mcp_exchange_start(srv, &info, (const char *)data, size, &ops, NULL) != NULL)
        __builtin_trap();
    return 0;
}

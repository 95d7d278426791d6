/* Fuzz the agent bridge's reading of a warm OpenCode server: the input is an event stream, cut
 * into lines and framed as server-sent events, and every event is followed as the bridge follows
 * it (from the start, or after an earlier prompt's message). It must never crash, and every line it
 * prints must be one JSON object the engine's parser (opencode_parse_event) accepts, ending in one
 * newline and holding no other. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runs/agent.h"
#include "sandbox/opencode_serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct oc_follow f;
    oc_follow_init(&f, "ses_fuzz", true);
    /* half the inputs follow a prompt posted after an earlier one: until a newer message shows */
    if (size && (data[0] & 1))
        oc_follow_after(&f, "msg_fuzz");
    struct oc_sse s;
    oc_sse_init(&s, 4096);
    const char *p = (const char *)data, *end = p + size;
    while (p <= end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *ev;
        size_t evlen;
        bool over;
        if (oc_sse_line(&s, p, len, &ev, &evlen, &over) && !over) {
            char perm[64];
            char *line = oc_follow_event(&f, ev, evlen, 1, perm, sizeof(perm));
            if (strlen(perm) >= sizeof(perm))
                __builtin_trap();
            if (line) {
                size_t n = strlen(line);
                if (n == 0 || line[n - 1] != '\n' || memchr(line, '\n', n - 1))
                    __builtin_trap();
                struct agent_event e;
                if (opencode_parse_event(line, n, &e) != 0)
                    __builtin_trap();
                agent_event_clear(&e);
                free(line);
            }
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    oc_sse_free(&s);

    char in[256], out[3 * 255 + 1];
    size_t n = size < sizeof(in) - 1 ? size : sizeof(in) - 1;
    memcpy(in, data, n);
    in[n] = '\0';
    if (!oc_uri_component(in, out, sizeof(out)))
        __builtin_trap(); /* three bytes for each is always enough */
    return 0;
}

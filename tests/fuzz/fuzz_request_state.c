/* Fuzz the requestState opener: arbitrary bytes from a client must be refused without crashing
 * (nothing but a state this server sealed opens), and any JSON value sealed as a state must open
 * back to an equal value for its scope only. */
#include <errno.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/request_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned char key[SEAL_KEY_BYTES];
    static int ready;
    if (!ready) {
        if (sodium_init() < 0)
            __builtin_trap();
        memset(key, 7, sizeof(key));
        ready = 1;
    }
    const struct mcp_state_scope scope = {"usr_fuzz", "tools/call", "fuzz"};
    json_t *state = NULL;
    struct err err = {0};
    int r = mcp_state_open(key, &scope, (const char *)data, size, 0, &state, &err);
    if (r == 0 || (r != -E2BIG && r != -EBADMSG))
        __builtin_trap();

    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (v) {
        char *text = NULL;
        r = mcp_state_seal(key, &scope, v, 1000, 1000, &text, &err);
        if (r == 0) {
            if (mcp_state_open(key, &scope, text, strlen(text), 1999, &state, &err) != 0 ||
                !json_equal(state, v))
                __builtin_trap();
            json_decref(state);
            const struct mcp_state_scope other = {"usr_fuzz", "tools/call", "fuzz2"};
            if (mcp_state_open(key, &other, text, strlen(text), 1999, &state, &err) != -EXDEV ||
                mcp_state_open(key, &scope, text, strlen(text), 2000, &state, &err) != -ETIME)
                __builtin_trap();
            free(text);
        } else if (r != -E2BIG) {
            __builtin_trap();
        }
        json_decref(v);
    }
    return 0;
}

/* Fuzz the proxy token verifier: arbitrary bytes as a token must be refused or verified without
 * crashing, and a verified token must carry well-formed claims. */
#include <stdint.h>
#include <string.h>

#include "proxy/token.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char key[] = "fuzz-key-fuzz-key-fuzz-key-fuzz-";
    char tok[PROXY_TOKEN_MAX + 2];
    if (size > PROXY_TOKEN_MAX + 1)
        size = PROXY_TOKEN_MAX + 1;
    memcpy(tok, data, size);
    tok[size] = '\0';
    struct proxy_claims c;
    struct err err = {0};
    if (proxy_token_verify(key, sizeof(key) - 1, tok, size, 0, &c, &err) == 0) {
        if (c.nservices < 0 || c.nservices > PROXY_SERVICES_MAX)
            __builtin_trap();
    }
    return 0;
}

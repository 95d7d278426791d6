/* libFuzzer target: the fast JSON writer gives the same bytes as jansson for any value jansson
 * parses (NUL bytes in strings and keys included), and its text parses back to an equal value. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_write.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t err;
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!v)
        return 0;
    size_t len;
    char *ours = json_write_text(v, &len);
    char *theirs = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!theirs || strlen(theirs) != len || memcmp(ours, theirs, len) != 0)
        abort();
    json_t *back = json_loadb(ours, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!back || !json_equal(v, back))
        abort();
    json_decref(back);
    free(theirs);
    free(ours);
    json_decref(v);
    return 0;
}

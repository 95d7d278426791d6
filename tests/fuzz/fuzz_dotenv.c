/* libFuzzer target: the .dev.vars parser. */
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config cfg = {0};
    struct err err = {0};
    config_parse_dotenv(&cfg, (const char *)data, size, &err);
    config_release(&cfg);
    return 0;
}

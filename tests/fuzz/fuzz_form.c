/* libFuzzer target: the form and query-string decoder of the authorization server. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "auth/form.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct form f;
    struct err err = {0};
    if (form_parse((const char *)data, size, &f, &err) == 0) {
        for (size_t i = 0; i < f.n; i++)
            if (strlen(f.f[i].value) > FORM_VALUE_MAX || form_get(&f, f.f[i].name) != f.f[i].value)
                __builtin_trap();
        form_release(&f);
    }
    return 0;
}

#include "base/err.h"

#include <stdio.h>
#include <string.h>

int err_set(struct err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int err_wrap(struct err *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char prefix[256], old[sizeof(err->msg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
    return err->code;
}

void err_clear(struct err *err)
{
    err->code = 0;
    err->msg[0] = '\0';
}

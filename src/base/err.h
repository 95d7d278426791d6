#pragma once
/* Error reporting: functions return 0 or a negative errno and describe the failure in a
 * caller-provided struct err (on the stack, no allocation). */

#include <stdarg.h>

struct err {
    int code; /* negative errno, 0 when unset */
    char msg[512];
};

/* Set *err (if non-NULL) to code and a formatted message; returns code (negative) so callers
 * can write `return err_set(err, -errno, "open '%s'", path);`. */
int err_set(struct err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prefix the existing message with a formatted context ("ctx: old message"); returns err->code. */
int err_wrap(struct err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clear an error. */
void err_clear(struct err *err);

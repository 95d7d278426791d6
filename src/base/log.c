#include "base/log.h"

#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"

static enum log_level min_level = LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_set_level(enum log_level level)
{
    min_level = level;
}

int log_parse_level(const char *s, enum log_level *out)
{
    for (int i = LOG_DEBUG; i <= LOG_ERROR; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

void log_write(enum log_level level, const char *fmt, ...)
{
    if (level < min_level)
        return;
    char line[2048], ts[32];
    time_format_rfc3339(time_now_ms(), ts);
    int n = snprintf(line, sizeof(line), "%s %s ", ts, level_names[level]);
    size_t room = sizeof(line) - 1 - (size_t)n; /* the newline's byte kept */
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, room + 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m < room ? (size_t)m : room);
    for (size_t i = 0; i < len; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[len++] = '\n';
    /* One write per line keeps lines whole when several processes share stderr (unbuffered, so
     * this keeps its order with what stdio writes there). */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

/* The keys of log_ratelimit, each with its current one-second window. */
struct rate_key {
    char key[64]; /* "" when free */
    int64_t window_ms, used_ms;
    unsigned n;    /* lines allowed in the window */
    uint64_t held; /* lines held back since the last one allowed */
};
static struct rate_key rate_keys[LOG_RATE_KEYS];

bool log_ratelimit(const char *key, unsigned per_second, int64_t now_ms, uint64_t *suppressed)
{
    size_t klen = strnlen(key, sizeof(rate_keys[0].key) - 1);
    int slot = -1, oldest = 0;
    for (int i = 0; i < LOG_RATE_KEYS; i++) {
        if (rate_keys[i].key[0] && strncmp(rate_keys[i].key, key, klen) == 0 &&
            rate_keys[i].key[klen] == '\0') {
            slot = i;
            break;
        }
        if (!rate_keys[i].key[0] ||
            (rate_keys[oldest].key[0] && rate_keys[i].used_ms < rate_keys[oldest].used_ms))
            oldest = i;
    }
    if (slot < 0) {
        slot = oldest;
        memset(&rate_keys[slot], 0, sizeof(rate_keys[slot]));
        memcpy(rate_keys[slot].key, key, klen);
        rate_keys[slot].window_ms = now_ms;
    }
    struct rate_key *k = &rate_keys[slot];
    k->used_ms = now_ms;
    if (now_ms - k->window_ms >= 1000 || now_ms < k->window_ms) {
        k->window_ms = now_ms;
        k->n = 0;
    }
    if (k->n >= per_second) {
        k->held++;
        if (suppressed)
            *suppressed = k->held;
        return false;
    }
    k->n++;
    if (suppressed)
        *suppressed = k->held;
    k->held = 0;
    return true;
}

void crash_point(const char *name)
{
    const char *at = getenv("SANDBOX_MCP_TEST_CRASH_AT");
    if (!at || strcmp(at, name) != 0)
        return;
    log_warn("crash point=%s: killed as SANDBOX_MCP_TEST_CRASH_AT says", name);
    raise(SIGKILL);
}

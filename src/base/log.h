#pragma once
/* One line per event on stderr: "<time> <level> <event> key=value ...". Secrets (API keys,
 * tokens, JWTs) are never passed here. Safe on the main loop; not async-signal-safe. */

#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Set the minimum level printed; parse "debug|info|warn|error" (returns -1 if unknown). */
void log_set_level(enum log_level level);
int log_parse_level(const char *s, enum log_level *out);

void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_write(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_write(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_write(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_write(LOG_ERROR, __VA_ARGS__)

/* Whether one more line of kind key may be written at now_ms (any clock in milliseconds, the
 * same for every call): at most per_second lines of each key in each one-second window, so that
 * an event a client can repeat at will (a sandbox's connection attempts, say) cannot flood the
 * log. *suppressed (may be NULL) is set to how many lines of key were held back since the last one
 * allowed (this one included when it is held back), for the caller to put in the line it writes.
 * Keys are the caller's non-empty strings (an event, or an event and a sandbox id), cut at 63
 * bytes; the LOG_RATE_KEYS most recently used are kept, and a key forgotten to make room starts
 * afresh, its count of held back lines lost. per_second 0 holds back every line. Main thread
 * only. */
#define LOG_RATE_KEYS 256
bool log_ratelimit(const char *key, unsigned per_second, int64_t now_ms, uint64_t *suppressed);

/* Where a test may have the server die as kill -9 would: when the environment's
 * SANDBOX_MCP_TEST_CRASH_AT is name, a line is logged and the process killed with SIGKILL here.
 * Nothing happens otherwise (an operator never sets it). */
void crash_point(const char *name);

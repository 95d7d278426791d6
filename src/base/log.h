#pragma once
/* One line per event on stderr: "<time> <level> <event> key=value ...". Secrets (API keys,
 * tokens, JWTs) are never passed here. Safe on the main loop; not async-signal-safe. */

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Set the minimum level printed; parse "debug|info|warn|error" (returns -1 if unknown). */
void log_set_level(enum log_level level);
int log_parse_level(const char *s, enum log_level *out);

void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_write(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_write(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_write(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_write(LOG_ERROR, __VA_ARGS__)

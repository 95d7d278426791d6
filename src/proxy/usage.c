/* Token usage from provider responses. Anthropic: message_start carries input (and cache)
 * tokens, message_delta the running output count; a non-streamed reply has both in "usage".
 * OpenAI: "usage" with prompt_tokens and completion_tokens (in the last chunk of a stream when
 * the client asked for it). Events and bodies are capped; what does not parse counts nothing. */
#include "proxy/proxy_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define USAGE_EVENT_MAX (1 << 20)

void usage_init(struct usage_parser *u, enum usage_kind kind, bool sse)
{
    memset(u, 0, sizeof(*u));
    u->kind = kind;
    u->sse = sse;
}

static int64_t int_at(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
}

static void take_usage(struct usage_parser *u, const json_t *usage, bool delta)
{
    if (!json_is_object(usage))
        return;
    if (u->kind == USAGE_ANTHROPIC) {
        int64_t in = int_at(usage, "input_tokens") + int_at(usage, "cache_creation_input_tokens") +
                     int_at(usage, "cache_read_input_tokens");
        if (in)
            u->input = in;
        if (json_object_get(usage, "output_tokens"))
            u->output = int_at(usage, "output_tokens"); /* cumulative in message_delta */
        (void)delta;
    } else {
        if (json_object_get(usage, "prompt_tokens"))
            u->input = int_at(usage, "prompt_tokens");
        if (json_object_get(usage, "completion_tokens"))
            u->output = int_at(usage, "completion_tokens");
        if (json_object_get(usage, "input_tokens"))
            u->input = int_at(usage, "input_tokens"); /* the Responses API */
        if (json_object_get(usage, "output_tokens"))
            u->output = int_at(usage, "output_tokens");
    }
}

static void parse_json(struct usage_parser *u, const char *text, size_t len)
{
    json_error_t jerr;
    json_t *d = json_loadb(text, len, 0, &jerr);
    if (!json_is_object(d)) {
        json_decref(d);
        return;
    }
    take_usage(u, json_object_get(d, "usage"), false);
    const json_t *msg = json_object_get(d, "message"); /* anthropic message_start */
    if (json_is_object(msg))
        take_usage(u, json_object_get(msg, "usage"), false);
    const json_t *resp = json_object_get(d, "response"); /* openai responses stream */
    if (json_is_object(resp))
        take_usage(u, json_object_get(resp, "usage"), false);
    json_decref(d);
}

static void append(struct usage_parser *u, const char *data, size_t len)
{
    if (u->overflow)
        return;
    if (u->len + len > USAGE_EVENT_MAX) {
        u->overflow = true;
        return;
    }
    if (u->len + len + 1 > u->cap) {
        u->cap = (u->len + len + 1) * 2;
        u->buf = xrealloc(u->buf, u->cap);
    }
    memcpy(u->buf + u->len, data, len);
    u->len += len;
    u->buf[u->len] = '\0';
}

/* One complete SSE line (without its newline): keep the JSON of "data:" lines of this event. */
static void sse_line(struct usage_parser *u, const char *line, size_t len)
{
    if (len && line[len - 1] == '\r')
        len--;
    if (len == 0) { /* end of event */
        if (!u->overflow && u->len)
            parse_json(u, u->buf, u->len);
        u->len = 0;
        u->overflow = false;
        return;
    }
    if (len >= 5 && memcmp(line, "data:", 5) == 0) {
        line += 5;
        len -= 5;
        if (len && line[0] == ' ')
            line++, len--;
        append(u, line, len);
    }
}

/* A piece of a line; complete when its newline was seen. A line longer than the event cap is
 * dropped (and spoils its event). */
static void sse_piece(struct usage_parser *u, const char *data, size_t len, bool complete)
{
    if (!u->line_overflow) {
        if (u->line_len + len > USAGE_EVENT_MAX) {
            u->line_overflow = true;
            u->overflow = true;
        } else {
            if (u->line_len + len + 1 > u->line_cap) {
                u->line_cap = (u->line_len + len + 1) * 2;
                u->line = xrealloc(u->line, u->line_cap);
            }
            memcpy(u->line + u->line_len, data, len);
            u->line_len += len;
        }
    }
    if (!complete)
        return;
    if (!u->line_overflow)
        sse_line(u, u->line ? u->line : "", u->line_len);
    u->line_len = 0;
    u->line_overflow = false;
}

void usage_feed(struct usage_parser *u, const char *data, size_t len)
{
    if (u->kind == USAGE_NONE)
        return;
    if (!u->sse) {
        append(u, data, len);
        return;
    }
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        if (data[i] != '\n')
            continue;
        sse_piece(u, data + start, i - start, true);
        start = i + 1;
    }
    if (start < len)
        sse_piece(u, data + start, len - start, false);
}

void usage_finish(struct usage_parser *u)
{
    if (u->kind != USAGE_NONE && !u->sse && !u->overflow && u->len)
        parse_json(u, u->buf, u->len);
    free(u->buf);
    free(u->line);
    u->buf = u->line = NULL;
}

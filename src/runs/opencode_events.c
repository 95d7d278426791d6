/* OpenCode's event stream (`opencode run --format json`, checked against 1.18.33): one object
 * per line, {"type", "timestamp", "sessionID", "part"}, where part is OpenCode's message part:
 *   step_start   part.type "step-start"
 *   tool_use     part.tool, part.state {status "completed" | "error", input, output | error,
 *                title}; printed once the call is over
 *   step_finish  part.reason, part.tokens {input, output, reasoning, cache {read, write}},
 *                part.cost
 *   text         part.text, printed once the block is complete
 *   reasoning    part.text (only with --thinking)
 * and, when the session fails (OpenCode then exits with status 1), no part but
 *   error        error {name, data {message, statusCode?, isRetryable?, responseBody?, ...}}
 * The tests in tests/unit/test_opencode.c carry lines taken from the real program. */
#include "runs/agent.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/utf8.h"
#include "base/util.h"

/* Each piece of a summary is cut to this many bytes before its whitespace is collapsed: plenty
 * for a 200-byte line, and a megabyte-long command costs no more than a short one. */
#define PIECE_MAX 1024
/* The part of a summary kept for a tool's status, as in " (error)". */
#define STATUS_MAX 32
/* Beyond 2^53 numbers are not counts or times anyone meant (and some are read as doubles, which
 * could overflow int64_t). */
#define NUM_MAX 9007199254740992.0

static const char ellipsis[] = "\xE2\x80\xA6"; /* U+2026 */

/* --- reading values, tolerant of every wrong type --- */

static const char *str_at(const json_t *o, const char *key, size_t *n)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_string(v))
        return NULL;
    *n = json_string_length(v);
    return json_string_value(v);
}

static bool ascii_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!ascii_space(s[i]))
            return false;
    return true;
}

/* The string at key unless it is missing, not a string, or only whitespace. */
static const char *text_at(const json_t *o, const char *key, size_t *n)
{
    const char *s = str_at(o, key, n);
    return s && !blank(s, *n) ? s : NULL;
}

static double num_at(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        return 0;
    double d = json_number_value(v);
    return isfinite(d) && fabs(d) <= NUM_MAX ? d : 0;
}

static int64_t count_at(const json_t *o, const char *key)
{
    double d = num_at(o, key);
    return d > 0 ? (int64_t)d : 0;
}

static bool str_is(const char *s, size_t n, const char *lit)
{
    return s && strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* A malloc'd copy of n bytes of UTF-8 (as jansson hands out, NULs allowed) with NULs turned into
 * U+FFFD, cut to at most cap bytes on a character boundary. */
static char *capped_copy(const char *s, size_t n, size_t cap, bool *truncated)
{
    if (n > cap) {
        n = utf8_boundary(s, cap);
        *truncated = true;
    }
    size_t m;
    char *out = utf8_sanitize(s, n, &m);
    if (m > cap) { /* NULs grew it */
        m = utf8_boundary(out, cap);
        out[m] = '\0';
        *truncated = true;
    }
    return out;
}

/* A message from a JSON value: a string as it is, anything else but null as compact JSON. */
static char *message_of(const json_t *v, size_t cap, bool *truncated)
{
    if (json_is_string(v))
        return capped_copy(json_string_value(v), json_string_length(v), cap, truncated);
    if (!v || json_is_null(v))
        return NULL;
    _cleanup_free_ char *dump = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    return dump ? capped_copy(dump, strlen(dump), cap, truncated) : NULL;
}

/* Narrow s to its first line that is not blank. */
static void first_line(const char **s, size_t *n)
{
    const char *p = *s, *end = *s + *n;
    while (p < end && ascii_space(*p))
        p++;
    const char *q = p;
    while (q < end && *q != '\n' && *q != '\r')
        q++;
    *s = p;
    *n = (size_t)(q - p);
}

/* Narrow a path to its last component ("/x/hello.txt" -> "hello.txt"), or leave it whole when
 * that is empty ("/"). */
static void basename_of(const char **s, size_t *n)
{
    size_t end = *n;
    while (end > 0 && (*s)[end - 1] == '/')
        end--;
    size_t start = end;
    while (start > 0 && (*s)[start - 1] != '/')
        start--;
    if (start < end) {
        *s += start;
        *n = end - start;
    }
}

/* --- one-line summaries --- */

/* Whether the character at p (valid UTF-8, n > 0 bytes left) reads as whitespace in a timeline:
 * ASCII whitespace and controls, C1 controls (NEL among them), no-break space, and the Unicode
 * line and paragraph separators. Sets *len to its length in bytes. */
static bool blank_char(const unsigned char *p, size_t n, size_t *len)
{
    unsigned char c = p[0];
    *len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (*len > n)
        *len = n; /* cannot happen on sanitized text; keeps the loop finite regardless */
    if (c <= 0x20 || c == 0x7F)
        return true;
    if (c == 0xC2 && n >= 2 && (p[1] <= 0x9F || p[1] == 0xA0))
        return true;
    return c == 0xE2 && n >= 3 && p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9);
}

/* s as one line: valid UTF-8, whitespace and control runs collapsed to a single space, trimmed,
 * at most limit bytes (limit >= 3), ending in "…" when it had to be cut or cut says an earlier
 * step already cut it. Malloc'd. */
static char *squash(const char *s, size_t n, bool cut, size_t limit)
{
    size_t cn;
    _cleanup_free_ char *clean = utf8_sanitize(s, n, &cn);
    const unsigned char *p = (const unsigned char *)clean;
    char *out = xmalloc(limit + 1);
    size_t o = 0;
    bool space = false;
    for (size_t i = 0, len; i < cn; i += len) {
        if (blank_char(p + i, cn - i, &len)) {
            space = o > 0;
            continue;
        }
        if (o + space + len > limit) {
            cut = true;
            break;
        }
        if (space)
            out[o++] = ' ';
        space = false;
        memcpy(out + o, p + i, len);
        o += len;
    }
    if (cut) {
        size_t keep = sizeof(ellipsis) - 1;
        if (o + keep > limit)
            o = utf8_boundary(out, limit - keep);
        while (o > 0 && out[o - 1] == ' ')
            o--;
        memcpy(out + o, ellipsis, keep);
        o += keep;
    }
    out[o] = '\0';
    return out;
}

struct summary {
    struct buf raw;
    bool cut; /* a piece was cut before squashing */
};

static void sum_add(struct summary *s, const char *p, size_t n)
{
    if (n > PIECE_MAX) {
        n = utf8_boundary(p, PIECE_MAX);
        s->cut = true;
    }
    buf_append(&s->raw, p, n);
}

static void sum_puts(struct summary *s, const char *p)
{
    sum_add(s, p, strlen(p));
}

/* The summary, with suffix (already squashed, short) kept whole after whatever was cut. */
static char *sum_finish(struct summary *s, const char *suffix)
{
    size_t sl = suffix ? strlen(suffix) : 0;
    char *body = squash(s->raw.data ? s->raw.data : "", s->raw.len, s->cut, AGENT_SUMMARY_MAX - sl);
    buf_release(&s->raw);
    if (!sl)
        return body;
    char *out = xasprintf("%s%s", body, suffix);
    free(body);
    return out;
}

/* --- the events --- */

/* "write hello.txt", "bash: Commit (exit 1)", "grep TODO (error)": the tool, the input that
 * tells most about the call, and the status unless the call completed. */
static char *tool_summary(struct agent_event *ev, const json_t *part)
{
    const json_t *state = json_object_get(part, "state");
    const json_t *input = json_object_get(state, "input");
    struct summary s = {0};
    size_t n = 0, dn = 0;
    const char *tool = text_at(part, "tool", &n), *d = NULL, *sep = " ";
    sum_add(&s, tool ? tool : "tool", tool ? n : 4);
    if (str_is(tool, n, "bash") && (d = text_at(input, "description", &dn))) {
        sep = ": ";
    } else if (str_is(tool, n, "bash") && (d = text_at(input, "command", &dn))) {
        sep = ": ";
        first_line(&d, &dn);
    } else if ((d = text_at(input, "filePath", &dn))) {
        basename_of(&d, &dn);
    } else if ((d = text_at(input, "pattern", &dn)) || (d = text_at(input, "url", &dn)) ||
               (d = text_at(input, "path", &dn)) || (d = text_at(input, "query", &dn)) ||
               (d = text_at(input, "tool", &dn))) {
        /* grep and glob, webfetch, list, search tools, the "invalid" stand-in tool */
    } else if ((d = text_at(input, "description", &dn)) || (d = text_at(state, "title", &dn))) {
        sep = ": ";
        first_line(&d, &dn);
    }
    if (d) {
        sum_puts(&s, sep);
        sum_add(&s, d, dn);
    }

    size_t sn = 0;
    const char *status = text_at(state, "status", &sn);
    _cleanup_free_ char *suffix = NULL;
    if (status && !str_is(status, sn, "completed")) {
        size_t keep = sn > PIECE_MAX ? utf8_boundary(status, PIECE_MAX) : sn;
        _cleanup_free_ char *st = squash(status, keep, keep < sn, STATUS_MAX);
        suffix = xasprintf(" (%s)", st);
    } else if (str_is(tool, n, "bash")) {
        /* a command that fails still "completed"; its exit status is in the metadata */
        double code = num_at(json_object_get(state, "metadata"), "exit");
        if (code != 0 && fabs(code) < 1e9 && code == floor(code)) {
            suffix = xasprintf(" (exit %d)", (int)code);
            ev->exit_status = (int)code;
        }
    }
    if (str_is(status, sn, "error")) {
        ev->tool_failed = true;
        ev->error = message_of(json_object_get(state, "error"), AGENT_ERROR_MAX, &ev->truncated);
        if (!ev->error)
            ev->error = xstrdup("tool failed");
    }
    return sum_finish(&s, suffix);
}

/* The tool's name and what it worked on: a command (not its description), else what the summary
 * names. */
static void tool_target(struct agent_event *ev, const json_t *part)
{
    const json_t *state = json_object_get(part, "state");
    const json_t *input = json_object_get(state, "input");
    size_t n = 0, dn = 0;
    const char *tool = text_at(part, "tool", &n), *d = NULL;
    for (size_t i = 0; tool && i < n && i < sizeof(ev->tool) - 1; i++)
        ev->tool[i] = tool[i] >= 0x20 && tool[i] < 0x7F ? tool[i] : '?';
    if ((str_is(tool, n, "bash") && (d = text_at(input, "command", &dn))) ||
        (d = text_at(input, "filePath", &dn)) || (d = text_at(input, "pattern", &dn)) ||
        (d = text_at(input, "url", &dn)) || (d = text_at(input, "path", &dn)) ||
        (d = text_at(input, "query", &dn)) || (d = text_at(input, "description", &dn))) {
        first_line(&d, &dn);
        struct summary s = {0};
        sum_add(&s, d, dn);
        ev->target = sum_finish(&s, NULL);
        if (!ev->target[0]) {
            free(ev->target);
            ev->target = NULL;
        }
    }
}

/* "step finish (tool-calls): 110 in, 20 out, $0.0006134" */
static char *step_finish(struct agent_event *ev, const json_t *part)
{
    const json_t *tokens = json_object_get(part, "tokens");
    const json_t *cache = json_object_get(tokens, "cache");
    ev->input_tokens =
        count_at(tokens, "input") + count_at(cache, "read") + count_at(cache, "write");
    ev->output_tokens = count_at(tokens, "output") + count_at(tokens, "reasoning");
    double cost = num_at(part, "cost");
    ev->cost = cost > 0 ? cost : 0;

    struct summary s = {0};
    sum_puts(&s, "step finish");
    size_t n = 0;
    const char *reason = text_at(part, "reason", &n);
    if (reason) {
        sum_puts(&s, " (");
        sum_add(&s, reason, n);
        sum_puts(&s, ")");
    }
    buf_printf(&s.raw, ": %lld in, %lld out, $%.4g", (long long)ev->input_tokens,
               (long long)ev->output_tokens, ev->cost);
    return sum_finish(&s, NULL);
}

/* The first line of part.text; the whole text too for a text event. */
static char *text_event(struct agent_event *ev, const json_t *part)
{
    size_t n = 0;
    const char *text = str_at(part, "text", &n);
    if (ev->kind == AGENT_EV_TEXT)
        ev->text = text ? capped_copy(text, n, AGENT_TEXT_MAX, &ev->truncated) : xstrdup("");
    struct summary s = {0};
    if (text) {
        first_line(&text, &n);
        sum_add(&s, text, n);
    }
    return sum_finish(&s, NULL);
}

/* "APIError 401: invalid x-api-key". OpenCode itself reports data.message when there is one and
 * the error's name otherwise. */
static char *error_event(struct agent_event *ev, const json_t *root)
{
    const json_t *e = json_object_get(root, "error");
    const json_t *data = json_object_get(e, "data");
    const json_t *msg = json_is_string(e) ? e : json_object_get(data, "message");
    if (!msg || json_is_null(msg))
        msg = json_object_get(e, "message");
    size_t nn = 0;
    const char *name = text_at(e, "name", &nn);
    ev->error = message_of(msg, AGENT_ERROR_MAX, &ev->truncated);
    if (ev->error && blank(ev->error, strlen(ev->error))) {
        free(ev->error);
        ev->error = NULL;
    }

    struct summary s = {0};
    if (name) {
        sum_add(&s, name, nn);
        double code = num_at(data, "statusCode");
        if (code >= 100 && code < 600)
            buf_printf(&s.raw, " %d", (int)code);
        if (ev->error)
            sum_puts(&s, ": ");
    }
    if (ev->error) {
        sum_puts(&s, ev->error);
    } else if (name) {
        ev->error = capped_copy(name, nn, AGENT_ERROR_MAX, &ev->truncated);
    } else {
        ev->error = xstrdup("unknown error");
        sum_puts(&s, ev->error);
    }
    return sum_finish(&s, NULL);
}

/* --- the line --- */

static int hex4(const char *s, size_t n)
{
    if (n < 4)
        return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* A copy of a line jansson refused, with what OpenCode can legitimately print and jansson will
 * not read replaced by U+FFFD: "\udXXX" escapes of lone surrogates (JavaScript strings cut
 * between the halves of a pair) and, should the stream get mangled, bytes that are not UTF-8.
 * NULL when there is nothing to replace. */
static char *repair(const char *line, size_t len, size_t *out_len)
{
    bool changed = false;
    _cleanup_free_ char *clean = NULL;
    if (!utf8_valid(line, len) || memchr(line, '\0', len)) {
        clean = utf8_sanitize(line, len, &len);
        line = clean;
        changed = true;
    }
    struct buf out;
    buf_init(&out, 0);
    size_t copied = 0;
    for (size_t i = 0; i + 1 < len;) {
        if (line[i] != '\\') {
            i++;
            continue;
        }
        int hi = line[i + 1] == 'u' ? hex4(line + i + 2, len - i - 2) : -1;
        if (hi < 0xD800 || hi > 0xDFFF) {
            i += 2; /* any other escape, "\\\\" included */
            continue;
        }
        if (hi <= 0xDBFF && len - i >= 12 && line[i + 6] == '\\' && line[i + 7] == 'u') {
            int lo = hex4(line + i + 8, len - i - 8);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                i += 12;
                continue;
            }
        }
        buf_append(&out, line + copied, i - copied);
        buf_append(&out, "\\ufffd", 6);
        i += 6;
        copied = i;
        changed = true;
    }
    if (!changed) {
        buf_release(&out);
        return NULL;
    }
    buf_append(&out, line + copied, len - copied);
    return buf_steal(&out, out_len);
}

static json_t *parse_json(const char *text, size_t len)
{
    const size_t flags = JSON_ALLOW_NUL;
    json_error_t jerr;
    json_t *v = json_loadb(text, len, flags, &jerr);
    /* A number beyond int64 somewhere in a tool's metadata must not lose the event: read the
     * integers as doubles then (only then: it would print 7 as 7.0 when a value is dumped). */
    if (!v && json_error_code(&jerr) == json_error_numeric_overflow)
        v = json_loadb(text, len, flags | JSON_DECODE_INT_AS_REAL, &jerr);
    return v;
}

static json_t *load(const char *line, size_t len)
{
    json_t *v = parse_json(line, len);
    if (v)
        return v;
    size_t n = 0;
    _cleanup_free_ char *fixed = repair(line, len, &n);
    return fixed ? parse_json(fixed, n) : NULL;
}

static enum agent_event_kind kind_of(const char *type, size_t n)
{
    static const struct {
        const char *name;
        enum agent_event_kind kind;
    } kinds[] = {
        {"step_start", AGENT_EV_STEP_START},   {"tool_use", AGENT_EV_TOOL_USE},
        {"step_finish", AGENT_EV_STEP_FINISH}, {"text", AGENT_EV_TEXT},
        {"reasoning", AGENT_EV_REASONING},     {"error", AGENT_EV_ERROR},
    };
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
        if (str_is(type, n, kinds[i].name))
            return kinds[i].kind;
    return AGENT_EV_OTHER;
}

static void copy_session(char out[128], const char *s, size_t n)
{
    if (!s || n == 0 || n > 127)
        return;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7F)
            return;
    memcpy(out, s, n);
    out[n] = '\0';
}

int opencode_parse_event(const char *line, size_t len, struct agent_event *ev)
{
    memset(ev, 0, sizeof(*ev));
    if (!line)
        return -EINVAL;
    json_auto_t *root = load(line, len);
    if (!json_is_object(root))
        return -EINVAL;

    size_t tn = 0;
    const char *type = str_at(root, "type", &tn);
    for (size_t i = 0; type && i < tn && i < sizeof(ev->type) - 1; i++)
        ev->type[i] = type[i] >= 0x20 && type[i] < 0x7F ? type[i] : '?';
    ev->kind = kind_of(type, tn);
    ev->time_ms = (int64_t)num_at(root, "timestamp");

    const json_t *part = json_object_get(root, "part");
    size_t sn = 0;
    const char *ses = str_at(root, "sessionID", &sn);
    if (!ses)
        ses = str_at(part, "sessionID", &sn);
    copy_session(ev->session, ses, sn);

    switch (ev->kind) {
    case AGENT_EV_STEP_START: ev->summary = xstrdup("step start"); break;
    case AGENT_EV_TOOL_USE:
        ev->summary = tool_summary(ev, part);
        tool_target(ev, part);
        break;
    case AGENT_EV_STEP_FINISH: ev->summary = step_finish(ev, part); break;
    case AGENT_EV_TEXT:
    case AGENT_EV_REASONING: ev->summary = text_event(ev, part); break;
    case AGENT_EV_ERROR: ev->summary = error_event(ev, root); break;
    case AGENT_EV_OTHER: ev->summary = xstrdup(""); break;
    }
    if (!ev->summary[0]) {
        free(ev->summary);
        ev->summary = xstrdup(ev->type);
    }
    return 0;
}

void agent_event_clear(struct agent_event *ev)
{
    free(ev->summary);
    free(ev->text);
    free(ev->error);
    free(ev->target);
    memset(ev, 0, sizeof(*ev));
}

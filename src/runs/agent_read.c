/* What every agent's event parser shares (agent_read.h): tolerant reading of a line of JSON and
 * of its values, capped copies, one-line summaries. */
#include "runs/agent_read.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/utf8.h"
#include "base/util.h"

/* Beyond 2^53 numbers are not counts or times anyone meant (and some are read as doubles, which
 * could overflow int64_t). */
#define NUM_MAX 9007199254740992.0

static const char ellipsis[] = "\xE2\x80\xA6"; /* U+2026 */

/* --- reading values, tolerant of every wrong type --- */

const char *agent_str(const json_t *o, const char *key, size_t *n)
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

bool agent_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!ascii_space(s[i]))
            return false;
    return true;
}

/* The string at key unless it is missing, not a string, or only whitespace. */
const char *agent_text(const json_t *o, const char *key, size_t *n)
{
    const char *s = agent_str(o, key, n);
    return s && !agent_blank(s, *n) ? s : NULL;
}

double agent_num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        return 0;
    double d = json_number_value(v);
    return isfinite(d) && fabs(d) <= NUM_MAX ? d : 0;
}

int64_t agent_count(const json_t *o, const char *key)
{
    double d = agent_num(o, key);
    return d > 0 ? (int64_t)d : 0;
}

bool agent_str_is(const char *s, size_t n, const char *lit)
{
    return s && strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* A malloc'd copy of n bytes of UTF-8 (as jansson hands out, NULs allowed) with NULs turned into
 * U+FFFD, cut to at most cap bytes on a character boundary. */
char *agent_capped(const char *s, size_t n, size_t cap, bool *truncated)
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
char *agent_message(const json_t *v, size_t cap, bool *truncated)
{
    if (json_is_string(v))
        return agent_capped(json_string_value(v), json_string_length(v), cap, truncated);
    if (!v || json_is_null(v))
        return NULL;
    _cleanup_free_ char *dump = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    return dump ? agent_capped(dump, strlen(dump), cap, truncated) : NULL;
}

/* Narrow s to its first line that is not blank. */
void agent_first_line(const char **s, size_t *n)
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
void agent_basename(const char **s, size_t *n)
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
char *agent_squash(const char *s, size_t n, bool cut, size_t limit)
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

void agent_sum_add(struct agent_summary *s, const char *p, size_t n)
{
    if (n > AGENT_PIECE_MAX) {
        n = utf8_boundary(p, AGENT_PIECE_MAX);
        s->cut = true;
    }
    buf_append(&s->raw, p, n);
}

void agent_sum_puts(struct agent_summary *s, const char *p)
{
    agent_sum_add(s, p, strlen(p));
}

/* The summary, with suffix (already squashed, short) kept whole after whatever was cut. */
char *agent_sum_finish(struct agent_summary *s, const char *suffix)
{
    size_t sl = suffix ? strlen(suffix) : 0;
    char *body =
        agent_squash(s->raw.data ? s->raw.data : "", s->raw.len, s->cut, AGENT_SUMMARY_MAX - sl);
    buf_release(&s->raw);
    if (!sl)
        return body;
    char *out = xasprintf("%s%s", body, suffix);
    free(body);
    return out;
}

/* --- events every agent has --- */

char *agent_text_event(struct agent_event *ev, const json_t *o)
{
    size_t n = 0;
    const char *text = agent_str(o, "text", &n);
    if (ev->kind == AGENT_EV_TEXT)
        ev->text = text ? agent_capped(text, n, AGENT_TEXT_MAX, &ev->truncated) : xstrdup("");
    struct agent_summary s = {0};
    if (text) {
        agent_first_line(&text, &n);
        agent_sum_add(&s, text, n);
    }
    return agent_sum_finish(&s, NULL);
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

json_t *agent_json_load(const char *line, size_t len)
{
    json_t *v = parse_json(line, len);
    if (v)
        return v;
    size_t n = 0;
    _cleanup_free_ char *fixed = repair(line, len, &n);
    return fixed ? parse_json(fixed, n) : NULL;
}

void agent_copy_session(char out[128], const char *s, size_t n)
{
    if (!s || n == 0 || n > 127)
        return;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7F)
            return;
    memcpy(out, s, n);
    out[n] = '\0';
}

json_t *agent_event_begin(struct agent_event *ev, const char *line, size_t len, const char **type,
                          size_t *tn)
{
    memset(ev, 0, sizeof(*ev));
    *type = NULL;
    *tn = 0;
    json_t *root = line ? agent_json_load(line, len) : NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        return NULL;
    }
    *type = agent_str(root, "type", tn);
    agent_copy_name(ev->type, sizeof(ev->type), *type, *tn);
    return root;
}

int agent_event_end(struct agent_event *ev)
{
    if (!ev->summary || !ev->summary[0]) {
        free(ev->summary);
        ev->summary = xstrdup(ev->type);
    }
    return 0;
}

void agent_copy_name(char *out, size_t cap, const char *s, size_t n)
{
    size_t i = 0;
    if (!s || cap == 0)
        return;
    for (; i < n && i < cap - 1; i++)
        out[i] = s[i] >= 0x20 && s[i] < 0x7F ? s[i] : '?';
    out[i] = '\0';
}

void agent_event_clear(struct agent_event *ev)
{
    free(ev->summary);
    free(ev->text);
    free(ev->error);
    free(ev->target);
    memset(ev, 0, sizeof(*ev));
}

static const char *const kind_names[] = {
    [AGENT_EV_STEP_START] = "step_start",   [AGENT_EV_TOOL_USE] = "tool_use",
    [AGENT_EV_STEP_FINISH] = "step_finish", [AGENT_EV_TEXT] = "text",
    [AGENT_EV_REASONING] = "reasoning",     [AGENT_EV_ERROR] = "error",
};

const char *agent_event_type(const struct agent_event *ev)
{
    return ev->kind < ARRAY_SIZE(kind_names) && kind_names[ev->kind] ? kind_names[ev->kind]
                                                                     : ev->type;
}

enum agent_event_kind agent_event_kind_of(const char *type)
{
    for (size_t i = 0; i < ARRAY_SIZE(kind_names); i++)
        if (kind_names[i] && strcmp(kind_names[i], type) == 0)
            return (enum agent_event_kind)i;
    return AGENT_EV_OTHER;
}

void agent_reader_clear(struct agent_reader *rd)
{
    for (size_t i = 0; i < AGENT_CALLS_MAX; i++)
        free(rd->calls[i].target);
    memset(rd, 0, sizeof(*rd));
}

/* Compact JSON writer (see json_write.h). Equal output to jansson's is checked by a unit test
 * and a fuzz target that compare the two on the same values. */
#include "base/json_write.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes that cannot appear as themselves inside a JSON string. */
static bool needs_escape(unsigned char c)
{
    return c < 0x20 || c == '"' || c == '\\';
}

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Whether the eight bytes of w may hold one that needs an escape: one below 0x20 (the
 * subtraction borrows into the high bit of such a byte, and bytes from 0x80 up are masked out
 * by ~w), a '"' or a '\\' (a byte equal to one of them is zero after the XOR). A word flagged
 * falsely is looked at byte by byte, which decides. */
static bool word_may_need_escape(const char *at)
{
    uint64_t w;
    memcpy(&w, at, 8);
    uint64_t q = w ^ (ONES * '"'), bs = w ^ (ONES * '\\');
    return (((w - ONES * 0x20) & ~w & HIGHS) | ((q - ONES) & ~q & HIGHS) |
            ((bs - ONES) & ~bs & HIGHS)) != 0;
}

/* How many bytes at s need no escape: eight at a time while a word holds none, then a byte at
 * a time. */
static size_t plain_run(const char *s, size_t n)
{
    size_t i = 0;
    while (i + 8 <= n && !word_may_need_escape(s + i))
        i += 8;
    while (i < n && !needs_escape((unsigned char)s[i]))
        i++;
    return i;
}

static void write_string(struct buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    buf_append(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        i += plain_run(s + i, n - i);
        if (i == n)
            break;
        unsigned char c = (unsigned char)s[i];
        buf_append(b, s + run, i - run);
        run = i + 1;
        char esc[6] = {'\\', 0};
        size_t len = 2;
        switch (c) {
        case '"':
        case '\\': esc[1] = (char)c; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            len = 6;
        }
        buf_append(b, esc, len);
    }
    buf_append(b, s + run, n - run);
    buf_append(b, "\"", 1);
}

void json_write(struct buf *b, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        buf_append(b, "{", 1);
        bool first = true;
        for (void *it = json_object_iter((json_t *)v); it;
             it = json_object_iter_next((json_t *)v, it)) {
            if (!first)
                buf_append(b, ",", 1);
            first = false;
            write_string(b, json_object_iter_key(it), json_object_iter_key_len(it));
            buf_append(b, ":", 1);
            json_write(b, json_object_iter_value(it));
        }
        buf_append(b, "}", 1);
        break;
    }
    case JSON_ARRAY: {
        buf_append(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                buf_append(b, ",", 1);
            json_write(b, json_array_get(v, i));
        }
        buf_append(b, "]", 1);
        break;
    }
    case JSON_STRING: write_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: buf_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: {
        /* jansson's own format for reals (precision, exponent, a ".0" when integral) */
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (text)
            buf_puts(b, text);
        free(text);
        break;
    }
    case JSON_TRUE: buf_append(b, "true", 4); break;
    case JSON_FALSE: buf_append(b, "false", 5); break;
    case JSON_NULL: buf_append(b, "null", 4); break;
    }
}

char *json_write_text(const json_t *v, size_t *len)
{
    struct buf b;
    buf_init(&b, 0);
    json_write(&b, v);
    return buf_steal(&b, len);
}

static size_t char_cost(unsigned char c)
{
    if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
        return 2;
    return c < 0x20 ? 6 : 1;
}

size_t json_string_cost(const char *s, size_t n)
{
    return json_string_cost_upto(s, n, SIZE_MAX);
}

size_t json_string_cost_upto(const char *s, size_t n, size_t limit)
{
    if (n > limit)
        return n; /* every byte costs at least one */
    size_t cost = n;
    for (size_t i = 0; i < n && cost <= limit; i++) {
        i += plain_run(s + i, n - i);
        if (i < n)
            cost += char_cost((unsigned char)s[i]) - 1;
    }
    return cost;
}

static bool continuation(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

size_t json_prefix_fit(const char *s, size_t n, size_t budget)
{
    size_t i = 0, cost = 0;
    while (i < n) {
        /* a run of bytes that cost one each, as far as the budget goes */
        size_t room = budget - cost, run = plain_run(s + i, n - i < room ? n - i : room);
        i += run;
        cost += run;
        if (i == n)
            break;
        size_t c = char_cost((unsigned char)s[i]);
        if (cost + c > budget)
            break;
        cost += c;
        i++;
    }
    while (i > 0 && i < n && continuation((unsigned char)s[i]))
        i--;
    return i;
}

/* plain_run from the end: how many bytes before s + n need no escape. */
static size_t plain_run_back(const char *s, size_t n)
{
    size_t i = 0;
    while (i + 8 <= n && !word_may_need_escape(s + n - i - 8))
        i += 8;
    while (i < n && !needs_escape((unsigned char)s[n - i - 1]))
        i++;
    return i;
}

size_t json_suffix_fit(const char *s, size_t n, size_t budget)
{
    size_t i = n, cost = 0;
    while (i > 0) {
        size_t room = budget - cost, lim = i < room ? i : room;
        size_t run = plain_run_back(s + i - lim, lim);
        i -= run;
        cost += run;
        if (i == 0)
            break;
        size_t c = char_cost((unsigned char)s[i - 1]);
        if (cost + c > budget)
            break;
        cost += c;
        i--;
    }
    while (i < n && continuation((unsigned char)s[i]))
        i++;
    return i;
}

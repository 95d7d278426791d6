#pragma once
/* Compact JSON text of a jansson value, the same bytes json_dumps(v, JSON_COMPACT |
 * JSON_ENCODE_ANY) gives, written about ten times faster: strings are copied in runs and only
 * '"', '\\' and control characters are escaped, where jansson decodes and tests every character
 * (13 ns a byte here). Command output of a megabyte goes out twice in a tool result, so this is
 * most of the time of answering it. Strings must be valid UTF-8, as every jansson string is
 * unless made with a _nocheck constructor from unchecked bytes. */

#include <jansson.h>
#include <stddef.h>

#include "base/buf.h"

/* Append the JSON text of v to b. */
void json_write(struct buf *b, const json_t *v);

/* The JSON text of v, malloc'd and NUL-terminated; *len (if non-NULL) is its length. */
char *json_write_text(const json_t *v, size_t *len);

/* Bytes s[0..n) takes inside a JSON string as json_write writes it (quotes not counted): one a
 * byte, two for '"', '\\' and the control characters with a short escape, six for the others. */
size_t json_string_cost(const char *s, size_t n);
/* The same as long as it is at most limit; past it, some value above limit, found without
 * reading further (a cut of a long text only needs to know that it does not fit). */
size_t json_string_cost_upto(const char *s, size_t n, size_t limit);

/* The length of the longest prefix of s[0..n) (valid UTF-8) that costs at most budget and ends on
 * a character boundary. */
size_t json_prefix_fit(const char *s, size_t n, size_t budget);

/* Where the longest suffix of s[0..n) (valid UTF-8) that costs at most budget and starts on a
 * character boundary begins (n when not even one character fits). */
size_t json_suffix_fit(const char *s, size_t n, size_t budget);

#pragma once
/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. Pure
 * functions, safe from any thread. */

#include <stdbool.h>
#include <stddef.h>

/* True when the n bytes at s are well-formed UTF-8 (NUL bytes count as valid). */
bool utf8_valid(const char *s, size_t n);

/* A malloc'd, NUL-terminated copy of the n bytes at s in which every ill-formed sequence (each
 * maximal ill-formed subpart, as Unicode recommends) and every NUL byte is replaced by U+FFFD,
 * so the result is valid UTF-8 without embedded NULs. Sets *out_len (if non-NULL) to the length
 * without the terminator. Caller frees; aborts on out of memory. */
char *utf8_sanitize(const char *s, size_t n, size_t *out_len);
/* utf8_sanitize() of s, a malloc'd buffer of n bytes with room for at least one more, which it
 * takes: returned as it is (NUL-terminated) when valid already, else freed for the copy. */
char *utf8_sanitize_take(char *s, size_t n, size_t *out_len);
/* The same when s[0..clean) is known to be utf8_clean_prefix already: only the rest is checked. */
char *utf8_sanitize_take_from(char *s, size_t n, size_t clean, size_t *out_len);
/* How long a prefix of the n bytes at s is valid UTF-8 without NUL; a character cut off at the
 * end is not part of it. */
size_t utf8_clean_prefix(const char *s, size_t n);

/* The largest m <= n such that s[0..m) does not end in the middle of a multi-byte character:
 * when the bytes before n end with an incomplete but so far well-formed sequence, m is where
 * that sequence starts; otherwise m = n. */
size_t utf8_boundary(const char *s, size_t n);

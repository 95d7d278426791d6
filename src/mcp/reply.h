#pragma once
/* Fitting tool results into the reply budget (mcp_call_reply_budget): what a result costs as
 * serialized JSON, cuts of long text that keep its head and its tail, and the content of one text
 * block built from a buffer. Pure functions, for the tools that return large data. */

#include <jansson.h>
#include <stddef.h>

struct buf;

/* Bytes of the budget left for what the protocol adds around a tool's result (resultType,
 * _meta, isError) and the JSON-RPC envelope; a tool fits its content and structuredContent in
 * the rest. */
#define REPLY_SLACK 1024

/* Bytes a tool result with this content and structured content (either may be NULL) takes as
 * serialized JSON: {"content":...,"structuredContent":...}. */
size_t reply_result_cost(const json_t *content, const json_t *structured);

/* A text shown as its head s[0..head) and its tail s[tail..len); head == tail == len when it is
 * shown whole. */
struct reply_cut {
    size_t head, tail;
};

/* The head and tail of s (len bytes of valid UTF-8) that cost at most budget bytes together as
 * JSON string content (json_string_cost), half each; s whole when it fits. The head ends and the
 * tail starts at a line break when one lies in the last quarter of the head (first quarter of the
 * tail), and on a character boundary always. */
struct reply_cut reply_cut_text(const char *s, size_t len, size_t budget);

/* Split budget between two parts that need a and b bytes: both whole when they fit, else the
 * smaller keeps what it needs up to half of budget and the larger gets the rest. */
void reply_share(size_t a, size_t b, size_t budget, size_t *share_a, size_t *share_b);

/* A tool result's content of one text block: the bytes b holds, which must be valid UTF-8 (they
 * are not checked again). Takes b's data and leaves b empty; the caller owns the array. */
json_t *reply_text_content(struct buf *b);

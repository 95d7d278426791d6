/* Fitting tool results into the reply budget (see reply.h). */
#include "mcp/reply.h"

#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json_write.h"

size_t reply_result_cost(const json_t *content, const json_t *structured)
{
    /* {"content":,"structuredContent":} */
    size_t cost = 34;
    if (content) {
        size_t n;
        free(json_write_text(content, &n));
        cost += n;
    }
    if (structured) {
        size_t n;
        free(json_write_text(structured, &n));
        cost += n;
    }
    return cost;
}

struct reply_cut reply_cut_text(const char *s, size_t len, size_t budget)
{
    if (json_string_cost_upto(s, len, budget) <= budget)
        return (struct reply_cut){len, len};
    size_t head = json_prefix_fit(s, len, budget / 2);
    size_t tail = json_suffix_fit(s, len, budget - budget / 2);
    if (tail < head) /* cannot happen when s does not fit; kept for safety */
        tail = head;
    /* end the head after a line break near its end */
    for (size_t i = head; i > 0 && i > head - head / 4; i--)
        if (s[i - 1] == '\n') {
            head = i;
            break;
        }
    /* start the tail after a line break near its start */
    size_t tail_len = len - tail;
    for (size_t i = tail; i < len && i < tail + tail_len / 4; i++)
        if (s[i] == '\n') {
            tail = i + 1;
            break;
        }
    return (struct reply_cut){head, tail};
}

void reply_share(size_t a, size_t b, size_t budget, size_t *share_a, size_t *share_b)
{
    if (a + b <= budget) {
        *share_a = a;
        *share_b = b;
        return;
    }
    size_t half = budget / 2;
    if (a <= b) {
        *share_a = a < half ? a : half;
        *share_b = budget - *share_a;
    } else {
        *share_b = b < half ? b : half;
        *share_a = budget - *share_b;
    }
}

json_t *reply_text_content(struct buf *b)
{
    size_t n;
    char *text = buf_steal(b, &n);
    json_t *content =
        json_pack("[{s:s, s:o}]", "type", "text", "text", json_stringn_nocheck(text, n));
    free(text);
    return content;
}

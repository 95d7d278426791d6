/* Token buckets (bucket.h). */
#include "base/bucket.h"

#include <string.h>

int64_t bucket_take(struct bucket *b, double per_s, double burst, int64_t now_ms)
{
    if (!b->at_ms)
        b->tokens = burst;
    else if (now_ms > b->at_ms)
        b->tokens += (double)(now_ms - b->at_ms) * per_s / 1000.0;
    if (b->tokens > burst)
        b->tokens = burst;
    b->at_ms = now_ms ? now_ms : 1;
    if (b->tokens >= 1) {
        b->tokens -= 1;
        return 0;
    }
    return (int64_t)((1 - b->tokens) * 1000.0 / per_s) + 1;
}

struct bucket *bucket_of(struct keyed_bucket *t, size_t n, const void *key, size_t len)
{
    if (len > BUCKET_KEY_MAX)
        len = BUCKET_KEY_MAX;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ ((const unsigned char *)key)[i]) * 16777619u;
    struct keyed_bucket *s = &t[h % n];
    if (s->len != len || memcmp(s->key, key, len) != 0) {
        memcpy(s->key, key, len);
        s->len = len;
        s->b = (struct bucket){0};
    }
    return &s->b;
}

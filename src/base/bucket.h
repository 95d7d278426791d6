#pragma once
/* Token buckets for pacing requests: one a key (a token, a client address), in a fixed table
 * indexed by the key's hash, so that what strangers can make it hold is the table's size. A key
 * that finds its slot taken by another takes it over with a full bucket: a table sized for the
 * keys under way at once lets that happen rarely, and never lets a key take more than its pace
 * and its burst. Pure arithmetic on a clock the caller gives; not thread-safe. */

#include <stddef.h>
#include <stdint.h>

#define BUCKET_KEY_MAX 64 /* bytes of a key kept (longer keys are cut) */

struct bucket {
    double tokens;
    int64_t at_ms; /* when tokens was last brought up to date; 0: never used */
};

struct keyed_bucket {
    unsigned char key[BUCKET_KEY_MAX];
    size_t len;
    struct bucket b;
};

/* Bring b up to now_ms at per_s tokens a second, up to burst, and take one: 0, or the
 * milliseconds until one is there (nothing taken). A bucket never used starts full. */
int64_t bucket_take(struct bucket *b, double per_s, double burst, int64_t now_ms);

/* The bucket of key (len bytes) in t (n slots). */
struct bucket *bucket_of(struct keyed_bucket *t, size_t n, const void *key, size_t len);

#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sandbox/capture.h"

/* The capture's string, freed after the check. */
static char *finish(struct capture *c, size_t *len, bool *cut)
{
    char *s = capture_finish(c, len, cut);
    capture_release(c);
    return s;
}

TEST(output_within_the_cap_is_kept_whole_whichever_way_it_came)
{
    struct capture c;
    capture_init(&c, 64);
    size_t room = 0;
    CHECK(capture_room(&c, &room) == NULL); /* nothing came yet: no head to read into */
    capture_add(&c, "hello ", 6);
    char *at = capture_room(&c, &room);
    CHECK(at != NULL);
    CHECK(room >= 5);
    memcpy(at, "world", 5);
    capture_took(&c, 5);
    CHECK_INT_EQ((long long)c.total, 11);
    size_t len;
    bool cut;
    char *s = finish(&c, &len, &cut);
    CHECK(!cut);
    CHECK_INT_EQ((long long)len, 11);
    CHECK_STR_EQ(s, "hello world");
    free(s);
}

TEST(output_past_the_cap_keeps_its_first_and_last_halves)
{
    struct capture c;
    capture_init(&c, 16);
    const char *data = "0123456789abcdefghijklmnopqrstuvwxyzABCD"; /* 40 bytes */
    for (size_t i = 0; i < 40; i += 7)
        capture_add(&c, data + i, 40 - i < 7 ? 40 - i : 7);
    CHECK_INT_EQ((long long)c.total, 40);
    size_t room = 0;
    CHECK(capture_room(&c, &room) == NULL); /* the head is full */
    size_t len;
    bool cut;
    char *s = finish(&c, &len, &cut);
    CHECK(cut);
    CHECK_STR_EQ(s, "01234567\n[... 24 bytes omitted ...]\nwxyzABCD");
    CHECK_INT_EQ((long long)len, (long long)strlen(s));
    free(s);
}

TEST(a_cut_falls_between_characters)
{
    struct capture c;
    capture_init(&c, 8);
    /* "aaa" and an e-acute straddle the head's end at 4; the tail begins inside a character */
    const char *data = "aaa\xC3\xA9"
                       "bbbbbbbbbb\xC3\xA9zzz";
    capture_add(&c, data, strlen(data));
    size_t len;
    bool cut;
    char *s = finish(&c, &len, &cut);
    CHECK(cut);
    CHECK(strncmp(s, "aaa\n[... ", 9) == 0); /* the head stops before the e-acute */
    const char *tail = strstr(s, "omitted ...]\n");
    CHECK(tail != NULL);
    CHECK_STR_EQ(tail + 13, "zzz"); /* the kept tail's first byte, mid-character, goes */
    free(s);
}

TEST_MAIN()

#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "harness.h"

#define VALID(lit) utf8_valid(lit, sizeof(lit) - 1)

TEST(utf8_valid_accepts_well_formed)
{
    CHECK(utf8_valid("", 0));
    CHECK(VALID("plain ascii"));
    CHECK(VALID("\x00 nul is valid utf-8"));
    CHECK(VALID("\xC2\x80"));                  /* U+0080, smallest 2-byte */
    CHECK(VALID("\xDF\xBF"));                  /* U+07FF */
    CHECK(VALID("\xE0\xA0\x80"));              /* U+0800, smallest 3-byte */
    CHECK(VALID("\xED\x9F\xBF"));              /* U+D7FF, just below the surrogates */
    CHECK(VALID("\xEE\x80\x80"));              /* U+E000, just above them */
    CHECK(VALID("\xEF\xBF\xBD"));              /* U+FFFD */
    CHECK(VALID("\xF0\x90\x80\x80"));          /* U+10000, smallest 4-byte */
    CHECK(VALID("\xF0\x9F\x98\x80"));          /* U+1F600 */
    CHECK(VALID("\xF4\x8F\xBF\xBF"));          /* U+10FFFF, the largest */
    CHECK(VALID("h\xC3\xA9llo w\xC3\xB6rld")); /* mixed */
}

TEST(utf8_valid_rejects_ill_formed)
{
    CHECK(!VALID("\x80"));                 /* lone continuation */
    CHECK(!VALID("\xBF"));                 /* lone continuation */
    CHECK(!VALID("\xC0\xAF"));             /* overlong '/' */
    CHECK(!VALID("\xC1\xBF"));             /* overlong */
    CHECK(!VALID("\xE0\x80\xAF"));         /* overlong '/' in 3 bytes */
    CHECK(!VALID("\xE0\x9F\xBF"));         /* overlong U+07FF */
    CHECK(!VALID("\xF0\x80\x80\xAF"));     /* overlong '/' in 4 bytes */
    CHECK(!VALID("\xF0\x8F\xBF\xBF"));     /* overlong U+FFFF */
    CHECK(!VALID("\xED\xA0\x80"));         /* U+D800 surrogate */
    CHECK(!VALID("\xED\xBF\xBF"));         /* U+DFFF surrogate */
    CHECK(!VALID("\xF4\x90\x80\x80"));     /* U+110000 */
    CHECK(!VALID("\xF5\x80\x80\x80"));     /* lead beyond F4 */
    CHECK(!VALID("\xFF"));                 /* never valid */
    CHECK(!VALID("\xFE"));                 /* never valid */
    CHECK(!VALID("\xC3"));                 /* truncated 2-byte */
    CHECK(!VALID("\xE2\x82"));             /* truncated 3-byte */
    CHECK(!VALID("\xF0\x9F\x98"));         /* truncated 4-byte */
    CHECK(!VALID("ab\xC3"));               /* truncated at the end of text */
    CHECK(!VALID("\xC3\x28"));             /* bad continuation */
    CHECK(!VALID("\xE2\x28\xA1"));         /* bad second byte */
    CHECK(!VALID("\xE2\x82\x28"));         /* bad third byte */
    CHECK(!VALID("\xF0\x9F\x98\x28"));     /* bad fourth byte */
    CHECK(!VALID("\xF8\x88\x80\x80\x80")); /* old 5-byte form */
}

static void check_sanitize(const char *in, size_t n, const char *want, size_t want_len)
{
    size_t len = 12345;
    char *out = utf8_sanitize(in, n, &len);
    CHECK_INT_EQ(len, want_len);
    CHECK(memcmp(out, want, want_len) == 0);
    CHECK(out[len] == '\0');
    CHECK(utf8_valid(out, len));
    CHECK(memchr(out, 0, len) == NULL);
    free(out);
}
#define SANITIZE(in, want) check_sanitize(in, sizeof(in) - 1, want, sizeof(want) - 1)
#define FFFD "\xEF\xBF\xBD"

TEST(utf8_sanitize_replaces_each_maximal_subpart)
{
    SANITIZE("", "");
    SANITIZE("ok \xC3\xA9", "ok \xC3\xA9");
    SANITIZE("a\x00"
             "b",
             "a" FFFD "b");
    SANITIZE("\x80\x80", FFFD FFFD);          /* each stray continuation */
    SANITIZE("\xC0\xAF", FFFD FFFD);          /* C0 is never a lead; AF is stray */
    SANITIZE("\xED\xA0\x80", FFFD FFFD FFFD); /* surrogate: ED then two strays */
    SANITIZE("\xF0\x9F\x98", FFFD);           /* truncated: one subpart */
    SANITIZE("\xF0\x9F\x98x", FFFD "x");      /* cut short by ASCII */
    SANITIZE("\xE2\x82\x28", FFFD "(");       /* subpart E2 82, then '(' */
    SANITIZE("\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD);
    SANITIZE("\xFF"
             "a\xF0\x9F\x98\x80",
             FFFD "a\xF0\x9F\x98\x80");
    SANITIZE("\x00\x00", FFFD FFFD);
}

TEST(utf8_sanitize_long_text_with_a_flaw_late)
{
    /* the ASCII fast path hands over to the careful one at the first flaw, wherever it is */
    char in[100];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (char)('a' + i % 26);
    in[77] = '\0';
    in[90] = (char)0xC3; /* a lead byte without its continuation */
    size_t len;
    char *out = utf8_sanitize(in, sizeof(in), &len);
    CHECK_INT_EQ(len, sizeof(in) + 4);
    CHECK(memcmp(out, in, 77) == 0);
    CHECK(memcmp(out + 77, "\xEF\xBF\xBD", 3) == 0);
    CHECK(memcmp(out + 80, in + 78, 12) == 0);
    CHECK(memcmp(out + 92, "\xEF\xBF\xBD", 3) == 0);
    CHECK(memcmp(out + 95, in + 91, 9) == 0);
    free(out);
}

TEST(utf8_sanitize_null_out_len)
{
    char *out = utf8_sanitize("x\xFFy", 3, NULL);
    CHECK_STR_EQ(out, "x" FFFD "y");
    free(out);
}

TEST(utf8_sanitize_take_keeps_valid_text_and_replaces_the_rest)
{
    /* valid: the same buffer, NUL-terminated */
    char *valid = malloc(8);
    memcpy(valid, "h\xC3\xA9llo", 6);
    size_t len;
    char *out = utf8_sanitize_take(valid, 6, &len);
    CHECK(out == valid);
    CHECK_INT_EQ(len, 6);
    CHECK_STR_EQ(out, "h\xC3\xA9llo");
    free(out);
    /* not valid: a sanitized copy (the buffer is freed, which ASan would report if not) */
    char *bad = malloc(4);
    memcpy(bad, "x\xFFy", 3);
    out = utf8_sanitize_take(bad, 3, &len);
    CHECK_INT_EQ(len, 5);
    CHECK_STR_EQ(out, "x" FFFD "y");
    free(out);
}

TEST(utf8_clean_prefix_grows_as_the_text_comes_in_pieces)
{
    /* checked piece by piece, as the capture of a command's output does: a character split
     * between pieces, a bad byte, then a valid tail that does not make the bad byte good */
    const char text[] = "abcdefgh\xE2\x82\xAC ijklmnop\xFFqrstuvwxyz";
    size_t n = sizeof(text) - 1, clean = 0;
    for (size_t have = 0; have < n;) {
        have += have + 3 <= n ? 3 : n - have;
        clean += utf8_clean_prefix(text + clean, have - clean);
        CHECK(clean <= have);
        CHECK_INT_EQ(utf8_clean_prefix(text, have), clean);
    }
    CHECK_INT_EQ(clean, 20); /* up to the bad byte */
    for (size_t k = 0; k <= n; k++) {
        char *buf = malloc(n + 1);
        memcpy(buf, text, n);
        size_t len, want_len;
        char *want = utf8_sanitize(text, n, &want_len);
        char *out = utf8_sanitize_take_from(buf, n, k < clean ? k : clean, &len);
        CHECK_INT_EQ(len, want_len);
        CHECK(memcmp(out, want, len + 1) == 0);
        free(out);
        free(want);
    }
}

TEST(utf8_boundary_cuts_before_incomplete_character)
{
    const char *s = "a\xC3\xA9"         /* a é */
                    "\xE2\x82\xAC"      /* € */
                    "\xF0\x9F\x98\x80"; /* 😀 */
    /* byte offsets: a=0, é=1..2, €=3..5, 😀=6..9 */
    CHECK_INT_EQ(utf8_boundary(s, 0), 0);
    CHECK_INT_EQ(utf8_boundary(s, 1), 1);
    CHECK_INT_EQ(utf8_boundary(s, 2), 1); /* inside é */
    CHECK_INT_EQ(utf8_boundary(s, 3), 3);
    CHECK_INT_EQ(utf8_boundary(s, 4), 3); /* inside € */
    CHECK_INT_EQ(utf8_boundary(s, 5), 3);
    CHECK_INT_EQ(utf8_boundary(s, 6), 6);
    CHECK_INT_EQ(utf8_boundary(s, 7), 6); /* inside 😀 */
    CHECK_INT_EQ(utf8_boundary(s, 8), 6);
    CHECK_INT_EQ(utf8_boundary(s, 9), 6);
    CHECK_INT_EQ(utf8_boundary(s, 10), 10);
    for (size_t n = 0; n <= 10; n++)
        CHECK(utf8_valid(s, utf8_boundary(s, n)));
}

TEST(utf8_boundary_leaves_invalid_tails_alone)
{
    CHECK_INT_EQ(utf8_boundary("ab\x80", 3), 3);           /* stray continuation */
    CHECK_INT_EQ(utf8_boundary("ab\xC0", 3), 3);           /* never a lead */
    CHECK_INT_EQ(utf8_boundary("ab\xFF", 3), 3);           /* never a lead */
    CHECK_INT_EQ(utf8_boundary("ab\xE0\x80", 4), 4);       /* overlong prefix */
    CHECK_INT_EQ(utf8_boundary("ab\xED\xA0", 4), 4);       /* surrogate prefix */
    CHECK_INT_EQ(utf8_boundary("\x80\x80\x80\x80", 4), 4); /* no lead within reach */
    CHECK_INT_EQ(utf8_boundary("ab\xC3", 3), 2);           /* but a valid prefix is cut */
}

TEST_MAIN()

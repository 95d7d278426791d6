#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "base/buf.h"
#include "base/config.h"
#include "base/ids.h"
#include "base/json_write.h"
#include "base/log.h"
#include "base/util.h"
#include "harness.h"

TEST(buf_cap_cuts_and_flags)
{
    struct buf b;
    buf_init(&b, 8);
    CHECK_INT_EQ(buf_puts(&b, "hello"), 5);
    CHECK_INT_EQ(buf_puts(&b, " world"), 3);
    CHECK_STR_EQ(b.data, "hello wo");
    CHECK(b.overflowed);
    CHECK_INT_EQ(buf_puts(&b, "x"), 0);
    buf_release(&b);
}

TEST(buf_printf_large)
{
    struct buf b;
    buf_init(&b, 0);
    char big[2000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    buf_printf(&b, "<%s>", big);
    CHECK_INT_EQ(b.len, 2001);
    CHECK(b.data[0] == '<' && b.data[2000] == '>');
    size_t n;
    char *p = buf_steal(&b, &n);
    CHECK_INT_EQ(n, 2001);
    CHECK_INT_EQ(b.len, 0);
    free(p);
}

TEST(base64url_vectors)
{
    char out[64];
    base64url_encode("", 0, out);
    CHECK_STR_EQ(out, "");
    base64url_encode("f", 1, out);
    CHECK_STR_EQ(out, "Zg");
    base64url_encode("fo", 2, out);
    CHECK_STR_EQ(out, "Zm8");
    base64url_encode("foo", 3, out);
    CHECK_STR_EQ(out, "Zm9v");
    base64url_encode("\xfb\xff", 2, out);
    CHECK_STR_EQ(out, "-_8");
}

TEST(base64_padded_vectors)
{
    /* RFC 4648 section 10, plus the two characters that differ from base64url */
    static const char *const want[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                       "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char out[64];
    for (size_t i = 0; i < 7; i++) {
        CHECK_INT_EQ(base64_encode("foobar", i, out), strlen(want[i]));
        CHECK_STR_EQ(out, want[i]);
    }
    base64_encode("\xfb\xff", 2, out);
    CHECK_STR_EQ(out, "+/8=");
}

TEST(sha256_known_vector)
{
    char hex[65];
    sha256_hex("abc", 3, hex);
    CHECK_STR_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(token_digest_is_stable_keyed_and_tells_tokens_apart)
{
    unsigned char a[TOKEN_DIGEST_BYTES], b[TOKEN_DIGEST_BYTES], c[TOKEN_DIGEST_BYTES];
    unsigned char plain[TOKEN_DIGEST_BYTES], zero[crypto_shorthash_siphashx24_KEYBYTES] = {0};
    token_digest("smcp_token-one", 14, a);
    token_digest("smcp_token-one", 14, b);
    token_digest("smcp_token-two", 14, c);
    CHECK(memcmp(a, b, sizeof(a)) == 0);
    CHECK(memcmp(a, c, sizeof(a)) != 0);
    /* under the process's own key, not a known one */
    crypto_shorthash_siphashx24(plain, (const unsigned char *)"smcp_token-one", 14, zero);
    CHECK(memcmp(a, plain, sizeof(a)) != 0);
}

TEST(id_new_shape_and_uniqueness)
{
    char a[64], b[64];
    id_new("tok", a);
    id_new("tok", b);
    CHECK_INT_EQ(strlen(a), 4 + 26);
    CHECK(strncmp(a, "tok_", 4) == 0);
    CHECK(strcmp(a, b) != 0);
}

TEST(dotenv_parses_wrangler_format)
{
    struct config cfg = {0};
    struct err err = {0};
    const char *text = "# comment\n"
                       "\n"
                       "A=plain value # trailing comment\n"
                       "export B = \"quoted # not a comment\\nnext\"\n"
                       "C='single $literal'\r\n"
                       "D=\n"
                       "E=url#fragment\n";
    CHECK_INT_EQ(config_parse_dotenv(&cfg, text, strlen(text), &err), 0);
    CHECK_STR_EQ(config_get(&cfg, "A"), "plain value");
    CHECK_STR_EQ(config_get(&cfg, "B"), "quoted # not a comment\nnext");
    CHECK_STR_EQ(config_get(&cfg, "C"), "single $literal");
    CHECK(config_get(&cfg, "D") == NULL);
    CHECK_STR_EQ(config_get(&cfg, "E"), "url#fragment");
    config_release(&cfg);
}

TEST(dotenv_errors_name_the_line)
{
    struct config cfg = {0};
    struct err err = {0};
    const char *t1 = "A=1\nthis is not valid\n";
    CHECK_INT_EQ(config_parse_dotenv(&cfg, t1, strlen(t1), &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "line 2");
    const char *t2 = "A=\"unterminated\n";
    CHECK_INT_EQ(config_parse_dotenv(&cfg, t2, strlen(t2), &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "line 1");
    const char *t3 = "1A=x\n";
    CHECK_INT_EQ(config_parse_dotenv(&cfg, t3, strlen(t3), &err), -EINVAL);
    config_release(&cfg);
}

TEST(config_later_definitions_win)
{
    struct config cfg = {0};
    struct err err = {0};
    const char *text = "LISTEN=127.0.0.1:1\nLISTEN=127.0.0.1:2\n";
    CHECK_INT_EQ(config_parse_dotenv(&cfg, text, strlen(text), &err), 0);
    CHECK_INT_EQ(config_finish(&cfg, &err), 0);
    CHECK_STR_EQ(cfg.listen, "127.0.0.1:2");
    CHECK_STR_EQ(cfg.public_url, "http://127.0.0.1:2");
    CHECK_INT_EQ(cfg.max_request_bytes, 4 * 1024 * 1024);
    config_release(&cfg);
}

TEST(config_rejects_bad_numbers_and_urls)
{
    struct config cfg = {0};
    struct err err = {0};
    config_set(&cfg, "MAX_REQUEST_BYTES", "12x");
    CHECK_INT_EQ(config_finish(&cfg, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "MAX_REQUEST_BYTES");
    config_release(&cfg);
    config_set(&cfg, "PUBLIC_URL", "ftp://x");
    CHECK_INT_EQ(config_finish(&cfg, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "PUBLIC_URL");
    config_release(&cfg);
    config_set(&cfg, "PUBLIC_URL", "https://mcp.example.com///");
    CHECK_INT_EQ(config_finish(&cfg, &err), 0);
    CHECK_STR_EQ(cfg.public_url, "https://mcp.example.com");
    config_release(&cfg);
}

TEST(config_egress_rate_default_off_and_floor)
{
    struct config cfg = {0};
    struct err err = {0};
    CHECK_INT_EQ(config_finish(&cfg, &err), 0);
    CHECK_INT_EQ(cfg.sandbox_egress_rate, 100 * 1024 * 1024);
    config_release(&cfg);
    config_set(&cfg, "SANDBOX_EGRESS_RATE", "0");
    CHECK_INT_EQ(config_finish(&cfg, &err), 0);
    CHECK_INT_EQ(cfg.sandbox_egress_rate, 0);
    config_release(&cfg);
    config_set(&cfg, "SANDBOX_EGRESS_RATE", "65536");
    CHECK_INT_EQ(config_finish(&cfg, &err), 0);
    CHECK_INT_EQ(cfg.sandbox_egress_rate, 65536);
    config_release(&cfg);
    config_set(&cfg, "SANDBOX_EGRESS_RATE", "65535");
    CHECK_INT_EQ(config_finish(&cfg, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "SANDBOX_EGRESS_RATE '65535' is below 65536");
    config_release(&cfg);
}

TEST(config_tls_cert_and_key_go_together)
{
    struct config cfg = {0};
    struct err err = {0};
    config_set(&cfg, "TLS_CERT", "/etc/ssl/mcp.pem");
    CHECK_INT_EQ(config_finish(&cfg, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "TLS_KEY is missing");
    config_release(&cfg);
    config_set(&cfg, "TLS_KEY", "/etc/ssl/mcp.key");
    CHECK_INT_EQ(config_finish(&cfg, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "TLS_CERT is missing");
    config_release(&cfg);
    config_set(&cfg, "LISTEN", "0.0.0.0:8443");
    config_set(&cfg, "TLS_CERT", "/etc/ssl/mcp.pem");
    config_set(&cfg, "TLS_KEY", "/etc/ssl/mcp.key");
    CHECK_INT_EQ(config_finish(&cfg, &err), 0);
    CHECK_STR_EQ(cfg.tls_cert, "/etc/ssl/mcp.pem");
    CHECK_STR_EQ(cfg.public_url, "https://0.0.0.0:8443");
    config_release(&cfg);
}

TEST(config_file_limit_follows_the_request_cap)
{
    struct config cfg = {0};
    struct err err = {0};
    CHECK_INT_EQ(config_finish(&cfg, &err), 0);
    /* what a 4 MiB request carries as base64, after 16 KiB of envelope */
    CHECK_INT_EQ(cfg.file_max_bytes, (4194304 - 16384) / 4 * 3);
    CHECK_INT_EQ(cfg.reply_max_bytes, 100000);
    config_release(&cfg);
    config_set(&cfg, "MAX_REQUEST_BYTES", "1048576");
    CHECK_INT_EQ(config_finish(&cfg, &err), 0);
    CHECK_INT_EQ(cfg.file_max_bytes, 774144);
    config_release(&cfg);
    config_set(&cfg, "FILE_MAX_BYTES", "2097152");
    CHECK_INT_EQ(config_finish(&cfg, &err), 0);
    CHECK_INT_EQ(cfg.file_max_bytes, 2097152);
    config_release(&cfg);
    /* a limit no request could carry is refused, naming both settings and the fix */
    config_set(&cfg, "FILE_MAX_BYTES", "8388608");
    CHECK_INT_EQ(config_finish(&cfg, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "FILE_MAX_BYTES 8388608 is more than one request of "
                                "MAX_REQUEST_BYTES 4194304 can carry (3133440 bytes");
    CHECK_STR_CONTAINS(err.msg, "raise MAX_REQUEST_BYTES to at least 11201196");
    config_release(&cfg);
    /* ... and the request size it names is enough */
    CHECK(config_file_write_max(11201196) >= 8388608);
    CHECK(config_file_write_max(11201195) < 8388608);
    config_set(&cfg, "MAX_REQUEST_BYTES", "11201196");
    config_set(&cfg, "FILE_MAX_BYTES", "8388608");
    CHECK_INT_EQ(config_finish(&cfg, &err), 0);
    config_release(&cfg);
    /* the smallest request cap still leaves room for the envelope */
    CHECK_INT_EQ(config_file_write_max(1024), 576);
    config_set(&cfg, "REPLY_MAX_BYTES", "16383");
    CHECK_INT_EQ(config_finish(&cfg, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "REPLY_MAX_BYTES");
    config_release(&cfg);
}

TEST(log_ratelimit_per_key_and_second)
{
    uint64_t held = 99;
    int64_t t = 5000;
    for (int i = 0; i < 3; i++) {
        CHECK(log_ratelimit("egress sbx_a", 3, t + i, &held));
        CHECK_INT_EQ(held, 0);
    }
    CHECK(!log_ratelimit("egress sbx_a", 3, t + 10, &held));
    CHECK_INT_EQ(held, 1);
    CHECK(!log_ratelimit("egress sbx_a", 3, t + 999, &held));
    CHECK_INT_EQ(held, 2);
    /* another key has its own count */
    CHECK(log_ratelimit("egress sbx_b", 3, t + 999, &held));
    CHECK_INT_EQ(held, 0);
    /* the next second: allowed again, told how many were held back, and that count restarts */
    CHECK(log_ratelimit("egress sbx_a", 3, t + 1000, &held));
    CHECK_INT_EQ(held, 2);
    CHECK(log_ratelimit("egress sbx_a", 3, t + 1001, NULL));
    CHECK(log_ratelimit("egress sbx_a", 3, t + 1002, &held));
    CHECK_INT_EQ(held, 0);
    CHECK(!log_ratelimit("egress sbx_a", 3, t + 1003, NULL));
    /* a clock that goes back starts a window rather than holding lines back for ever */
    CHECK(log_ratelimit("egress sbx_a", 3, t, &held));
    CHECK_INT_EQ(held, 1);
    CHECK(!log_ratelimit("never", 0, t, &held));
    CHECK_INT_EQ(held, 1);
}

TEST(log_ratelimit_keys_are_bounded_and_cut)
{
    int64_t t = 100000;
    char key[80];
    /* more keys than are kept: each new one is allowed, the least recently used forgotten */
    CHECK(log_ratelimit("kept", 1, t, NULL));
    CHECK(!log_ratelimit("kept", 1, t, NULL));
    for (int i = 0; i < LOG_RATE_KEYS + 10; i++) {
        snprintf(key, sizeof(key), "key %d", i);
        CHECK(log_ratelimit(key, 1, t + 1 + i, NULL));
        CHECK(!log_ratelimit(key, 1, t + 1 + i, NULL));
    }
    /* "kept" was forgotten, so it starts afresh within the same second */
    uint64_t held = 99;
    CHECK(log_ratelimit("kept", 1, t + 300, &held));
    CHECK_INT_EQ(held, 0);
    /* keys longer than 63 bytes are cut: these two are one key */
    memset(key, 'k', 70);
    key[70] = '\0';
    CHECK(log_ratelimit(key, 1, t + 400, NULL));
    key[68] = 'x';
    CHECK(!log_ratelimit(key, 1, t + 400, NULL));
    key[60] = 'x';
    CHECK(log_ratelimit(key, 1, t + 400, NULL));
}

TEST(time_format)
{
    char out[32];
    time_format_rfc3339(1700000000123LL, out);
    CHECK_STR_EQ(out, "2023-11-14T22:13:20.123Z");
    time_format_rfc3339(-1, out);
    CHECK_STR_EQ(out, "1969-12-31T23:59:59.999Z");
    time_format_rfc3339(-86400000LL * 365, out);
    CHECK_STR_EQ(out, "1969-01-01T00:00:00.000Z");
}

TEST(format_bytes_and_durations)
{
    char out[32];
    format_bytes(1000, out);
    CHECK_STR_EQ(out, "1000 bytes");
    format_bytes(512 << 10, out);
    CHECK_STR_EQ(out, "512 KiB");
    format_bytes(1 << 20, out);
    CHECK_STR_EQ(out, "1 MiB");
    format_bytes(3 << 19, out);
    CHECK_STR_EQ(out, "1.5 MiB");
    format_bytes(10ull << 30, out);
    CHECK_STR_EQ(out, "10 GiB");
    /* exact, or in bytes */
    format_bytes(71928, out);
    CHECK_STR_EQ(out, "71928 bytes");
    format_bytes(100000, out);
    CHECK_STR_EQ(out, "100000 bytes");
    format_span_ms(250, out);
    CHECK_STR_EQ(out, "250 ms");
    format_span_ms(60000, out);
    CHECK_STR_EQ(out, "60 s");
    format_span_ms(90 * 60000, out);
    CHECK_STR_EQ(out, "90 min");
    format_span_ms(240 * 60000, out);
    CHECK_STR_EQ(out, "4 h");
    format_span_ms(7 * 24 * 3600000ull, out);
    CHECK_STR_EQ(out, "168 h");
    format_span_ms(150 * 60000 + 30000, out);
    CHECK_STR_EQ(out, "150.5 min");
    format_span_ms(61234, out);
    CHECK_STR_EQ(out, "61234 ms");
}

TEST(constant_time_compare)
{
    CHECK(str_equal_ct("abc", 3, "abc", 3));
    CHECK(!str_equal_ct("abc", 3, "abd", 3));
    CHECK(!str_equal_ct("abc", 3, "ab", 2));
}

TEST(base64_decode_forms_and_errors)
{
    unsigned char out[64];
    CHECK_INT_EQ(base64_decode("Zm9vYmFy", 8, out), 6);
    CHECK(memcmp(out, "foobar", 6) == 0);
    CHECK_INT_EQ(base64_decode("Zm9vYg==", 8, out), 4); /* padded */
    CHECK_INT_EQ(base64_decode("Zm9vYg", 6, out), 4);   /* unpadded */
    CHECK_INT_EQ(base64_decode("Zm9v\nYmFy\n", 10, out), 6);
    CHECK_INT_EQ(base64_decode("-_8", 3, out), 2); /* URL-safe alphabet */
    CHECK(out[0] == 0xfb && out[1] == 0xff);
    CHECK_INT_EQ(base64_decode("", 0, out), 0);
    CHECK_INT_EQ(base64_decode("!!!", 3, out), -1);
    CHECK_INT_EQ(base64_decode("Zg==Zg==", 8, out), -1); /* data after padding */
    CHECK_INT_EQ(base64_decode("Z", 1, out), -1);        /* a lone sextet is not a byte */
    CHECK_INT_EQ(base64_decode("Zh", 2, out), -1);       /* non-zero leftover bits */
}

TEST(base64_decode_strict_refuses_the_lenient_forms)
{
    unsigned char out[64];
    CHECK_INT_EQ(base64_decode_strict("Zm9vYmFy", 8, out), 6);
    CHECK(memcmp(out, "foobar", 6) == 0);
    CHECK_INT_EQ(base64_decode_strict("Zm9vYg==", 8, out), 4);
    CHECK(memcmp(out, "foob", 4) == 0);
    CHECK_INT_EQ(base64_decode_strict("Zm9vYmE=", 8, out), 5);
    CHECK(memcmp(out, "fooba", 5) == 0);
    CHECK_INT_EQ(base64_decode_strict("+/8=", 4, out), 2);
    CHECK(out[0] == 0xfb && out[1] == 0xff);
    CHECK_INT_EQ(base64_decode_strict("", 0, out), 0);
    /* what the lenient decoder takes and the strict one refuses; every strict form is lenient
     * too, with the same bytes */
    const char *lenient_only[] = {
        "Zm9vYg",     /* unpadded */
        "Zg=",        /* padded short of a whole quantum */
        "Zm9v\nYmFy", /* whitespace */
        "Zm9 vYg=",   /* whitespace, in a length that is a multiple of 4 */
        "-_8=",       /* the URL-safe alphabet */
        "Zm9vYmF_",   /* one URL-safe digit */
    };
    for (size_t i = 0; i < sizeof(lenient_only) / sizeof(lenient_only[0]); i++) {
        size_t n = strlen(lenient_only[i]);
        CHECK(base64_decode(lenient_only[i], n, out) >= 0);
        CHECK_INT_EQ(base64_decode_strict(lenient_only[i], n, out), -1);
    }
    /* refused by both */
    const char *neither[] = {"Zm9vYh==", "Zm9vYmF=", "Zg==Zg==", "Zm=v", "====", "Z===", "!!!!"};
    for (size_t i = 0; i < sizeof(neither) / sizeof(neither[0]); i++) {
        size_t n = strlen(neither[i]);
        CHECK_INT_EQ(base64_decode(neither[i], n, out), -1);
        CHECK_INT_EQ(base64_decode_strict(neither[i], n, out), -1);
    }
}

/* The fast writer gives jansson's own bytes (JSON_COMPACT | JSON_ENCODE_ANY). */
static void check_same_as_jansson(json_t *v)
{
    size_t len;
    char *ours = json_write_text(v, &len);
    char *theirs = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    CHECK_STR_EQ(ours, theirs);
    CHECK_INT_EQ(len, strlen(theirs));
    free(ours);
    free(theirs);
    json_decref(v);
}

TEST(json_write_matches_jansson)
{
    /* every byte below 0x20, and the two that are always escaped */
    char all[40];
    size_t n = 0;
    for (int c = 1; c < 0x20; c++)
        all[n++] = (char)c;
    all[n++] = '"';
    all[n++] = '\\';
    all[n++] = '/';
    all[n++] = 0x7f;
    check_same_as_jansson(json_stringn(all, n));
    check_same_as_jansson(json_stringn("nul\0inside", 10));
    check_same_as_jansson(json_string("h\xC3\xA9llo \xF0\x9F\x98\x80 \xE2\x80\xA8"));
    check_same_as_jansson(json_string(""));
    check_same_as_jansson(json_pack("{s:i, s:I, s:f, s:f, s:f, s:b, s:b, s:n}", "i", -7, "big",
                                    (json_int_t)INT64_MIN, "r", 1.5, "whole", 3.0, "tiny", 1e-300,
                                    "t", 1, "f", 0, "nothing"));
    check_same_as_jansson(json_pack("[[], {}, [[{s:[]}]], s]", "k\"ey\n", "tail"));
    json_t *keys = json_object();
    json_object_setn_new(keys, "a\0b", 3, json_integer(1));
    json_object_set_new(keys, "\x01", json_true());
    check_same_as_jansson(keys);
    /* a large string of plain text, as command output is */
    size_t big = 1 << 20;
    char *text = malloc(big);
    for (size_t i = 0; i < big; i++)
        text[i] = i % 97 == 96 ? '\n' : (char)('a' + i % 26);
    check_same_as_jansson(json_pack("{s:s%}", "stdout", text, big));
    free(text);
    /* the writer skips plain text eight bytes at a time: each byte that needs an escape, and
     * bytes that look alike to a word at a time (0x20 and up, characters of several bytes), at
     * every offset of strings of every length up to three words */
    static const struct {
        const char *s;
        size_t extra; /* what its escape adds */
    } special[] = {{"\"", 1},
                   {"\\", 1},
                   {"\n", 1},
                   {"\x01", 5},
                   {"\x1f", 5},
                   {" ", 0},
                   {"!", 0},
                   {"#", 0},
                   {"[", 0},
                   {"]", 0},
                   {"\x7f", 0},
                   {"\xC3\xA9", 0},
                   {"\xE2\x80\xA8", 0},
                   {"\xF0\x9F\x98\x80", 0}};
    for (size_t len = 0; len <= 24; len++)
        for (size_t at = 0; at < len; at++)
            for (size_t k = 0; k < sizeof(special) / sizeof(special[0]); k++) {
                size_t sl = strlen(special[k].s);
                if (at + sl > len)
                    continue;
                char str[25];
                memset(str, 'a', len);
                memcpy(str + at, special[k].s, sl);
                check_same_as_jansson(json_stringn_nocheck(str, len));
                CHECK_INT_EQ(json_string_cost(str, len), len + special[k].extra);
            }
}

TEST(json_cost_and_fits)
{
    /* one a byte, two for the short escapes, six for other control characters */
    CHECK_INT_EQ(json_string_cost("abc", 3), 3);
    CHECK_INT_EQ(json_string_cost("a\"b\\c\n\t", 7), 11);
    CHECK_INT_EQ(json_string_cost("\x01", 1), 6);
    CHECK_INT_EQ(json_string_cost("\xC3\xA9", 2), 2);
    /* up to a limit: exact within it, above it past it (without reading the rest) */
    CHECK_INT_EQ(json_string_cost_upto("a\"b\\c\n\t", 7, 11), 11);
    CHECK(json_string_cost_upto("a\"b\\c\n\t", 7, 10) > 10);
    CHECK(json_string_cost_upto("abcdef", 6, 5) > 5);
    CHECK_INT_EQ(json_string_cost_upto("\x01\x01", 2, SIZE_MAX), 12);
    /* the cost is what json_write writes between the quotes */
    const char mixed[] = "x\"\x01\xE2\x82\xAC\n";
    size_t len;
    json_t *v = json_stringn(mixed, sizeof(mixed) - 1);
    char *text = json_write_text(v, &len);
    CHECK_INT_EQ(json_string_cost(mixed, sizeof(mixed) - 1), len - 2);
    free(text);
    json_decref(v);
    /* prefixes and suffixes never split a character or an escape's cost */
    const char *s = "ab\xE2\x82\xAC\"cd"; /* a b EURO " c d: 8 bytes, cost 9 */
    CHECK_INT_EQ(json_prefix_fit(s, 8, 100), 8);
    CHECK_INT_EQ(json_prefix_fit(s, 8, 2), 2);
    CHECK_INT_EQ(json_prefix_fit(s, 8, 3), 2); /* the euro sign's lead byte alone is cut */
    CHECK_INT_EQ(json_prefix_fit(s, 8, 5), 5);
    CHECK_INT_EQ(json_prefix_fit(s, 8, 6), 5); /* '"' costs two */
    CHECK_INT_EQ(json_prefix_fit(s, 8, 7), 6);
    CHECK_INT_EQ(json_prefix_fit(s, 8, 0), 0);
    CHECK_INT_EQ(json_suffix_fit(s, 8, 100), 0);
    CHECK_INT_EQ(json_suffix_fit(s, 8, 2), 6);
    CHECK_INT_EQ(json_suffix_fit(s, 8, 3), 6); /* '"' costs two */
    CHECK_INT_EQ(json_suffix_fit(s, 8, 4), 5);
    CHECK_INT_EQ(json_suffix_fit(s, 8, 5), 5); /* not into the euro sign */
    CHECK_INT_EQ(json_suffix_fit(s, 8, 7), 2);
    CHECK_INT_EQ(json_suffix_fit(s, 8, 0), 8);
}

/* The fits a byte at a time, as they were before they skipped runs a word at a time. */
static size_t ref_cost(unsigned char c)
{
    if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
        return 2;
    return c < 0x20 ? 6 : 1;
}

static size_t ref_prefix_fit(const char *s, size_t n, size_t budget)
{
    size_t i = 0, cost = 0;
    while (i < n && cost + ref_cost((unsigned char)s[i]) <= budget)
        cost += ref_cost((unsigned char)s[i++]);
    while (i > 0 && i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
        i--;
    return i;
}

static size_t ref_suffix_fit(const char *s, size_t n, size_t budget)
{
    size_t i = n, cost = 0;
    while (i > 0 && cost + ref_cost((unsigned char)s[i - 1]) <= budget)
        cost += ref_cost((unsigned char)s[--i]);
    while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
        i++;
    return i;
}

TEST(json_fits_agree_with_a_byte_at_a_time_at_every_budget)
{
    /* pieces that cost one, two and six, and a three-byte character, at every offset of
     * strings a few words long */
    static const char *const pieces[] = {"a",  "bc",   "\"",           "\\",
                                         "\n", "\x01", "\xE2\x82\xAC", "x7y"};
    unsigned seed = 1;
    for (int round = 0; round < 400; round++) {
        char str[64];
        size_t n = 0;
        while (n < 40) {
            seed = seed * 1103515245u + 12345u;
            const char *p = pieces[(seed >> 16) % 8];
            size_t k = strlen(p);
            memcpy(str + n, p, k);
            n += k;
        }
        size_t total = json_string_cost(str, n);
        for (size_t b = 0; b <= total + 2; b++) {
            CHECK_INT_EQ(json_prefix_fit(str, n, b), ref_prefix_fit(str, n, b));
            CHECK_INT_EQ(json_suffix_fit(str, n, b), ref_suffix_fit(str, n, b));
        }
    }
}

TEST_MAIN()

/* The run's full diff: git's output parsed and cut to its limits (src/runs/diff.c). */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/utf8.h"
#include "harness.h"
#include "runs/diff.h"

/* What git 2.39 printed for a workspace against its starting commit (`git add -A -N .`, then
 * diff_command()): a new file, a new binary file, a deleted file, a change, a mode change, a
 * rename with a change to a name with a space, and a name with a quote and a newline. */
static const char sample[] = "diff --git a/added.txt b/added.txt\n"
                             "new file mode 100644\n"
                             "index 0000000..3e75765\n"
                             "--- /dev/null\n"
                             "+++ b/added.txt\n"
                             "@@ -0,0 +1 @@\n"
                             "+new\n"
                             "diff --git a/bin.dat b/bin.dat\n"
                             "new file mode 100644\n"
                             "index 0000000..8352675\n"
                             "Binary files /dev/null and b/bin.dat differ\n"
                             "diff --git a/del.txt b/del.txt\n"
                             "deleted file mode 100644\n"
                             "index 286c5f5..0000000\n"
                             "--- a/del.txt\n"
                             "+++ /dev/null\n"
                             "@@ -1 +0,0 @@\n"
                             "-gone\n"
                             "diff --git a/mod.txt b/mod.txt\n"
                             "index 4cb29ea..ddc897f 100644\n"
                             "--- a/mod.txt\n"
                             "+++ b/mod.txt\n"
                             "@@ -1,3 +1,3 @@\n"
                             " one\n"
                             "-two\n"
                             "+TWO\n"
                             " three\n"
                             "diff --git a/mode.sh b/mode.sh\n"
                             "old mode 100644\n"
                             "new mode 100755\n"
                             "diff --git a/old.txt b/new name.txt\n"
                             "similarity index 90%\n"
                             "rename from old.txt\n"
                             "rename to new name.txt\n"
                             "index 0ff3bbb..fb3ced1 100644\n"
                             "--- a/old.txt\n"
                             "+++ b/new name.txt\t\n"
                             "@@ -2,7 +2,7 @@\n"
                             " 2\n"
                             "-5\n"
                             "+five\n"
                             " 6\n"
                             "diff --git \"a/we\\\"ird\\nname.txt\" \"b/we\\\"ird\\nname.txt\"\n"
                             "new file mode 100644\n"
                             "index 0000000..587be6b\n"
                             "--- /dev/null\n"
                             "+++ \"b/we\\\"ird\\nname.txt\"\n"
                             "@@ -0,0 +1 @@\n"
                             "+x\n";

static json_t *file_at(json_t *d, size_t i)
{
    return json_array_get(json_object_get(d, "files"), i);
}

static const char *str(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static json_int_t num(json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static size_t nfiles(json_t *d)
{
    return json_array_size(json_object_get(d, "files"));
}

static bool truncated(json_t *d)
{
    return json_is_true(json_object_get(d, "truncated"));
}

/* Every string in the result is valid UTF-8 without NULs (jansson refuses less on output). */
static char *dump(json_t *d)
{
    char *text = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK(text != NULL);
    CHECK(text && utf8_valid(text, strlen(text)));
    return text;
}

static unsigned lines_in(const char *hunks)
{
    if (!hunks || !*hunks)
        return 0;
    unsigned n = 1;
    for (const char *p = hunks; *p; p++)
        n += *p == '\n';
    return n;
}

TEST(every_kind_of_change)
{
    json_t *d = diff_parse(sample, strlen(sample), NULL);
    CHECK_INT_EQ(nfiles(d), 7);
    CHECK_INT_EQ(num(d, "more_files"), 0);
    CHECK(!truncated(d));

    json_t *f = file_at(d, 0);
    CHECK_STR_EQ(str(f, "path"), "added.txt");
    CHECK_STR_EQ(str(f, "status"), "added");
    CHECK(json_is_false(json_object_get(f, "binary")));
    CHECK_INT_EQ(num(f, "insertions"), 1);
    CHECK_INT_EQ(num(f, "deletions"), 0);
    CHECK_STR_EQ(str(f, "hunks"), "@@ -0,0 +1 @@\n+new");
    CHECK_INT_EQ(num(f, "more_lines"), 0);
    CHECK(json_object_get(f, "old_path") == NULL);

    f = file_at(d, 1);
    CHECK_STR_EQ(str(f, "path"), "bin.dat");
    CHECK_STR_EQ(str(f, "status"), "added");
    CHECK(json_is_true(json_object_get(f, "binary")));
    CHECK_STR_EQ(str(f, "hunks"), "");

    f = file_at(d, 2);
    CHECK_STR_EQ(str(f, "path"), "del.txt");
    CHECK_STR_EQ(str(f, "status"), "deleted");
    CHECK_INT_EQ(num(f, "deletions"), 1);
    CHECK_STR_EQ(str(f, "hunks"), "@@ -1 +0,0 @@\n-gone");

    f = file_at(d, 3);
    CHECK_STR_EQ(str(f, "path"), "mod.txt");
    CHECK_STR_EQ(str(f, "status"), "modified");
    CHECK_INT_EQ(num(f, "insertions"), 1);
    CHECK_INT_EQ(num(f, "deletions"), 1);
    CHECK_STR_EQ(str(f, "hunks"), "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three");

    f = file_at(d, 4);
    CHECK_STR_EQ(str(f, "path"), "mode.sh");
    CHECK_STR_EQ(str(f, "status"), "modified");
    CHECK_STR_EQ(str(f, "old_mode"), "100644");
    CHECK_STR_EQ(str(f, "new_mode"), "100755");
    CHECK_STR_EQ(str(f, "hunks"), "");

    f = file_at(d, 5);
    CHECK_STR_EQ(str(f, "path"), "new name.txt");
    CHECK_STR_EQ(str(f, "old_path"), "old.txt");
    CHECK_STR_EQ(str(f, "status"), "renamed");
    CHECK_INT_EQ(num(f, "insertions"), 1);
    CHECK_INT_EQ(num(f, "deletions"), 1);

    f = file_at(d, 6);
    CHECK_STR_EQ(str(f, "path"), "we\"ird\nname.txt");
    CHECK_STR_EQ(str(f, "status"), "added");
    free(dump(d));
    json_decref(d);
}

TEST(names_git_quotes_and_names_with_spaces)
{
    /* with core.quotepath=off only '"', '\\' and control characters are quoted; an octal
     * escape (what quotepath=on prints for bytes above 0x7f) decodes too */
    static const char in[] = "diff --git \"a/tab\\tx\\\\y\" \"b/tab\\tx\\\\y\"\n"
                             "new file mode 100644\n"
                             "Binary files /dev/null and \"b/tab\\tx\\\\y\" differ\n"
                             "diff --git \"a/\\303\\274ber.txt\" \"b/\\303\\274ber.txt\"\n"
                             "deleted file mode 100644\n"
                             "Binary files \"a/\\303\\274ber.txt\" and /dev/null differ\n"
                             "diff --git a/my file b/x.bin b/my file b/x.bin\n"
                             "new file mode 100644\n"
                             "index 0000000..e69de29\n"
                             "diff --git a/ü b.txt b/ü b.txt\n"
                             "deleted file mode 100644\n"
                             "--- a/ü b.txt\t\n"
                             "+++ /dev/null\n"
                             "@@ -1 +0,0 @@\n"
                             "-x\n"
                             "diff --git \"a/q\\\"1\" \"b/q\\\"2\"\n"
                             "similarity index 100%\n"
                             "rename from \"q\\\"1\"\n"
                             "rename to \"q\\\"2\"\n"
                             "diff --git a/odd\n"
                             "new file mode 100644\n";
    json_t *d = diff_parse(in, sizeof(in) - 1, NULL);
    CHECK_INT_EQ(nfiles(d), 6);
    CHECK_STR_EQ(str(file_at(d, 0), "path"), "tab\tx\\y");
    CHECK(json_is_true(json_object_get(file_at(d, 0), "binary")));
    CHECK_STR_EQ(str(file_at(d, 1), "path"), "über.txt");
    CHECK_STR_EQ(str(file_at(d, 1), "status"), "deleted");
    CHECK_STR_EQ(str(file_at(d, 2), "path"), "my file b/x.bin");
    CHECK_STR_EQ(str(file_at(d, 3), "path"), "ü b.txt");
    CHECK_INT_EQ(num(file_at(d, 3), "deletions"), 1);
    CHECK_STR_EQ(str(file_at(d, 4), "path"), "q\"2");
    CHECK_STR_EQ(str(file_at(d, 4), "old_path"), "q\"1");
    CHECK_STR_EQ(str(file_at(d, 4), "status"), "renamed");
    CHECK_STR_EQ(str(file_at(d, 5), "path"), "a/odd"); /* not git's shape: shown as it is */
    free(dump(d));
    json_decref(d);
}

/* A new file of n lines "line i". */
static void new_file(struct buf *b, const char *name, unsigned n)
{
    buf_printf(b, "diff --git a/%s b/%s\nnew file mode 100644\n--- /dev/null\n+++ b/%s\n", name,
               name, name);
    buf_printf(b, "@@ -0,0 +1,%u @@\n", n);
    for (unsigned i = 1; i <= n; i++)
        buf_printf(b, "+line %u\n", i);
}

TEST(a_long_file_shows_its_first_lines_and_counts_the_rest)
{
    struct buf b;
    buf_init(&b, 0);
    new_file(&b, "big.txt", 1000);
    new_file(&b, "small.txt", 2);
    json_t *d = diff_parse(b.data, b.len, NULL);
    CHECK_INT_EQ(nfiles(d), 2);
    json_t *f = file_at(d, 0);
    CHECK_INT_EQ(lines_in(str(f, "hunks")), DIFF_FILE_LINES_MAX);
    CHECK_INT_EQ(num(f, "more_lines"), 1001 - DIFF_FILE_LINES_MAX);
    CHECK_INT_EQ(num(f, "insertions"), 1000);
    const char *h = str(f, "hunks");
    CHECK_STR_EQ(h + strlen(h) - strlen("\n+line 399"), "\n+line 399");
    /* the next file is whole */
    CHECK_INT_EQ(num(file_at(d, 1), "more_lines"), 0);
    CHECK_STR_EQ(str(file_at(d, 1), "hunks"), "@@ -0,0 +1,2 @@\n+line 1\n+line 2");
    CHECK(truncated(d));
    json_decref(d);
    buf_release(&b);
}

TEST(files_past_the_limit_are_counted)
{
    struct buf b;
    buf_init(&b, 0);
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "f%d", i);
        new_file(&b, name, 1);
    }
    struct diff_limits lim = {.files = 2, .file_lines = 10, .bytes = 1 << 20, .line_bytes = 100};
    json_t *d = diff_parse(b.data, b.len, &lim);
    CHECK_INT_EQ(nfiles(d), 2);
    CHECK_STR_EQ(str(file_at(d, 1), "path"), "f1");
    CHECK_INT_EQ(num(d, "more_files"), 3);
    CHECK(truncated(d));
    json_decref(d);
    buf_release(&b);
}

TEST(the_byte_limit_stops_lines_then_files)
{
    struct buf b;
    buf_init(&b, 0);
    new_file(&b, "a", 50); /* "@@ -0,0 +1,50 @@" and 50 lines of 7 or 8 bytes */
    new_file(&b, "b", 50);
    new_file(&b, "c", 1);
    struct diff_limits lim = {.files = 10, .file_lines = 1000, .bytes = 300, .line_bytes = 100};
    json_t *d = diff_parse(b.data, b.len, &lim);
    size_t total = 0;
    for (size_t i = 0; i < nfiles(d); i++) /* a line counts with its newline */
        total += strlen(str(file_at(d, i), "path")) + strlen(str(file_at(d, i), "hunks")) +
                 (lines_in(str(file_at(d, i), "hunks")) > 0);
    CHECK(total <= 300);
    CHECK_INT_EQ(nfiles(d), 1);
    json_t *f = file_at(d, 0);
    CHECK(num(f, "more_lines") > 0);
    CHECK_INT_EQ(lines_in(str(f, "hunks")) + num(f, "more_lines"), 51);
    CHECK_INT_EQ(num(f, "insertions"), 50);
    CHECK_INT_EQ(num(d, "more_files"), 2);
    CHECK(truncated(d));
    json_decref(d);
    buf_release(&b);
}

TEST(a_long_line_is_cut_with_a_note)
{
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "diff --git a/min.js b/min.js\n--- a/min.js\n+++ b/min.js\n@@ -1 +1 @@\n-x\n+");
    for (int i = 0; i < 3000; i++)
        buf_puts(&b, "é"); /* 2 bytes: the cut falls inside one at 1000 - 1 */
    buf_puts(&b, "\n");
    json_t *d = diff_parse(b.data, b.len, NULL);
    const char *h = str(file_at(d, 0), "hunks");
    const char *last = strrchr(h, '\n') + 1;
    CHECK_INT_EQ(strlen(last), 999 + strlen(" [... 5002 more bytes]"));
    CHECK_STR_CONTAINS(last, "é [... 5002 more bytes]");
    CHECK_INT_EQ(num(file_at(d, 0), "insertions"), 1);
    CHECK(truncated(d));
    free(dump(d));
    json_decref(d);
    buf_release(&b);
}

TEST(invalid_utf8_and_nuls_become_replacement_characters)
{
    static const char in[] = "diff --git a/bad\xff.txt b/bad\xff.txt\n"
                             "--- a/bad\xff.txt\n"
                             "+++ b/bad\xff.txt\n"
                             "@@ -1 +1 @@\n"
                             "-a\xc3\n"
                             "+b\0c\xed\xa0\x80\n";
    json_t *d = diff_parse(in, sizeof(in) - 1, NULL);
    CHECK_INT_EQ(nfiles(d), 1);
    CHECK_STR_EQ(str(file_at(d, 0), "path"), "bad\xef\xbf\xbd.txt");
    const char *h = str(file_at(d, 0), "hunks");
    CHECK_STR_CONTAINS(h, "-a\xef\xbf\xbd\n");
    CHECK_STR_CONTAINS(h, "+b\xef\xbf\xbd"
                          "c\xef\xbf\xbd");
    free(dump(d));
    json_decref(d);
}

TEST(pieces_of_any_size_give_the_same_result)
{
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, sample);
    new_file(&b, "big.txt", 500);
    json_t *whole = diff_parse(b.data, b.len, NULL);
    char *want = dump(whole);
    size_t sizes[] = {1, 2, 3, 7, 64, 4096};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        struct diff *p = diff_new(NULL);
        for (size_t at = 0; at < b.len; at += sizes[k])
            diff_feed(p, b.data + at, b.len - at < sizes[k] ? b.len - at : sizes[k]);
        json_t *d = diff_finish(p, true);
        diff_free(p);
        char *got = dump(d);
        CHECK_STR_EQ(got, want);
        free(got);
        json_decref(d);
    }
    free(want);
    json_decref(whole);
    buf_release(&b);
}

TEST(an_unfinished_diff_says_so_and_keeps_what_came)
{
    /* cut in the middle of a header and of a line */
    static const char in[] = "noise before the first file\n"
                             "diff --git a/a.txt b/a.txt\n"
                             "--- a/a.txt\n"
                             "+++ b/a.txt\n"
                             "@@ -1 +1 @@\n"
                             "-x\n"
                             "+y\n"
                             "diff --git a/b.txt b/b.txt\n"
                             "new file mode 1006";
    struct diff *p = diff_new(NULL);
    diff_feed(p, in, sizeof(in) - 1);
    json_t *d = diff_finish(p, false);
    diff_free(p);
    CHECK_INT_EQ(nfiles(d), 2);
    CHECK_STR_EQ(str(file_at(d, 0), "hunks"), "@@ -1 +1 @@\n-x\n+y");
    CHECK_STR_EQ(str(file_at(d, 1), "path"), "b.txt");
    CHECK_STR_EQ(str(file_at(d, 1), "status"), "added");
    CHECK(truncated(d));
    json_decref(d);

    d = diff_parse("", 0, NULL);
    CHECK_INT_EQ(nfiles(d), 0);
    CHECK_INT_EQ(num(d, "more_files"), 0);
    CHECK(!truncated(d));
    json_decref(d);

    /* a parser freed without finishing, in a header */
    p = diff_new(NULL);
    diff_feed(p, in, sizeof(in) - 1);
    diff_free(p);
}

TEST(the_command_takes_only_a_commit_name)
{
    char *c = diff_command("0123456789abcdef0123456789abcdef01234567");
    CHECK_STR_CONTAINS(c, "git add -A -N .");
    CHECK_STR_CONTAINS(c, "core.quotepath=off diff --no-color --no-ext-diff");
    CHECK_STR_CONTAINS(c, " -M ");
    CHECK_STR_CONTAINS(c, " 0123456789abcdef0123456789abcdef01234567 --");
    free(c);
    CHECK(diff_command("HEAD; rm -rf /") == NULL);
    CHECK(diff_command("ABCDEF12") == NULL);
    CHECK(diff_command("") == NULL);
    CHECK(diff_command(NULL) == NULL);
}

TEST_MAIN()

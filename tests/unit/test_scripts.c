/* The run engine's pure parts (src/runs/scripts.c): the change list read back from the sandbox,
 * token redaction in what an agent prints, git's words turned into ours, the branches a clone
 * lists, the model name check, and the shell the engine builds (run here by a real /bin/sh). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "harness.h"
#include "runs/runs_internal.h"

/* ---- the change list ---- */

static json_t *changes(const char *out)
{
    char *text = scripts_parse_changes(out);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return j;
}

static json_int_t num(json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static const char *str(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

TEST(changes_of_a_run)
{
    json_t *c = changes("smcp/fix-it\n---\n3\t1\tsrc/a.c\n-\t-\timg.png\n10\t0\tdocs/new file.md\n"
                        "---\nabc123 Fix the thing\ndef456 Add docs: with spaces\n");
    CHECK(c != NULL);
    CHECK_STR_EQ(str(c, "branch"), "smcp/fix-it");
    CHECK_INT_EQ(num(c, "files_changed"), 3);
    CHECK_INT_EQ(num(c, "insertions"), 13);
    CHECK_INT_EQ(num(c, "deletions"), 1);
    json_t *files = json_object_get(c, "files");
    CHECK_STR_EQ(str(json_array_get(files, 0), "path"), "src/a.c");
    CHECK_INT_EQ(num(json_array_get(files, 0), "insertions"), 3);
    CHECK(json_is_false(json_object_get(json_array_get(files, 0), "binary")));
    /* a binary file counts nothing, and says so */
    CHECK_STR_EQ(str(json_array_get(files, 1), "path"), "img.png");
    CHECK_INT_EQ(num(json_array_get(files, 1), "insertions"), 0);
    CHECK(json_is_true(json_object_get(json_array_get(files, 1), "binary")));
    /* a path keeps its spaces (numstat's third field is the rest of the line) */
    CHECK_STR_EQ(str(json_array_get(files, 2), "path"), "docs/new file.md");
    json_t *commits = json_object_get(c, "commits");
    CHECK_INT_EQ(json_array_size(commits), 2);
    CHECK_STR_EQ(str(json_array_get(commits, 0), "sha"), "abc123");
    CHECK_STR_EQ(str(json_array_get(commits, 0), "message"), "Fix the thing");
    CHECK_STR_EQ(str(json_array_get(commits, 1), "message"), "Add docs: with spaces");
    json_decref(c);
}

TEST(changes_without_anything)
{
    /* nothing at all: zeros, empty lists, no branch */
    json_t *c = changes("");
    CHECK(c != NULL);
    CHECK_INT_EQ(num(c, "files_changed"), 0);
    CHECK_INT_EQ(json_array_size(json_object_get(c, "files")), 0);
    CHECK_INT_EQ(json_array_size(json_object_get(c, "commits")), 0);
    CHECK(json_is_null(json_object_get(c, "branch")));
    json_decref(c);
    /* a detached HEAD, no changes: the branch is what was printed */
    c = changes("HEAD\n---\n---\n");
    CHECK_STR_EQ(str(c, "branch"), "HEAD");
    CHECK_INT_EQ(num(c, "files_changed"), 0);
    json_decref(c);
    /* only separators: the first line is no branch when it is a separator */
    c = changes("---\n---\n");
    CHECK(json_is_null(json_object_get(c, "branch")));
    json_decref(c);
}

TEST(changes_skip_what_they_cannot_read)
{
    /* numstat lines need two tabs, log lines a space; blank lines vanish (strtok) */
    json_t *c = changes("main\nsecond line ignored\n---\nno tabs here\n1\tonly-one-tab\n\n\n"
                        "2\t2\tok.c\n---\nnospace\nfff ok\n---\nafter a third separator\n");
    CHECK_STR_EQ(str(c, "branch"), "main");
    CHECK_INT_EQ(num(c, "files_changed"), 1);
    CHECK_STR_EQ(str(json_array_get(json_object_get(c, "files"), 0), "path"), "ok.c");
    CHECK_INT_EQ(json_array_size(json_object_get(c, "commits")), 1);
    CHECK_STR_EQ(str(json_array_get(json_object_get(c, "commits"), 0), "sha"), "fff");
    json_decref(c);
    /* numbers git would never print read as strtoll reads them; a "-" counts 0 in its column,
     * and one in the first marks the file binary */
    c = changes("b\n---\nx\t7\ta\n5\t-\tb\n-\t4\tc\n");
    CHECK_INT_EQ(num(c, "insertions"), 5);
    CHECK_INT_EQ(num(c, "deletions"), 11);
    json_t *files = json_object_get(c, "files");
    CHECK(json_is_false(json_object_get(json_array_get(files, 0), "binary")));
    CHECK(json_is_false(json_object_get(json_array_get(files, 1), "binary")));
    CHECK(json_is_true(json_object_get(json_array_get(files, 2), "binary")));
    json_decref(c);
}

TEST(changes_lists_are_capped_but_totals_are_not)
{
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "main\n---\n");
    for (int i = 0; i < SCRIPTS_CHANGES_LIST_MAX + 5; i++)
        buf_printf(&b, "1\t2\tf%d\n", i);
    buf_puts(&b, "---\n");
    for (int i = 0; i < SCRIPTS_CHANGES_LIST_MAX + 7; i++)
        buf_printf(&b, "%040d commit %d\n", i, i);
    json_t *c = changes(b.data);
    buf_release(&b);
    CHECK_INT_EQ(json_array_size(json_object_get(c, "files")), SCRIPTS_CHANGES_LIST_MAX);
    CHECK_INT_EQ(num(c, "files_changed"), SCRIPTS_CHANGES_LIST_MAX);
    CHECK_INT_EQ(num(c, "insertions"), SCRIPTS_CHANGES_LIST_MAX + 5);
    CHECK_INT_EQ(num(c, "deletions"), 2 * (SCRIPTS_CHANGES_LIST_MAX + 5));
    CHECK_INT_EQ(json_array_size(json_object_get(c, "commits")), SCRIPTS_CHANGES_LIST_MAX);
    json_decref(c);
}

TEST(changes_with_invalid_utf8)
{
    /* a file or commit that is not UTF-8 is left out of its list (its counts still add up);
     * a branch that is not makes no list at all */
    json_t *c = changes("main\n---\n1\t1\tbad\xff.c\n2\t0\tgood.c\n---\nabc m\xc3\n");
    CHECK(c != NULL);
    CHECK_INT_EQ(json_array_size(json_object_get(c, "files")), 1);
    CHECK_INT_EQ(num(c, "insertions"), 3);
    CHECK_INT_EQ(json_array_size(json_object_get(c, "commits")), 0);
    json_decref(c);
    char *text = scripts_parse_changes("br\xff\n---\n");
    CHECK(text == NULL);
    free(text);
}

/* ---- token redaction ---- */

#define JWT                                                                                        \
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c3JfMSIsInJ1biI6InJ1bl8xIn0."                \
    "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

static char *redacted(const char *in)
{
    static char out[1024];
    snprintf(out, sizeof(out), "%s", in);
    scripts_redact_tokens(out);
    return out;
}

TEST(redact_a_token_anywhere)
{
    /* the text keeps its length, and nothing of the token is left */
    char *s = redacted("Authorization: Bearer " JWT " and more");
    CHECK_INT_EQ(strlen(s), strlen("Authorization: Bearer " JWT " and more"));
    CHECK(strstr(s, "eyJ") == NULL);
    CHECK(strstr(s, "dBjftJeZ") == NULL);
    CHECK_STR_CONTAINS(s, "Bearer [redacted]xxx");
    CHECK_STR_CONTAINS(s, "x and more");
    /* alone, at the start, at the end, inside JSON and quotes */
    CHECK(strncmp(redacted(JWT), "[redacted]", 10) == 0);
    CHECK(strstr(redacted(JWT), "eyJ") == NULL);
    CHECK(strstr(redacted("{\"token\":\"" JWT "\"}"), "eyJ") == NULL);
    CHECK_STR_CONTAINS(redacted("{\"token\":\"" JWT "\"}"), "\"}");
    CHECK(strstr(redacted("x=" JWT), "eyJ") == NULL);
    /* two in a row, and one glued to a non-base64 character */
    s = redacted(JWT " " JWT);
    CHECK(strstr(s, "eyJ") == NULL);
    CHECK_INT_EQ(strlen(s), 2 * strlen(JWT) + 1);
    CHECK(strstr(redacted("(" JWT ")"), "eyJ") == NULL);
    /* in a URL's query, as an agent may echo it */
    CHECK(strstr(redacted("http://127.0.0.1:8788/proxy?t=" JWT "&x=1"), "eyJ") == NULL);
    CHECK_STR_CONTAINS(redacted("http://127.0.0.1:8788/proxy?t=" JWT "&x=1"), "&x=1");
}

TEST(redact_leaves_what_is_no_token)
{
    /* NULL and empty are fine */
    scripts_redact_tokens(NULL);
    CHECK_STR_EQ(redacted(""), "");
    /* "eyJ" alone, base64 without dots, one dot, a second part not starting eyJ */
    CHECK_STR_EQ(redacted("eyJ"), "eyJ");
    CHECK_STR_EQ(redacted("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9eyJzdWIiOiJ1c3JfMSJ9"),
                 "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9eyJzdWIiOiJ1c3JfMSJ9");
    CHECK_STR_EQ(redacted("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c3JfMSJ9"),
                 "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c3JfMSJ9");
    CHECK_STR_EQ(redacted("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.abcdefgh.ijklmnop"),
                 "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.abcdefgh.ijklmnop");
    /* three parts but 40 bytes or fewer: too short to be a token */
    CHECK_STR_EQ(redacted("eyJhbGci.eyJzdWIi.sig"), "eyJhbGci.eyJzdWIi.sig");
    /* a trailing dot with nothing after it is not a third part */
    CHECK_STR_EQ(redacted("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c3JfMSJ9."),
                 "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c3JfMSJ9.");
    /* ordinary words with eyJ in them, and text around a token that is kept */
    CHECK_STR_EQ(redacted("keyJar.eyJ"), "keyJar.eyJ");
}

/* A run's secret values: every occurrence blotted to its length, short values left alone. */
TEST(redact_secret_values)
{
    const char *values[] = {"s3cr3t-value", "abc", "d\\\"q", "wxyz"};
    char s[] = "a s3cr3t-value b s3cr3t-values3cr3t-value abc wxyz {\"v\":\"d\\\"q\"}";
    scripts_redact_values(s, values, 4);
    CHECK_STR_EQ(s, "a [redacted]xx b [redacted]xx[redacted]xx abc [red {\"v\":\"[red\"}");
    scripts_redact_values(NULL, values, 4);
    char t[] = "nothing here";
    scripts_redact_values(t, values, 0);
    CHECK_STR_EQ(t, "nothing here");
}

TEST(redact_a_token_after_a_false_start)
{
    /* an "eyJ" that is no token right before one that is: the second is still found */
    char *s = redacted("eyJnot.a " JWT);
    CHECK(strstr(s, "dBjftJeZ") == NULL);
    CHECK(strncmp(s, "eyJnot.a [redacted]", 19) == 0);
    /* a fourth part glued on: the first three are the token and go; ".rest" stays */
    s = redacted(JWT ".rest");
    CHECK(strstr(s, "eyJ") == NULL);
    CHECK_STR_CONTAINS(s, "x.rest");
    /* a token whose second part begins eyJ within a longer eyJ run */
    s = redacted("eyJeyJ" JWT);
    CHECK(strstr(s, "dBjftJeZ") == NULL);
}

/* ---- clone failures ---- */

TEST(clone_reason_in_our_words)
{
    CHECK_STR_EQ(scripts_clone_reason("remote: Repository not found.\nfatal: repository "
                                      "'https://github.com/a/b/' not found"),
                 "the repository does not exist, or it is private");
    CHECK_STR_EQ(scripts_clone_reason("fatal: unable to access 'https://x/': The requested URL "
                                      "returned error: 403"),
                 "access to the repository was refused");
    CHECK_STR_EQ(scripts_clone_reason("fatal: unable to access 'https://x/': Could not resolve "
                                      "host: x"),
                 "the host name could not be resolved");
    CHECK_STR_EQ(scripts_clone_reason("fatal: unable to access 'https://x/': The requested URL "
                                      "returned error: 502"),
                 "the server failed");
    CHECK_STR_EQ(scripts_clone_reason("error: RPC failed; HTTP 301 redirect"),
                 "the server answered with a redirect, which is not followed");
    CHECK_STR_EQ(scripts_clone_reason("fatal: could not read Username for 'https://x': "
                                      "terminal prompts disabled"),
                 "the repository needs credentials this server does not have");
    CHECK_STR_EQ(scripts_clone_reason("SSL certificate problem: self signed certificate"),
                 "the server's TLS certificate could not be verified");
    CHECK_STR_EQ(scripts_clone_reason("fatal: '/tmp/x' does not appear to be a git repository"),
                 "there is no git repository at that address");
    /* the remote's own words never come through */
    CHECK_STR_EQ(scripts_clone_reason("internal.corp: secret-service v2 says no"), "git failed");
    CHECK_STR_EQ(scripts_clone_reason(""), "git failed");
}

TEST(clone_branches_listed)
{
    struct buf names;
    unsigned long total;
    char out1[] = "warning: x\nsmcp-branches 2\ndev\nmain\n";
    buf_init(&names, 0);
    CHECK_INT_EQ(scripts_clone_branches(out1, &names, &total), 2);
    CHECK_INT_EQ(total, 2);
    CHECK_STR_EQ(names.data, "'dev', 'main'");
    buf_release(&names);
    /* more than ten: ten are named, the total says how many */
    char out2[] = "smcp-branches 12\nb1\nb2\nb3\nb4\nb5\nb6\nb7\nb8\nb9\nb10\n";
    buf_init(&names, 0);
    CHECK_INT_EQ(scripts_clone_branches(out2, &names, &total), 10);
    CHECK_INT_EQ(total, 12);
    CHECK_STR_CONTAINS(names.data, "'b10'");
    buf_release(&names);
    /* the marker counts only at a line's start (the last one), names stop at the first that is
     * not a branch name */
    char out3[] = "remote: smcp-branches 99\nsmcp-branches 3\nok\n-bad\nlater\n";
    buf_init(&names, 0);
    CHECK_INT_EQ(scripts_clone_branches(out3, &names, &total), 1);
    CHECK_INT_EQ(total, 3);
    CHECK_STR_EQ(names.data, "'ok'");
    buf_release(&names);
    /* no marker at all */
    char out4[] = "fatal: something\n";
    buf_init(&names, 0);
    CHECK_INT_EQ(scripts_clone_branches(out4, &names, &total), 0);
    CHECK_INT_EQ(total, 0);
    buf_release(&names);
    /* names stop before 300 bytes in all */
    struct buf big;
    buf_init(&big, 0);
    buf_puts(&big, "smcp-branches 5\n");
    for (int i = 0; i < 5; i++) {
        for (int k = 0; k < 120; k++)
            buf_puts(&big, "a");
        buf_printf(&big, "%d\n", i);
    }
    buf_init(&names, 0);
    CHECK_INT_EQ(scripts_clone_branches(big.data, &names, &total), 2);
    CHECK(names.len <= 300 + 8);
    buf_release(&names);
    buf_release(&big);
}

/* ---- model names ---- */

TEST(model_names)
{
    CHECK(scripts_model_valid("anthropic/claude-sonnet-4-5"));
    CHECK(scripts_model_valid("openrouter/meta-llama/llama-3.1-70b:free"));
    CHECK(scripts_model_valid("a/b"));
    CHECK(scripts_model_valid("bedrock/anthropic.claude@2024"));
    CHECK(!scripts_model_valid(""));
    CHECK(!scripts_model_valid("no-slash"));
    CHECK(!scripts_model_valid("/model"));
    CHECK(!scripts_model_valid("provider/"));
    CHECK(!scripts_model_valid("a/b c"));
    CHECK(!scripts_model_valid("a/b;rm -rf"));
    CHECK(!scripts_model_valid("a/b$(x)"));
    CHECK(!scripts_model_valid("a/b\n"));
    CHECK(!scripts_model_valid("a/\xc3\xa9"));
    char m[130];
    memset(m, 'm', sizeof(m));
    m[1] = '/';
    m[120] = '\0';
    CHECK(scripts_model_valid(m));
    m[120] = 'm';
    m[121] = '\0';
    CHECK(!scripts_model_valid(m));
}

/* ---- the shell ---- */

/* Run cmd with /bin/sh in dir, stdin from /dev/null; its stdout (trimmed of nothing). */
static char *sh(const char *dir, const char *cmd)
{
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "cd ");
    scripts_sh_quote(&b, dir);
    buf_puts(&b, " && /bin/sh -c ");
    scripts_sh_quote(&b, cmd);
    buf_puts(&b, " </dev/null 2>/dev/null");
    FILE *p = popen(b.data, "r");
    buf_release(&b);
    static char out[4096];
    size_t n = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
    out[n] = '\0';
    if (p)
        pclose(p);
    return out;
}

TEST(sh_quote_is_one_word)
{
    const char *words[] = {"plain", "",      "it's",        "'",         "''", "a b", "$(touch /x)",
                           "`id`",  "\"q\"", "back\\slash", "new\nline", "*",  "-n"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        struct buf b;
        buf_init(&b, 0);
        buf_puts(&b, "printf %s ");
        scripts_sh_quote(&b, words[i]);
        CHECK_STR_EQ(sh("/", b.data), words[i]);
        buf_release(&b);
    }
}

TEST(prepare_without_repository_makes_the_directory)
{
    char dir[] = "/tmp/smcp-scripts-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char wd[128];
    snprintf(wd, sizeof(wd), "%s/work space's", dir);
    struct scripts_prepare p = {.workdir = wd};
    char *cmd = scripts_prepare(&p);
    sh("/", cmd);
    free(cmd);
    struct buf t;
    buf_init(&t, 0);
    buf_puts(&t, "test -d ");
    scripts_sh_quote(&t, wd);
    buf_puts(&t, " && echo yes");
    CHECK_STR_EQ(sh("/", t.data), "yes\n");
    buf_release(&t);
    /* with a repository and nothing there: only "absent" */
    p.repository = true;
    snprintf(wd, sizeof(wd), "%s/none", dir);
    cmd = scripts_prepare(&p);
    CHECK_STR_EQ(sh("/", cmd), "absent\n");
    free(cmd);
    char rm[160];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
    CHECK_INT_EQ(system(rm), 0);
}

TEST(prepare_and_changes_in_a_repository)
{
    if (system("git --version >/dev/null 2>&1") != 0) {
        printf("  (no git: skipped)\n");
        return;
    }
    char dir[] = "/tmp/smcp-scripts-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK_STR_EQ(sh(dir, "git init -q -b main . && git -c user.name=t -c user.email=t@t commit "
                         "-q --allow-empty -m first && echo ok"),
                 "ok\n");
    /* an existing repository: the branch asked for is checked out, the session's made from it */
    CHECK_STR_EQ(sh(dir, "git branch dev && echo ok"), "ok\n");
    struct scripts_prepare p = {
        .workdir = dir, .repository = true, .checkout = "dev", .make_branch = "smcp/x-y"};
    char *cmd = scripts_prepare(&p);
    char *out = sh("/", cmd);
    free(cmd);
    char branch[64] = "", sha[64] = "", made[16] = "";
    CHECK_INT_EQ(sscanf(out, "%63s %63s %15s", branch, sha, made), 3);
    CHECK_STR_EQ(branch, "dev");
    CHECK_INT_EQ(strlen(sha), 40);
    CHECK_STR_EQ(made, "made");
    CHECK_STR_EQ(sh(dir, "git symbolic-ref --short HEAD"), "smcp/x-y\n");
    /* changes since that commit: a new file left uncommitted is committed when asked */
    char base[64];
    snprintf(base, sizeof(base), "%s", sha);
    CHECK_STR_EQ(sh(dir, "printf 'a\\nb\\n' > 'new file.txt' && echo ok"), "ok\n");
    cmd = scripts_changes(dir, base, true);
    struct buf full;
    buf_init(&full, 0);
    buf_puts(&full, "SMCP_MSG='Left over' GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t "
                    "GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; export SMCP_MSG; ");
    buf_puts(&full, cmd);
    free(cmd);
    json_t *c = changes(sh("/", full.data));
    buf_release(&full);
    CHECK_STR_EQ(str(c, "branch"), "smcp/x-y");
    CHECK_INT_EQ(num(c, "files_changed"), 1);
    CHECK_INT_EQ(num(c, "insertions"), 2);
    CHECK_STR_EQ(str(json_array_get(json_object_get(c, "files"), 0), "path"), "new file.txt");
    CHECK_INT_EQ(json_array_size(json_object_get(c, "commits")), 1);
    CHECK_STR_EQ(str(json_array_get(json_object_get(c, "commits"), 0), "message"), "Left over");
    json_decref(c);
    /* without a base: against the empty tree, every commit */
    cmd = scripts_changes(dir, "", false);
    c = changes(sh("/", cmd));
    free(cmd);
    CHECK_INT_EQ(json_array_size(json_object_get(c, "commits")), 2);
    json_decref(c);
    char rm[160];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
    CHECK_INT_EQ(system(rm), 0);
}

TEST(agent_seed_execs_its_arguments)
{
    char dir[] = "/tmp/smcp-scripts-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    struct buf b;
    buf_init(&b, 0);
    buf_printf(&b, "HOME='%s' /bin/sh -c ", dir);
    scripts_sh_quote(&b, scripts_agent_seed);
    buf_printf(&b, " agent printf '%%s|' one 'two words'; cat '%s/.config/opencode/package.json'",
               dir);
    CHECK_STR_EQ(sh("/", b.data),
                 "one|two words|{\"dependencies\":{\"@opencode-ai/plugin\":\"*\"}}\n");
    buf_release(&b);
    char rm[160];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
    CHECK_INT_EQ(system(rm), 0);
}

TEST(sha_check_and_the_reset_to_it)
{
    CHECK(scripts_sha_valid("0123456789abcdef0123456789abcdef01234567"));
    CHECK(scripts_sha_valid("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    CHECK(!scripts_sha_valid("0123456789ABCDEF0123456789abcdef01234567"));
    CHECK(!scripts_sha_valid("0123456789abcdef"));
    CHECK(!scripts_sha_valid("0123456789abcdef0123456789abcdef0123456'"));
    CHECK(!scripts_sha_valid(""));
    char *cmd = scripts_reset_to("/workspace/it's", "0123456789abcdef0123456789abcdef01234567");
    CHECK_STR_EQ(cmd, "cd '/workspace/it'\\''s' && git cat-file -e "
                      "'0123456789abcdef0123456789abcdef01234567^{commit}' 2>/dev/null && git "
                      "reset -q --hard 0123456789abcdef0123456789abcdef01234567");
    free(cmd);
}

TEST_MAIN()

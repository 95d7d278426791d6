/* Repository references (src/runs/repo.c): which transports are accepted, and the host and port
 * the egress policy is asked about. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runs/deliver.h"
#include "runs/runs_internal.h"

static struct repo_ref ok(const char *url, bool local)
{
    struct repo_ref ref;
    struct err err = {0};
    if (repo_check(url, local, &ref, &err) != 0)
        CHECK_FAIL_("'%s' refused: %s", url, err.msg);
    return ref;
}

TEST(network_urls_give_host_and_port)
{
    struct repo_ref r = ok("https://GitHub.com/acme/Widget.git", false);
    CHECK_STR_EQ(r.host, "github.com");
    CHECK_INT_EQ(r.port, 443);
    CHECK(!r.http && !r.local);
    CHECK_STR_EQ(r.name, "Widget");
    r = ok("http://git.internal:8080/x/y", false);
    CHECK_STR_EQ(r.host, "git.internal");
    CHECK_INT_EQ(r.port, 8080);
    CHECK(r.http);
    r = ok("http://git.internal/x/y", false);
    CHECK_INT_EQ(r.port, 80);
    r = ok("https://[::1]:8443/a/b.git", false);
    CHECK_STR_EQ(r.host, "::1");
    CHECK_INT_EQ(r.port, 8443);
    r = ok("https://[::ffff:127.0.0.1]/a", false);
    CHECK_STR_EQ(r.host, "::ffff:127.0.0.1");
    CHECK_INT_EQ(r.port, 443);
    r = ok("https://127.0.0.1/a", false);
    CHECK_STR_EQ(r.host, "127.0.0.1");
    r = ok("/srv/git/thing.git", true);
    CHECK(r.local);
    CHECK_STR_EQ(r.name, "thing");
}

TEST(other_transports_and_odd_urls_are_refused)
{
    static const struct {
        const char *url, *says;
    } bad[] = {
        {"ssh://git@github.com/acme/widget.git", "must be an https:// URL"},
        {"git@github.com:acme/widget.git", "must be an https:// URL"},
        {"git://github.com/acme/widget.git", "must be an https:// URL"},
        {"ext::sh -c touch% /tmp/x", "spaces"},
        {"ext::true", "must be an https:// URL"},
        {"file:///etc", "local repositories are not allowed"},
        {"/etc", "local repositories are not allowed"},
        {"HTTPS://github.com/a/b", "must be an https:// URL"},
        {"https://user:pw@github.com/a/b", "credentials"},
        {"https://github.com/a/b?x=1", "query"},
        {"https://github.com/a/b#frag", "query"},
        {"https://github.com\\@evil/a", "credentials"},
        {"https://github.com\\evil/a", "backslashes"},
        {"https://git%68ub.com/a", "query"},
        {"https:///a/b", "no host"},
        {"https://:443/a/b", "no host"},
        {"https://github.com:0/a", "malformed port"},
        {"https://github.com:65536/a", "malformed port"},
        {"https://github.com:/a", "malformed port"},
        {"https://github.com:44a/a", "malformed port"},
        {"https://[::1/a", "malformed host"},
        {"https://[::1]x/a", "malformed host"},
        {"https://-x.example/a", "malformed host"},
        {"https://a!b/a", "malformed host"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct repo_ref ref;
        struct err err = {0};
        if (repo_check(bad[i].url, false, &ref, &err) != -EINVAL)
            CHECK_FAIL_("'%s' was accepted", bad[i].url);
        else if (!strstr(err.msg, bad[i].says))
            CHECK_FAIL_("'%s': \"%s\" does not say '%s'", bad[i].url, err.msg, bad[i].says);
    }
}

/* A session's branch: its id's tail and a slug of the title, a valid branch name whatever the
 * title holds. */
TEST(session_branch_names)
{
    char b[128];
    deliver_branch_name("ses_abcdefgh12345678", "Add a greeting", b);
    CHECK_STR_EQ(b, "sandbox-mcp/12345678-add-a-greeting");
    CHECK(repo_branch_valid(b));
    deliver_branch_name("ses_abcdefgh12345678", "  ..Fix: the \"login\" page ~^:?*[ -- now!  ", b);
    CHECK_STR_EQ(b, "sandbox-mcp/12345678-fix-the-login-page-now");
    CHECK(repo_branch_valid(b));
    deliver_branch_name("ses_abcdefgh12345678", "Überprüfe die Ä-Tests", b);
    CHECK_STR_EQ(b, "sandbox-mcp/12345678-berpr-fe-die-tests");
    CHECK(repo_branch_valid(b));
    deliver_branch_name("ses_abcdefgh12345678", "!!!", b);
    CHECK_STR_EQ(b, "sandbox-mcp/12345678");
    deliver_branch_name("ses_x", "a very long title that goes on and on past forty characters", b);
    CHECK_STR_EQ(b, "sandbox-mcp/ses_x-a-very-long-title-that-goes-on-and-on-pa");
    CHECK(repo_branch_valid(b));
}

/* --- the branch and commit a run starts from (repo_head_script) --- */

static char head_dir[64];

static void head_dir_remove(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", head_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", head_dir);
}

/* Run cmd in the repository, then the script, with git on PATH or without; what the script
 * printed, or "" when cmd failed. Without git, the script's questions to git come back as
 * "HEAD" and "-": that output tells that it asked. */
static void head_of(const char *cmd, bool git, char *out, size_t cap)
{
    char full[2048];
    snprintf(full, sizeof(full),
             "cd %s && { %s; } >/dev/null 2>&1 && PATH=%s && { %s; } 2>/dev/null", head_dir, cmd,
             git ? "/usr/bin:/bin" : "/nonexistent", repo_head_script);
    out[0] = '\0';
    FILE *f = popen(full, "r");
    if (!f)
        return;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    pclose(f);
}

TEST(a_run_starts_from_git_files_in_the_plain_case_and_asks_git_otherwise)
{
    snprintf(head_dir, sizeof(head_dir), "/var/tmp/rh-unit-XXXXXX");
    CHECK(mkdtemp(head_dir) != NULL);
    atexit(head_dir_remove);
    setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
    setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
    char got[512], want[512], cmd[512];

    /* no commit yet: asked of git */
    head_of("git init -q -b main .", true, got, sizeof(got));
    CHECK_STR_EQ(got, "main\n-\n");
    head_of("true", false, got, sizeof(got));
    CHECK_STR_EQ(got, "HEAD\n-\n");

    /* a commit on a branch, and a branch made from it: read without git, as git says it */
    head_of("git -c user.name=T -c user.email=t@example.com commit -q --allow-empty -m x", true,
            want, sizeof(want));
    CHECK(strncmp(want, "main\n", 5) == 0 && strlen(want) == 5 + 41);
    head_of("true", false, got, sizeof(got));
    CHECK_STR_EQ(got, want);
    const char *sha = want + 5; /* "<40 hex>\n" */
    head_of("git checkout -q -b feature/x-1.2", false, got, sizeof(got));
    CHECK(strncmp(got, "feature/x-1.2\n", 14) == 0);
    CHECK_STR_EQ(got + 14, sha);

    /* a packed ref, a detached HEAD: git answers, with the same commit */
    head_of("git pack-refs --all", false, got, sizeof(got));
    CHECK_STR_EQ(got, "HEAD\n-\n");
    head_of("true", true, got, sizeof(got));
    CHECK(strncmp(got, "feature/x-1.2\n", 14) == 0);
    CHECK_STR_EQ(got + 14, sha);
    head_of("git checkout -q --detach", true, got, sizeof(got));
    CHECK(strncmp(got, "HEAD\n", 5) == 0);
    CHECK_STR_EQ(got + 5, sha);

    /* a HEAD git would not write, or one outside refs/heads, or a loose ref that is not a
     * commit id: left to git */
    static const char *const odd[] = {"ref: refs/heads/a b",   "ref: refs/heads/../../HEAD",
                                      "ref: refs/heads/",      "ref: refs/tags/v1",
                                      "ref: refs/heads/$(id)", "ref: refs/heads/junk"};
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        snprintf(cmd, sizeof(cmd),
                 "echo nothex > .git/refs/heads/junk && printf '%%s\\n' '%s' > .git/HEAD", odd[i]);
        head_of(cmd, false, got, sizeof(got));
        if (strcmp(got, "HEAD\n-\n") != 0)
            CHECK_FAIL_("HEAD '%s' was read without git: %s", odd[i], got);
    }
}

TEST_MAIN()

/* The "owner/name" a user's repository settings are kept under, from any form a run names. */
TEST(repository_slugs_for_settings)
{
    char out[201];
    const struct {
        const char *in, *want; /* want NULL: refused */
    } cases[] = {
        {"acme/oak", "acme/oak"},
        {"Acme/Oak.git", "acme/oak"},
        {"https://github.com/Acme/Oak.git/", "acme/oak"},
        {"http://git.example:8080/a/b/acme/oak", "acme/oak"},
        {"/srv/git/acme/oak.git", "acme/oak"},
        {"file:///srv/acme/oak.git", "acme/oak"},
        {"acme/my_repo-2.x", "acme/my_repo-2.x"},
        {"oak", NULL},
        {"/oak", NULL},
        {"acme/", NULL},
        {"acme/.hidden", NULL},
        {"acme/oak;rm", NULL},
        {"ac me/oak", NULL},
        {"acme/.git", NULL},
        {"", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool ok = runs_repo_slug(cases[i].in, out, sizeof(out));
        CHECK_INT_EQ(ok, cases[i].want != NULL);
        if (ok && cases[i].want)
            CHECK_STR_EQ(out, cases[i].want);
    }
}

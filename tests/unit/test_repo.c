/* Repository references (src/runs/repo.c): which transports are accepted, and the host and port
 * the egress policy is asked about. */
#include <errno.h>
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

TEST_MAIN()

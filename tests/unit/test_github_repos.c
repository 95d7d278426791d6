/* GITHUB_REPOS and the repository a git path or URL names (src/proxy/repos.c). */
#include <errno.h>
#include <string.h>

#include "harness.h"
#include "proxy/proxy.h"

TEST(list_syntax)
{
    struct err err = {0};
    CHECK_INT_EQ(proxy_repos_check(NULL, &err), 0);
    CHECK_INT_EQ(proxy_repos_check("", &err), 0);
    CHECK_INT_EQ(proxy_repos_check("acme/*, org/repo,*,a.b/c-d_e.git", &err), 0);
    static const char *const bad[] = {"acme",   "acme/",   "/repo", "a/b/c",   "acme/**",
                                      "*/repo", "ac me/x", "../x",  "acme/..", "acme/x?"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (proxy_repos_check(bad[i], &err) != -EINVAL)
            CHECK_FAIL_("'%s' was accepted", bad[i]);
        else
            CHECK_STR_CONTAINS(err.msg, "GITHUB_REPOS entry");
    }
}

TEST(list_matching)
{
    const char *spec = "acme/*, org/repo";
    CHECK(proxy_repo_allowed(spec, "acme/widget"));
    CHECK(proxy_repo_allowed(spec, "ACME/Widget"));
    CHECK(proxy_repo_allowed(spec, "org/repo"));
    CHECK(proxy_repo_allowed(spec, "Org/Repo"));
    CHECK(!proxy_repo_allowed(spec, "org/repo2"));
    CHECK(!proxy_repo_allowed(spec, "org/rep"));
    CHECK(!proxy_repo_allowed(spec, "acmex/widget"));
    CHECK(!proxy_repo_allowed(spec, "other/repo"));
    CHECK(!proxy_repo_allowed(NULL, "acme/widget"));
    CHECK(!proxy_repo_allowed("", "acme/widget"));
    CHECK(proxy_repo_allowed("*", "anyone/anything"));
}

TEST(repository_of_a_git_path)
{
    char repo[PROXY_REPO_MAX];
    const char *p = "/Acme/Widget.git/info/refs";
    size_t used = proxy_repo_of_path(p, strlen(p), repo);
    CHECK_STR_EQ(repo, "acme/widget");
    CHECK_STR_EQ(p + used, "/info/refs");
    p = "/acme/widget/git-upload-pack";
    used = proxy_repo_of_path(p, strlen(p), repo);
    CHECK_STR_EQ(repo, "acme/widget");
    CHECK_STR_EQ(p + used, "/git-upload-pack");
    static const char *const none[] = {
        "/info", "/acme", "//widget/info/refs", "/../x/info/refs", "/acme/../info/refs", "/a b/c"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
        if (proxy_repo_of_path(none[i], strlen(none[i]), repo) != 0 || repo[0])
            CHECK_FAIL_("'%s' named '%s'", none[i], repo);
}

TEST(repository_of_a_url)
{
    char repo[PROXY_REPO_MAX];
    CHECK(proxy_repo_of_url("https://github.com", "https://github.com/acme/widget.git", repo));
    CHECK_STR_EQ(repo, "acme/widget");
    CHECK(proxy_repo_of_url("https://github.com/", "https://GitHub.com/acme/widget/", repo));
    CHECK_STR_EQ(repo, "acme/widget");
    CHECK(proxy_repo_of_url("http://127.0.0.1:9", "http://127.0.0.1:9/a/b", repo));
    CHECK(!proxy_repo_of_url("https://github.com", "https://github.com.evil/acme/widget", repo));
    CHECK(!proxy_repo_of_url("https://github.com", "https://github.com/acme/widget/tree/x", repo));
    CHECK(!proxy_repo_of_url("https://github.com", "https://github.com/acme", repo));
    CHECK(!proxy_repo_of_url("https://github.com", "https://gitlab.com/acme/widget", repo));
    CHECK_STR_EQ(repo, "");
}

TEST_MAIN()

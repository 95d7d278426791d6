/* GitHub's webhook deliveries read (src/github/webhook.c): the signature, and each event the
 * review loop acts on, from payloads shaped as GitHub documents them (trimmed). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "github/webhook.h"
#include "harness.h"

/* GitHub's own example ("Validating webhook deliveries") */
TEST(github_signature_as_github_documents_it)
{
    static const char secret[] = "It's a Secret to Everybody", body[] = "Hello, World!";
    static const char sig[] =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    CHECK(github_signature_ok(secret, strlen(secret), sig, body, strlen(body)));
    CHECK(!github_signature_ok(secret, strlen(secret), sig, "Hello, World?", 13));
    CHECK(!github_signature_ok("another secret", 14, sig, body, strlen(body)));
    /* other spellings and shapes are not GitHub's */
    CHECK(!github_signature_ok(
        secret, strlen(secret),
        "sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17", body,
        strlen(body)));
    CHECK(!github_signature_ok(secret, strlen(secret), sig + 7, body, strlen(body)));
    CHECK(!github_signature_ok(secret, strlen(secret), "sha1=01234567", body, strlen(body)));
    CHECK(!github_signature_ok(secret, strlen(secret), NULL, body, strlen(body)));
    CHECK(!github_signature_ok("", 0, sig, body, strlen(body)));
}

static struct github_event parse(const char *type, const char *json)
{
    struct github_event ev;
    struct err err = {0};
    CHECK_INT_EQ(github_event_parse(type, json, strlen(json), "@sandbox-mcp", &ev, &err), 0);
    return ev;
}

TEST(github_comments_and_reviews_on_a_pull_request)
{
    struct github_event ev = parse(
        "issue_comment",
        "{\"action\":\"created\",\"issue\":{\"number\":7,\"pull_request\":{\"url\":\"x\"}},"
        "\"comment\":{\"body\":\"@Sandbox-MCP please rename foo to bar\",\"html_url\":"
        "\"https://github.com/acme/widget/pull/7#issuecomment-1\"},\"repository\":{\"full_name\":"
        "\"acme/widget\"},\"sender\":{\"login\":\"alice\"}}");
    CHECK_INT_EQ(ev.kind, GITHUB_EV_COMMENT);
    CHECK_STR_EQ(ev.repo, "acme/widget");
    CHECK_INT_EQ(ev.pr, 7);
    CHECK_STR_EQ(ev.sender, "alice");
    CHECK_STR_EQ(ev.text, "@Sandbox-MCP please rename foo to bar");
    CHECK(ev.addressed);
    CHECK_STR_EQ(ev.url, "https://github.com/acme/widget/pull/7#issuecomment-1");
    github_event_clear(&ev);

    /* not addressed: no mention, or the name inside another */
    static const char *const not_to_us[] = {"looks good", "ping @sandbox-mcp-bot",
                                            "mail me@sandbox-mcp.dev", "x@sandbox-mcpy"};
    for (size_t i = 0; i < 4; i++) {
        char json[512];
        snprintf(json, sizeof(json),
                 "{\"action\":\"created\",\"issue\":{\"number\":7,\"pull_request\":{}},"
                 "\"comment\":{\"body\":\"%s\"}}",
                 not_to_us[i]);
        ev = parse("issue_comment", json);
        CHECK_INT_EQ(ev.kind, GITHUB_EV_COMMENT);
        CHECK(!ev.addressed);
        github_event_clear(&ev);
    }
    ev = parse("issue_comment", "{\"action\":\"created\",\"issue\":{\"number\":7},"
                                "\"comment\":{\"body\":\"@sandbox-mcp hi\"}}");
    CHECK_INT_EQ(ev.kind, GITHUB_EV_IGNORED);
    CHECK_STR_EQ(ev.why, "issue_comment on an issue");
    github_event_clear(&ev);
    ev = parse("issue_comment", "{\"action\":\"edited\",\"issue\":{\"number\":7,"
                                "\"pull_request\":{}},\"comment\":{\"body\":\"@sandbox-mcp\"}}");
    CHECK_INT_EQ(ev.kind, GITHUB_EV_IGNORED);
    CHECK_STR_EQ(ev.why, "issue_comment edited");
    github_event_clear(&ev);

    /* a review that requests changes addresses the server, whatever it says */
    ev = parse("pull_request_review",
               "{\"action\":\"submitted\",\"review\":{\"state\":\"changes_requested\",\"body\":"
               "\"Tests are missing.\",\"html_url\":\"https://github.com/acme/widget/pull/7"
               "#pullrequestreview-9\"},\"pull_request\":{\"number\":7},\"repository\":"
               "{\"full_name\":\"acme/widget\"},\"sender\":{\"login\":\"bob\"}}");
    CHECK_INT_EQ(ev.kind, GITHUB_EV_REVIEW);
    CHECK(ev.addressed);
    CHECK_INT_EQ(ev.pr, 7);
    CHECK_STR_EQ(ev.text, "Tests are missing.");
    github_event_clear(&ev);
    ev = parse("pull_request_review", "{\"action\":\"submitted\",\"review\":{\"state\":"
                                      "\"approved\",\"body\":null},\"pull_request\":"
                                      "{\"number\":7}}");
    CHECK_INT_EQ(ev.kind, GITHUB_EV_REVIEW);
    CHECK(!ev.addressed && ev.text == NULL);
    github_event_clear(&ev);

    /* a comment on a line: the file, the line and the diff around it */
    ev = parse("pull_request_review_comment",
               "{\"action\":\"created\",\"comment\":{\"body\":\"@sandbox-mcp off by one\","
               "\"path\":\"src/a.c\",\"line\":null,\"original_line\":12,\"diff_hunk\":"
               "\"@@ -10,3 +10,3 @@\\n-x\\n+y\",\"html_url\":\"https://github.com/acme/widget/"
               "pull/7#discussion_r1\"},\"pull_request\":{\"number\":7}}");
    CHECK_INT_EQ(ev.kind, GITHUB_EV_REVIEW_COMMENT);
    CHECK(ev.addressed);
    CHECK_STR_EQ(ev.path, "src/a.c");
    CHECK_INT_EQ(ev.line, 12);
    CHECK_STR_EQ(ev.hunk, "@@ -10,3 +10,3 @@\n-x\n+y");
    github_event_clear(&ev);
}

TEST(github_ci_and_closing)
{
    struct github_event ev = parse(
        "check_suite",
        "{\"action\":\"completed\",\"check_suite\":{\"conclusion\":\"failure\",\"head_sha\":"
        "\"0123456789abcdef0123456789abcdef01234567\",\"app\":{\"name\":\"GitHub Actions\"},"
        "\"pull_requests\":[{\"number\":7}]},\"repository\":{\"full_name\":\"acme/widget\"}}");
    CHECK_INT_EQ(ev.kind, GITHUB_EV_CI_FAILED);
    CHECK_INT_EQ(ev.pr, 7);
    CHECK_STR_EQ(ev.head, "0123456789abcdef0123456789abcdef01234567");
    CHECK_STR_EQ(ev.name, "GitHub Actions");
    github_event_clear(&ev);
    ev = parse("workflow_run",
               "{\"action\":\"completed\",\"workflow_run\":{\"conclusion\":\"success\",\"name\":"
               "\"CI\",\"head_sha\":\"abc\",\"html_url\":\"https://github.com/acme/widget/"
               "actions/runs/5\",\"pull_requests\":[]}}");
    CHECK_INT_EQ(ev.kind, GITHUB_EV_CI_PASSED);
    CHECK_INT_EQ(ev.pr, 0);
    CHECK_STR_EQ(ev.name, "CI");
    github_event_clear(&ev);
    ev = parse("workflow_run", "{\"action\":\"completed\",\"workflow_run\":{\"conclusion\":"
                               "\"cancelled\"}}");
    CHECK_INT_EQ(ev.kind, GITHUB_EV_IGNORED);
    CHECK_STR_EQ(ev.why, "workflow_run that did not pass or fail");
    github_event_clear(&ev);
    ev = parse("pull_request", "{\"action\":\"closed\",\"pull_request\":{\"number\":7,"
                               "\"merged\":true,\"html_url\":\"https://github.com/acme/widget/"
                               "pull/7\"}}");
    CHECK_INT_EQ(ev.kind, GITHUB_EV_PR_CLOSED);
    CHECK(ev.merged);
    CHECK_INT_EQ(ev.pr, 7);
    github_event_clear(&ev);
    ev = parse("push", "{\"ref\":\"refs/heads/main\"}");
    CHECK_INT_EQ(ev.kind, GITHUB_EV_IGNORED);
    CHECK_STR_EQ(ev.why, "push");
    github_event_clear(&ev);
}

TEST(github_odd_deliveries)
{
    struct github_event ev;
    struct err err = {0};
    CHECK_INT_EQ(github_event_parse("issue_comment", "[1]", 3, "@x", &ev, &err), -EINVAL);
    CHECK_INT_EQ(github_event_parse("issue_comment", "{\"a\":1,\"a\":2}", 13, "@x", &ev, &err),
                 -EINVAL);
    /* fields of other types read as empty; control characters in names are not kept */
    static const char odd[] = "{\"action\":\"created\",\"issue\":{\"number\":\"7\","
                              "\"pull_request\":{}},\"comment\":{\"body\":5},"
                              "\"sender\":{\"login\":\"ev\\u0007il\"}}";
    CHECK_INT_EQ(github_event_parse("issue_comment", odd, strlen(odd), NULL, &ev, &err), 0);
    CHECK_INT_EQ(ev.kind, GITHUB_EV_COMMENT);
    CHECK_INT_EQ(ev.pr, 0);
    CHECK(ev.text == NULL && !ev.addressed);
    CHECK_STR_EQ(ev.sender, "ev?il");
    github_event_clear(&ev);
    /* a body past its cap is cut on a character boundary */
    size_t n = GITHUB_BODY_MAX + 100;
    char *json = malloc(n + 200);
    int k = snprintf(json, 200,
                     "{\"action\":\"created\",\"issue\":{\"number\":1,\"pull_request\":"
                     "{}},\"comment\":{\"body\":\"");
    for (size_t i = 0; i < n / 2; i++) {
        json[k++] = '\xC3';
        json[k++] = '\xA9';
    }
    k += snprintf(json + k, 200, "\"}}");
    CHECK_INT_EQ(github_event_parse("issue_comment", json, (size_t)k, NULL, &ev, &err), 0);
    CHECK(ev.truncated);
    CHECK(strlen(ev.text) <= GITHUB_BODY_MAX && strlen(ev.text) % 2 == 0);
    github_event_clear(&ev);
    free(json);
}

TEST_MAIN()

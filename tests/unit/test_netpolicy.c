/* The sandboxes' network policy (src/egress/netpolicy.c): modes and their narrowing, host
 * patterns and their errors, and the check of resolved addresses (every class, IPv4 and IPv6,
 * mapped and tunnelled forms, the host's own addresses, the operator's explicit list). Policies
 * are given the host's addresses explicitly; nothing here resolves or connects. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/config.h"
#include "egress/egress.h"
#include "harness.h"

static struct err why;

static void settings(struct config *cfg, const char *mode, const char *allow, const char *defaults,
                     const char *addrs)
{
    const char *const kv[][2] = {{"SANDBOX_NETWORK", mode},
                                 {"SANDBOX_NETWORK_ALLOW", allow},
                                 {"SANDBOX_NETWORK_DEFAULTS", defaults},
                                 {"SANDBOX_NETWORK_ADDRS", addrs}};
    for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
        if (kv[i][1])
            config_set(cfg, kv[i][0], kv[i][1]);
}

/* Comma-separated addresses into a (8 at most); returns how many. */
static int parse_addrs(const char *list, struct egress_addr a[8])
{
    int n = 0;
    char copy[512];
    snprintf(copy, sizeof(copy), "%s", list ? list : "");
    for (char *save, *t = strtok_r(copy, ",", &save); t && n < 8; t = strtok_r(NULL, ",", &save))
        if (egress_addr_parse(t, &a[n++]) < 0)
            CHECK_FAIL_("cannot parse '%s'", t);
    return n;
}

/* A policy from these settings (NULL: unset); own: the host's addresses, comma-separated. */
static struct egress_policy *make(const char *mode, const char *allow, const char *defaults,
                                  const char *addrs, const char *own)
{
    struct config cfg = {0};
    settings(&cfg, mode, allow, defaults, addrs);
    struct egress_addr a[8];
    int n = parse_addrs(own, a);
    struct egress_policy *p = NULL;
    struct err err = {0};
    if (egress_policy_new_with_own(&cfg, a, n, &p, &err) < 0)
        CHECK_FAIL_("policy refused: %s", err.msg);
    config_release(&cfg);
    return p;
}

/* The error egress_policy_new gives for these settings ("" when none). */
static const char *refused(const char *mode, const char *allow, const char *defaults,
                           const char *addrs)
{
    static struct err err;
    struct config cfg = {0};
    settings(&cfg, mode, allow, defaults, addrs);
    struct egress_policy *p = NULL;
    err_clear(&err);
    int r = egress_policy_new_with_own(&cfg, NULL, 0, &p, &err);
    config_release(&cfg);
    if (r == 0) {
        egress_policy_free(p);
        return "";
    }
    if (r != -EINVAL)
        CHECK_FAIL_("refused with %d, not -EINVAL", r);
    return err.msg;
}

static enum egress_reason name(const struct egress_policy *p, enum egress_mode mode,
                               const char *host, uint16_t port)
{
    err_clear(&why);
    return egress_policy_check_name(p, mode, host, port, &why);
}

/* Stage 2 on the comma-separated addresses given. */
static enum egress_reason addrs(const struct egress_policy *p, const char *host, const char *list,
                                uint16_t port)
{
    struct egress_addr a[8];
    int n = parse_addrs(list, a);
    err_clear(&why);
    return egress_policy_check_addrs(p, host, a, n, port, &why);
}

#define A EGRESS_MODE_ALLOWLIST
#define P EGRESS_MODE_PUBLIC

TEST(modes_parse_name_and_narrow)
{
    enum egress_mode m = EGRESS_MODE_PUBLIC;
    CHECK_INT_EQ(egress_mode_parse("none", &m), 0);
    CHECK_INT_EQ(m, EGRESS_MODE_NONE);
    CHECK_INT_EQ(egress_mode_parse("allowlist", &m), 0);
    CHECK_INT_EQ(m, EGRESS_MODE_ALLOWLIST);
    CHECK_INT_EQ(egress_mode_parse("public", &m), 0);
    CHECK_INT_EQ(m, EGRESS_MODE_PUBLIC);
    static const char *const bad[] = {"", "Public", "open", "all", "allow", "none ", NULL};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        m = EGRESS_MODE_ALLOWLIST;
        CHECK_INT_EQ(egress_mode_parse(bad[i], &m), -EINVAL);
        CHECK_INT_EQ(m, EGRESS_MODE_ALLOWLIST);
    }
    CHECK_STR_EQ(egress_mode_name(EGRESS_MODE_NONE), "none");
    CHECK_STR_EQ(egress_mode_name(EGRESS_MODE_ALLOWLIST), "allowlist");
    CHECK_STR_EQ(egress_mode_name(EGRESS_MODE_PUBLIC), "public");
    enum egress_mode all[] = {EGRESS_MODE_NONE, EGRESS_MODE_ALLOWLIST, EGRESS_MODE_PUBLIC};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) {
            CHECK_INT_EQ(egress_mode_narrow(all[i], all[k]), all[i < k ? i : k]);
            CHECK_INT_EQ(egress_mode_narrow(all[i], all[k]), egress_mode_narrow(all[k], all[i]));
        }
}

TEST(reason_names)
{
    CHECK_STR_EQ(egress_reason_name(EGRESS_OK), "ok");
    CHECK_STR_EQ(egress_reason_name(EGRESS_DENY_MODE_NONE), "mode_none");
    CHECK_STR_EQ(egress_reason_name(EGRESS_DENY_NOT_LISTED), "not_listed");
    CHECK_STR_EQ(egress_reason_name(EGRESS_DENY_PORT), "port");
    CHECK_STR_EQ(egress_reason_name(EGRESS_DENY_ADDRESS), "address");
    CHECK_STR_EQ(egress_reason_name(EGRESS_DENY_SELF), "self");
    CHECK_STR_EQ(egress_reason_name(EGRESS_DENY_UNRESOLVED), "unresolved");
}

TEST(default_is_allowlist_with_the_builtin_list)
{
    struct egress_policy *p = make(NULL, NULL, NULL, NULL, NULL);
    CHECK_INT_EQ(egress_policy_mode(p), EGRESS_MODE_ALLOWLIST);
    static const char *const listed[] = {
        "pypi.org",
        "files.pythonhosted.org",
        "registry.npmjs.org",
        "registry.yarnpkg.com",
        "deb.debian.org",
        "security.debian.org",
        "archive.ubuntu.com",
        "security.ubuntu.com",
        "crates.io",
        "static.crates.io",
        "index.crates.io",
        "proxy.golang.org",
        "sum.golang.org",
        "rubygems.org",
        "repo.maven.apache.org",
        "repo1.maven.org",
        "github.com",
        "api.github.com",
        "raw.githubusercontent.com",
        "gitlab.com",
        "registry.gitlab.com",
        "bitbucket.org",
        "api.bitbucket.org",
        "codeload.github.com",
        "objects.githubusercontent.com",
    };
    for (size_t i = 0; i < sizeof(listed) / sizeof(listed[0]); i++) {
        if (name(p, A, listed[i], 443) != EGRESS_OK || name(p, A, listed[i], 80) != EGRESS_OK)
            CHECK_FAIL_("%s is not allowed: %s", listed[i], why.msg);
        if (name(p, A, listed[i], 22) != EGRESS_DENY_PORT)
            CHECK_FAIL_("%s:22 is allowed", listed[i]);
    }
    /* the wildcards of the list do not reach their bare names' neighbours */
    CHECK_INT_EQ(name(p, A, "githubusercontent.com", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "www.pypi.org", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "evilgithub.com", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "github.com.evil.example", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "example.com", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_STR_EQ(why.msg, "example.com:443 is not on the allow list (SANDBOX_NETWORK_ALLOW and the "
                          "built-in registries and git hosts); the operator may add it to "
                          "SANDBOX_NETWORK_ALLOW");
    CHECK_INT_EQ(name(p, A, "github.com", 22), EGRESS_DENY_PORT);
    CHECK_STR_EQ(why.msg, "github.com is allowed on ports 80 and 443 only, not 22; the operator "
                          "may allow it with SANDBOX_NETWORK_ALLOW=github.com:22");
    egress_policy_free(p);

    /* extended by the operator's list, or replaced by it */
    p = make("allowlist", "mirror.example", NULL, NULL, NULL);
    CHECK_INT_EQ(name(p, A, "mirror.example", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "pypi.org", 443), EGRESS_OK);
    egress_policy_free(p);
    p = make("allowlist", "mirror.example", "0", NULL, NULL);
    CHECK_INT_EQ(name(p, A, "mirror.example", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "pypi.org", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "github.com", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_STR_EQ(why.msg, "github.com:443 is not on the allow list (SANDBOX_NETWORK_ALLOW); the "
                          "operator may add it to SANDBOX_NETWORK_ALLOW");
    egress_policy_free(p);
    /* nothing at all */
    p = make(NULL, NULL, "0", NULL, NULL);
    CHECK_INT_EQ(name(p, A, "pypi.org", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, P, "pypi.org", 443), EGRESS_DENY_NOT_LISTED); /* narrowed to allowlist */
    egress_policy_free(p);
}

TEST(wildcards_match_deeper_names_only)
{
    struct egress_policy *p = make(NULL, "*.example.org", "0", NULL, NULL);
    CHECK_INT_EQ(name(p, A, "a.example.org", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "a.b.example.org", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "x-y_z.c.b.a.example.org", 80), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "example.org", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "badexample.org", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "a.example.org.evil", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "a.example.orgx", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, ".example.org", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "example.org.", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "org", 443), EGRESS_DENY_NOT_LISTED);
    egress_policy_free(p);
    /* a wildcard and the bare name together */
    p = make(NULL, "example.org,*.example.org", "0", NULL, NULL);
    CHECK_INT_EQ(name(p, A, "example.org", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "www.example.org", 443), EGRESS_OK);
    egress_policy_free(p);
}

TEST(exact_names_match_only_themselves)
{
    struct egress_policy *p = make(NULL, "pypi.org, localhost", "0", NULL, NULL);
    CHECK_INT_EQ(name(p, A, "pypi.org", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "localhost", 80), EGRESS_OK); /* stage 2 still decides */
    CHECK_INT_EQ(name(p, A, "www.pypi.org", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "pypi.org.evil.example", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "pypi.or", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "ypi.org", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "xpypi.org", 443), EGRESS_DENY_NOT_LISTED);
    egress_policy_free(p);
}

TEST(ports_default_to_80_and_443)
{
    struct egress_policy *p =
        make(NULL, "registry.test:4873,git.test,git.test:8443,*.ports.test:22", "0", NULL, NULL);
    CHECK_INT_EQ(name(p, A, "registry.test", 4873), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "registry.test", 443), EGRESS_DENY_PORT);
    CHECK_STR_EQ(why.msg, "registry.test is allowed on port 4873 only, not 443; the operator may "
                          "allow it with SANDBOX_NETWORK_ALLOW=registry.test:443");
    CHECK_INT_EQ(name(p, A, "registry.test", 80), EGRESS_DENY_PORT);
    CHECK_INT_EQ(name(p, A, "git.test", 80), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "git.test", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "git.test", 8443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "git.test", 8080), EGRESS_DENY_PORT);
    CHECK_STR_CONTAINS(why.msg, "allowed on ports 80, 443 and 8443 only, not 8080");
    CHECK_INT_EQ(name(p, A, "a.ports.test", 22), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "a.ports.test", 443), EGRESS_DENY_PORT);
    CHECK_INT_EQ(name(p, A, "pypi.org", 22), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "git.test", 0), EGRESS_DENY_PORT);
    CHECK_INT_EQ(name(p, A, "git.test", 65535), EGRESS_DENY_PORT);
    egress_policy_free(p);
}

TEST(case_and_trailing_dots)
{
    struct egress_policy *p = make(NULL, "Mirror.EXAMPLE.org.,*.Cdn.Example:8080", "0", NULL, NULL);
    CHECK_INT_EQ(name(p, A, "mirror.example.org", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "MIRROR.example.ORG", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "mirror.example.org.", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "mirror.example.org..", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "A.CDN.example.", 8080), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "cdn.example", 8080), EGRESS_DENY_NOT_LISTED);
    egress_policy_free(p);
}

TEST(internationalized_names_as_punycode)
{
    /* bücher.example and *.münchen.example in their xn-- forms are plain names */
    struct egress_policy *p =
        make(NULL, "xn--bcher-kva.example,*.xn--mnchen-3ya.example", "0", NULL, NULL);
    CHECK_INT_EQ(name(p, A, "xn--bcher-kva.example", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "XN--BCHER-KVA.example", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "www.xn--mnchen-3ya.example", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "xn--mnchen-3ya.example", 443), EGRESS_DENY_NOT_LISTED);
    /* the raw UTF-8 form is neither a pattern nor a name */
    CHECK_INT_EQ(name(p, A,
                      "b\xc3\xbc"
                      "cher.example",
                      443),
                 EGRESS_DENY_NOT_LISTED);
    CHECK_STR_EQ(why.msg, "'b??cher.example' is neither a host name nor an address");
    egress_policy_free(p);
    CHECK_STR_CONTAINS(refused(NULL,
                               "b\xc3\xbc"
                               "cher.example",
                               NULL, NULL),
                       "xn-- form");
}

TEST(bad_patterns_are_named)
{
    static const struct {
        const char *entry, *says;
    } bad[] = {
        {"*", "would allow every name, which SANDBOX_NETWORK=public does"},
        {"*.", "would allow every name"},
        {"-a.example", "is not a host name"},
        {"**.example.org", "'*' that does not begin it"},
        {"a.*.example.org", "'*' that does not begin it"},
        {"*example.org", "'*' that does not begin it"},
        {"www*.example.org", "'*' that does not begin it"},
        {"10.0.0.1", "is an address: patterns are for names, addresses go in "
                     "SANDBOX_NETWORK_ADDRS"},
        {"10.0.0.1:443", "is an address"},
        {"127.1", "is an address"},
        {"0x7f000001", "is an address"},
        {"::1", "is an address"},
        {"fd00::1:443", "is an address"},
        {"[::1]:443", "is an address"},
        {"host:0", "port that is not a number 1..65535"},
        {"host:65536", "port that is not a number 1..65535"},
        {"host:https", "port that is not a number 1..65535"},
        {"host:", "port that is not a number 1..65535"},
        {"host:-1", "port that is not a number 1..65535"},
        {"a:b:c", "is not a host name"},
        {"bad host", "is not a host name"},
        {"a..b", "is not a host name"},
        {".example.org", "is not a host name"},
        {"example.org..", "is not a host name"},
        {"ho$t.example", "is not a host name"},
        {"http://example.org", "is not a host name"},
        {"example.org/path", "is not a host name"},
        {"user@example.org", "is not a host name"},
        {"example.123", "is not a host name"},
        {"*.123", "is not a host name"},
        {":443", "is not a host name"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char spec[300];
        snprintf(spec, sizeof(spec), "pypi.org, %s ,github.com", bad[i].entry);
        const char *msg = refused(NULL, spec, NULL, NULL);
        char entry[300];
        snprintf(entry, sizeof(entry), "SANDBOX_NETWORK_ALLOW entry '%s'", bad[i].entry);
        if (!strstr(msg, entry) || !strstr(msg, bad[i].says))
            CHECK_FAIL_("'%s': \"%s\" lacks \"%s\"", bad[i].entry, msg, bad[i].says);
    }
    /* empty entries are nothing */
    CHECK_STR_EQ(refused(NULL, " , ,,", NULL, NULL), "");
    CHECK_STR_EQ(refused(NULL, "", NULL, NULL), "");
}

TEST(limits_on_patterns)
{
    /* a name of 253 bytes (labels of 63), with a trailing dot too; one byte more is refused */
    char name253[300], spec[700];
    snprintf(name253, sizeof(name253), "%.63s.%.63s.%.63s.%.61s",
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
             "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
             "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
             "ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd");
    CHECK_INT_EQ(strlen(name253), 253);
    snprintf(spec, sizeof(spec), "%s.:8443", name253);
    struct egress_policy *p = make(NULL, spec, "0", NULL, NULL);
    CHECK_INT_EQ(name(p, A, name253, 8443), EGRESS_OK);
    egress_policy_free(p);
    snprintf(spec, sizeof(spec), "x%s", name253);
    CHECK_STR_CONTAINS(refused(NULL, spec, NULL, NULL), "is longer than 253 bytes");
    CHECK_STR_CONTAINS(refused(NULL, spec, NULL, NULL), "SANDBOX_NETWORK_ALLOW entry 'xaaaa");
    /* a label of 64 */
    CHECK_STR_CONTAINS(
        refused(NULL, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.org", NULL,
                NULL),
        "is not a host name");
    /* requests with such names are refused too */
    p = make("public", NULL, NULL, NULL, NULL);
    snprintf(spec, sizeof(spec), "x%s", name253);
    CHECK_INT_EQ(name(p, P, spec, 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, P, name253, 443), EGRESS_OK);
    egress_policy_free(p);

    /* 256 patterns, not 257 */
    char many[8000] = "";
    for (int i = 0; i < EGRESS_PATTERNS_MAX; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "h%d.example,", i);
    p = make(NULL, many, NULL, NULL, NULL);
    CHECK_INT_EQ(name(p, A, "h255.example", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "h0.example", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "pypi.org", 443), EGRESS_OK);
    egress_policy_free(p);
    strcat(many, "one-more.example");
    CHECK_STR_EQ(refused(NULL, many, NULL, NULL),
                 "SANDBOX_NETWORK_ALLOW has more than 256 entries");
}

TEST(configuration_errors)
{
    CHECK_STR_EQ(refused("open", NULL, NULL, NULL),
                 "SANDBOX_NETWORK 'open' is not none, allowlist or public");
    CHECK_STR_CONTAINS(refused(NULL, NULL, "2", NULL), "SANDBOX_NETWORK_DEFAULTS '2'");
    CHECK_STR_CONTAINS(refused(NULL, NULL, "yes", NULL), "SANDBOX_NETWORK_DEFAULTS 'yes'");
    CHECK_STR_EQ(refused(NULL, NULL, NULL, "10.0.0.0/33"),
                 "SANDBOX_NETWORK_ADDRS entry '10.0.0.0/33' is not an address, a network "
                 "(address/bits) or a host name, with an optional :port");
    CHECK_STR_CONTAINS(refused(NULL, NULL, NULL, "ok.example,bad host"),
                       "SANDBOX_NETWORK_ADDRS entry 'bad host'");
    CHECK_STR_EQ(refused("public", "a.example", "0", "127.0.0.1,fd00::/8,git.internal:443"), "");
    CHECK_STR_EQ(refused("none", NULL, "1", NULL), "");
    /* FETCH_ALLOW keeps its own name in its messages */
    struct egress_rules r;
    struct err err = {0};
    CHECK_INT_EQ(egress_rules_parse("bad host", &r, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "FETCH_ALLOW entry 'bad host'");
}

TEST(mode_none_refuses_everything)
{
    struct egress_policy *p = make("none", "*.example.org", NULL, "10.0.0.0/8", NULL);
    CHECK_INT_EQ(egress_policy_mode(p), EGRESS_MODE_NONE);
    static const char *const hosts[] = {"pypi.org", "a.example.org", "10.0.0.1",
                                        "8.8.8.8",  "::1",           "bad host"};
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++)
        for (int m = EGRESS_MODE_NONE; m <= EGRESS_MODE_PUBLIC; m++)
            if (name(p, (enum egress_mode)m, hosts[i], 443) != EGRESS_DENY_MODE_NONE)
                CHECK_FAIL_("%s under %s: %s", hosts[i], egress_mode_name((enum egress_mode)m),
                            egress_reason_name(name(p, (enum egress_mode)m, hosts[i], 443)));
    CHECK_INT_EQ(name(p, P, "pypi.org", 443), EGRESS_DENY_MODE_NONE);
    CHECK_STR_EQ(why.msg, "pypi.org:443: this sandbox has no network (mode none)");
    egress_policy_free(p);
    /* a run or user narrowed to none under a wider deployment */
    p = make("public", NULL, NULL, NULL, NULL);
    CHECK_INT_EQ(name(p, EGRESS_MODE_NONE, "pypi.org", 443), EGRESS_DENY_MODE_NONE);
    CHECK_INT_EQ(why.code, -EACCES);
    egress_policy_free(p);
}

TEST(narrowing_never_widens)
{
    /* allowlist deployment: a caller asking for public still gets the allow list */
    struct egress_policy *p = make("allowlist", NULL, NULL, NULL, NULL);
    CHECK_INT_EQ(name(p, P, "example.com", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, P, "pypi.org", 8443), EGRESS_DENY_PORT);
    CHECK_INT_EQ(name(p, A, "pypi.org", 443), EGRESS_OK);
    egress_policy_free(p);
    /* public deployment: a caller narrowed to allowlist gets the list */
    p = make("public", NULL, NULL, NULL, NULL);
    CHECK_INT_EQ(egress_policy_mode(p), EGRESS_MODE_PUBLIC);
    CHECK_INT_EQ(name(p, P, "example.com", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "example.com", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "pypi.org", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, egress_mode_narrow(P, A), "example.com", 443), EGRESS_DENY_NOT_LISTED);
    egress_policy_free(p);
}

TEST(public_mode_any_name_and_port)
{
    struct egress_policy *p = make("public", NULL, "0", NULL, NULL);
    CHECK_INT_EQ(name(p, P, "example.com", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, P, "example.com", 1), EGRESS_OK);
    CHECK_INT_EQ(name(p, P, "example.com", 22), EGRESS_OK);
    CHECK_INT_EQ(name(p, P, "example.com", 65535), EGRESS_OK);
    CHECK_INT_EQ(name(p, P, "example.com", 0), EGRESS_DENY_PORT);
    CHECK_STR_EQ(why.msg, "example.com:0: 0 is not a port");
    CHECK_INT_EQ(name(p, P, "localhost", 443), EGRESS_OK); /* stage 2 decides */
    CHECK_INT_EQ(name(p, P, "8.8.8.8", 53), EGRESS_OK);
    CHECK_INT_EQ(name(p, P, "10.0.0.1", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, P, "[2606:4700::1]", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, P, "2606:4700::1", 443), EGRESS_OK);
    /* what is neither a name nor an address in standard form, in any mode */
    static const char *const bad[] = {
        "",
        "127.1",
        "0x7f000001",
        "2130706433",
        "0177.0.0.1",
        "1.2.3",
        "bad host",
        "a..b",
        ".",
        "..",
        "-",
        "a/b",
        "a:b",
        "[::1",
        "[example.com]",
        "a\nb",
        "a%25b",
        "*.example.com",
        "example.1",
        "user@x.com",
        "exa\xff"
        "mple.com",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (name(p, P, bad[i], 443) != EGRESS_DENY_NOT_LISTED)
            CHECK_FAIL_("'%s' passed", bad[i]);
        else
            CHECK_STR_CONTAINS(why.msg, "is neither a host name nor an address");
    }
    egress_policy_free(p);
}

TEST(allowlist_addresses_only_when_named)
{
    struct egress_policy *p = make(NULL, NULL, NULL, NULL, NULL);
    CHECK_INT_EQ(name(p, A, "140.82.112.3", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_STR_EQ(why.msg, "140.82.112.3:443 is an address, not a name on the allow list; the "
                          "operator may allow it with SANDBOX_NETWORK_ADDRS");
    CHECK_INT_EQ(name(p, A, "[2606:4700::1]", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_STR_CONTAINS(why.msg, "[2606:4700::1]:443 is an address");
    CHECK_INT_EQ(name(p, A, "2606:4700::1", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_STR_CONTAINS(why.msg, "[2606:4700::1]:443 is an address");
    egress_policy_free(p);
    p = make(NULL, NULL, NULL, "10.0.0.0/8,192.168.1.5:8080,::1,git.internal", NULL);
    CHECK_INT_EQ(name(p, A, "10.1.2.3", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "10.1.2.3", 22), EGRESS_OK); /* no port in the entry: any */
    CHECK_INT_EQ(name(p, A, "192.168.1.5", 8080), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "192.168.1.5", 443), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "[::1]", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "::1", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "::ffff:10.0.0.1", 443), EGRESS_OK);
    CHECK_INT_EQ(name(p, A, "11.0.0.1", 443), EGRESS_DENY_NOT_LISTED);
    /* a name in SANDBOX_NETWORK_ADDRS is about its addresses; the name needs the allow list */
    CHECK_INT_EQ(name(p, A, "git.internal", 443), EGRESS_DENY_NOT_LISTED);
    egress_policy_free(p);
}

/* Every kind of address that is not public, in every form it may come in. */
static const struct {
    const char *addr, *cls;
} not_public[] = {
    {"127.0.0.1", "a loopback address"},
    {"127.8.9.10", "a loopback address"},
    {"::1", "a loopback address"},
    {"::ffff:127.0.0.1", "a loopback address"},
    {"64:ff9b::127.0.0.1", "a loopback address"},
    {"2002:7f00:1::1", "a loopback address"},
    {"10.0.0.5", "a private address (RFC 1918)"},
    {"172.16.0.1", "a private address (RFC 1918)"},
    {"172.31.255.255", "a private address (RFC 1918)"},
    {"192.168.1.1", "a private address (RFC 1918)"},
    {"::ffff:192.168.1.1", "a private address (RFC 1918)"},
    {"64:ff9b::a00:5", "a private address (RFC 1918)"},
    {"2002:c0a8:101::1", "a private address (RFC 1918)"},
    {"100.64.0.1", "a carrier-grade NAT address (100.64.0.0/10)"},
    {"100.127.255.254", "a carrier-grade NAT address (100.64.0.0/10)"},
    {"::ffff:100.64.0.1", "a carrier-grade NAT address (100.64.0.0/10)"},
    {"169.254.169.254", "a link-local address"},
    {"169.254.0.1", "a link-local address"},
    {"fe80::1", "a link-local address"},
    {"::ffff:169.254.169.254", "a link-local address"},
    {"64:ff9b::a9fe:a9fe", "a link-local address"},
    {"2002:a9fe:a9fe::1", "a link-local address"},
    {"fd00::1", "a unique local (private) IPv6 address"},
    {"fc00::1", "a unique local (private) IPv6 address"},
    {"fd12:3456:789a::1", "a unique local (private) IPv6 address"},
    {"fec0::1", "a unique local (private) IPv6 address"},
    {"224.0.0.1", "a multicast address"},
    {"239.255.255.250", "a multicast address"},
    {"ff02::1", "a multicast address"},
    {"0.0.0.0", "an unspecified address"},
    {"::", "an unspecified address"},
    {"192.0.2.1", "a documentation address"},
    {"198.51.100.7", "a documentation address"},
    {"203.0.113.9", "a documentation address"},
    {"2001:db8::1", "a documentation address"},
    {"198.18.0.1", "a benchmarking address"},
    {"2001:2::1", "a benchmarking address"},
    {"240.0.0.1", "a reserved address"},
    {"255.255.255.255", "a reserved address"},
    {"2001::1", "a reserved address"},
    {"::7f00:1", "a reserved address"},
    {"4000::1", "a reserved address"},
    /* Azure's WireServer and IBM Cloud's service network: public-looking, served by the host */
    {"168.63.129.16", "a cloud provider's host service address"},
    {"::ffff:168.63.129.16", "a cloud provider's host service address"},
    {"161.26.0.7", "a cloud provider's host service address"},
};

TEST(stage2_refuses_every_address_that_is_not_public)
{
    struct egress_policy *p = make("public", NULL, NULL, NULL, NULL);
    for (size_t i = 0; i < sizeof(not_public) / sizeof(not_public[0]); i++) {
        if (addrs(p, "registry.example", not_public[i].addr, 443) != EGRESS_DENY_ADDRESS) {
            CHECK_FAIL_("%s was not refused", not_public[i].addr);
            continue;
        }
        /* the message names the host, port, address (as the policy writes it) and class */
        struct egress_addr a;
        char text[EGRESS_ADDR_TEXT_MAX], want[300];
        egress_addr_parse(not_public[i].addr, &a);
        egress_addr_format(&a, text);
        snprintf(want, sizeof(want),
                 "registry.example:443 resolves to %s, %s; the operator may allow it with "
                 "SANDBOX_NETWORK_ADDRS",
                 text, not_public[i].cls);
        CHECK_STR_EQ(why.msg, want);
        /* among public addresses, it still refuses the name */
        char list[200];
        snprintf(list, sizeof(list), "140.82.112.3,2606:4700::1,%s", not_public[i].addr);
        if (addrs(p, "rebind.example", list, 443) != EGRESS_DENY_ADDRESS)
            CHECK_FAIL_("%s among public ones was not refused", not_public[i].addr);
    }
    CHECK_INT_EQ(addrs(p, "registry.example", "10.0.0.5", 443), EGRESS_DENY_ADDRESS);
    CHECK_STR_EQ(why.msg, "registry.example:443 resolves to 10.0.0.5, a private address (RFC "
                          "1918); the operator may allow it with SANDBOX_NETWORK_ADDRS");
    CHECK_INT_EQ(why.code, -EACCES);
    /* an address as the host says what it is */
    CHECK_INT_EQ(addrs(p, "169.254.169.254", "169.254.169.254", 80), EGRESS_DENY_ADDRESS);
    CHECK_STR_EQ(why.msg, "169.254.169.254:80 is a link-local address; the operator may allow it "
                          "with SANDBOX_NETWORK_ADDRS");
    CHECK_INT_EQ(addrs(p, "[fd00::1]", "fd00::1", 443), EGRESS_DENY_ADDRESS);
    CHECK_STR_EQ(why.msg, "[fd00::1]:443 is a unique local (private) IPv6 address; the operator "
                          "may allow it with SANDBOX_NETWORK_ADDRS");
    egress_policy_free(p);
}

TEST(stage2_public_addresses_pass)
{
    struct egress_policy *p = make(NULL, NULL, NULL, NULL, "10.9.8.7,127.0.0.1,::1");
    static const char *const ok[] = {
        "140.82.112.3", "8.8.8.8",        "1.1.1.1",          "2606:4700:4700::1111",
        "2a00:1450::1", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1",
        "172.32.0.1",   "100.128.0.1",    "223.255.255.255",  "198.20.0.1",
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (addrs(p, "pypi.org", ok[i], 443) != EGRESS_OK)
            CHECK_FAIL_("%s refused: %s", ok[i], why.msg);
    CHECK_INT_EQ(addrs(p, "pypi.org", "151.101.0.223,151.101.64.223,2a04:4e42::223", 443),
                 EGRESS_OK);
    /* stage 2 does not look at names or ports: stage 1 did */
    CHECK_INT_EQ(addrs(p, "anything.example", "151.101.0.223", 22), EGRESS_OK);
    egress_policy_free(p);
}

TEST(stage2_no_address)
{
    struct egress_policy *p = make(NULL, NULL, NULL, NULL, NULL);
    CHECK_INT_EQ(egress_policy_check_addrs(p, "nothing.example", NULL, 0, 443, &why),
                 EGRESS_DENY_UNRESOLVED);
    CHECK_STR_EQ(why.msg, "nothing.example:443: the name has no address");
    CHECK_INT_EQ(why.code, -EHOSTUNREACH);
    CHECK_INT_EQ(egress_policy_check_addrs(p, "nothing.example", NULL, -1, 443, NULL),
                 EGRESS_DENY_UNRESOLVED);
    egress_policy_free(p);
}

TEST(stage2_the_hosts_own_addresses)
{
    /* the host has a public address, a private one and loopback */
    const char *own = "93.184.216.34,10.1.1.1,127.0.0.1,::1,2a01:4f8::5";
    struct egress_policy *p = make("public", NULL, NULL, NULL, own);
    CHECK_INT_EQ(addrs(p, "me.example", "93.184.216.34", 443), EGRESS_DENY_SELF);
    CHECK_STR_EQ(why.msg, "me.example:443 resolves to 93.184.216.34, an address of this server's "
                          "own host (a public address); the operator may allow it by naming "
                          "93.184.216.34 itself in SANDBOX_NETWORK_ADDRS");
    CHECK_INT_EQ(addrs(p, "93.184.216.34", "93.184.216.34", 8788), EGRESS_DENY_SELF);
    CHECK_STR_CONTAINS(why.msg, "93.184.216.34:8788 is an address of this server's own host");
    CHECK_INT_EQ(addrs(p, "me.example", "::ffff:93.184.216.34", 443), EGRESS_DENY_SELF);
    CHECK_INT_EQ(addrs(p, "me6.example", "2a01:4f8::5", 443), EGRESS_DENY_SELF);
    CHECK_INT_EQ(addrs(p, "me.example", "8.8.8.8,2a01:4f8::5", 443), EGRESS_DENY_SELF);
    CHECK_INT_EQ(addrs(p, "lo.example", "127.0.0.1", 443), EGRESS_DENY_SELF);
    CHECK_STR_CONTAINS(why.msg, "(a loopback address)");
    CHECK_INT_EQ(addrs(p, "lo.example", "127.0.0.2", 443), EGRESS_DENY_ADDRESS);
    CHECK_INT_EQ(addrs(p, "x.example", "10.1.1.1", 443), EGRESS_DENY_SELF);
    /* a neighbour is not the host */
    CHECK_INT_EQ(addrs(p, "n.example", "93.184.216.35", 443), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "n.example", "2a01:4f8::6", 443), EGRESS_OK);
    egress_policy_free(p);

    /* a network that contains an own address opens the others in it, not that one */
    p = make("public", NULL, NULL, "93.184.216.0/24,10.0.0.0/8,127.0.0.0/8", own);
    CHECK_INT_EQ(addrs(p, "me.example", "93.184.216.34", 443), EGRESS_DENY_SELF);
    CHECK_INT_EQ(addrs(p, "x.example", "10.1.1.1", 443), EGRESS_DENY_SELF);
    CHECK_INT_EQ(addrs(p, "x.example", "10.1.1.2", 443), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "lo.example", "127.0.0.1", 443), EGRESS_DENY_SELF);
    CHECK_INT_EQ(addrs(p, "lo.example", "127.0.0.2", 443), EGRESS_OK);
    egress_policy_free(p);

    /* named exactly: the address (with or without a port), or the name asked for */
    p = make("public", NULL, NULL, "93.184.216.34,127.0.0.1:4873,[::1]:8443,self.test:443", own);
    CHECK_INT_EQ(addrs(p, "me.example", "93.184.216.34", 22), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "registry.test", "127.0.0.1", 4873), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "registry.test", "127.0.0.1", 8788), EGRESS_DENY_SELF);
    CHECK_INT_EQ(addrs(p, "[::1]", "::1", 8443), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "::1", "::1", 443), EGRESS_DENY_SELF);
    CHECK_INT_EQ(addrs(p, "self.test", "10.1.1.1,127.0.0.1", 443), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "SELF.test.", "10.1.1.1", 443), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "self.test", "10.1.1.1", 80), EGRESS_DENY_SELF);
    CHECK_INT_EQ(addrs(p, "other.test", "10.1.1.1", 443), EGRESS_DENY_SELF);
    egress_policy_free(p);
}

TEST(stage2_explicit_addresses)
{
    struct egress_policy *p = make(NULL, NULL, NULL,
                                   "10.0.0.0/8,169.254.169.254:80,fd00::/8,100.64.0.0/10,"
                                   "registry.test:4873",
                                   NULL);
    CHECK_INT_EQ(addrs(p, "registry.example", "10.0.0.5", 443), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "registry.example", "::ffff:10.0.0.5", 443), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "registry.example", "10.0.0.5,140.82.112.3", 443), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "registry.example", "10.0.0.5,192.168.0.1", 443), EGRESS_DENY_ADDRESS);
    CHECK_STR_CONTAINS(why.msg, "192.168.0.1, a private address (RFC 1918)");
    CHECK_INT_EQ(addrs(p, "metadata.example", "169.254.169.254", 80), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "metadata.example", "169.254.169.254", 443), EGRESS_DENY_ADDRESS);
    CHECK_INT_EQ(addrs(p, "v6.example", "fd12::1", 443), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "v6.example", "fc00::1", 443), EGRESS_DENY_ADDRESS);
    CHECK_INT_EQ(addrs(p, "cgnat.example", "100.100.1.1", 443), EGRESS_OK);
    /* a name entry: whatever that name resolves to, on its port */
    CHECK_INT_EQ(addrs(p, "registry.test", "127.0.0.1", 4873), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "Registry.Test.", "127.0.0.1", 4873), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "registry.test", "127.0.0.1", 443), EGRESS_DENY_ADDRESS);
    CHECK_INT_EQ(addrs(p, "other.test", "127.0.0.1", 4873), EGRESS_DENY_ADDRESS);
    /* tunnelled forms are not the address the entry names */
    CHECK_INT_EQ(addrs(p, "nat64.example", "64:ff9b::a00:5", 443), EGRESS_DENY_ADDRESS);
    egress_policy_free(p);
}

TEST(both_stages_together)
{
    /* the test setup of the issue: a local registry, allowed by name and by address */
    struct egress_policy *p =
        make(NULL, "registry.test:4873", "0", "127.0.0.1:4873", "127.0.0.1,::1,192.0.2.10");
    CHECK_INT_EQ(name(p, A, "registry.test", 4873), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "registry.test", "127.0.0.1", 4873), EGRESS_OK);
    /* the server's own port, by name or by address */
    CHECK_INT_EQ(name(p, A, "registry.test", 8788), EGRESS_DENY_PORT);
    CHECK_INT_EQ(name(p, A, "127.0.0.1", 8788), EGRESS_DENY_NOT_LISTED);
    CHECK_INT_EQ(name(p, A, "127.0.0.1", 4873), EGRESS_OK);
    /* a listed name that resolves to loopback elsewhere */
    egress_policy_free(p);
    p = make(NULL, "evil.example", "0", NULL, "127.0.0.1,::1");
    CHECK_INT_EQ(name(p, A, "evil.example", 443), EGRESS_OK);
    CHECK_INT_EQ(addrs(p, "evil.example", "127.0.0.1", 443), EGRESS_DENY_SELF);
    CHECK_INT_EQ(addrs(p, "evil.example", "127.0.0.53", 443), EGRESS_DENY_ADDRESS);
    CHECK_INT_EQ(addrs(p, "evil.example", "169.254.169.254", 443), EGRESS_DENY_ADDRESS);
    egress_policy_free(p);
}

static enum egress_reason sni(const struct egress_policy *p, enum egress_mode mode,
                              const char *host, const char *name, bool ech)
{
    struct egress_hello h = {.has_sni = name != NULL, .ech = ech};
    snprintf(h.sni, sizeof(h.sni), "%s", name ? name : "");
    err_clear(&why);
    return egress_policy_check_sni(p, mode, host, &h, &why);
}

TEST(stage3_a_tunnel_reaches_only_the_name_it_was_opened_for)
{
    struct egress_policy *p = make("public", "allowed.example", "0", "10.0.0.7", NULL);
    /* allowlist: a name's tunnel must name it; an address's has nothing to name */
    CHECK(egress_policy_needs_sni(p, A, "allowed.example"));
    CHECK(egress_policy_needs_sni(p, A, "ALLOWED.example."));
    CHECK(!egress_policy_needs_sni(p, A, "10.0.0.7"));
    CHECK(!egress_policy_needs_sni(p, A, "[::1]"));
    CHECK(!egress_policy_needs_sni(p, P, "allowed.example"));
    CHECK(!egress_policy_needs_sni(p, EGRESS_MODE_NONE, "allowed.example"));

    CHECK_INT_EQ(sni(p, A, "allowed.example", "allowed.example", false), EGRESS_OK);
    CHECK_INT_EQ(sni(p, A, "Allowed.Example.", "allowed.example.", false), EGRESS_OK);
    /* fronting: another site behind the same front */
    CHECK_INT_EQ(sni(p, A, "allowed.example", "other.example", false), EGRESS_DENY_SNI);
    CHECK_STR_EQ(why.msg, "the TLS ClientHello in the tunnel to allowed.example names another "
                          "server, other.example; in allowlist mode a tunnel reaches only the "
                          "name it was opened for");
    CHECK_INT_EQ(why.code, -EACCES);
    CHECK_INT_EQ(sni(p, A, "allowed.example", "sub.allowed.example", false), EGRESS_DENY_SNI);
    CHECK_INT_EQ(sni(p, A, "allowed.example", NULL, false), EGRESS_DENY_SNI);
    CHECK_STR_CONTAINS(why.msg, "names no server (SNI)");
    CHECK_INT_EQ(sni(p, A, "allowed.example", "allowed.example", true), EGRESS_DENY_SNI);
    CHECK_STR_CONTAINS(why.msg, "encrypted client hello");
    CHECK_INT_EQ(egress_policy_check_sni(p, A, "allowed.example", NULL, &why), EGRESS_DENY_SNI);
    CHECK_STR_CONTAINS(why.msg, "did not begin with a TLS ClientHello");
    CHECK_INT_EQ(egress_policy_check_sni(p, A, "allowed.example", NULL, NULL), EGRESS_DENY_SNI);
    CHECK_STR_EQ(egress_reason_name(EGRESS_DENY_SNI), "sni");
    /* public mode reaches any public name anyway; an address named by the operator too */
    CHECK_INT_EQ(sni(p, P, "allowed.example", "other.example", false), EGRESS_OK);
    CHECK_INT_EQ(egress_policy_check_sni(p, P, "allowed.example", NULL, &why), EGRESS_OK);
    CHECK_INT_EQ(sni(p, A, "10.0.0.7", "other.example", true), EGRESS_OK);
    egress_policy_free(p);
    /* the server's own mode narrows the one asked for */
    p = make("allowlist", "allowed.example", "0", NULL, NULL);
    CHECK(egress_policy_needs_sni(p, P, "allowed.example"));
    CHECK_INT_EQ(sni(p, P, "allowed.example", "other.example", false), EGRESS_DENY_SNI);
    egress_policy_free(p);
}

TEST(the_hosts_addresses_asked_of_the_kernel)
{
    struct err err = {0};
    CHECK_INT_EQ(egress_local_init(&err), 0);
    const char *local[] = {"127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "::ffff:127.0.0.1"};
    const char *remote[] = {"192.0.2.1", "198.51.100.7", "2001:db8::1"};
    struct egress_addr a;
    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
        if (egress_addr_parse(local[i], &a) < 0 || !egress_addr_is_local(&a))
            CHECK_FAIL_("%s is not local", local[i]);
    for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++)
        if (egress_addr_parse(remote[i], &a) < 0 || egress_addr_is_local(&a))
            CHECK_FAIL_("%s is local", remote[i]);
}

TEST(the_hosts_addresses_read_from_the_machine)
{
    struct config cfg = {0};
    config_set(&cfg, "SANDBOX_NETWORK", "public");
    struct egress_policy *p = NULL;
    struct err err = {0};
    CHECK_INT_EQ(egress_policy_new(&cfg, &p, &err), 0);
    if (p) {
        CHECK_INT_EQ(egress_policy_mode(p), EGRESS_MODE_PUBLIC);
        /* the kernel's local routes: all of 127.0.0.0/8, not only lo's address */
        CHECK_INT_EQ(addrs(p, "localhost", "127.0.0.1", 8788), EGRESS_DENY_SELF);
        CHECK_INT_EQ(addrs(p, "lo.example", "127.0.0.2", 8788), EGRESS_DENY_SELF);
        CHECK_INT_EQ(addrs(p, "localhost", "::1", 8788), EGRESS_DENY_SELF);
        CHECK_INT_EQ(addrs(p, "pypi.org", "198.51.100.1", 443), EGRESS_DENY_ADDRESS);
        egress_policy_free(p);
    }
    config_set(&cfg, "SANDBOX_NETWORK_ALLOW", "*");
    p = NULL;
    CHECK_INT_EQ(egress_policy_new(&cfg, &p, &err), -EINVAL);
    CHECK(p == NULL);
    config_release(&cfg);
    egress_policy_free(NULL);
}

TEST_MAIN()

/* Client ID Metadata Documents (src/auth/cimd.c), the pure parts: which client_id URLs may name
 * a document, which addresses a fetch may connect to, what a document must and must not say,
 * and what the answer's Cache-Control and Content-Type headers mean. */
#include <errno.h>
#include <string.h>

#include "auth/cimd.h"
#include "harness.h"

static const char URL[] = "https://client.example/oauth/client.json";

#define URL_OK(u, loopback)                                                                        \
    do {                                                                                           \
        struct err e_ = {0};                                                                       \
        if (cimd_url_check((u), (loopback), &e_) != 0)                                             \
            CHECK_FAIL_("'%s' refused: %s", (u), e_.msg);                                          \
    } while (0)

#define URL_BAD(u, loopback, words)                                                                \
    do {                                                                                           \
        struct err e_ = {0};                                                                       \
        int r_ = cimd_url_check((u), (loopback), &e_);                                             \
        if (r_ != -EINVAL)                                                                         \
            CHECK_FAIL_("'%s': %d, not -EINVAL", (u), r_);                                         \
        else if (!strstr(e_.msg, (words)))                                                         \
            CHECK_FAIL_("'%s': message \"%s\" lacks \"%s\"", (u), e_.msg, (words));                \
    } while (0)

TEST(url_accepted)
{
    URL_OK(URL, false);
    URL_OK("https://client.example/x", false);
    URL_OK("https://client.example:8443/oauth/client.json", false);
    URL_OK("https://client.example/a/b?version=2&x=%20y", false);
    URL_OK("https://Client.Example/x", false);
    URL_OK("https://a.b-c_d.example/%7Euser/client", false);
    URL_OK("https://client.example/.well-known/x", false);
    URL_OK("https://client.example/a./..b/...", false); /* not dot segments */
    URL_OK("https://client.example/a/", false);
    URL_OK("https://client.example//x", false);
    URL_OK("https://127.0.0.1/x", false); /* an address: refused by the address check instead */
    URL_OK("https://[2606:4700:4700::1111]/x", false);
    URL_OK("https://[::1]:8443/x", false);
    URL_OK("https://[::ffff:8.8.8.8]/x", false);
    URL_OK("https://client.example:65535/x", false);
    URL_OK("https://claude.ai/oauth/mcp-oauth-client-metadata", false);
    URL_OK("https://client.example/~a!$&'()*+,;=:@b", false);
}

TEST(url_length)
{
    char url[CIMD_URL_MAX + 2];
    size_t head = strlen("https://client.example/");
    memcpy(url, "https://client.example/", head);
    memset(url + head, 'a', CIMD_URL_MAX - head);
    url[CIMD_URL_MAX] = '\0';
    URL_OK(url, false);
    url[CIMD_URL_MAX] = 'a';
    url[CIMD_URL_MAX + 1] = '\0';
    URL_BAD(url, false, "longer than 2048 bytes");
    URL_BAD("", false, "empty");
}

TEST(url_scheme)
{
    URL_BAD("http://client.example/x", false, "must be an https:// URL");
    URL_BAD("HTTPS://client.example/x", false, "must be an https:// URL");
    URL_BAD("ftp://client.example/x", false, "must be an https:// URL");
    URL_BAD("javascript:alert(1)", false, "must be an https:// URL");
    URL_BAD("client.example/x", false, "must be an https:// URL");
    URL_BAD("//client.example/x", false, "must be an https:// URL");
    URL_BAD("https:/client.example/x", false, "must be an https:// URL");
}

TEST(url_host_and_port)
{
    URL_BAD("https:///x", false, "has no host");
    URL_BAD("https://:443/x", false, "has no host");
    URL_BAD("https://-client.example/x", false, "malformed host");
    URL_BAD("https://.client.example/x", false, "malformed host");
    URL_BAD("https://client.example./x", false, "malformed host");
    URL_BAD("https://client..example/x", false, "malformed host");
    URL_BAD("https://client%2eexample/x", false, "malformed host");
    URL_BAD("https://client!example/x", false, "malformed host");
    URL_BAD("https://[::1/x", false, "malformed host");
    URL_BAD("https://[::1]x/x", false, "malformed host");
    URL_BAD("https://[1.2.3.4]/x", false, "malformed IPv6 address");
    URL_BAD("https://[zz::1]/x", false, "malformed IPv6 address");
    URL_BAD("https://[fe80::1%25eth0]/x", false, "malformed IPv6 address");
    URL_BAD("https://client.example:/x", false, "malformed port");
    URL_BAD("https://client.example:0/x", false, "malformed port");
    URL_BAD("https://client.example:65536/x", false, "malformed port");
    URL_BAD("https://client.example:99999999999/x", false, "malformed port");
    URL_BAD("https://client.example:44a/x", false, "malformed port");
    URL_BAD("https://client.example:443:443/x", false, "malformed port");
    char longhost[300] = "https://";
    memset(longhost + 8, 'a', 254);
    strcpy(longhost + 8 + 254, "/x");
    URL_BAD(longhost, false, "longer than 253 bytes");
}

TEST(url_userinfo_fragment)
{
    URL_BAD("https://user@client.example/x", false, "user name or password");
    URL_BAD("https://user:pw@client.example/x", false, "user name or password");
    URL_BAD("https://evil.example@client.example/x", false, "user name or password");
    URL_BAD("https://:@client.example/x", false, "user name or password");
    URL_BAD("https://client.example/x#frag", false, "fragment");
    URL_BAD("https://client.example/x#", false, "fragment");
    URL_BAD("https://client.example/x?a#b", false, "fragment");
    /* '@' after the authority is path: fine */
    URL_OK("https://client.example/@x", false);
    URL_OK("https://client.example/x?to=a@b", false);
}

TEST(url_path)
{
    URL_BAD("https://client.example", false, "path other than /");
    URL_BAD("https://client.example/", false, "path other than /");
    URL_BAD("https://client.example?x=1", false, "path other than /");
    URL_BAD("https://client.example/?x=1", false, "path other than /");
    URL_BAD("https://client.example:8443", false, "path other than /");
    URL_BAD("https://client.example/./x", false, ". or .. path segments");
    URL_BAD("https://client.example/a/../x", false, ". or .. path segments");
    URL_BAD("https://client.example/a/..", false, ". or .. path segments");
    URL_BAD("https://client.example/a/.", false, ". or .. path segments");
    URL_BAD("https://client.example/.", false, ". or .. path segments");
    URL_BAD("https://client.example/..?x", false, ". or .. path segments");
    URL_BAD("https://client.example/%2e/x", false, ". or .. path segments");
    URL_BAD("https://client.example/%2E%2e/x", false, ". or .. path segments");
    URL_BAD("https://client.example/a/.%2E", false, ". or .. path segments");
    URL_OK("https://client.example/x?a=../b", false); /* the query is not path */
}

TEST(url_characters)
{
    URL_BAD("https://client.example/a b", false, "characters a URL may not");
    URL_BAD("https://client.example/a\tb", false, "characters a URL may not");
    URL_BAD("https://client.example/a\nb", false, "characters a URL may not");
    URL_BAD("https://client.example/a\x7f", false, "characters a URL may not");
    URL_BAD("https://client.example/caf\xc3\xa9", false, "characters a URL may not");
    URL_BAD("https://client.example/a\\b", false, "characters a URL may not");
    URL_BAD("https://client.example\\@evil.example/x", false, "characters a URL may not");
    URL_BAD("https://client.example/<script>", false, "characters a URL may not");
    URL_BAD("https://client.example/a\"b", false, "characters a URL may not");
    URL_BAD("https://client.example/{x}", false, "characters a URL may not");
    URL_BAD("https://client.example/a|b", false, "characters a URL may not");
    URL_BAD("https://client.example/a^b", false, "characters a URL may not");
    URL_BAD("https://client.example/a`b", false, "characters a URL may not");
    URL_BAD("https://client.example/%zz", false, "'%' without two hex digits");
    URL_BAD("https://client.example/%4", false, "'%' without two hex digits");
    URL_BAD("https://client.example/x%", false, "'%' without two hex digits");
}

TEST(url_loopback_http)
{
    /* a test setting: http:// on the loopback addresses, nothing else */
    URL_OK("http://127.0.0.1:8080/client.json", true);
    URL_OK("http://[::1]:8080/client.json", true);
    URL_OK("http://127.0.0.1/client.json", true);
    URL_OK(URL, true);
    URL_BAD("http://127.0.0.1:8080/client.json", false, "must be an https:// URL");
    URL_BAD("http://[::1]:8080/client.json", false, "must be an https:// URL");
    URL_BAD("http://localhost:8080/client.json", true, "http:// is for 127.0.0.1 and [::1]");
    URL_BAD("http://127.0.0.2:8080/client.json", true, "http:// is for 127.0.0.1 and [::1]");
    URL_BAD("http://10.0.0.1/client.json", true, "http:// is for 127.0.0.1 and [::1]");
    URL_BAD("http://client.example/client.json", true, "http:// is for 127.0.0.1 and [::1]");
    URL_BAD("http://[::ffff:127.0.0.1]:80/x", true, "http:// is for 127.0.0.1 and [::1]");
    URL_BAD("http://127.0.0.1:8080/", true, "path other than /");
    URL_BAD("http://127.0.0.1:8080/x#y", true, "fragment");
    URL_BAD("http://u@127.0.0.1:8080/x", true, "user name or password");
}

/* The shapes an /authorize request is refused for before any lookup, as a client sends them, in
 * production mode. They name a host here and nowhere else: a broken rule then meets no resolver.
 * tests/integration/oauth_cimd.test.mjs sends the same shapes to a loopback address literal, to
 * see the answer and the log line. */
TEST(url_refused_before_any_lookup)
{
    URL_BAD("http://client.example/client.json", false, "must be an https:// URL");
    URL_BAD("HTTPS://client.example/client.json", false, "must be an https:// URL");
    URL_BAD("https://client.example/", false, "must have a path other than /");
    URL_BAD("https://user:pw@client.example/client.json", false,
            "must not carry a user name or password");
    URL_BAD("https://client.example/client.json#x", false, "must not have a fragment");
    URL_BAD("https://client.example/../client.json", false, "must not have . or .. path segments");
    URL_BAD("https://client.example/a\"b\nc.json", false, "holds characters a URL may not");

    static const char head[] = "https://client.example/";
    char long_url[sizeof(head) - 1 + 2100 + sizeof(".json")];
    memcpy(long_url, head, sizeof(head) - 1);
    memset(long_url + sizeof(head) - 1, 'a', 2100);
    memcpy(long_url + sizeof(head) - 1 + 2100, ".json", sizeof(".json"));
    URL_BAD(long_url, false, "is longer than 2048 bytes");
}

static struct egress_addr addr(const char *text)
{
    struct egress_addr a = {{0}};
    if (egress_addr_parse(text, &a) < 0)
        CHECK_FAIL_("cannot parse '%s'", text);
    return a;
}

TEST(addresses_public_only)
{
    struct err err = {0};
    struct egress_addr pub[] = {addr("140.82.112.3"), addr("2606:4700:4700::1111")};
    CHECK_INT_EQ(cimd_addrs_check(URL, false, pub, 2, &err), 0);

    /* https://127.0.0.1/x passes the URL check and is refused here, before any connection */
    struct egress_addr lo = addr("127.0.0.1");
    CHECK_INT_EQ(cimd_addrs_check("https://127.0.0.1/x", false, &lo, 1, &err), -EACCES);
    CHECK_STR_CONTAINS(err.msg, "127.0.0.1 is a loopback address");
    CHECK_STR_CONTAINS(err.msg, "public addresses only");
    CHECK_INT_EQ(cimd_addrs_check("https://127.0.0.1/x", true, &lo, 1, &err), -EACCES);
    struct egress_addr lo6 = addr("::1");
    CHECK_INT_EQ(cimd_addrs_check("https://[::1]/x", true, &lo6, 1, &err), -EACCES);

    /* one private address among public ones is enough to refuse the name */
    struct egress_addr mixed[] = {addr("140.82.112.3"), addr("10.1.2.3")};
    CHECK_INT_EQ(cimd_addrs_check(URL, false, mixed, 2, &err), -EACCES);
    CHECK_STR_CONTAINS(err.msg, "'client.example' resolves to 10.1.2.3, a private address");
    CHECK_STR_CONTAINS(err.msg, URL);

    static const char *const refused[] = {
        "127.0.0.1",       "10.0.0.1",      "172.16.0.1",       "192.168.1.1",
        "169.254.169.254", "100.64.0.1",    "0.0.0.0",          "224.0.0.1",
        "fe80::1",         "fd00::1",       "::ffff:127.0.0.1", "::",
        "64:ff9b::a00:1",  "2002:a00:1::1", "198.18.0.1",       "192.0.2.1",
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        struct egress_addr a = addr(refused[i]);
        if (cimd_addrs_check(URL, true, &a, 1, &err) != -EACCES)
            CHECK_FAIL_("%s was allowed", refused[i]);
    }
    CHECK_INT_EQ(cimd_addrs_check(URL, false, pub, 0, &err), -EHOSTUNREACH);
    CHECK_INT_EQ(cimd_addrs_check("http://client.example/x", false, pub, 1, &err), -EINVAL);
}

TEST(addresses_loopback_test_mode)
{
    struct err err = {0};
    struct egress_addr lo = addr("127.0.0.1"), lo6 = addr("::1");
    CHECK_INT_EQ(cimd_addrs_check("http://127.0.0.1:8080/x", true, &lo, 1, &err), 0);
    CHECK_INT_EQ(cimd_addrs_check("http://[::1]:8080/x", true, &lo6, 1, &err), 0);
    /* the rule names the URL's own address, not loopback at large */
    struct egress_addr other = addr("127.0.0.2");
    CHECK_INT_EQ(cimd_addrs_check("http://127.0.0.1:8080/x", true, &other, 1, &err), -EACCES);
    CHECK_INT_EQ(cimd_addrs_check("http://127.0.0.1:8080/x", true, &lo6, 1, &err), -EACCES);
    struct egress_addr priv = addr("10.0.0.1");
    CHECK_INT_EQ(cimd_addrs_check("http://127.0.0.1:8080/x", true, &priv, 1, &err), -EACCES);
    /* a name that resolves to loopback stays refused in the test mode */
    CHECK_INT_EQ(cimd_addrs_check("https://localhost/x", true, &lo, 1, &err), -EACCES);
    CHECK_STR_CONTAINS(err.msg, "'localhost' resolves to 127.0.0.1, a loopback address");
    /* without the test mode the URL itself is refused */
    CHECK_INT_EQ(cimd_addrs_check("http://127.0.0.1:8080/x", false, &lo, 1, &err), -EINVAL);
}

/* --- documents --- */

static int parse(const char *body, struct cimd_client *c, struct err *err)
{
    memset(c, 0x5a, sizeof(*c));
    return cimd_document_parse(URL, body, strlen(body), c, err);
}

#define DOC_BAD(body, words)                                                                       \
    do {                                                                                           \
        static struct cimd_client c_;                                                              \
        struct err e_ = {0};                                                                       \
        int r_ = parse((body), &c_, &e_);                                                          \
        if (r_ != -EINVAL)                                                                         \
            CHECK_FAIL_("%s: %d, not -EINVAL", (body), r_);                                        \
        else if (!strstr(e_.msg, (words)))                                                         \
            CHECK_FAIL_("%s: message \"%s\" lacks \"%s\"", (body), e_.msg, (words));               \
    } while (0)

#define ID "\"client_id\":\"https://client.example/oauth/client.json\""

/* A document with one redirect URI. */
#define REDIRECT_BAD(uri, words) DOC_BAD("{" ID ",\"redirect_uris\":[\"" uri "\"]}", words)
#define REDIRECT_OK(uri)                                                                           \
    do {                                                                                           \
        static struct cimd_client c_;                                                              \
        struct err e_ = {0};                                                                       \
        if (parse("{" ID ",\"redirect_uris\":[\"" uri "\"]}", &c_, &e_) != 0)                      \
            CHECK_FAIL_("%s refused: %s", uri, e_.msg);                                            \
        else                                                                                       \
            CHECK_STR_EQ(c_.redirect_uris[0], uri);                                                \
    } while (0)

static struct cimd_client client;

TEST(document_minimal)
{
    struct err err = {0};
    CHECK_INT_EQ(parse("{" ID ",\"redirect_uris\":[\"https://client.example/cb\"]}", &client, &err),
                 0);
    CHECK_STR_EQ(client.client_id, URL);
    CHECK_STR_EQ(client.client_name, "client.example"); /* the host, when no name is given */
    CHECK_INT_EQ(client.n_redirect_uris, 1);
    CHECK_STR_EQ(client.redirect_uris[0], "https://client.example/cb");
    CHECK_STR_EQ(client.client_uri, "");
    CHECK_STR_EQ(client.logo_uri, "");
}

TEST(document_full)
{
    struct err err = {0};
    const char *doc = "{" ID ",\"client_name\":\"Claude\",\"client_uri\":\"https://claude.ai\","
                      "\"logo_uri\":\"https://claude.ai/logo.png\","
                      "\"token_endpoint_auth_method\":\"none\","
                      "\"grant_types\":[\"authorization_code\",\"refresh_token\"],"
                      "\"response_types\":[\"code\"],\"scope\":\"sandbox runs\","
                      "\"unknown_member\":{\"nested\":[1,2,3]},"
                      "\"redirect_uris\":[\"https://claude.ai/api/mcp/auth_callback\","
                      "\"http://127.0.0.1:33418/callback\",\"http://[::1]/cb\","
                      "\"http://localhost:6274/oauth/callback\",\"http://localhost\","
                      "\"com.example.app:/oauth2redirect\",\"https://client.example/cb?x=1\"]}";
    CHECK_INT_EQ(parse(doc, &client, &err), 0);
    CHECK_STR_EQ(client.client_name, "Claude");
    CHECK_STR_EQ(client.client_uri, "https://claude.ai");
    CHECK_STR_EQ(client.logo_uri, "https://claude.ai/logo.png");
    CHECK_INT_EQ(client.n_redirect_uris, 7);
    CHECK_STR_EQ(client.redirect_uris[0], "https://claude.ai/api/mcp/auth_callback");
    CHECK_STR_EQ(client.redirect_uris[3], "http://localhost:6274/oauth/callback");
    CHECK_STR_EQ(client.redirect_uris[5], "com.example.app:/oauth2redirect");
    CHECK_STR_EQ(client.redirect_uris[6], "https://client.example/cb?x=1");
}

TEST(document_not_an_object)
{
    DOC_BAD("", "not JSON");
    DOC_BAD("nope", "not JSON");
    DOC_BAD("{", "not JSON");
    DOC_BAD("{" ID ",\"redirect_uris\":[\"https://a/cb\"]} trailing", "not JSON");
    DOC_BAD("<html><body>hello</body></html>", "not JSON");
    DOC_BAD("[]", "not a JSON object");
    DOC_BAD("\"https://client.example/oauth/client.json\"", "not a JSON object");
    DOC_BAD("null", "not a JSON object");
    /* a member given twice could mean either */
    DOC_BAD("{" ID "," ID ",\"redirect_uris\":[\"https://a/cb\"]}", "not JSON");
    DOC_BAD("{" ID ",\"client_name\":\"a\\u0000b\",\"redirect_uris\":[\"https://a/cb\"]}",
            "not JSON");
}

TEST(document_client_id)
{
    DOC_BAD("{\"redirect_uris\":[\"https://a/cb\"]}", "client_id is missing");
    DOC_BAD("{\"client_id\":5,\"redirect_uris\":[\"https://a/cb\"]}", "client_id must be a string");
    DOC_BAD("{\"client_id\":null,\"redirect_uris\":[\"https://a/cb\"]}",
            "client_id must be a string");
    /* exactly the URL: no normalization of case, slashes, ports or escapes */
    DOC_BAD("{\"client_id\":\"https://client.example/oauth/client.json/\","
            "\"redirect_uris\":[\"https://a/cb\"]}",
            "is not the document's URL 'https://client.example/oauth/client.json'");
    DOC_BAD("{\"client_id\":\"https://CLIENT.example/oauth/client.json\","
            "\"redirect_uris\":[\"https://a/cb\"]}",
            "is not the document's URL");
    DOC_BAD("{\"client_id\":\"https://client.example:443/oauth/client.json\","
            "\"redirect_uris\":[\"https://a/cb\"]}",
            "is not the document's URL");
    DOC_BAD("{\"client_id\":\"https://client.example/oauth/client%2Ejson\","
            "\"redirect_uris\":[\"https://a/cb\"]}",
            "is not the document's URL");
    DOC_BAD("{\"client_id\":\"https://evil.example/oauth/client.json\","
            "\"redirect_uris\":[\"https://a/cb\"]}",
            "client_id 'https://evil.example/oauth/client.json' is not");
    DOC_BAD("{\"client_id\":\"\",\"redirect_uris\":[\"https://a/cb\"]}", "is not the document's");

    struct err err = {0};
    CHECK_INT_EQ(cimd_document_parse("http://client.example/x", "{}", 2, &client, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "https://");
}

TEST(document_public_client_only)
{
    DOC_BAD("{" ID ",\"token_endpoint_auth_method\":\"client_secret_basic\","
            "\"redirect_uris\":[\"https://a/cb\"]}",
            "token_endpoint_auth_method must be \"none\"");
    DOC_BAD("{" ID ",\"token_endpoint_auth_method\":\"client_secret_post\","
            "\"redirect_uris\":[\"https://a/cb\"]}",
            "token_endpoint_auth_method");
    DOC_BAD("{" ID ",\"token_endpoint_auth_method\":\"private_key_jwt\","
            "\"redirect_uris\":[\"https://a/cb\"]}",
            "token_endpoint_auth_method");
    DOC_BAD("{" ID ",\"token_endpoint_auth_method\":null,\"redirect_uris\":[\"https://a/cb\"]}",
            "token_endpoint_auth_method");
    DOC_BAD("{" ID ",\"token_endpoint_auth_method\":\"None\",\"redirect_uris\":[\"https://a/cb\"]}",
            "token_endpoint_auth_method");
    DOC_BAD("{" ID ",\"client_secret\":\"s3cret\",\"redirect_uris\":[\"https://a/cb\"]}",
            "client_secret must not be in a client metadata document");
    DOC_BAD("{" ID ",\"client_secret_expires_at\":0,\"redirect_uris\":[\"https://a/cb\"]}",
            "client_secret_expires_at must not be");
    DOC_BAD("{" ID ",\"redirect_uris\":[\"https://a/cb\"],\"client_secret\":null}",
            "client_secret must not be");
}

TEST(document_redirect_uris_shape)
{
    DOC_BAD("{" ID "}", "redirect_uris is missing");
    DOC_BAD("{" ID ",\"redirect_uris\":\"https://a/cb\"}", "redirect_uris must be an array");
    DOC_BAD("{" ID ",\"redirect_uris\":null}", "redirect_uris must be an array");
    DOC_BAD("{" ID ",\"redirect_uris\":[]}", "redirect_uris is empty");
    DOC_BAD("{" ID ",\"redirect_uris\":[5]}", "redirect_uris[0] must be a string");
    DOC_BAD("{" ID ",\"redirect_uris\":[\"https://a/cb\",[\"https://b/cb\"]]}",
            "redirect_uris[1] must be a string");
    DOC_BAD("{" ID ",\"redirect_uris\":[\"https://a/cb\",null]}",
            "redirect_uris[1] must be a string");
    DOC_BAD("{" ID ",\"redirect_uris\":[\"https://a/1\",\"https://a/2\",\"https://a/3\","
            "\"https://a/4\",\"https://a/5\",\"https://a/6\",\"https://a/7\",\"https://a/8\","
            "\"https://a/9\",\"https://a/10\",\"https://a/11\"]}",
            "redirect_uris has more than 10 entries");
    struct err err = {0};
    CHECK_INT_EQ(parse("{" ID ",\"redirect_uris\":[\"https://a/1\",\"https://a/2\",\"https://a/3\","
                       "\"https://a/4\",\"https://a/5\",\"https://a/6\",\"https://a/7\","
                       "\"https://a/8\",\"https://a/9\",\"https://a/10\"]}",
                       &client, &err),
                 0);
    CHECK_INT_EQ(client.n_redirect_uris, 10);
    CHECK_STR_EQ(client.redirect_uris[9], "https://a/10");
}

TEST(document_redirect_uri_length)
{
    static char doc[2 * CIMD_URI_MAX + 200];
    char uri[CIMD_URI_MAX + 2];
    memcpy(uri, "https://a/", 10);
    memset(uri + 10, 'x', CIMD_URI_MAX - 10);
    uri[CIMD_URI_MAX] = '\0';
    snprintf(doc, sizeof(doc), "{" ID ",\"redirect_uris\":[\"%s\"]}", uri);
    struct err err = {0};
    CHECK_INT_EQ(cimd_document_parse(URL, doc, strlen(doc), &client, &err), 0);
    CHECK_INT_EQ(strlen(client.redirect_uris[0]), CIMD_URI_MAX);
    uri[CIMD_URI_MAX] = 'x';
    uri[CIMD_URI_MAX + 1] = '\0';
    snprintf(doc, sizeof(doc), "{" ID ",\"redirect_uris\":[\"%s\"]}", uri);
    CHECK_INT_EQ(cimd_document_parse(URL, doc, strlen(doc), &client, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "redirect_uris[0] is longer than 2000 bytes");
}

TEST(document_redirect_uris_accepted)
{
    REDIRECT_OK("https://client.example/cb");
    REDIRECT_OK("https://client.example:8443/cb?state=x");
    REDIRECT_OK("https://chatgpt.com/connector_platform_oauth_redirect");
    REDIRECT_OK("HTTPS://client.example/cb");
    REDIRECT_OK("https://[2001:db8::1]/cb");
    REDIRECT_OK("http://127.0.0.1/cb");
    REDIRECT_OK("http://127.0.0.1:49152/callback");
    REDIRECT_OK("http://[::1]:49152/callback");
    REDIRECT_OK("http://localhost:3000/callback");
    REDIRECT_OK("http://LOCALHOST:3000/callback");
    REDIRECT_OK("http://localhost?x=1");
    REDIRECT_OK("http://localhost");
    REDIRECT_OK("com.example.app:/oauth2redirect");
    REDIRECT_OK("com.example.app://callback");
    REDIRECT_OK("app.cursor.desktop:/auth");
    REDIRECT_OK("https://client.example/cb%20x");
}

TEST(document_redirect_uris_refused)
{
    REDIRECT_BAD("http://client.example/cb",
                 "is http:// on a host other than localhost, 127.x.x.x or [::1]");
    REDIRECT_BAD("http://127.0.0.1.evil.example/cb", "is http:// on a host other than");
    REDIRECT_BAD("http://localhost.evil.example/cb", "is http:// on a host other than");
    REDIRECT_BAD("http://localhost@evil.example/cb", "must not carry a user name or password");
    REDIRECT_BAD("http://127.0.0.1:80@evil.example/cb", "must not carry a user name or password");
    REDIRECT_BAD("http://127.0.0.1:99999/cb", "is http:// on a host other than");
    REDIRECT_BAD("http://127.0.0.1:/cb", "is http:// on a host other than");
    REDIRECT_BAD("http://10.0.0.1/cb", "is http:// on a host other than");
    REDIRECT_BAD("http:/localhost/cb", "is not an http://host URL");
    REDIRECT_BAD("https://client.example/cb#frag", "redirect_uris[0] 'https://client.example/"
                                                   "cb#frag' must not have a fragment");
    REDIRECT_BAD("com.example.app:/cb#x", "must not have a fragment");
    REDIRECT_BAD("javascript:alert(1)", "must be an https:// URL, an http:// URL on a loopback");
    REDIRECT_BAD("data:text/html,hi", "private-use scheme with a dot");
    REDIRECT_BAD("file:///etc/passwd", "private-use scheme with a dot");
    REDIRECT_BAD("myapp://callback", "private-use scheme with a dot");
    REDIRECT_BAD("/relative/cb", "private-use scheme with a dot");
    REDIRECT_BAD("client.example/cb", "private-use scheme with a dot");
    REDIRECT_BAD(".app:/cb", "private-use scheme with a dot");
    REDIRECT_BAD("1com.example:/cb", "private-use scheme with a dot");
    REDIRECT_BAD("https:/client.example/cb", "is not an https://host URL");
    REDIRECT_BAD("https:client.example", "is not an https://host URL");
    REDIRECT_BAD("https:///cb", "has no host");
    REDIRECT_BAD("https://:443/cb", "has no host");
    REDIRECT_BAD("https://user@evil.example/cb", "must not carry a user name or password");
    REDIRECT_BAD("https://client.example/c b", "characters a URI may not");
    REDIRECT_BAD("https://client.example/\\u00e9", "characters a URI may not");
    REDIRECT_BAD("https://client.example/\\n", "characters a URI may not");
    REDIRECT_BAD("https://client.example/%g0", "characters a URI may not");
    REDIRECT_BAD("", "redirect_uris[0] is empty");
    DOC_BAD("{" ID ",\"redirect_uris\":[\"https://a/cb\",\"http://evil.example/cb\"]}",
            "redirect_uris[1] 'http://evil.example/cb'");
}

TEST(document_client_name)
{
    struct err err = {0};
    CHECK_INT_EQ(parse("{" ID ",\"client_name\":\"  My\\tClient\\n\\u0007 \\u202eevil\\u202c "
                       "\\u00e9 \\u0085x  \",\"redirect_uris\":[\"https://a/cb\"]}",
                       &client, &err),
                 0);
    CHECK_STR_EQ(client.client_name, "My Client  evil \xc3\xa9 x");
    CHECK_INT_EQ(
        parse("{" ID ",\"client_name\":\"\",\"redirect_uris\":[\"https://a/cb\"]}", &client, &err),
        0);
    CHECK_STR_EQ(client.client_name, "client.example");
    CHECK_INT_EQ(parse("{" ID
                       ",\"client_name\":\" \\n\\u200e \",\"redirect_uris\":[\"https://a/cb\"]}",
                       &client, &err),
                 0);
    CHECK_STR_EQ(client.client_name, "client.example");
    CHECK_INT_EQ(
        parse("{" ID ",\"client_name\":null,\"redirect_uris\":[\"https://a/cb\"]}", &client, &err),
        0);
    CHECK_STR_EQ(client.client_name, "client.example");
    DOC_BAD("{" ID ",\"client_name\":5,\"redirect_uris\":[\"https://a/cb\"]}",
            "client_name must be a string");
    DOC_BAD("{" ID ",\"client_name\":{\"en\":\"x\"},\"redirect_uris\":[\"https://a/cb\"]}",
            "client_name must be a string");

    /* capped at 200 bytes, never inside a character */
    static char doc[1200];
    char name[400];
    memset(name, 'a', 300);
    name[300] = '\0';
    snprintf(doc, sizeof(doc),
             "{" ID ",\"client_name\":\"%s\",\"redirect_uris\":[\"https://a/cb\"]}", name);
    CHECK_INT_EQ(parse(doc, &client, &err), 0);
    CHECK_INT_EQ(strlen(client.client_name), CIMD_NAME_MAX);
    memset(name, 'a', 199);
    strcpy(name + 199, "\xc3\xa9zzz"); /* é straddles byte 200 */
    snprintf(doc, sizeof(doc),
             "{" ID ",\"client_name\":\"%s\",\"redirect_uris\":[\"https://a/cb\"]}", name);
    CHECK_INT_EQ(parse(doc, &client, &err), 0);
    CHECK_INT_EQ(strlen(client.client_name), 199);
    /* 67 three-byte characters are 201 bytes: 66 stay */
    char *p = name;
    for (int i = 0; i < 67; i++, p += 3)
        memcpy(p, "\xe2\x82\xac", 3);
    *p = '\0';
    snprintf(doc, sizeof(doc),
             "{" ID ",\"client_name\":\"%s\",\"redirect_uris\":[\"https://a/cb\"]}", name);
    CHECK_INT_EQ(parse(doc, &client, &err), 0);
    CHECK_INT_EQ(strlen(client.client_name), 198);
}

TEST(document_display_uris)
{
    struct err err = {0};
    CHECK_INT_EQ(parse("{" ID ",\"client_uri\":\"http://client.example\","
                       "\"logo_uri\":\"javascript:alert(1)\",\"redirect_uris\":[\"https://a/cb\"]}",
                       &client, &err),
                 0);
    CHECK_STR_EQ(client.client_uri, "");
    CHECK_STR_EQ(client.logo_uri, "");
    CHECK_INT_EQ(parse("{" ID ",\"client_uri\":\"https://client.example/a b\","
                       "\"logo_uri\":\"https://client.example/l.png#x\","
                       "\"redirect_uris\":[\"https://a/cb\"]}",
                       &client, &err),
                 0);
    CHECK_STR_EQ(client.client_uri, "");
    CHECK_STR_EQ(client.logo_uri, "");
    DOC_BAD("{" ID ",\"logo_uri\":5,\"redirect_uris\":[\"https://a/cb\"]}",
            "logo_uri must be a string");
    DOC_BAD("{" ID ",\"client_uri\":[],\"redirect_uris\":[\"https://a/cb\"]}",
            "client_uri must be a string");
}

TEST(document_size)
{
    static char doc[CIMD_BODY_MAX + 2];
    int n = snprintf(doc, sizeof(doc), "{" ID ",\"redirect_uris\":[\"https://a/cb\"],\"pad\":\"");
    memset(doc + n, 'x', sizeof(doc) - (size_t)n);
    memcpy(doc + CIMD_BODY_MAX - 2, "\"}", 2);
    struct err err = {0};
    CHECK_INT_EQ(cimd_document_parse(URL, doc, CIMD_BODY_MAX, &client, &err), 0);
    memcpy(doc + CIMD_BODY_MAX - 1, "\"}", 2);
    CHECK_INT_EQ(cimd_document_parse(URL, doc, CIMD_BODY_MAX + 1, &client, &err), -EFBIG);
}

/* --- answer headers --- */

TEST(max_age)
{
    CHECK_INT_EQ(cimd_max_age(NULL), 300);
    CHECK_INT_EQ(cimd_max_age(""), 300);
    CHECK_INT_EQ(cimd_max_age("public"), 300);
    CHECK_INT_EQ(cimd_max_age("max-age=600"), 600);
    CHECK_INT_EQ(cimd_max_age("public, max-age=3600, must-revalidate"), 3600);
    CHECK_INT_EQ(cimd_max_age("MAX-AGE=120"), 120);
    CHECK_INT_EQ(cimd_max_age("max-age=\"120\""), 120);
    CHECK_INT_EQ(cimd_max_age(" max-age = 120 "), 120);
    CHECK_INT_EQ(cimd_max_age("max-age=0"), 60);
    CHECK_INT_EQ(cimd_max_age("max-age=59"), 60);
    CHECK_INT_EQ(cimd_max_age("max-age=86401"), 86400);
    CHECK_INT_EQ(cimd_max_age("max-age=99999999999999999999999999"), 86400);
    CHECK_INT_EQ(cimd_max_age("max-age=abc"), 300);
    CHECK_INT_EQ(cimd_max_age("max-age="), 300);
    CHECK_INT_EQ(cimd_max_age("max-age=-5"), 300);
    CHECK_INT_EQ(cimd_max_age("max-age"), 300);
    CHECK_INT_EQ(cimd_max_age("xmax-age=600"), 300);
    CHECK_INT_EQ(cimd_max_age("max-age=600, max-age=100"), 100);
    CHECK_INT_EQ(cimd_max_age("s-maxage=1000, max-age=100"), 1000);
    CHECK_INT_EQ(cimd_max_age("max-age=100, s-maxage=7200"), 7200);
    CHECK_INT_EQ(cimd_max_age("s-maxage=10"), 60);
    CHECK_INT_EQ(cimd_max_age("no-store"), 0);
    CHECK_INT_EQ(cimd_max_age("no-cache"), 0);
    CHECK_INT_EQ(cimd_max_age("No-Cache"), 0);
    CHECK_INT_EQ(cimd_max_age("max-age=600, no-cache"), 0);
    CHECK_INT_EQ(cimd_max_age("no-cache=\"set-cookie\", max-age=600"), 0);
    CHECK_INT_EQ(cimd_max_age("private, no-store, max-age=600"), 0);
    CHECK_INT_EQ(cimd_max_age(",,, ,max-age=900,"), 900);
}

TEST(content_type)
{
    CHECK(cimd_content_type_ok(NULL));
    CHECK(cimd_content_type_ok(""));
    CHECK(cimd_content_type_ok("application/json"));
    CHECK(cimd_content_type_ok("application/json; charset=utf-8"));
    CHECK(cimd_content_type_ok("Application/JSON;charset=UTF-8"));
    CHECK(cimd_content_type_ok(" application/json "));
    CHECK(cimd_content_type_ok("application/jrd+json"));
    CHECK(cimd_content_type_ok("application/x-oauth-client+json; charset=utf-8"));
    CHECK(cimd_content_type_ok("text/plain; charset=utf-8"));
    CHECK(!cimd_content_type_ok("text/html"));
    CHECK(!cimd_content_type_ok("text/html; charset=utf-8"));
    CHECK(!cimd_content_type_ok("TEXT/HTML"));
    CHECK(!cimd_content_type_ok("application/xhtml+xml"));
    CHECK(!cimd_content_type_ok("application/xml"));
    CHECK(!cimd_content_type_ok("application/javascript"));
    CHECK(!cimd_content_type_ok("application/jsonp"));
    CHECK(!cimd_content_type_ok("application/octet-stream"));
    CHECK(!cimd_content_type_ok("image/svg+xml"));
    CHECK(!cimd_content_type_ok("+json"));
    CHECK(!cimd_content_type_ok("/+json"));
    CHECK(!cimd_content_type_ok("json"));
}

TEST_MAIN()

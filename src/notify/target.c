/* Targets: which URLs a user may be notified at. A notification is a request the server makes
 * to wherever a user points it, so it follows the rule of every such request: https only, and
 * only public addresses, judged on what the name resolves to at each attempt and held to those
 * addresses (egress_public_only, egress_pin_apply). */
#include "notify/notify.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "store/store.h"

int notify_kind_parse(const char *s, enum notify_kind *out)
{
    if (s && strcmp(s, "webhook") == 0)
        *out = NOTIFY_WEBHOOK;
    else if (s && strcmp(s, "ntfy") == 0)
        *out = NOTIFY_NTFY;
    else
        return -EINVAL;
    return 0;
}

const char *notify_kind_name(enum notify_kind k)
{
    return k == NOTIFY_NTFY ? "ntfy" : "webhook";
}

static bool topic_valid(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
            return false;
    return true;
}

/* The parts of a URL curl took apart, checked. */
static int parts_check(CURLU *h, enum notify_kind kind, bool allow_loopback_http,
                       struct notify_url *u, struct err *err)
{
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *v = NULL;
    int r = 0;
    curl_url_get(h, CURLUPART_SCHEME, &scheme, 0);
    curl_url_get(h, CURLUPART_HOST, &host, 0);
    curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
    curl_url_get(h, CURLUPART_PATH, &path, 0);
    if (curl_url_get(h, CURLUPART_USER, &v, 0) == CURLUE_OK ||
        curl_url_get(h, CURLUPART_PASSWORD, &v, 0) == CURLUE_OK) {
        r = err_set(err, -EINVAL, "the URL must not carry a user name or password");
        goto out;
    }
    if (curl_url_get(h, CURLUPART_FRAGMENT, &v, 0) == CURLUE_OK) {
        r = err_set(err, -EINVAL, "the URL must not have a fragment (#...)");
        goto out;
    }
    if (!scheme || !host || !port || !path) {
        r = err_set(err, -EINVAL, "the URL must name a host");
        goto out;
    }
    u->http = strcmp(scheme, "http") == 0;
    if (!u->http && strcmp(scheme, "https") != 0) {
        r = err_set(err, -EINVAL, "the URL must start with https://");
        goto out;
    }
    size_t hl = strlen(host);
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']')
        snprintf(u->host, sizeof(u->host), "%.*s", (int)(hl - 2), host + 1);
    else
        snprintf(u->host, sizeof(u->host), "%s", host);
    for (char *p = u->host; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    size_t n = strlen(u->host);
    if (n > 0 && u->host[n - 1] == '.')
        u->host[--n] = '\0';
    long pv = strtol(port, NULL, 10);
    if (pv <= 0 || pv > 65535) {
        r = err_set(err, -EINVAL, "the URL's port is not a port number");
        goto out;
    }
    u->port = (uint16_t)pv;
    struct egress_addr lit;
    bool literal = egress_addr_parse(u->host, &lit) == 0;
    if (!literal && !egress_name_valid(u->host)) {
        r = err_set(err, -EINVAL, "the URL's host '%.100s' is not a host name or an address",
                    u->host);
        goto out;
    }
    bool loopback = literal && egress_classify(&lit) == EGRESS_LOOPBACK;
    if (u->http && !(allow_loopback_http && loopback)) {
        r = err_set(err, -EINVAL, "the URL must start with https://");
        goto out;
    }
    struct err e = {0};
    if (literal && !u->http && (r = egress_public_only(u->host, u->port, false, &lit, 1, &e)) < 0) {
        r = err_set(err, r, "the URL's host %s; notifications go to public addresses only", e.msg);
        goto out;
    }
    if (kind == NOTIFY_NTFY) {
        if (curl_url_get(h, CURLUPART_QUERY, &v, 0) == CURLUE_OK) {
            r = err_set(err, -EINVAL, "an ntfy URL must not have a query");
            goto out;
        }
        const char *slash = strrchr(path, '/');
        const char *topic = slash ? slash + 1 : path;
        if (!topic_valid(topic, strlen(topic))) {
            r = err_set(err, -EINVAL,
                        "an ntfy URL ends with its topic: 1 to 64 letters, digits, '_' or '-' "
                        "(https://ntfy.sh/TOPIC)");
            goto out;
        }
    }
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(v);
    return r;
}

int notify_url_check(const char *url, enum notify_kind kind, bool allow_loopback_http,
                     struct notify_url *out, struct err *err)
{
    size_t n = strlen(url);
    if (n == 0)
        return err_set(err, -EINVAL, "the URL is empty");
    if (n > STORE_NOTIFY_URL_MAX)
        return err_set(err, -EINVAL, "the URL is longer than %d bytes", STORE_NOTIFY_URL_MAX);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)url[i] <= ' ' || (unsigned char)url[i] >= 0x7f || url[i] == '\\')
            return err_set(err, -EINVAL,
                           "the URL holds a space, a control character, a backslash or a "
                           "character that is not ASCII (percent-encode it)");
    CURLU *h = curl_url();
    if (!h)
        return err_set(err, -ENOMEM, "out of memory");
    struct notify_url u = {0};
    int r;
    CURLUcode rc = curl_url_set(h, CURLUPART_URL, url, 0);
    if (rc != CURLUE_OK)
        r = err_set(err, -EINVAL, "the URL is not a URL: %s", curl_url_strerror(rc));
    else
        r = parts_check(h, kind, allow_loopback_http, &u, err);
    curl_url_cleanup(h);
    if (r == 0 && out)
        *out = u;
    return r;
}

int notify_addrs_check(const struct notify_url *u, const struct egress_addr *addrs, int n,
                       struct err *err)
{
    struct err e = {0};
    int r = egress_public_only(u->host, u->port, u->http, addrs, n, &e);
    if (r == -EACCES)
        return err_set(err, r, "%s; notifications go to public addresses only", e.msg);
    return r < 0 ? err_set(err, r, "%s", e.msg) : 0;
}

void notify_url_shown(const char *url, char *out, size_t cap)
{
    size_t q = strcspn(url, "?");
    snprintf(out, cap, "%.*s%s", (int)q, url, url[q] ? "?…" : "");
}

void notify_secret_new(char out[NOTIFY_SECRET_LEN + 1])
{
    unsigned char raw[32];
    rand_bytes(raw, sizeof(raw));
    memcpy(out, "whsec_", 6);
    base64url_encode(raw, sizeof(raw), out + 6);
    explicit_bzero(raw, sizeof(raw));
}

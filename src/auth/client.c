/* Finding and authenticating clients. A client_id that is an https URL names a Client ID
 * Metadata Document, fetched (cimd.c) and cached in the store for as long as its response
 * allows; any other client_id was issued by /register. */
#include "auth/auth_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth/cimd.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"

struct auth_client_lookup {
    struct auth *a;
    struct cimd_fetch *fetch;
    auth_client_fn cb;
    void *ctx;
    bool cached; /* an expired copy is in the store: fetching again adds no client */
    char peer[INET6_ADDRSTRLEN];
    char id[STORE_OAUTH_CLIENT_ID_MAX + 1];
};

/* A client_id the server fetches a document for: https, or in the loopback test mode http
 * (cimd_fetch checks the rest). */
static bool is_document_id(struct auth *a, const char *id)
{
    return strncmp(id, "https://", 8) == 0 || (a->cimd_loopback && strncmp(id, "http://", 7) == 0);
}

/* A client_id written as a URL ("scheme://..."): meant as a document's, even when it cannot be
 * one. A registered client's id never is (cli_...). */
static bool looks_like_url(const char *id)
{
    size_t n = strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.");
    return n > 0 && strncmp(id + n, "://", 3) == 0;
}

/* s as a log value goes inside "...": at most max bytes of it, '"' and '\\' escaped with a
 * backslash, controls and bytes past ASCII as \xNN, so that a stranger's client_id cannot end
 * the value or the line. */
static void log_value(const char *s, size_t max, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; s[i] && i < max && k + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            out[k++] = '\\';
            out[k++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            k += (size_t)snprintf(out + k, cap - k, "\\x%02x", c);
        } else {
            out[k++] = (char)c;
        }
    }
    out[k] = '\0';
}

/* One line for every client document refused, whether before any fetch (the URL, its address,
 * the requester's quota, or a fetch that failed a moment ago: nothing was sent) or after one
 * (the lookup, the connection, the answer or the document). The client_id is a public
 * identifier (the browser's address bar carries it, and its host serves it to anyone): it is
 * logged as sent, query included, so that an operator can fetch what the server fetched. */
static void log_refused(const char *stage, const char *client_id, const char *peer,
                        const char *reason)
{
    char id[4 * 200 + 1], why[4 * sizeof(((struct err *)0)->msg) + 1];
    log_value(client_id, 200, id, sizeof(id));
    log_value(reason, sizeof(why) / 4, why, sizeof(why));
    log_info("oauth client-document-refused stage=%s client=\"%s\" addr=%s reason=\"%s\"", stage,
             id, peer, why);
}

static void lookup_dispose(void *p)
{
    struct auth_client_lookup *l = p;
    if (l->fetch)
        cimd_fetch_cancel(l->fetch);
    l->fetch = NULL;
}

static void fetched(void *ctx, const struct cimd_client *doc, int64_t max_age_s,
                    const struct err *ferr)
{
    struct auth_client_lookup *l = ctx;
    l->fetch = NULL;
    struct err err = {0};
    if (!doc) {
        log_refused("after_fetch", l->id, l->peer, ferr ? ferr->msg : "unknown error");
        err_set(&err, -ENOENT, "the client's metadata document could not be used: %s",
                ferr ? ferr->msg : "unknown error");
        l->cb(l->ctx, NULL, &err);
        return;
    }
    struct store_oauth_client c = {.created_at = time_now_ms()};
    snprintf(c.id, sizeof(c.id), "%s", l->id);
    snprintf(c.kind, sizeof(c.kind), "document");
    snprintf(c.name, sizeof(c.name), "%s", doc->client_name);
    snprintf(c.auth_method, sizeof(c.auth_method), "none");
    json_t *uris = json_array();
    for (int i = 0; i < doc->n_redirect_uris; i++)
        json_array_append_new(uris, json_string(doc->redirect_uris[i]));
    c.redirect_uris = json_dumps(uris, JSON_COMPACT);
    json_decref(uris);
    c.expires_at = time_now_ms() + max_age_s * 1000;
    /* The document is good for this request even when it is not kept. A document cached for
     * the first time is a new client, as a registration is (admit.c). */
    if ((!l->cached && auth_admit(l->a, l->peer, &err) < 0) ||
        store_oauth_client_put(l->a->store, &c, &err) < 0)
        log_warn("oauth client-cache-skipped reason=\"%s\"", err.msg);
    l->cb(l->ctx, &c, NULL);
    store_oauth_client_clear(&c);
}

/* A document refused before any fetch: logged, and cb told why. */
static void refuse_before(auth_client_fn cb, void *ctx, const char *client_id, const char *peer,
                          const struct err *why)
{
    log_refused("before_fetch", client_id, peer, why->msg);
    struct err e = {0};
    err_set(&e, -ENOENT, "the client's metadata document could not be used: %s", why->msg);
    cb(ctx, NULL, &e);
}

void auth_client_find(struct auth *a, h2o_req_t *req, const char *client_id, bool may_fetch,
                      auth_client_fn cb, void *ctx)
{
    struct err err = {0};
    struct store_oauth_client c = {0};
    bool too_long = strlen(client_id) > STORE_OAUTH_CLIENT_ID_MAX;
    int r = too_long ? -ENOENT : store_oauth_client_get(a->store, client_id, &c, &err);
    if (r < 0 && r != -ENOENT) {
        cb(ctx, NULL, &err);
        return;
    }
    bool doc = is_document_id(a, client_id);
    if (r == 0 && (!doc || !may_fetch || c.expires_at > time_now_ms())) {
        cb(ctx, &c, NULL);
        store_oauth_client_clear(&c);
        return;
    }
    store_oauth_client_clear(&c);
    char peer[64];
    auth_peer(req, peer, sizeof(peer));
    if (may_fetch && (!doc || too_long) && looks_like_url(client_id) &&
        cimd_url_check(client_id, a->cimd_loopback, &err) < 0) {
        /* meant as a document, but not one this server fetches (http://, a bad shape, too long) */
        refuse_before(cb, ctx, client_id, peer, &err);
        return;
    }
    if (!doc || too_long || !may_fetch) {
        err_set(&err, -ENOENT, "unknown client");
        cb(ctx, NULL, &err);
        return;
    }
    int64_t wait_s = r == -ENOENT ? auth_admit_wait_s(a, peer) : 0;
    if (wait_s > 0) {
        err_set(&err, -EAGAIN,
                "this address brought %d new apps in the last hour; try again in %lld s",
                a->conf.register_per_address, (long long)wait_s);
        log_refused("before_fetch", client_id, peer, err.msg);
        cb(ctx, NULL, &err);
        return;
    }
    struct auth_client_lookup *l = h2o_mem_alloc_shared(&req->pool, sizeof(*l), lookup_dispose);
    memset(l, 0, sizeof(*l));
    l->a = a;
    l->cb = cb;
    l->ctx = ctx;
    l->cached = r == 0;
    snprintf(l->peer, sizeof(l->peer), "%s", peer);
    snprintf(l->id, sizeof(l->id), "%s", client_id);
    l->fetch = cimd_fetch(a->cimd, client_id, peer, fetched, l, &err);
    if (l->fetch)
        return;
    if (err.code == -EBUSY || err.code == -EAGAIN) {
        /* the server's capacity, this requester's or the host's share of it: later */
        char id[4 * 200 + 1], why[4 * sizeof(err.msg) + 1];
        log_value(client_id, 200, id, sizeof(id));
        log_value(err.msg, sizeof(err.msg), why, sizeof(why));
        log_info("oauth client-document-busy client=\"%s\" addr=%s reason=\"%s\"", id, peer, why);
        err.code = -EBUSY;
        cb(ctx, NULL, &err);
        return;
    }
    /* the URL, its address literal, or a failure remembered from a fetch a moment ago */
    refuse_before(cb, ctx, client_id, peer, &err);
}

static bool secret_matches(const struct store_oauth_client *c, const char *secret)
{
    char hash[65];
    sha256_hex(secret, strlen(secret), hash);
    unsigned char diff = strlen(c->secret_hash) != 64;
    for (size_t i = 0; i < 64 && !diff; i++)
        diff |= (unsigned char)(hash[i] ^ c->secret_hash[i]);
    return diff == 0;
}

static void invalid_client(h2o_req_t *req, bool basic, const char *why)
{
    if (basic)
        http_add_header(req, H2O_TOKEN_WWW_AUTHENTICATE, "Basic realm=\"sandbox-mcp\"");
    auth_json_error(req, 401, "invalid_client", why);
}

/* "Basic base64(urlencode(id):urlencode(secret))" (RFC 6749 2.3.1) into id and secret. */
static bool parse_basic(h2o_req_t *req, struct form *creds)
{
    const char *h = http_header(req, H2O_TOKEN_AUTHORIZATION);
    if (!h || strncasecmp(h, "Basic ", 6) != 0)
        return false;
    size_t n = strlen(h + 6);
    if (n > 8192)
        return false;
    unsigned char *raw = h2o_mem_alloc_pool(&req->pool, n + 4);
    ssize_t len = base64_decode(h + 6, n, raw);
    if (len <= 0)
        return false;
    const unsigned char *colon = memchr(raw, ':', (size_t)len);
    if (!colon)
        return false;
    /* reuse the form decoder: "client_id=<id>&client_secret=<secret>" */
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "client_id=");
    buf_append(&b, raw, (size_t)(colon - raw));
    buf_puts(&b, "&client_secret=");
    buf_append(&b, colon + 1, (size_t)(raw + len - colon - 1));
    bool ok = !memchr(b.data, '&', strlen("client_id=") + (size_t)(colon - raw)) &&
              form_parse(b.data, b.len, creds, NULL) == 0;
    buf_release(&b);
    return ok;
}

bool auth_client_authenticate(struct auth *a, h2o_req_t *req, const struct form *f,
                              struct store_oauth_client *out)
{
    struct form basic = {0};
    bool is_basic = parse_basic(req, &basic);
    if (!is_basic && http_header(req, H2O_TOKEN_AUTHORIZATION)) {
        invalid_client(req, false, "only Basic client authentication is accepted in the header");
        return false;
    }
    const char *id = is_basic ? form_get(&basic, "client_id") : form_get(f, "client_id");
    const char *secret =
        is_basic ? form_get(&basic, "client_secret") : form_get(f, "client_secret");
    if (is_basic && form_get(f, "client_secret")) {
        form_release(&basic);
        invalid_client(req, true, "client credentials were sent twice");
        return false;
    }
    if (is_basic && form_get(f, "client_id") && strcmp(form_get(f, "client_id"), id) != 0) {
        form_release(&basic);
        invalid_client(req, true, "client_id differs from the authenticated client");
        return false;
    }
    if (!id || !*id) {
        form_release(&basic);
        invalid_client(req, false, "client_id is missing");
        return false;
    }
    struct err err = {0};
    int r = strlen(id) > STORE_OAUTH_CLIENT_ID_MAX
                ? -ENOENT
                : store_oauth_client_get(a->store, id, out, &err);
    bool ok = false;
    const char *why = "unknown client; register again";
    if (r == 0) {
        bool public = strcmp(out->auth_method, "none") == 0;
        if (public && secret && *secret)
            why = "this client is public and has no secret";
        else if (!public && !(secret && secret_matches(out, secret)))
            why = "wrong or missing client secret";
        else
            ok = true;
    } else if (r != -ENOENT) {
        log_error("oauth store-failure reason=\"%s\"", err.msg);
        why = "the server could not check the client";
    }
    form_release(&basic);
    if (!ok) {
        if (r == 0)
            store_oauth_client_clear(out);
        invalid_client(req, is_basic, why);
    }
    return ok;
}

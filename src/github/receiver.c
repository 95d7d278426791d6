/* POST /github/webhook (receiver.h): the checks a delivery passes before it is acted on, each
 * answered at once when it fails, and the event handed to the module that acts on it. A stranger
 * can make the server hold, through this endpoint, at most: a body of GITHUB_PAYLOAD_MAX while
 * it is read (within the gate's PREAUTH_TOTAL_BYTES for all of them), the work of a signature
 * check GITHUB_WEBHOOK_RATE times a second from an address (four times that from all), and
 * nothing kept: only deliveries with a good
 * signature are recorded, GITHUB_DELIVERIES_MAX of them. */
#include "github/receiver.h"

#include <errno.h>
#include <h2o.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/bucket.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/util.h"
#include "http/gate_internal.h"
#include "http/http_internal.h"
#include "store/store.h"

#define SIGNATURE_HEADER "x-hub-signature-256"

#define REPO_SECRETS_MAX 64
#define ADDRESS_BUCKETS 256 /* addresses paced apart; one that finds its slot taken starts full */

struct github_receiver {
    struct store *st;
    github_event_fn fn;
    void *ctx;
    char *secret; /* NULL: webhooks are off unless a repository has its own */
    /* GITHUB_WEBHOOK_SECRETS: a repository ("owner/name", or "owner/" and a star) and its own
     * secret */
    struct {
        char repo[200];
        char *secret;
    } repos[REPO_SECRETS_MAX];
    size_t nrepos;
    char mention[64];
    uint64_t rate; /* deliveries a second, from one address */
    uint64_t keep; /* delivery ids kept */
    /* each client address (IPv4, or IPv6 /64) has GITHUB_WEBHOOK_RATE, so that strangers on an
     * address of their own do not take GitHub's share; all together have four times that */
    struct bucket all;
    struct keyed_bucket addrs[ADDRESS_BUCKETS];
};

static void wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

/* "owner/name=SECRET,...", an entry "owner/" and a star for all of an owner's: each repository's
 * (or owner's) own secret. */
static int repo_secrets_parse(struct github_receiver *g, const char *spec, struct err *err)
{
    for (const char *p = spec; p && *p;) {
        size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n);
        const char *slash = eq ? memchr(p, '/', (size_t)(eq - p)) : NULL;
        size_t klen = eq ? (size_t)(eq - p) : 0, vlen = eq ? n - klen - 1 : 0;
        if (!eq || !slash || slash == p || klen >= sizeof(g->repos[0].repo) || vlen < 16 ||
            g->nrepos == REPO_SECRETS_MAX)
            return err_set(err, -EINVAL,
                           "GITHUB_WEBHOOK_SECRETS: entry %zu is not owner/name=SECRET or "
                           "owner/*=SECRET with a secret of at least 16 bytes (at most %d "
                           "entries)",
                           g->nrepos + 1, REPO_SECRETS_MAX);
        snprintf(g->repos[g->nrepos].repo, sizeof(g->repos[0].repo), "%.*s", (int)klen, p);
        g->repos[g->nrepos++].secret = strndup(eq + 1, vlen);
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* The secret a delivery about repo ("owner/name") is signed with: the repository's own, else
 * its owner's, else the server's (NULL when none). */
static const char *secret_for(const struct github_receiver *g, const char *repo)
{
    const char *owner_secret = NULL;
    size_t ol = strcspn(repo, "/");
    for (size_t i = 0; i < g->nrepos; i++) {
        const char *r = g->repos[i].repo;
        if (strcasecmp(r, repo) == 0)
            return g->repos[i].secret;
        if (strncasecmp(r, repo, ol) == 0 && strcmp(r + ol, "/*") == 0 && repo[ol] == '/')
            owner_secret = g->repos[i].secret;
    }
    return owner_secret ? owner_secret : g->secret;
}

/* The repository a delivery names (repository.full_name), read before its signature is checked
 * only to choose the secret; "" when none. */
static void delivery_repo(const char *body, size_t len, char out[200])
{
    json_t *j = json_loadb(body, len, 0, NULL);
    const char *name =
        json_string_value(json_object_get(json_object_get(j, "repository"), "full_name"));
    snprintf(out, 200, "%s", name ? name : "");
    json_decref(j);
}

int github_receiver_new(const struct config *cfg, struct store *st, github_event_fn fn, void *ctx,
                        struct github_receiver **out, struct err *err)
{
    uint64_t rate, keep;
    int r;
    if ((r = config_get_u64(cfg, "GITHUB_WEBHOOK_RATE", 10, 1, 10000, &rate, err)) < 0 ||
        (r = config_get_u64(cfg, "GITHUB_DELIVERIES_MAX", GITHUB_DELIVERIES_DEFAULT, 1, 10000000,
                            &keep, err)) < 0)
        return r;
    const char *mention = config_get(cfg, "GITHUB_MENTION");
    if (!mention)
        mention = GITHUB_MENTION_DEFAULT;
    if (strlen(mention) < 2 || strlen(mention) > 40 || strpbrk(mention, " \t\r\n"))
        return err_set(
            err, -EINVAL,
            "GITHUB_MENTION '%.60s' is not one word of 2 to 40 bytes (e.g. @sandbox-mcp)", mention);
    const char *secret = config_get(cfg, "GITHUB_WEBHOOK_SECRET");
    if (secret && strlen(secret) < 16)
        return err_set(err, -EINVAL,
                       "GITHUB_WEBHOOK_SECRET is shorter than 16 bytes: make one with `openssl "
                       "rand -hex 32`, and give GitHub the same");
    struct github_receiver *g = xcalloc(1, sizeof(*g));
    if ((r = repo_secrets_parse(g, config_get(cfg, "GITHUB_WEBHOOK_SECRETS"), err)) < 0) {
        github_receiver_free(g);
        return r;
    }
    g->st = st;
    g->fn = fn;
    g->ctx = ctx;
    g->secret = secret ? xstrdup(secret) : NULL;
    snprintf(g->mention, sizeof(g->mention), "%s", mention);
    g->rate = rate;
    g->keep = keep;
    *out = g;
    return 0;
}

void github_receiver_free(struct github_receiver *g)
{
    if (!g)
        return;
    wipe_free(g->secret);
    for (size_t i = 0; i < g->nrepos; i++)
        wipe_free(g->repos[i].secret);
    free(g);
}

const char *github_receiver_mention(const struct github_receiver *g)
{
    return g->mention;
}

/* One delivery from the client's address and from all (each with bursts of five seconds'
 * worth): false when either is empty. */
static bool rate_take(struct github_receiver *g, h2o_req_t *req)
{
    int64_t now = time_mono_ms();
    struct sockaddr_storage ss;
    struct http_peer_key key = {0};
    if (http_client_addr(req, &ss))
        http_peer_key((struct sockaddr *)&ss, &key);
    double rate = (double)g->rate;
    return bucket_take(bucket_of(g->addrs, ADDRESS_BUCKETS, &key, sizeof(key)), rate, rate * 5,
                       now) == 0 &&
           bucket_take(&g->all, rate * 4, rate * 20, now) == 0;
}

static void reply(h2o_req_t *req, const struct github_outcome *o)
{
    json_t *j = json_pack("{s:s, s:s}", "status", o->word, "why", o->why);
    if (o->run_id[0])
        json_object_set_new(j, "run_id", json_string(o->run_id));
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    http_respond(req, o->status, "application/json", text, strlen(text));
    free(text);
}

/* A delivery id as GitHub makes them (a UUID), or anything of the same letters up to 64. */
static bool delivery_id_valid(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > 64)
        return false;
    for (const char *c = id; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              *c == '-'))
            return false;
    return true;
}

static int on_webhook(h2o_handler_t *self, h2o_req_t *req)
{
    struct http_route *route = (struct http_route *)self;
    struct github_receiver *g = route->ctx;
    http_request_track(route, req);
    if (!g->secret && !g->nrepos) {
        http_respond_error(req, 404, "not_found",
                           "webhooks are off on this server: its operator sets "
                           "GITHUB_WEBHOOK_SECRET to turn them on (docs/DEPLOY.md)");
        return 0;
    }
    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"))) {
        http_add_header(req, H2O_TOKEN_ALLOW, "POST");
        http_respond_error(req, 405, "method_not_allowed", "GitHub's deliveries are POSTs");
        return 0;
    }
    if (!rate_take(g, req)) {
        metrics_github("rate_limited");
        http_add_header(req, H2O_TOKEN_RETRY_AFTER, "1");
        http_respond_error(req, 429, "rate_limited",
                           "more deliveries than GITHUB_WEBHOOK_RATE a second from this address");
        return 0;
    }
    size_t len = req->entity.base ? req->entity.len : 0;
    if (len > GITHUB_PAYLOAD_MAX) {
        metrics_github("too_large");
        http_respond_error(req, 413, "too_large", "a delivery is at most 1 MiB here");
        return 0;
    }
    const char *sig = http_header_str(req, SIGNATURE_HEADER);
    char repo[200] = "";
    if (g->nrepos && sig)
        delivery_repo(req->entity.base ? req->entity.base : "", len, repo);
    const char *secret = secret_for(g, repo);
    if (!sig || !secret ||
        !github_signature_ok(secret, strlen(secret), sig, req->entity.base, len)) {
        metrics_github("bad_signature");
        http_respond_error(req, 401, "bad_signature",
                           "X-Hub-Signature-256 is missing or is not this server's secret's "
                           "signature of the body");
        return 0;
    }
    const char *id = http_header_str(req, "x-github-delivery");
    const char *type = http_header_str(req, "x-github-event");
    if (!delivery_id_valid(id) || !type || !*type || strlen(type) > 64) {
        http_respond_error(req, 400, "bad_delivery",
                           "X-GitHub-Delivery (an id) and X-GitHub-Event are required");
        return 0;
    }
    struct github_outcome o = {.status = 202};
    struct err err = {0};
    int fresh = store_github_delivery_add(g->st, id, time_now_ms(), g->keep, &err);
    if (fresh < 0) {
        log_error("github delivery not recorded id=%s err=\"%s\"", id, err.msg);
        http_respond_error(req, 503, "unavailable",
                           "the delivery could not be recorded; redeliver it");
        return 0;
    }
    if (fresh == 0) {
        metrics_github("duplicate");
        o.status = 200;
        snprintf(o.word, sizeof(o.word), "duplicate");
        snprintf(o.why, sizeof(o.why), "delivery %s was received before", id);
        reply(req, &o);
        return 0;
    }
    struct github_event ev;
    if (github_event_parse(type, req->entity.base ? req->entity.base : "", len, g->mention, &ev,
                           &err) < 0) {
        metrics_github("unreadable");
        http_respond_error(req, 400, "bad_payload", err.msg);
        return 0;
    }
    if (ev.kind == GITHUB_EV_IGNORED) {
        metrics_github("not_acted_on");
        o.status = 200;
        snprintf(o.word, sizeof(o.word), "ignored");
        snprintf(o.why, sizeof(o.why), "%s", ev.why);
    } else {
        g->fn(g->ctx, &ev, &o);
    }
    github_event_clear(&ev);
    reply(req, &o);
    return 0;
}

void github_receiver_register(struct http_server *http, struct github_receiver *g)
{
    http_add_route(http, "/github/webhook", "/github/webhook", on_webhook, g);
    http_allow_signed_body(http, "/github/webhook", SIGNATURE_HEADER, GITHUB_PAYLOAD_MAX);
}

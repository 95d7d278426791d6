#pragma once

#include <stdbool.h>

#include "base/buf.h"
#include "base/loop.h"
#include "base/seal.h"
#include "http/sendq.h"
#include "http/watch.h"
#include "proxy/proxy.h"
#include "proxy/upstream.h"
#include "store/store.h"

/* Where an agent's client puts its key: x-api-key, Authorization: Bearer, the Basic password,
 * Authorization: token (GitHub's own scheme, which gh sends). */
enum token_from {
    TOKEN_X_API_KEY = 1,
    TOKEN_BEARER = 2,
    TOKEN_BASIC_PASSWORD = 4,
    TOKEN_TOKEN = 8,
};
enum usage_kind { USAGE_NONE, USAGE_ANTHROPIC, USAGE_OPENAI };

struct provider {
    char *name;
    char *upstream;   /* base URL without a trailing slash */
    char *api;        /* a REST API of the service's (GitHub's), or NULL */
    char *key;        /* the real credential, NULL when not configured */
    char *key_header; /* lowercase header name */
    char *key_value;  /* the full header value with the key in it */
    char *key_format; /* how a key becomes that value (provider_key_value) */
    /* the service of users' own credentials (store_credential_open) used instead of the
     * operator's key when the requesting user has one, or NULL */
    char *user_credential;
    unsigned token_from;
    unsigned methods; /* bit per method in method_bit() */
    char **paths;     /* allowed path prefixes (segment boundary), NULL-terminated */
    char **suffixes;  /* allowed path suffixes, NULL-terminated */
    enum usage_kind usage;
    bool repo_scoped; /* paths are /owner/name/<suffix>, each checked against repos */
    char *repos;      /* repo_scoped: the operator's list (proxy_repo_allowed), or NULL */
    char *key_env;    /* the setting that holds the key, or NULL */
    bool llm;         /* the file has an "agent" object: agents may be pointed at it */
    enum proxy_wire wire;
    char *agent_path; /* llm: added to /proxy/<name> for the agent's client ("/v1" or "") */
    char *granted_by; /* the service whose grant opens this one too ("github"), or NULL */
    /* A REST view of one repository (GitHub's API): paths are /repos/owner/name[/<sub>], the
     * repository the token's, and <sub>'s first segment one of rest_paths (rest_policy.c). */
    bool rest_scoped;
    char **rest_paths; /* NULL-terminated; "actions/runs" names two segments */
    char *follow;      /* redirects of GETs whose path ends so are followed here, or NULL */
    /* rest_scoped: the GraphQL documents served (SHA-256 of the query text, hex), reviewed to
     * read only the repository their $owner and $repo name; NULL-terminated */
    char **graphql_docs;
    uint64_t answer_max;      /* bytes of an answer passed on, 0 for no cap */
    unsigned rate_per_minute; /* requests a token may make a minute, 0 for no cap */
    unsigned rate_burst;      /* ... at once after a quiet spell */
};

/* providers.c */
/* The embedded provider files, then those of PROXY_PROVIDERS_DIR (a file there replaces the
 * embedded one of the same name), sorted by name. */
int providers_load(const struct config *cfg, struct provider **out, size_t *n, struct err *err);
void providers_free(struct provider *p, size_t n);
unsigned method_bit(const char *m, size_t len);
/* A key as the header value format says (malloc'd): "{key}" replaced, "basic:USER:{key}" as
 * HTTP Basic. */
char *provider_key_value(const char *format, const char *key);
bool provider_path_allowed(const struct provider *p, const char *path, size_t len);
/* "GET, POST": p's methods, for an Allow header. */
h2o_iovec_t provider_methods(const struct provider *p, h2o_mem_pool_t *pool);
/* The service whose grant in a token opens p. */
const char *provider_grant_name(const struct provider *p);

/* usage.c: token counts read from a provider's response, streaming (SSE) or not. */
struct usage_parser {
    enum usage_kind kind;
    bool sse;
    char *buf; /* the current SSE event, or the whole JSON body (capped) */
    size_t len, cap;
    bool overflow;
    char *line; /* SSE: the line being received */
    size_t line_len, line_cap;
    bool line_overflow;
    int64_t input, output;
};
void usage_init(struct usage_parser *u, enum usage_kind kind, bool sse);
void usage_feed(struct usage_parser *u, const char *data, size_t len);
/* Finish (parses a buffered JSON body) and release. */
void usage_finish(struct usage_parser *u);

/* push_check.c: the fast-forward check of a push on worker threads, one at a time per token,
 * with a back-off after refusals. Loop thread only. */
struct push_limits {
    unsigned threads;        /* checks running at once (PROXY_PUSH_CHECKS) */
    unsigned waiting;        /* checks that may wait for a thread (PROXY_PUSH_CHECKS_WAITING) */
    uint64_t backoff_ms;     /* the hold after a first refusal (PROXY_PUSH_BACKOFF_SECONDS) */
    uint64_t backoff_max_ms; /* its cap as it doubles (PROXY_PUSH_BACKOFF_MAX_SECONDS) */
};
struct push_checks;
struct push_check;
struct push_check_args {
    const char *jti;            /* the token's */
    const char *who;            /* "user=... run=..." for the log */
    const char *tip, *ancestor; /* rp_descends(pack, len, tip, ancestor, inflate_max) */
    const unsigned char *pack;  /* copied */
    size_t len;
    uint64_t inflate_max;
};
/* result: rp_descends()'s; why: its error message when result < 0, else ""; held_ms: how long
 * the token's pushes are now held back (0 unless refused). Returns false when it found the
 * client gone (the check is then logged as dropped, as a forgotten one), else true. */
typedef bool (*push_check_cb)(void *ctx, int result, const char *why, uint64_t held_ms);

/* The hold after `refusals` refused checks in a row: backoff_ms doubled each time, capped. */
uint64_t push_backoff_ms(const struct push_limits *lim, unsigned refusals);
/* The proxy's checks; the process's one pool of check threads takes lim's sizes. */
struct push_checks *push_checks_new(const struct push_limits *lim);
/* Freed now, or when the last check under way ends. */
void push_checks_free(struct push_checks *pc);
/* Check a->pack on a worker thread and call cb(ctx, ...) on the loop when done, unless
 * forgotten. Returns the check, or NULL with err and *retry_s (seconds the client should wait):
 * -EALREADY when the token has a check under way, -EAGAIN when its pushes are held back after a
 * refusal (the message says for how long and why), -EBUSY when every thread is busy and the
 * waiting checks are as many as allowed. */
struct push_check *push_check_start(struct push_checks *pc, const struct push_check_args *a,
                                    push_check_cb cb, void *ctx, unsigned *retry_s,
                                    struct err *err);
/* Its client went away: cb will not be called; a check not started yet is skipped. The token
 * stays busy until the check ends. NULL is fine. */
void push_check_forget(struct push_check *c);
/* Checks started whose end the loop has not yet seen, forgotten ones included (for tests). */
unsigned push_checks_pending(void);

/* --- the request path: proxy.c (the handler), token_check.c, push_policy.c, forward.c --- */

#define USAGE_PENDING_MAX 64

struct push_wait;

/* A provider's upstream: its kept connections, and what requests to it are built with. */
struct service {
    struct upstream up;
    h2o_iovec_t authority; /* for Host */
    const char *base;      /* the upstream URL's path, "" for none */
};

struct proxy {
    struct store *store;
    unsigned char *key;
    size_t keylen;
    struct provider *providers;
    size_t nproviders;
    struct service *upstreams; /* by provider */
    size_t nupstreams;         /* set up so far */
    struct upstream_ctx upstream_ctx;
    uint64_t max_request_bytes;
    uint64_t stall_seconds;
    char *names;            /* "anthropic, github, openai" */
    struct proxy_llm *llms; /* the providers with an "agent" object, pointing into providers */
    size_t nllms;
    unsigned char seal_key[SEAL_KEY_BYTES];
    bool have_seal_key;
    /* Usage not yet written. A row update for every request would be a transaction for every
     * request (file locks and a WAL write, several times the system calls of the request
     * itself), so requests add to this and the rows are written together: within
     * USAGE_FLUSH_MS, at once when USAGE_PENDING_MAX tokens are waiting, and when the proxy
     * stops. */
    struct store_token_usage usage[USAGE_PENDING_MAX];
    size_t nusage;
    struct loop_timer usage_timer;
    proxy_run_lookup_fn run_lookup; /* for warm tokens */
    void *run_lookup_ctx;
    struct push_checks *push_checks;
};

/* token_check.c */
/* The value of header name in req, spaces and tabs around it trimmed; empty when absent. */
h2o_iovec_t proxy_header_value(h2o_req_t *req, const char *name);
/* The agent's token from an x-api-key or Authorization header value, in the forms allowed by
 * from (a provider's token_from), copied NUL-terminated into out. Returns its length, 0 if
 * there is none or it does not fit. */
size_t proxy_token_of(unsigned from, h2o_iovec_t x_api_key, h2o_iovec_t authorization, char *out,
                      size_t cap);
/* The one check of an agent's token: signature and expiry (once per token, then from the cache),
 * and revocation (at most once a second per token); a warm agent's token takes its sandbox's
 * run's grant, or -ENOENT when none is running. A pooled agent's key (proxy_sandbox_key) is
 * taken only on its sandbox's listener (listener: the sandbox id of the listener the request
 * came on, "" for the server's own), and like a warm token. Returns 0 and fills claims,
 * -EKEYREVOKED, or -EACCES with err saying why. */
int proxy_token_check(struct proxy *p, const char *token, size_t len, const char *listener,
                      struct proxy_claims *claims, struct err *err);

/* One request forwarded: in the request's pool, ended by h2o's stop or dispose. */
struct transfer {
    h2o_generator_t gen;
    struct proxy *p;
    h2o_req_t *req;
    const struct provider *prov;
    struct service *up;
    struct upstream_call call; /* the upstream exchange, active until it has ended */
    struct upstream redirect;  /* where a followed redirect goes (redirected) */
    struct buf head;           /* request line and headers */
    char *key;                 /* the real key's header line, and the end of the headers */
    h2o_iovec_t reqbufs[3];    /* head, key, body */
    char jti[64];
    char user[64];
    char run[64];
    int status;
    bool started; /* h2o response started */
    bool stopped, done, failed, sse;
    bool held;           /* the upstream's reading paused for a client that reads slowly */
    bool was_held;       /* paused once at least (logged the first time only) */
    struct http_sendq q; /* the answer; its pending is what holds the upstream */
    struct usage_parser usage;
    int64_t t0;
    uint64_t bytes;
    struct http_watch watch;  /* the client, until the response starts */
    struct push_check *check; /* a push's check under way: upstream waits for it */
    bool follow;              /* a GET whose redirect is followed here (prov->follow) */
    bool redirected;          /* the exchange is the redirect's, on a connection of its own */
};

/* proxy.c */
/* Answer req with status and a JSON body {"error": message, "code": code}. */
void proxy_respond_error(h2o_req_t *req, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* forward.c */
/* Set up p's upstreams (one pool of kept connections each, from p->providers) and the TLS their
 * connections use: 0, or < 0 with err filled; forward_release undoes what was done either way. */
int forward_init(struct proxy *p, struct err *err);
/* Write the usage not yet written, and close the upstreams' kept connections. */
void forward_release(struct proxy *p);
/* A transfer for req, checked and granted for prov, in req's pool (rest below the upstream's
 * path, or from its root when rooted): its head built with key_value (the header value of the key
 * to use, copied), the client watched. Send it with forward_connect (after a push's check, if it
 * waits for one). */
struct transfer *forward_new(struct proxy *p, h2o_req_t *req, const struct provider *prov,
                             const struct proxy_claims *claims, const char *rest, size_t rlen,
                             bool rooted, const char *key_value);
/* Send t's request upstream (on a kept connection when there is one). */
void forward_connect(struct transfer *t);

/* push_policy.c */
/* Whether the request is part of a push: git-receive-pack's advertisement or the push itself. */
bool proxy_is_push(h2o_req_t *req, const char *rest, size_t rlen);
/* A repository-scoped service (git): the path names one repository, which must be on the
 * operator's list, and a token naming a repository (a run's) opens that one only. A run's token
 * naming none opens none. Answers and returns false when refused. */
bool proxy_repo_granted(struct proxy *p, h2o_req_t *req, const struct provider *prov,
                        const struct proxy_claims *claims, const char *rest, size_t rlen,
                        bool own_credential, bool push, char repo_out[PROXY_REPO_MAX]);
/* Pushes (git-receive-pack): a token pushes only when it names a branch, and then exactly one
 * ref, that branch, created or moved forward: no other branch, no tag, no deletion, no rewrite.
 * The request body is the whole push (commands, then the pack), so it is checked before any of
 * it goes upstream. Answers and returns false when refused. Whether a branch moves forward costs
 * what the pack makes it cost, so that check is left for a worker thread: *wait is then set. */
bool proxy_push_granted(struct proxy *p, h2o_req_t *req, const struct proxy_claims *claims,
                        const char *repo, const char *rest, size_t rlen, struct push_wait **wait);
/* Hand the push of t to a check thread; answers when it cannot. */
void proxy_push_check_begin(struct transfer *t, struct push_wait *w);

/* rest_policy.c */
/* A GraphQL request to a REST-scoped service (path: below the service): 0 when it is none;
 * 1 when it is a POST of one of the provider's reviewed documents whose $owner/$repo is the
 * token's repository (filled into repo; the request then goes to the API's GraphQL path, into
 * *path and *len); -1 when refused (answered, with the REST way to the same). */
int proxy_rest_graphql(h2o_req_t *req, const struct provider *prov,
                       const struct proxy_claims *claims, const char **path, size_t *len,
                       char repo[PROXY_REPO_MAX]);
/* A REST-scoped service (prov->rest_scoped): the path (*rest, *rlen; an /api/v3 before it
 * dropped, as they are set on return) reads a listed part of the token's own repository (or
 * graphql_repo names it, for a GraphQL document proxy_rest_graphql let through), which the
 * operator's list holds unless own_credential, within the token's pace. Answers and returns
 * false when refused. */
bool proxy_rest_granted(struct proxy *p, h2o_req_t *req, const struct provider *prov,
                        const struct proxy_claims *claims, const char **rest, size_t *rlen,
                        const char *graphql_repo, bool own_credential);

#pragma once
/* The LLM and git proxy: /proxy/<service>/<path> forwarded to the service's upstream with the
 * real key swapped in for the agent's proxy token. Requests go upstream through the proxy's own
 * HTTP/1.1 client (upstream.h) on the server's event loop, over a pool of kept connections per
 * service. Main loop thread only. */

#include <h2o.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "proxy/token.h"

struct proxy;
struct store;

/* Load the provider definitions (the embedded proxy/NAME.json files) with their keys and upstream
 * overrides from cfg, and a connection pool for each upstream. key signs and verifies proxy
 * tokens. -EINVAL when an upstream is not an http or https URL. */
int proxy_new(const struct config *cfg, struct store *st, const void *key, size_t keylen,
              struct proxy **ret, struct err *err);
void proxy_free(struct proxy *p);

/* Serve /proxy/ through p on http's main listener and on the sandboxes' listeners, and let http's
 * gate accept a head that carries a valid proxy token (proxy_head_authorized). p is borrowed for
 * http's life. Before http_server_run, loop thread. */
struct http_server;
void proxy_register(struct http_server *http, struct proxy *p);

/* Handle one request under /proxy/. listener_sandbox is the sandbox whose in-namespace listener
 * the request came through, or "" for the main listener. Always answers (0). */
int proxy_handle(struct proxy *p, h2o_req_t *req, const char *listener_sandbox);
/* Handle a request whose whole path is below the REST view of a provider file with
 * "rest_paths" (GitHub's API: /repos/..., /api/v3/repos/..., /graphql), as tools address the API
 * itself (gh over the sandbox's socket, SANDBOX_SERVER_SOCKET). Always answers (0). */
int proxy_handle_rest(struct proxy *p, h2o_req_t *req, const char *listener_sandbox);

/* What the run running in a sandbox is granted, as its own token would grant it: a warm agent's
 * token (proxy_grant.warm) stands for that run. */
struct proxy_run_grant {
    char user[64]; /* the run's owner */
    char run[64];
    char jti[64]; /* the run's own token's, whose row its usage is added to */
    char services[PROXY_SERVICES_MAX * 32]; /* comma-separated */
    char repo[200];                         /* "owner/name" its git requests may name, or "" */
    char branch[256];                       /* the one branch of repo it may push to, or "" */
};
/* The grant of the run running in sandbox_id for user_id (NULL: whichever user's) into *out: true
 * when there is one. The proxy asks it for every request under a warm token or a pooled agent's
 * key. */
typedef bool (*proxy_run_lookup_fn)(void *ctx, const char *sandbox_id, const char *user_id,
                                    struct proxy_run_grant *out);
void proxy_set_run_lookup(struct proxy *p, proxy_run_lookup_fn fn, void *ctx);

/* Who a coding agent's request on sandbox_id's listener is (mcp_agent_auth_fn, ctx the proxy): its
 * token's user and the run it acts for (a warm agent's or a pooled agent's key: the run working
 * in the sandbox now; none working: both ""). A request without a valid token of this sandbox is
 * answered 401 or 403 here (false). */
bool proxy_agent_auth(void *ctx, h2o_req_t *req, const char *sandbox_id, char user_id[64],
                      char run_id[64]);

/* Whether a request head carries a valid, unrevoked proxy token for listener_sandbox ("" for the
 * main listener) in any of the forms clients send it (x-api-key, Authorization: Bearer, the
 * Basic password); the values are the raw header values or empty. For deciding, before a body is
 * read, whether the client is authenticated; proxy_handle still checks the request in full. */
bool proxy_head_authorized(struct proxy *p, h2o_iovec_t x_api_key, h2o_iovec_t authorization,
                           const char *listener_sandbox);

/* What a proxy token grants: user's requests to services (comma-separated); run, session and
 * sandbox may be NULL (sandbox NULL: the main listener only); repo ("owner/name") limits its git
 * requests to that repository, and branch, when set, lets it push to that one branch of repo,
 * fast-forward only (no other ref, no tag, no deletion); without branch it pushes nothing. */
struct proxy_grant {
    const char *user_id, *services, *run_id, *session_id, *sandbox_id, *repo, *branch;
    int64_t ttl_seconds;
    /* For the sandbox's warm agent rather than one run (run_id NULL, sandbox_id set): honored
     * only while a run of that sandbox is running, and then granting what that run's own token
     * would (proxy_run_lookup_fn), counted as that run's. */
    bool warm;
};
/* Mint a token for g, recorded for revocation. Returns 0 and a malloc'd token and its id. */
int proxy_mint(struct store *st, const void *key, size_t keylen, const struct proxy_grant *g,
               char **token, char jti[64], struct err *err);

/* --- GitHub repositories (repos.c; pure functions) --- */

#define PROXY_REPO_MAX 200 /* "owner/name" */

/* Check GITHUB_REPOS: comma-separated entries "owner/name", "owner/" and a star (every
 * repository of owner), or a star alone (every repository); NULL or "" lists none. Returns 0,
 * or -EINVAL naming the entry. */
int proxy_repos_check(const char *spec, struct err *err);
/* Whether repo ("owner/name") is on the list spec; case-insensitive, as GitHub names are. */
bool proxy_repo_allowed(const char *spec, const char *repo);
/* The repository a git path "/owner/name[.git]/..." names, as lowercase "owner/name" without
 * ".git", into out. Returns how many bytes of path that took, 0 when it names none. */
size_t proxy_repo_of_path(const char *path, size_t len, char out[PROXY_REPO_MAX]);
/* The repository a URL names when it is base + "/owner/name[.git][/]", into out. */
bool proxy_repo_of_url(const char *base, const char *url, char out[PROXY_REPO_MAX]);

/* Users' own credentials (store_credential_open) are opened with key (SEAL_KEY_BYTES, copied):
 * a user's request to a service with user_credential in its file carries theirs, not the
 * operator's. Without a key, only the operator's keys are used. */
void proxy_set_seal_key(struct proxy *p, const unsigned char *key);
/* The upstream and REST API base URLs of service (no trailing slash), NULL when unknown. */
const char *proxy_service_upstream(const struct proxy *p, const char *service);
const char *proxy_service_api(const struct proxy *p, const char *service);

/* Names of the known providers, comma-separated (for messages and the CLI). */
const char *proxy_provider_names(void);

/* --- LLM providers, as agents are pointed at them (providers.c) --- */

#define PROXY_PROVIDERS_MAX 32 /* provider files the server loads */
#define PROXY_NAME_MAX 31      /* bytes of a provider's name: [a-z0-9][a-z0-9_-]* */

/* The API an LLM provider speaks, as its file's agent.format names it: "anthropic" (the Messages
 * API), "openai" (OpenAI's own, the Responses API included), "openai-compatible" (chat
 * completions, as OpenRouter and most gateways serve it). */
enum proxy_wire { PROXY_WIRE_ANTHROPIC, PROXY_WIRE_OPENAI, PROXY_WIRE_OPENAI_COMPATIBLE };

/* A provider file with an "agent" object: one a run's model may name ("provider/model"). */
struct proxy_llm {
    const char *name;      /* the service, and the provider part of "provider/model" */
    const char *key_env;   /* the setting that holds its key, e.g. "ANTHROPIC_API_KEY" */
    bool has_key;          /* that setting is set */
    enum proxy_wire wire;  /* what the agent's client library must speak */
    const char *base_path; /* added to /proxy/<name> for that library: "/v1", or "" */
};

/* The LLM providers in name order, *n of them; owned by p, valid until proxy_free. */
const struct proxy_llm *proxy_llms(const struct proxy *p, size_t *n);

/* Whether a run may use model ("provider/model"): its provider is one of llms (n of them) and has
 * its key. Returns 0, or -EINVAL with err naming the fix: the form to write, the setting that
 * holds the provider's key, or the providers there are (with a key, and without). Pure. */
int proxy_llm_check(const struct proxy_llm *llms, size_t n, const char *model, struct err *err);

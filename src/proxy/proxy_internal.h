#pragma once

#include <stdbool.h>

#include "proxy/proxy.h"

enum token_from { TOKEN_X_API_KEY = 1, TOKEN_BEARER = 2, TOKEN_BASIC_PASSWORD = 4 };
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

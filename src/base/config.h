#pragma once
/* Configuration: built-in defaults, overridden by a .dev.vars file (KEY=VALUE, as wrangler
 * reads it), overridden by the process environment, overridden by command-line flags. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct config_var {
    char *key;
    char *value;
};

struct config {
    /* every KEY=VALUE seen, file first then environment (later entries win in config_get) */
    struct config_var *vars;
    size_t nvars;

    char *listen;          /* host:port */
    char *data_dir;        /* state directory */
    char *env_file;        /* path of the .dev.vars file that was read, or NULL */
    char *public_url;      /* base URL clients use, no trailing slash */
    bool public_url_set;   /* configured, rather than derived from the listen address */
    char *allowed_origins; /* comma-separated Origin allow-list ("*" allows any) */
    size_t max_request_bytes;
    /* The most bytes a tool result should take as serialized JSON (the MCP reply budget). */
    size_t reply_max_bytes;
    /* How long the requestState of an input-required result is good for (seconds). */
    int64_t mcp_request_state_ttl_s;
    /* The most bytes of content one container_file_write takes: what a request of
     * max_request_bytes carries as base64 (config_file_write_max), or less when configured. */
    size_t file_max_bytes;
    /* What clients may hold before they are authenticated, and connections at once: on the main
     * listener, and on each sandbox's proxy listener. */
    size_t max_connections;            /* main listener */
    size_t preauth_request_bytes;      /* head and body of a request before its token is checked */
    size_t preauth_total_bytes;        /* all unauthenticated requests of the main listener */
    size_t sandbox_connections;        /* per sandbox listener */
    size_t sandbox_bytes;              /* requests buffered for one sandbox, authenticated or not */
    size_t sandbox_egress_connections; /* per sandbox, through its egress proxy */
    uint64_t sandbox_egress_rate;      /* bytes a second each way per sandbox, 0: no cap */
    /* Unauthenticated connections of the main listener per IPv4 address or IPv6 /64; 0: no cap;
     * SIZE_MAX: not set (128, or no cap on a loopback listener, which a proxy is in front of). */
    size_t preauth_address_connections;
    /* How long a connection of the main listener has from accept to a whole first request head
     * (its TLS handshake included). */
    uint64_t preauth_head_ms;
    int name_lookups_reserved;      /* of the resolver's threads, for the server's own fetches */
    int64_t name_lookup_timeout_ms; /* a name lookup's caller waits this long at most */
    const char *metrics_token; /* Bearer token /metrics asks for; NULL: /metrics is not served */
    /* addresses and CIDRs of proxies whose X-Forwarded-For names the client (parsed and checked
     * by the http server, src/http/peer.h); NULL: the TCP peer is the client */
    const char *trusted_proxies;
    /* PEM files of the main listener's certificate (chain) and key, read at start and on SIGHUP;
     * both NULL: plain HTTP */
    char *tls_cert;
    char *tls_key;
    int shutdown_grace_ms;
    char *first_user;
    bool conformance_fixtures;
};

/* Parse dotenv text into vars (appending). Returns 0, or -EINVAL with the line number. */
int config_parse_dotenv(struct config *cfg, const char *text, size_t len, struct err *err);

/* Read a dotenv file; a missing file is an error only when required. */
int config_load_file(struct config *cfg, const char *path, bool required, struct err *err);

/* Add the environment variables whose names are in the known list (so unrelated environment does
 * not leak into the config table). */
void config_load_environ(struct config *cfg);

/* Look up a key: last definition wins. Returns NULL when unset or empty. */
const char *config_get(const struct config *cfg, const char *key);
void config_set(struct config *cfg, const char *key, const char *value);

/* Fill the typed fields from the table and defaults; validates numbers. */
int config_finish(struct config *cfg, struct err *err);

void config_release(struct config *cfg);

/* What a request of max_request_bytes carries of a file's content sent as base64 (3 bytes in 4),
 * with CONFIG_WRITE_ENVELOPE bytes (or a quarter of the request, if less) left for the JSON-RPC
 * message around it: the default and the largest FILE_MAX_BYTES. */
#define CONFIG_WRITE_ENVELOPE 16384
size_t config_file_write_max(size_t max_request_bytes);

/* Read an unsigned number: def when unset, -EINVAL (err set) when not a number in min..max. */
int config_get_u64(const struct config *cfg, const char *key, uint64_t def, uint64_t min,
                   uint64_t max, uint64_t *out, struct err *err);

/* Names of every key the service reads (for docs and the environment filter). */
extern const char *const config_known_keys[];

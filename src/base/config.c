#include "base/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/util.h"

const char *const config_known_keys[] = {
    "LISTEN",
    "DATA_DIR",
    "DATABASE_URL",
    "NODE_ID",
    "NODE_URL",
    "CLUSTER_SECRET",
    "CLUSTER_NONCE_CACHE",
    "NODE_HEARTBEAT_SECONDS",
    "NODE_LOST_SECONDS",
    "PUBLIC_URL",
    "ALLOWED_ORIGINS",
    "TRUSTED_PROXIES",
    "MAX_REQUEST_BYTES",
    "MAX_CONNECTIONS",
    "PREAUTH_REQUEST_BYTES",
    "PREAUTH_TOTAL_BYTES",
    "PREAUTH_ADDRESS_CONNECTIONS",
    "PREAUTH_HEAD_SECONDS",
    "SANDBOX_CONNECTIONS",
    "SANDBOX_REQUEST_BYTES",
    "METRICS_TOKEN",
    "TLS_CERT",
    "TLS_KEY",
    "SHUTDOWN_GRACE_SECONDS",
    "FIRST_USER",
    "LOG_LEVEL",
    "PROXY_JWT_SECRET",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "GITHUB_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENROUTER_BASE_URL",
    "GITHUB_BASE_URL",
    "GITHUB_REPOS",
    "GITHUB_API_URL",
    "GITHUB_WEBHOOK_SECRET",
    "GITHUB_WEBHOOK_SECRETS",
    "GITHUB_MENTION",
    "GITHUB_WEBHOOK_RATE",
    "GITHUB_DELIVERIES_MAX",
    "GITHUB_STEERERS",
    "CI_FIX_ATTEMPTS",
    "GITHUB_POLL_SECONDS",
    "SANDBOX_TEMPLATE",
    "SANDBOX_TEMPLATE_DIR",
    "SANDBOX_TEMPLATE_MIRROR",
    "SANDBOX_TEMPLATE_RETRY_SECONDS",
    "SANDBOX_MEMORY_MB",
    "SANDBOX_PIDS",
    "SANDBOX_CPUS",
    "SANDBOX_DISK_MB",
    "SANDBOX_TMP_MB",
    "SANDBOX_MAX_RUNNING",
    "SANDBOX_MAX_RUNNING_PER_USER",
    "SANDBOX_POOL",
    "SANDBOX_STANDBY",
    "SANDBOX_DISK_PER_USER_MB",
    "SANDBOX_DISK_TOTAL_MB",
    "SANDBOX_DISK_ADMIT",
    "SANDBOX_DISK_RESERVE_MB",
    "SANDBOX_IDLE_SECONDS",
    "SANDBOX_UID_BASE",
    "SANDBOX_UID_RANGES",
    "SANDBOX_CGROUP_ROOT",
    "SANDBOX_ALLOW_UNLIMITED",
    "SANDBOX_NETWORK",
    "SANDBOX_NETWORK_ALLOW",
    "SANDBOX_NETWORK_DEFAULTS",
    "SANDBOX_NETWORK_ADDRS",
    "SANDBOX_EGRESS_CONNECTIONS",
    "SANDBOX_EGRESS_RATE",
    "NAME_LOOKUPS_RESERVED",
    "NAME_LOOKUP_TIMEOUT_SECONDS",
    "EXEC_TIMEOUT_SECONDS",
    "EXEC_TIMEOUT_MAX_SECONDS",
    "EXEC_OUTPUT_BYTES",
    "FILE_MAX_BYTES",
    "REPLY_MAX_BYTES",
    "CONFORMANCE_TASKS_PER_USER",
    "CONFORMANCE_TASKS_MAX",
    "CONFORMANCE_TASK_TTL_MS",
    "MCP_REQUEST_STATE_TTL",
    "PROXY_MAX_REQUEST_BYTES",
    "PROXY_STALL_SECONDS",
    "PROXY_PUSH_CHECKS",
    "PROXY_PUSH_CHECKS_WAITING",
    "PROXY_PUSH_BACKOFF_SECONDS",
    "PROXY_PUSH_BACKOFF_MAX_SECONDS",
    "PROXY_PROVIDERS_DIR",
    "OPENCODE_BIN",
    "CLAUDE_CODE_BIN",
    "CODEX_BIN",
    "RUN_DEFAULT_MODEL",
    "RUN_DEFAULT_AGENT",
    "RUN_TIMEOUT_MINUTES",
    "RUN_TIMEOUT_MAX_MINUTES",
    "RUNS_MAX_RUNNING",
    "RUNS_MAX_RUNNING_PER_USER",
    "RUNS_MAX_QUEUED_PER_USER",
    "RUNS_RETENTION_DAYS",
    "RUNS_ALLOW_LOCAL_REPOS",
    "FETCH_ALLOW",
    "RUNS_EVENTS_MAX_BYTES",
    "RUNS_AGENT_LOG_MAX_BYTES",
    "RUNS_AGENT_WARM_SECONDS",
    "RUNS_AGENT_POOL",
    "RUNS_ENV_POOL",
    "RUN_SETUP_TIMEOUT_SECONDS",
    "RUN_QUESTION_TIMEOUT_MINUTES",
    "GITHUB_RETRIES",
    "GITHUB_RETRY_BASE_MS",
    "PREVIEW_TTL_MINUTES",
    "PREVIEW_CONNECTIONS",
    "PREVIEW_CONNECTIONS_PER_USER",
    "ENV_CACHE_MB",
    "ENV_CACHE_USER_MB",
    "ENV_CACHE_MAX_AGE_HOURS",
    "ENV_CACHE_SHARE_PUBLIC",
    "OAUTH_ACCESS_TTL",
    "OAUTH_REFRESH_TTL",
    "OAUTH_REFRESH_REUSE_SECONDS",
    "OAUTH_REFRESH_REUSE_MAX",
    "OAUTH_CIMD_ALLOW_LOOPBACK",
    "OAUTH_REGISTER_PER_ADDRESS",
    "OAUTH_CLIENTS_MAX",
    "SIGNIN_INFLIGHT_PER_ADDRESS",
    "SIGNIN_INFLIGHT_PER_NETWORK",
    "SIGNIN_PASSWORD_MEMORY_MB",
    "SIGNIN_RESERVED_CHECKS",
    "SIGNIN_TRUST_DAYS",
    "OAUTH_CIMD_FETCHES",
    "OAUTH_CIMD_FETCHES_PER_ADDRESS",
    "OAUTH_CIMD_FETCHES_PER_HOST",
    "OAUTH_CIMD_TIMEOUT_SECONDS",
    "OAUTH_CIMD_FAILURE_SECONDS",
    "NOTIFY_RETRY_SECONDS",
    "NOTIFY_TEST_ALLOW_LOOPBACK",
    "NOTIFY_VIEW_TOKEN",
    NULL,
};

/* A dotenv file is operator-written and small; refuse anything absurd. */
#define DOTENV_MAX_BYTES (1024 * 1024)

void config_set(struct config *cfg, const char *key, const char *value)
{
    cfg->vars = xrealloc(cfg->vars, (cfg->nvars + 1) * sizeof(*cfg->vars));
    cfg->vars[cfg->nvars].key = xstrdup(key);
    cfg->vars[cfg->nvars].value = xstrdup(value);
    cfg->nvars++;
}

const char *config_get(const struct config *cfg, const char *key)
{
    for (size_t i = cfg->nvars; i-- > 0;)
        if (strcmp(cfg->vars[i].key, key) == 0)
            return cfg->vars[i].value[0] ? cfg->vars[i].value : NULL;
    return NULL;
}

static bool is_key_char(char c, bool first)
{
    return c == '_' || isalpha((unsigned char)c) || (!first && isdigit((unsigned char)c));
}

/* Parse one value starting at p (line end at e) into out; handles '...', "..." (with \n \t \\ \"
 * escapes) and bare values (trimmed, " #" starts a comment). */
static int parse_value(const char *p, const char *e, struct buf *out)
{
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    if (p < e && (*p == '"' || *p == '\'')) {
        char q = *p++;
        for (; p < e && *p != q; p++) {
            if (q == '"' && *p == '\\' && p + 1 < e) {
                p++;
                char c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p == 'r' ? '\r' : *p;
                buf_append(out, &c, 1);
            } else {
                buf_append(out, p, 1);
            }
        }
        if (p >= e)
            return -1; /* unterminated quote */
        p++;
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        if (p < e && *p != '#')
            return -1; /* junk after the closing quote */
        return 0;
    }
    const char *end = e;
    for (const char *c = p; c < e; c++)
        if (*c == '#' && (c == p || c[-1] == ' ' || c[-1] == '\t')) {
            end = c;
            break;
        }
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    buf_append(out, p, (size_t)(end - p));
    return 0;
}

int config_parse_dotenv(struct config *cfg, const char *text, size_t len, struct err *err)
{
    const char *p = text, *end = text + len;
    for (int lineno = 1; p < end; lineno++) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        const char *next = e ? e + 1 : end;
        if (!e)
            e = end;
        if (e > p && e[-1] == '\r')
            e--;
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        if (p == e || *p == '#') {
            p = next;
            continue;
        }
        if ((size_t)(e - p) > 7 && memcmp(p, "export ", 7) == 0)
            p += 7;
        const char *k = p;
        if (!is_key_char(*p, true))
            return err_set(err, -EINVAL, "line %d: expected KEY=VALUE", lineno);
        while (p < e && is_key_char(*p, false))
            p++;
        size_t klen = (size_t)(p - k);
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        if (p == e || *p != '=')
            return err_set(err, -EINVAL, "line %d: expected '=' after '%.*s'", lineno, (int)klen,
                           k);
        p++;
        struct buf v;
        buf_init(&v, 0);
        if (parse_value(p, e, &v) < 0) {
            buf_release(&v);
            return err_set(err, -EINVAL,
                           "line %d: unterminated or malformed quoted value for '%.*s'", lineno,
                           (int)klen, k);
        }
        _cleanup_free_ char *key = xstrndup(k, klen);
        config_set(cfg, key, v.data ? v.data : "");
        buf_release(&v);
        p = next;
    }
    return 0;
}

int config_load_file(struct config *cfg, const char *path, bool required, struct err *err)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f) {
        if (errno == ENOENT && !required)
            return 0;
        return err_set(err, -errno, "cannot open '%s': %s", path, strerror(errno));
    }
    struct buf b;
    buf_init(&b, DOTENV_MAX_BYTES);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        buf_append(&b, chunk, n);
    if (b.overflowed) {
        buf_release(&b);
        return err_set(err, -EFBIG, "'%s' is larger than %d bytes", path, DOTENV_MAX_BYTES);
    }
    int r = config_parse_dotenv(cfg, b.data ? b.data : "", b.len, err);
    buf_release(&b);
    if (r < 0)
        return err_wrap(err, "'%s'", path);
    free(cfg->env_file);
    cfg->env_file = xstrdup(path);
    return 0;
}

void config_load_environ(struct config *cfg)
{
    for (const char *const *k = config_known_keys; *k; k++) {
        const char *v = getenv(*k);
        if (v)
            config_set(cfg, *k, v);
    }
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -1;
    *out = (size_t)v;
    return 0;
}

static char *dup_or(const struct config *cfg, const char *key, const char *dflt)
{
    const char *v = config_get(cfg, key);
    return v ? xstrdup(v) : dflt ? xstrdup(dflt) : NULL;
}

int config_finish(struct config *cfg, struct err *err)
{
    const char *v;
    if (!cfg->listen)
        cfg->listen = dup_or(cfg, "LISTEN", "127.0.0.1:8788");
    if (!cfg->data_dir)
        cfg->data_dir = dup_or(cfg, "DATA_DIR", "./var");
    cfg->allowed_origins = dup_or(cfg, "ALLOWED_ORIGINS", "");
    cfg->first_user = dup_or(cfg, "FIRST_USER", "admin");
    cfg->max_request_bytes = 4 * 1024 * 1024;
    if ((v = config_get(cfg, "MAX_REQUEST_BYTES")) &&
        (parse_size(v, &cfg->max_request_bytes) < 0 || cfg->max_request_bytes < 1024 ||
         cfg->max_request_bytes > 64 * 1024 * 1024))
        return err_set(err, -EINVAL,
                       "MAX_REQUEST_BYTES '%s' is not a size between 1024 and 67108864", v);
    uint64_t u;
    int r;
    if ((r = config_get_u64(cfg, "MAX_CONNECTIONS", 4096, 8, 1 << 24, &u, err)) < 0)
        return r;
    cfg->max_connections = u;
    if ((r = config_get_u64(cfg, "PREAUTH_REQUEST_BYTES", 64 * 1024, 4096, cfg->max_request_bytes,
                            &u, err)) < 0)
        return r;
    cfg->preauth_request_bytes = u;
    if ((r = config_get_u64(cfg, "PREAUTH_TOTAL_BYTES", 16 << 20, cfg->preauth_request_bytes,
                            (uint64_t)1 << 40, &u, err)) < 0)
        return r;
    cfg->preauth_total_bytes = u;
    /* 0: no cap; unset, the listener decides (http_server_new) */
    if ((r = config_get_u64(cfg, "PREAUTH_ADDRESS_CONNECTIONS", SIZE_MAX, 0, 1 << 24, &u, err)) < 0)
        return r;
    cfg->preauth_address_connections = u;
    if ((r = config_get_u64(cfg, "PREAUTH_HEAD_SECONDS", 3, 1, 600, &u, err)) < 0)
        return r;
    cfg->preauth_head_ms = u * 1000;
    if ((r = config_get_u64(cfg, "SANDBOX_CONNECTIONS", 32, 1, 1 << 20, &u, err)) < 0)
        return r;
    cfg->sandbox_connections = u;
    /* at least one request of the largest size fits */
    uint64_t one = cfg->max_request_bytes + cfg->preauth_request_bytes;
    if ((r = config_get_u64(cfg, "SANDBOX_REQUEST_BYTES", one > (16 << 20) ? one : 16 << 20, one,
                            (uint64_t)1 << 40, &u, err)) < 0)
        return r;
    cfg->sandbox_bytes = u;
    if ((r = config_get_u64(cfg, "REPLY_MAX_BYTES", 100000, 16384, 16 << 20, &u, err)) < 0)
        return r;
    cfg->reply_max_bytes = u;
    if ((r = config_get_u64(cfg, "MCP_REQUEST_STATE_TTL", 3600, 1, 86400, &u, err)) < 0)
        return r;
    cfg->mcp_request_state_ttl_s = (int64_t)u;
    /* The content of a write arrives in one request; promising more than that carries would
     * only turn writes into 413s. */
    size_t file_max = config_file_write_max(cfg->max_request_bytes);
    if ((r = config_get_u64(cfg, "FILE_MAX_BYTES", file_max, 1024, 64 << 20, &u, err)) < 0)
        return r;
    if (u > file_max)
        return err_set(err, -EINVAL,
                       "FILE_MAX_BYTES %llu is more than one request of MAX_REQUEST_BYTES %zu can "
                       "carry (%zu bytes, sent as base64); lower FILE_MAX_BYTES to %zu or less, or "
                       "raise MAX_REQUEST_BYTES to at least %llu",
                       (unsigned long long)u, cfg->max_request_bytes, file_max, file_max,
                       (unsigned long long)((u + 2) / 3 * 4 + CONFIG_WRITE_ENVELOPE));
    cfg->file_max_bytes = u;
    if ((r = config_get_u64(cfg, "SANDBOX_EGRESS_CONNECTIONS", 64, 1, 1 << 16, &u, err)) < 0)
        return r;
    cfg->sandbox_egress_connections = u;
    /* a lower cap than 64 KiB a second would leave a connection waiting seconds between reads */
    if ((r = config_get_u64(cfg, "SANDBOX_EGRESS_RATE", 100 << 20, 0, (uint64_t)1 << 40, &u, err)) <
        0)
        return r;
    if (u > 0 && u < 65536)
        return err_set(err, -EINVAL,
                       "SANDBOX_EGRESS_RATE '%llu' is below 65536 bytes a second; 0 turns the cap "
                       "off",
                       (unsigned long long)u);
    cfg->sandbox_egress_rate = u;
    /* users together always leave room for one user's whole share */
    if ((r = config_get_u64(cfg, "NAME_LOOKUPS_RESERVED", 8, 0, 24, &u, err)) < 0)
        return r;
    cfg->name_lookups_reserved = (int)u;
    if ((r = config_get_u64(cfg, "NAME_LOOKUP_TIMEOUT_SECONDS", 10, 1, 120, &u, err)) < 0)
        return r;
    cfg->name_lookup_timeout_ms = (int64_t)u * 1000;
    cfg->metrics_token = config_get(cfg, "METRICS_TOKEN");
    cfg->trusted_proxies = config_get(cfg, "TRUSTED_PROXIES");
    if (!cfg->tls_cert)
        cfg->tls_cert = dup_or(cfg, "TLS_CERT", NULL);
    if (!cfg->tls_key)
        cfg->tls_key = dup_or(cfg, "TLS_KEY", NULL);
    if (!cfg->tls_cert != !cfg->tls_key)
        return err_set(err, -EINVAL,
                       "TLS_CERT and TLS_KEY (--tls-cert, --tls-key) must be set together: %s is "
                       "missing",
                       cfg->tls_cert ? "TLS_KEY" : "TLS_CERT");
    cfg->shutdown_grace_ms = 10000;
    size_t secs;
    if ((v = config_get(cfg, "SHUTDOWN_GRACE_SECONDS"))) {
        if (parse_size(v, &secs) < 0 || secs > 3600)
            return err_set(err, -EINVAL, "SHUTDOWN_GRACE_SECONDS '%s' is not a number 0..3600", v);
        cfg->shutdown_grace_ms = (int)secs * 1000;
    }
    if (!cfg->public_url && config_get(cfg, "PUBLIC_URL"))
        cfg->public_url_set = true;
    else if (cfg->public_url)
        cfg->public_url_set = true;
    if (!cfg->public_url) {
        v = config_get(cfg, "PUBLIC_URL");
        cfg->public_url =
            v ? xstrdup(v) : xasprintf("%s://%s", cfg->tls_cert ? "https" : "http", cfg->listen);
    }
    size_t n = strlen(cfg->public_url);
    while (n > 0 && cfg->public_url[n - 1] == '/')
        cfg->public_url[--n] = '\0';
    if (strncmp(cfg->public_url, "http://", 7) != 0 && strncmp(cfg->public_url, "https://", 8) != 0)
        return err_set(err, -EINVAL, "PUBLIC_URL '%s' must start with http:// or https://",
                       cfg->public_url);
    return 0;
}

void config_release(struct config *cfg)
{
    for (size_t i = 0; i < cfg->nvars; i++) {
        free(cfg->vars[i].key);
        free(cfg->vars[i].value);
    }
    free(cfg->vars);
    free(cfg->listen);
    free(cfg->data_dir);
    free(cfg->env_file);
    free(cfg->public_url);
    free(cfg->allowed_origins);
    free(cfg->first_user);
    free(cfg->tls_cert);
    free(cfg->tls_key);
    memset(cfg, 0, sizeof(*cfg));
}

size_t config_file_write_max(size_t max_request_bytes)
{
    size_t envelope = CONFIG_WRITE_ENVELOPE < max_request_bytes / 4 ? CONFIG_WRITE_ENVELOPE
                                                                    : max_request_bytes / 4;
    return (max_request_bytes - envelope) / 4 * 3;
}

int config_get_u64(const struct config *cfg, const char *key, uint64_t def, uint64_t min,
                   uint64_t max, uint64_t *out, struct err *err)
{
    const char *v = config_get(cfg, key);
    size_t n;
    if (!v) {
        *out = def;
        return 0;
    }
    if (parse_size(v, &n) < 0 || n < min || n > max)
        return err_set(err, -EINVAL, "%s '%s' is not a number between %llu and %llu", key, v,
                       (unsigned long long)min, (unsigned long long)max);
    *out = n;
    return 0;
}

/* Provider definitions: one declarative JSON file per provider in proxy/, embedded in the
 * binary. The upstream can be overridden by the variable the file names (e.g.
 * ANTHROPIC_BASE_URL); the key comes from the variable it names (e.g. ANTHROPIC_API_KEY). */
#include "proxy/proxy_internal.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/embedded.h"
#include "base/ids.h"
#include "base/util.h"

static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"};

unsigned method_bit(const char *m, size_t len)
{
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strlen(methods[i]) == len && memcmp(methods[i], m, len) == 0)
            return 1u << i;
    return 0;
}

static char **string_list(const json_t *arr)
{
    size_t n = json_array_size(arr), i;
    char **out = xcalloc(n + 1, sizeof(char *));
    const json_t *v;
    json_array_foreach(arr, i, v) out[i] =
        xstrdup(json_string_value(v) ? json_string_value(v) : "");
    return out;
}

static void free_list(char **l)
{
    for (size_t i = 0; l && l[i]; i++)
        free(l[i]);
    free(l);
}

bool provider_path_allowed(const struct provider *p, const char *path, size_t len)
{
    if (!p->paths[0] && !p->suffixes[0])
        return true;
    for (char **a = p->paths; *a; a++) {
        size_t n = strlen(*a);
        if (len >= n && memcmp(path, *a, n) == 0 && (len == n || path[n] == '/'))
            return true;
    }
    for (char **a = p->suffixes; *a; a++) {
        size_t n = strlen(*a);
        if (len > n && memcmp(path + len - n, *a, n) == 0)
            return true;
    }
    return false;
}

/* The header value carrying the key: "{key}" replaced; "basic:USER:{key}" becomes HTTP Basic. */
char *provider_key_value(const char *format, const char *key)
{
    const char *at = strstr(format, "{key}");
    if (!at)
        return xstrdup(format);
    char *v = xasprintf("%.*s%s%s", (int)(at - format), format, key, at + 5);
    if (strncmp(v, "basic:", 6) == 0) {
        size_t n = strlen(v + 6);
        char *b64 = xmalloc(n / 3 * 4 + 8);
        base64_encode(v + 6, n, b64);
        char *basic = xasprintf("Basic %s", b64);
        free(b64);
        free(v);
        return basic;
    }
    return v;
}

/* A provider's variable: the configuration (.dev.vars, then the known environment), else the
 * environment itself, so that a provider file added later needs no code for its variables. */
static const char *setting(const struct config *cfg, const char *name)
{
    if (!name)
        return NULL;
    const char *v = config_get(cfg, name);
    if (!v)
        v = getenv(name);
    return v && *v ? v : NULL;
}

static int load_one(const struct config *cfg, const struct embedded_file *f, struct provider *p,
                    struct err *err)
{
    json_error_t jerr;
    json_t *d = json_loadb(f->data, f->size, 0, &jerr);
    if (!d)
        return err_set(err, -EINVAL, "provider '%s': line %d: %s", f->name, jerr.line, jerr.text);
    const char *name = json_string_value(json_object_get(d, "name"));
    const char *upstream = json_string_value(json_object_get(d, "upstream"));
    const char *header = json_string_value(json_object_get(d, "key_header"));
    const char *format = json_string_value(json_object_get(d, "key_format"));
    if (!name || !upstream || !header || !format) {
        json_decref(d);
        return err_set(err, -EINVAL, "provider '%s' needs name, upstream, key_header, key_format",
                       f->name);
    }
    memset(p, 0, sizeof(*p));
    p->name = xstrdup(name);
    const char *env = json_string_value(json_object_get(d, "upstream_env"));
    const char *over = setting(cfg, env);
    p->upstream = xstrdup(over ? over : upstream);
    size_t n = strlen(p->upstream);
    while (n > 0 && p->upstream[n - 1] == '/')
        p->upstream[--n] = '\0';
    /* A REST API beside the upstream (GitHub's): its own setting, else the file's when the
     * upstream is the file's, else the upstream's /api/v3 (how GitHub Enterprise lays it out). */
    const char *api = json_string_value(json_object_get(d, "api"));
    if (api) {
        const char *api_over = setting(cfg, json_string_value(json_object_get(d, "api_env")));
        p->api = api_over ? xstrdup(api_over)
                 : over   ? xasprintf("%s/api/v3", p->upstream)
                          : xstrdup(api);
        for (size_t k = strlen(p->api); k > 0 && p->api[k - 1] == '/';)
            p->api[--k] = '\0';
    }
    const char *key_env = json_string_value(json_object_get(d, "key_env"));
    const char *key = setting(cfg, key_env);
    p->key = key ? xstrdup(key) : NULL;
    p->key_header = xstrdup(header);
    for (char *c = p->key_header; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    p->key_format = xstrdup(format);
    p->key_value = key ? provider_key_value(format, key) : NULL;
    const char *own = json_string_value(json_object_get(d, "user_credential"));
    p->user_credential = own ? xstrdup(own) : NULL;
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(d, "token_from"), i, v)
    {
        const char *t = json_string_value(v);
        if (t && strcmp(t, "x-api-key") == 0)
            p->token_from |= TOKEN_X_API_KEY;
        else if (t && strcmp(t, "bearer") == 0)
            p->token_from |= TOKEN_BEARER;
        else if (t && strcmp(t, "basic-password") == 0)
            p->token_from |= TOKEN_BASIC_PASSWORD;
    }
    json_array_foreach(json_object_get(d, "methods"), i, v)
    {
        const char *m = json_string_value(v);
        if (m)
            p->methods |= method_bit(m, strlen(m));
    }
    p->paths = string_list(json_object_get(d, "paths"));
    p->suffixes = string_list(json_object_get(d, "path_suffixes"));
    const char *repos_env = json_string_value(json_object_get(d, "repos_env"));
    if (repos_env) {
        p->repo_scoped = true;
        const char *repos = setting(cfg, repos_env);
        if (proxy_repos_check(repos, err) < 0) {
            json_decref(d);
            return -EINVAL;
        }
        p->repos = repos ? xstrdup(repos) : NULL;
    }
    const char *usage = json_string_value(json_object_get(d, "usage"));
    p->usage = usage && strcmp(usage, "anthropic") == 0 ? USAGE_ANTHROPIC
               : usage && strcmp(usage, "openai") == 0  ? USAGE_OPENAI
                                                        : USAGE_NONE;
    json_decref(d);
    return 0;
}

int providers_load(const struct config *cfg, struct provider **out, size_t *n, struct err *err)
{
    size_t count = 0;
    while (embedded_providers[count].name)
        count++;
    struct provider *list = xcalloc(count ? count : 1, sizeof(*list));
    for (size_t i = 0; i < count; i++) {
        int r = load_one(cfg, &embedded_providers[i], &list[i], err);
        if (r < 0) {
            providers_free(list, i);
            return r;
        }
    }
    *out = list;
    *n = count;
    return 0;
}

void providers_free(struct provider *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(p[i].name);
        free(p[i].upstream);
        if (p[i].key)
            explicit_bzero(p[i].key, strlen(p[i].key));
        free(p[i].key);
        free(p[i].key_header);
        if (p[i].key_value)
            explicit_bzero(p[i].key_value, strlen(p[i].key_value));
        free(p[i].key_value);
        free_list(p[i].paths);
        free_list(p[i].suffixes);
        free(p[i].repos);
        free(p[i].key_format);
        free(p[i].api);
        free(p[i].user_credential);
    }
    free(p);
}

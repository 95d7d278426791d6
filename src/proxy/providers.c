/* Provider definitions: one declarative JSON file per provider, proxy/<name>.json embedded in
 * the binary, and more (or replacements) in the directory PROXY_PROVIDERS_DIR names. The upstream
 * can be overridden by the variable the file names (e.g. ANTHROPIC_BASE_URL); the key comes from
 * the variable it names (e.g. ANTHROPIC_API_KEY). A file with an "agent" object is an LLM
 * provider: runs may name its models, and agents are pointed at it through the proxy. */
#include "proxy/proxy_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/embedded.h"
#include "base/ids.h"
#include "base/util.h"

#define PROVIDER_FILE_MAX (64 * 1024) /* bytes of one provider file */

static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"};

unsigned method_bit(const char *m, size_t len)
{
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strlen(methods[i]) == len && memcmp(methods[i], m, len) == 0)
            return 1u << i;
    return 0;
}

h2o_iovec_t provider_methods(const struct provider *p, h2o_mem_pool_t *pool)
{
    char list[64];
    size_t k = 0;
    list[0] = '\0';
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (p->methods & (1u << i))
            k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%s", k ? ", " : "", methods[i]);
    return h2o_strdup(pool, list, k);
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

const char *provider_grant_name(const struct provider *p)
{
    return p->granted_by ? p->granted_by : p->name;
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

static bool name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > PROXY_NAME_MAX ||
        !(islower((unsigned char)name[0]) || isdigit((unsigned char)name[0])))
        return false;
    for (const char *c = name; *c; c++)
        if (!islower((unsigned char)*c) && !isdigit((unsigned char)*c) && *c != '-' && *c != '_')
            return false;
    return true;
}

/* An agent's base path: "" or "/seg[/seg...]" of URL-safe characters, no dot segments. */
static bool base_path_valid(const char *path)
{
    if (!*path)
        return true;
    if (path[0] != '/' || strlen(path) > 200 || path[strlen(path) - 1] == '/' ||
        strstr(path, "//") || strstr(path, "/."))
        return false;
    for (const char *c = path; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("/-._~", *c))
            return false;
    return true;
}

static void provider_release(struct provider *p)
{
    free(p->name);
    free(p->upstream);
    if (p->key)
        explicit_bzero(p->key, strlen(p->key));
    free(p->key);
    free(p->key_header);
    if (p->key_value)
        explicit_bzero(p->key_value, strlen(p->key_value));
    free(p->key_value);
    free_list(p->paths);
    free_list(p->suffixes);
    free(p->repos);
    free(p->key_format);
    free(p->api);
    free(p->user_credential);
    free(p->key_env);
    free(p->agent_path);
    free(p->granted_by);
    free_list(p->rest_paths);
    free_list(p->graphql_docs);
    free(p->follow);
    memset(p, 0, sizeof(*p));
}

/* The "agent" object: how an agent's client library speaks to the provider. */
static int load_agent(const char *file, const json_t *agent, struct provider *p, struct err *err)
{
    const char *format = json_string_value(json_object_get(agent, "format"));
    const json_t *bp = json_object_get(agent, "base_path");
    const char *base = bp ? json_string_value(bp) : "";
    if (!json_is_object(agent))
        return err_set(err, -EINVAL, "provider '%s': \"agent\" is not an object", file);
    if (format && strcmp(format, "anthropic") == 0)
        p->wire = PROXY_WIRE_ANTHROPIC;
    else if (format && strcmp(format, "openai") == 0)
        p->wire = PROXY_WIRE_OPENAI;
    else if (format && strcmp(format, "openai-compatible") == 0)
        p->wire = PROXY_WIRE_OPENAI_COMPATIBLE;
    else
        return err_set(err, -EINVAL,
                       "provider '%s': agent.format is one of anthropic, openai, "
                       "openai-compatible",
                       file);
    if (!base || !base_path_valid(base))
        return err_set(err, -EINVAL,
                       "provider '%s': agent.base_path is \"\" or a path like \"/v1\" (no trailing "
                       "slash, no dot segments)",
                       file);
    if (!p->key_env)
        return err_set(err, -EINVAL, "provider '%s': an agent provider needs key_env", file);
    p->llm = true;
    p->agent_path = xstrdup(base);
    return 0;
}

/* One provider file (file: its base name, "<name>.json"; data NUL-terminated) into *p, which is
 * left released on failure. */
static int load_one(const struct config *cfg, const char *file, const char *data, size_t size,
                    struct provider *p, struct err *err)
{
    memset(p, 0, sizeof(*p));
    json_error_t jerr;
    json_t *d = json_loadb(data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!d)
        return err_set(err, -EINVAL, "provider '%s': line %d: %s", file, jerr.line, jerr.text);
    if (!json_is_object(d)) {
        json_decref(d);
        return err_set(err, -EINVAL, "provider '%s' is not a JSON object", file);
    }
    const char *name = json_string_value(json_object_get(d, "name"));
    const char *upstream = json_string_value(json_object_get(d, "upstream"));
    const char *header = json_string_value(json_object_get(d, "key_header"));
    const char *format = json_string_value(json_object_get(d, "key_format"));
    if (!name || !upstream || !header || !format) {
        json_decref(d);
        return err_set(err, -EINVAL, "provider '%s' needs name, upstream, key_header, key_format",
                       file);
    }
    size_t nlen = strlen(name);
    if (!name_valid(name) || strncmp(file, name, nlen) != 0 || strcmp(file + nlen, ".json") != 0) {
        err_set(err, -EINVAL,
                "provider '%s': name '%.40s' must be the file's name without .json, of lowercase "
                "letters, digits, '-' and '_' (at most %d)",
                file, name, PROXY_NAME_MAX);
        json_decref(d);
        return -EINVAL;
    }
    p->name = xstrdup(name);
    const char *env = json_string_value(json_object_get(d, "upstream_env"));
    const char *over = setting(cfg, env);
    /* an API beside a service's own upstream (GitHub Enterprise's, at <base>/api/v3) follows
     * that upstream's setting when its own is not set */
    const char *base =
        over ? NULL : setting(cfg, json_string_value(json_object_get(d, "upstream_base_env")));
    p->upstream = over ? xstrdup(over) : base ? xasprintf("%s/api/v3", base) : xstrdup(upstream);
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
    p->key_env = key_env ? xstrdup(key_env) : NULL;
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
        else if (t && strcmp(t, "token") == 0)
            p->token_from |= TOKEN_TOKEN;
    }
    json_array_foreach(json_object_get(d, "methods"), i, v)
    {
        const char *m = json_string_value(v);
        if (m)
            p->methods |= method_bit(m, strlen(m));
    }
    p->paths = string_list(json_object_get(d, "paths"));
    p->suffixes = string_list(json_object_get(d, "path_suffixes"));
    int r = 0;
    const char *granted_by = json_string_value(json_object_get(d, "granted_by"));
    p->granted_by = granted_by ? xstrdup(granted_by) : NULL;
    const json_t *rest = json_object_get(d, "rest_paths");
    p->rest_scoped = json_is_array(rest);
    p->rest_paths = string_list(rest);
    p->graphql_docs = string_list(json_object_get(d, "graphql_documents"));
    const char *follow = json_string_value(json_object_get(d, "follow_redirects"));
    p->follow = follow && *follow ? xstrdup(follow) : NULL;
    json_int_t amax = json_integer_value(json_object_get(d, "answer_max"));
    json_int_t rate = json_integer_value(json_object_get(d, "rate_per_minute"));
    json_int_t burst = json_integer_value(json_object_get(d, "rate_burst"));
    if (amax < 0 || rate < 0 || rate > 100000 || burst < 0 || burst > 100000)
        r = err_set(err, -EINVAL,
                    "provider '%s': answer_max, rate_per_minute and rate_burst are counts "
                    "(rates at most 100000)",
                    file);
    p->answer_max = (uint64_t)amax;
    p->rate_per_minute = (unsigned)rate;
    p->rate_burst = rate && !burst ? 1 : (unsigned)burst;
    const char *repos_env = json_string_value(json_object_get(d, "repos_env"));
    if (repos_env) {
        p->repo_scoped = !p->rest_scoped;
        const char *repos = setting(cfg, repos_env);
        if (proxy_repos_check(repos, err) < 0)
            r = -EINVAL;
        else
            p->repos = repos ? xstrdup(repos) : NULL;
    }
    const char *usage = json_string_value(json_object_get(d, "usage"));
    p->usage = usage && strcmp(usage, "anthropic") == 0 ? USAGE_ANTHROPIC
               : usage && strcmp(usage, "openai") == 0  ? USAGE_OPENAI
                                                        : USAGE_NONE;
    const json_t *agent = json_object_get(d, "agent");
    if (r == 0 && agent && !json_is_null(agent))
        r = load_agent(file, agent, p, err);
    json_decref(d);
    if (r < 0)
        provider_release(p);
    return r;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct provider *)a)->name, ((const struct provider *)b)->name);
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Read dir/file, a regular file of at most PROVIDER_FILE_MAX bytes, into a NUL-terminated
 * malloc'd *out. */
static int read_provider_file(const char *dir, const char *file, char **out, size_t *len,
                              struct err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return err_set(err, -errno, "cannot read provider '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode) || st.st_size > PROVIDER_FILE_MAX)
        return err_set(err, -EINVAL, "provider '%s' is not a regular file of at most %d bytes",
                       path, PROVIDER_FILE_MAX);
    char *data = xmalloc((size_t)st.st_size + 1);
    size_t n = 0;
    while (n < (size_t)st.st_size) {
        ssize_t k = read(fd, data + n, (size_t)st.st_size - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            free(data);
            return err_set(err, -e, "cannot read provider '%s': %s", path, strerror(e));
        }
        n += (size_t)k;
    }
    data[n] = '\0';
    *out = data;
    *len = n;
    return 0;
}

/* The names of dir's *.json files (not hidden), sorted; NULL-terminated, malloc'd. */
static int list_dir(const char *dir, char ***out, struct err *err)
{
    DIR *dh = opendir(dir);
    if (!dh)
        return err_set(err, -errno, "PROXY_PROVIDERS_DIR '%s': %s", dir, strerror(errno));
    size_t n = 0;
    char **names = xcalloc(PROXY_PROVIDERS_MAX + 1, sizeof(char *));
    const struct dirent *de;
    int r = 0;
    while ((de = readdir(dh))) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        if (n == PROXY_PROVIDERS_MAX) {
            r = err_set(err, -E2BIG, "PROXY_PROVIDERS_DIR '%s' has more than %d provider files",
                        dir, PROXY_PROVIDERS_MAX);
            break;
        }
        names[n++] = xstrdup(de->d_name);
    }
    closedir(dh);
    if (r < 0) {
        free_list(names);
        return r;
    }
    qsort(names, n, sizeof(char *), by_string);
    *out = names;
    return 0;
}

int providers_load(const struct config *cfg, struct provider **out, size_t *n, struct err *err)
{
    size_t count = 0;
    struct provider *list = xcalloc(PROXY_PROVIDERS_MAX, sizeof(*list));
    int r = 0;
    for (const struct embedded_file *f = embedded_providers; f->name && r == 0; f++) {
        if (count == PROXY_PROVIDERS_MAX)
            r = err_set(err, -E2BIG, "more than %d provider files", PROXY_PROVIDERS_MAX);
        else if ((r = load_one(cfg, f->name, f->data, f->size, &list[count], err)) == 0)
            count++;
    }
    const char *dir = config_get(cfg, "PROXY_PROVIDERS_DIR");
    char **files = NULL;
    if (r == 0 && dir)
        r = list_dir(dir, &files, err);
    for (size_t i = 0; r == 0 && files && files[i]; i++) {
        char *data = NULL;
        size_t len = 0;
        struct provider p;
        if ((r = read_provider_file(dir, files[i], &data, &len, err)) < 0)
            break;
        r = load_one(cfg, files[i], data, len, &p, err);
        free(data);
        if (r < 0) {
            err_wrap(err, "PROXY_PROVIDERS_DIR '%s'", dir);
            break;
        }
        size_t k = 0;
        while (k < count && strcmp(list[k].name, p.name) != 0)
            k++;
        if (k < count) { /* replaces the embedded file of that name */
            provider_release(&list[k]);
            list[k] = p;
        } else if (count == PROXY_PROVIDERS_MAX) {
            provider_release(&p);
            r = err_set(err, -E2BIG, "more than %d provider files", PROXY_PROVIDERS_MAX);
        } else {
            list[count++] = p;
        }
    }
    free_list(files);
    if (r < 0) {
        providers_free(list, count);
        return r;
    }
    qsort(list, count, sizeof(*list), by_name);
    *out = list;
    *n = count;
    return 0;
}

void providers_free(struct provider *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        provider_release(&p[i]);
    free(p);
}

/* "providers with a key: a, b; without one: c (set C_API_KEY)", cut with "…" when long. */
static void llm_list(struct buf *b, const struct proxy_llm *llms, size_t n)
{
    size_t ready = 0;
    for (size_t i = 0; i < n; i++)
        ready += llms[i].has_key;
    if (n == 0) {
        buf_puts(b, "this server has no LLM provider (docs/PROXY.md)");
        return;
    }
    if (ready == 0)
        buf_puts(b, "no provider has a key yet; ");
    else
        buf_puts(b, "providers with a key: ");
    for (size_t i = 0, k = 0; i < n; i++)
        if (llms[i].has_key)
            buf_printf(b, "%s%s", k++ ? ", " : "", llms[i].name);
    if (ready == n)
        return;
    buf_puts(b, ready ? "; without one: " : "providers: ");
    for (size_t i = 0, k = 0; i < n; i++)
        if (!llms[i].has_key)
            buf_printf(b, "%s%s (set %s)", k++ ? ", " : "", llms[i].name, llms[i].key_env);
}

int proxy_llm_check(const struct proxy_llm *llms, size_t n, const char *model, struct err *err)
{
    const char *slash = strchr(model, '/');
    size_t plen = slash ? (size_t)(slash - model) : 0;
    const struct proxy_llm *found = NULL;
    for (size_t i = 0; slash && i < n && !found; i++)
        if (strlen(llms[i].name) == plen && memcmp(llms[i].name, model, plen) == 0)
            found = &llms[i];
    if (found && found->has_key && slash[1])
        return 0;
    struct buf list;
    buf_init(&list, 300);
    llm_list(&list, llms, n);
    if (list.overflowed) /* names and settings are ASCII: no character is split */
        memcpy(list.data + list.len - 3, "…", 3);
    const char *example = n ? llms[0].name : "anthropic";
    for (size_t i = n; i-- > 0;)
        if (llms[i].has_key)
            example = llms[i].name;
    int r;
    if (!slash || plen == 0 || !slash[1])
        r = err_set(err, -EINVAL,
                    "model '%.120s' is not of the form provider/model (e.g. %s/%.80s); %s", model,
                    example, slash ? "model-name" : model, list.data);
    else if (!found)
        r = err_set(err, -EINVAL, "model '%.120s': this server has no provider '%.*s'; %s", model,
                    (int)(plen > 40 ? 40 : plen), model, list.data);
    else
        r = err_set(err, -EINVAL,
                    "model '%.120s': provider '%s' has no key on this server: set %s in .dev.vars "
                    "or the server's environment and restart it; %s",
                    model, found->name, found->key_env, list.data);
    buf_release(&list);
    return r;
}

/* Repositories the operator's GitHub token may serve (GITHUB_REPOS), and the repository a URL or
 * a git path names. Until users bring their own credentials, the operator's token is used only
 * for repositories the operator listed: for the host-side clone of a run and in the proxy. */
#include "proxy/proxy.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

/* One segment of an owner/name: [A-Za-z0-9._-]+, not "." or "..". Returns its length, 0 if
 * invalid. */
static size_t segment(const char *s, size_t max)
{
    size_t n = 0;
    while (n < max && name_char(s[n]))
        n++;
    if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return 0;
    return n;
}

/* The next comma-separated entry of a list at *p, spaces trimmed, as [*s, *e); false at the end.
 * Advances *p past it. */
static bool next_entry(const char **p, const char **s, const char **e)
{
    if (!**p)
        return false;
    size_t len = strcspn(*p, ",");
    *s = *p;
    *e = *p + len;
    *p += len + ((*p)[len] == ',');
    while (*s < *e && **s == ' ')
        (*s)++;
    while (*e > *s && (*e)[-1] == ' ')
        (*e)--;
    return true;
}

int proxy_repos_check(const char *spec, struct err *err)
{
    if (!spec)
        return 0;
    const char *s, *e;
    for (const char *p = spec; next_entry(&p, &s, &e);) {
        if (s == e || (e - s == 1 && *s == '*'))
            continue;
        size_t o = segment(s, (size_t)(e - s));
        bool ok = o > 0 && s + o < e && s[o] == '/';
        if (ok) {
            const char *r = s + o + 1;
            ok = (e - r == 1 && *r == '*') ||
                 (r < e && segment(r, (size_t)(e - r)) == (size_t)(e - r));
        }
        if (!ok)
            return err_set(err, -EINVAL,
                           "GITHUB_REPOS entry '%.*s' is not owner/name, owner/* or *",
                           (int)(e - s > 100 ? 100 : e - s), s);
    }
    return 0;
}

bool proxy_repo_allowed(const char *spec, const char *repo)
{
    const char *slash = strchr(repo, '/');
    if (!spec || !slash)
        return false;
    size_t olen = (size_t)(slash - repo);
    const char *s, *e;
    for (const char *p = spec; next_entry(&p, &s, &e);) {
        if (e - s == 1 && *s == '*')
            return true;
        const char *es = memchr(s, '/', (size_t)(e - s));
        if (!es || (size_t)(es - s) != olen || strncasecmp(s, repo, olen) != 0)
            continue;
        const char *n = es + 1;
        if ((e - n == 1 && *n == '*') || ((size_t)(e - n) == strlen(slash + 1) &&
                                          strncasecmp(n, slash + 1, (size_t)(e - n)) == 0))
            return true;
    }
    return false;
}

size_t proxy_repo_of_path(const char *path, size_t len, char out[PROXY_REPO_MAX])
{
    out[0] = '\0';
    if (len < 4 || path[0] != '/')
        return 0;
    size_t o = segment(path + 1, len - 1);
    if (o == 0 || 1 + o >= len || path[1 + o] != '/')
        return 0;
    const char *name = path + 2 + o;
    size_t n = segment(name, len - 2 - o);
    if (n == 0)
        return 0;
    size_t used = 2 + o + n;
    if (n > 4 && strncasecmp(name + n - 4, ".git", 4) == 0)
        n -= 4;
    if (o + 1 + n >= PROXY_REPO_MAX)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < o; i++)
        out[k++] = (char)tolower((unsigned char)path[1 + i]);
    out[k++] = '/';
    for (size_t i = 0; i < n; i++)
        out[k++] = (char)tolower((unsigned char)name[i]);
    out[k] = '\0';
    return used;
}

bool proxy_repo_of_url(const char *base, const char *url, char out[PROXY_REPO_MAX])
{
    out[0] = '\0';
    size_t b = strlen(base);
    while (b > 0 && base[b - 1] == '/')
        b--;
    if (b == 0 || strncasecmp(url, base, b) != 0 || url[b] != '/')
        return false;
    const char *path = url + b;
    size_t len = strlen(path);
    size_t used = proxy_repo_of_path(path, len, out);
    /* nothing may follow the repository but a slash */
    if (used == 0 || !(used == len || (used + 1 == len && path[used] == '/'))) {
        out[0] = '\0';
        return false;
    }
    return true;
}

/* Repository references a run may name. */
#include "runs/runs_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

bool repo_branch_valid(const char *b)
{
    size_t n = strlen(b);
    if (n == 0 || n > 200 || b[0] == '-' || b[0] == '/' || b[n - 1] == '/' || b[n - 1] == '.' ||
        strstr(b, "..") || strstr(b, "//") || strstr(b, "@{"))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)b[i];
        if (c <= ' ' || c == 0x7f || strchr("~^:?*[\\", c))
            return false;
    }
    return true;
}

/* One segment of a slug, seg[0..n): a valid name, lowercased into out. */
static bool slug_part(const char *seg, size_t n, char *out)
{
    if (n == 0 || n > 100 || seg[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)seg[i];
        if (!isalnum(c) && c != '.' && c != '_' && c != '-')
            return false;
        out[i] = (char)tolower(c);
    }
    out[n] = '\0';
    return true;
}

bool runs_repo_slug(const char *repository, char *out, size_t cap)
{
    size_t end = strlen(repository);
    while (end > 0 && repository[end - 1] == '/')
        end--;
    size_t name = end;
    while (name > 0 && repository[name - 1] != '/')
        name--;
    if (name < 2)
        return false;
    size_t owner = name - 1;
    while (owner > 0 && repository[owner - 1] != '/')
        owner--;
    size_t nlen = end - name;
    if (nlen > 4 && memcmp(repository + end - 4, ".git", 4) == 0)
        nlen -= 4;
    char o[101], n[101];
    if (!slug_part(repository + owner, name - 1 - owner, o) ||
        !slug_part(repository + name, nlen, n))
        return false;
    return (size_t)snprintf(out, cap, "%s/%s", o, n) < cap;
}

/* Read from the files where git keeps them when that is the plain case (a branch of a simple name,
 * its commit in a loose ref: what clone and commit leave), which spares a later run of a session
 * two git processes before its agent starts; anything else (a packed or unborn ref, a detached
 * HEAD, a .git file, another ref storage, a name git would quote) is asked of git. */
const char repo_head_script[] =
    "h=; s=; if [ -f .git/HEAD ]; then read -r h < .git/HEAD || :; fi; "
    "b=${h#ref: refs/heads/}; "
    "case \"$b\" in \"$h\"|''|*[!A-Za-z0-9._/-]*|*..*) ;; "
    "*) if [ -f \".git/refs/heads/$b\" ]; then read -r s < \".git/refs/heads/$b\" || :; fi;; esac; "
    "case \"${#s}:$s\" in 40:*[!0-9a-f]*|64:*[!0-9a-f]*) s=;; 40:*|64:*) ;; *) s=;; esac; "
    "if [ -n \"$s\" ]; then echo \"$b\"; echo \"$s\"; else "
    "git symbolic-ref -q --short HEAD || echo HEAD; "
    "git rev-parse -q --verify 'HEAD^{commit}' || echo -; fi";

/* host[:port] of a network URL: a name, a dotted quad, or [IPv6]. */
static int parse_authority(const char *url, const char *a, size_t n, struct repo_ref *ref,
                           struct err *err)
{
    const char *host = a, *port = NULL;
    size_t hl;
    if (n > 0 && a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (!close || (close + 1 < a + n && close[1] != ':'))
            return err_set(err, -EINVAL, "repository URL '%s' has a malformed host", url);
        host = a + 1;
        hl = (size_t)(close - host);
        port = close + 1 < a + n ? close + 2 : NULL;
    } else {
        const char *colon = memchr(a, ':', n);
        hl = colon ? (size_t)(colon - a) : n;
        port = colon ? colon + 1 : NULL;
    }
    if (hl == 0 || hl >= sizeof(ref->host))
        return err_set(err, -EINVAL, "repository URL '%s' has no host", url);
    for (size_t i = 0; i < hl; i++) {
        char c = host[i];
        if (!isalnum((unsigned char)c) && c != '-' && c != '.' && c != '_' &&
            !(a[0] == '[' && c == ':'))
            return err_set(err, -EINVAL, "repository URL '%s' has a malformed host", url);
        ref->host[i] = (char)tolower((unsigned char)c);
    }
    ref->host[hl] = '\0';
    if (ref->host[0] == '-' || ref->host[0] == '.')
        return err_set(err, -EINVAL, "repository URL '%s' has a malformed host", url);
    ref->port = ref->http ? 80 : 443;
    if (port) {
        size_t pl = (size_t)(a + n - port);
        unsigned v = 0;
        for (size_t i = 0; i < pl; i++)
            v = isdigit((unsigned char)port[i]) && v < 65536 ? v * 10 + (unsigned)(port[i] - '0')
                                                             : 70000;
        if (pl == 0 || v == 0 || v > 65535)
            return err_set(err, -EINVAL, "repository URL '%s' has a malformed port", url);
        ref->port = (uint16_t)v;
    }
    return 0;
}

int repo_check(const char *url, bool allow_local, struct repo_ref *ref, struct err *err)
{
    memset(ref, 0, sizeof(*ref));
    char *name = ref->name;
    size_t n = strlen(url);
    if (n == 0 || n > 2048)
        return err_set(err, -EINVAL, "repository must be 1 to 2048 characters");
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)url[i] <= ' ' || url[i] == 0x7f)
            return err_set(err, -EINVAL,
                           "repository must not contain spaces or control characters");
    const char *path;
    bool https = strncmp(url, "https://", 8) == 0;
    if (https || strncmp(url, "http://", 7) == 0) {
        ref->http = !https;
        const char *host = url + (https ? 8 : 7);
        size_t hl = strcspn(host, "/");
        if (memchr(host, '@', hl))
            return err_set(err, -EINVAL,
                           "repository URL must not carry credentials; the server uses "
                           "GITHUB_TOKEN for the GitHub repositories its operator lists");
        if (strpbrk(url, "?#\\%"))
            return err_set(err, -EINVAL,
                           "repository URL '%s' must not have a query, a fragment, backslashes "
                           "or escapes",
                           url);
        int r = parse_authority(url, host, hl, ref, err);
        if (r < 0)
            return r;
        path = host + hl;
    } else if (strncmp(url, "file://", 7) == 0 || url[0] == '/') {
        if (!allow_local)
            return err_set(err, -EINVAL,
                           "local repositories are not allowed here (the operator can allow them "
                           "with RUNS_ALLOW_LOCAL_REPOS=1); use an https:// URL");
        ref->local = true;
        path = url[0] == '/' ? url : url + 7;
    } else {
        return err_set(err, -EINVAL,
                       "repository '%s' must be an https:// URL (ssh, git://, file:// and other "
                       "transports are not fetched)",
                       url);
    }
    /* The directory name: the last path segment without ".git", as git clone picks it. */
    size_t end = strlen(path);
    while (end > 0 && path[end - 1] == '/')
        end--;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    size_t len = end - start;
    if (len >= 4 && memcmp(path + end - 4, ".git", 4) == 0)
        len -= 4;
    size_t k = 0;
    for (size_t i = 0; i < len && k < 100; i++) {
        char c = path[start + i];
        name[k++] = isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-' ? c : '_';
    }
    name[k] = '\0';
    if (k == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || name[0] == '.')
        snprintf(name, 128, "repo");
    return 0;
}

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

int repo_check(const char *url, bool allow_local, char name[128], struct err *err)
{
    size_t n = strlen(url);
    if (n == 0 || n > 2048)
        return err_set(err, -EINVAL, "repository must be 1 to 2048 characters");
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)url[i] <= ' ' || url[i] == 0x7f)
            return err_set(err, -EINVAL,
                           "repository must not contain spaces or control characters");
    const char *path;
    if (strncmp(url, "https://", 8) == 0) {
        const char *host = url + 8;
        size_t hl = strcspn(host, "/");
        if (memchr(host, '@', hl))
            return err_set(err, -EINVAL,
                           "repository URL must not carry credentials; the server uses "
                           "GITHUB_TOKEN for github.com");
        if (hl == 0)
            return err_set(err, -EINVAL, "repository URL '%s' has no host", url);
        path = host + hl;
    } else if (strncmp(url, "file://", 7) == 0 || url[0] == '/') {
        if (!allow_local)
            return err_set(err, -EINVAL,
                           "local repositories are not allowed here (the operator can allow them "
                           "with RUNS_ALLOW_LOCAL_REPOS=1); use an https:// URL");
        path = url[0] == '/' ? url : url + 7;
    } else {
        return err_set(err, -EINVAL, "repository '%s' must be an https:// URL", url);
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

/* Users' secrets for runs in the store: each value sealed with the credentials key and bound to
 * its user and name (store_seal_row), beside the repositories it applies to and whether the
 * agent sees it. Rule: a value leaves this file only to the caller that holds the key; listing
 * without the key never opens one, and no message ever quotes one. */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cleanup.h"
#include "base/utf8.h"
#include "base/util.h"
#include "store/store_internal.h"

/* Names the sandbox's commands or the agent get from the server (src/sandbox/exec.c build_env,
 * src/runs/opencode.c), or that change how a shell, the loader or git behave under them. */
static const char *const reserved[] = {
    "PATH",     "HOME",      "USER",      "LOGNAME",         "SHELL",        "LANG",
    "HOSTNAME", "TMPDIR",    "PWD",       "OLDPWD",          "IFS",          "ENV",
    "BASH_ENV", "PS4",       "TERM",      "SHLVL",           "HTTP_PROXY",   "HTTPS_PROXY",
    "NO_PROXY", "ALL_PROXY", "FTP_PROXY", "DEBIAN_FRONTEND", "NODE_OPTIONS",
};
static const char *const reserved_prefix[] = {"LD_",       "SANDBOX_MCP_", "SMCP_",
                                              "OPENCODE_", "GIT_",         "LC_"};

const char *store_secret_name_problem(const char *name)
{
    size_t n = strlen(name);
    if (n == 0)
        return "the name is empty";
    if (n > STORE_SECRET_NAME_MAX)
        return "the name is longer than 64 characters";
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && c >= '0' && c <= '9')))
            return "the name is not an environment variable's (A-Z, 0-9 and _, not starting "
                   "with a digit)";
    }
    for (size_t i = 0; i < ARRAY_SIZE(reserved); i++)
        if (strcmp(name, reserved[i]) == 0)
            return "the name is one the server sets itself or that the sandbox needs";
    for (size_t i = 0; i < ARRAY_SIZE(reserved_prefix); i++)
        if (strncmp(name, reserved_prefix[i], strlen(reserved_prefix[i])) == 0)
            return "the name begins like those the server sets itself or that the sandbox needs "
                   "(LD_, LC_, GIT_, OPENCODE_, SANDBOX_MCP_, SMCP_)";
    return NULL;
}

const char *store_secret_value_problem(const char *value, size_t n)
{
    if (n == 0)
        return "the value is empty";
    if (n > STORE_SECRET_VALUE_MAX)
        return "the value is longer than 16384 bytes";
    if (memchr(value, '\0', n))
        return "the value holds a NUL byte";
    if (!utf8_valid(value, n))
        return "the value is not valid UTF-8";
    return NULL;
}

static bool pattern_char(char c, bool star)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || (star && c == '*');
}

int store_secret_repos_normalize(const char *in, char out[STORE_SECRET_REPOS_TEXT], struct err *err)
{
    size_t len = 0, count = 0;
    out[0] = '\0';
    for (const char *p = in ? in : ""; *p;) {
        p += strspn(p, " ,\t\n");
        size_t n = strcspn(p, " ,\t\n");
        if (n == 0)
            break;
        const char *slash = memchr(p, '/', n);
        bool ok = n == 1 && p[0] == '*';
        if (!ok && slash && slash > p && (size_t)(slash - p) < n - 1 && n <= 140) {
            ok = true;
            for (const char *c = p; c < p + n; c++)
                if (c != slash && !pattern_char(*c, c > slash))
                    ok = false;
        }
        if (!ok)
            return err_set(err, -EINVAL,
                           "'%.*s' is not a repository pattern: '*' (every repository) or "
                           "owner/name, where the name may hold '*'",
                           (int)(n > 140 ? 140 : n), p);
        if (++count > STORE_SECRET_REPOS_MAX)
            return err_set(err, -EINVAL, "a secret applies to at most %d repository patterns",
                           STORE_SECRET_REPOS_MAX);
        len += (size_t)snprintf(out + len, STORE_SECRET_REPOS_TEXT - len, "%s%.*s", len ? " " : "",
                                (int)n, p);
        p += n;
    }
    if (!out[0])
        snprintf(out, STORE_SECRET_REPOS_TEXT, "*");
    return 0;
}

/* '*' matches any run of characters, the rest case-insensitively (GitHub's names are). */
static bool glob_match(const char *pat, size_t plen, const char *s, size_t slen)
{
    if (plen == 0)
        return slen == 0;
    if (pat[0] == '*') {
        for (size_t i = 0; i <= slen; i++)
            if (glob_match(pat + 1, plen - 1, s + i, slen - i))
                return true;
        return false;
    }
    return slen > 0 && strncasecmp(pat, s, 1) == 0 &&
           glob_match(pat + 1, plen - 1, s + 1, slen - 1);
}

bool store_secret_applies(const char *repos, const char *repo)
{
    for (const char *p = repos; *p;) {
        size_t n = strcspn(p, " ");
        if (n == 1 && p[0] == '*')
            return true;
        if (repo && *repo && glob_match(p, n, repo, strlen(repo)))
            return true;
        p += n;
        p += strspn(p, " ");
    }
    return false;
}

int store_secret_seal(struct store *st, const unsigned char key[SEAL_KEY_BYTES],
                      const char *user_id, const struct store_secret *s, const char *value,
                      size_t n, int64_t now, struct err *err)
{
    const char *why = store_secret_name_problem(s->name);
    if (!why)
        why = store_secret_value_problem(value, n);
    if (why)
        return err_set(err, -EINVAL, "%s", why);
    char repos[STORE_SECRET_REPOS_TEXT];
    int r = store_secret_repos_normalize(s->repos, repos, err);
    if (r < 0)
        return r;
    _cleanup_free_ unsigned char *sealed = NULL;
    size_t len = 0;
    store_seal_row(key, "secret", user_id, s->name, value, n, &sealed, &len);
    /* the caps are checked by the insert itself, so that two at once do not both slip past */
    _cleanup_stmt_ struct db_stmt *q = NULL;
    r = store_prepare(
        st,
        "INSERT INTO user_secrets(user_id, name, repos, agent, size, sealed, created_at, "
        "updated_at) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7 WHERE "
        "(SELECT count(*) FROM user_secrets WHERE user_id = ?1 AND name <> ?2) < ?8 AND "
        "(SELECT coalesce(sum(size), 0) FROM user_secrets WHERE user_id = ?1 AND name <> ?2) "
        "+ ?5 <= ?9 ON CONFLICT (user_id, name) DO UPDATE SET repos = excluded.repos, "
        "agent = excluded.agent, size = excluded.size, sealed = excluded.sealed, "
        "updated_at = excluded.updated_at",
        &q, err);
    if (r < 0)
        return r;
    db_bind_text(q, 1, user_id);
    db_bind_text(q, 2, s->name);
    db_bind_text(q, 3, repos);
    db_bind_int64(q, 4, s->agent ? 1 : 0);
    db_bind_int64(q, 5, (int64_t)n);
    db_bind_blob(q, 6, sealed, len);
    db_bind_int64(q, 7, now);
    db_bind_int64(q, 8, STORE_SECRETS_MAX);
    db_bind_int64(q, 9, STORE_SECRETS_TOTAL_MAX);
    if ((r = store_step_done(st, q, "store a secret", err)) < 0)
        return r;
    if (db_changes(st) > 0)
        return 0;
    /* refused by a cap: which one */
    _cleanup_stmt_ struct db_stmt *c = NULL;
    r = store_prepare(st, "SELECT count(*) FROM user_secrets WHERE user_id = ? AND name <> ?", &c,
                      err);
    if (r < 0)
        return r;
    db_bind_text(c, 1, user_id);
    db_bind_text(c, 2, s->name);
    int64_t count = db_step(c) == DB_ROW ? db_col_int64(c, 0) : 0;
    if (count >= STORE_SECRETS_MAX)
        return err_set(err, -ENOSPC, "a user keeps at most %d secrets: delete one first",
                       STORE_SECRETS_MAX);
    return err_set(err, -ENOSPC,
                   "a user's secrets hold at most %d bytes of values in all: delete one first",
                   STORE_SECRETS_TOTAL_MAX);
}

int store_secret_delete(struct store *st, const char *user_id, const char *name, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "DELETE FROM user_secrets WHERE user_id = ? AND name = ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    db_bind_text(s, 2, name);
    if ((r = store_step_done(st, s, "delete a secret", err)) < 0)
        return r;
    return db_changes(st) ? 0 : err_set(err, -ENOENT, "no secret '%s' is set", name);
}

int store_secret_list(struct store *st, const unsigned char *key, const char *user_id,
                      void (*fn)(const struct store_secret *s, const char *value, size_t n,
                                 void *ctx),
                      void *ctx, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st,
                          "SELECT name, repos, agent, size, created_at, updated_at, sealed "
                          "FROM user_secrets WHERE user_id = ? ORDER BY name",
                          &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_secret c = {0};
        store_copy_text(c.name, sizeof(c.name), s, 0);
        store_copy_text(c.repos, sizeof(c.repos), s, 1);
        c.agent = db_col_int64(s, 2) != 0;
        c.size = (size_t)db_col_int64(s, 3);
        c.created_at = db_col_int64(s, 4);
        c.updated_at = db_col_int64(s, 5);
        if (!key) {
            fn(&c, NULL, 0, ctx);
            continue;
        }
        char *value = NULL;
        size_t n = 0;
        if ((r = store_unseal_col(s, 6, key, "secret", user_id, c.name, &value, &n, err)) < 0)
            return r;
        fn(&c, value, n, ctx);
        explicit_bzero(value, n);
        free(value);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list secrets", err);
}

/* The run engine's pure parts: what it reads back from the programs it runs (the change list,
 * git's words when a clone fails, the branches a clone names), what it keeps of what an agent
 * prints (token redaction), the model name check, and the shell scripts it runs on the host and
 * in the sandbox.
 *
 * The rule of this file: no I/O, no store, no loop, no struct run; inputs in, strings out. Every
 * function is safe from any thread, and each is reachable from tests/unit/test_scripts.c and
 * tests/fuzz/fuzz_scripts.c (which feed them what a sandbox or a remote might print). */
#include "runs/runs_internal.h"

#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/util.h"

void scripts_sh_quote(struct buf *b, const char *s)
{
    buf_puts(b, "'");
    for (; *s; s++)
        buf_puts(b, *s == '\'' ? "'\\''" : (char[]){*s, 0});
    buf_puts(b, "'");
}

char *scripts_parse_changes(const char *out)
{
    json_t *files = json_array(), *commits = json_array();
    int64_t ins = 0, del = 0;
    char *copy = xstrdup(out), *save = NULL, *branch = NULL;
    int section = 0;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strcmp(line, "---") == 0) {
            section++;
            continue;
        }
        if (section == 0 && !branch) {
            branch = line;
        } else if (section == 1) {
            char *a = line, *t1 = strchr(a, '\t');
            char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
            if (!t2)
                continue;
            *t1 = *t2 = '\0';
            int64_t i = a[0] == '-' ? 0 : strtoll(a, NULL, 10);
            int64_t d = t1[1] == '-' ? 0 : strtoll(t1 + 1, NULL, 10);
            ins += i;
            del += d;
            if (json_array_size(files) < SCRIPTS_CHANGES_LIST_MAX)
                json_array_append_new(files, json_pack("{s:s, s:I, s:I, s:b}", "path", t2 + 1,
                                                       "insertions", (json_int_t)i, "deletions",
                                                       (json_int_t)d, "binary", a[0] == '-'));
        } else if (section == 2) {
            char *sp = strchr(line, ' ');
            if (!sp || json_array_size(commits) >= SCRIPTS_CHANGES_LIST_MAX)
                continue;
            *sp = '\0';
            json_array_append_new(commits, json_pack("{s:s, s:s}", "sha", line, "message", sp + 1));
        }
    }
    json_t *c =
        json_pack("{s:I, s:I, s:I, s:o, s:o, s:s?}", "files_changed",
                  (json_int_t)json_array_size(files), "insertions", (json_int_t)ins, "deletions",
                  (json_int_t)del, "files", files, "commits", commits, "branch", branch);
    char *text = json_dumps(c, JSON_COMPACT);
    json_decref(c);
    free(copy);
    return text;
}

static bool b64url(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_';
}

static void blot(char *p, size_t n)
{
    static const char mark[] = "[redacted]";
    memset(p, 'x', n);
    memcpy(p, mark, n < sizeof(mark) - 1 ? n : sizeof(mark) - 1);
}

void scripts_redact_tokens(char *s)
{
    for (char *p = s ? strstr(s, "eyJ") : NULL; p; p = strstr(p, "eyJ")) {
        char *q = p;
        int dots = 0;
        for (;; q++) {
            if (*q == '.' && dots < 2 && b64url(q[1]))
                dots++;
            else if (!b64url(*q))
                break;
        }
        if (dots == 2 && q - p > 40 && strncmp(strchr(p, '.') + 1, "eyJ", 3) == 0) {
            blot(p, (size_t)(q - p));
            p = q;
        } else {
            p += 3;
        }
    }
}

void scripts_redact_values(char *s, const char *const *values, size_t n)
{
    if (!s)
        return;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(values[i]);
        if (len < SCRIPTS_REDACT_MIN)
            continue;
        for (char *p = strstr(s, values[i]); p; p = strstr(p + len, values[i]))
            blot(p, len);
    }
}

const char *scripts_clone_reason(const char *out)
{
    static const struct {
        const char *needle, *reason;
    } known[] = {
        {"Repository not found", "the repository does not exist, or it is private"},
        {"does not appear to be a git repository", "there is no git repository at that address"},
        {"does not exist", "the repository does not exist"},
        {"returned error: 404", "the repository does not exist, or it is private"},
        {"returned error: 30", "the server answered with a redirect, which is not followed"},
        {"redirect", "the server answered with a redirect, which is not followed"},
        {"Authentication failed", "authentication failed"},
        {"could not read Username", "the repository needs credentials this server does not have"},
        {"returned error: 401", "the repository needs credentials this server does not have"},
        {"returned error: 403", "access to the repository was refused"},
        {"SSL", "the server's TLS certificate could not be verified"},
        {"certificate", "the server's TLS certificate could not be verified"},
        {"Could not resolve host", "the host name could not be resolved"},
        {"Connection refused", "the connection was refused"},
        {"timed out", "the connection timed out"},
        {"Failed to connect", "cannot connect to the server"},
        {"Couldn't connect", "cannot connect to the server"},
        {"returned error: 5", "the server failed"},
        {"not valid: is this a git repository", "there is no git repository at that address"},
        {"unable to access", "cannot reach the repository"},
        {"remote error", "the server refused to serve the repository"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(known); i++)
        if (strstr(out, known[i].needle))
            return known[i].reason;
    return "git failed";
}

unsigned scripts_clone_branches(char *out, struct buf *names, unsigned long *total)
{
    char *at = NULL;
    for (char *p = out; (p = strstr(p, "smcp-branches ")); p++)
        if (p == out || p[-1] == '\n')
            at = p;
    *total = at ? strtoul(at + 14, NULL, 10) : 0;
    char *list = at ? strchr(at, '\n') : NULL, *save = NULL;
    unsigned shown = 0;
    for (char *line = list ? strtok_r(list, "\n", &save) : NULL; line && shown < 10;
         line = strtok_r(NULL, "\n", &save)) {
        if (!repo_branch_valid(line) || names->len + strlen(line) > 300)
            break;
        buf_printf(names, "%s'%s'", shown ? ", " : "", line);
        shown++;
    }
    return shown;
}

bool scripts_model_valid(const char *m)
{
    const char *slash = strchr(m, '/');
    if (!slash || slash == m || !slash[1] || strlen(m) > 120)
        return false;
    for (const char *p = m; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("/._:-@", *p))
            return false;
    return true;
}

bool scripts_sha_valid(const char *s)
{
    size_t n = strlen(s);
    if (n != 40 && n != 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return false;
    return true;
}

char *scripts_reset_to(const char *workdir, const char *sha)
{
    struct buf cmd;
    buf_init(&cmd, 256);
    buf_puts(&cmd, "cd ");
    scripts_sh_quote(&cmd, workdir);
    buf_printf(&cmd, " && git cat-file -e '%s^{commit}' 2>/dev/null && git reset -q --hard %s", sha,
               sha);
    return buf_steal(&cmd, NULL);
}

/* Bring the mirror $m up to date with $SMCP_URL (made when absent): its branches and tags, and
 * its HEAD named as the remote's; ls-remote does not show a HEAD that names no branch (a
 * repository without commits, or one whose HEAD names a branch it lacks), and then the mirror's
 * HEAD is refs/heads/smcp-head-unknown. Without errexit (it runs in a condition), so
 * each step says when it fails. The mirror's own configuration holds no credential: that stays
 * in the environment. Loose objects are not kept, so that its size is quick to tell and its
 * removal quick; its housekeeping runs before the fetch returns, under the lock. */
#define SCRIPTS_MIRROR_FN                                                                          \
    "smcp_mirror() { "                                                                             \
    "  if ! [ -f \"$m/HEAD\" ]; then rm -rf \"$m\" && git init -q --bare --template= \"$m\" && "   \
    "    git -C \"$m\" config gc.autoDetach false && "                                             \
    "    git -C \"$m\" config maintenance.autoDetach false && "                                    \
    "    git -C \"$m\" config transfer.unpackLimit 1 || return 1; fi; "                            \
    "  s=$(git ls-remote --symref -- \"$SMCP_URL\" HEAD) || return 1; "                            \
    "  git -C \"$m\" fetch --quiet --prune --no-tags --no-write-fetch-head -- \"$SMCP_URL\" "      \
    "    '+refs/heads/*:refs/heads/*' '+refs/tags/*:refs/tags/*' || return 1; "                    \
    "  r=$(printf '%s\\n' \"$s\" | awk '$1 == \"ref:\" && $3 == \"HEAD\" { print $2; exit }'); "   \
    "  [ -n \"$r\" ] || r=refs/heads/smcp-head-unknown; "                                          \
    "  git -C \"$m\" symbolic-ref HEAD \"$r\" || return 1; "                                       \
    "}; "

/* With a mirror (SMCP_MIRROR, its size in KiB written to SMCP_MIRROR_KB), the clone is made
 * from it once it is up to date (made afresh when the fetch fails for a reason of its own),
 * except when the remote's HEAD names no branch: then from the remote, which tells what HEAD
 * names. What to check out is decided once everything is fetched: the requested branch (or
 * tag); else the remote's HEAD; else, when HEAD names a branch the remote does not have, its
 * only branch, and with several, exit 3 listing them; a repository without commits keeps HEAD
 * unborn, named as the remote's (or the requested branch, or init.defaultBranch). A requested
 * branch that is not there: exit 4. The git directory is packed as .GIT (see scripts_prepare).
 */
const char scripts_clone[] =
    "set -e; rm -rf \"$SMCP_DEST\"; trap 'rm -rf \"$SMCP_DEST\"' EXIT; " SCRIPTS_MIRROR_FN
    "if [ -n \"${SMCP_MIRROR:-}\" ]; then "
    "  m=$SMCP_MIRROR; "
    "  if ! o=$(smcp_mirror 2>&1); then "
    "    case \"$o\" in *'unable to access'*|*'returned error'*|*'not found'*|"
    "*'Authentication'*|*'Username'*|*'resolve host'*|*'redirect'*|*'remote error'*|"
    "*'does not appear'*|*'does not exist'*|*'Could not read from remote'*) "
    "      printf '%s\\n' \"$o\"; exit 1;; esac; "
    "    echo smcp-mirror-recreated; rm -rf \"$m\"; "
    "    if ! o=$(smcp_mirror 2>&1); then printf '%s\\n' \"$o\"; exit 1; fi; "
    "  fi; "
    "  du -sk \"$m\" > \"$SMCP_MIRROR_KB\" || :; "
    "fi; "
    "if [ -n \"${m:-}\" ] && "
    "[ \"$(git -C \"$m\" symbolic-ref HEAD)\" != refs/heads/smcp-head-unknown ]; then "
    "  GIT_ALLOW_PROTOCOL=file git clone --quiet --no-checkout --template= -- \"$m\" "
    "\"$SMCP_DEST\" >&2; "
    "  git -C \"$SMCP_DEST\" remote set-url origin \"$SMCP_URL\"; "
    "else "
    "  git clone --quiet --no-checkout --no-hardlinks --template= -- \"$SMCP_URL\" "
    "\"$SMCP_DEST\" >&2; "
    "fi; "
    "cd \"$SMCP_DEST\"; b=$SMCP_BRANCH; h=$(git symbolic-ref -q --short HEAD || :); "
    "all=$(git for-each-ref --format='%(refname:lstrip=3)' refs/remotes/origin/ | "
    "grep -vx HEAD || :); "
    "if [ -z \"$b\" ] && ! git rev-parse -q --verify HEAD >/dev/null; then "
    "  n=$(printf '%s' \"$all\" | grep -c '' || :); "
    "  if [ \"$n\" -gt 1 ]; then "
    "    printf 'smcp-branches %s\\n' \"$n\"; printf '%s\\n' \"$all\" | head -n 10; exit 3; "
    "  fi; "
    "  b=$all; "
    "fi; "
    "if [ -z \"$b\" ]; then "
    "  if git rev-parse -q --verify HEAD >/dev/null; then git checkout -q; fi; "
    "elif git rev-parse -q --verify \"refs/remotes/origin/$b\" >/dev/null; then "
    "  git checkout -q -B \"$b\" --track \"refs/remotes/origin/$b\" --; "
    "elif git rev-parse -q --verify \"refs/tags/$b\" >/dev/null; then "
    "  git checkout -q --detach \"refs/tags/$b^{commit}\" --; "
    "elif [ -z \"$all\" ]; then "
    "  git symbolic-ref HEAD \"refs/heads/$b\"; "
    "else exit 4; fi; "
    "if [ -n \"$b\" ] && [ \"$h\" != \"$b\" ] && "
    "git rev-parse -q --verify \"refs/heads/$h\" >/dev/null; then git branch -q -D \"$h\"; fi; "
    "mv .git .GIT; tar -cf \"$SMCP_TAR\" .";

char *scripts_prepare(const struct scripts_prepare *p)
{
    struct buf cmd;
    buf_init(&cmd, 0);
    buf_puts(&cmd, "set -e; d=");
    scripts_sh_quote(&cmd, p->workdir);
    if (p->unpack && p->over)
        buf_puts(&cmd, "; if [ -d \"$d/.git\" ]; then (cd \"$d\" && git ls-files -z | "
                       "xargs -0 rm -f --); fi");
    if (p->unpack)
        buf_puts(&cmd, "; mkdir -p \"$d\"; rm -rf \"$d/.GIT\" \"$d/.git\"; "
                       "tar -x --no-same-owner -C \"$d\" -f -; mv \"$d/.GIT\" \"$d/.git\"");
    if (p->repository) {
        if (!p->unpack)
            buf_puts(&cmd, "; if ! [ -d \"$d/.git\" ]; then echo absent; exit 0; fi");
        buf_puts(&cmd, "; cd \"$d\"");
        if (p->checkout) {
            /* in a repository without any commit yet, the branch is born with the first */
            buf_puts(&cmd, "; b=");
            scripts_sh_quote(&cmd, p->checkout);
            buf_puts(&cmd,
                     "; if [ -n \"$(git for-each-ref --count=1)\" ]; then "
                     "git checkout -q \"$b\" --; else git symbolic-ref HEAD \"refs/heads/$b\"; fi");
        }
        if (p->gh_remote) {
            buf_puts(&cmd, "; u=");
            scripts_sh_quote(&cmd, p->gh_remote);
            buf_puts(&cmd, "; { git remote set-url github \"$u\" || git remote add github \"$u\"; "
                           "git config remote.github.skipFetchAll true; } >/dev/null 2>&1 || :");
        }
        buf_puts(&cmd, "; ");
        buf_puts(&cmd, repo_head_script);
        if (p->make_branch) {
            /* the session's branch, made from what is checked out; in a repository without
             * commits it is the branch checked out, which the first push creates */
            buf_puts(&cmd, "; if git rev-parse -q --verify HEAD >/dev/null; then "
                           "git checkout -q -b ");
            scripts_sh_quote(&cmd, p->make_branch);
            buf_puts(&cmd, "; echo made; else echo empty; fi");
        }
    } else {
        buf_puts(&cmd, "; mkdir -p \"$d\"");
    }
    return buf_steal(&cmd, NULL);
}

char *scripts_changes(const char *workdir, const char *base, bool commit_left)
{
    struct buf cmd;
    buf_init(&cmd, 0);
    buf_puts(&cmd, "cd ");
    scripts_sh_quote(&cmd, workdir);
    /* Without a starting commit (a repository that had none) the changes are the files against
     * the empty tree and every commit there is, if any. */
    if (base[0]) {
        buf_puts(&cmd, " || exit 1; b=");
        scripts_sh_quote(&cmd, base);
        buf_puts(&cmd, "; l=\"$b..HEAD\"; ");
    } else {
        buf_puts(&cmd, " || exit 1; b=$(git hash-object -t tree /dev/null); l=HEAD; "
                       "git rev-parse -q --verify HEAD >/dev/null || l=; ");
    }
    buf_puts(&cmd, "g='git -c core.quotepath=off'; ");
    if (commit_left)
        buf_puts(&cmd, "if [ -n \"$(git status --porcelain)\" ]; then git add -A && git -c "
                       "user.name=sandbox-mcp -c user.email=sandbox-mcp@localhost -c "
                       "core.hooksPath=/dev/null commit -q --no-verify -m \"$SMCP_MSG\" >&2 && "
                       "l=${l:-HEAD}; fi; ");
    buf_puts(&cmd, "$g symbolic-ref -q --short HEAD || echo HEAD; "
                   "echo ---; git add -A -N . 2>/dev/null; $g diff --numstat \"$b\" --; echo ---; "
                   "if [ -n \"$l\" ]; then $g log --format='%H %s' \"$l\" --; fi");
    return buf_steal(&cmd, NULL);
}

/* Seeds OpenCode's config directory (so that it installs no plugin) and becomes the agent (its
 * arguments after the script's $0): only builtins run once it is seeded. */
const char scripts_agent_seed[] =
    "c=\"$HOME/.config/opencode\"; "
    "[ -d \"$c/node_modules\" ] || mkdir -p \"$c/node_modules\" 2>/dev/null; "
    "p='{\"dependencies\":{\"@opencode-ai/plugin\":\"*\"}}'; "
    "[ -e \"$c/package.json\" ] || printf '%s\\n' \"$p\" > \"$c/package.json\"; "
    "[ -e \"$c/package-lock.json\" ] || printf '{\"packages\":{\"\":%s}}\\n' \"$p\" "
    "> \"$c/package-lock.json\"; "
    "exec \"$@\"";

/* devcontainer.json as a run's setup: JSONC stripped to JSON, the keys that apply read into a
 * plan (the rest named in notes), the plan rendered as one sh script. See devcontainer.h. */
#include "runs/devcontainer.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/util.h"
#include "runs/runs_internal.h"

static const char *const stage_keys[DEVCONTAINER_STAGES] = {
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
};

const char *devcontainer_stage_name(enum devcontainer_stage s)
{
    return s < DEVCONTAINER_STAGES ? stage_keys[s] : "?";
}

/* ---- JSONC ---- */

int devcontainer_strip(const char *in, size_t len, char *out, struct err *err)
{
    size_t i = 0;
    while (i < len) {
        char c = in[i];
        if (c == '"') {
            out[i++] = c;
            while (i < len && in[i] != '"') {
                if (in[i] == '\\' && i + 1 < len) {
                    out[i] = in[i];
                    i++;
                }
                out[i] = in[i];
                i++;
            }
            if (i < len)
                out[i++] = '"';
        } else if (c == '/' && i + 1 < len && in[i + 1] == '/') {
            while (i < len && in[i] != '\n')
                out[i++] = ' ';
        } else if (c == '/' && i + 1 < len && in[i + 1] == '*') {
            size_t start = i;
            out[i] = out[i + 1] = ' ';
            i += 2;
            while (i < len && !(in[i] == '*' && i + 1 < len && in[i + 1] == '/')) {
                out[i] = in[i] == '\n' ? '\n' : ' ';
                i++;
            }
            if (i >= len) {
                int line = 1;
                for (size_t k = 0; k < start; k++)
                    line += in[k] == '\n';
                return err_set(err, -EINVAL, "line %d: comment not closed", line);
            }
            out[i] = out[i + 1] = ' ';
            i += 2;
        } else {
            if (c == ']' || c == '}') {
                /* what came before, back to the last token, is whitespace or a comment (now
                 * spaces): a comma there is a trailing one */
                size_t k = i;
                while (k > 0 && strchr(" \t\r\n", out[k - 1]))
                    k--;
                size_t j = k > 0 ? k - 1 : 0;
                while (j > 0 && strchr(" \t\r\n", out[j - 1]))
                    j--;
                /* not the only thing in its brackets, nor after another comma: "[,]" stays */
                if (k > 0 && out[k - 1] == ',' && j > 0 && !strchr("[{,", out[j - 1]))
                    out[k - 1] = ' ';
            }
            out[i++] = c;
        }
    }
    return 0;
}

/* ---- the plan ---- */

struct ctx {
    struct devcontainer_plan *p;
    size_t total;   /* bytes of words so far */
    size_t dropped; /* notes past the cap */
    struct err *err;
};

static void note(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char line[256];
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < c->p->nnotes; i++)
        if (strcmp(c->p->notes[i], line) == 0)
            return;
    if (c->p->nnotes >= DEVCONTAINER_NOTES_MAX - 1) {
        c->dropped++;
        return;
    }
    c->p->notes = xrealloc(c->p->notes, (c->p->nnotes + 1) * sizeof(char *));
    c->p->notes[c->p->nnotes++] = xstrdup(line);
}

static bool shell_name(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

static bool has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

/* A key as a note or message shows it: at most 40 bytes, control characters as '?'. */
static void shown(const char *s, char out[48])
{
    size_t n = 0;
    for (; *s && n < 40; s++)
        out[n++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
    if (*s) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

static int word_make(struct ctx *c, const char *s, const char *where, struct devcontainer_word *w)
{
    const char *ws = c->p->workspace, *base = strrchr(ws, '/') + 1;
    if (!*base) /* the workspace is "/" */
        base = ws;
    struct buf text, sh, lit;
    buf_init(&text, 0);
    buf_init(&sh, 0);
    buf_init(&lit, 0);
    int rc = 0;
    while (*s) {
        const char *open = strstr(s, "${"), *close = open ? strchr(open, '}') : NULL;
        if (!close) {
            buf_puts(&lit, s);
            buf_puts(&text, s);
            break;
        }
        buf_append(&lit, s, (size_t)(open - s));
        buf_append(&text, s, (size_t)(open - s));
        char *inner = xstrndup(open + 2, (size_t)(close - open - 2));
        char *colon = strchr(inner, ':'), *def = NULL;
        if (colon) {
            *colon = '\0';
            char *c2 = strchr(colon + 1, ':');
            if (c2) {
                *c2 = '\0';
                def = c2 + 1;
            }
        }
        const char *arg = colon ? colon + 1 : NULL;
        if (!colon && strcmp(inner, "containerWorkspaceFolder") == 0) {
            buf_puts(&lit, ws);
            buf_puts(&text, ws);
        } else if (!colon && strcmp(inner, "containerWorkspaceFolderBasename") == 0) {
            buf_puts(&lit, base);
            buf_puts(&text, base);
        } else if (!colon && (strcmp(inner, "localWorkspaceFolder") == 0 ||
                              strcmp(inner, "localWorkspaceFolderBasename") == 0)) {
            const char *v = strcmp(inner, "localWorkspaceFolder") == 0 ? ws : base;
            buf_puts(&lit, v);
            buf_puts(&text, v);
            note(c, "workspace used for ${%s} in %s (there is no host folder)", inner, where);
        } else if (!colon && strcmp(inner, "devcontainerId") == 0) {
            note(c, "empty: ${devcontainerId} in %s (there is no container id)", where);
        } else if (colon && strcmp(inner, "localEnv") == 0) {
            char name[48];
            shown(arg, name);
            buf_puts(&lit, def ? def : "");
            buf_puts(&text, def ? def : "");
            note(c, "%s: ${localEnv:%s} in %s (the host's environment is not passed)",
                 def ? "default used" : "empty", name, where);
        } else if (colon && strcmp(inner, "containerEnv") == 0) {
            if (!shell_name(arg) || strlen(arg) > DEVCONTAINER_NAME_MAX) {
                char name[48];
                shown(arg, name);
                rc = err_set(c->err, -EINVAL, "%s: '${containerEnv:%s}' does not name a variable",
                             where, name);
                free(inner);
                break;
            }
            if (lit.len)
                scripts_sh_quote(&sh, lit.data);
            buf_reset(&lit);
            if (def) {
                struct devcontainer_plan *p = c->p;
                p->defaults = xrealloc(p->defaults, (p->ndefaults + 1) * sizeof(char *));
                p->defaults[p->ndefaults++] = xstrdup(def);
                buf_printf(&sh, "\"${%s-$smcp_d%zu}\"", arg, p->ndefaults);
                c->total += strlen(def);
            } else {
                buf_printf(&sh, "\"${%s}\"", arg);
            }
            buf_append(&text, open, (size_t)(close - open + 1));
        } else {
            buf_append(&lit, open, (size_t)(close - open + 1));
            buf_append(&text, open, (size_t)(close - open + 1));
        }
        free(inner);
        s = close + 1;
    }
    if (rc == 0 && (lit.len || sh.len == 0))
        scripts_sh_quote(&sh, lit.data ? lit.data : "");
    buf_release(&lit);
    c->total += sh.len;
    if (rc == 0 && c->total > DEVCONTAINER_TOTAL_MAX)
        rc = err_set(c->err, -EMSGSIZE, "%s: the setup is larger than %d bytes once substituted",
                     where, DEVCONTAINER_TOTAL_MAX);
    if (rc < 0) {
        buf_release(&text);
        buf_release(&sh);
        return rc;
    }
    w->text = buf_steal(&text, NULL);
    if (!w->text)
        w->text = xstrdup("");
    w->sh = buf_steal(&sh, NULL);
    return 0;
}

static int string_get(struct ctx *c, json_t *v, const char *where, struct devcontainer_word *w)
{
    if (json_string_length(v) > DEVCONTAINER_STRING_MAX)
        return err_set(c->err, -EMSGSIZE, "%s: longer than %d bytes", where,
                       DEVCONTAINER_STRING_MAX);
    return word_make(c, json_string_value(v), where, w);
}

static int env_read(struct ctx *c, const char *key, json_t *obj, bool remote)
{
    if (!json_is_object(obj))
        return err_set(c->err, -EINVAL, "'%s' is not an object", key);
    if (json_object_size(obj) > DEVCONTAINER_ENV_MAX)
        return err_set(c->err, -EMSGSIZE, "'%s' has more than %d entries", key,
                       DEVCONTAINER_ENV_MAX);
    struct devcontainer_plan *p = c->p;
    const char *name;
    json_t *v;
    json_object_foreach(obj, name, v)
    {
        char shown_name[48];
        shown(name, shown_name);
        if (strlen(name) > DEVCONTAINER_NAME_MAX || !shell_name(name) ||
            strncmp(name, "smcp_", 5) == 0)
            return err_set(c->err, -EINVAL, "'%s.%s' is not a variable name this can set", key,
                           shown_name);
        if (!json_is_string(v) && !(remote && json_is_null(v)))
            return err_set(c->err, -EINVAL, "'%s.%s' is not a string%s", key, name,
                           remote ? " or null" : "");
        char where[160];
        snprintf(where, sizeof(where), "%s.%s", key, name);
        struct devcontainer_word *w = NULL;
        if (json_is_string(v)) {
            w = xcalloc(1, sizeof(*w));
            int rc = string_get(c, v, where, w);
            if (rc < 0) {
                free(w);
                return rc;
            }
        }
        p->env = xrealloc(p->env, (p->nenv + 1) * sizeof(*p->env));
        p->env[p->nenv++] = (struct devcontainer_env){xstrdup(name), w};
    }
    return 0;
}

static void command_release(struct devcontainer_command *cmd)
{
    for (size_t i = 0; i < cmd->argc; i++) {
        free(cmd->argv[i].text);
        free(cmd->argv[i].sh);
    }
    free(cmd->argv);
    free(cmd->name);
}

/* A string or an array of strings into cmd (zeroed by the caller, released by it on failure). */
static int command_read(struct ctx *c, json_t *v, const char *where,
                        struct devcontainer_command *cmd)
{
    if (json_is_string(v)) {
        cmd->shell = true;
        cmd->argv = xcalloc(1, sizeof(*cmd->argv));
        int rc = string_get(c, v, where, &cmd->argv[0]);
        if (rc == 0)
            cmd->argc = 1;
        return rc;
    }
    if (!json_is_array(v))
        return err_set(c->err, -EINVAL, "'%s' is not a string or an array of strings", where);
    size_t n = json_array_size(v);
    if (n > DEVCONTAINER_ARGS_MAX)
        return err_set(c->err, -EMSGSIZE, "'%s' has more than %d elements", where,
                       DEVCONTAINER_ARGS_MAX);
    cmd->argv = xcalloc(n ? n : 1, sizeof(*cmd->argv));
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(v, i);
        char at[192];
        snprintf(at, sizeof(at), "%s[%zu]", where, i);
        if (!json_is_string(a))
            return err_set(c->err, -EINVAL, "'%s' is not a string", at);
        int rc = string_get(c, a, at, &cmd->argv[i]);
        if (rc < 0)
            return rc;
        cmd->argc++;
    }
    if (n && (!cmd->argv[0].text[0] || cmd->argv[0].text[0] == '-'))
        return err_set(c->err, -EINVAL,
                       "'%s[0]': a program's name cannot be empty or begin "
                       "with '-'",
                       where);
    return 0;
}

static int step_read(struct ctx *c, enum devcontainer_stage s, json_t *v)
{
    const char *key = stage_keys[s];
    struct devcontainer_step *st = &c->p->steps[s];
    if (json_is_null(v))
        return 0;
    if (!json_is_object(v)) {
        st->cmds = xcalloc(1, sizeof(*st->cmds));
        st->n = 1;
        return command_read(c, v, key, &st->cmds[0]);
    }
    if (json_object_size(v) > DEVCONTAINER_COMMANDS_MAX)
        return err_set(c->err, -EMSGSIZE, "'%s' has more than %d entries", key,
                       DEVCONTAINER_COMMANDS_MAX);
    st->parallel = true;
    st->cmds = xcalloc(json_object_size(v) ? json_object_size(v) : 1, sizeof(*st->cmds));
    const char *name;
    json_t *e;
    json_object_foreach(v, name, e)
    {
        char shown_name[48];
        shown(name, shown_name);
        if (strlen(name) > DEVCONTAINER_NAME_MAX || has_control(name))
            return err_set(c->err, -EINVAL,
                           "'%s': the entry '%s' has a name too long or with "
                           "control characters",
                           key, shown_name);
        struct devcontainer_command *cmd = &st->cmds[st->n++];
        cmd->name = xstrdup(name);
        char where[192];
        snprintf(where, sizeof(where), "%s.%s", key, name);
        int rc = command_read(c, e, where, cmd);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The keys that do not apply, and why, in a few words. */
static const struct {
    const char *key, *why;
} skipped[] = {
    {"image", "the sandbox's own template is used"},
    {"build", "no image is built: the sandbox's own template is used"},
    {"dockerFile", "no image is built: the sandbox's own template is used"},
    {"dockerfile", "no image is built: the sandbox's own template is used"},
    {"context", "no image is built: the sandbox's own template is used"},
    {"dockerComposeFile", "Docker Compose is not used"},
    {"service", "Docker Compose is not used"},
    {"runServices", "Docker Compose is not used"},
    {"features", "features are not installed"},
    {"overrideFeatureInstallOrder", "features are not installed"},
    {"initializeCommand", "it would run on the host"},
    {"postStartCommand", "no container is started for the run"},
    {"postAttachCommand", "no tool attaches to the sandbox"},
    {"waitFor", "every command is waited for"},
    {"forwardPorts", "ports are not forwarded"},
    {"appPort", "ports are not forwarded"},
    {"portsAttributes", "ports are not forwarded"},
    {"otherPortsAttributes", "ports are not forwarded"},
    {"mounts", "the sandbox mounts nothing more"},
    {"workspaceMount", "the run's workspace is used"},
    {"workspaceFolder", "the run's workspace is used"},
    {"runArgs", "the sandbox's own confinement applies"},
    {"privileged", "the sandbox's own confinement applies"},
    {"capAdd", "the sandbox's own confinement applies"},
    {"securityOpt", "the sandbox's own confinement applies"},
    {"init", "the sandbox runs its own init"},
    {"overrideCommand", "the sandbox runs its own init"},
    {"shutdownAction", "the sandbox's life is its own"},
    {"containerUser", "commands run as the sandbox's user"},
    {"remoteUser", "commands run as the sandbox's user"},
    {"updateRemoteUserUID", "commands run as the sandbox's user"},
    {"userEnvProbe", "the environment is the sandbox's and the file's"},
    {"hostRequirements", "the sandbox's own limits apply"},
    {"customizations", "settings for editors and tools"},
    {"secrets", "secrets are not asked for"},
};

static int top_key(struct ctx *c, const char *key, json_t *v)
{
    for (int s = 0; s < DEVCONTAINER_STAGES; s++)
        if (strcmp(key, stage_keys[s]) == 0)
            return step_read(c, (enum devcontainer_stage)s, v);
    if (strcmp(key, "containerEnv") == 0 || strcmp(key, "remoteEnv") == 0)
        return 0; /* read first, below, in their order */
    if (strcmp(key, "name") == 0 || strcmp(key, "$schema") == 0)
        return 0;
    for (size_t i = 0; i < ARRAY_SIZE(skipped); i++)
        if (strcmp(key, skipped[i].key) == 0) {
            note(c, "skipped: %s (%s)", key, skipped[i].why);
            return 0;
        }
    char k[48];
    shown(key, k);
    note(c, "skipped: unknown key '%s'", k);
    return 0;
}

void devcontainer_plan_free(struct devcontainer_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nenv; i++) {
        free(p->env[i].name);
        if (p->env[i].value) {
            free(p->env[i].value->text);
            free(p->env[i].value->sh);
            free(p->env[i].value);
        }
    }
    free(p->env);
    for (int s = 0; s < DEVCONTAINER_STAGES; s++) {
        for (size_t i = 0; i < p->steps[s].n; i++)
            command_release(&p->steps[s].cmds[i]);
        free(p->steps[s].cmds);
    }
    for (size_t i = 0; i < p->nnotes; i++)
        free(p->notes[i]);
    free(p->notes);
    for (size_t i = 0; i < p->ndefaults; i++)
        free(p->defaults[i]);
    free(p->defaults);
    free(p->workspace);
    free(p);
}

int devcontainer_parse(const char *text, size_t len, const char *workspace,
                       struct devcontainer_plan **ret, struct err *err)
{
    if (len > DEVCONTAINER_INPUT_MAX)
        return err_set(err, -EMSGSIZE, "larger than %d bytes", DEVCONTAINER_INPUT_MAX);
    if (workspace[0] != '/' || strlen(workspace) > DEVCONTAINER_WORKSPACE_MAX ||
        has_control(workspace))
        return err_set(err, -EINVAL, "workspace '%s' is not an absolute path", workspace);
    _cleanup_free_ char *json = xmalloc(len ? len : 1);
    int rc = devcontainer_strip(text, len, json, err);
    if (rc < 0)
        return rc;
    json_error_t jerr;
    json_auto_t *root = json_loadb(json, len, 0, &jerr);
    if (!root)
        return err_set(err, -EINVAL, "line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root))
        return err_set(err, -EINVAL, "the top level is not an object");

    struct devcontainer_plan *p = xcalloc(1, sizeof(*p));
    p->workspace = xstrdup(workspace);
    struct ctx c = {.p = p, .err = err};
    json_t *env;
    if ((env = json_object_get(root, "containerEnv")) && !json_is_null(env))
        rc = env_read(&c, "containerEnv", env, false);
    if (rc == 0 && (env = json_object_get(root, "remoteEnv")) && !json_is_null(env))
        rc = env_read(&c, "remoteEnv", env, true);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (rc < 0)
            break;
        rc = top_key(&c, key, v);
    }
    if (rc < 0) {
        devcontainer_plan_free(p);
        return rc;
    }
    if (c.dropped) {
        p->notes = xrealloc(p->notes, (p->nnotes + 1) * sizeof(char *));
        p->notes[p->nnotes++] = xasprintf("and %zu more not applied", c.dropped);
    }
    *ret = p;
    return 0;
}

/* ---- the script ---- */

static void command_render(struct buf *b, const struct devcontainer_command *cmd)
{
    if (cmd->shell) {
        buf_puts(b, "/bin/sh -c ");
        buf_puts(b, cmd->argv[0].sh);
    } else if (cmd->argc == 0) {
        buf_puts(b, ":");
    } else {
        /* exec: found on PATH, never a builtin, function or alias */
        buf_puts(b, "(exec");
        for (size_t i = 0; i < cmd->argc; i++) {
            buf_puts(b, " ");
            buf_puts(b, cmd->argv[i].sh);
        }
        buf_puts(b, ")");
    }
    buf_puts(b, " </dev/null >&2");
}

static void fail_render(struct buf *b, const char *stage, size_t i, const char *status,
                        const char *name)
{
    buf_printf(b, "smcp_fail %s %zu \"%s\"", stage, i, status);
    if (name) {
        buf_puts(b, " ");
        scripts_sh_quote(b, name);
    }
}

char *devcontainer_script(const struct devcontainer_plan *p)
{
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "cd ");
    scripts_sh_quote(&b, p->workspace);
    buf_puts(&b, " || exit 1\n");
    for (size_t i = 0; i < p->ndefaults; i++) {
        buf_printf(&b, "smcp_d%zu=", i + 1);
        scripts_sh_quote(&b, p->defaults[i]);
        buf_puts(&b, "\n");
    }
    for (size_t i = 0; i < p->nenv; i++) {
        if (p->env[i].value)
            buf_printf(&b, "%s=%s; export %s\n", p->env[i].name, p->env[i].value->sh,
                       p->env[i].name);
        else
            buf_printf(&b, "unset %s\n", p->env[i].name);
    }
    buf_puts(&b, "smcp_fail() { printf 'smcp-devcontainer-failed %s %s %s' \"$1\" \"$2\" \"$3\"; "
                 "[ $# -lt 4 ] || printf ' %s' \"$4\"; printf '\\n'; }\n");
    for (int s = 0; s < DEVCONTAINER_STAGES; s++) {
        const struct devcontainer_step *st = &p->steps[s];
        const char *stage = stage_keys[s];
        if (st->n == 0)
            continue;
        buf_printf(&b, "printf 'smcp-devcontainer-stage %%s\\n' %s\n", stage);
        if (!st->parallel) {
            command_render(&b, &st->cmds[0]);
            buf_puts(&b, " || { smcp_s=$?; ");
            fail_render(&b, stage, 0, "$smcp_s", NULL);
            buf_puts(&b, "; exit \"$smcp_s\"; }\n");
            continue;
        }
        for (size_t i = 0; i < st->n; i++) {
            command_render(&b, &st->cmds[i]);
            buf_printf(&b, " & smcp_p%zu=$!\n", i);
        }
        buf_puts(&b, "smcp_s=0\n");
        for (size_t i = 0; i < st->n; i++) {
            buf_printf(&b, "wait \"$smcp_p%zu\"; smcp_r=$?; if [ \"$smcp_r\" != 0 ]; then ", i);
            fail_render(&b, stage, i, "$smcp_r", st->cmds[i].name);
            buf_puts(&b, "; [ \"$smcp_s\" != 0 ] || smcp_s=$smcp_r; fi\n");
        }
        buf_puts(&b, "[ \"$smcp_s\" = 0 ] || exit \"$smcp_s\"\n");
    }
    buf_puts(&b, "exit 0\n");
    return buf_steal(&b, NULL);
}

/* libFuzzer target: devcontainer.json as a run's setup (src/runs/devcontainer.c) on what a
 * repository might hold. The input is the file's text.
 * - stripping JSONC keeps the length and the lines, and stripping again changes nothing;
 * - the plan keeps every cap (env entries and names, commands, arguments, notes), its env names
 *   are shell names not of the script's own, and a refusal says why and leaves no plan;
 * - the script is rendered, bounded by the substituted size's cap, and names every stage that
 *   has commands and no other. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runs/devcontainer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_strip(const char *text, size_t size)
{
    char *a = malloc(size ? size : 1), *b = malloc(size ? size : 1);
    struct err err;
    if (devcontainer_strip(text, size, a, &err) == 0) {
        for (size_t i = 0; i < size; i++)
            if ((text[i] == '\n') != (a[i] == '\n'))
                abort();
        if (devcontainer_strip(a, size, b, &err) != 0 || memcmp(a, b, size) != 0)
            abort();
    } else if (!err.msg[0]) {
        abort();
    }
    free(a);
    free(b);
}

static bool shell_name(const char *s)
{
    if (!*s || strchr("0123456789", *s) || strncmp(s, "smcp_", 5) == 0)
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
           strlen(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    check_strip(text, size);

    struct devcontainer_plan *p = NULL;
    struct err err = {0};
    if (devcontainer_parse(text, size, "/workspace/repo", &p, &err) < 0) {
        if (p || !err.msg[0] || err.code >= 0)
            abort();
        return 0;
    }
    if (size > DEVCONTAINER_INPUT_MAX || p->nenv > 2 * DEVCONTAINER_ENV_MAX ||
        p->nnotes > DEVCONTAINER_NOTES_MAX)
        abort();
    for (size_t i = 0; i < p->nenv; i++)
        if (!shell_name(p->env[i].name) || strlen(p->env[i].name) > DEVCONTAINER_NAME_MAX ||
            (p->env[i].value && (!p->env[i].value->text || !p->env[i].value->sh[0])))
            abort();
    char *s = devcontainer_script(p);
    if (!s || strlen(s) > 4 * DEVCONTAINER_TOTAL_MAX + (1 << 20))
        abort();
    for (int st = 0; st < DEVCONTAINER_STAGES; st++) {
        const struct devcontainer_step *step = &p->steps[st];
        if (step->n > DEVCONTAINER_COMMANDS_MAX || (step->n > 1 && !step->parallel))
            abort();
        for (size_t i = 0; i < step->n; i++) {
            const struct devcontainer_command *c = &step->cmds[i];
            if (c->argc > DEVCONTAINER_ARGS_MAX || (c->shell && c->argc != 1) ||
                (!!c->name != step->parallel))
                abort();
            if (!c->shell && c->argc && (!c->argv[0].text[0] || c->argv[0].text[0] == '-'))
                abort();
        }
        char line[64];
        snprintf(line, sizeof(line), "smcp-devcontainer-stage %%s\\n' %s\n",
                 devcontainer_stage_name((enum devcontainer_stage)st));
        if ((strstr(s, line) != NULL) != (step->n > 0))
            abort();
    }
    free(s);
    devcontainer_plan_free(p);
    return 0;
}

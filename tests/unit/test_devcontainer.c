/* devcontainer.json as a run's setup (src/runs/devcontainer.c): JSON with comments stripped to
 * JSON, the plan (env, the three lifecycle stages, the notes of what is skipped), its caps and
 * refusals, and the script it renders, run here by a real /bin/sh. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/buf.h"
#include "harness.h"
#include "runs/devcontainer.h"
#include "runs/runs_internal.h"

static struct devcontainer_plan *plan(const char *text, struct err *err)
{
    struct devcontainer_plan *p = NULL;
    err_clear(err);
    int rc = devcontainer_parse(text, strlen(text), "/work/my repo", &p, err);
    if (rc < 0 && p)
        CHECK_FAIL_("a plan on failure");
    return rc < 0 ? NULL : p;
}

/* The error message of text refused, "" if it was not refused. */
static const char *refused(const char *text)
{
    static struct err err;
    struct devcontainer_plan *p = plan(text, &err);
    if (p) {
        devcontainer_plan_free(p);
        return "";
    }
    return err.msg;
}

static bool has_note(const struct devcontainer_plan *p, const char *needle)
{
    for (size_t i = 0; i < p->nnotes; i++)
        if (strstr(p->notes[i], needle))
            return true;
    return false;
}

/* ---- JSONC ---- */

static char *strip(const char *in)
{
    static char out[1024];
    struct err err;
    size_t n = strlen(in);
    if (devcontainer_strip(in, n, out, &err) < 0)
        return NULL;
    out[n] = '\0';
    return out;
}

TEST(strip_comments_and_trailing_commas)
{
    CHECK_STR_EQ(strip("{\"a\": 1, // one\n\"b\": [1, 2,],}"),
                 "{\"a\": 1,       \n\"b\": [1, 2 ] }");
    CHECK_STR_EQ(strip("{/* x\ny */\"a\": 1 /* z */ , }"), "{    \n    \"a\": 1           }");
    /* comments' look-alikes in strings stay, escaped quotes do not end a string */
    CHECK_STR_EQ(strip("[\"http://x/*y*/\", \"a\\\"//b\", \"c\\\\\"//d\n]"),
                 "[\"http://x/*y*/\", \"a\\\"//b\", \"c\\\\\"   \n]");
    CHECK_STR_EQ(strip("[\"a,\" ]"), "[\"a,\" ]");
    /* a lone comma is not a trailing one */
    CHECK_STR_EQ(strip("[,]"), "[,]");
    CHECK_STR_EQ(strip("[1,,]"), "[1,,]");
    struct err err;
    char out[32];
    CHECK_INT_EQ(devcontainer_strip("{\n\n/* open", 10, out, &err), -EINVAL);
    CHECK_STR_EQ(err.msg, "line 3: comment not closed");
}

TEST(jsonc_parses_with_comments)
{
    struct err err;
    struct devcontainer_plan *p = plan("// a file\n{\n  /* the build */\n"
                                       "  \"postCreateCommand\": \"echo // not a comment\", // a\n"
                                       "  \"remoteEnv\": {\"Q\": \"say \\\"hi\\\" /* no */\",},\n"
                                       "}\n",
                                       &err);
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK_INT_EQ(p->steps[DEVCONTAINER_POST_CREATE].n, 1);
    CHECK_STR_EQ(p->steps[DEVCONTAINER_POST_CREATE].cmds[0].argv[0].text, "echo // not a comment");
    CHECK_INT_EQ(p->nenv, 1);
    CHECK_STR_EQ(p->env[0].value->text, "say \"hi\" /* no */");
    CHECK_INT_EQ(p->nnotes, 0);
    devcontainer_plan_free(p);
}

/* ---- the plan ---- */

TEST(three_forms_in_spec_order)
{
    struct err err;
    struct devcontainer_plan *p =
        plan("{\"postCreateCommand\": {\"a\": \"make\", \"b\": [\"npm\", \"ci\"]},"
             " \"onCreateCommand\": \"./setup.sh --x\","
             " \"updateContentCommand\": [\"pip\", \"install\", \"-r\", \"req s.txt\"]}",
             &err);
    CHECK(p != NULL);
    if (!p)
        return;
    const struct devcontainer_step *on = &p->steps[DEVCONTAINER_ON_CREATE],
                                   *up = &p->steps[DEVCONTAINER_UPDATE_CONTENT],
                                   *post = &p->steps[DEVCONTAINER_POST_CREATE];
    CHECK_INT_EQ(on->n, 1);
    CHECK(!on->parallel && on->cmds[0].shell && on->cmds[0].name == NULL);
    CHECK_STR_EQ(on->cmds[0].argv[0].sh, "'./setup.sh --x'");
    CHECK_INT_EQ(up->n, 1);
    CHECK(!up->parallel && !up->cmds[0].shell);
    CHECK_INT_EQ(up->cmds[0].argc, 4);
    CHECK_STR_EQ(up->cmds[0].argv[3].text, "req s.txt");
    CHECK_INT_EQ(post->n, 2);
    CHECK(post->parallel);
    CHECK_STR_EQ(post->cmds[0].name, "a");
    CHECK(post->cmds[0].shell);
    CHECK_STR_EQ(post->cmds[1].name, "b");
    CHECK_INT_EQ(post->cmds[1].argc, 2);
    CHECK_STR_EQ(devcontainer_stage_name(DEVCONTAINER_UPDATE_CONTENT), "updateContentCommand");
    char *s = devcontainer_script(p);
    /* the stages in order whatever the file's order */
    const char *a = strstr(s, "stage %s\\n' onCreateCommand"),
               *b = strstr(s, "stage %s\\n' updateContentCommand"),
               *c = strstr(s, "stage %s\\n' postCreateCommand");
    CHECK(a && b && c && a < b && b < c);
    CHECK_STR_CONTAINS(s, "(exec 'pip' 'install' '-r' 'req s.txt') </dev/null >&2");
    free(s);
    devcontainer_plan_free(p);
}

TEST(env_and_substitution)
{
    struct err err;
    struct devcontainer_plan *p =
        plan("{\"containerEnv\": {\"WS\": \"${containerWorkspaceFolder}/x\", \"B\": "
             "\"${containerWorkspaceFolderBasename}\"},"
             " \"remoteEnv\": {\"PATH\": \"${containerEnv:PATH}:/opt/bin\", \"GONE\": null,"
             " \"D\": \"${containerEnv:NOPE:fall back}\", \"H\": \"${localEnv:HOME}\","
             " \"L\": \"${localEnv:LANG:C.UTF-8}\", \"U\": \"${unknownVar} ${oops\"},"
             " \"postCreateCommand\": \"cd ${localWorkspaceFolder} && echo ${devcontainerId}\"}",
             &err);
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK_INT_EQ(p->nenv, 8);
    CHECK_STR_EQ(p->env[0].name, "WS");
    CHECK_STR_EQ(p->env[0].value->text, "/work/my repo/x");
    CHECK_STR_EQ(p->env[0].value->sh, "'/work/my repo/x'");
    CHECK_STR_EQ(p->env[1].value->text, "my repo");
    CHECK_STR_EQ(p->env[2].name, "PATH");
    CHECK_STR_EQ(p->env[2].value->text, "${containerEnv:PATH}:/opt/bin");
    CHECK_STR_EQ(p->env[2].value->sh, "\"${PATH}\"':/opt/bin'");
    CHECK_STR_EQ(p->env[3].name, "GONE");
    CHECK(p->env[3].value == NULL);
    CHECK_STR_EQ(p->env[4].value->sh, "\"${NOPE-$smcp_d1}\"");
    CHECK_INT_EQ(p->ndefaults, 1);
    CHECK_STR_EQ(p->defaults[0], "fall back");
    CHECK_STR_EQ(p->env[5].value->text, "");
    CHECK_STR_EQ(p->env[6].value->text, "C.UTF-8");
    CHECK_STR_EQ(p->env[7].value->text, "${unknownVar} ${oops");
    CHECK_STR_EQ(p->steps[DEVCONTAINER_POST_CREATE].cmds[0].argv[0].text,
                 "cd /work/my repo && echo ");
    CHECK(has_note(p, "empty: ${localEnv:HOME} in remoteEnv.H (the host's environment"));
    CHECK(has_note(p, "default used: ${localEnv:LANG} in remoteEnv.L"));
    CHECK(has_note(p, "${localWorkspaceFolder} in postCreateCommand"));
    CHECK(has_note(p, "empty: ${devcontainerId} in postCreateCommand"));
    CHECK_INT_EQ(p->nnotes, 4);
    devcontainer_plan_free(p);
}

TEST(skipped_keys_are_named)
{
    struct err err;
    struct devcontainer_plan *p =
        plan("{\"name\": \"x\", \"image\": \"ubuntu\", \"features\": {}, \"forwardPorts\": [3000],"
             " \"initializeCommand\": \"rm -rf ~\", \"postStartCommand\": \"x\","
             " \"postAttachCommand\": \"y\", \"mounts\": [], \"runArgs\": [],"
             " \"dockerComposeFile\": \"c.yml\", \"customizations\": {}, \"frobnicate\": 1}",
             &err);
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK_INT_EQ(p->nnotes, 11);
    CHECK_STR_EQ(p->notes[0], "skipped: image (the sandbox's own template is used)");
    CHECK(has_note(p, "skipped: features ("));
    CHECK(has_note(p, "skipped: forwardPorts (ports are not forwarded)"));
    CHECK(has_note(p, "skipped: initializeCommand (it would run on the host)"));
    CHECK(has_note(p, "skipped: postStartCommand ("));
    CHECK(has_note(p, "skipped: postAttachCommand ("));
    CHECK(has_note(p, "skipped: mounts ("));
    CHECK(has_note(p, "skipped: runArgs ("));
    CHECK(has_note(p, "skipped: dockerComposeFile ("));
    CHECK(has_note(p, "skipped: unknown key 'frobnicate'"));
    /* nothing of the host command reaches the script */
    char *s = devcontainer_script(p);
    CHECK(strstr(s, "rm -rf") == NULL);
    CHECK(strstr(s, "smcp-devcontainer-stage") == NULL);
    free(s);
    devcontainer_plan_free(p);

    /* many unknown keys: the notes keep their cap, the last says how many more */
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "{");
    for (int i = 0; i < 100; i++)
        buf_printf(&b, "%s\"k%d\": 1", i ? "," : "", i);
    buf_puts(&b, "}");
    p = plan(b.data, &err);
    buf_release(&b);
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK_INT_EQ(p->nnotes, DEVCONTAINER_NOTES_MAX);
    CHECK_STR_EQ(p->notes[DEVCONTAINER_NOTES_MAX - 1], "and 77 more not applied");
    devcontainer_plan_free(p);
}

TEST(malformed_refused_clearly)
{
    CHECK_STR_EQ(refused("{\n  \"image\": \"x\"\n  \"b\": 1\n}"),
                 "line 3, column 5: '}' expected near '\"b\"'");
    CHECK_STR_CONTAINS(refused(""), "line 1");
    CHECK_STR_EQ(refused("{ /* never closed }"), "line 1: comment not closed");
    CHECK_STR_EQ(refused("[1]"), "the top level is not an object");
    CHECK_STR_EQ(refused("{\"containerEnv\": [\"A=b\"]}"), "'containerEnv' is not an object");
    CHECK_STR_EQ(refused("{\"containerEnv\": {\"A-B\": \"x\"}}"),
                 "'containerEnv.A-B' is not a variable name this can set");
    CHECK_STR_EQ(refused("{\"remoteEnv\": {\"smcp_s\": \"x\"}}"),
                 "'remoteEnv.smcp_s' is not a variable name this can set");
    CHECK_STR_EQ(refused("{\"containerEnv\": {\"A\": 1}}"), "'containerEnv.A' is not a string");
    CHECK_STR_EQ(refused("{\"containerEnv\": {\"A\": null}}"), "'containerEnv.A' is not a string");
    CHECK_STR_EQ(refused("{\"remoteEnv\": {\"A\": true}}"),
                 "'remoteEnv.A' is not a string or null");
    CHECK_STR_EQ(refused("{\"postCreateCommand\": 42}"),
                 "'postCreateCommand' is not a string or an array of strings");
    CHECK_STR_EQ(refused("{\"onCreateCommand\": [\"make\", 1]}"),
                 "'onCreateCommand[1]' is not a string");
    CHECK_STR_EQ(refused("{\"onCreateCommand\": {\"x\": {\"y\": \"z\"}}}"),
                 "'onCreateCommand.x' is not a string or an array of strings");
    CHECK_STR_EQ(refused("{\"onCreateCommand\": [\"-x\"]}"),
                 "'onCreateCommand[0]': a program's name cannot be empty or begin with '-'");
    CHECK_STR_CONTAINS(refused("{\"onCreateCommand\": {\"a\\nb\": \"x\"}}"), "control characters");
    CHECK_STR_EQ(refused("{\"remoteEnv\": {\"A\": \"${containerEnv:a b}\"}}"),
                 "remoteEnv.A: '${containerEnv:a b}' does not name a variable");
    /* the empty array form does nothing, and is no error */
    CHECK_STR_EQ(refused("{\"onCreateCommand\": []}"), "");
    struct devcontainer_plan *p = NULL;
    struct err err;
    CHECK_INT_EQ(devcontainer_parse("{}", 2, "relative", &p, &err), -EINVAL);
    CHECK(p == NULL);
}

TEST(caps_refused)
{
    struct err err;
    struct devcontainer_plan *p = NULL;
    char *big = malloc(DEVCONTAINER_INPUT_MAX + 1);
    memset(big, ' ', DEVCONTAINER_INPUT_MAX + 1);
    big[0] = '{';
    big[DEVCONTAINER_INPUT_MAX] = '}';
    CHECK_INT_EQ(devcontainer_parse(big, DEVCONTAINER_INPUT_MAX + 1, "/w", &p, &err), -EMSGSIZE);
    CHECK_STR_EQ(err.msg, "larger than 65536 bytes");
    CHECK_INT_EQ(devcontainer_parse(big + 1, DEVCONTAINER_INPUT_MAX, "/w", &p, &err), -EINVAL);
    free(big);

    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "{\"containerEnv\": {");
    for (int i = 0; i <= DEVCONTAINER_ENV_MAX; i++)
        buf_printf(&b, "%s\"V%d\": \"x\"", i ? "," : "", i);
    buf_puts(&b, "}}");
    CHECK_STR_EQ(refused(b.data), "'containerEnv' has more than 64 entries");
    buf_reset(&b);
    buf_puts(&b, "{\"postCreateCommand\": {");
    for (int i = 0; i <= DEVCONTAINER_COMMANDS_MAX; i++)
        buf_printf(&b, "%s\"c%d\": \"true\"", i ? "," : "", i);
    buf_puts(&b, "}}");
    CHECK_STR_EQ(refused(b.data), "'postCreateCommand' has more than 16 entries");
    buf_reset(&b);
    buf_puts(&b, "{\"postCreateCommand\": [\"echo\"");
    for (int i = 0; i < DEVCONTAINER_ARGS_MAX; i++)
        buf_puts(&b, ", \"a\"");
    buf_puts(&b, "]}");
    CHECK_STR_EQ(refused(b.data), "'postCreateCommand' has more than 64 elements");
    buf_reset(&b);
    buf_puts(&b, "{\"onCreateCommand\": \"");
    for (int i = 0; i <= DEVCONTAINER_STRING_MAX; i++)
        buf_puts(&b, "x");
    buf_puts(&b, "\"}");
    CHECK_STR_EQ(refused(b.data), "onCreateCommand: longer than 8192 bytes");
    /* substitution cannot make the script grow past its cap */
    buf_reset(&b);
    buf_puts(&b, "{\"onCreateCommand\": {");
    for (int c = 0; c < 10; c++) {
        buf_printf(&b, "%s\"c%d\": \"", c ? "," : "", c);
        for (int i = 0; i < 200; i++)
            buf_puts(&b, "${containerWorkspaceFolder}");
        buf_puts(&b, "\"");
    }
    buf_puts(&b, "}}");
    char ws[DEVCONTAINER_WORKSPACE_MAX + 1];
    memset(ws, 'w', sizeof(ws) - 1);
    ws[0] = '/';
    ws[sizeof(ws) - 1] = '\0';
    CHECK_INT_EQ(devcontainer_parse(b.data, b.len, ws, &p, &err), -EMSGSIZE);
    CHECK_STR_CONTAINS(err.msg, "larger than 262144 bytes once substituted");
    CHECK(p == NULL);
    buf_release(&b);
}

/* ---- the script, run ---- */

/* Run script with /bin/sh; its stdout into out, its exit status returned. */
static int run(const char *script, char *out, size_t cap)
{
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b, "/bin/sh -c ");
    scripts_sh_quote(&b, script);
    buf_puts(&b, " 2>/dev/null");
    FILE *p = popen(b.data, "r");
    buf_release(&b);
    size_t n = p ? fread(out, 1, cap - 1, p) : 0;
    out[n] = '\0';
    int st = p ? pclose(p) : -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *dir, const char *name)
{
    static char data[512];
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(data, 1, sizeof(data) - 1, f) : 0;
    data[n] = '\0';
    if (f)
        fclose(f);
    return f ? data : NULL;
}

static char *script_of(const char *json, const char *ws)
{
    struct devcontainer_plan *p = NULL;
    struct err err;
    if (devcontainer_parse(json, strlen(json), ws, &p, &err) < 0) {
        CHECK_FAIL_("refused: %s", err.msg);
        return NULL;
    }
    char *s = devcontainer_script(p);
    devcontainer_plan_free(p);
    return s;
}

TEST(script_runs_the_stages)
{
    char dir[] = "/tmp/smcp-devc-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *s = script_of(
        "{\n"
        "  // the env, with what the sandbox has\n"
        "  \"containerEnv\": {\"GREETING\": \"it's \\\"here\\\"\", \"WS\": "
        "\"${containerWorkspaceFolder}\"},\n"
        "  \"remoteEnv\": {\"P2\": \"${containerEnv:GREETING}!\","
        " \"DEF\": \"${containerEnv:UNSET_HERE:d e f}\", \"HOME\": null},\n"
        "  \"onCreateCommand\": \"printf '%s|%s|%s|%s|%s' \\\"$GREETING\\\" \\\"$P2\\\" "
        "\\\"$DEF\\\" \\\"${HOME-unset}\\\" \\\"$(pwd)\\\" > env.txt\",\n"
        "  \"updateContentCommand\": [\"sh\", \"-c\", \"printf '%s|' \\\"$@\\\" > args.txt\","
        " \"sh\", \"two words\", \"it's \\\"quoted\\\"\", \"$HOME;`x`\", \"${containerEnv:WS}\"],\n"
        "  \"postCreateCommand\": {\"ok\": \"touch ok.txt\", \"bad\": [\"sh\", \"-c\", \"exit 3\"],"
        " \"also\": [\"touch\", \"also.txt\"], \"worse\": \"exit 5\"},\n"
        "}\n",
        dir);
    char out[1024];
    CHECK_INT_EQ(run(s, out, sizeof(out)), 3);
    CHECK_STR_EQ(out, "smcp-devcontainer-stage onCreateCommand\n"
                      "smcp-devcontainer-stage updateContentCommand\n"
                      "smcp-devcontainer-stage postCreateCommand\n"
                      "smcp-devcontainer-failed postCreateCommand 1 3 bad\n"
                      "smcp-devcontainer-failed postCreateCommand 3 5 worse\n");
    char want[512];
    snprintf(want, sizeof(want), "it's \"here\"|it's \"here\"!|d e f|unset|%s", dir);
    CHECK_STR_EQ(slurp(dir, "env.txt"), want);
    snprintf(want, sizeof(want), "two words|it's \"quoted\"|$HOME;`x`|%s|", dir);
    CHECK_STR_EQ(slurp(dir, "args.txt"), want);
    /* the parallel entries that succeeded all ran to their end */
    CHECK(slurp(dir, "ok.txt") != NULL);
    CHECK(slurp(dir, "also.txt") != NULL);
    free(s);

    /* a failing stage is the last: the array form finds no builtin, the next stage never runs */
    s = script_of("{\"onCreateCommand\": [\"cd\", \"/\"],"
                  " \"postCreateCommand\": \"touch never.txt\"}",
                  dir);
    CHECK_INT_EQ(run(s, out, sizeof(out)), 127);
    CHECK_STR_EQ(out, "smcp-devcontainer-stage onCreateCommand\n"
                      "smcp-devcontainer-failed onCreateCommand 0 127\n");
    CHECK(slurp(dir, "never.txt") == NULL);
    free(s);

    /* all well: exit 0, the commands' own output kept off stdout */
    s = script_of("{\"updateContentCommand\": \"echo noise; echo more >&2\","
                  " \"postCreateCommand\": {\"one\": [\"true\"], \"two\": \"true\"}}",
                  dir);
    CHECK_INT_EQ(run(s, out, sizeof(out)), 0);
    CHECK_STR_EQ(out, "smcp-devcontainer-stage updateContentCommand\n"
                      "smcp-devcontainer-stage postCreateCommand\n");
    free(s);

    /* a workspace that is not there: exit 1 before anything */
    s = script_of("{\"onCreateCommand\": \"true\"}", "/nonexistent/smcp-devc");
    CHECK_INT_EQ(run(s, out, sizeof(out)), 1);
    CHECK_STR_EQ(out, "");
    free(s);

    char rm[160];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
    CHECK_INT_EQ(system(rm), 0);
}

TEST_MAIN()

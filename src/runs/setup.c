/* A run's setup, between the workspace's preparation and the agent's start: the script run_task
 * was given (always), else, in a new workspace (a fresh clone, or the session's first run), the
 * script its user keeps for the repository (store_repo_setting_*: "user"), else the repository's
 * own: .sandbox-mcp/setup.sh, run by /bin/sh, else .devcontainer/devcontainer.json or
 * .devcontainer.json through the devcontainer leaf (devcontainer.h). It runs in the sandbox, in
 * the workspace, for at most RUN_SETUP_TIMEOUT_SECONDS, in the run's phase "setting up". Its
 * start, the devcontainer's notes and its end (exit status, duration, the last of its output,
 * also when it timed out) are events of the run's timeline; what became of it is the run's
 * setup_result (get_result's "setup").
 *
 * The rule of this file: a setup stops a run only when its user asked (on_setup_failure "stop"
 * for the repository): then a failed setup ends the run failed with its last lines, and no agent
 * starts. Otherwise one that fails, times out or cannot be read is told (the timeline,
 * get_result, and a notice before the agent's task) and the agent starts anyway; a cancel or the
 * run's own timeout ends the run here either way. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "runs/devcontainer.h"
#include "store/store.h"

#define SETUP_OUTPUT_KEPT 16384 /* bytes of the end of a setup's output kept */
#define SETUP_NOTICE_LINES 20   /* lines of that output the agent is told */
#define SETUP_NOTICE_MAX 2048   /* and bytes at most */
#define SETUP_ERROR_MAX 360     /* bytes of it in the error of a run the setup stopped */

/* Finds the repository's own setup in the workspace: "sh", "json PATH" and the file (up to one
 * byte past the leaf's cap, to tell it is too large), or "none". */
static const char probe_script[] =
    "if [ -f .sandbox-mcp/setup.sh ]; then echo sh; exit 0; fi\n"
    "for f in .devcontainer/devcontainer.json .devcontainer.json; do\n"
    "  if [ -f \"$f\" ]; then echo \"json $f\"; head -c 65537 \"$f\"; exit 0; fi\n"
    "done\n"
    "echo none\n";

/* Runs the script that comes on stdin with /bin/sh, stdin from /dev/null, and prints the last
 * SETUP_OUTPUT_KEPT bytes of what it wrote (both streams); its exit status is the script's. The
 * output goes to a file in $SMCP_SETUP_DIR, so that a setup stopped at its timeout (its whole
 * process group killed) leaves it for read_log_script. What the script left running in its
 * process group (this command leads its own) is then killed, so that nothing of the setup, which
 * holds the run's secrets in its environment, outlives it into the agent's phase; a process that
 * left the group (setsid, a daemon) is not found (docs/RUNS.md, "Secrets"). Zombies are skipped:
 * their parent or the init reaps them. */
static const char run_script[] =
    "mkdir -p \"$SMCP_SETUP_DIR\" || exit 125\n"
    "cat > \"$SMCP_SETUP_DIR/setup.sh\"\n"
    "/bin/sh \"$SMCP_SETUP_DIR/setup.sh\" </dev/null >\"$SMCP_SETUP_DIR/log\" 2>&1\n"
    "smcp_s=$?\n"
    "tail -c 16384 \"$SMCP_SETUP_DIR/log\"\n"
    "rm -rf \"$SMCP_SETUP_DIR\"\n"
    "smcp_round=0 smcp_left=1\n"
    "while [ -n \"$smcp_left\" ] && [ $smcp_round -lt 100 ]; do\n"
    "  smcp_left= smcp_round=$((smcp_round + 1))\n"
    "  for smcp_d in /proc/[0-9]*; do\n"
    "    [ \"${smcp_d#/proc/}\" = \"$$\" ] && continue\n"
    "    read -r smcp_st 2>/dev/null <\"$smcp_d/stat\" || continue\n"
    "    set -- ${smcp_st##*) }\n"
    "    if [ \"$3\" = \"$$\" ] && [ \"$1\" != Z ]; then\n"
    "      kill -KILL \"${smcp_d#/proc/}\" 2>/dev/null && smcp_left=1\n"
    "    fi\n"
    "  done\n"
    "done\n"
    "exit $smcp_s\n";

/* What a setup that timed out wrote, from its file. */
static const char read_log_script[] = "tail -c 16384 \"$SMCP_SETUP_DIR/log\" 2>/dev/null\n"
                                      "rm -rf \"$SMCP_SETUP_DIR\"\n";

/* The end of a step in the sandbox: false when the run is over instead (cancelled or timed out
 * meanwhile). */
static bool still_running(struct run *r)
{
    r->ex = NULL;
    if (r->phase == PH_FINISHING) {
        r->phase = PH_PREPARE;
        run_finish(r);
        return false;
    }
    return true;
}

/* The last SETUP_NOTICE_LINES lines of out, at most max bytes, trailing blanks left out: a
 * pointer into out and its length. */
static const char *last_lines(const char *out, size_t max, size_t *len)
{
    size_t n = strlen(out);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
        n--;
    size_t start = n, lines = 0;
    while (start > 0 && n - start < max) {
        if (out[start - 1] == '\n' && ++lines == SETUP_NOTICE_LINES)
            break;
        start--;
    }
    while (start < n && (out[start] & 0xc0) == 0x80) /* not mid-character */
        start++;
    *len = n - start;
    return out + start;
}

/* The setup's end: status (-1 when none), whether it timed out, err when it could not run, and
 * what it wrote; then the agent's start, or the run's failure. */
static void setup_ended(struct run *r, int status, bool timed_out, uint64_t ms, const char *output,
                        const struct err *err)
{
    bool failed = err || timed_out || status != 0;
    _cleanup_free_ char *out = xstrdup(err ? err->msg : output ? output : "");
    run_redact(r, out);
    size_t tail_len;
    const char *tail = last_lines(out, SETUP_NOTICE_MAX, &tail_len);
    char summary[512], how[128];
    if (err)
        snprintf(how, sizeof(how), "could not run: %s", err->msg);
    else if (timed_out)
        snprintf(how, sizeof(how), "timed out after %u s", r->e->cfg.setup_timeout_s);
    else if (failed)
        snprintf(how, sizeof(how), "failed with exit status %d", status);
    else
        snprintf(how, sizeof(how), "succeeded");
    snprintf(summary, sizeof(summary), "setup (%s) %s in %.1f s", r->setup_source, how,
             (double)ms / 1000.0);
    json_t *result =
        json_pack("{s:s, s:o, s:I, s:b, s:b}", "source", r->setup_source, "exit_status",
                  status >= 0 ? json_integer(status) : json_null(), "duration_ms", (json_int_t)ms,
                  "timed_out", timed_out, "failed", failed);
    json_t *raw = json_deep_copy(result);
    json_object_set_new(raw, "output", json_string(out));
    run_server_event(r, "setup_end", summary, raw);
    _cleanup_free_ char *stored = json_dumps(result, JSON_COMPACT);
    json_decref(result);
    struct err serr = {0};
    if (store_run_set_setup_result(r->e->st, r->id, stored, &serr) < 0)
        log_error("run setup not stored run=%s err=\"%s\"", r->id, serr.msg);
    log_info("run setup ended run=%s source=%s status=%d timed_out=%s ms=%llu", r->id,
             r->setup_source, status, timed_out ? "yes" : "no", (unsigned long long)ms);
    if (failed && r->setup_stop) {
        /* its user asked for no agent after a failed setup */
        size_t short_len;
        const char *short_tail = last_lines(out, SETUP_ERROR_MAX, &short_len);
        run_fail(r, "setup (%s) %s; its last lines:\n%.*s", r->setup_source, how, (int)short_len,
                 short_tail);
        return;
    }
    if (failed) {
        /* the agent is told, before its task */
        char *task = xasprintf("The repository's setup (%s) %s; its last lines:\n%.*s\n\n"
                               "(The setup failed before you started; take it into account.)\n\n%s",
                               r->setup_source, how, (int)tail_len, tail, r->task);
        free(r->task);
        r->task = task;
    }
    envs_after_setup(r, !failed);
}

static void on_log_read(void *ctx, struct sandbox_exec_result *res, const struct err *err)
{
    struct run *r = ctx;
    if (!still_running(r))
        return;
    setup_ended(r, -1, true, r->setup_ms, err ? "" : res->out, NULL);
}

/* $SMCP_SETUP_DIR for r's setup: a directory of the run's own in the sandbox's /tmp. */
static void setup_dir_env(struct run *r, char *out, size_t cap)
{
    snprintf(out, cap, "SMCP_SETUP_DIR=/tmp/sandbox-mcp-setup-%s", r->id);
}

static void on_setup_done(void *ctx, struct sandbox_exec_result *res, const struct err *err)
{
    struct run *r = ctx;
    if (!still_running(r))
        return;
    if (!err && res->timed_out) {
        /* its process group is gone, tail and all: what it wrote is read from its file */
        r->setup_ms = res->duration_ms;
        char dir[128];
        setup_dir_env(r, dir, sizeof(dir));
        const char *env[] = {dir, NULL};
        struct sandbox_exec_opts o = {.command = read_log_script,
                                      .cwd = r->workdir,
                                      .env = env,
                                      .timeout_ms = 30000,
                                      .output_bytes = SETUP_OUTPUT_KEPT + 1024};
        struct err rerr = {0};
        r->ex = sandbox_exec_start(r->sbx, &o, NULL, on_log_read, r, &rerr);
        if (!r->ex)
            on_log_read(r, NULL, &rerr);
        return;
    }
    int status = err ? -1 : res->signal ? 128 + res->signal : res->exit_code;
    setup_ended(r, status, false, err ? 0 : res->duration_ms, err ? NULL : res->out, err);
}

/* Run script (by /bin/sh in the workspace) as r's setup, from source. */
static void run_script_start(struct run *r, const char *source, const char *script)
{
    snprintf(r->setup_source, sizeof(r->setup_source), "%s", source);
    run_set_phase(r, "setting up", "setting up (%s)", source);
    run_server_event(r, "setup_start", "setup started", json_pack("{s:s}", "source", source));
    log_info("run setup started run=%s source=%s", r->id, source);
    char dir[128];
    setup_dir_env(r, dir, sizeof(dir));
    /* the run's secrets, in the environment only (never argv or the script) */
    const char *base[] = {dir, NULL};
    _cleanup_free_ const char **env = run_secret_env(r, false, base);
    struct sandbox_exec_opts o = {.command = run_script,
                                  .cwd = r->workdir,
                                  .env = env,
                                  .stdin_data = script,
                                  .stdin_len = strlen(script),
                                  .timeout_ms = (uint64_t)r->e->cfg.setup_timeout_s * 1000,
                                  .output_bytes = SETUP_OUTPUT_KEPT + 1024};
    struct err err = {0};
    r->ex = sandbox_exec_start(r->sbx, &o, NULL, on_setup_done, r, &err);
    if (!r->ex)
        on_setup_done(r, NULL, &err);
}

/* The devcontainer file read: its notes in the timeline, its script run; a file too large or
 * that does not parse is told and skipped. */
static void setup_devcontainer(struct run *r, const char *path, const char *text, size_t len)
{
    if (len > DEVCONTAINER_INPUT_MAX) {
        char msg[256];
        snprintf(msg, sizeof(msg), "setup: %s is over %d bytes; skipped", path,
                 DEVCONTAINER_INPUT_MAX);
        run_server_event(r, "setup_note", msg, json_pack("{s:s}", "source", path));
        run_setup_over(r);
        return;
    }
    struct devcontainer_plan *plan = NULL;
    struct err err = {0};
    if (devcontainer_parse(text, len, r->workdir, &plan, &err) < 0) {
        char msg[600];
        snprintf(msg, sizeof(msg), "setup: %s does not parse (%s); skipped", path, err.msg);
        run_server_event(r, "setup_note", msg, json_pack("{s:s}", "source", path));
        run_setup_over(r);
        return;
    }
    for (size_t i = 0; i < plan->nnotes; i++)
        run_server_event(r, "setup_note", plan->notes[i], json_pack("{s:s}", "source", path));
    _cleanup_free_ char *script = devcontainer_script(plan);
    devcontainer_plan_free(plan);
    run_script_start(r, path, script);
}

static void on_probed(void *ctx, struct sandbox_exec_result *res, const struct err *err)
{
    struct run *r = ctx;
    if (!still_running(r))
        return;
    if (err || res->exit_code != 0) {
        log_warn("run setup not looked for run=%s err=\"%s\"", r->id,
                 err ? err->msg : "probe failed");
        run_setup_over(r);
        return;
    }
    if (strcmp(res->out, "sh\n") == 0) {
        run_script_start(r, ".sandbox-mcp/setup.sh", "exec /bin/sh .sandbox-mcp/setup.sh\n");
        return;
    }
    const char *nl = strchr(res->out, '\n');
    if (strncmp(res->out, "json ", 5) != 0 || !nl) {
        run_setup_over(r);
        return;
    }
    char path[64];
    snprintf(path, sizeof(path), "%.*s", (int)(nl - res->out - 5), res->out + 5);
    setup_devcontainer(r, path, nl + 1, res->out_len - (size_t)(nl + 1 - res->out));
}

struct earlier {
    int64_t before;
    bool found;
};

static void on_session_run(const struct store_run *row, void *ctx)
{
    struct earlier *d = ctx;
    d->found = d->found || row->n < d->before;
}

/* Whether r's workspace is new: a fresh clone, or, without a repository, the session's first
 * run. */
static bool workspace_new(struct run *r)
{
    if (r->repository)
        return r->fresh;
    struct earlier d = {.before = r->n};
    struct store_run_list_opts o = {.user_id = r->user_id, .session_id = r->session_id, .limit = 2};
    struct err err = {0};
    bool more;
    if (store_run_list(r->e->st, &o, on_session_run, &d, &more, &err) < 0)
        return false;
    return !d.found;
}

void run_maintenance(struct run *r)
{
    if (r->env_fp && strstr(r->env_fp, " .sandbox-mcp/maintenance.sh\n")) {
        run_script_start(r, ".sandbox-mcp/maintenance.sh",
                         "exec /bin/sh .sandbox-mcp/maintenance.sh\n");
        return;
    }
    run_setup_over(r);
}

/* r's user's settings for its repository into *rs: false when there are none. */
static bool user_settings(struct run *r, struct store_repo_setting *rs)
{
    char slug[STORE_REPO_NAME_MAX + 1];
    if (!r->repository || !runs_repo_slug(r->repository, slug, sizeof(slug)))
        return false;
    struct err err = {0};
    int rc = store_repo_setting_get(r->e->st, r->user_id, slug, rs, &err);
    if (rc < 0 && rc != -ENOENT)
        log_warn("run repository settings not read run=%s err=\"%s\"", r->id, err.msg);
    return rc == 0;
}

void run_setup(struct run *r)
{
    struct store_repo_setting rs = {0};
    bool have = user_settings(r, &rs);
    r->setup_stop = have && rs.stop_on_failure;
    run_load_secrets(r);
    if (r->setup_arg) {
        store_repo_setting_release(&rs);
        run_script_start(r, "the setup argument", r->setup_arg);
        return;
    }
    if (!workspace_new(r)) {
        store_repo_setting_release(&rs);
        run_setup_over(r);
        return;
    }
    if (have && rs.setup) {
        run_script_start(r, "user", rs.setup);
        store_repo_setting_release(&rs);
        return;
    }
    store_repo_setting_release(&rs);
    struct sandbox_exec_opts o = {.command = probe_script,
                                  .cwd = r->workdir,
                                  .timeout_ms = 60000,
                                  .output_bytes = DEVCONTAINER_INPUT_MAX + 1024};
    struct err err = {0};
    r->ex = sandbox_exec_start(r->sbx, &o, NULL, on_probed, r, &err);
    if (!r->ex)
        on_probed(r, NULL, &err);
}

/* sandbox-mcp user repo ...: a user's settings for the runs on a repository (store_repo_setting_*):
 * a setup script, read from a file or standard input (never the command line, where every
 * process of the machine could read it), and what a failed setup does to the run. */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/config.h"
#include "base/utf8.h"
#include "base/util.h"
#include "runs/runs.h"
#include "store/store.h"

/* Read the script from fd into *out (malloc'd, NUL-terminated; NULL when empty): 0, or
 * EXIT_USAGE with the reason printed. */
static int read_script(int fd, const char *what, char **out)
{
    size_t cap = STORE_REPO_SETUP_MAX + 2, n = 0;
    _cleanup_free_ char *buf = xmalloc(cap);
    for (;;) {
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            fprintf(stderr, "sandbox-mcp: cannot read %s: %s\n", what, strerror(errno));
            return EXIT_USAGE;
        }
        if (k == 0)
            break;
        n += (size_t)k;
        if (n > STORE_REPO_SETUP_MAX) {
            fprintf(stderr,
                    "sandbox-mcp: the setup script in %s is over %d bytes; nothing was changed\n",
                    what, STORE_REPO_SETUP_MAX);
            return EXIT_USAGE;
        }
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n) || !utf8_valid(buf, n)) {
        fprintf(stderr,
                "sandbox-mcp: the setup script in %s is not UTF-8 text; nothing was changed\n",
                what);
        return EXIT_USAGE;
    }
    *out = n ? TAKE_PTR(buf) : NULL;
    return 0;
}

static void print_setting(const struct store_repo_setting *rs, void *ctx)
{
    char when[32];
    time_format_rfc3339(rs->updated_at, when);
    printf("%-40s %-10s %-9s %s\n", rs->repository, rs->stop_on_failure ? "stop" : "start",
           rs->setup ? "script" : "no script", when);
}

int cli_user_repo(const struct cli_command *cmd, const struct cli_opts *o)
{
    const char *action = o->nargs > 0 ? o->args[0] : "";
    bool set = strcmp(action, "set") == 0, show = strcmp(action, "show") == 0,
         del = strcmp(action, "delete") == 0, list = strcmp(action, "list") == 0;
    if (!set && !show && !del && !list)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "'user repo' takes set, show, delete or list");
    if ((list && o->nargs != 2) || (!list && o->nargs != 3))
        return cli_usage_error(cmd->name, cmd->usage, "'user repo %s' takes NAME%s", action,
                               list ? "" : " and a repository (OWNER/REPO)");
    if (o->ttl || o->public_url)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "--ttl and --public-url do not apply here");
    if (!set &&
        (o->setup_file || o->setup_stdin || o->on_setup_failure || o->fix_ci || o->steerers))
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "--setup-file, --setup-stdin, --on-setup-failure, --fix-ci and "
                               "--steerers apply to 'user repo set' only");
    if (o->steerers && !store_logins_valid(o->steerers))
        return cli_usage_error(cmd->name, cmd->usage,
                               "--steerers '%.100s' is not GitHub logins, comma-separated (at "
                               "most %d)",
                               o->steerers, STORE_STEERERS_MAX);
    if (o->fix_ci && strcmp(o->fix_ci, "on") != 0 && strcmp(o->fix_ci, "off") != 0)
        return cli_usage_error(cmd->name, cmd->usage, "--fix-ci '%s' is not on or off", o->fix_ci);
    if (o->setup_file && o->setup_stdin)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "--setup-file and --setup-stdin: one or the other");
    if (o->on_setup_failure && strcmp(o->on_setup_failure, "start") != 0 &&
        strcmp(o->on_setup_failure, "stop") != 0)
        return cli_usage_error(cmd->name, cmd->usage,
                               "--on-setup-failure '%s' is not start or stop", o->on_setup_failure);
    const char *name = o->args[1];
    char slug[STORE_REPO_NAME_MAX + 1] = "";
    if (!list && !runs_repo_slug(o->args[2], slug, sizeof(slug)))
        return cli_usage_error(cmd->name, cmd->usage,
                               "invalid repository '%s': use OWNER/REPO (letters, digits, '.', "
                               "'_' or '-'), or its URL",
                               o->args[2]);
    _cleanup_free_ char *script = NULL;
    bool script_given = o->setup_file || o->setup_stdin;
    if (o->setup_file) {
        _cleanup_close_ int fd = open(o->setup_file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, "sandbox-mcp: cannot open '%s': %s\n", o->setup_file, strerror(errno));
            return EXIT_USAGE;
        }
        int r = read_script(fd, o->setup_file, &script);
        if (r)
            return r;
    } else if (o->setup_stdin) {
        int r = read_script(STDIN_FILENO, "standard input", &script);
        if (r)
            return r;
    }
    struct config cfg = {0};
    struct store *st = NULL;
    int r = cli_open_config_store(o, &cfg, &st);
    if (r)
        return r;
    struct err err = {0};
    struct store_user u;
    struct store_repo_setting rs = {0};
    r = 1;
    if (store_user_find(st, name, &u, &err) < 0)
        goto out;
    if (list) {
        printf("%-40s %-10s %-9s %s\n", "REPOSITORY", "ON-FAILURE", "SETUP", "UPDATED");
        r = store_repo_setting_list(st, u.id, print_setting, NULL, &err) < 0 ? 1 : 0;
    } else if (del) {
        if (store_repo_setting_delete(st, u.id, slug, &err) == 0) {
            printf("settings of %s for %s deleted\n", name, slug);
            r = 0;
        }
    } else if (show) {
        if (store_repo_setting_get(st, u.id, slug, &rs, &err) == 0) {
            char when[32];
            time_format_rfc3339(rs.updated_at, when);
            printf("repository: %s\non setup failure: %s\nfix failing CI: %s\nsteerers: %s\n"
                   "updated: %s\n",
                   rs.repository, rs.stop_on_failure ? "stop" : "start", rs.fix_ci ? "on" : "off",
                   rs.steerers[0] ? rs.steerers : "(none)", when);
            if (rs.setup)
                printf("setup script (%zu bytes):\n%s%s", strlen(rs.setup), rs.setup,
                       rs.setup[strlen(rs.setup) - 1] == '\n' ? "" : "\n");
            else
                printf("setup script: none (the repository's own)\n");
            r = 0;
        }
    } else {
        /* what set does not name is kept */
        int got = store_repo_setting_get(st, u.id, slug, &rs, &err);
        if (got < 0 && got != -ENOENT)
            goto out;
        const char *setup = script_given ? script : got == 0 ? rs.setup : NULL;
        bool stop = o->on_setup_failure ? strcmp(o->on_setup_failure, "stop") == 0
                                        : got == 0 && rs.stop_on_failure;
        bool fix = o->fix_ci ? strcmp(o->fix_ci, "on") == 0 : got == 0 && rs.fix_ci;
        int rc = store_repo_setting_set(st, u.id, slug, setup, stop, time_now_ms(), &err);
        if (rc == 0)
            rc = store_repo_setting_set_fix_ci(st, u.id, slug, fix, &err);
        if (rc == 0 && o->steerers)
            rc = store_repo_setting_set_steerers(st, u.id, slug, o->steerers, &err);
        if (rc == 0) {
            printf("settings of %s for %s set: %s, on setup failure %s%s\n", name, slug,
                   setup ? "a setup script" : "no setup script", stop ? "stop" : "start",
                   fix ? ", fix failing CI" : "");
            r = 0;
        } else if (rc == -ENOSPC || rc == -EFBIG || rc == -EINVAL) {
            r = EXIT_USAGE;
        }
    }
out:
    if (r)
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
    store_repo_setting_release(&rs);
    cli_close_config_store(&cfg, st);
    return r;
}

/* sandbox-mcp user ...: users, their passwords and sign-in links, their network setting, their
 * own credentials and their notification targets. Rule: a secret (a password, a token) is read
 * from the terminal without echo or from one line of stdin, never from the command line, and
 * is wiped from memory before the command returns. */
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "auth/auth.h"
#include "auth/password.h"
#include "base/cleanup.h"
#include "base/config.h"
#include "base/seal.h"
#include "base/util.h"
#include "egress/egress.h"
#include "notify/notify.h"
#include "runs/runs.h"
#include "store/store.h"

const char cli_usage_user[] =
    "usage: sandbox-mcp user add NAME [--data-dir DIR]\n"
    "       sandbox-mcp user list [--data-dir DIR]\n"
    "       sandbox-mcp user passwd NAME [--data-dir DIR]\n"
    "       sandbox-mcp user login-link NAME [--ttl DURATION] [--public-url URL] [--data-dir DIR]\n"
    "       sandbox-mcp user network NAME [none|allowlist|public|default] [--data-dir DIR]\n"
    "       sandbox-mcp user credential set|delete NAME github [--data-dir DIR]\n"
    "       sandbox-mcp user credential list NAME [--data-dir DIR]\n"
    "       sandbox-mcp user secret set NAME SECRET [--repos PATTERNS] [--agent] [--data-dir DIR]\n"
    "       sandbox-mcp user secret list NAME [--data-dir DIR]\n"
    "       sandbox-mcp user secret delete NAME SECRET [--data-dir DIR]\n"
    "       sandbox-mcp user notify add NAME webhook|ntfy URL [--data-dir DIR]\n"
    "       sandbox-mcp user notify list NAME [--data-dir DIR]\n"
    "       sandbox-mcp user notify remove|test NAME ID [--data-dir DIR]\n"
    "       sandbox-mcp user repo set NAME OWNER/REPO [--setup-file PATH | --setup-stdin]\n"
    "                                   [--on-setup-failure start|stop] [--fix-ci on|off]\n"
    "                                   [--steerers LOGIN,...] [--data-dir DIR]\n"
    "       sandbox-mcp user repo show|delete NAME OWNER/REPO [--data-dir DIR]\n"
    "       sandbox-mcp user repo list NAME [--data-dir DIR]\n"
    "\n"
    "passwd sets the password NAME signs in with on the server's sign-in page (when a client\n"
    "such as Claude or ChatGPT connects through OAuth), and signs NAME out of every browser.\n"
    "It reads the password from the terminal, twice and without echo, or else as one line\n"
    "of standard input: at least 10 characters, at most 1024 bytes.\n"
    "login-link prints a link (PUBLIC_URL/login/link?t=CODE) that signs NAME in once within\n"
    "DURATION (30s, 10m, 2h; default 15m, at most 24h); CODE also works in the one-time code\n"
    "field of the sign-in page. The link goes to stdout, the explanation to stderr.\n"
    "network sets how much network NAME's sandboxes get: none, allowlist or public, never\n"
    "more than the server's SANDBOX_NETWORK (a wider mode is refused); default follows the\n"
    "server's. Without a mode it prints NAME's setting and what applies.\n"
    "credential set stores NAME's own token for a service (github: a fine-grained personal\n"
    "token or an app installation token), read from the terminal without echo or as one line\n"
    "of standard input, never from the command line. It is sealed with the key in\n"
    "DATA_DIR/secrets/credentials.key and never shown again; list names the services set.\n"
    "secret set stores an environment variable SECRET for NAME's runs: their setup sees it,\n"
    "and their agent only with --agent. The value is read from the terminal without echo (one\n"
    "line) or from standard input (all of it, one final line end dropped; at most 16 KiB),\n"
    "never from the command line, sealed like a credential and never shown again. --repos\n"
    "names the repositories it applies to, comma-separated: '*' (the default, every run) or\n"
    "owner/name on GitHub, where name may hold '*'. list shows names, repositories, whether\n"
    "the agent sees each, and dates; never values. At most 100 secrets, 256 KiB in all.\n"
    "notify add tells NAME at URL when a run ends or opens a pull request (at most 5 targets):\n"
    "webhook, a JSON POST to an https URL signed with a secret printed once now; ntfy, a push\n"
    "to an ntfy topic (https://ntfy.sh/TOPIC or a server of your own). test queues a test\n"
    "notification that the running server sends; list shows how the last ones went.\n"
    "repo set keeps NAME's settings for the runs on a repository (OWNER/REPO, or its URL): a\n"
    "setup script, read from PATH or standard input (never the command line; at most 64 KiB,\n"
    "empty for none), run before the agent in a new workspace in place of the repository's\n"
    "own; and what a failed setup does: start (the agent starts anyway and is told; the\n"
    "default) or stop (the run ends failed, with the setup's last lines); and whether new\n"
    "sessions' runs fix their pull requests' failing CI (--fix-ci on: run_task's fix_ci,\n"
    "unless a run says otherwise); and the GitHub logins besides NAME's own who may steer\n"
    "NAME's sessions on it from their pull requests (--steerers, \"\" for none). What set does\n"
    "not name is kept. At most 200 repositories a user.\n";

static void print_user(const struct store_user *u, void *ctx)
{
    (void)ctx;
    char created[32];
    time_format_rfc3339(u->created_at, created);
    printf("%-30s %-24s %s\n", u->id, u->name, created);
}

/* The terminal as it was before a prompt turned its echo off, put back on the way out however
 * that comes. */
static struct termios tty_saved;
static volatile sig_atomic_t tty_quiet;

static void tty_restore(void)
{
    if (tty_quiet) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &tty_saved);
        tty_quiet = 0;
    }
}

static void on_signal_restore_tty(int sig)
{
    tty_restore();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* One line of stdin into buf[PASSWORD_MAX_BYTES + 2], without its line end, read a byte at a
 * time so that nothing of it stays in a stdio buffer. Returns its length, -EFBIG when it is
 * longer than PASSWORD_MAX_BYTES, -ENODATA when stdin is empty, or -errno. */
static ssize_t read_secret_line(char *buf)
{
    size_t n = 0;
    bool got = false;
    for (;;) {
        char c;
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0 && !got)
            return -ENODATA;
        if (r == 0 || c == '\n')
            break;
        got = true;
        if (n > PASSWORD_MAX_BYTES)
            return -EFBIG; /* even with a '\r' to drop, no password is this long */
        buf[n++] = c;
    }
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    if (n > PASSWORD_MAX_BYTES)
        return -EFBIG;
    buf[n] = '\0';
    return (ssize_t)n;
}

/* Turn the terminal's echo off (tty_saved holds its settings), then prompt: in that order, so
 * that what is typed after the prompt is not shown. 0 or -errno. */
static int quiet_prompt(const char *prompt)
{
    struct termios quiet = tty_saved;
    quiet.c_lflag &= ~(tcflag_t)ECHO;
    tty_quiet = 1;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) < 0) {
        tty_quiet = 0;
        return -errno;
    }
    fputs(prompt, stderr);
    fflush(stderr);
    return 0;
}

/* quiet_prompt, and read a line. */
static ssize_t prompt_secret(const char *prompt, char *buf)
{
    int q = quiet_prompt(prompt);
    if (q < 0)
        return q;
    ssize_t n = read_secret_line(buf);
    tty_restore();
    fputc('\n', stderr);
    return n;
}

/* The new password for name into pw[PASSWORD_MAX_BYTES + 2]: from the terminal, asked twice,
 * or one line of stdin. Returns its length; or -1 after saying why, with the exit status in
 * *status. */
static ssize_t read_new_password(const char *name, char *pw, int *status)
{
    ssize_t n;
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &tty_saved) < 0) {
        n = read_secret_line(pw);
    } else {
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
        for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
            signal(sigs[i], on_signal_restore_tty);
        _cleanup_free_ char *prompt = xasprintf("New password for %s: ", name);
        n = prompt_secret(prompt, pw);
        /* one that will be refused is refused before it is asked for again */
        if (n >= 0 && password_acceptable(pw, (size_t)n, NULL) == 0) {
            char again[PASSWORD_MAX_BYTES + 2];
            ssize_t m = prompt_secret("Repeat it: ", again);
            bool same = m == n && sodium_memcmp(pw, again, (size_t)n) == 0;
            sodium_memzero(again, sizeof(again));
            if (m >= 0 && !same) {
                fputs("sandbox-mcp: the two passwords differ; nothing was changed\n", stderr);
                *status = EXIT_USAGE;
                return -1;
            }
            if (m < 0)
                n = m;
        }
    }
    if (n >= 0)
        return n;
    *status = n == -ENODATA || n == -EFBIG ? EXIT_USAGE : 1;
    if (n == -ENODATA)
        fputs("sandbox-mcp: no password on standard input\n", stderr);
    else if (n == -EFBIG)
        fprintf(stderr, "sandbox-mcp: the password is longer than %d bytes\n", PASSWORD_MAX_BYTES);
    else
        fprintf(stderr, "sandbox-mcp: cannot read the password: %s\n", strerror((int)-n));
    return -1;
}

static int user_passwd(struct store *st, const char *name)
{
    struct err err = {0};
    struct store_user u;
    if (store_user_find(st, name, &u, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return 1;
    }
    char pw[PASSWORD_MAX_BYTES + 2], hash[crypto_pwhash_STRBYTES];
    int status = 1;
    ssize_t n = read_new_password(name, pw, &status);
    if (n < 0)
        goto out;
    if (password_acceptable(pw, (size_t)n, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s; nothing was changed\n", err.msg);
        status = EXIT_USAGE;
        goto out;
    }
    int ended;
    status = 1;
    if (password_hash(pw, (size_t)n, hash, &err) < 0 ||
        store_user_set_password(st, name, hash, &err) < 0 ||
        (ended = store_web_session_delete_user(st, u.id, &err)) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        goto out;
    }
    printf("password set for %s\n", name);
    if (ended > 0)
        fprintf(stderr, "signed %s out of %d browser session%s\n", name, ended,
                ended == 1 ? "" : "s");
    status = 0;
out:
    sodium_memzero(pw, sizeof(pw));
    sodium_memzero(hash, sizeof(hash));
    return status;
}

/* "15 minutes", "2 hours", "90 seconds". */
static void format_duration(int64_t s, char out[32])
{
    const char *unit = "second";
    if (s % 3600 == 0)
        s /= 3600, unit = "hour";
    else if (s % 60 == 0)
        s /= 60, unit = "minute";
    snprintf(out, 32, "%lld %s%s", (long long)s, unit, s == 1 ? "" : "s");
}

static int user_login_link(const struct config *cfg, struct store *st, const char *name,
                           int64_t ttl)
{
    struct err err = {0};
    char token[STORE_LINK_LEN + 1], within[32];
    if (store_login_link_create(st, name, ttl, token, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return 1;
    }
    format_duration(ttl, within);
    printf("%s/login/link?t=%s\n", cfg->public_url, token);
    fflush(stdout);
    fprintf(stderr,
            "Open it once, within %s, to sign in as %s; or paste the code after t= into the "
            "one-time code field of the sign-in page.\n",
            within, name);
    if (!cfg->public_url_set)
        fprintf(stderr, "note: PUBLIC_URL is not set, so the link names the listen address; set "
                        "it (or pass --public-url) to the address browsers reach\n");
    explicit_bzero(token, sizeof(token));
    return 0;
}

/* Show NAME's network setting, or set it (arg "default" clears it) to mode, which may not be
 * wider than the server's. */
static int user_network(const struct config *cfg, struct store *st, const char *name,
                        const char *arg, enum egress_mode mode)
{
    struct err err = {0};
    struct egress_policy *policy = NULL;
    if (egress_policy_new(cfg, &policy, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return 2;
    }
    enum egress_mode server = egress_policy_mode(policy);
    struct store_user u;
    char mine[STORE_NETWORK_MAX];
    int r = 1;
    if (store_user_find(st, name, &u, &err) < 0)
        goto out;
    if (arg) {
        bool clear = strcmp(arg, "default") == 0;
        if (!clear && egress_mode_narrow(mode, server) != mode) {
            err_set(&err, -EINVAL,
                    "'%s' is wider than this server's SANDBOX_NETWORK ('%s'); a user's setting "
                    "can only narrow it",
                    arg, egress_mode_name(server));
            goto out;
        }
        if (store_user_network_set(st, name, clear ? NULL : egress_mode_name(mode), &err) < 0)
            goto out;
    }
    if (store_user_network_get(st, u.id, mine, &err) < 0)
        goto out;
    printf("%s: network %s (user setting: %s; server: %s)\n", name,
           egress_mode_name(runs_network_bound(policy, st, u.id)), mine[0] ? mine : "default",
           egress_mode_name(server));
    r = 0;
out:
    if (r)
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
    egress_policy_free(policy);
    return r;
}

static void print_credential(const struct store_credential *c, void *ctx)
{
    (void)ctx;
    char when[32];
    time_format_rfc3339(c->updated_at, when);
    printf("%-10s set %s\n", c->service, when);
}

/* user credential set|delete NAME SERVICE, user credential list NAME. */
static int cmd_user_credential(const struct cli_command *cmd, const struct cli_opts *o)
{
    const char *action = o->nargs > 0 ? o->args[0] : "";
    bool set = strcmp(action, "set") == 0, del = strcmp(action, "delete") == 0,
         list = strcmp(action, "list") == 0;
    if (!set && !del && !list)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "'user credential' takes set, delete or list");
    if ((list && o->nargs != 2) || (!list && o->nargs != 3))
        return cli_usage_error(
            cmd->name, cmd->usage,
            "'user credential %s' takes NAME%s (a token is read from stdin, never "
            "from the command line)",
            action, list ? "" : " and a service (github)");
    if (o->ttl || o->public_url)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "--ttl and --public-url do not apply here");
    const char *name = o->args[1], *service = list ? NULL : o->args[2];
    if (service && strcmp(service, "github") != 0)
        return cli_usage_error(cmd->name, cmd->usage,
                               "unknown service '%s': the only one is github", service);
    struct config cfg = {0};
    struct store *st = NULL;
    int r = cli_open_config_store(o, &cfg, &st);
    if (r)
        return r;
    struct err err = {0};
    struct store_user u;
    char token[PASSWORD_MAX_BYTES + 2];
    unsigned char key[SEAL_KEY_BYTES];
    r = 1;
    if (store_user_find(st, name, &u, &err) < 0)
        goto out;
    if (list) {
        r = store_credential_list(st, u.id, print_credential, NULL, &err) < 0 ? 1 : 0;
        goto out;
    }
    if (del) {
        if (store_credential_delete(st, u.id, service, &err) < 0)
            goto out;
        printf("%s credential of %s deleted\n", service, name);
        r = 0;
        goto out;
    }
    ssize_t n;
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &tty_saved) == 0) {
        _cleanup_free_ char *prompt = xasprintf("%s token for %s: ", service, name);
        n = prompt_secret(prompt, token);
    } else {
        n = read_secret_line(token);
    }
    const char *why = n == -ENODATA || n == 0 ? "no token on standard input"
                      : n == -EFBIG           ? "the token is longer than 255 characters"
                      : n < 0                 ? strerror((int)-n)
                                              : store_credential_problem(token, (size_t)n);
    if (why) {
        err_set(&err, -EINVAL, "%s; nothing was changed", why);
        r = EXIT_USAGE;
        goto out;
    }
    if (store_credential_key_load(cfg.data_dir, key, &err) < 0 ||
        store_credential_seal(st, key, u.id, service, token, (size_t)n, time_now_ms(), &err) < 0)
        goto out;
    printf("%s credential of %s set (sealed; it is not shown again)\n", service, name);
    r = 0;
out:
    if (r == 1 || (r == EXIT_USAGE && err.msg[0]))
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
    sodium_memzero(token, sizeof(token));
    sodium_memzero(key, sizeof(key));
    cli_close_config_store(&cfg, st);
    return r;
}

static void print_target(const struct store_notify_target *t, void *ctx)
{
    (void)ctx;
    char when[32], shown[STORE_NOTIFY_URL_MAX + 8];
    notify_url_shown(t->url, shown, sizeof(shown));
    printf("%-30s %-8s %s\n", t->id, t->kind, shown);
    time_format_rfc3339(t->created_at, when);
    printf("    added %s", when);
    if (t->last_status[0]) {
        time_format_rfc3339(t->last_at, when);
        printf("; last %s %s%s%s", t->last_status, when, t->last_error[0] ? ": " : "",
               t->last_error);
    }
    if (t->pending)
        printf("; %lld waiting%s%s", (long long)t->pending,
               t->pending_error[0] ? ", last try: " : "", t->pending_error);
    printf("\n");
}

/* user notify add NAME KIND URL | list NAME | remove NAME ID | test NAME ID */
static int cmd_user_notify(const struct cli_command *cmd, const struct cli_opts *o)
{
    const char *action = o->nargs > 0 ? o->args[0] : "";
    bool add = strcmp(action, "add") == 0, list = strcmp(action, "list") == 0,
         remove = strcmp(action, "remove") == 0, test = strcmp(action, "test") == 0;
    if (!add && !list && !remove && !test)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "'user notify' takes add, list, remove or test");
    if ((add && o->nargs != 4) || (list && o->nargs != 2) || ((remove || test) && o->nargs != 3))
        return cli_usage_error(cmd->name, cmd->usage, "'user notify %s' takes NAME%s", action,
                               add    ? ", webhook or ntfy, and a URL"
                               : list ? ""
                                      : " and a target ID (see 'user notify list NAME')");
    if (o->ttl || o->public_url)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "--ttl and --public-url do not apply here");
    const char *name = o->args[1];
    enum notify_kind kind = NOTIFY_WEBHOOK;
    if (add && notify_kind_parse(o->args[2], &kind) < 0)
        return cli_usage_error(cmd->name, cmd->usage, "unknown target kind '%s': webhook or ntfy",
                               o->args[2]);
    struct config cfg = {0};
    struct store *st = NULL;
    int r = cli_open_config_store(o, &cfg, &st);
    if (r)
        return r;
    struct err err = {0};
    struct store_user u;
    unsigned char key[SEAL_KEY_BYTES];
    char secret[NOTIFY_SECRET_LEN + 1] = "", event_id[64];
    struct store_notify_target t;
    struct notify_config nc; /* checked already by cli_open_config_store */
    r = 1;
    if (notify_config_load(&cfg, &nc, &err) < 0 || store_user_find(st, name, &u, &err) < 0)
        goto out;
    if (list) {
        r = store_notify_target_list(st, u.id, print_target, NULL, &err) < 0 ? 1 : 0;
    } else if (remove) {
        if (store_notify_target_delete(st, u.id, o->args[2], &err) == 0) {
            printf("notification target %s of %s removed\n", o->args[2], name);
            r = 0;
        }
    } else if (test) {
        if (store_notify_test(st, u.id, o->args[2], time_now_ms(), event_id, &err) == 0) {
            printf("test notification %s queued for %s; the running server sends it within a "
                   "few seconds ('user notify list %s' shows how it went)\n",
                   event_id, o->args[2], name);
            r = 0;
        }
    } else if (notify_url_check(o->args[3], kind, nc.allow_loopback_http, NULL, &err) < 0) {
        err_wrap(&err, "not added");
        r = EXIT_USAGE;
    } else {
        if (kind == NOTIFY_WEBHOOK)
            notify_secret_new(secret);
        if (store_credential_key_load(cfg.data_dir, key, &err) == 0 &&
            store_notify_target_add(st, key, u.id, notify_kind_name(kind), o->args[3],
                                    secret[0] ? secret : NULL, &t, &err) == 0) {
            printf("%s target %s added for %s\n", t.kind, t.id, name);
            if (secret[0])
                printf("signing secret (shown only now; keep it where the receiver checks the "
                       "%s header):\n%s\n",
                       NOTIFY_SIGNATURE_HEADER, secret);
            r = 0;
        }
    }
out:
    if (r)
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
    sodium_memzero(secret, sizeof(secret));
    sodium_memzero(key, sizeof(key));
    cli_close_config_store(&cfg, st);
    return r;
}

/* What the subcommands that take NAME and act on the store get, once their arguments are
 * checked and the configuration and store are open. */
struct user_call {
    struct config *cfg;
    struct store *st;
    const struct cli_opts *o;
    int64_t ttl;           /* login-link */
    enum egress_mode mode; /* network, with a mode other than default */
};

static int user_add(const struct user_call *c)
{
    struct err err = {0};
    struct store_user u;
    if (store_user_add(c->st, c->o->args[0], &u, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return 1;
    }
    printf("created user %s (%s)\n", u.name, u.id);
    return 0;
}

static int user_list(const struct user_call *c)
{
    struct err err = {0};
    printf("%-30s %-24s %s\n", "ID", "NAME", "CREATED");
    if (store_user_list(c->st, print_user, NULL, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static int user_passwd_call(const struct user_call *c)
{
    /* the hash takes SIGNIN_PASSWORD_MEMORY_MB, checked with every command's settings */
    struct auth_config ac;
    struct err err = {0};
    if (auth_config_load(c->cfg, &ac, &err) < 0) {
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
        return EXIT_USAGE;
    }
    password_set_memory_mb(ac.signin_password_memory_mb);
    return user_passwd(c->st, c->o->args[0]);
}

static int user_login_link_call(const struct user_call *c)
{
    return user_login_link(c->cfg, c->st, c->o->args[0], c->ttl);
}

static int user_network_call(const struct user_call *c)
{
    return user_network(c->cfg, c->st, c->o->args[0], c->o->nargs == 2 ? c->o->args[1] : NULL,
                        c->mode);
}

static void print_secret(const struct store_secret *s, const char *value, size_t n, void *ctx)
{
    (void)value, (void)n, (void)ctx;
    char created[32], updated[32];
    time_format_rfc3339(s->created_at, created);
    time_format_rfc3339(s->updated_at, updated);
    printf("%-24s repos=%s agent=%s size=%zu created=%s updated=%s\n", s->name, s->repos,
           s->agent ? "yes" : "no", s->size, created, updated);
}

/* A secret's value into buf[STORE_SECRET_VALUE_MAX + 2]: from a terminal one line without
 * echo, else all of stdin with one final line end dropped, read without stdio buffering.
 * Returns its length, -EFBIG when it is too long, -ENODATA when there is none, or -errno. */
static ssize_t read_secret_value(const char *prompt, char *buf)
{
    bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &tty_saved) == 0;
    int q = tty ? quiet_prompt(prompt) : 0;
    if (q < 0)
        return q;
    size_t n = 0;
    ssize_t rc = 0;
    for (;;) {
        char c;
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0 || (tty && c == '\n'))
            break;
        if (n > STORE_SECRET_VALUE_MAX) {
            rc = -EFBIG;
            break;
        }
        buf[n++] = c;
    }
    if (tty) {
        tty_restore();
        fputc('\n', stderr);
    }
    if (rc < 0)
        return rc;
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    if (n > STORE_SECRET_VALUE_MAX)
        return -EFBIG;
    buf[n] = '\0';
    return n ? (ssize_t)n : -ENODATA;
}

/* user secret set|delete NAME SECRET [--repos PATTERNS] [--agent], user secret list NAME. */
static int cmd_user_secret(const struct cli_command *cmd, const struct cli_opts *o)
{
    const char *action = o->nargs > 0 ? o->args[0] : "";
    bool set = strcmp(action, "set") == 0, del = strcmp(action, "delete") == 0,
         list = strcmp(action, "list") == 0;
    if (!set && !del && !list)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "'user secret' takes set, delete or list");
    if ((list && o->nargs != 2) || (!list && o->nargs != 3))
        return cli_usage_error(cmd->name, cmd->usage,
                               "'user secret %s' takes NAME%s (a value is read from stdin, never "
                               "from the command line)",
                               action, list ? "" : " and the secret's name");
    if (o->ttl || o->public_url || (!set && (o->repos || o->agent)))
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "only 'user secret set' takes --repos and --agent");
    const char *name = o->args[1], *secret = list ? NULL : o->args[2];
    const char *why = set ? store_secret_name_problem(secret) : NULL;
    if (why)
        return cli_usage_error(cmd->name, cmd->usage, "secret '%.64s': %s", secret, why);
    char repos[STORE_SECRET_REPOS_TEXT];
    struct err err = {0};
    if (set && store_secret_repos_normalize(o->repos, repos, &err) < 0)
        return cli_usage_error(cmd->name, cmd->usage, "%s", err.msg);
    struct config cfg = {0};
    struct store *st = NULL;
    int r = cli_open_config_store(o, &cfg, &st);
    if (r)
        return r;
    struct store_user u;
    _cleanup_free_ char *value = NULL, *prompt = NULL;
    unsigned char key[SEAL_KEY_BYTES] = {0};
    r = 1;
    if (store_user_find(st, name, &u, &err) < 0)
        goto out;
    if (list) {
        r = store_secret_list(st, NULL, u.id, print_secret, NULL, &err) < 0 ? 1 : 0;
        goto out;
    }
    if (del) {
        if (store_secret_delete(st, u.id, secret, &err) < 0)
            goto out;
        printf("secret %s of %s deleted\n", secret, name);
        r = 0;
        goto out;
    }
    value = xmalloc(STORE_SECRET_VALUE_MAX + 2);
    prompt = xasprintf("value of %s for %s: ", secret, name);
    ssize_t n = read_secret_value(prompt, value);
    why = n == -ENODATA ? "no value on standard input"
          : n == -EFBIG ? "the value is longer than 16384 bytes"
          : n < 0       ? strerror((int)-n)
                        : store_secret_value_problem(value, (size_t)n);
    if (why) {
        err_set(&err, -EINVAL, "%s; nothing was changed", why);
        r = EXIT_USAGE;
        goto out;
    }
    struct store_secret s = {.agent = o->agent};
    snprintf(s.name, sizeof(s.name), "%s", secret);
    snprintf(s.repos, sizeof(s.repos), "%s", repos);
    if (store_credential_key_load(cfg.data_dir, key, &err) < 0 ||
        store_secret_seal(st, key, u.id, &s, value, (size_t)n, time_now_ms(), &err) < 0)
        goto out;
    printf("secret %s of %s set for %s%s (sealed; it is not shown again)\n", secret, name, repos,
           o->agent ? ", the agent sees it" : "");
    r = 0;
out:
    if (value)
        sodium_memzero(value, STORE_SECRET_VALUE_MAX + 2);
    sodium_memzero(key, sizeof(key));
    if (r == 1 || (r == EXIT_USAGE && err.msg[0]))
        fprintf(stderr, "sandbox-mcp: %s\n", err.msg);
    cli_close_config_store(&cfg, st);
    return r;
}

/* The user subcommands: those with run parse their own arguments (credential, notify); the
 * others share the checks of cli_user and act with the store open. */
static const struct user_sub {
    const char *name;
    int (*run)(const struct cli_command *cmd, const struct cli_opts *o);
    int (*act)(const struct user_call *c);
} user_subs[] = {
    {"add", NULL, user_add},
    {"list", NULL, user_list},
    {"passwd", NULL, user_passwd_call},
    {"login-link", NULL, user_login_link_call},
    {"network", NULL, user_network_call},
    {"credential", cmd_user_credential, NULL},
    {"notify", cmd_user_notify, NULL},
    {"repo", cli_user_repo, NULL},
    {"secret", cmd_user_secret, NULL},
};

int cli_user(const struct cli_command *cmd, int argc, char **argv)
{
    static const int allowed[] = {OPT_DATA_DIR,         OPT_ENV_FILE,   OPT_TTL,
                                  OPT_PUBLIC_URL,       OPT_SETUP_FILE, OPT_SETUP_STDIN,
                                  OPT_ON_SETUP_FAILURE, OPT_REPOS,      OPT_AGENT,
                                  OPT_FIX_CI,           OPT_STEERERS,   0};
    const char *sub = NULL;
    struct cli_opts o = {0};
    int r = cli_parse_sub(cmd->name, cmd->usage,
                          "'add', 'list', 'passwd', 'login-link', 'network', 'credential', "
                          "'notify', 'repo' or 'secret'",
                          argc, argv, allowed, &o, &sub);
    if (r)
        return r == 1 ? 0 : r;
    const struct user_sub *us = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(user_subs) && !us; i++)
        if (strcmp(sub, user_subs[i].name) == 0)
            us = &user_subs[i];
    if (!us)
        return cli_usage_error(cmd->name, cmd->usage, "unknown subcommand '%s'", sub);
    if (us->run != cli_user_repo &&
        (o.setup_file || o.setup_stdin || o.on_setup_failure || o.fix_ci || o.steerers))
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "--setup-file, --setup-stdin, --on-setup-failure, --fix-ci and "
                               "--steerers apply to 'user repo set' only");
    if ((o.repos || o.agent) && us->run != cmd_user_secret)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "--repos and --agent apply to 'user secret set' only");
    if (us->run)
        return us->run(cmd, &o);
    bool list = us->act == user_list, link = us->act == user_login_link_call,
         network = us->act == user_network_call;
    if (network && (o.nargs < 1 || o.nargs > 2))
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "'user network' takes NAME and, to change it, a mode");
    struct user_call c = {.o = &o, .mode = EGRESS_MODE_NONE};
    if (network && o.nargs == 2 && strcmp(o.args[1], "default") != 0 &&
        egress_mode_parse(o.args[1], &c.mode) < 0)
        return cli_usage_error(cmd->name, cmd->usage,
                               "network mode '%s' is not none, allowlist, public or default",
                               o.args[1]);
    if (!list && !network && o.nargs != 1)
        return cli_usage_error(cmd->name, cmd->usage, "'user %s' takes exactly one NAME", sub);
    if (list && o.nargs != 0)
        return cli_usage_error(cmd->name, cmd->usage, "unexpected argument '%s'", o.args[0]);
    if (!link && o.ttl)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "--ttl applies to 'user login-link' only");
    if (!link && o.public_url)
        return cli_usage_error(cmd->name, cmd->usage, "%s",
                               "--public-url applies to 'user login-link' only");
    if (!list && !store_user_name_valid(o.args[0]))
        return cli_usage_error(
            cmd->name, cmd->usage,
            "invalid user name '%s': use letters, digits, '.', '_' or '-' (at most 64)", o.args[0]);
    c.ttl = o.ttl ? cli_parse_duration(o.ttl) : 15 * 60;
    if (link && (c.ttl <= 0 || c.ttl > STORE_LINK_TTL_MAX_S))
        return cli_usage_error(cmd->name, cmd->usage,
                               "--ttl '%s' is not a duration between 1s and 24h", o.ttl);
    struct config cfg = {0};
    if ((r = cli_open_config_store(&o, &cfg, &c.st)))
        return r;
    c.cfg = &cfg;
    r = us->act(&c);
    cli_close_config_store(&cfg, c.st);
    return r;
}

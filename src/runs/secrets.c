/* A run's secrets (the user's, store/user_secrets.c): those that apply to the run's repository
 * opened when the run is taken and again when its setup starts, handed to the setup's
 * environment (every one) and to the agent's (only those marked agent), and known to the run's
 * redactor, which takes every value (and its JSON-escaped spelling) out of what the run keeps and
 * shows: events, summaries, the diff, the pull request, notifications and the server's log.
 *
 * The rule of this file: a value is in memory only here (wiped when the run is freed) and in the
 * environments it builds; it never goes into argv, a script's text or a file of the host. Values
 * shorter than SCRIPTS_REDACT_MIN bytes are not redacted (they would blot out ordinary words),
 * which docs/RUNS.md tells. */
#include "runs/runs_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "store/store.h"

struct loading {
    struct run *r;
    const char *repo;
};

static void add_pattern(struct run *r, const char *s, size_t n)
{
    if (n < SCRIPTS_REDACT_MIN)
        return;
    for (size_t i = 0; i < r->nredact; i++)
        if (strcmp(r->redact[i], s) == 0)
            return;
    r->redact = xrealloc(r->redact, (r->nredact + 1) * sizeof(char *));
    r->redact[r->nredact++] = xstrndup(s, n);
}

static void on_secret(const struct store_secret *s, const char *value, size_t n, void *ctx)
{
    struct loading *l = ctx;
    struct run *r = l->r;
    if (!store_secret_applies(s->repos, l->repo))
        return;
    r->secrets = xrealloc(r->secrets, (r->nsecrets + 1) * sizeof(*r->secrets));
    struct run_secret *rs = &r->secrets[r->nsecrets++];
    snprintf(rs->name, sizeof(rs->name), "%s", s->name);
    rs->env = xasprintf("%s=%s", s->name, value);
    rs->agent = s->agent;
    add_pattern(r, value, n);
    json_t *j = json_stringn(value, n);
    char *text = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    if (text && strlen(text) >= 2)
        add_pattern(r, text + 1, strlen(text) - 2);
    if (text) {
        explicit_bzero(text, strlen(text));
        free(text);
    }
    json_decref(j);
}

static void wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

void run_secrets_release(struct run *r)
{
    for (size_t i = 0; i < r->nsecrets; i++)
        wipe_free(r->secrets[i].env);
    for (size_t i = 0; i < r->nredact; i++)
        wipe_free(r->redact[i]);
    free(r->secrets);
    free(r->redact);
    r->secrets = NULL;
    r->redact = NULL;
    r->nsecrets = r->nredact = 0;
}

void run_load_secrets(struct run *r)
{
    struct runs *e = r->e;
    /* values once known stay redacted for the run's life, even if the user changes them */
    char **keep = r->redact;
    size_t nkeep = r->nredact;
    r->redact = NULL;
    r->nredact = 0;
    for (size_t i = 0; i < r->nsecrets; i++)
        wipe_free(r->secrets[i].env);
    free(r->secrets);
    r->secrets = NULL;
    r->nsecrets = 0;
    if (e->have_seal_key) {
        struct loading l = {.r = r, .repo = r->github_repo[0] ? r->github_repo : NULL};
        struct err err = {0};
        if (store_secret_list(e->st, e->seal_key, r->user_id, on_secret, &l, &err) < 0)
            log_error("run secrets not read run=%s err=\"%s\"", r->id, err.msg);
    }
    for (size_t i = 0; i < nkeep; i++) {
        add_pattern(r, keep[i], strlen(keep[i]));
        wipe_free(keep[i]);
    }
    free(keep);
}

const char **run_secret_env(const struct run *r, bool agent, const char *const *base)
{
    size_t nb = 0;
    while (base && base[nb])
        nb++;
    const char **env = xcalloc(nb + r->nsecrets + 1, sizeof(char *));
    size_t k = 0;
    for (size_t i = 0; i < nb; i++)
        env[k++] = base[i];
    for (size_t i = 0; i < r->nsecrets; i++)
        if (!agent || r->secrets[i].agent)
            env[k++] = r->secrets[i].env;
    return env;
}

size_t run_secret_names(const struct run *r, bool agent, char *out, size_t cap)
{
    size_t len = 0, n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->nsecrets; i++)
        if (!agent || r->secrets[i].agent) {
            len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%s", n ? "," : "",
                                    r->secrets[i].name);
            n++;
        }
    return n;
}

void run_redact(const struct run *r, char *s)
{
    if (!s)
        return;
    scripts_redact_tokens(s);
    scripts_redact_values(s, (const char *const *)r->redact, r->nredact);
}

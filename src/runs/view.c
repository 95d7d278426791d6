/* View tokens: the capability in a run's (or session's) web address. A token is
 * HMAC-SHA256(view key, kind, id, generation), cut to 144 bits (the view key is derived from the
 * server secret for this purpose alone, so it is not the key that signs proxy tokens): unguessable,
 * bound to one run or session, never stored (the store keeps only the generation), and revoked by
 * moving to the next generation. It grants reading that page and its event stream, nothing else.
 * It is handed its keys (struct runs_view) and knows no engine: runs.c's public calls pass them. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "base/ids.h"
#include "base/util.h"
#include "store/store.h"

#define VIEW_BYTES 18

static void derive_kind(const struct runs_view *v, const char *kind, const char *id, int64_t gen,
                        char out[RUNS_VIEW_TOKEN_MAX])
{
    char msg[256];
    int n = snprintf(msg, sizeof(msg), "sandbox-mcp view%c%s%c%s%c%lld", 0, kind, 0, id, 0,
                     (long long)gen);
    unsigned char mac[32];
    unsigned int maclen = sizeof(mac);
    HMAC(EVP_sha256(), v->key, (int)v->keylen, (const unsigned char *)msg, (size_t)n, mac, &maclen);
    base64url_encode(mac, VIEW_BYTES, out);
}

static void derive(const struct runs_view *v, bool session, const char *id, int64_t gen,
                   char out[RUNS_VIEW_TOKEN_MAX])
{
    derive_kind(v, session ? "session" : "run", id, gen, out);
}

/* A group's token moves with its first attempt's generation: revoking that run's links revokes
 * the group's too. */
static void on_first(const struct store_run *row, void *ctx)
{
    int64_t *gen = ctx;
    if (*gen < 0)
        *gen = row->view_generation;
}

static int group_generation(const struct runs_view *v, const char *group_id, int64_t *gen)
{
    struct err err = {0};
    *gen = -1;
    if (strlen(group_id) >= 64 || store_group_runs(v->st, NULL, group_id, on_first, gen, &err) < 0)
        return -ENOENT;
    return 0;
}

void view_group_url(const struct runs_view *v, const char *group_id, char *out, size_t cap)
{
    int64_t gen;
    char token[RUNS_VIEW_TOKEN_MAX];
    if (group_generation(v, group_id, &gen) < 0) {
        snprintf(out, cap, "%s", "");
        return;
    }
    derive_kind(v, "group", group_id, gen, token);
    snprintf(out, cap, "%s/groups/%s?t=%s", v->public_url, group_id, token);
}

bool view_group_check(const struct runs_view *v, const char *group_id, const char *token)
{
    int64_t gen;
    char want[RUNS_VIEW_TOKEN_MAX];
    bool known = token && group_generation(v, group_id, &gen) == 0;
    derive_kind(v, "group", known ? group_id : "", known ? gen : 0, want);
    return known && str_equal_ct(want, strlen(want), token, strlen(token));
}

void view_url_gen(const struct runs_view *v, const char *run_id, int64_t gen, char *out, size_t cap)
{
    char token[RUNS_VIEW_TOKEN_MAX];
    derive(v, false, run_id, gen, token);
    snprintf(out, cap, "%s/runs/%s?t=%s", v->public_url, run_id, token);
}

void view_page_url(const struct runs_view *v, bool session, const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s/%s", v->public_url, session ? "sessions" : "runs", id);
}

int view_token(const struct runs_view *v, bool session, const char *id,
               char out[RUNS_VIEW_TOKEN_MAX], struct err *err)
{
    int64_t gen;
    int r = store_view_generation(v->st, session, id, &gen, err);
    if (r < 0)
        return r;
    derive(v, session, id, gen, out);
    return 0;
}

void view_url(const struct runs_view *v, bool session, const char *id, char *out, size_t cap)
{
    char token[RUNS_VIEW_TOKEN_MAX];
    struct err err = {0};
    if (view_token(v, session, id, token, &err) < 0) {
        snprintf(out, cap, "%s", "");
        return;
    }
    snprintf(out, cap, "%s/%s/%s?t=%s", v->public_url, session ? "sessions" : "runs", id, token);
}

bool view_check(const struct runs_view *v, bool session, const char *id, const char *token)
{
    int64_t gen;
    struct err err = {0};
    if (!token || strlen(id) >= 64 || store_view_generation(v->st, session, id, &gen, &err) < 0) {
        /* as much work as a real check, so timing tells nothing about which ids exist */
        char dummy[RUNS_VIEW_TOKEN_MAX];
        derive(v, session, "", 0, dummy);
        return false;
    }
    char want[RUNS_VIEW_TOKEN_MAX];
    derive(v, session, id, gen, want);
    return str_equal_ct(want, strlen(want), token, strlen(token));
}

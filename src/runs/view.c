/* View tokens: the capability in a run's (or session's) web address. A token is
 * HMAC-SHA256(view key, kind, id, generation), cut to 144 bits (the view key is derived from the
 * server secret for this purpose alone, so it is not the key that signs proxy tokens): unguessable,
 * bound to one run or session, never stored (the store keeps only the generation), and revoked by
 * moving to the next generation. It grants reading that page and its event stream, nothing else.
 * It is handed its keys (struct runs_view) and knows no engine: runs.c's public calls pass them. */
#include "runs/runs_internal.h"

#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "base/ids.h"
#include "base/util.h"
#include "store/store.h"

#define VIEW_BYTES 18

static void derive(const struct runs_view *v, bool session, const char *id, int64_t gen,
                   char out[RUNS_VIEW_TOKEN_MAX])
{
    char msg[256];
    int n = snprintf(msg, sizeof(msg), "sandbox-mcp view%c%s%c%s%c%lld", 0,
                     session ? "session" : "run", 0, id, 0, (long long)gen);
    unsigned char mac[32];
    unsigned int maclen = sizeof(mac);
    HMAC(EVP_sha256(), v->key, (int)v->keylen, (const unsigned char *)msg, (size_t)n, mac, &maclen);
    base64url_encode(mac, VIEW_BYTES, out);
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

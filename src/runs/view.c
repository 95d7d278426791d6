/* View tokens: the capability in a run's (or session's) web address. A token is
 * HMAC-SHA256(view key, kind, id, generation), cut to 144 bits (the view key is derived from the
 * server secret for this purpose alone, so it is not the key that signs proxy tokens): unguessable,
 * bound to one run or session, never stored (the store keeps only the generation), and revoked by
 * moving to the next generation. It grants reading that page and its event stream, nothing else. */
#include "runs/runs.h"

#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "base/ids.h"
#include "base/util.h"
#include "runs/runs_internal.h"
#include "store/store.h"

#define VIEW_BYTES 18

static void derive(const struct runs *e, bool session, const char *id, int64_t gen,
                   char out[RUNS_VIEW_TOKEN_MAX])
{
    char msg[256];
    int n = snprintf(msg, sizeof(msg), "sandbox-mcp view%c%s%c%s%c%lld", 0,
                     session ? "session" : "run", 0, id, 0, (long long)gen);
    unsigned char mac[32];
    unsigned int maclen = sizeof(mac);
    const struct runs_config *cfg = runs_config_of(e);
    HMAC(EVP_sha256(), cfg->view_key, (int)cfg->view_keylen, (const unsigned char *)msg, (size_t)n,
         mac, &maclen);
    base64url_encode(mac, VIEW_BYTES, out);
}

void runs_web_url_gen(const struct runs *e, const char *run_id, int64_t gen, char *out, size_t cap)
{
    char token[RUNS_VIEW_TOKEN_MAX];
    derive(e, false, run_id, gen, token);
    snprintf(out, cap, "%s/runs/%s?t=%s", runs_config_of(e)->public_url, run_id, token);
}

void runs_page_url(const struct runs *e, bool session, const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s/%s", runs_config_of(e)->public_url, session ? "sessions" : "runs",
             id);
}

int runs_view_token(const struct runs *e, bool session, const char *id,
                    char out[RUNS_VIEW_TOKEN_MAX], struct err *err)
{
    int64_t gen;
    int r = store_view_generation(runs_store_of(e), session, id, &gen, err);
    if (r < 0)
        return r;
    derive(e, session, id, gen, out);
    return 0;
}

bool runs_view_check(const struct runs *e, bool session, const char *id, const char *token)
{
    int64_t gen;
    struct err err = {0};
    if (!token || strlen(id) >= 64 ||
        store_view_generation(runs_store_of(e), session, id, &gen, &err) < 0) {
        /* as much work as a real check, so timing tells nothing about which ids exist */
        char dummy[RUNS_VIEW_TOKEN_MAX];
        derive(e, session, "", 0, dummy);
        return false;
    }
    char want[RUNS_VIEW_TOKEN_MAX];
    derive(e, session, id, gen, want);
    return str_equal_ct(want, strlen(want), token, strlen(token));
}

/* Proxy tokens (HS256 JWT through libjwt). The header is checked by hand first, so that no
 * token naming another algorithm (or "none") ever reaches the library's verification. */
#include "proxy/token.h"

#include <errno.h>
#include <jansson.h>
#include <jwt.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "base/util.h"

static void jwt_freep(jwt_t **j)
{
    jwt_free(*j);
}
#define _cleanup_jwt_ __attribute__((cleanup(jwt_freep)))

int proxy_token_mint(const void *key, size_t keylen, const struct proxy_claims *c, char **out,
                     struct err *err)
{
    _cleanup_jwt_ jwt_t *j = NULL;
    if (jwt_new(&j) != 0)
        return err_set(err, -ENOMEM, "jwt_new failed");
    json_t *claims = json_pack("{s:s, s:I, s:I, s:s}", "user", c->user, "iat", (json_int_t)c->iat,
                               "exp", (json_int_t)c->exp, "jti", c->jti);
    if (c->run[0])
        json_object_set_new(claims, "run", json_string(c->run));
    if (c->session[0])
        json_object_set_new(claims, "session", json_string(c->session));
    if (c->sandbox[0])
        json_object_set_new(claims, "sbx", json_string(c->sandbox));
    if (c->repo[0])
        json_object_set_new(claims, "repo", json_string(c->repo));
    if (c->branch[0])
        json_object_set_new(claims, "push", json_string(c->branch));
    if (c->warm)
        json_object_set_new(claims, "warm", json_true());
    json_t *svc = json_array();
    for (int i = 0; i < c->nservices; i++)
        json_array_append_new(svc, json_string(c->services[i]));
    json_object_set_new(claims, "svc", svc);
    char *text = json_dumps(claims, JSON_COMPACT);
    json_decref(claims);
    int r = jwt_add_grants_json(j, text);
    free(text);
    if (r != 0)
        return err_set(err, -EINVAL, "cannot set token claims");
    if (jwt_set_alg(j, JWT_ALG_HS256, key, (int)keylen) != 0)
        return err_set(err, -EINVAL, "cannot set token key");
    char *tok = jwt_encode_str(j);
    if (!tok)
        return err_set(err, -ENOMEM, "cannot encode token");
    *out = xstrdup(tok);
    free(tok);
    return 0;
}

/* The first segment must decode to a JSON object whose alg is exactly "HS256". */
static bool header_is_hs256(const char *token, size_t len)
{
    const char *dot = memchr(token, '.', len);
    if (!dot || dot == token || dot - token > 512)
        return false;
    unsigned char raw[400];
    ssize_t n = base64_decode(token, (size_t)(dot - token), raw);
    if (n <= 0)
        return false;
    json_error_t jerr;
    json_t *h = json_loadb((const char *)raw, (size_t)n, 0, &jerr);
    const char *alg = json_string_value(json_object_get(h, "alg"));
    bool ok = json_is_object(h) && alg && strcmp(alg, "HS256") == 0;
    json_decref(h);
    return ok;
}

static bool copy_claim(const json_t *claims, const char *name, char *dst, size_t cap, bool required)
{
    const json_t *v = json_object_get(claims, name);
    if (!v)
        return !required;
    const char *s = json_string_value(v);
    if (!s || strlen(s) >= cap)
        return false;
    snprintf(dst, cap, "%s", s);
    return true;
}

int proxy_token_verify(const void *key, size_t keylen, const char *token, size_t len, int64_t now,
                       struct proxy_claims *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    if (len == 0 || len > PROXY_TOKEN_MAX || strlen(token) != len)
        return err_set(err, -EACCES, "malformed token");
    if (!header_is_hs256(token, len))
        return err_set(err, -EACCES, "token algorithm must be HS256");
    _cleanup_jwt_ jwt_t *j = NULL;
    if (jwt_decode(&j, token, key, (int)keylen) != 0 || !j)
        return err_set(err, -EACCES, "bad token signature");
    if (jwt_get_alg(j) != JWT_ALG_HS256)
        return err_set(err, -EACCES, "token algorithm must be HS256");
    char *text = jwt_get_grants_json(j, NULL);
    json_error_t jerr;
    json_t *claims = text ? json_loads(text, 0, &jerr) : NULL;
    free(text);
    int r = 0;
    const json_t *exp = json_object_get(claims, "exp"), *iat = json_object_get(claims, "iat");
    const json_t *svc = json_object_get(claims, "svc"), *warm = json_object_get(claims, "warm");
    if (!json_is_object(claims) || (warm && !json_is_true(warm)) || !json_is_integer(exp) ||
        !json_is_integer(iat) || !json_is_array(svc) || json_array_size(svc) > PROXY_SERVICES_MAX ||
        !copy_claim(claims, "user", out->user, sizeof(out->user), true) ||
        !copy_claim(claims, "jti", out->jti, sizeof(out->jti), true) ||
        !copy_claim(claims, "run", out->run, sizeof(out->run), false) ||
        !copy_claim(claims, "session", out->session, sizeof(out->session), false) ||
        !copy_claim(claims, "sbx", out->sandbox, sizeof(out->sandbox), false) ||
        !copy_claim(claims, "repo", out->repo, sizeof(out->repo), false) ||
        !copy_claim(claims, "push", out->branch, sizeof(out->branch), false)) {
        r = err_set(err, -EACCES, "malformed token claims");
        goto out;
    }
    out->warm = warm != NULL;
    out->exp = json_integer_value(exp);
    out->iat = json_integer_value(iat);
    size_t i;
    const json_t *s;
    json_array_foreach(svc, i, s)
    {
        const char *name = json_string_value(s);
        if (!name || strlen(name) >= sizeof(out->services[0])) {
            r = err_set(err, -EACCES, "malformed token claims");
            goto out;
        }
        snprintf(out->services[out->nservices++], sizeof(out->services[0]), "%s", name);
    }
    if (out->exp <= now)
        r = err_set(err, -EACCES, "token expired");
out:
    json_decref(claims);
    return r;
}

void proxy_sandbox_key(const void *key, size_t keylen, const char *sandbox_id,
                       char out[PROXY_SANDBOX_KEY_LEN + 1])
{
    static const char label[] = "sandbox-mcp pooled agent key";
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key, keylen);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, sizeof(label));
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)sandbox_id, strlen(sandbox_id));
    crypto_auth_hmacsha256_final(&st, mac);
    memcpy(out, PROXY_SANDBOX_KEY_PREFIX, sizeof(PROXY_SANDBOX_KEY_PREFIX) - 1);
    sodium_bin2hex(out + sizeof(PROXY_SANDBOX_KEY_PREFIX) - 1, 65, mac, sizeof(mac));
    sodium_memzero(mac, sizeof(mac));
}

bool proxy_sandbox_key_is(const void *key, size_t keylen, const char *sandbox_id, const char *token,
                          size_t len)
{
    if (len != PROXY_SANDBOX_KEY_LEN || !sandbox_id[0])
        return false;
    char want[PROXY_SANDBOX_KEY_LEN + 1];
    proxy_sandbox_key(key, keylen, sandbox_id, want);
    bool same = sodium_memcmp(want, token, PROXY_SANDBOX_KEY_LEN) == 0;
    sodium_memzero(want, sizeof(want));
    return same;
}

bool proxy_claims_grant(const struct proxy_claims *c, const char *service)
{
    for (int i = 0; i < c->nservices; i++)
        if (strcmp(c->services[i], service) == 0)
            return true;
    return false;
}

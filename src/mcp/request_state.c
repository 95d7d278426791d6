#include "mcp/request_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/ids.h"
#include "base/util.h"

/* The purpose the sealing binds every state to; its version changes with the plaintext's shape. */
#define STATE_LABEL "sandbox-mcp request-state v1"

int mcp_state_seal(const unsigned char key[SEAL_KEY_BYTES], const struct mcp_state_scope *scope,
                   const json_t *state, int64_t now_ms, int64_t ttl_ms, char **out, struct err *err)
{
    json_auto_t *plain =
        json_pack("{s:i, s:s, s:s, s:s, s:I, s:O}", "v", 1, "u", scope->user, "m", scope->method,
                  "n", scope->name, "x", (json_int_t)(now_ms + ttl_ms), "s", state);
    if (!plain)
        return err_set(err, -EINVAL, "the request state cannot be encoded");
    _cleanup_free_ char *text = json_dumps(plain, JSON_COMPACT);
    size_t n = strlen(text);
    /* 4 characters for every 3 bytes of nonce, ciphertext and tag (24 + n + 16) */
    if ((24 + n + 16 + 2) / 3 * 4 > MCP_REQUEST_STATE_MAX)
        return err_set(err, -E2BIG,
                       "the request state takes %zu bytes, more than fits in %d "
                       "characters",
                       n, MCP_REQUEST_STATE_MAX);
    _cleanup_free_ unsigned char *sealed = NULL;
    size_t slen;
    seal(key, text, n, STATE_LABEL, &sealed, &slen);
    char *s = xmalloc(4 * ((slen + 2) / 3) + 1);
    base64url_encode(sealed, slen, s);
    *out = s;
    return 0;
}

int mcp_state_open(const unsigned char key[SEAL_KEY_BYTES], const struct mcp_state_scope *scope,
                   const char *text, size_t len, int64_t now_ms, json_t **state, struct err *err)
{
    if (len > MCP_REQUEST_STATE_MAX)
        return err_set(err, -E2BIG, "requestState is longer than %d characters",
                       MCP_REQUEST_STATE_MAX);
    unsigned char sealed[MCP_REQUEST_STATE_MAX / 4 * 3 + 3];
    char again[MCP_REQUEST_STATE_MAX + 4];
    ssize_t slen = base64_decode(text, len, sealed);
    /* only the exact text the server issued: no other spelling of the same bytes */
    if (slen < 0 || base64url_encode(sealed, (size_t)slen, again) != len ||
        memcmp(again, text, len) != 0)
        return err_set(err, -EBADMSG, "requestState is not one this server issued");
    _cleanup_free_ char *plain = NULL;
    size_t plen;
    struct err ignored = {0};
    if (unseal(key, sealed, (size_t)slen, STATE_LABEL, &plain, &plen, &ignored) < 0)
        return err_set(err, -EBADMSG,
                       "requestState is not one this server issued (altered, or "
                       "from another server)");
    json_auto_t *v = json_loadb(plain, plen, 0, NULL);
    const char *user = json_string_value(json_object_get(v, "u"));
    const char *method = json_string_value(json_object_get(v, "m"));
    const char *name = json_string_value(json_object_get(v, "n"));
    const json_t *expiry = json_object_get(v, "x");
    const json_t *s = json_object_get(v, "s");
    if (json_integer_value(json_object_get(v, "v")) != 1 || !user || !method || !name ||
        !json_is_integer(expiry) || !s)
        return err_set(err, -EBADMSG, "requestState is not one this server issued");
    if (strcmp(user, scope->user) != 0)
        return err_set(err, -EPERM, "requestState was issued to another user");
    if (strcmp(method, scope->method) != 0 || strcmp(name, scope->name) != 0)
        return err_set(err, -EXDEV, "requestState was issued for another request (%.32s '%.128s')",
                       method, name);
    if (now_ms >= json_integer_value(expiry))
        return err_set(err, -ETIME,
                       "requestState has expired; call again without it to start "
                       "over");
    *state = json_incref((json_t *)s);
    return 0;
}

/* What the sign-in, consent and account pages share: HTML, cookies, CSRF, forms. */
#include "auth/auth_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/embedded.h"
#include "base/ids.h"

#define CSRF_COOKIE "smcp_csrf"

static const char csp[] = "default-src 'none'; style-src 'self'; img-src 'self'; "
                          "base-uri 'none'; frame-ancestors 'none'";

void html_text(struct buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': buf_puts(b, "&amp;"); break;
        case '<': buf_puts(b, "&lt;"); break;
        case '>': buf_puts(b, "&gt;"); break;
        case '"': buf_puts(b, "&quot;"); break;
        case '\'': buf_puts(b, "&#39;"); break;
        default: buf_append(b, s, 1);
        }
    }
}

void html_hidden(struct buf *b, const char *name, const char *value)
{
    buf_printf(b, "<input type=\"hidden\" name=\"%s\" value=\"", name);
    html_text(b, value);
    buf_puts(b, "\">\n");
}

static const struct embedded_file *web_file(const char *name)
{
    for (const struct embedded_file *f = embedded_web; f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

void auth_page(h2o_req_t *req, int status, const char *title, const char *body)
{
    struct buf b;
    buf_init(&b, 0);
    const struct embedded_file *head = web_file("head.html");
    if (head)
        buf_append(&b, head->data, head->size);
    buf_puts(&b, "<title>");
    html_text(&b, title);
    buf_puts(&b, " · sandbox-mcp</title>\n</head>\n<body class=\"auth\">\n<main>\n");
    buf_puts(&b, body);
    buf_puts(&b, "</main>\n</body>\n</html>\n");
    http_add_header_str(req, "content-security-policy", csp);
    /* Not no-referrer: a browser posts a form from such a page with "Origin: null", which the
     * origin check refuses. same-origin tells this server its own origin and other sites
     * nothing. */
    http_add_header_str(req, "referrer-policy", "same-origin");
    http_add_header_str(req, "x-content-type-options", "nosniff");
    http_add_header_str(req, "x-frame-options", "DENY");
    http_add_header(req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    http_respond(req, status, "text/html; charset=utf-8", b.data, b.len);
    buf_release(&b);
}

void auth_error_page(h2o_req_t *req, int status, const char *error, const char *description)
{
    struct buf b;
    buf_init(&b, 0);
    buf_puts(&b,
             "<section class=\"card\">\n<h1>This sign-in cannot go on</h1>\n<p class=\"error\">");
    html_text(&b, description);
    buf_puts(&b, "</p>\n<p class=\"muted\">Error: <code>");
    html_text(&b, error);
    buf_puts(&b, "</code>. Go back to the app you came from and connect again.</p>\n</section>\n");
    auth_page(req, status, "Sign-in error", b.data);
    buf_release(&b);
}

const char *auth_cookie(h2o_req_t *req, const char *name)
{
    size_t nlen = strlen(name);
    for (ssize_t i = -1; (i = h2o_find_header(&req->headers, H2O_TOKEN_COOKIE, i)) >= 0;) {
        h2o_iovec_t v = req->headers.entries[i].value;
        const char *p = v.base, *end = v.base + v.len;
        while (p < end) {
            while (p < end && (*p == ' ' || *p == ';'))
                p++;
            const char *e = p;
            while (e < end && *e != ';')
                e++;
            if ((size_t)(e - p) > nlen && p[nlen] == '=' && memcmp(p, name, nlen) == 0) {
                size_t n = (size_t)(e - p) - nlen - 1;
                char *out = h2o_mem_alloc_pool(&req->pool, n + 1);
                memcpy(out, p + nlen + 1, n);
                out[n] = '\0';
                return out;
            }
            p = e;
        }
    }
    return NULL;
}

void auth_set_cookie(struct auth *a, h2o_req_t *req, const char *name, const char *value,
                     int64_t max_age_s)
{
    char line[512];
    snprintf(line, sizeof(line), "%s=%s; Path=/; Max-Age=%lld; HttpOnly; SameSite=Lax%s", name,
             value, (long long)max_age_s,
             strncmp(auth_issuer(a), "https://", 8) == 0 ? "; Secure" : "");
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_SET_COOKIE, NULL,
                   h2o_strdup(&req->pool, line, SIZE_MAX).base, strlen(line));
}

static bool token_shaped(const char *s, size_t min, size_t max)
{
    size_t n = strlen(s);
    if (n < min || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", s[i]))
            return false;
    return true;
}

const char *auth_csrf_token(struct auth *a, h2o_req_t *req)
{
    const char *c = auth_cookie(req, CSRF_COOKIE);
    if (c && token_shaped(c, 43, 43))
        return c;
    unsigned char raw[32];
    char *tok = h2o_mem_alloc_pool(&req->pool, 44);
    rand_bytes(raw, sizeof(raw));
    base64url_encode(raw, sizeof(raw), tok);
    auth_set_cookie(a, req, CSRF_COOKIE, tok, AUTH_SESSION_TTL_S);
    return tok;
}

bool auth_csrf_ok(h2o_req_t *req, const struct form *f)
{
    return auth_page_csrf_is(req, form_get(f, "csrf"));
}

const char *auth_page_csrf(struct auth *a, h2o_req_t *req)
{
    return auth_csrf_token(a, req);
}

bool auth_page_csrf_is(h2o_req_t *req, const char *v)
{
    const char *c = auth_cookie(req, CSRF_COOKIE);
    if (!c || !v || strlen(c) != 43 || strlen(v) != 43)
        return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < 43; i++)
        diff |= (unsigned char)(c[i] ^ v[i]);
    return diff == 0;
}

struct auth *auth_page_enter(h2o_handler_t *self, h2o_req_t *req, bool *post)
{
    struct http_route *route = (struct http_route *)self;
    http_request_track(route, req);
    *post = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"));
    if (*post && !http_check_origin(route->srv, req))
        return NULL;
    return route->ctx;
}

bool auth_session_user(struct auth *a, h2o_req_t *req, struct store_user *user)
{
    const char *s = auth_cookie(req, AUTH_SESSION_COOKIE);
    if (!s || !token_shaped(s, 1, 128))
        return false;
    struct err err = {0};
    return store_web_session_get(a->store, s, strlen(s), user, &err) == 0;
}

bool auth_read_form(h2o_req_t *req, struct form *f, bool json_errors)
{
    const char *ct = http_header(req, H2O_TOKEN_CONTENT_TYPE);
    if (!ct || strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0) {
        if (json_errors)
            auth_json_error(req, 400, "invalid_request",
                            "the body must be application/x-www-form-urlencoded");
        else
            auth_error_page(req, 415, "invalid_request", "The form was not sent as a form.");
        return false;
    }
    struct err err = {0};
    if (req->entity.len > AUTH_FORM_MAX ||
        form_parse(req->entity.base, req->entity.len, f, &err) < 0) {
        if (json_errors)
            auth_json_error(req, 400, "invalid_request",
                            err.msg[0] ? err.msg : "the form is too large");
        else
            auth_error_page(req, 400, "invalid_request",
                            err.msg[0] ? err.msg : "The form is too large.");
        return false;
    }
    return true;
}

bool auth_read_query(h2o_req_t *req, struct form *f)
{
    struct err err = {0};
    const char *q = req->query_at == SIZE_MAX ? "" : req->path.base + req->query_at + 1;
    size_t n = req->query_at == SIZE_MAX ? 0 : req->path.len - req->query_at - 1;
    if (form_parse(q, n, f, &err) < 0) {
        auth_error_page(req, 400, "invalid_request", err.msg);
        return false;
    }
    return true;
}

void auth_peer_of(h2o_req_t *req, struct throttle_peer *out)
{
    struct sockaddr_storage ss;
    throttle_peer_of(http_client_addr(req, &ss) ? (struct sockaddr *)&ss : NULL, out);
}

void auth_peer(h2o_req_t *req, char *out, size_t cap)
{
    struct throttle_peer p;
    auth_peer_of(req, &p);
    snprintf(out, cap, "%s", p.addr);
}

bool auth_path_exact(h2o_req_t *req, const char *path, bool json)
{
    h2o_iovec_t p = req->path_normalized;
    if (p.len == strlen(path) && memcmp(p.base, path, p.len) == 0)
        return true;
    if (json)
        auth_json_error(req, 404, "not_found", "no such endpoint");
    else
        auth_error_page(req, 404, "not_found", "There is no such page.");
    return false;
}

bool auth_post_only(h2o_req_t *req, const char *path)
{
    if (!auth_path_exact(req, path, true))
        return false;
    if (h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST")))
        return true;
    if (h2o_memis(req->method.base, req->method.len, H2O_STRLIT("OPTIONS"))) {
        /* a browser-based client's preflight: these endpoints take no cookies, so any origin
         * may call them */
        http_add_header_str(req, "access-control-allow-origin", "*");
        http_add_header_str(req, "access-control-allow-methods", "POST");
        http_add_header_str(req, "access-control-allow-headers",
                            "authorization, content-type, mcp-protocol-version");
        http_add_header_str(req, "access-control-max-age", "600");
        http_respond(req, 204, NULL, NULL, 0);
        return false;
    }
    http_add_header(req, H2O_TOKEN_ALLOW, "POST");
    auth_json_error(req, 405, "invalid_request", "use POST");
    return false;
}

void auth_redirect(h2o_req_t *req, int status, const char *location)
{
    http_add_header(req, H2O_TOKEN_LOCATION, h2o_strdup(&req->pool, location, SIZE_MAX).base);
    http_add_header(req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    http_add_header_str(req, "referrer-policy", "no-referrer");
    http_respond(req, status, NULL, NULL, 0);
}

void url_param(struct buf *b, char sep, const char *name, const char *value)
{
    buf_append(b, &sep, 1);
    buf_puts(b, name);
    buf_puts(b, "=");
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~", *p))
            buf_append(b, p, 1);
        else
            buf_printf(b, "%%%02X", *p);
    }
}

void auth_json(h2o_req_t *req, int status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    http_add_header(req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    http_add_header_str(req, "pragma", "no-cache");
    http_add_header_str(req, "access-control-allow-origin", "*");
    http_respond(req, status, "application/json", text, strlen(text));
    free(text);
    json_decref(body);
}

void auth_json_error(h2o_req_t *req, int status, const char *error, const char *description)
{
    auth_json(req, status,
              json_pack("{s:s, s:s}", "error", error, "error_description", description));
}

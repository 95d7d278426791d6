/* The agent bridge's and keeper's blocking HTTP/1.1 client for the agent's server on the
 * sandbox's loopback (agent_http.h): one connection per request, bounded heads and bodies. */
#include "agent_http.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"

void keeper_address(const char *port, struct sockaddr_un *a, socklen_t *len)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "sandbox-mcp-agent:%s", port);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int connect_port(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
        return fd;
    int e = errno;
    if (fd >= 0)
        close(fd);
    errno = e;
    return -1;
}

/* Read more into c->buf; false on end, error or timeout (ms < 0: none). */
static bool fill(struct conn *c, int ms)
{
    if (c->off > 0) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
    }
    if (c->len == sizeof(c->buf))
        return false;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    int r;
    while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
        ;
    if (r <= 0)
        return false;
    ssize_t n;
    while ((n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len)) < 0 && errno == EINTR)
        ;
    if (n <= 0)
        return false;
    c->len += (size_t)n;
    return true;
}

/* One line (without "\r\n") into out (cap bytes, longer lines fail). */
bool read_line(struct conn *c, char *out, size_t cap, int ms)
{
    for (;;) {
        char *nl = memchr(c->buf + c->off, '\n', c->len - c->off);
        if (nl) {
            size_t n = (size_t)(nl - (c->buf + c->off));
            if (n && c->buf[c->off + n - 1] == '\r')
                n--;
            if (n >= cap)
                return false;
            memcpy(out, c->buf + c->off, n);
            out[n] = '\0';
            c->off = (size_t)(nl - c->buf) + 1;
            return true;
        }
        if (c->len - c->off >= cap || !fill(c, ms))
            return false;
    }
}

/* Send a request; false when it could not be sent. */
bool request_send(struct conn *c, uint16_t port, const char *method, const char *path,
                  const char *dir, const char *body, const char *accept)
{
    c->fd = connect_port(port);
    c->off = c->len = 0;
    if (c->fd < 0)
        return false;
    char head[8192];
    int n = snprintf(head, sizeof(head),
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nAccept: %s\r\n"
                     "x-opencode-directory: %s\r\nConnection: close\r\n",
                     method, path, port, accept, dir);
    if (body)
        n += snprintf(head + n, sizeof(head) - (size_t)n,
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n", strlen(body));
    n += snprintf(head + n, sizeof(head) - (size_t)n, "\r\n");
    return (size_t)n < sizeof(head) && write_full(c->fd, head, (size_t)n) == 0 &&
           (!body || write_full(c->fd, body, strlen(body)) == 0);
}

/* Read the response's head; returns its status, or -1. */
int response_head(struct conn *c)
{
    char line[8192];
    int status = -1;
    if (c->fd < 0 || !read_line(c, line, sizeof(line), REQUEST_TIMEOUT_MS) ||
        sscanf(line, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    c->chunked = false;
    c->left = -1;
    c->body_done = false;
    size_t total = 0;
    for (;;) {
        if (!read_line(c, line, sizeof(line), REQUEST_TIMEOUT_MS))
            return -1;
        total += strlen(line) + 2;
        if (total > HEAD_MAX)
            return -1;
        if (!line[0])
            break;
        if (strncasecmp(line, "content-length:", 15) == 0)
            c->left = strtoll(line + 15, NULL, 10);
        else if (strncasecmp(line, "transfer-encoding:", 18) == 0 && strcasestr(line, "chunked"))
            c->chunked = true;
    }
    if (c->chunked)
        c->left = 0;
    if (status == 204 || status == 304)
        c->body_done = true;
    return status;
}

/* Send a request and read the response's head; returns its status, or -1. */
static int request(struct conn *c, uint16_t port, const char *method, const char *path,
                   const char *dir, const char *body, const char *accept)
{
    if (!request_send(c, port, method, path, dir, body, accept))
        return -1;
    return response_head(c);
}

/* Up to cap bytes of the body into out: how many (0 at its end), or -1 on error. */
ssize_t read_body(struct conn *c, char *out, size_t cap, int ms)
{
    if (c->body_done)
        return 0;
    if (c->chunked && c->left == 0) {
        char line[256];
        if (!read_line(c, line, sizeof(line), ms))
            return -1;
        if (!line[0] && !read_line(c, line, sizeof(line), ms)) /* the CRLF after a chunk */
            return -1;
        char *end;
        long long size = strtoll(line, &end, 16);
        if (end == line || size < 0)
            return -1;
        if (size == 0) {
            c->body_done = true;
            return 0;
        }
        c->left = size;
    }
    if (c->left == 0) {
        c->body_done = true;
        return 0;
    }
    if (c->off == c->len && !fill(c, ms)) {
        if (c->left < 0 && !c->chunked) {
            c->body_done = true;
            return 0;
        }
        return -1;
    }
    size_t n = c->len - c->off;
    if (n > cap)
        n = cap;
    if (c->left > 0 && (int64_t)n > c->left)
        n = (size_t)c->left;
    memcpy(out, c->buf + c->off, n);
    c->off += n;
    if (c->left > 0)
        c->left -= (int64_t)n;
    return (ssize_t)n;
}

/* The whole body of a request (at most BODY_MAX bytes) as JSON, or NULL; *status set. */
json_t *call(uint16_t port, const char *method, const char *path, const char *dir, const char *body,
             int *status)
{
    *status = -1;
    struct conn *c = malloc(sizeof(*c));
    if (!c)
        return NULL;
    *status = request(c, port, method, path, dir, body, "application/json");
    char *text = NULL;
    size_t len = 0, cap = 0;
    ssize_t n = *status > 0 ? 1 : -1;
    while (n > 0 && len < BODY_MAX) {
        if (len == cap) {
            size_t more = cap ? cap * 2 : 65536;
            char *t = realloc(text, (more < BODY_MAX ? more : BODY_MAX) + 1);
            if (!t)
                break;
            text = t;
            cap = more < BODY_MAX ? more : BODY_MAX;
        }
        n = read_body(c, text + len, cap - len, REQUEST_TIMEOUT_MS);
        if (n > 0)
            len += (size_t)n;
    }
    json_t *res = n == 0 ? json_loadb(text ? text : "", len, 0, NULL) : NULL;
    free(text);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
    return res;
}

void session_abort(uint16_t port, const char *session, const char *dir)
{
    char path[256];
    int status;
    snprintf(path, sizeof(path), "/session/%s/abort", session);
    json_decref(call(port, "POST", path, dir, "{}", &status));
}

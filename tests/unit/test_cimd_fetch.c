/* Client ID Metadata Documents (src/auth/cimd.c), the fetch: the loop runs here against an HTTP
 * server this test starts on 127.0.0.1 (a thread answering one connection at a time), with the
 * fetcher in its loopback test mode. Nothing connects anywhere else: the refusals of other
 * addresses are decided before any connection (and their policy is tested in test_cimd.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "auth/cimd.h"
#include "base/loop.h"
#include "harness.h"

/* --- the server --- */

static int srv_fd = -1, srv_port;
static int idle_fd = -1, idle_port;   /* listens, never accepts */
static int idle6_fd = -1, idle6_port; /* the same on [::1] */
static pthread_t srv_thread;
static atomic_int srv_conns;
static pthread_mutex_t srv_lock = PTHREAD_MUTEX_INITIALIZER;
static char srv_request[4096]; /* the last request's head */

static int listen_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        perror("listen");
        exit(1);
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static int listen_loopback6(int *port)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        perror("listen ::1");
        exit(1);
    }
    *port = ntohs(a.sin6_port);
    return fd;
}

static int send_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

static void send_str(int fd, const char *s)
{
    send_all(fd, s, strlen(s));
}

/* Headers (without the blank line) and a body with its length. */
static void respond(int fd, const char *status, const char *headers, const char *body)
{
    char head[1024];
    snprintf(head, sizeof(head),
             "HTTP/1.1 %s\r\n%sContent-Length: %zu\r\nConnection: close\r\n\r\n", status, headers,
             strlen(body));
    send_str(fd, head);
    send_str(fd, body);
}

static void document(char *out, size_t size, const char *path)
{
    snprintf(out, size,
             "{\"client_id\":\"http://127.0.0.1:%d%s\",\"client_name\":\"Test Client\","
             "\"redirect_uris\":[\"http://127.0.0.1:3000/cb\",\"https://client.example/cb\"]}",
             srv_port, path);
}

static void answer(int fd, const char *path)
{
    static char big[70000];
    char doc[512];
    document(doc, sizeof(doc), path);
    const char *json = "Content-Type: application/json\r\n";
    if (strcmp(path, "/good") == 0) {
        respond(fd, "200 OK",
                "Content-Type: application/json\r\nCache-Control: public, max-age=600\r\n", doc);
    } else if (strcmp(path, "/plain") == 0) {
        respond(fd, "200 OK", "Content-Type: application/json; charset=utf-8\r\n", doc);
    } else if (strcmp(path, "/nostore") == 0) {
        respond(fd, "200 OK", "Content-Type: application/json\r\nCache-Control: no-store\r\n", doc);
    } else if (strcmp(path, "/short") == 0) {
        respond(fd, "200 OK", "Content-Type: application/json\r\nCache-Control: max-age=5\r\n",
                doc);
    } else if (strcmp(path, "/smax") == 0) {
        respond(fd, "200 OK",
                "Content-Type: application/jrd+json\r\nCache-Control: max-age=10\r\n"
                "Cache-Control: s-maxage=999999\r\n",
                doc);
    } else if (strcmp(path, "/interim") == 0) {
        /* an informational answer first, whose headers must not count */
        send_str(fd, "HTTP/1.1 103 Early Hints\r\nContent-Type: text/html\r\n"
                     "Cache-Control: no-store\r\n\r\n");
        respond(fd, "200 OK", "Content-Type: application/json\r\nCache-Control: max-age=900\r\n",
                doc);
    } else if (strcmp(path, "/endless") == 0) {
        /* chunked, no length, never ending: only counting what arrives stops it */
        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n");
        char chunk[4096 + 16];
        int n = snprintf(chunk, sizeof(chunk), "1000\r\n");
        memset(chunk + n, ' ', 4096);
        memcpy(chunk + n + 4096, "\r\n", 2);
        for (size_t sent = 0; sent < (64u << 20); sent += 4096)
            if (send_all(fd, chunk, (size_t)n + 4098) < 0)
                break;
    } else if (strcmp(path, "/big-length") == 0) {
        memset(big, ' ', sizeof(big));
        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: 70000\r\n\r\n");
        send_all(fd, big, sizeof(big));
    } else if (strcmp(path, "/big-close") == 0) {
        memset(big, ' ', sizeof(big));
        send_str(fd,
                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n");
        send_all(fd, big, sizeof(big));
    } else if (strcmp(path, "/redirect") == 0) {
        respond(fd, "302 Found", "Location: /good\r\n", "");
    } else if (strcmp(path, "/missing") == 0) {
        respond(fd, "404 Not Found", "Content-Type: text/plain\r\n", "not found");
    } else if (strcmp(path, "/html") == 0) {
        respond(fd, "200 OK", "Content-Type: text/html; charset=utf-8\r\n", "<html></html>");
    } else if (strcmp(path, "/notjson") == 0) {
        respond(fd, "200 OK", json, "nope");
    } else if (strcmp(path, "/wrong-id") == 0) {
        document(doc, sizeof(doc), "/other");
        respond(fd, "200 OK", json, doc);
    } else if (strcmp(path, "/slow") == 0) {
        /* say nothing until the client gives up */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, 10000);
    } else {
        respond(fd, "404 Not Found", "", "");
    }
}

static void *serve(void *arg)
{
    for (;;) {
        int fd = accept4(srv_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break; /* shut down */
        }
        atomic_fetch_add(&srv_conns, 1);
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        char req[4096];
        size_t n = 0;
        while (n < sizeof(req) - 1) {
            ssize_t r = recv(fd, req + n, sizeof(req) - 1 - n, 0);
            if (r <= 0)
                break;
            n += (size_t)r;
            req[n] = '\0';
            if (strstr(req, "\r\n\r\n"))
                break;
        }
        req[n] = '\0';
        pthread_mutex_lock(&srv_lock);
        memcpy(srv_request, req, n + 1);
        pthread_mutex_unlock(&srv_lock);
        char path[256] = "";
        if (sscanf(req, "GET %255s HTTP/1.1", path) == 1)
            answer(fd, path);
        close(fd);
    }
    return NULL;
}

static void server_stop(void)
{
    shutdown(srv_fd, SHUT_RDWR);
    pthread_join(srv_thread, NULL);
    close(srv_fd);
    close(idle_fd);
    close(idle6_fd);
}

/* Started by the first test that needs it, stopped at exit. */
static void server(void)
{
    if (srv_fd >= 0)
        return;
    signal(SIGPIPE, SIG_IGN); /* as the server does: a cancelled lookup's thread writes to a
                                 closed pipe */
    srv_fd = listen_loopback(&srv_port);
    idle_fd = listen_loopback(&idle_port);
    idle6_fd = listen_loopback6(&idle6_port);
    pthread_create(&srv_thread, NULL, serve, NULL);
    atexit(server_stop);
}

/* --- the loop --- */

static bool guard_fired;

static void on_guard(struct loop_timer *t)
{
    guard_fired = true;
}

/* Run the loop until *done, or for at most ms (a guard against a hang, not a timing check). */
static void run_until(const bool *done, uint64_t ms)
{
    struct loop_timer guard = {0};
    guard_fired = false;
    loop_timer_start(&guard, ms, on_guard);
    while (!*done && !guard_fired)
        h2o_evloop_run(loop_get(), INT32_MAX);
    loop_timer_stop(&guard);
}

static void run_for(uint64_t ms)
{
    static const bool never = false;
    run_until(&never, ms);
}

struct result {
    bool done;
    int calls;
    int code;
    char msg[512];
    int64_t max_age;
    struct cimd_client client;
};

static void on_fetched(void *ctx, const struct cimd_client *client, int64_t max_age,
                       const struct err *err)
{
    struct result *r = ctx;
    r->done = true;
    r->calls++;
    r->max_age = max_age;
    if (err) {
        CHECK(client == NULL);
        CHECK_INT_EQ(max_age, 0);
        r->code = err->code;
        snprintf(r->msg, sizeof(r->msg), "%s", err->msg);
    } else {
        r->code = 0;
        r->client = *client;
    }
}

static struct result res;

/* Fetch url and wait for the answer; a refusal up front is returned the same way. */
static int fetch_url(struct cimd *c, const char *url, struct result *r)
{
    memset(r, 0, sizeof(*r));
    struct err err = {0};
    struct cimd_fetch *f = cimd_fetch(c, url, NULL, on_fetched, r, &err);
    if (!f) {
        r->code = err.code;
        snprintf(r->msg, sizeof(r->msg), "%s", err.msg);
        return r->code;
    }
    CHECK(!r->done); /* never from within cimd_fetch */
    run_until(&r->done, 10000);
    CHECK_INT_EQ(r->calls, 1);
    return r->code;
}

static int fetch_path(struct cimd *c, const char *path, struct result *r)
{
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", srv_port, path);
    return fetch_url(c, url, r);
}

TEST(good_document)
{
    server();
    struct cimd *c = cimd_new(true);
    CHECK_INT_EQ(fetch_path(c, "/good", &res), 0);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/good", srv_port);
    CHECK_STR_EQ(res.client.client_id, url);
    CHECK_STR_EQ(res.client.client_name, "Test Client");
    CHECK_INT_EQ(res.client.n_redirect_uris, 2);
    CHECK_STR_EQ(res.client.redirect_uris[0], "http://127.0.0.1:3000/cb");
    CHECK_STR_EQ(res.client.redirect_uris[1], "https://client.example/cb");
    CHECK_INT_EQ(res.max_age, 600);
    pthread_mutex_lock(&srv_lock);
    CHECK_STR_CONTAINS(srv_request, "GET /good HTTP/1.1\r\n");
    CHECK_STR_CONTAINS(srv_request, "\r\nAccept: application/json\r\n");
    CHECK_STR_CONTAINS(srv_request, "\r\nUser-Agent: sandbox-mcp/");
    pthread_mutex_unlock(&srv_lock);
    cimd_free(c);
}

TEST(cache_lifetime)
{
    server();
    struct cimd *c = cimd_new(true);
    CHECK_INT_EQ(fetch_path(c, "/plain", &res), 0);
    CHECK_INT_EQ(res.max_age, 300);
    CHECK_INT_EQ(fetch_path(c, "/nostore", &res), 0);
    CHECK_INT_EQ(res.max_age, 0);
    CHECK_INT_EQ(fetch_path(c, "/short", &res), 0);
    CHECK_INT_EQ(res.max_age, 60);
    CHECK_INT_EQ(fetch_path(c, "/smax", &res), 0); /* two Cache-Control lines */
    CHECK_INT_EQ(res.max_age, 86400);
    CHECK_INT_EQ(fetch_path(c, "/interim", &res), 0);
    CHECK_INT_EQ(res.max_age, 900);
    cimd_free(c);
}

TEST(too_large)
{
    server();
    struct cimd *c = cimd_new(true);
    CHECK_INT_EQ(fetch_path(c, "/endless", &res), -EFBIG);
    CHECK_STR_CONTAINS(res.msg, "larger than 65536 bytes");
    CHECK_STR_CONTAINS(res.msg, "/endless");
    CHECK_INT_EQ(fetch_path(c, "/big-length", &res), -EFBIG);
    CHECK_INT_EQ(fetch_path(c, "/big-close", &res), -EFBIG);
    cimd_free(c);
}

TEST(redirect_refused)
{
    server();
    struct cimd *c = cimd_new(true);
    int before = atomic_load(&srv_conns);
    CHECK_INT_EQ(fetch_path(c, "/redirect", &res), -EPROTO);
    CHECK_STR_CONTAINS(res.msg, "redirect (HTTP 302 to /good), which is not followed");
    CHECK_INT_EQ(atomic_load(&srv_conns) - before, 1);
    cimd_free(c);
}

TEST(bad_answers)
{
    server();
    struct cimd *c = cimd_new(true);
    CHECK_INT_EQ(fetch_path(c, "/missing", &res), -EPROTO);
    CHECK_STR_CONTAINS(res.msg, "the answer is HTTP 404, not 200");
    CHECK_INT_EQ(fetch_path(c, "/html", &res), -EPROTO);
    CHECK_STR_CONTAINS(res.msg, "content type 'text/html; charset=utf-8' is not JSON");
    CHECK_INT_EQ(fetch_path(c, "/notjson", &res), -EINVAL);
    CHECK_STR_CONTAINS(res.msg, "the document is not JSON");
    CHECK_INT_EQ(fetch_path(c, "/wrong-id", &res), -EINVAL);
    CHECK_STR_CONTAINS(res.msg, "is not the document's URL");
    /* a port nothing listens on any more */
    int port;
    close(listen_loopback(&port));
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", port);
    CHECK_INT_EQ(fetch_url(c, url, &res), -ECONNREFUSED);
    cimd_free(c);
}

TEST(slow_server_times_out)
{
    server();
    struct cimd *c = cimd_new(true);
    cimd_set_timeouts(c, 1000, 300);
    CHECK_INT_EQ(fetch_path(c, "/slow", &res), -ETIMEDOUT);
    CHECK_STR_CONTAINS(res.msg, "no complete answer within 300 ms");
    cimd_free(c);
}

TEST(refused_before_connecting)
{
    server();
    int before = atomic_load(&srv_conns);
    char url[128];
    /* without the test mode, http:// is refused outright */
    struct cimd *strict = cimd_new(false);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/good", srv_port);
    CHECK_INT_EQ(fetch_url(strict, url, &res), -EINVAL);
    CHECK_STR_CONTAINS(res.msg, "must be an https:// URL");
    CHECK_INT_EQ(res.calls, 0);
    /* https to a loopback address: the address check refuses it, in either mode */
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/good", srv_port);
    CHECK_INT_EQ(fetch_url(strict, url, &res), -EACCES);
    CHECK_STR_CONTAINS(res.msg, "127.0.0.1 is a loopback address");
    CHECK_INT_EQ(res.calls, 0);
    struct cimd *c = cimd_new(true);
    CHECK_INT_EQ(fetch_url(c, url, &res), -EACCES);
    /* a name that resolves to loopback: refused once resolved (on a thread), answered on the
     * loop */
    snprintf(url, sizeof(url), "https://localhost:%d/good", srv_port);
    CHECK_INT_EQ(fetch_url(strict, url, &res), -EACCES);
    CHECK_INT_EQ(res.calls, 1);
    CHECK_STR_CONTAINS(res.msg, "'localhost' resolves to");
    CHECK_STR_CONTAINS(res.msg, "a loopback address");
    CHECK_INT_EQ(fetch_url(c, url, &res), -EACCES);
    CHECK_INT_EQ(atomic_load(&srv_conns), before);
    cimd_free(strict);
    cimd_free(c);
}

TEST(busy_and_cancel)
{
    server();
    struct cimd *c = cimd_new(true);
    enum { N = 8 };
    const struct cimd_limits lim = {
        .fetches = N, .per_requester = N, .per_host = N, .total_ms = CIMD_TOTAL_TIMEOUT_MS};
    cimd_set_limits(c, &lim);
    static struct result rs[N];
    struct cimd_fetch *fs[N];
    char url[128];
    struct err err = {0};
    for (int i = 0; i < N; i++) {
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/held/%d", idle_port, i);
        memset(&rs[i], 0, sizeof(rs[i]));
        fs[i] = cimd_fetch(c, url, NULL, on_fetched, &rs[i], &err);
        CHECK(fs[i] != NULL);
    }
    CHECK(cimd_fetch(c, url, NULL, on_fetched, &res, &err) == NULL);
    CHECK_INT_EQ(err.code, -EBUSY);
    CHECK_STR_CONTAINS(err.msg, "8 fetches are under way");
    run_for(200); /* connected, waiting for an answer that does not come */
    for (int i = 0; i < N; i++) {
        CHECK(!rs[i].done);
        cimd_fetch_cancel(fs[i]);
    }
    run_for(50);
    for (int i = 0; i < N; i++)
        CHECK_INT_EQ(rs[i].calls, 0);
    /* the slots are free again */
    CHECK_INT_EQ(fetch_path(c, "/good", &res), 0);
    cimd_fetch_cancel(NULL);
    cimd_free(c);
}

/* Issue 32, point 4: eight client_id documents that never answer, asked for by one address,
 * held every fetch slot of the server, and a legitimate client's sign-in got 503. Now one
 * requester has CIMD_PER_REQUESTER_DEFAULT and one host CIMD_PER_HOST_DEFAULT of them. */
TEST(eight_hung_documents_leave_room_for_others)
{
    server();
    struct cimd *c = cimd_new(true);
    enum { HUNG = 8 };
    static struct result rs[2 * HUNG];
    struct cimd_fetch *fs[2 * HUNG];
    int held = 0;
    char url[128];
    struct err err = {0};
    /* eight hung documents on [::1] from one address: two are fetched, six refused at once */
    for (int i = 0; i < HUNG; i++) {
        snprintf(url, sizeof(url), "http://[::1]:%d/hung/%d", idle6_port, i);
        memset(&rs[held], 0, sizeof(rs[held]));
        err = (struct err){0};
        struct cimd_fetch *f = cimd_fetch(c, url, "198.51.100.7", on_fetched, &rs[held], &err);
        if (f) {
            fs[held++] = f;
            continue;
        }
        CHECK_INT_EQ(err.code, -EBUSY);
        CHECK_STR_CONTAINS(err.msg, "2 fetches asked for from this address are under way");
    }
    CHECK_INT_EQ(held, CIMD_PER_REQUESTER_DEFAULT);
    /* more from other addresses to the same host: the host's share runs out */
    int refused_by_host = 0;
    for (int i = 0; i < HUNG; i++) {
        char who[32];
        snprintf(who, sizeof(who), "2001:db8:%d::", i);
        snprintf(url, sizeof(url), "http://[::1]:%d/hung/other/%d", idle6_port, i);
        memset(&rs[held], 0, sizeof(rs[held]));
        err = (struct err){0};
        struct cimd_fetch *f = cimd_fetch(c, url, who, on_fetched, &rs[held], &err);
        if (f) {
            fs[held++] = f;
            continue;
        }
        CHECK_INT_EQ(err.code, -EBUSY);
        CHECK_STR_CONTAINS(err.msg, "4 fetches from '::1' are under way, the most one host");
        refused_by_host++;
    }
    CHECK_INT_EQ(held, CIMD_PER_HOST_DEFAULT);
    CHECK_INT_EQ(refused_by_host, HUNG - (CIMD_PER_HOST_DEFAULT - CIMD_PER_REQUESTER_DEFAULT));
    run_for(100); /* connected, waiting */
    /* another requester's client on another host signs in meanwhile */
    memset(&res, 0, sizeof(res));
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/good", srv_port);
    struct cimd_fetch *f = cimd_fetch(c, url, "203.0.113.9", on_fetched, &res, &err);
    CHECK(f != NULL);
    run_until(&res.done, 10000);
    CHECK_INT_EQ(res.code, 0);
    CHECK_STR_CONTAINS(res.client.client_name, "Test Client");
    for (int i = 0; i < held; i++) {
        CHECK(!rs[i].done);
        cimd_fetch_cancel(fs[i]);
    }
    cimd_free(c);
}

/* A document that failed is answered with its failure for a while, not fetched again. */
TEST(failures_are_remembered)
{
    server();
    struct cimd *c = cimd_new(true);
    struct cimd_limits lim = {
        .fetches = 4, .per_requester = 2, .per_host = 4, .total_ms = 300, .failure_ms = 60000};
    cimd_set_limits(c, &lim);
    int before = atomic_load(&srv_conns);
    CHECK_INT_EQ(fetch_path(c, "/slow", &res), -ETIMEDOUT);
    CHECK_STR_CONTAINS(res.msg, "no complete answer within 300 ms");
    CHECK_INT_EQ(atomic_load(&srv_conns) - before, 1);
    /* again, from anyone: the same error at once, saying it is remembered; nothing connects */
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/slow", srv_port);
    struct err err = {0};
    CHECK(cimd_fetch(c, url, "192.0.2.44", on_fetched, &res, &err) == NULL);
    CHECK_INT_EQ(err.code, -ETIMEDOUT);
    CHECK_STR_CONTAINS(err.msg, "no complete answer within 300 ms");
    CHECK_STR_CONTAINS(err.msg, "it is not fetched again for 60 s");
    /* other documents are fetched as usual, and a failed parse is remembered too */
    CHECK_INT_EQ(fetch_path(c, "/good", &res), 0);
    CHECK_INT_EQ(fetch_path(c, "/notjson", &res), -EINVAL);
    CHECK_INT_EQ(fetch_path(c, "/notjson", &res), -EINVAL);
    CHECK_STR_CONTAINS(res.msg, "the document is not JSON");
    CHECK_STR_CONTAINS(res.msg, "not fetched again");
    run_for(50);
    CHECK_INT_EQ(atomic_load(&srv_conns) - before, 3);
    /* with failure_ms 0, a failure is fetched again */
    lim.failure_ms = 0;
    cimd_set_limits(c, &lim);
    CHECK_INT_EQ(fetch_path(c, "/missing", &res), -EPROTO);
    CHECK_INT_EQ(fetch_path(c, "/missing", &res), -EPROTO);
    CHECK(strstr(res.msg, "not fetched again") == NULL);
    CHECK_INT_EQ(atomic_load(&srv_conns) - before, 5);
    cimd_free(c);
}

TEST(cancel_and_free)
{
    server();
    struct cimd *c = cimd_new(true);
    char url[128];
    struct err err = {0};
    /* while the server holds the answer back */
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/slow", srv_port);
    memset(&res, 0, sizeof(res));
    struct cimd_fetch *f = cimd_fetch(c, url, NULL, on_fetched, &res, &err);
    CHECK(f != NULL);
    run_for(100);
    cimd_fetch_cancel(f);
    run_for(50);
    CHECK_INT_EQ(res.calls, 0);
    /* while the name is being resolved */
    snprintf(url, sizeof(url), "https://localhost:%d/good", srv_port);
    f = cimd_fetch(c, url, NULL, on_fetched, &res, &err);
    CHECK(f != NULL);
    cimd_fetch_cancel(f);
    run_for(200);
    CHECK_INT_EQ(res.calls, 0);
    /* freeing the fetcher with fetches under way: no callbacks, nothing left behind */
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/slow", srv_port);
    CHECK(cimd_fetch(c, url, NULL, on_fetched, &res, &err) != NULL);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/held", idle_port);
    CHECK(cimd_fetch(c, url, NULL, on_fetched, &res, &err) != NULL);
    run_for(50);
    snprintf(url, sizeof(url), "https://localhost:%d/good", srv_port);
    CHECK(cimd_fetch(c, url, NULL, on_fetched, &res, &err) != NULL);
    cimd_free(c);
    run_for(200);
    CHECK_INT_EQ(res.calls, 0);
    cimd_free(NULL);
}

TEST_MAIN()

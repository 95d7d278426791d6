/* A warm OpenCode in a sandbox: the agent bridge and its keeper.
 *
 * "sandbox-agent PROGRAM PORT IDLE_S MODEL [SESSION]" (the bridge) is a run's agent process when
 * runs keep OpenCode warm. It takes the task on stdin, as `opencode run` would, and hands it to
 * an `opencode serve` on 127.0.0.1:PORT of the sandbox: it creates the session (or checks that
 * SESSION is there), subscribes to the server's events, posts the prompt, and prints what `opencode
 * run --format json` would print (opencode_serve.c) until the session is idle. Its exit status is
 * 1 when the session reported an error, 2 when it could not do its part, else 0.
 *
 * "sandbox-agent --start PROGRAM PORT IDLE_S" starts the keeper ahead of a run, as soon as the
 * run has its sandbox, so that OpenCode boots while the workspace is cloned and set up; the run's
 * bridge then finds it starting or ready. "sandbox-agent --start PROGRAM PORT IDLE_S MODEL DIR"
 * does so in a pooled sandbox, before any run, and readies the server for DIR (warm_up).
 *
 * "sandbox-keeper PORT IDLE_S FINGERPRINT PROGRAM" (started by a bridge that found none, or ahead
 * of the run as above, in a session of its own, so stopping a run leaves it) starts `PROGRAM
 * serve` with the bridge's environment and keeps it. Bridges talk to it on an abstract unix
 * socket of the sandbox's network namespace, one connection each, held for the whole run:
 *   bridge: "hello FINGERPRINT\n"      keeper: "ready\n" once the server listens,
 *                                              "stale\n" when the server has another
 *                                              configuration (it then stops once no run uses it),
 *                                              "fail MESSAGE\n" when it could not start
 *   bridge: "idle N\n"                 keep the server N seconds after the last run (the
 *                                              latest bridge's say: a pooled server's first
 *                                              run's, since the pool's keeper waits long)
 *   bridge: "session ID DIR\n"         the session the run prompts, and its directory
 *   bridge: "done\n"                   before it exits
 * A connection that ends without "done" is a run that was stopped (cancelled, timed out): the
 * keeper aborts its session, so the server does not go on working for it. With no connection for
 * IDLE_S seconds (or the last "idle"), or once stale or past MAX_AGE_S with none, it stops the
 * server and exits, and the next run starts a new one. Between runs (FREEZE_AFTER_MS without a
 * connection) the server process itself is stopped with SIGSTOP and continued when the next bridge
 * connects: an idle OpenCode still spends a few percent of a core on its timers and garbage
 * collector, which, for every warm session of every user, is the host's. Only that process is
 * stopped, not its group: what the agent started runs on. The sandbox is the boundary: all of this
 * is the tenant's own. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_http.h"
#include "base/util.h"
#include "helper.h"
#include "sandbox/opencode_serve.h"

#define TASK_MAX (4u << 20)
#define POOL_IDLE_S "72000"           /* a pooled server's keeper waits this long for a run */
#define WARM_UP_TASK "Reply with OK." /* the pooled server's one prompt, refused */
#define WARM_UP_LIMIT_MS 120000
#define EVENT_MAX (16u << 20)    /* one event of the stream; larger ones are skipped */
#define TOOLS_NAME "sandbox-mcp" /* the server's own MCP tools, as the configuration names them */
#define TOOLS_WAIT_MS 20000      /* how long a run waits for the agent to have them */
#define TOOLS_CONNECTS 3         /* connections made again before the run goes on without them */

extern char **environ;

static const char *bridge_session = "";

static int bridge_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bridge_fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    char *line = oc_error_line(bridge_session, msg, time_now_ms());
    if (line)
        write_full(1, line, strlen(line));
    free(line);
    dprintf(2, "sandbox-agent: %s\n", msg);
    return 2;
}

static uint64_t fnv(uint64_t h, const char *s)
{
    for (const char *p = s ? s : ""; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 1099511628211ull;
    }
    return h ^ 0xff; /* parts end distinctly */
}

/* 64-bit FNV-1a of the server's program, environment and configuration, in hex: a changed
 * configuration (a new model of a provider the catalogue lacks, a provider added) or environment
 * (what the agent's commands inherit from the server) needs a new server. Not counted: the token
 * (SANDBOX_MCP_PROXY_TOKEN and gh's copies), the sandbox's whichever run started the server, and
 * the working directory, the run's. OpenCode reads its global configuration files once, at its
 * start, so they count too, by size and change time: a setup (or a run) that writes one makes the
 * server started before it stale. */
static void fingerprint_of(const char *program, char out[17])
{
    /* the token is in these, the same token whichever form of it (the sandbox's key, its warm
     * token) the server was started with */
    static const char *const skip[] = {
        "SANDBOX_MCP_PROXY_TOKEN=", "GH_TOKEN=", "GH_ENTERPRISE_TOKEN=", "PWD="};
    uint64_t h = fnv(1469598103934665603ull, program);
    for (char **e = environ; *e; e++) {
        bool skipped = false;
        for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
            skipped |= strncmp(*e, skip[i], strlen(skip[i])) == 0;
        if (!skipped)
            h = fnv(h, *e);
    }
    static const char *const files[] = {"opencode.json", "opencode.jsonc", "config.json"};
    const char *home = getenv("HOME");
    for (size_t i = 0; home && i < sizeof(files) / sizeof(files[0]); i++) {
        char path[4096], stamp[96] = "-";
        struct stat st;
        snprintf(path, sizeof(path), "%s/.config/opencode/%s", home, files[i]);
        if (stat(path, &st) == 0)
            snprintf(stamp, sizeof(stamp), "%lld.%lld.%ld", (long long)st.st_size,
                     (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
        h = fnv(h, stamp);
    }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

static void start_keeper(const char *port, const char *idle, const char *fp, const char *program)
{
    pid_t pid = fork();
    if (pid < 0)
        return;
    if (pid > 0) {
        waitpid(pid, NULL, 0);
        return;
    }
    /* the keeper is a grandchild, in a session of its own: the init adopts it, and stopping the
     * run (which kills the bridge's process group) leaves it */
    setsid();
    if (fork() != 0)
        _exit(0);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
    }
    char *argv[] = {"sandbox-keeper", (char *)port,    (char *)idle,
                    (char *)fp,       (char *)program, NULL};
    execve("/proc/self/exe", argv, environ);
    _exit(127);
}

/* Connect to the keeper (starting one when there is none) and wait until its server is ready.
 * Returns the connection, or -1 with msg set. */
static int keeper_ready(const char *program, const char *port, const char *idle, char *msg,
                        size_t cap)
{
    char fp[17];
    fingerprint_of(program, fp);
    struct sockaddr_un a;
    socklen_t alen;
    keeper_address(port, &a, &alen);
    for (int attempt = 0; attempt < 4; attempt++) {
        int fd = -1;
        for (int i = 0; i < 100 && fd < 0; i++) {
            fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd >= 0 && connect(fd, (struct sockaddr *)&a, alen) == 0)
                break;
            if (fd >= 0)
                close(fd);
            fd = -1;
            if (i == 0)
                start_keeper(port, idle, fp, program);
            usleep(50000);
        }
        if (fd < 0) {
            snprintf(msg, cap, "the agent's keeper did not start");
            return -1;
        }
        char hello[64];
        snprintf(hello, sizeof(hello), "hello %s\n", fp);
        struct conn *c = calloc(1, sizeof(*c));
        char line[300] = "";
        bool got = c && write_full(fd, hello, strlen(hello)) == 0 &&
                   (c->fd = fd, read_line(c, line, sizeof(line), READY_TIMEOUT_S * 1000 + 5000));
        free(c);
        if (got && strcmp(line, "ready") == 0)
            return fd;
        close(fd);
        if (got && strncmp(line, "fail ", 5) == 0) {
            snprintf(msg, cap, "%s", line + 5);
            return -1;
        }
        if (!got) /* a keeper stopping just then: its successor is started next time round */
            continue;
        if (strcmp(line, "stale") != 0) {
            snprintf(msg, cap, "the agent's keeper said '%.100s'", line);
            return -1;
        }
        /* the running server has another configuration: wait for its keeper to stop it */
        for (int i = 0; i < 200; i++) {
            int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            bool there = probe >= 0 && connect(probe, (struct sockaddr *)&a, alen) == 0;
            if (probe >= 0)
                close(probe);
            if (!there)
                break;
            usleep(50000);
        }
    }
    snprintf(msg, cap, "the agent's keeper did not answer");
    return -1;
}

static char *read_task(void)
{
    size_t cap = 65536, len = 0;
    char *t = malloc(cap + 1);
    ssize_t n;
    while (t && (n = read(0, t + len, cap - len)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        len += (size_t)n;
        if (len == cap) {
            if (cap >= TASK_MAX)
                break;
            cap *= 2;
            char *m = realloc(t, cap + 1);
            if (!m) {
                free(t);
                return NULL;
            }
            t = m;
        }
    }
    if (t)
        t[len] = '\0';
    return t;
}

/* The server's own tools for the agent (ask_user, ...: its /agent/mcp) are the agent's only once
 * OpenCode has connected to them. It connects as its instance starts, and GET /mcp answers once
 * that is done (its connection is bounded: 30 s): a prompt posted after it has them. A connection
 * that failed (on a loaded machine, a request of it refused or cut) is made again, up to
 * TOOLS_CONNECTS times, so that the run's first turn has them. A server without them configured,
 * or one that does not say, is not waited for. What came of it goes to the run's agent.log. */
static void wait_tools(uint16_t port, const char *dir)
{
    int64_t until = time_mono_ms() + TOOLS_WAIT_MS;
    int connects = 0;
    for (;;) {
        int status = 0;
        json_t *res = call(port, "GET", "/mcp", dir, NULL, &status);
        const json_t *entry = json_object_get(res, TOOLS_NAME);
        bool named = json_is_object(entry);
        const char *st = json_string_value(json_object_get(entry, "status"));
        const char *err = json_string_value(json_object_get(entry, "error"));
        char state[64], why[200];
        snprintf(state, sizeof(state), "%s", st ? st : "unknown");
        snprintf(why, sizeof(why), "%s", err ? err : "");
        json_decref(res);
        if (status != 200 || !named) {
            dprintf(2, "sandbox-agent: its tools: %s (HTTP %d)\n", named ? state : "not configured",
                    status);
            return;
        }
        if (strcmp(state, "connected") == 0) {
            if (connects)
                dprintf(2, "sandbox-agent: its tools are connected\n");
            return;
        }
        bool failed = strcmp(state, "disabled") != 0; /* failed, needs_auth, ... */
        if (failed && connects < TOOLS_CONNECTS) {
            dprintf(2, "sandbox-agent: its tools are %s (%s); connecting again\n", state, why);
            connects++;
            json_decref(call(port, "POST", "/mcp/" TOOLS_NAME "/connect", dir, "{}", &status));
            continue;
        }
        if (failed || time_mono_ms() >= until) {
            dprintf(2, "sandbox-agent: its tools are %s (%s); the run goes on without them\n",
                    state, why);
            return;
        }
        usleep(50000);
    }
}

/* The server's event stream (an open GET /event), one event at a time. */
struct stream {
    struct conn *c;
    struct oc_sse sse;
    char *line; /* the line being read, up to EVENT_MAX + 1 bytes */
    size_t llen;
    char chunk[65536];
    size_t coff, clen;
};

/* The next event's data into *data and *len (valid until the next call); false when the stream
 * ended or failed. ms < 0 waits as long as it takes. Events past EVENT_MAX are skipped. */
static bool next_event(struct stream *s, const char **data, size_t *len, int ms)
{
    for (;;) {
        while (s->coff < s->clen) {
            char ch = s->chunk[s->coff++];
            if (ch != '\n') {
                if (s->llen <= EVENT_MAX)
                    s->line[s->llen++] = ch;
                continue;
            }
            bool over = false;
            if (s->llen > EVENT_MAX) {
                s->llen = 0;
                s->sse.over = true;
            }
            bool ev = oc_sse_line(&s->sse, s->line, s->llen, data, len, &over);
            s->llen = 0;
            if (ev && !over)
                return true;
        }
        ssize_t n = read_body(s->c, s->chunk, sizeof(s->chunk), ms);
        if (n <= 0)
            return false;
        s->coff = 0;
        s->clen = (size_t)n;
    }
}

static bool safe_id(const char *id)
{
    size_t n = strlen(id);
    return n > 0 && n <= OC_SESSION_ID_MAX &&
           strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* Follow the stream until the session is idle or the stream ends (or until the monotonic time
 * deadline_ms, when not 0; with until_retry, also until the session retries a model request).
 * Returns the bridge's exit status. */
static int follow(struct stream *s, struct oc_follow *f, uint16_t port, const char *dir,
                  int64_t deadline_ms, bool until_retry)
{
    const char *data;
    size_t len;
    for (;;) {
        int ms = -1;
        if (deadline_ms && (ms = (int)(deadline_ms - time_mono_ms())) <= 0)
            return bridge_fail("the agent's server did not finish in time");
        if (!next_event(s, &data, &len, ms))
            break;
        char permission[128];
        char *out = oc_follow_event(f, data, len, time_now_ms(), permission, sizeof(permission));
        bool written = !out || write_full(1, out, strlen(out)) == 0;
        free(out);
        if (!written)
            return 2;
        if (permission[0] && safe_id(permission)) {
            char path[256];
            int status;
            snprintf(path, sizeof(path), "/permission/%s/reply", permission);
            json_decref(call(port, "POST", path, dir, "{\"reply\":\"reject\"}", &status));
        }
        if (f->idle || (until_retry && f->retrying))
            return f->errored || (until_retry && f->retrying) ? 1 : 0;
    }
    return bridge_fail("the agent's server closed its event stream before the end");
}

/* The newest message of session into after ("" when it has none or the server did not say): what
 * follows it on the event stream is the prompt about to be posted. That message is an earlier
 * run's; when it is an answer still going (a run stopped just now, whose bridge the keeper has
 * not yet seen go), it is aborted: the earlier run is over, and the server would take this
 * prompt only after it. */
static void newest_message(uint16_t port, const char *session, const char *dir, char *after,
                           size_t cap)
{
    char path[256];
    int status;
    after[0] = '\0';
    snprintf(path, sizeof(path), "/session/%s/message?limit=1", session);
    json_t *res = call(port, "GET", path, dir, NULL, &status);
    size_t n = json_array_size(res); /* oldest first: the newest is the last */
    json_t *info = n ? json_object_get(json_array_get(res, n - 1), "info") : NULL;
    const char *id = json_string_value(json_object_get(info, "id"));
    const char *role = json_string_value(json_object_get(info, "role"));
    json_t *completed = json_object_get(json_object_get(info, "time"), "completed");
    if (status != 200 || !json_is_array(res)) {
        dprintf(2, "sandbox-agent: the session's messages were not listed (HTTP %d)\n", status);
    } else if (id && strlen(id) < cap) {
        strcpy(after, id);
        if (role && strcmp(role, "assistant") == 0 && (!completed || json_is_null(completed))) {
            session_abort(port, session, dir);
            dprintf(2, "sandbox-agent: an earlier run's answer was still going: aborted\n");
        }
    }
    json_decref(res);
}

/* "sandbox-agent --start PROGRAM PORT IDLE_S": the keeper, and so the server, started ahead of
 * the run's bridge (while its workspace is prepared and set up), with the environment the bridge
 * will have. A keeper already there is left alone: the bridge tells whether it serves. */
static int start_ahead(const char *program, const char *port, const char *idle)
{
    char fp[17];
    fingerprint_of(program, fp);
    struct sockaddr_un a;
    socklen_t alen;
    keeper_address(port, &a, &alen);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool there = fd >= 0 && connect(fd, (struct sockaddr *)&a, alen) == 0;
    if (fd >= 0)
        close(fd);
    if (!there) {
        start_keeper(port, idle, fp, program);
        dprintf(2, "sandbox-agent: the agent's server started ahead of the run\n");
    }
    return 0;
}

/* One prompt of a session of the server on port_s (want: the session to continue, "" for a new
 * one) in the working directory, its events printed until the session is idle: the bridge's part
 * for a run, and the pooled agent's warm-up. Takes task. limit_ms: 0, or how long the prompt may
 * take; drop: delete the session afterwards. Returns the bridge's exit status. */
static int bridge(const char *program, const char *port_s, const char *idle, const char *model,
                  const char *want, char *task, int64_t limit_ms, bool drop)
{
    long port = strtol(port_s, NULL, 10);
    const char *slash = strchr(model, '/');
    if (port <= 0 || port > 65535 || !slash || slash == model || !slash[1])
        return bridge_fail("bad arguments");
    int64_t t0 = time_mono_ms();
    char cwd[2048], dir[3 * 2048 + 1], msg[512];
    if (!task || !getcwd(cwd, sizeof(cwd)) || !oc_uri_component(cwd, dir, sizeof(dir)))
        return bridge_fail("cannot read the task or the working directory");
    int keeper = keeper_ready(program, port_s, idle, msg, sizeof(msg));
    if (keeper < 0)
        return bridge_fail("%s", msg);
    int64_t t_ready = time_mono_ms();
    /* how long the keeper keeps the server after this run: this bridge's say */
    char idle_line[64];
    snprintf(idle_line, sizeof(idle_line), "idle %s\n", idle);
    write_full(keeper, idle_line, strlen(idle_line));

    /* Subscribe to the events first, so no event of the prompt is missed, and look for the
     * session while the server answers that. */
    struct stream *s = calloc(1, sizeof(*s));
    struct conn *ev = calloc(1, sizeof(*ev));
    if (!s || !ev || !(s->line = malloc(EVENT_MAX + 1)))
        return bridge_fail("out of memory");
    s->c = ev;
    oc_sse_init(&s->sse, EVENT_MAX);
    if (!request_send(ev, (uint16_t)port, "GET", "/event", dir, NULL, "text/event-stream"))
        return bridge_fail("the agent's server refused its event stream");

    /* the session: the one to continue, or a new one that asks no questions (as `opencode run`) */
    char session[OC_SESSION_ID_MAX + 1] = "", path[512];
    int status;
    json_t *res;
    if (want[0]) {
        if (!safe_id(want))
            return bridge_fail("Session not found");
        snprintf(path, sizeof(path), "/session/%s", want);
        res = call((uint16_t)port, "GET", path, dir, NULL, &status);
    } else {
        res = call((uint16_t)port, "POST", "/session", dir,
                   "{\"permission\":[{\"permission\":\"question\",\"action\":\"deny\","
                   "\"pattern\":\"*\"},{\"permission\":\"plan_enter\",\"action\":\"deny\","
                   "\"pattern\":\"*\"},{\"permission\":\"plan_exit\",\"action\":\"deny\","
                   "\"pattern\":\"*\"}]}",
                   &status);
    }
    const char *id = json_string_value(json_object_get(res, "id"));
    if (status == 200 && id && safe_id(id))
        snprintf(session, sizeof(session), "%s", id);
    json_decref(res);
    if (!session[0])
        return want[0]
                   ? bridge_fail("Session not found")
                   : bridge_fail("the agent's server did not create a session (HTTP %d)", status);
    bridge_session = session;
    int64_t t_session = time_mono_ms();
    char note[sizeof(session) + sizeof(dir) + 16];
    snprintf(note, sizeof(note), "session %s %s\n", session, dir);
    write_full(keeper, note, strlen(note));

    const char *data;
    size_t dlen;
    if (response_head(ev) != 200)
        return bridge_fail("the agent's server refused its event stream");
    if (!next_event(s, &data, &dlen, REQUEST_TIMEOUT_MS)) /* server.connected: subscribed */
        return bridge_fail("the agent's server sent no event");
    int64_t t_events = time_mono_ms();
    char after[OC_MESSAGE_ID_MAX + 1] = "";
    if (want[0])
        newest_message((uint16_t)port, session, dir, after, sizeof(after));

    wait_tools((uint16_t)port, dir);
    json_t *body = json_pack("{s:{s:s%, s:s}, s:[{s:s, s:s}]}", "model", "providerID", model,
                             (size_t)(slash - model), "modelID", slash + 1, "parts", "type", "text",
                             "text", task);
    free(task);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    snprintf(path, sizeof(path), "/session/%s/prompt_async", session);
    res = text ? call((uint16_t)port, "POST", path, dir, text, &status) : NULL;
    free(text);
    json_decref(res);
    if (status != 204 && status != 200)
        return bridge_fail("the agent's server refused the prompt (HTTP %d)", status);
    /* for the run's agent.log: where the bridge's time went */
    dprintf(2,
            "sandbox-agent: session %s; after %lld ms the server was ready, %lld the session, "
            "%lld the event stream, %lld the prompt posted\n",
            session, (long long)(t_ready - t0), (long long)(t_session - t0),
            (long long)(t_events - t0), (long long)(time_mono_ms() - t0));

    struct oc_follow f;
    oc_follow_init(&f, session, true);
    oc_follow_after(&f, after);
    int rc = follow(s, &f, (uint16_t)port, dir, limit_ms ? time_mono_ms() + limit_ms : 0, drop);
    if (drop) {
        if (!f.idle)
            session_abort((uint16_t)port, session, dir);
        snprintf(path, sizeof(path), "/session/%s", session);
        json_decref(call((uint16_t)port, "DELETE", path, dir, NULL, &status));
    }
    if (rc != 2 || drop)
        write_full(keeper, "done\n", 5);
    close(ev->fd);
    oc_sse_free(&s->sse);
    free(s->line);
    free(s);
    free(ev);
    close(keeper);
    return rc;
}

/* "sandbox-agent --start PROGRAM PORT IDLE_S MODEL DIR": a pooled sandbox's agent (booted before
 * any run has the sandbox): the server started, then readied for DIR by one prompt there, in a
 * session deleted afterwards. Its model request is refused, since no run is running in the
 * sandbox (its key, the sandbox's, is honored only then), and that is its end: what the server
 * makes for a directory on its first prompt (the directory's instance, its tools, the system
 * prompt) is made, so the first run there only prompts. The server would try the request again
 * (and a try after the hand-over would be let through, on the new owner's run): the session is
 * aborted once it says it will, and deleted, before this exits, which is when the pool may hand
 * the sandbox over. The keeper keeps the server until a run's bridge says for how long. */
static int warm_up(const char *program, const char *port, const char *model, const char *dir)
{
    if (chdir(dir) < 0)
        return bridge_fail("cannot enter %s: %s", dir, strerror(errno));
    int rc =
        bridge(program, port, POOL_IDLE_S, model, "", strdup(WARM_UP_TASK), WARM_UP_LIMIT_MS, true);
    dprintf(2, "sandbox-agent: the pooled agent's server is %s\n", rc == 2 ? "not ready" : "ready");
    return rc == 2 ? 2 : 0;
}

int agent_main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc == 5 && strcmp(argv[1], "--start") == 0)
        return start_ahead(argv[2], argv[3], argv[4]);
    if (argc == 7 && strcmp(argv[1], "--start") == 0)
        return warm_up(argv[2], argv[3], argv[5], argv[6]);
    if (argc != 5 && argc != 6)
        return bridge_fail("usage: sandbox-agent PROGRAM PORT IDLE_S MODEL [SESSION]");
    return bridge(argv[1], argv[2], argv[3], argv[4], argc == 6 ? argv[5] : "", read_task(), 0,
                  false);
}

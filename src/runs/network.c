/* The network of sandboxes: the mode each is judged under, and the record of what it tried.
 *
 * The egress proxy asks for a sandbox's mode at every connection: the deployment's, narrowed by
 * its user's setting, narrowed again by the run under way in its session (a run is given its
 * mode when submitted). Every attempt is then counted three ways: in the store per sandbox, run,
 * destination and outcome (gathered here and written a moment later, many in one transaction,
 * so a sandbox opening thousands of connections costs a few writes a second); on /metrics; and
 * in the log, one line each, at most LOG_PER_SECOND of a sandbox's a second (the next line
 * written says how many were held back). */
#include "runs/runs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/loop.h"
#include "base/metrics.h"
#include "base/util.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

#define FLUSH_MS 250
#define PENDING_MAX 256   /* distinct rows held between writes; one more writes at once */
#define LOG_PER_SECOND 20 /* egress lines of one sandbox */
#define PRUNE_MS (60 * 60 * 1000)
#define KEEP_MS (30LL * 24 * 60 * 60 * 1000) /* attempts outside runs are kept 30 days */

struct pending {
    char user_id[64], sandbox_id[64], run_id[64];
    char host[256];
    int port;
    char verdict[16], reason[32];
    char why[301];
    char addr[EGRESS_ADDR_TEXT_MAX];
    int64_t attempts, up, down, first_at, last_at;
};

struct runs_network {
    struct store *st;
    struct sandbox_manager *mgr;
    const struct egress_policy *policy;
    runs_network_session_fn session_run; /* the run under way in a session; NULL: none */
    void *session_ctx;
    struct pending pending[PENDING_MAX];
    size_t npending;
    struct loop_timer flush_timer;
    bool flush_armed;
    int64_t pruned_at;
};

enum egress_mode runs_network_bound(const struct egress_policy *p, struct store *st,
                                    const char *user_id)
{
    if (!p)
        return EGRESS_MODE_NONE;
    char mine[STORE_NETWORK_MAX];
    enum egress_mode bound = egress_policy_mode(p), m;
    struct err err = {0};
    if (store_user_network_get(st, user_id, mine, &err) < 0)
        return EGRESS_MODE_NONE;
    if (mine[0] && egress_mode_parse(mine, &m) == 0)
        bound = egress_mode_narrow(bound, m);
    return bound;
}

struct runs_network *runs_network_new(struct store *st, struct sandbox_manager *mgr,
                                      const struct egress_policy *p)
{
    struct runs_network *n = xcalloc(1, sizeof(*n));
    n->st = st;
    n->mgr = mgr;
    n->policy = p;
    return n;
}

void *runs_network_set_session(struct runs_network *n, runs_network_session_fn fn, void *ctx)
{
    void *old = n->session_ctx;
    n->session_run = fn;
    n->session_ctx = fn ? ctx : NULL;
    return old;
}

/* The sandbox's owner, and the run under way in its session ("" when none). */
static int owner_of(struct runs_network *n, const char *sandbox_id, char user_id[64],
                    char run_id[64], enum egress_mode *run_mode)
{
    struct sandbox_info i;
    if (!n->mgr || sandbox_manager_find(n->mgr, sandbox_id, &i) < 0)
        return -1;
    snprintf(user_id, 64, "%s", i.user_id);
    run_id[0] = '\0';
    *run_mode = EGRESS_MODE_PUBLIC;
    if (n->session_run && i.session_id && i.session_id[0])
        n->session_run(n->session_ctx, i.session_id, run_id, run_mode);
    return 0;
}

enum egress_mode runs_network_mode(void *ctx, const char *sandbox_id, char user_id[64])
{
    struct runs_network *n = ctx;
    char run_id[64];
    enum egress_mode run_mode;
    user_id[0] = '\0';
    if (owner_of(n, sandbox_id, user_id, run_id, &run_mode) < 0)
        return EGRESS_MODE_NONE; /* a sandbox nobody owns gets nothing */
    return egress_mode_narrow(runs_network_bound(n->policy, n->st, user_id), run_mode);
}

void runs_network_flush(struct runs_network *n)
{
    if (n->flush_armed) {
        loop_timer_stop(&n->flush_timer);
        n->flush_armed = false;
    }
    struct err err = {0};
    if (n->npending) {
        struct store_egress_row rows[PENDING_MAX];
        for (size_t i = 0; i < n->npending; i++) {
            const struct pending *p = &n->pending[i];
            rows[i] = (struct store_egress_row){
                .user_id = p->user_id,
                .sandbox_id = p->sandbox_id,
                .run_id = p->run_id,
                .host = p->host,
                .port = p->port,
                .verdict = p->verdict,
                .reason = p->reason,
                .why = p->why,
                .addr = p->addr,
                .attempts = p->attempts,
                .bytes_up = p->up,
                .bytes_down = p->down,
                .first_at = p->first_at,
                .last_at = p->last_at,
            };
        }
        if (store_egress_add(n->st, rows, n->npending, &err) < 0)
            log_warn("egress record failed rows=%zu err=\"%s\"", n->npending, err.msg);
        n->npending = 0;
    }
    int64_t now = time_now_ms();
    if (now - n->pruned_at >= PRUNE_MS) {
        n->pruned_at = now;
        if (store_egress_prune(n->st, now - KEEP_MS, &err) < 0)
            log_warn("egress prune failed err=\"%s\"", err.msg);
    }
}

static void on_flush(struct loop_timer *t)
{
    struct runs_network *n =
        (struct runs_network *)((char *)t - offsetof(struct runs_network, flush_timer));
    n->flush_armed = false;
    runs_network_flush(n);
}

static void log_attempt(const struct egress_attempt *a)
{
    char key[96];
    uint64_t held = 0;
    snprintf(key, sizeof(key), "egress %s", a->sandbox_id);
    if (!log_ratelimit(key, LOG_PER_SECOND, time_mono_ms(), &held))
        return;
    log_info("egress connect sbx=%s method=%s host=%s port=%u addr=%s verdict=%s reason=%s "
             "status=%d up=%llu down=%llu ms=%lld suppressed=%llu",
             a->sandbox_id, a->method[0] ? a->method : "-", a->host[0] ? a->host : "-",
             (unsigned)a->port, a->addr[0] ? a->addr : "-", a->verdict, a->reason, a->status,
             (unsigned long long)a->up, (unsigned long long)a->down,
             (long long)(a->end_ms - a->start_ms), (unsigned long long)held);
}

void runs_network_record(void *ctx, const struct egress_attempt *a)
{
    struct runs_network *n = ctx;
    log_attempt(a);
    metrics_egress(a->verdict, a->reason, a->up, a->down);
    char user_id[64], run_id[64];
    enum egress_mode run_mode;
    if (owner_of(n, a->sandbox_id, user_id, run_id, &run_mode) < 0)
        return; /* stopped meanwhile: the log and the metrics have it */
    struct pending *p = NULL;
    for (size_t i = 0; i < n->npending && !p; i++) {
        struct pending *q = &n->pending[i];
        if (q->port == a->port && strcmp(q->sandbox_id, a->sandbox_id) == 0 &&
            strcmp(q->run_id, run_id) == 0 && strcmp(q->host, a->host) == 0 &&
            strcmp(q->verdict, a->verdict) == 0 && strcmp(q->reason, a->reason) == 0)
            p = q;
    }
    if (!p) {
        if (n->npending == PENDING_MAX)
            runs_network_flush(n);
        p = &n->pending[n->npending++];
        memset(p, 0, sizeof(*p));
        snprintf(p->user_id, sizeof(p->user_id), "%s", user_id);
        snprintf(p->sandbox_id, sizeof(p->sandbox_id), "%s", a->sandbox_id);
        snprintf(p->run_id, sizeof(p->run_id), "%s", run_id);
        snprintf(p->host, sizeof(p->host), "%s", a->host);
        p->port = a->port;
        snprintf(p->verdict, sizeof(p->verdict), "%s", a->verdict);
        snprintf(p->reason, sizeof(p->reason), "%s", a->reason);
        p->first_at = a->start_ms;
    }
    snprintf(p->why, sizeof(p->why), "%s", a->why ? a->why : "");
    snprintf(p->addr, sizeof(p->addr), "%s", a->addr);
    p->attempts++;
    p->up += (int64_t)a->up;
    p->down += (int64_t)a->down;
    p->last_at = a->end_ms;
    if (!n->flush_armed) {
        n->flush_armed = true;
        loop_timer_start(&n->flush_timer, FLUSH_MS, on_flush);
    }
}

void runs_network_free(struct runs_network *n)
{
    if (!n)
        return;
    runs_network_flush(n);
    free(n);
}

/* --- the summary --- */

#define SUMMARY_LIST_MAX 50

struct summary {
    json_t *reached, *denied, *failed;
    int64_t connections, denied_attempts, failed_attempts, up, down;
    int64_t more; /* rows beyond SUMMARY_LIST_MAX in some list */
};

static void add_row(const struct store_egress_row *row, void *ctx)
{
    struct summary *s = ctx;
    bool ok = strcmp(row->verdict, "allowed") == 0 && strcmp(row->reason, "ok") == 0;
    bool denied = strcmp(row->verdict, "denied") == 0;
    json_t *list = ok ? s->reached : denied ? s->denied : s->failed;
    if (ok) {
        s->connections += row->attempts;
        s->up += row->bytes_up;
        s->down += row->bytes_down;
    } else if (denied) {
        s->denied_attempts += row->attempts;
    } else {
        s->failed_attempts += row->attempts;
    }
    if (json_array_size(list) >= SUMMARY_LIST_MAX) {
        s->more++;
        return;
    }
    json_t *j = json_pack("{s:s, s:i}", "host", row->host, "port", row->port);
    if (ok) {
        json_object_set_new(j, "connections", json_integer(row->attempts));
        json_object_set_new(j, "bytes_up", json_integer(row->bytes_up));
        json_object_set_new(j, "bytes_down", json_integer(row->bytes_down));
    } else {
        json_object_set_new(j, "attempts", json_integer(row->attempts));
        json_object_set_new(j, "reason", json_string(row->reason));
        json_object_set_new(j, "message", json_string(row->why));
    }
    json_array_append_new(list, j);
}

json_t *runs_network_summary(struct store *st, const struct store_run *r)
{
    if (!r->network[0])
        return json_null();
    struct summary s = {json_array(), json_array(), json_array(), 0, 0, 0, 0, 0, 0};
    struct err err = {0};
    if (store_egress_list(st, r->id, add_row, &s, &err) < 0)
        log_warn("egress summary failed run=%s err=\"%s\"", r->id, err.msg);
    json_t *j =
        json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "mode", r->network,
                  "connections", (json_int_t)s.connections, "bytes_up", (json_int_t)s.up,
                  "bytes_down", (json_int_t)s.down, "denied_attempts",
                  (json_int_t)s.denied_attempts, "failed_attempts", (json_int_t)s.failed_attempts,
                  "reached", s.reached, "denied", s.denied, "failed", s.failed);
    if (s.more)
        json_object_set_new(j, "more", json_integer(s.more));
    return j;
}

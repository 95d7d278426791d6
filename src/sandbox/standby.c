/* Standby: a sandbox stopped for being idle is started again at once, in the background, and
 * kept ready for its owner's next call, which then takes it in place of a start.
 *
 * An idle stop frees what a sandbox's processes held (their memory, their files' pages, what they
 * left in /tmp) and the next call used to pay for a whole start: cgroups, mounts, namespaces, the
 * init. A standby sandbox is that start made ahead: the same sandbox (its id, layer and
 * workspace), started as a pooled one is and handed over at once (sandbox_arm: its network
 * namespace made, its init confined), so that nothing runs in it but its init. To its owner it
 * is stopped, as before: the store says so, it is not counted against their running sandboxes
 * and nothing of what ran before is in it; their next call takes it with bookkeeping only. It is
 * the first to give way when a start needs a slot or disk room (lru_idle in admit.c), after the
 * pool's, is made only in a slot the pool does not want, is stopped
 * for good (no standby again) when nobody has taken it after SANDBOX_STANDBY_MAX_MS, when the
 * disk runs low, or when it dies, and it counts in SANDBOX_MAX_RUNNING. At most
 * SANDBOX_STANDBY (cfg.standby) are kept; a stop for any other reason than idleness makes none. */
#include "sandbox/sandbox_internal.h"

#include <string.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/util.h"

static unsigned standby_count(const struct sandbox_manager *m)
{
    unsigned n = 0;
    for (const struct sandbox *s = m->all; s; s = s->next)
        n += s->standby && s->state != SBX_STOPPED;
    return n;
}

void standby_gauges(const struct sandbox_manager *m)
{
    unsigned n = standby_count(m);
    metrics_gauge_set("sandbox_mcp_sandboxes_running",
                      "Sandboxes running now, standby ones not counted", m->running - n);
    metrics_gauge_set("sandbox_mcp_sandboxes_standby",
                      "Sandboxes stopped when idle and started again ahead of their owner", n);
}

static void on_standby_started(void *ctx, struct sandbox *sbx, const struct err *err)
{
    (void)ctx;
    if (err) {
        sbx->standby = false; /* the start has logged why; the next call starts it as before */
        return;
    }
    sandbox_release(sbx);
    struct err aerr = {0};
    if (sandbox_arm(sbx, &aerr) < 0) {
        log_warn("sandbox standby failed sbx=%s err=\"%s\"", sbx->id, aerr.msg);
        sbx->standby = false;
        sandbox_stop(sbx, "standby failed");
    }
}

void standby_after_idle(struct sandbox *sbx)
{
    struct sandbox_manager *m = sbx->m;
    if (!m->cfg.standby || sbx->state != SBX_STOPPED || sbx->waiters || sbx->retiring ||
        sandbox_unowned(sbx))
        return;
    /* a standby never makes room for itself */
    struct err err = {0};
    bool user_limit;
    const char *none = m->disk.low                                          ? "disk low"
                       : m->running + pool_missing(m) >= m->cfg.max_running ? "no free slot"
                       : standby_count(m) >= m->cfg.standby            ? "SANDBOX_STANDBY reached"
                       : strcmp(sbx->template_name, m->tmpl.name) != 0 ? "template changed"
                       : sandbox_disk_check(m, sbx, &user_limit, &err) < 0 ? err.msg
                                                                           : NULL;
    if (none) {
        log_info("sandbox standby none sbx=%s user=%s reason=\"%s\"", sbx->id, sbx->user_id, none);
        return;
    }
    sbx->standby = true;
    sbx->standby_at = time_mono_ms();
    sbx->net_deferred = m->park_netns >= 0;
    struct sandbox_waiter *w = xcalloc(1, sizeof(*w));
    w->sbx = sbx;
    w->cb = on_standby_started;
    sbx->waiters = w;
    sandbox_admit_start(sbx);
}

int standby_take(struct sandbox *sbx, struct err *err)
{
    if (!sbx->standby)
        return 0;
    if (sbx->state == SBX_STARTING) {
        /* taken before it is ready: an ordinary start the caller waits for */
        sbx->standby = false;
        return 0;
    }
    int64_t t0 = time_mono_us();
    if (sbx->state != SBX_RUNNING || sbx->net_deferred || !sandbox_alive(sbx) ||
        strcmp(sbx->template_name, sbx->m->tmpl.name) != 0) {
        sbx->standby = false;
        sandbox_stop(sbx, "standby not ready");
        return 0;
    }
    int r = sandbox_user_room(sbx->m, sbx->user_id, sbx, NULL, err);
    if (r < 0)
        return r;
    sbx->standby = false;
    sbx->started_at = time_now_ms();
    sbx->last_used = time_mono_ms();
    sandbox_save(sbx);
    standby_gauges(sbx->m);
    log_info("sandbox started sbx=%s user=%s pid=%d template=%s from=standby ms=%.2f", sbx->id,
             sbx->user_id, sbx->init_pid, sbx->template_name,
             (double)(time_mono_us() - t0) / 1000.0);
    return 1;
}

void standby_tick(struct sandbox_manager *m)
{
    int64_t now = time_mono_ms();
    for (struct sandbox *s = m->all; s; s = s->next) {
        if (!s->standby || s->state != SBX_RUNNING || s->holds || s->waiters)
            continue;
        if (!sandbox_alive(s))
            sandbox_stop(s, "standby died");
        else if (now - s->standby_at > SANDBOX_STANDBY_MAX_MS)
            sandbox_stop(s, "standby not taken");
        else if (strcmp(s->template_name, m->tmpl.name) != 0)
            sandbox_stop(s, "template changed");
    }
}

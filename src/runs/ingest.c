/* A run's events: the sandbox's init copies the agent's stdout into the run's event file (up to
 * its cap) and writes its wait status into the run's status file once it has reaped it; this
 * stage reads the event file from the offset the store holds, parses each line through the
 * run's agent adapter (agent_adapter.parse), redacts the run's token from what it keeps, and
 * stores the events in batches with the new offset, so each is stored exactly once across
 * restarts. It is woken by inotify on both files and by the engine's tick.
 *
 * The rule of this file: nothing here trusts the event file (the agent writes it): lines are cut
 * to their caps, an oversized line is stored as a stub, text is made valid UTF-8, and no line is
 * read past LINE_MAX_BYTES at once. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/utf8.h"
#include "base/util.h"
#include "runs/agent.h"
#include "store/store.h"

#define LINE_MAX_BYTES (1u << 20) /* longer event lines are stored as a stub */
#define RAW_MAX_BYTES (16u << 10) /* raw JSON kept per event */

void run_ingest(struct run *r)
{
    struct runs *e = r->e;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/events.jsonl", r->dir);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    if (r->offset_unsure) {
        /* the last batch failed to be stored, perhaps only as far as we know (a connection
         * lost during its COMMIT): go on from where the store says, so that no event is
         * stored twice or lost */
        struct store_run row;
        struct err err = {0};
        if (store_run_get(e->st, NULL, r->id, &row, &err) < 0)
            return;
        r->offset = row.events_offset;
        r->offset_unsure = false;
        store_run_release(&row);
    }
    char *buf = xmalloc(LINE_MAX_BYTES + 1);
    bool shown = false; /* an event that tells of its work, not yet told */
    for (;;) {
        ssize_t got = pread(fd, buf, LINE_MAX_BYTES, r->offset);
        if (got <= 0)
            break;
        size_t len = (size_t)got, pos = 0, nev = 0;
        struct store_run_event evs[64];
        struct agent_event parsed[64];
        char *raws[64];
        char agent_session[128] = "";
        /* what this batch says of the agent's work, kept once the batch is stored */
        char did[RUNS_PHASE_TEXT_MAX] = "";
        char tests[160] = ""; /* the batch's last test command and how it ended */
        int64_t steps = 0;
        bool told = false;
        if (r->skip_line) {
            /* the rest of an oversized line */
            char *nl = memchr(buf, '\n', len);
            pos = nl ? (size_t)(nl - buf) + 1 : len;
            r->skip_line = !nl;
        }
        while (pos < len && nev + AGENT_LINE_EVENTS <= 64) {
            char *nl = memchr(buf + pos, '\n', len - pos);
            if (!nl && pos == 0 && len == LINE_MAX_BYTES) {
                /* one line longer than we read at once: store a stub, skip to its end */
                r->skip_line = true;
                memset(&parsed[nev], 0, sizeof(parsed[nev]));
                raws[nev] = xstrdup("{\"type\":\"oversized\"}");
                parsed[nev].summary = xstrdup("an event too large to keep (over 1 MiB)");
                evs[nev] = (struct store_run_event){.time = time_now_ms(),
                                                    .type = "oversized",
                                                    .summary = parsed[nev].summary,
                                                    .raw = raws[nev]};
                nev++;
                pos = len;
                break;
            }
            if (!nl)
                break;
            size_t ll = (size_t)(nl - (buf + pos));
            char *line = buf + pos;
            pos += ll + 1;
            if (ll == 0)
                continue;
            if (r->adapter && !r->reader)
                r->reader = xcalloc(1, sizeof(*r->reader));
            struct agent_event *evl = &parsed[nev];
            int count = r->adapter ? r->adapter->parse(r->reader, line, ll, evl) : -EINVAL;
            if (count <= 0) {
                memset(evl, 0, sizeof(*evl));
                snprintf(evl->type, sizeof(evl->type), "output");
                evl->kind = AGENT_EV_OTHER;
                char *txt = utf8_sanitize(line, ll < 200 ? ll : 200, NULL);
                evl->summary = txt;
                count = 1;
            }
            /* A batch tells of one step at most: the next step's start begins the next batch,
             * so that each step's phase is recorded and told, however many steps one read
             * brings. (A step starts a line's events, when it does.) */
            if (evl->kind == AGENT_EV_STEP_START && did[0]) {
                for (int i = 0; i < count; i++)
                    agent_event_clear(&evl[i]);
                pos = (size_t)(line - buf);
                if (r->reader)
                    r->reader->turn[0] = '\0'; /* the line is read again */
                break;
            }
            size_t rl = ll < RAW_MAX_BYTES ? ll : RAW_MAX_BYTES;
            for (int i = 0; i < count; i++) {
                struct agent_event *ev = &parsed[nev];
                if (ev->session[0])
                    snprintf(agent_session, sizeof(agent_session), "%s", ev->session);
                /* each of a line's events keeps the line: it is what the agent said */
                raws[nev] = utf8_sanitize(line, rl, NULL);
                /* The agent holds its run's token, and maybe secrets; whatever it echoes of them
                 * is not kept. */
                run_redact(r, raws[nev]);
                run_redact(r, ev->summary);
                run_redact(r, ev->text);
                run_redact(r, ev->error);
                run_redact(r, ev->target);
                steps += ev->kind == AGENT_EV_STEP_START;
                phase_activity(ev, r->workdir, did, sizeof(did));
                phase_tests(ev, tests, sizeof(tests));
                const char *type = agent_event_type(ev);
                told = told || phase_event_shown(type);
                evs[nev] = (struct store_run_event){
                    .time = ev->time_ms ? ev->time_ms : time_now_ms(),
                    .type = type,
                    .summary = ev->summary ? ev->summary : "",
                    .raw = raws[nev],
                    .text = ev->kind == AGENT_EV_TEXT ? ev->text : NULL,
                    .error = ev->kind == AGENT_EV_ERROR ? ev->summary : NULL,
                    .input_tokens = ev->input_tokens,
                    .output_tokens = ev->output_tokens,
                    .cost = ev->cost,
                };
                nev++;
            }
        }
        struct err err = {0};
        int rc = 0;
        if (nev > 0 || pos > 0)
            rc = store_run_add_events(e->st, r->id, evs, nev, r->offset + (int64_t)pos, &err);
        for (size_t i = 0; i < nev; i++) {
            agent_event_clear(&parsed[i]);
            free(raws[i]);
        }
        if (rc < 0) {
            log_error("run events not stored run=%s err=\"%s\"", r->id, err.msg);
            r->offset_unsure = true;
            if (rc == -ENOSPC && !r->fail[0]) {
                /* what the agent does next could not be told: it stops, and its events so far
                 * are stored once the store has room (its reserve, or the operator's) */
                snprintf(r->fail, sizeof(r->fail), "its events could not be stored: %s", err.msg);
                if (!r->exited && r->sbx)
                    sandbox_kill_group(r->sbx, r->agent_pid);
            }
            break;
        }
        if (agent_session[0])
            store_session_update(e->st, r->session_id, agent_session, NULL, time_now_ms(), &err);
        if (tests[0] && store_run_set_tests(e->st, r->id, tests, &err) < 0)
            log_error("run tests not stored run=%s err=\"%s\"", r->id, err.msg);
        r->offset += (int64_t)pos;
        r->steps += steps;
        bool moved = strcmp(r->ph_name, "agent") == 0 && (did[0] || r->steps != r->ph_steps) &&
                     run_set_phase(r, "agent", "%s", did[0] ? did : r->ph_detail);
        shown = moved ? false : shown || told;
        if (pos == 0)
            break;
    }
    free(buf);
    if (shown)
        runs_notify_progress(e, r->id);
}

/* --- the agent's end --- */

static void run_path(const struct run *r, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", r->dir, name);
}

/* The agent's end as the sandbox's init recorded it in the run's status file once it had reaped
 * the agent and copied the rest of its output: 1 when it is there (r->exited and the exit status
 * set), 0 when not yet, a negative errno when there is no such file (a run started by an earlier
 * version, which has only its process to go by). */
int run_read_exit(struct run *r)
{
    if (r->exited)
        return 1;
    char path[PATH_MAX + 16], text[64];
    run_path(r, "status", path, sizeof(path));
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, text, sizeof(text) - 1);
    int ws;
    unsigned long long lost;
    if (n <= 0 || sandbox_spawn_status(text, (size_t)n, &ws) <= 0)
        return 0;
    text[n] = '\0';
    if (sscanf(text, "exit %*d lost %llu", &lost) == 1 && !r->fail[0])
        snprintf(r->fail, sizeof(r->fail),
                 "the server's disk filled up: %llu bytes of the agent's output could not be "
                 "kept, so what the run did can no longer be told",
                 lost);
    r->exited = true;
    r->exit_signal = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
    r->exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + r->exit_signal;
    return 1;
}

/* Has the agent ended? Its process being gone says nothing yet (the init may still be copying
 * its last output); the init being gone, and the sandbox with it, does. */
bool run_agent_ended(struct run *r)
{
    int rc = run_read_exit(r);
    if (rc > 0)
        return true;
    if (rc < 0)
        return !sandbox_pid_alive(r->sbx, r->agent_pid);
    return !sandbox_pid_alive(r->sbx, 1);
}

/* The event file reached its cap, so the init drops what the agent writes next: what the run
 * did can no longer be told, and it fails. An agent still running is stopped; the run ends once
 * its end is recorded. */
void run_check_output(struct run *r)
{
    char path[PATH_MAX + 16];
    struct stat st;
    uint64_t max = r->e->cfg.events_max_bytes;
    run_path(r, "events.jsonl", path, sizeof(path));
    if (r->fail[0] || stat(path, &st) < 0 || (uint64_t)st.st_size < max)
        return;
    snprintf(r->fail, sizeof(r->fail),
             "the agent's output exceeded %llu bytes (RUNS_EVENTS_MAX_BYTES)",
             (unsigned long long)max);
    log_info("run output over its cap run=%s max=%llu", r->id, (unsigned long long)max);
    if (!r->exited && r->sbx)
        sandbox_kill_group(r->sbx, r->agent_pid);
}

void runs_on_inotify(h2o_socket_t *sock, const char *errstr)
{
    struct runs *e = sock->data;
    h2o_buffer_consume(&sock->input, sock->input->size);
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (read(e->inotify_fd, buf, sizeof(buf)) > 0)
        ;
    for (struct run *r = e->runs, *next; r; r = next) {
        next = r->next;
        if (r->phase == PH_AGENT) {
            run_ingest(r);
            if (run_read_exit(r) > 0)
                run_finish(r);
        }
    }
}

/* Ingest whenever the init writes to the agent's event file, and end the run when it writes
 * the agent's status. */
void run_watch_events(struct run *r)
{
    char path[PATH_MAX + 16];
    run_path(r, "events.jsonl", path, sizeof(path));
    r->wd = inotify_add_watch(r->e->inotify_fd, path, IN_MODIFY);
    run_path(r, "status", path, sizeof(path));
    r->wd_status = inotify_add_watch(r->e->inotify_fd, path, IN_MODIFY);
}

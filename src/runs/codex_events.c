/* Codex's event stream (`codex exec --json`, checked against 0.171.0): one object per line,
 * {"type", ...}, with no timestamp:
 *   thread.started   thread_id: the conversation, which `codex exec resume` continues
 *   turn.started     the model starts a turn
 *   item.started     item {id, type, ...} begun (a command running, a file change in progress)
 *   item.updated     the same item changed
 *   item.completed   item over: agent_message {text}, reasoning {text},
 *                    command_execution {command, aggregated_output, exit_code, status},
 *                    file_change {changes [{path, kind}], status}, mcp_tool_call {server, tool,
 *                    status, error {message}}, web_search {query}, todo_list {items}, and error
 *                    {message}, a warning that does not end the turn
 *   turn.completed   usage {input_tokens (cached_input_tokens among them), output_tokens
 *                    (reasoning_output_tokens among them)}
 *   turn.failed      error {message}: the run failed (Codex then exits with status 1)
 *   error            message: a notice (a request retried) or the failure turn.failed repeats
 * Read into the same events as OpenCode's: a finished item that did something is a tool use, the
 * model's message a text, turn.completed a step's end with its tokens (Codex gives no cost).
 * The tests in tests/unit/test_codex.c carry lines taken from the real program. */
#include "runs/agent.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/utf8.h"
#include "base/util.h"
#include "runs/agent_read.h"

/* A command as Codex reports it: what it ran, under the login shell it wraps every command in
 * ("/bin/bash -lc 'echo hi'"): the command itself when it is so wrapped and quoted simply. */
static void unwrap_command(const char **s, size_t *n)
{
    static const char *const shells[] = {"/bin/bash -lc '", "/bin/sh -lc '", "bash -lc '",
                                         "/usr/bin/bash -lc '", "/bin/zsh -lc '"};
    for (size_t i = 0; i < ARRAY_SIZE(shells); i++) {
        size_t k = strlen(shells[i]);
        if (*n > k + 1 && memcmp(*s, shells[i], k) == 0 && (*s)[*n - 1] == '\'' &&
            !memchr(*s + k, '\'', *n - k - 1)) {
            *s += k;
            *n -= k + 1;
            return;
        }
    }
}

/* The tool's target (a command's first line, a file's path) as one line, or NULL. */
static char *target_of(const char *d, size_t dn)
{
    if (!d)
        return NULL;
    agent_first_line(&d, &dn);
    struct agent_summary s = {0};
    agent_sum_add(&s, d, dn);
    char *t = agent_sum_finish(&s, NULL);
    if (!t[0]) {
        free(t);
        return NULL;
    }
    return t;
}

/* "bash: npm test", "web_search rust borrow": a call's summary from its tool and target (which may
 * be NULL), before its status. */
static void sum_call(struct agent_summary *s, const char *tool, const char *sep, const char *target)
{
    agent_sum_puts(s, tool);
    if (target) {
        agent_sum_puts(s, sep);
        agent_sum_puts(s, target);
    }
}

/* A status other than "completed" as the summary's suffix (" (failed)"), marking the call failed
 * with its error (or the status) as the error. */
static char *status_suffix(struct agent_event *ev, const json_t *item, const char *error_text,
                           size_t en)
{
    size_t sn = 0;
    const char *status = agent_text(item, "status", &sn);
    if (!status || agent_str_is(status, sn, "completed"))
        return NULL;
    size_t keep = sn > AGENT_PIECE_MAX ? utf8_boundary(status, AGENT_PIECE_MAX) : sn;
    _cleanup_free_ char *st = agent_squash(status, keep, keep < sn, AGENT_STATUS_MAX);
    if (agent_str_is(status, sn, "failed") || agent_str_is(status, sn, "declined")) {
        ev->tool_failed = true;
        ev->error = error_text && en ? agent_capped(error_text, en, AGENT_ERROR_MAX, &ev->truncated)
                                     : xasprintf("%s", st);
    }
    return xasprintf(" (%s)", st);
}

/* "bash: npm test (exit 1)": a command that ran. */
static char *command_item(struct agent_event *ev, const json_t *item)
{
    snprintf(ev->tool, sizeof(ev->tool), "bash");
    size_t n = 0;
    const char *cmd = agent_text(item, "command", &n);
    if (cmd)
        unwrap_command(&cmd, &n);
    ev->target = target_of(cmd, n);
    struct agent_summary s = {0};
    sum_call(&s, "bash", ": ", ev->target);
    double code = agent_num(item, "exit_code");
    _cleanup_free_ char *suffix = NULL;
    if (code != 0 && fabs(code) < 1e9 && code == floor(code)) {
        ev->exit_status = (int)code;
        suffix = xasprintf(" (exit %d)", (int)code);
    } else {
        size_t on = 0;
        const char *out = agent_str(item, "aggregated_output", &on);
        suffix = status_suffix(ev, item, out, on);
    }
    return agent_sum_finish(&s, suffix);
}

/* "edit hello.txt and 2 more": files the agent changed (by its patch tool). */
static char *file_change_item(struct agent_event *ev, const json_t *item)
{
    snprintf(ev->tool, sizeof(ev->tool), "edit");
    const json_t *changes = json_object_get(item, "changes");
    size_t count = json_is_array(changes) ? json_array_size(changes) : 0, pn = 0;
    const char *path = count ? agent_text(json_array_get(changes, 0), "path", &pn) : NULL;
    ev->target = target_of(path, pn);
    struct agent_summary s = {0};
    agent_sum_puts(&s, "edit");
    if (path) {
        const char *base = path;
        size_t bn = pn;
        agent_basename(&base, &bn);
        agent_sum_puts(&s, " ");
        agent_sum_add(&s, base, bn);
    }
    if (count > 1)
        buf_printf(&s.raw, " and %zu more", count - 1);
    _cleanup_free_ char *suffix = status_suffix(ev, item, NULL, 0);
    return agent_sum_finish(&s, suffix);
}

/* "mcp: server/tool (failed)": a tool of an MCP server the agent was given. */
static char *mcp_item(struct agent_event *ev, const json_t *item)
{
    size_t sn = 0, tn = 0, en = 0;
    const char *server = agent_text(item, "server", &sn), *tool = agent_text(item, "tool", &tn);
    agent_copy_name(ev->tool, sizeof(ev->tool), tool ? tool : "mcp", tool ? tn : 3);
    struct agent_summary s = {0};
    agent_sum_puts(&s, "mcp");
    if (server || tool) {
        agent_sum_puts(&s, ": ");
        if (server) {
            agent_sum_add(&s, server, sn);
            agent_sum_puts(&s, "/");
        }
        if (tool)
            agent_sum_add(&s, tool, tn);
    }
    const char *err = agent_str(json_object_get(item, "error"), "message", &en);
    _cleanup_free_ char *suffix = status_suffix(ev, item, err, en);
    return agent_sum_finish(&s, suffix);
}

/* A line's message (an error item's, a notice's) as its summary. */
static char *message_summary(const json_t *o)
{
    size_t n = 0;
    const char *m = agent_text(o, "message", &n);
    struct agent_summary s = {0};
    if (m)
        agent_sum_add(&s, m, n);
    return agent_sum_finish(&s, NULL);
}

static char *web_search_item(struct agent_event *ev, const json_t *item)
{
    snprintf(ev->tool, sizeof(ev->tool), "web_search");
    size_t qn = 0;
    const char *q = agent_text(item, "query", &qn);
    ev->target = target_of(q, qn);
    struct agent_summary s = {0};
    sum_call(&s, "web_search", " ", ev->target);
    return agent_sum_finish(&s, NULL);
}

/* An error item: a warning (an unknown model's, say); the turn goes on. */
static char *warning_item(struct agent_event *ev, const json_t *item)
{
    return message_summary(item);
}

static char *todo_item(struct agent_event *ev, const json_t *item)
{
    return xstrdup("todo list");
}

/* item.completed: what the item was decides the event. */
static char *item_completed(struct agent_event *ev, const json_t *item)
{
    static const struct {
        const char *type;
        enum agent_event_kind kind;
        char *(*read)(struct agent_event *ev, const json_t *item);
    } items[] = {
        {"agent_message", AGENT_EV_TEXT, agent_text_event},
        {"reasoning", AGENT_EV_REASONING, agent_text_event},
        {"command_execution", AGENT_EV_TOOL_USE, command_item},
        {"file_change", AGENT_EV_TOOL_USE, file_change_item},
        {"mcp_tool_call", AGENT_EV_TOOL_USE, mcp_item},
        {"web_search", AGENT_EV_TOOL_USE, web_search_item},
        {"error", AGENT_EV_OTHER, warning_item},
        {"todo_list", AGENT_EV_OTHER, todo_item},
    };
    size_t n = 0;
    const char *type = agent_str(item, "type", &n);
    for (size_t i = 0; i < ARRAY_SIZE(items); i++)
        if (agent_str_is(type, n, items[i].type)) {
            ev->kind = items[i].kind;
            return items[i].read(ev, item);
        }
    return NULL;
}

/* "step finish: 200 in, 40 out": the turn's tokens as the provider counted them. */
static char *turn_completed(struct agent_event *ev, const json_t *root)
{
    const json_t *usage = json_object_get(root, "usage");
    ev->input_tokens = agent_count(usage, "input_tokens");
    ev->output_tokens = agent_count(usage, "output_tokens");
    return xasprintf("step finish: %lld in, %lld out", (long long)ev->input_tokens,
                     (long long)ev->output_tokens);
}

/* turn.failed: the run's error. */
static char *turn_failed(struct agent_event *ev, const json_t *root)
{
    const json_t *e = json_object_get(root, "error");
    ev->error = agent_message(json_is_object(e) ? json_object_get(e, "message") : e,
                              AGENT_ERROR_MAX, &ev->truncated);
    if (ev->error && agent_blank(ev->error, strlen(ev->error))) {
        free(ev->error);
        ev->error = NULL;
    }
    if (!ev->error)
        ev->error = xstrdup("the turn failed");
    struct agent_summary s = {0};
    agent_sum_puts(&s, ev->error);
    return agent_sum_finish(&s, NULL);
}

int codex_parse_event(const char *line, size_t len, struct agent_event *ev)
{
    const char *type;
    size_t tn;
    json_auto_t *root = agent_event_begin(ev, line, len, &type, &tn);
    if (!root)
        return -EINVAL;
    ev->kind = AGENT_EV_OTHER;
    const json_t *item = json_object_get(root, "item");
    if (agent_str_is(type, tn, "thread.started")) {
        size_t sn = 0;
        const char *id = agent_str(root, "thread_id", &sn);
        agent_copy_session(ev->session, id, sn);
        ev->summary = xstrdup("thread started");
    } else if (agent_str_is(type, tn, "turn.started")) {
        ev->kind = AGENT_EV_STEP_START;
        ev->summary = xstrdup("step start");
    } else if (agent_str_is(type, tn, "item.completed") && json_is_object(item)) {
        ev->summary = item_completed(ev, item);
    } else if (agent_str_is(type, tn, "turn.completed")) {
        ev->kind = AGENT_EV_STEP_FINISH;
        ev->summary = turn_completed(ev, root);
    } else if (agent_str_is(type, tn, "turn.failed")) {
        ev->kind = AGENT_EV_ERROR;
        ev->summary = turn_failed(ev, root);
    } else if (agent_str_is(type, tn, "error")) {
        ev->summary = message_summary(root); /* a notice; turn.failed tells a failure */
    }
    return agent_event_end(ev);
}

bool codex_line_totals(const char *line, size_t len, int64_t *in, int64_t *out)
{
    const char *type;
    size_t tn;
    struct agent_event ev;
    json_auto_t *root = agent_event_begin(&ev, line, len, &type, &tn);
    if (!root || !agent_str_is(type, tn, "turn.completed"))
        return false;
    const json_t *usage = json_object_get(root, "usage");
    *in = agent_count(usage, "input_tokens");
    *out = agent_count(usage, "output_tokens");
    return true;
}

int codex_parse_line(struct agent_reader *rd, const char *line, size_t len,
                     struct agent_event evs[AGENT_LINE_EVENTS])
{
    struct agent_event *ev = &evs[0];
    if (codex_parse_event(line, len, ev) < 0)
        return -EINVAL;
    if (ev->kind != AGENT_EV_STEP_FINISH)
        return 1;
    int64_t in = ev->input_tokens, out = ev->output_tokens;
    /* totals that went down belong to another conversation: counted whole */
    ev->input_tokens = in >= rd->total_in ? in - rd->total_in : in;
    ev->output_tokens = out >= rd->total_out ? out - rd->total_out : out;
    rd->total_in = in;
    rd->total_out = out;
    free(ev->summary);
    ev->summary = xasprintf("step finish: %lld in, %lld out", (long long)ev->input_tokens,
                            (long long)ev->output_tokens);
    return 1;
}

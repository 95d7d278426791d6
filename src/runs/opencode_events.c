/* OpenCode's event stream (`opencode run --format json`, checked against 1.18.33): one object
 * per line, {"type", "timestamp", "sessionID", "part"}, where part is OpenCode's message part:
 *   step_start   part.type "step-start"
 *   tool_use     part.tool, part.state {status "completed" | "error", input, output | error,
 *                title}; printed once the call is over
 *   step_finish  part.reason, part.tokens {input, output, reasoning, cache {read, write}},
 *                part.cost
 *   text         part.text, printed once the block is complete
 *   reasoning    part.text (only with --thinking)
 * and, when the session fails (OpenCode then exits with status 1), no part but
 *   error        error {name, data {message, statusCode?, isRetryable?, responseBody?, ...}}
 * The tests in tests/unit/test_opencode.c carry lines taken from the real program. */
#include "runs/agent.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/utf8.h"
#include "base/util.h"
#include "runs/agent_read.h"

/* --- the events --- */

/* "write hello.txt", "bash: Commit (exit 1)", "grep TODO (error)": the tool, the input that
 * tells most about the call, and the status unless the call completed. */
static char *tool_summary(struct agent_event *ev, const json_t *part)
{
    const json_t *state = json_object_get(part, "state");
    const json_t *input = json_object_get(state, "input");
    struct agent_summary s = {0};
    size_t n = 0, dn = 0;
    const char *tool = agent_text(part, "tool", &n), *d = NULL, *sep = " ";
    agent_sum_add(&s, tool ? tool : "tool", tool ? n : 4);
    if (agent_str_is(tool, n, "bash") && (d = agent_text(input, "description", &dn))) {
        sep = ": ";
    } else if (agent_str_is(tool, n, "bash") && (d = agent_text(input, "command", &dn))) {
        sep = ": ";
        agent_first_line(&d, &dn);
    } else if ((d = agent_text(input, "filePath", &dn))) {
        agent_basename(&d, &dn);
    } else if ((d = agent_text(input, "pattern", &dn)) || (d = agent_text(input, "url", &dn)) ||
               (d = agent_text(input, "path", &dn)) || (d = agent_text(input, "query", &dn)) ||
               (d = agent_text(input, "tool", &dn))) {
        /* grep and glob, webfetch, list, search tools, the "invalid" stand-in tool */
    } else if ((d = agent_text(input, "description", &dn)) ||
               (d = agent_text(state, "title", &dn))) {
        sep = ": ";
        agent_first_line(&d, &dn);
    }
    if (d) {
        agent_sum_puts(&s, sep);
        agent_sum_add(&s, d, dn);
    }

    size_t sn = 0;
    const char *status = agent_text(state, "status", &sn);
    _cleanup_free_ char *suffix = NULL;
    if (status && !agent_str_is(status, sn, "completed")) {
        size_t keep = sn > AGENT_PIECE_MAX ? utf8_boundary(status, AGENT_PIECE_MAX) : sn;
        _cleanup_free_ char *st = agent_squash(status, keep, keep < sn, AGENT_STATUS_MAX);
        suffix = xasprintf(" (%s)", st);
    } else if (agent_str_is(tool, n, "bash")) {
        /* a command that fails still "completed"; its exit status is in the metadata */
        double code = agent_num(json_object_get(state, "metadata"), "exit");
        if (code != 0 && fabs(code) < 1e9 && code == floor(code)) {
            suffix = xasprintf(" (exit %d)", (int)code);
            ev->exit_status = (int)code;
        }
    }
    if (agent_str_is(status, sn, "error")) {
        ev->tool_failed = true;
        ev->error = agent_message(json_object_get(state, "error"), AGENT_ERROR_MAX, &ev->truncated);
        if (!ev->error)
            ev->error = xstrdup("tool failed");
    }
    return agent_sum_finish(&s, suffix);
}

/* The tool's name and what it worked on: a command (not its description), else what the summary
 * names. */
static void tool_target(struct agent_event *ev, const json_t *part)
{
    const json_t *state = json_object_get(part, "state");
    const json_t *input = json_object_get(state, "input");
    size_t n = 0, dn = 0;
    const char *tool = agent_text(part, "tool", &n), *d = NULL;
    agent_copy_name(ev->tool, sizeof(ev->tool), tool, n);
    if ((agent_str_is(tool, n, "bash") && (d = agent_text(input, "command", &dn))) ||
        (d = agent_text(input, "filePath", &dn)) || (d = agent_text(input, "pattern", &dn)) ||
        (d = agent_text(input, "url", &dn)) || (d = agent_text(input, "path", &dn)) ||
        (d = agent_text(input, "query", &dn)) || (d = agent_text(input, "description", &dn))) {
        agent_first_line(&d, &dn);
        struct agent_summary s = {0};
        agent_sum_add(&s, d, dn);
        ev->target = agent_sum_finish(&s, NULL);
        if (!ev->target[0]) {
            free(ev->target);
            ev->target = NULL;
        }
    }
}

/* "step finish (tool-calls): 110 in, 20 out, $0.0006134" */
static char *step_finish(struct agent_event *ev, const json_t *part)
{
    const json_t *tokens = json_object_get(part, "tokens");
    const json_t *cache = json_object_get(tokens, "cache");
    ev->input_tokens =
        agent_count(tokens, "input") + agent_count(cache, "read") + agent_count(cache, "write");
    ev->output_tokens = agent_count(tokens, "output") + agent_count(tokens, "reasoning");
    double cost = agent_num(part, "cost");
    ev->cost = cost > 0 ? cost : 0;

    struct agent_summary s = {0};
    agent_sum_puts(&s, "step finish");
    size_t n = 0;
    const char *reason = agent_text(part, "reason", &n);
    if (reason) {
        agent_sum_puts(&s, " (");
        agent_sum_add(&s, reason, n);
        agent_sum_puts(&s, ")");
    }
    buf_printf(&s.raw, ": %lld in, %lld out, $%.4g", (long long)ev->input_tokens,
               (long long)ev->output_tokens, ev->cost);
    return agent_sum_finish(&s, NULL);
}

/* "APIError 401: invalid x-api-key". OpenCode itself reports data.message when there is one and
 * the error's name otherwise. */
static char *error_event(struct agent_event *ev, const json_t *root)
{
    const json_t *e = json_object_get(root, "error");
    const json_t *data = json_object_get(e, "data");
    const json_t *msg = json_is_string(e) ? e : json_object_get(data, "message");
    if (!msg || json_is_null(msg))
        msg = json_object_get(e, "message");
    size_t nn = 0;
    const char *name = agent_text(e, "name", &nn);
    ev->error = agent_message(msg, AGENT_ERROR_MAX, &ev->truncated);
    if (ev->error && agent_blank(ev->error, strlen(ev->error))) {
        free(ev->error);
        ev->error = NULL;
    }

    struct agent_summary s = {0};
    if (name) {
        agent_sum_add(&s, name, nn);
        double code = agent_num(data, "statusCode");
        if (code >= 100 && code < 600)
            buf_printf(&s.raw, " %d", (int)code);
        if (ev->error)
            agent_sum_puts(&s, ": ");
    }
    if (ev->error) {
        agent_sum_puts(&s, ev->error);
    } else if (name) {
        ev->error = agent_capped(name, nn, AGENT_ERROR_MAX, &ev->truncated);
    } else {
        ev->error = xstrdup("unknown error");
        agent_sum_puts(&s, ev->error);
    }
    return agent_sum_finish(&s, NULL);
}

/* --- the line --- */

static enum agent_event_kind kind_of(const char *type, size_t n)
{
    static const struct {
        const char *name;
        enum agent_event_kind kind;
    } kinds[] = {
        {"step_start", AGENT_EV_STEP_START},   {"tool_use", AGENT_EV_TOOL_USE},
        {"step_finish", AGENT_EV_STEP_FINISH}, {"text", AGENT_EV_TEXT},
        {"reasoning", AGENT_EV_REASONING},     {"error", AGENT_EV_ERROR},
    };
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
        if (agent_str_is(type, n, kinds[i].name))
            return kinds[i].kind;
    return AGENT_EV_OTHER;
}

int opencode_parse_event(const char *line, size_t len, struct agent_event *ev)
{
    const char *type;
    size_t tn;
    json_auto_t *root = agent_event_begin(ev, line, len, &type, &tn);
    if (!root)
        return -EINVAL;
    ev->kind = kind_of(type, tn);
    ev->time_ms = (int64_t)agent_num(root, "timestamp");

    const json_t *part = json_object_get(root, "part");
    size_t sn = 0;
    const char *ses = agent_str(root, "sessionID", &sn);
    if (!ses)
        ses = agent_str(part, "sessionID", &sn);
    agent_copy_session(ev->session, ses, sn);

    switch (ev->kind) {
    case AGENT_EV_STEP_START: ev->summary = xstrdup("step start"); break;
    case AGENT_EV_TOOL_USE:
        ev->summary = tool_summary(ev, part);
        tool_target(ev, part);
        break;
    case AGENT_EV_STEP_FINISH: ev->summary = step_finish(ev, part); break;
    case AGENT_EV_TEXT:
    case AGENT_EV_REASONING: ev->summary = agent_text_event(ev, part); break;
    case AGENT_EV_ERROR: ev->summary = error_event(ev, root); break;
    case AGENT_EV_OTHER: ev->summary = xstrdup(""); break;
    }
    return agent_event_end(ev);
}

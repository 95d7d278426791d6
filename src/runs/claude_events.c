/* Claude Code's event stream (`claude -p --output-format stream-json --verbose`, checked against
 * 2.1.332): one object per line, {"type", "session_id", ...}:
 *   system      subtype "init": session_id (the conversation `--resume` continues), model, tools
 *   assistant   message {id, content [block]}: one content block a line, the lines of one model
 *               message sharing its id. A block is text {text}, thinking {thinking},
 *               redacted_thinking, or tool_use {id, name, input}
 *   user        message {content [tool_result {tool_use_id, content (a string, or text blocks),
 *               is_error}]}: what a call returned; a failed command's is "Exit code N\n..."
 *   result      the run's end: subtype ("success", "error_max_turns", "error_during_execution"),
 *               is_error, result (the last text, or the error), total_cost_usd, usage
 *               {input_tokens, cache_creation_input_tokens, cache_read_input_tokens,
 *               output_tokens} for the whole run, num_turns; Claude Code exits 1 when it failed
 * A call and its result are lines apart, and a model message's start is known only as a new id,
 * so the parser keeps both in a struct agent_reader. Read into the same events as OpenCode's: a
 * new message is a step's start, a call's result the tool use, the result line a step's end
 * with the run's tokens and cost (or the run's error). The tests in tests/unit/test_claude.c
 * carry lines taken from the real program. */
#include "runs/agent.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "runs/agent_read.h"

/* Claude Code's tools by the names the timelines use (OpenCode's, where it has the same tool) */
static void tool_name(char out[32], const char *name, size_t n)
{
    static const char *const names[][2] = {
        {"Bash", "bash"},           {"Edit", "edit"},
        {"MultiEdit", "multiedit"}, {"Write", "write"},
        {"Read", "read"},           {"Grep", "grep"},
        {"Glob", "glob"},           {"LS", "list"},
        {"WebFetch", "webfetch"},   {"WebSearch", "websearch"},
        {"TodoWrite", "todowrite"}, {"Task", "task"},
        {"NotebookEdit", "edit"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (agent_str_is(name, n, names[i][0])) {
            snprintf(out, 32, "%s", names[i][1]);
            return;
        }
    agent_copy_name(out, 32, name ? name : "tool", name ? n : 4);
    for (char *p = out; *p; p++)
        *p = (char)tolower((unsigned char)*p);
}

/* What a call works on, as one line: the first of the inputs that say it, or NULL */
static char *call_target(const json_t *input)
{
    static const char *const keys[] = {"command", "file_path", "notebook_path", "pattern",
                                       "url",     "query",     "path",          "description"};
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        size_t n = 0;
        const char *v = agent_text(input, keys[i], &n);
        if (!v)
            continue;
        agent_first_line(&v, &n);
        struct agent_summary s = {0};
        agent_sum_add(&s, v, n);
        return agent_sum_finish(&s, NULL);
    }
    return NULL;
}

static struct agent_call *call_find(struct agent_reader *rd, const char *id, size_t n)
{
    for (size_t i = 0; id && n && n < sizeof(rd->calls[0].id) && i < AGENT_CALLS_MAX; i++)
        if (strlen(rd->calls[i].id) == n && memcmp(rd->calls[i].id, id, n) == 0)
            return &rd->calls[i];
    return NULL;
}

/* A tool_use block: the call, remembered (the oldest forgotten when there are too many) */
static void call_remember(struct agent_reader *rd, const json_t *block, char *summary_out[1])
{
    size_t idn = 0, nn = 0;
    const char *id = agent_str(block, "id", &idn), *name = agent_text(block, "name", &nn);
    struct agent_call c = {0};
    tool_name(c.tool, name, nn);
    c.target = call_target(json_object_get(block, "input"));
    struct agent_summary s = {0};
    agent_sum_puts(&s, "call ");
    agent_sum_puts(&s, c.tool);
    if (c.target) {
        agent_sum_puts(&s, ": ");
        agent_sum_puts(&s, c.target);
    }
    *summary_out = agent_sum_finish(&s, NULL);
    if (!id || idn == 0 || idn >= sizeof(c.id)) {
        free(c.target);
        return;
    }
    memcpy(c.id, id, idn);
    struct agent_call *slot = call_find(rd, id, idn);
    if (!slot) {
        slot = &rd->calls[rd->next];
        rd->next = (rd->next + 1) % AGENT_CALLS_MAX;
    }
    free(slot->target);
    *slot = c;
}

/* A tool result's text: a string, or its text blocks' (the first one's, enough for a summary
 * and an error) */
static const char *result_text(const json_t *block, size_t *n)
{
    const json_t *c = json_object_get(block, "content");
    if (json_is_string(c))
        return agent_str(block, "content", n);
    for (size_t i = 0; i < json_array_size(c); i++) {
        const char *t = agent_str(json_array_get(c, i), "text", n);
        if (t)
            return t;
    }
    *n = 0;
    return NULL;
}

/* "Exit code 3\n...": a command's exit status, or 0 */
static int exit_code(const char *t, size_t n)
{
    static const char lead[] = "Exit code ";
    size_t k = sizeof(lead) - 1, i = k;
    if (!t || n <= k || memcmp(t, lead, k) != 0)
        return 0;
    int code = 0;
    for (; i < n && i < k + 4 && t[i] >= '0' && t[i] <= '9'; i++)
        code = code * 10 + (t[i] - '0');
    return i > k && (i == n || t[i] == '\n') ? code : 0;
}

/* A tool_result block: the tool use its call began */
static void tool_result(struct agent_reader *rd, const json_t *block, struct agent_event *ev)
{
    ev->kind = AGENT_EV_TOOL_USE;
    size_t idn = 0, tn = 0;
    const char *id = agent_str(block, "tool_use_id", &idn), *text = result_text(block, &tn);
    struct agent_call *c = call_find(rd, id, idn);
    struct agent_summary s = {0};
    if (c) {
        snprintf(ev->tool, sizeof(ev->tool), "%s", c->tool);
        ev->target = c->target;
        c->target = NULL;
        c->id[0] = '\0';
        agent_sum_puts(&s, ev->tool);
        if (ev->target) {
            agent_sum_puts(&s, strcmp(ev->tool, "bash") == 0 ? ": " : " ");
            agent_sum_puts(&s, ev->target);
        }
    } else {
        agent_sum_puts(&s, "tool result");
    }
    _cleanup_free_ char *suffix = NULL;
    if (json_is_true(json_object_get(block, "is_error"))) {
        int code = exit_code(text, tn);
        if (code && strcmp(ev->tool, "bash") == 0) {
            ev->exit_status = code; /* a command that ran and failed, as OpenCode counts it */
            suffix = xasprintf(" (exit %d)", code);
        } else {
            ev->tool_failed = true;
            ev->error = text && tn ? agent_capped(text, tn, AGENT_ERROR_MAX, &ev->truncated)
                                   : xstrdup("error");
            suffix = xstrdup(" (error)");
        }
    }
    ev->summary = agent_sum_finish(&s, suffix);
}

/* A thinking block: its first line */
static char *thinking(const json_t *block)
{
    size_t n = 0;
    const char *t = agent_text(block, "thinking", &n);
    struct agent_summary s = {0};
    if (t) {
        agent_first_line(&t, &n);
        agent_sum_add(&s, t, n);
    } else {
        agent_sum_puts(&s, "thinking");
    }
    return agent_sum_finish(&s, NULL);
}

/* One content block of a model message into ev */
static void content_block(struct agent_reader *rd, const json_t *block, struct agent_event *ev)
{
    size_t bn = 0;
    const char *bt = agent_str(block, "type", &bn);
    if (agent_str_is(bt, bn, "text")) {
        ev->kind = AGENT_EV_TEXT;
        ev->summary = agent_text_event(ev, block);
    } else if (agent_str_is(bt, bn, "thinking")) {
        ev->kind = AGENT_EV_REASONING;
        ev->summary = thinking(block);
    } else if (agent_str_is(bt, bn, "redacted_thinking")) {
        ev->kind = AGENT_EV_REASONING;
        ev->summary = xstrdup("thinking (redacted)");
    } else if (agent_str_is(bt, bn, "tool_use") || agent_str_is(bt, bn, "server_tool_use")) {
        call_remember(rd, block, &ev->summary);
    } else if (agent_str_is(bt, bn, "tool_result")) {
        tool_result(rd, block, ev);
    } else if (bt) {
        struct agent_summary s = {0};
        agent_sum_add(&s, bt, bn);
        ev->summary = agent_sum_finish(&s, NULL);
    }
}

/* The events of a message's content blocks, from evs[n] on: each block one, and the rest told
 * as one when there are more than there is room for (their calls still remembered). */
static size_t message_blocks(struct agent_reader *rd, const json_t *content, const char *type,
                             struct agent_event *evs, size_t n)
{
    size_t count = json_array_size(content);
    for (size_t i = 0; i < count; i++) {
        const json_t *block = json_array_get(content, i);
        if (n == AGENT_LINE_EVENTS - 1 && count - i > 1) {
            struct agent_event *more = &evs[n++];
            snprintf(more->type, sizeof(more->type), "%s", type);
            more->summary = xasprintf("%zu more blocks", count - i);
            for (; i < count; i++) { /* their calls are still to be matched with results */
                const json_t *b = json_array_get(content, i);
                size_t bn = 0;
                const char *bt = agent_str(b, "type", &bn);
                if (agent_str_is(bt, bn, "tool_use")) {
                    char *s = NULL;
                    call_remember(rd, b, &s);
                    free(s);
                }
            }
            break;
        }
        struct agent_event *ev = &evs[n++];
        snprintf(ev->type, sizeof(ev->type), "%s", type);
        ev->kind = AGENT_EV_OTHER;
        content_block(rd, block, ev);
    }
    return n;
}

/* The result line: the run's tokens and cost, and its error when it failed */
static void result(const json_t *root, struct agent_event *ev)
{
    const json_t *usage = json_object_get(root, "usage");
    ev->input_tokens = agent_count(usage, "input_tokens") +
                       agent_count(usage, "cache_creation_input_tokens") +
                       agent_count(usage, "cache_read_input_tokens");
    ev->output_tokens = agent_count(usage, "output_tokens");
    ev->cost = agent_num(root, "total_cost_usd");
    if (ev->cost < 0)
        ev->cost = 0;
    size_t sn = 0;
    const char *sub = agent_text(root, "subtype", &sn);
    bool failed = json_is_true(json_object_get(root, "is_error")) ||
                  (sub && sn > 6 && memcmp(sub, "error_", 6) == 0);
    if (!failed) {
        ev->kind = AGENT_EV_STEP_FINISH;
        ev->summary = xasprintf("step finish: %lld in, %lld out", (long long)ev->input_tokens,
                                (long long)ev->output_tokens);
        return;
    }
    ev->kind = AGENT_EV_ERROR;
    size_t rn = 0;
    const char *r = agent_text(root, "result", &rn);
    const json_t *errors = json_object_get(root, "errors");
    if (r)
        ev->error = agent_capped(r, rn, AGENT_ERROR_MAX, &ev->truncated);
    else if (json_array_size(errors))
        ev->error = agent_message(json_array_get(errors, 0), AGENT_ERROR_MAX, &ev->truncated);
    else if (sub)
        ev->error = agent_capped(sub, sn, AGENT_ERROR_MAX, &ev->truncated);
    if (!ev->error || agent_blank(ev->error, strlen(ev->error))) {
        free(ev->error);
        ev->error = xstrdup("the run failed");
    }
    struct agent_summary s = {0};
    agent_sum_puts(&s, ev->error);
    ev->summary = agent_sum_finish(&s, NULL);
}

int claude_parse_line(struct agent_reader *rd, const char *line, size_t len,
                      struct agent_event evs[AGENT_LINE_EVENTS])
{
    const char *type;
    size_t tn, n = 1;
    for (size_t i = 1; i < AGENT_LINE_EVENTS; i++)
        memset(&evs[i], 0, sizeof(evs[i]));
    json_auto_t *root = agent_event_begin(&evs[0], line, len, &type, &tn);
    if (!root)
        return -EINVAL;
    struct agent_event *ev = &evs[0];
    ev->kind = AGENT_EV_OTHER;
    size_t sn = 0;
    const char *sid = agent_str(root, "session_id", &sn);
    agent_copy_session(ev->session, sid, sn);
    const json_t *msg = json_object_get(root, "message");
    const json_t *content = json_object_get(msg, "content");
    if (agent_str_is(type, tn, "system")) {
        size_t k = 0, mn = 0;
        const char *sub = agent_text(root, "subtype", &k), *model = agent_text(root, "model", &mn);
        struct agent_summary s = {0};
        agent_sum_puts(&s, agent_str_is(sub, k, "init") ? "session started" : "system");
        if (sub && !agent_str_is(sub, k, "init")) {
            agent_sum_puts(&s, ": ");
            agent_sum_add(&s, sub, k);
        } else if (model) {
            agent_sum_puts(&s, " (");
            agent_sum_add(&s, model, mn);
            agent_sum_puts(&s, ")");
        }
        ev->summary = agent_sum_finish(&s, NULL);
    } else if (agent_str_is(type, tn, "assistant") && json_array_size(content)) {
        size_t idn = 0;
        const char *id = agent_str(msg, "id", &idn);
        bool same = id && idn < sizeof(rd->turn) && strlen(rd->turn) == idn &&
                    memcmp(rd->turn, id, idn) == 0;
        if (!same) {
            ev->kind = AGENT_EV_STEP_START;
            ev->summary = xstrdup("step start");
            if (id && idn < sizeof(rd->turn)) {
                memcpy(rd->turn, id, idn);
                rd->turn[idn] = '\0';
            } else {
                rd->turn[0] = '\0';
            }
            n = message_blocks(rd, content, evs[0].type, evs, 1);
        } else {
            n = message_blocks(rd, content, evs[0].type, evs, 0);
            agent_copy_session(evs[0].session, sid, sn);
        }
    } else if (agent_str_is(type, tn, "user") && json_array_size(content)) {
        n = message_blocks(rd, content, evs[0].type, evs, 0);
        agent_copy_session(evs[0].session, sid, sn);
    } else if (agent_str_is(type, tn, "result")) {
        result(root, ev);
    }
    for (size_t i = 0; i < n; i++)
        agent_event_end(&evs[i]);
    return (int)n;
}

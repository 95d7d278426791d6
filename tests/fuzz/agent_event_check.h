#pragma once
/* What a fuzzer of an agent's event parser checks of its answer (fuzz_opencode.c,
 * fuzz_codex.c): the promises of runs/agent.h. A broken one traps. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/utf8.h"
#include "runs/agent.h"

static void check_string(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n > max || !utf8_valid(s, n))
        __builtin_trap();
}

static void check_ascii(const char *s, size_t cap, bool spaces)
{
    size_t n = strnlen(s, cap);
    if (n == cap)
        __builtin_trap();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < (spaces ? 0x20 : 0x21) || (unsigned char)s[i] > 0x7E)
            __builtin_trap();
}

/* A parser's answer rc and event: refused with nothing kept, or an event within its bounds:
 * bounded, valid UTF-8 strings, a one-line summary, printable type, tool and session, counts
 * and cost never negative. Clears the event. */
static void check_agent_event(int rc, struct agent_event *ev)
{
    if (rc == -EINVAL) {
        if (ev->summary || ev->text || ev->error || ev->target)
            __builtin_trap();
        return;
    }
    if (rc != 0 || !ev->summary)
        __builtin_trap();
    check_string(ev->summary, AGENT_SUMMARY_MAX);
    for (const char *p = ev->summary; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7F)
            __builtin_trap();
    if ((ev->kind == AGENT_EV_TEXT) != (ev->text != NULL))
        __builtin_trap();
    if (ev->text)
        check_string(ev->text, AGENT_TEXT_MAX);
    if ((ev->kind == AGENT_EV_ERROR || ev->tool_failed) && !ev->error)
        __builtin_trap();
    if (ev->error)
        check_string(ev->error, AGENT_ERROR_MAX);
    if (ev->target)
        check_string(ev->target, AGENT_SUMMARY_MAX);
    check_ascii(ev->type, sizeof(ev->type), true);
    check_ascii(ev->tool, sizeof(ev->tool), true);
    check_ascii(ev->session, sizeof(ev->session), false);
    if (ev->input_tokens < 0 || ev->output_tokens < 0 || !(ev->cost >= 0) || isinf(ev->cost))
        __builtin_trap();
    agent_event_clear(ev);
}

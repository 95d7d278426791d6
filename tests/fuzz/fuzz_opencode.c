/* Fuzz the OpenCode event parser with arbitrary lines. It must never crash, and every event it
 * accepts keeps the promises of runs/agent.h: bounded, valid UTF-8 strings, a one-line summary,
 * printable type and session, counts and cost never negative. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/utf8.h"
#include "runs/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct agent_event ev;
    int rc = opencode_parse_event((const char *)data, size, &ev);
    if (rc == -EINVAL) {
        if (ev.summary || ev.text || ev.error)
            __builtin_trap();
        return 0;
    }
    if (rc != 0 || !ev.summary)
        __builtin_trap();
    check_string(ev.summary, AGENT_SUMMARY_MAX);
    for (const char *p = ev.summary; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7F)
            __builtin_trap();
    if ((ev.kind == AGENT_EV_TEXT) != (ev.text != NULL))
        __builtin_trap();
    if (ev.text)
        check_string(ev.text, AGENT_TEXT_MAX);
    if ((ev.kind == AGENT_EV_ERROR || ev.tool_failed) && !ev.error)
        __builtin_trap();
    if (ev.error)
        check_string(ev.error, AGENT_ERROR_MAX);
    check_ascii(ev.type, sizeof(ev.type), true);
    check_ascii(ev.session, sizeof(ev.session), false);
    if (ev.input_tokens < 0 || ev.output_tokens < 0 || !(ev.cost >= 0) || isinf(ev.cost))
        __builtin_trap();
    agent_event_clear(&ev);
    return 0;
}

/* Fuzz the Claude Code event parser (stream-json lines) with arbitrary input read as lines, one
 * reader across them, as a run's output is read: it must never crash or leak, every event it
 * gives keeps the promises of runs/agent.h (agent_event_check.h), and a line gives at least one
 * and at most AGENT_LINE_EVENTS events. */
#include <stdint.h>
#include <string.h>

#include "agent_event_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct agent_reader rd = {0};
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        struct agent_event evs[AGENT_LINE_EVENTS];
        int n = claude_parse_line(&rd, p, len, evs);
        if (n == -EINVAL)
            check_agent_event(n, &evs[0]);
        else if (n < 1 || n > AGENT_LINE_EVENTS)
            __builtin_trap();
        for (int i = 0; i < n; i++)
            check_agent_event(0, &evs[i]);
        p += len + 1;
    }
    for (size_t i = 0; i < AGENT_CALLS_MAX; i++)
        if (rd.calls[i].target && strlen(rd.calls[i].target) > AGENT_SUMMARY_MAX)
            __builtin_trap();
    agent_reader_clear(&rd);
    return 0;
}

/* Fuzz the Codex event parser (`codex exec --json` lines) with arbitrary lines. It must never
 * crash, and every event it accepts keeps the promises of runs/agent.h (agent_event_check.h). */
#include <stdint.h>

#include "agent_event_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct agent_event ev;
    check_agent_event(codex_parse_event((const char *)data, size, &ev), &ev);
    return 0;
}

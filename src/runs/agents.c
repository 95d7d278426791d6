/* The table of agent adapters: the one place where the engine learns which coding agents it can
 * run. An adapter (struct agent_adapter, runs_internal.h) is a file of its own (opencode.c and
 * opencode_events.c for OpenCode) that tells how to start its agent (command line and
 * environment, pointed at the proxy with the run's token), how to read one line of its output
 * into an agent_event, and the few ways it differs (a wrapper to start it under, whether it can
 * be kept warm, whether its conversations belong to a directory).
 *
 * The rule of this file: the stages (workspace.c, launch.c, ingest.c, finish.c) never name an
 * agent; adding one is an entry here and its adapter's files. */
#include "runs/runs_internal.h"

#include <string.h>

#include "base/cleanup.h"
#include "runs/agent.h"

static const struct agent_adapter agent_adapters[] = {
    {.name = "opencode",
     .launch = opencode_launch,
     .parse = opencode_parse_event,
     .seed = scripts_agent_seed,
     .warm = true,
     .conversation_per_dir = true},
};

const struct agent_adapter *agent_find(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(agent_adapters); i++)
        if (strcmp(agent_adapters[i].name, name) == 0)
            return &agent_adapters[i];
    return NULL;
}

const char *agent_names(void)
{
    static char names[256];
    if (!names[0])
        for (size_t i = 0, len = 0; i < ARRAY_SIZE(agent_adapters); i++)
            len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "",
                                    agent_adapters[i].name);
    return names;
}

/* Which tool needs which scope (the names: src/base/scopes.c). */
#include "auth/auth.h"

#include <string.h>

unsigned auth_tool_scope(const char *tool)
{
    if (strncmp(tool, "container_", 10) == 0)
        return SCOPE_SANDBOX;
    if (strncmp(tool, "opencode_", 9) == 0)
        tool += 9;
    if (strcmp(tool, "run_task") == 0 || strcmp(tool, "get_result") == 0 ||
        strcmp(tool, "list_runs") == 0 || strcmp(tool, "cancel_run") == 0 ||
        strcmp(tool, "deliver_run") == 0 || strcmp(tool, "answer_run") == 0)
        return SCOPE_RUNS;
    return 0;
}

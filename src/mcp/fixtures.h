#pragma once
/* The tools, resources and prompts that the official MCP conformance suite expects. Registered
 * only with `serve --conformance-fixtures`, never in production. */

struct mcp_server;

void mcp_fixtures_register(struct mcp_server *srv);

/* The tasks extension's fixtures (fixtures_tasks.c): tools whose tasks are held in memory, a task
 * source of their own (ids "ftask_..."). Limits: per_user and max cap the tasks kept at once (a
 * call past a cap is refused with a tool error, code busy), and each task is dropped ttl_ms after
 * it was made. */
#include <stdint.h>

struct fixture_tasks;
struct fixture_tasks_limits {
    unsigned per_user; /* CONFORMANCE_TASKS_PER_USER */
    unsigned max;      /* CONFORMANCE_TASKS_MAX */
    uint64_t ttl_ms;   /* CONFORMANCE_TASK_TTL_MS */
};
#define FIXTURE_TASKS_PER_USER_DEFAULT 64
#define FIXTURE_TASKS_MAX_DEFAULT 1024
#define FIXTURE_TASK_TTL_MS_DEFAULT 300000

struct config;
struct err;
/* Fill lim from the configuration table over the defaults above. Returns 0, or -EINVAL with
 * err naming the key (fixtures_config.c). */
int mcp_fixtures_tasks_config_load(const struct config *cfg, struct fixture_tasks_limits *lim,
                                   struct err *err);

/* Register the tools and their task source on srv; the returned store must outlive the server
 * (free it after mcp_server_free). Loop thread. */
struct fixture_tasks *mcp_fixtures_tasks_register(struct mcp_server *srv,
                                                  const struct fixture_tasks_limits *lim);
void mcp_fixtures_tasks_free(struct fixture_tasks *ft);
/* fixtures_mrtr.c: the input-required result (SEP-2322) tools and prompt; after
 * mcp_fixtures_register, whose prompts/get it extends. */
void mcp_fixtures_mrtr_register(struct mcp_server *srv);

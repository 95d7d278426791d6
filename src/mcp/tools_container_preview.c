/* container_preview: a port of the caller's sandbox (or a run session's) at a capability URL
 * (src/preview), opened, listed or revoked. Opening and listing start the sandbox like every
 * container_* tool; the app must listen in it for the URL to answer. */
#include "mcp/tools_container.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "preview/preview.h"

static struct previews *the_previews;

void tools_container_set_previews(struct previews *pv)
{
    the_previews = pv;
}

static json_t *listed(const char *sandbox_id, json_t *opened)
{
    json_t *out = json_pack("{s:s, s:o}", "sandbox_id", sandbox_id, "previews",
                            previews_list(the_previews, sandbox_id, NULL));
    if (opened)
        json_object_set_new(out, "opened", opened);
    return out;
}

void container_preview_ready(struct job *j)
{
    const struct mcp_principal *who = mcp_call_principal(j->call);
    const json_t *port = json_object_get(j->args, "port");
    const char *sbx = sandbox_id(j->sbx);
    const char *revoke = container_str_arg(j->args, "revoke");
    json_t *opened = NULL;
    if (revoke) {
        struct err err = {0};
        if (previews_revoke(the_previews, who->user_id, revoke, &err) < 0) {
            mcp_call_tool_err(j->call, &err);
            container_job_end(j);
            return;
        }
    } else if (port) {
        const json_t *ttl = json_object_get(j->args, "ttl_minutes");
        struct err err = {0};
        const char *session = container_str_arg(j->args, "session_id");
        opened = previews_open(the_previews, who->user_id, session ? session : "", sbx,
                               (unsigned)json_integer_value(port),
                               ttl ? (uint64_t)json_integer_value(ttl) * 60 : 0, NULL, &err);
        if (!opened) {
            mcp_call_tool_err(j->call, &err);
            container_job_end(j);
            return;
        }
    }
    json_t *out = listed(sbx, opened);
    if (revoke)
        json_object_set_new(out, "revoked", json_string(revoke));
    char *text = revoke   ? xasprintf("Revoked %s: its URL answers no more.", revoke)
                 : opened ? xasprintf("Port %lld of sandbox %s is at %s until %s (open it in a "
                                      "browser; anyone with the URL can, so give it only to whom "
                                      "it is for). Revoke it with container_preview {revoke: "
                                      "\"%s\"}.",
                                      (long long)json_integer_value(port), sbx,
                                      json_string_value(json_object_get(opened, "url")),
                                      json_string_value(json_object_get(opened, "expires_at")),
                                      json_string_value(json_object_get(opened, "id")))
                          : xasprintf("Sandbox %s has %zu preview(s) open.", sbx,
                                      json_array_size(json_object_get(out, "previews")));
    mcp_call_tool_result(j->call, json_pack("[{s:s, s:s}]", "type", "text", "text", text), out,
                         false);
    free(text);
    container_job_end(j);
}

void container_tool_preview(struct mcp_call *call, const json_t *args, void *ctx)
{
    if (!the_previews) {
        mcp_call_tool_fail(call, MCP_TOOL_UNAVAILABLE, "previews are not available on this server");
        return;
    }
    if (container_str_arg(args, "revoke") && json_object_get(args, "port")) {
        mcp_call_tool_fail(call, MCP_TOOL_INVALID_ARGUMENTS,
                           "give port to open a preview, or revoke to end one, not both");
        return;
    }
    struct job *j = container_job_new(ctx, call, args, OP_PREVIEW);
    if (j)
        container_job_start(j);
}

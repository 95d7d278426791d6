/* Calls on a sandbox, run session or active run that lives on another node: forwarded there
 * over the internal channel
 * (POST /internal/mcp, signed with the cluster's key for the user the call is for; the caller's
 * own token is not passed on), and the answer, progress events included, relayed back. */
#include "mcp/forward.h"

#include "http/http_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/util.h"
#include "cluster/cluster.h"
#include "http/relay.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp.h"
#include "store/store.h"

#define INTERNAL_MCP "/internal/mcp"

/* What a message's call is about, when it is about something one node holds: a sandbox (the
 * user's own, or a session's), a run session, or a run. */
enum target { TARGET_NONE, TARGET_SANDBOX, TARGET_SESSION, TARGET_RUN };

static const char *arg(const json_t *args, const char *snake, const char *camel)
{
    const char *v = json_string_value(json_object_get(args, snake));
    return v ? v : json_string_value(json_object_get(args, camel));
}

static enum target call_target(const json_t *m, char key[64])
{
    const char *method = json_string_value(json_object_get(m, "method"));
    const json_t *params = json_object_get(m, "params");
    const char *name = json_string_value(json_object_get(params, "name"));
    const json_t *args = json_object_get(params, "arguments");
    if (!method || !name || strcmp(method, "tools/call") != 0)
        return TARGET_NONE;
    if (strncmp(name, "opencode_", 9) == 0)
        name += 9;
    const char *v = NULL;
    enum target t = TARGET_NONE;
    if (strncmp(name, "container_", 10) == 0) {
        t = TARGET_SANDBOX;
        v = arg(args, "session_id", "sessionId");
    } else if (strcmp(name, "run_task") == 0) {
        v = arg(args, "session_id", "sessionId");
        t = v ? TARGET_SESSION : TARGET_NONE;
    } else if (strcmp(name, "get_result") == 0 || strcmp(name, "cancel_run") == 0) {
        v = arg(args, "run_id", "runId");
        t = v ? TARGET_RUN : TARGET_NONE;
    }
    snprintf(key, 64, "%s", v && strlen(v) < 64 ? v : "");
    return t == TARGET_SESSION || t == TARGET_RUN ? (key[0] ? t : TARGET_NONE) : t;
}

/* Where the call goes: 0 here, 1 to url/node, or < 0. A run's calls go to its session's node
 * while it is queued or running (its waits and its cancellation happen there); an ended run is
 * answered from the store anywhere. */
static int route_call(struct http_server *srv, const char *user_id, enum target t, const char *key,
                      char url[256], char node[64], struct err *err)
{
    switch (t) {
    case TARGET_SANDBOX:
        return cluster_route_sandbox(srv->cluster, user_id, key[0] ? key : NULL, url, node, err);
    case TARGET_SESSION: return cluster_route_session(srv->cluster, user_id, key, url, node, err);
    case TARGET_RUN: {
        struct store_run run = {0};
        int r = store_run_get(srv->store, user_id, key, &run, err);
        bool active =
            r == 0 && (strcmp(run.status, "queued") == 0 || strcmp(run.status, "running") == 0);
        char session[64];
        snprintf(session, sizeof(session), "%s", run.session_id);
        store_run_release(&run);
        if (!active)
            return 0;
        return cluster_route_session(srv->cluster, user_id, session, url, node, err);
    }
    case TARGET_NONE: break;
    }
    return 0;
}

bool mcp_forward_call(struct http_server *srv, h2o_req_t *req, const struct store_user *user,
                      unsigned scopes, const struct mcp_request_info *info)
{
    if (!srv->cluster || !store_is_shared(srv->store))
        return false;
    json_t *m = json_loadb(req->entity.base, req->entity.len, 0, NULL);
    char key[64] = "";
    enum target t = TARGET_NONE;
    json_t *id = NULL;
    if (json_is_array(m)) {
        /* a batch goes where its first call on something a node holds goes */
        size_t i;
        json_t *e;
        json_array_foreach(m, i, e) if (t == TARGET_NONE && (t = call_target(e, key))) id =
            json_incref(json_object_get(e, "id"));
    } else if ((t = call_target(m, key))) {
        id = json_incref(json_object_get(m, "id"));
    }
    json_decref(m);
    if (t == TARGET_NONE)
        return false;
    char url[256], node[64];
    struct err err = {0};
    int r = route_call(srv, user->id, t, key, url, node, &err);
    if (r == 0) {
        json_decref(id);
        return false;
    }
    if (r < 0) {
        /* the call's answer, as a tool error the model can read and act on */
        log_warn("forward refused user=%s err=\"%s\"", user->id, err.msg);
        json_t *res = json_pack("{s:s, s:O, s:{s:[{s:s, s:s}], s:b}}", "jsonrpc", "2.0", "id",
                                id ? id : json_null(), "result", "content", "type", "text", "text",
                                err.msg, "isError", 1);
        char *text = json_dumps(res, JSON_COMPACT);
        http_respond(req, 200, "application/json", text, strlen(text));
        free(text);
        json_decref(res);
        json_decref(id);
        return true;
    }
    json_decref(id);
    struct cluster_claims cl = {.scopes = scopes, .time = time_now_ms() / 1000};
    snprintf(cl.node, sizeof(cl.node), "%s", cluster_node_id(srv->cluster));
    snprintf(cl.user_id, sizeof(cl.user_id), "%s", user->id);
    snprintf(cl.user_name, sizeof(cl.user_name), "%s", user->name);
    char sig[512];
    if (cluster_sign(cluster_key(srv->cluster), &cl, "POST", INTERNAL_MCP, req->entity.base,
                     req->entity.len, sig, sizeof(sig)) < 0) {
        http_respond_error(req, 500, "forward_failed", "cannot sign the forwarded call");
        return true;
    }
    struct curl_slist *h = NULL;
    char line[600];
    snprintf(line, sizeof(line), "%s: %s", CLUSTER_SIGNATURE_HEADER, sig);
    h = curl_slist_append(h, line);
    char head[200];
    if (cluster_head_sign(cluster_key(srv->cluster), cl.node, "POST", INTERNAL_MCP, req->entity.len,
                          cl.time, head, sizeof(head)) == 0) {
        snprintf(line, sizeof(line), "%s: %s", CLUSTER_NODE_HEADER, head);
        h = curl_slist_append(h, line);
    }
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    const char *pass[][2] = {{"Accept", http_header(req, H2O_TOKEN_ACCEPT)},
                             {"MCP-Protocol-Version", info->protocol_version},
                             {"Mcp-Method", info->mcp_method},
                             {"Mcp-Name", info->mcp_name},
                             {"X-Request-Id", info->request_id}};
    for (size_t i = 0; i < sizeof(pass) / sizeof(pass[0]); i++)
        if (pass[i][1] && !strpbrk(pass[i][1], "\r\n")) {
            snprintf(line, sizeof(line), "%s: %.400s", pass[i][0], pass[i][1]);
            h = curl_slist_append(h, line);
        }
    /* the node that serves the call checks them against the arguments, as this one would */
    for (size_t i = 0; i < info->nparams; i++) {
        const struct mcp_header_value *p = &info->params[i];
        if (memchr(p->value, '\r', p->value_len) || memchr(p->value, '\n', p->value_len))
            continue;
        char *l = xasprintf("Mcp-Param-%.*s: %.*s", (int)p->name_len, p->name, (int)p->value_len,
                            p->value);
        h = curl_slist_append(h, l);
        free(l);
    }
    char target[300], what[96];
    snprintf(target, sizeof(target), "%s%s", url, INTERNAL_MCP);
    snprintf(what, sizeof(what), "forward node=%s user=%s", node, user->id);
    log_info("forward call req=%s user=%s node=%s", info->request_id ? info->request_id : "-",
             user->id, node);
    http_relay(req, &(struct http_relay_opts){.url = target, .headers = h, .what = what});
    return true;
}

bool mcp_forwarded_auth(struct http_server *srv, h2o_req_t *req, struct store_user *user,
                        unsigned *scopes)
{
    const char *sig = http_header_str(req, CLUSTER_SIGNATURE_HEADER);
    struct cluster_claims cl;
    struct err err = {0};
    int r = !srv->cluster ? err_set(&err, -EACCES, "no cluster")
            : !sig        ? err_set(&err, -EACCES, "no signature")
                   : cluster_verify(cluster_key(srv->cluster), cluster_nonces(srv->cluster), sig,
                                    strlen(sig), "POST", INTERNAL_MCP, req->entity.base,
                                    req->entity.len, time_now_ms() / 1000, &cl, &err);
    if (r < 0) {
        log_warn("forwarded call refused err=\"%s\"", err.msg);
        if (r == -EALREADY) {
            http_respond_error(req, 409, "replayed",
                               "this signed call was served before; a node signs each call anew");
        } else if (r == -EBUSY) {
            http_add_header_str(req, "retry-after", "1");
            http_respond_error(req, 503, "busy",
                               "this node has taken too many forwarded calls in the last two "
                               "minutes; retry shortly");
        } else {
            http_respond_error(req, 401, "not_a_node",
                               "this endpoint is for the server's own nodes");
        }
        return false;
    }
    memset(user, 0, sizeof(*user));
    snprintf(user->id, sizeof(user->id), "%s", cl.user_id);
    snprintf(user->name, sizeof(user->name), "%s", cl.user_name);
    *scopes = cl.scopes;
    log_info("forwarded call from=%s user=%s", cl.node, cl.user_id);
    return true;
}

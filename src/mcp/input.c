/* Input-required results (SEP-2322): the checks on a retry's inputResponses and requestState,
 * the shapes of input requests and of the client's answers, and the InputRequiredResult. */
#include "mcp/mcp.h"
#include "mcp/mcp_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "mcp/jsonrpc.h"
#include "mcp/request_state.h"
#include "mcp/schema.h"

/* The requests SEP-2322 lets a server answer so (tasks/result belongs to the tasks extension). */
bool mcp_input_method(const char *method)
{
    return strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0 ||
           strcmp(method, "resources/read") == 0;
}

/* The client capability an input request's method needs, or NULL for a method no client
 * answers. */
static const char *capability_for(const char *method)
{
    if (!method)
        return NULL;
    if (strcmp(method, "elicitation/create") == 0)
        return "elicitation";
    if (strcmp(method, "sampling/createMessage") == 0)
        return "sampling";
    if (strcmp(method, "roots/list") == 0)
        return "roots";
    return NULL;
}

static const char *target_field(const char *method)
{
    return strcmp(method, "resources/read") == 0 ? "uri" : "name";
}

int mcp_input_begin(struct mcp_call *call, const json_t *params, char *msg, size_t msglen)
{
    struct mcp_input_slots *in = mcp_call_input_slots(call);
    const char *method = mcp_call_method(call);
    const char *target = json_string_value(json_object_get(params, target_field(method)));
    in->target = xstrdup(target ? target : "");
    const json_t *responses = json_object_get(params, "inputResponses");
    if (responses) {
        if (!json_is_object(responses)) {
            snprintf(msg, msglen, "params.inputResponses must be an object");
            return JSONRPC_INVALID_PARAMS;
        }
        if (json_object_size(responses) > MCP_INPUT_RESPONSES_MAX) {
            snprintf(msg, msglen,
                     "params.inputResponses has %zu entries, more than the %d a request may carry",
                     json_object_size(responses), MCP_INPUT_RESPONSES_MAX);
            return JSONRPC_INVALID_PARAMS;
        }
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)responses, key, v) if (!json_is_object(v))
        {
            snprintf(msg, msglen,
                     "params.inputResponses[\"%.64s\"] must be an object (the result of the input "
                     "request it answers)",
                     key);
            return JSONRPC_INVALID_PARAMS;
        }
        in->responses = json_incref((json_t *)responses);
    }
    const json_t *state = json_object_get(params, "requestState");
    if (state) {
        if (!json_is_string(state)) {
            snprintf(msg, msglen, "params.requestState must be a string");
            return JSONRPC_INVALID_PARAMS;
        }
        int64_t ttl_ms;
        const unsigned char *key = mcp_call_input_key(call, &ttl_ms);
        struct mcp_state_scope scope = {mcp_call_principal(call)->user_id, method, in->target};
        struct err err = {0};
        if (mcp_state_open(key, &scope, json_string_value(state), json_string_length(state),
                           time_now_ms(), &in->state, &err) < 0) {
            log_info("mcp request-state refused req=%s user=%s method=%s reason=\"%s\"",
                     mcp_call_request_id(call), scope.user, method, err.msg);
            snprintf(msg, msglen, "%s", err.msg);
            return JSONRPC_INVALID_PARAMS;
        }
    }
    return 0;
}

json_t *mcp_input_elicit(const char *message, json_t *requested_schema)
{
    return json_pack("{s:s, s:{s:s, s:o}}", "method", "elicitation/create", "params", "message",
                     message, "requestedSchema", requested_schema);
}

json_t *mcp_input_sample(const char *text, int max_tokens)
{
    return json_pack("{s:s, s:{s:[{s:s, s:{s:s, s:s}}], s:i}}", "method", "sampling/createMessage",
                     "params", "messages", "role", "user", "content", "type", "text", "text", text,
                     "maxTokens", max_tokens);
}

json_t *mcp_input_roots(void)
{
    return json_pack("{s:s, s:{}}", "method", "roots/list", "params");
}

bool mcp_call_can_ask(const struct mcp_call *call, const char *method)
{
    const char *cap = capability_for(method);
    return cap && mcp_call_modern(call) && mcp_input_method(mcp_call_method(call)) &&
           json_is_object(json_object_get(mcp_call_client_capabilities(call), cap));
}

/* Whether v is a well-formed result of the input request method. */
static bool well_formed(const json_t *v, const char *method)
{
    if (strcmp(method, "elicitation/create") == 0) {
        const char *action = json_string_value(json_object_get(v, "action"));
        if (!action)
            return false;
        if (strcmp(action, "accept") == 0)
            return json_is_object(json_object_get(v, "content"));
        return strcmp(action, "decline") == 0 || strcmp(action, "cancel") == 0;
    }
    if (strcmp(method, "sampling/createMessage") == 0) {
        const json_t *content = json_object_get(v, "content");
        return json_is_string(json_object_get(v, "role")) &&
               json_is_string(json_object_get(v, "model")) &&
               (json_is_object(content) || json_is_array(content));
    }
    if (strcmp(method, "roots/list") == 0) {
        const json_t *roots = json_object_get(v, "roots");
        if (!json_is_array(roots))
            return false;
        size_t i;
        const json_t *r;
        json_array_foreach(roots, i,
                           r) if (!json_is_string(json_object_get(r, "uri"))) return false;
        return true;
    }
    return false;
}

const json_t *mcp_call_input_response(const struct mcp_call *call, const char *key,
                                      const char *method)
{
    const json_t *v = json_object_get(mcp_call_input_slots(call)->responses, key);
    return v && well_formed(v, method) ? v : NULL;
}

const json_t *mcp_input_accepted(const json_t *response, const json_t *schema, bool *declined)
{
    const char *action = json_string_value(json_object_get(response, "action"));
    *declined = action && strcmp(action, "accept") != 0;
    const json_t *content = json_object_get(response, "content");
    char why[256];
    if (!action || *declined || !json_is_object(content) ||
        !schema_validate(schema, content, why, sizeof(why)))
        return NULL;
    return content;
}

const json_t *mcp_call_input_state(const struct mcp_call *call)
{
    return mcp_call_input_slots(call)->state;
}

void mcp_call_input_required(struct mcp_call *call, json_t *requests, json_t *state)
{
    const char *method = mcp_call_method(call);
    if (!mcp_call_modern(call) || !mcp_input_method(method) || !json_is_object(requests) ||
        json_object_size(requests) == 0) {
        log_error("BUG: mcp input-required on a call that cannot ask req=%s method=%s",
                  mcp_call_request_id(call), method);
        json_decref(requests);
        json_decref(state);
        mcp_call_error(call, JSONRPC_INTERNAL_ERROR, "this request cannot ask the client for input",
                       NULL);
        return;
    }
    json_t *missing = json_object();
    const char *key;
    json_t *req;
    json_object_foreach(requests, key, req)
    {
        const char *m = json_string_value(json_object_get(req, "method"));
        const char *cap = capability_for(m);
        if (!cap) {
            log_error("BUG: mcp input-required asks for an unknown method req=%s key=%s",
                      mcp_call_request_id(call), key);
            json_decref(missing);
            json_decref(requests);
            json_decref(state);
            mcp_call_error(call, JSONRPC_INTERNAL_ERROR, "internal error", NULL);
            return;
        }
        if (!mcp_call_can_ask(call, m))
            json_object_set_new(missing, cap, json_object());
    }
    if (json_object_size(missing)) {
        json_decref(requests);
        json_decref(state);
        mcp_call_error(call, MCP_MISSING_CLIENT_CAPABILITY,
                       "this request needs input from the client that it did not declare it can "
                       "give (see requiredCapabilities)",
                       json_pack("{s:o}", "requiredCapabilities", missing));
        return;
    }
    json_decref(missing);
    json_t *result =
        json_pack("{s:s, s:o}", "resultType", "input_required", "inputRequests", requests);
    if (state) {
        int64_t ttl_ms;
        const unsigned char *k = mcp_call_input_key(call, &ttl_ms);
        struct mcp_input_slots *in = mcp_call_input_slots(call);
        struct mcp_state_scope scope = {mcp_call_principal(call)->user_id, method,
                                        in->target ? in->target : ""};
        char *sealed = NULL;
        struct err err = {0};
        int r = mcp_state_seal(k, &scope, state, time_now_ms(), ttl_ms, &sealed, &err);
        json_decref(state);
        if (r < 0) {
            log_error("mcp request-state not issued req=%s method=%s err=\"%s\"",
                      mcp_call_request_id(call), method, err.msg);
            json_decref(result);
            mcp_call_error(call, JSONRPC_INTERNAL_ERROR,
                           "internal error: the request state is too "
                           "large",
                           NULL);
            return;
        }
        json_object_set_new(result, "requestState", json_string(sealed));
        free(sealed);
    }
    mcp_call_reply(call, result);
}

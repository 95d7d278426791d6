/* The conformance suite's input-required (SEP-2322) fixtures: tools and a prompt that ask the
 * client for input through the protocol layer's input-required results (mcp.h). */
#include "mcp/fixtures.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp.h"

#define EMPTY_SCHEMA "{\"type\":\"object\",\"properties\":{}}"
#define PROMPT_NAME "test_input_required_result_prompt"
/* what a fixture keeps of an answer in its requestState */
#define ANSWER_MAX 200

/* {"type":"object","properties":{prop:{"type":type}},"required":[prop]} */
static json_t *one_field(const char *prop, const char *type)
{
    json_t *p = json_pack("{s:s}", "type", type);
    if (strcmp(type, "string") == 0)
        json_object_set_new(p, "maxLength", json_integer(ANSWER_MAX));
    return json_pack("{s:s, s:{s:o}, s:[s]}", "type", "object", "properties", prop, p, "required",
                     prop);
}

static void reply_text(struct mcp_call *call, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void reply_text(struct mcp_call *call, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    mcp_call_tool_result(call, json_pack("[{s:s, s:s}]", "type", "text", "text", text), NULL,
                         false);
}

/* Answer with an input-required result; under an older revision, which has none, a tool error
 * says so. */
static void ask(struct mcp_call *call, json_t *requests, json_t *state)
{
    if (strcmp(mcp_call_protocol_version(call), MCP_VERSION_MODERN) != 0) {
        json_decref(requests);
        json_decref(state);
        mcp_call_tool_error(call, "this tool asks the client for input, which needs protocol "
                                  "version " MCP_VERSION_MODERN);
        return;
    }
    mcp_call_input_required(call, requests, state);
}

/* The accepted string field prop of the elicitation answer key, checked against schema; NULL
 * when not (yet) answered so. *declined: the user said no. */
static const char *elicited(struct mcp_call *call, const char *key, const json_t *schema,
                            const char *prop, bool *declined)
{
    *declined = false;
    const json_t *r = mcp_call_input_response(call, key, "elicitation/create");
    const json_t *content = r ? mcp_input_accepted(r, schema, declined) : NULL;
    return json_string_value(json_object_get(content, prop));
}

/* The text of a sampling answer (its content, or the first of its content blocks). */
static const char *sampled(const json_t *r)
{
    const json_t *c = json_object_get(r, "content");
    if (json_is_array(c))
        c = json_array_get(c, 0);
    return json_string_value(json_object_get(c, "text"));
}

static void t_elicitation(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    json_auto_t *schema = one_field("name", "string");
    bool declined;
    const char *name = elicited(call, "user_name", schema, "name", &declined);
    if (name)
        reply_text(call, "Hello, %s!", name);
    else if (declined)
        reply_text(call, "Hello, whoever you are!");
    else
        ask(call,
            json_pack("{s:o}", "user_name",
                      mcp_input_elicit("What is your name?", json_incref(schema))),
            NULL);
}

static void t_sampling(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    const json_t *r = mcp_call_input_response(call, "capital_question", "sampling/createMessage");
    const char *text = r ? sampled(r) : NULL;
    if (text)
        reply_text(call, "The model answered: %.500s", text);
    else
        ask(call,
            json_pack("{s:o}", "capital_question",
                      mcp_input_sample("What is the capital of France?", 100)),
            NULL);
}

static void t_list_roots(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    const json_t *r = mcp_call_input_response(call, "client_roots", "roots/list");
    if (!r) {
        ask(call, json_pack("{s:o}", "client_roots", mcp_input_roots()), NULL);
        return;
    }
    const json_t *roots = json_object_get(r, "roots");
    char list[800] = "";
    size_t used = 0, i;
    const json_t *root;
    json_array_foreach(roots, i, root)
    {
        if (i == 8)
            break;
        int n = snprintf(list + used, sizeof(list) - used, "%s%.80s", i ? ", " : "",
                         json_string_value(json_object_get(root, "uri")));
        if (n < 0 || (size_t)n >= sizeof(list) - used)
            break;
        used += (size_t)n;
    }
    reply_text(call, "The client has %zu root(s): %s", json_array_size(roots), list);
}

/* A confirmation that counts only with the state the first round issued (the request-state and
 * tampered-state scenarios). */
static void t_confirm(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    json_auto_t *schema = json_pack("{s:s, s:{s:{s:s}}, s:[s]}", "type", "object", "properties",
                                    "ok", "type", "boolean", "required", "ok");
    const json_t *state = mcp_call_input_state(call);
    const char *step = json_string_value(json_object_get(state, "step"));
    bool declined = false;
    const json_t *r = mcp_call_input_response(call, "confirm", "elicitation/create");
    const json_t *content = r ? mcp_input_accepted(r, schema, &declined) : NULL;
    if (step && strcmp(step, "confirm") == 0 && (content || declined)) {
        reply_text(call, "state-ok: the request state was verified; confirmed=%s",
                   json_is_true(json_object_get(content, "ok")) ? "yes" : "no");
        return;
    }
    ask(call,
        json_pack("{s:o}", "confirm", mcp_input_elicit("Please confirm", json_incref(schema))),
        json_pack("{s:s}", "step", "confirm"));
}

/* Three kinds of input at once; answers that come in separate rounds are kept in the state. */
static void t_multiple(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    json_auto_t *schema = one_field("name", "string");
    const json_t *state = mcp_call_input_state(call);
    json_auto_t *have = json_is_object(state) ? json_deep_copy(state) : json_object();
    bool declined;
    const char *name = elicited(call, "user_name", schema, "name", &declined);
    if (name)
        json_object_set_new(have, "name", json_string(name));
    const json_t *g = mcp_call_input_response(call, "greeting", "sampling/createMessage");
    const char *greeting = g ? sampled(g) : NULL;
    if (greeting && strlen(greeting) <= ANSWER_MAX)
        json_object_set_new(have, "greeting", json_string(greeting));
    const json_t *roots = mcp_call_input_response(call, "client_roots", "roots/list");
    if (roots)
        json_object_set_new(
            have, "roots",
            json_integer((json_int_t)json_array_size(json_object_get(roots, "roots"))));
    json_t *want = json_object();
    if (!json_object_get(have, "name"))
        json_object_set_new(want, "user_name",
                            mcp_input_elicit("What is your name?", json_incref(schema)));
    if (!json_object_get(have, "greeting"))
        json_object_set_new(want, "greeting", mcp_input_sample("Generate a greeting", 50));
    if (!json_object_get(have, "roots"))
        json_object_set_new(want, "client_roots", mcp_input_roots());
    if (json_object_size(want)) {
        ask(call, want, json_incref(have));
        return;
    }
    json_decref(want);
    reply_text(call, "%s, %s (%lld root(s))", json_string_value(json_object_get(have, "greeting")),
               json_string_value(json_object_get(have, "name")),
               (long long)json_integer_value(json_object_get(have, "roots")));
}

/* Two questions in two rounds, the first answer carried in the state to the third. */
static void t_multi_round(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    json_auto_t *s1 = one_field("name", "string");
    json_auto_t *s2 = one_field("color", "string");
    const json_t *state = mcp_call_input_state(call);
    json_int_t round = json_integer_value(json_object_get(state, "round"));
    bool declined;
    if (round == 2) {
        const char *name = json_string_value(json_object_get(state, "name"));
        const char *color = elicited(call, "step2", s2, "color", &declined);
        if (name && color) {
            reply_text(call, "%s's favorite color is %s", name, color);
            return;
        }
        ask(call,
            json_pack("{s:o}", "step2",
                      mcp_input_elicit("Step 2: What is your favorite color?", json_incref(s2))),
            json_incref((json_t *)state));
        return;
    }
    const char *name = round == 1 ? elicited(call, "step1", s1, "name", &declined) : NULL;
    if (name) {
        ask(call,
            json_pack("{s:o}", "step2",
                      mcp_input_elicit("Step 2: What is your favorite color?", json_incref(s2))),
            json_pack("{s:i, s:s}", "round", 2, "name", name));
        return;
    }
    ask(call,
        json_pack("{s:o}", "step1",
                  mcp_input_elicit("Step 1: What is your name?", json_incref(s1))),
        json_pack("{s:i}", "round", 1));
}

/* Asks only for what the client declared it can give. */
static void t_capabilities(struct mcp_call *call, const json_t *args, void *ctx)
{
    (void)args, (void)ctx;
    json_auto_t *schema = one_field("name", "string");
    bool declined;
    const char *name = elicited(call, "user_name", schema, "name", &declined);
    const json_t *s = mcp_call_input_response(call, "summary", "sampling/createMessage");
    if (name || declined || (s && sampled(s))) {
        reply_text(call, "Input received through %s", s ? "sampling" : "elicitation");
        return;
    }
    json_t *want = json_object();
    if (mcp_call_can_ask(call, "elicitation/create"))
        json_object_set_new(want, "user_name",
                            mcp_input_elicit("What is your name?", json_incref(schema)));
    /* with neither declared, the sampling request makes the call fail with -32021 */
    if (mcp_call_can_ask(call, "sampling/createMessage") || !json_object_size(want))
        json_object_set_new(want, "summary", mcp_input_sample("Say hello", 50));
    ask(call, want, NULL);
}

/* ---------- the prompt ---------- */

struct prompts_get {
    mcp_method_fn next;
    void *next_ctx;
};

static void m_prompts_get(struct mcp_call *call, const json_t *params, void *ctx)
{
    struct prompts_get *pg = ctx;
    const char *name = json_string_value(json_object_get(params, "name"));
    if (!name || strcmp(name, PROMPT_NAME) != 0) {
        pg->next(call, params, pg->next_ctx);
        return;
    }
    if (strcmp(mcp_call_protocol_version(call), MCP_VERSION_MODERN) != 0) {
        mcp_call_error(
            call, JSONRPC_INVALID_PARAMS,
            "this prompt asks for input, which needs protocol version " MCP_VERSION_MODERN, NULL);
        return;
    }
    json_auto_t *schema = one_field("context", "string");
    bool declined;
    const char *context = elicited(call, "user_context", schema, "context", &declined);
    if (!context && !declined) {
        ask(call,
            json_pack("{s:o}", "user_context",
                      mcp_input_elicit("What context should the prompt use?", json_incref(schema))),
            NULL);
        return;
    }
    char *text = xasprintf("Answer with this context in mind: %s", context ? context : "none");
    mcp_call_reply(call, json_pack("{s:s, s:[{s:s, s:{s:s, s:s}}]}", "description",
                                   "A prompt built from the user's answer", "messages", "role",
                                   "user", "content", "type", "text", "text", text));
    free(text);
}

void mcp_fixtures_mrtr_register(struct mcp_server *srv)
{
    static const struct mcp_tool_def tools[] = {
        {"test_input_required_result_elicitation", NULL,
         "Asks the user's name through an input-required result (SEP-2322)", EMPTY_SCHEMA, NULL,
         MCP_TOOL_READ_ONLY, t_elicitation, NULL},
        {"test_input_required_result_sampling", NULL,
         "Asks the client's model a question through an input-required result", EMPTY_SCHEMA, NULL,
         MCP_TOOL_READ_ONLY, t_sampling, NULL},
        {"test_input_required_result_list_roots", NULL,
         "Asks the client's roots through an input-required result", EMPTY_SCHEMA, NULL,
         MCP_TOOL_READ_ONLY, t_list_roots, NULL},
        {"test_input_required_result_request_state", NULL,
         "Asks for a confirmation and checks its sealed requestState", EMPTY_SCHEMA, NULL,
         MCP_TOOL_READ_ONLY, t_confirm, NULL},
        {"test_input_required_result_tampered_state", NULL,
         "Asks for a confirmation; a requestState altered by the client is refused", EMPTY_SCHEMA,
         NULL, MCP_TOOL_READ_ONLY, t_confirm, NULL},
        {"test_input_required_result_multiple_inputs", NULL,
         "Asks for an elicitation, a sampling and the roots at once", EMPTY_SCHEMA, NULL,
         MCP_TOOL_READ_ONLY, t_multiple, NULL},
        {"test_input_required_result_multi_round", NULL,
         "Asks two questions in two rounds, carrying the first answer in requestState",
         EMPTY_SCHEMA, NULL, MCP_TOOL_READ_ONLY, t_multi_round, NULL},
        {"test_input_required_result_capabilities", NULL,
         "Asks only for input the client declared it can give", EMPTY_SCHEMA, NULL,
         MCP_TOOL_READ_ONLY, t_capabilities, NULL},
        {"test_streaming_elicitation", NULL,
         "Asks the user's name the stateless way: an input-required result, never a request of "
         "the server's own on the response stream",
         EMPTY_SCHEMA, NULL, MCP_TOOL_READ_ONLY, t_elicitation, NULL},
    };
    for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
        mcp_server_add_tool(srv, &tools[i]);
    static struct prompts_get pg;
    pg.next = mcp_server_method(srv, "prompts/get", &pg.next_ctx);
    if (!pg.next) {
        fprintf(stderr, "BUG: the input-required prompt fixture needs prompts/get registered\n");
        abort();
    }
    mcp_server_add_method(srv, "prompts/get", m_prompts_get, &pg, NULL, NULL);
}

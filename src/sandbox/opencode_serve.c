/* A warm OpenCode's events as `opencode run --format json` prints them (see opencode_serve.h).
 * What is printed follows OpenCode's own run command: a tool part once it completed or failed
 * ("tool_use"), a step's start and end, a text or (with thinking) a reasoning block once it
 * ended, the session's errors; the prompt is over when the session's status becomes idle. What
 * the session reports before the prompt's first message shows is an earlier prompt's. */
#include "sandbox/opencode_serve.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

void oc_follow_init(struct oc_follow *f, const char *session, bool thinking)
{
    memset(f, 0, sizeof(*f));
    f->thinking = thinking;
    size_t n = strlen(session);
    if (n == 0 || n > OC_SESSION_ID_MAX)
        return;
    memcpy(f->session, session, n + 1);
    memcpy(f->tree[0], session, n + 1);
    f->ntree = 1;
    f->armed = true;
}

static bool in_tree(const struct oc_follow *f, const char *id)
{
    for (size_t i = 0; id && i < f->ntree; i++)
        if (strcmp(f->tree[i], id) == 0)
            return true;
    return false;
}

static bool is_session(const struct oc_follow *f, const char *id)
{
    return f->session[0] && id && strcmp(id, f->session) == 0;
}

void oc_follow_after(struct oc_follow *f, const char *message_id)
{
    size_t n = message_id ? strlen(message_id) : 0;
    if (n > OC_MESSAGE_ID_MAX)
        return; /* not an id of the server's: follow from the start */
    memcpy(f->after, message_id ? message_id : "", n + 1);
    f->armed = n == 0;
}

/* An update of message id of session: when it is the run's session's and newer than the message
 * the prompt came after, it is the prompt's, and from then on the session's reports are too. */
static void arm(struct oc_follow *f, const char *session, const char *id)
{
    if (!f->armed && is_session(f, session) && id && strlen(id) <= OC_MESSAGE_ID_MAX &&
        strcmp(id, f->after) > 0)
        f->armed = true;
}

/* {"type": type, "timestamp": now, "sessionID": session, key: value} and "\n" */
static char *line_of(const char *session, const char *type, const char *key, json_t *value,
                     int64_t now_ms)
{
    json_t *o = json_pack("{s:s, s:I, s:s, s:O}", "type", type, "timestamp", (json_int_t)now_ms,
                          "sessionID", session, key, value);
    if (!o)
        return NULL;
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text)
        return NULL;
    size_t n = strlen(text);
    char *line = realloc(text, n + 2);
    if (!line) {
        free(text);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    return line;
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static char *part_line(struct oc_follow *f, json_t *part, int64_t now_ms)
{
    const char *type = str(part, "type");
    if (!type || !is_session(f, str(part, "sessionID")))
        return NULL;
    if (strcmp(type, "tool") == 0) {
        const char *status = str(json_object_get(part, "state"), "status");
        if (status && (strcmp(status, "completed") == 0 || strcmp(status, "error") == 0))
            return line_of(f->session, "tool_use", "part", part, now_ms);
        return NULL;
    }
    if (strcmp(type, "step-start") == 0)
        return line_of(f->session, "step_start", "part", part, now_ms);
    if (strcmp(type, "step-finish") == 0)
        return line_of(f->session, "step_finish", "part", part, now_ms);
    bool ended = json_object_get(json_object_get(part, "time"), "end") != NULL &&
                 !json_is_null(json_object_get(json_object_get(part, "time"), "end"));
    if (strcmp(type, "text") == 0 && ended)
        return line_of(f->session, "text", "part", part, now_ms);
    if (strcmp(type, "reasoning") == 0 && ended && f->thinking)
        return line_of(f->session, "reasoning", "part", part, now_ms);
    return NULL;
}

char *oc_follow_event(struct oc_follow *f, const char *data, size_t len, int64_t now_ms,
                      char *permission, size_t cap)
{
    if (cap)
        permission[0] = '\0';
    json_t *ev = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
    if (!json_is_object(ev)) {
        json_decref(ev);
        return NULL;
    }
    const char *type = str(ev, "type");
    json_t *props = json_object_get(ev, "properties");
    char *line = NULL;
    if (!type || !json_is_object(props)) {
        /* nothing */
    } else if (strcmp(type, "session.created") == 0 || strcmp(type, "session.updated") == 0) {
        json_t *info = json_object_get(props, "info");
        const char *id = str(info, "id"), *parent = str(info, "parentID");
        if (id && parent && in_tree(f, parent) && !in_tree(f, id) &&
            f->ntree < OC_FOLLOW_SESSIONS && strlen(id) <= OC_SESSION_ID_MAX)
            strcpy(f->tree[f->ntree++], id);
    } else if (strcmp(type, "message.updated") == 0) {
        json_t *info = json_object_get(props, "info");
        arm(f, str(info, "sessionID"), str(info, "id"));
    } else if (strcmp(type, "message.part.updated") == 0) {
        json_t *part = json_object_get(props, "part");
        arm(f, str(part, "sessionID"), str(part, "messageID"));
        if (json_is_object(part) && f->armed)
            line = part_line(f, part, now_ms);
    } else if (!f->armed && strncmp(type, "session.", 8) == 0) {
        /* an earlier prompt's error, status or end */
    } else if (strcmp(type, "session.error") == 0) {
        json_t *error = json_object_get(props, "error");
        if (is_session(f, str(props, "sessionID")) && json_is_object(error)) {
            f->errored = true;
            line = line_of(f->session, "error", "error", error, now_ms);
        }
    } else if (strcmp(type, "session.status") == 0) {
        const char *status = str(json_object_get(props, "status"), "type");
        if (is_session(f, str(props, "sessionID")) && status && strcmp(status, "idle") == 0)
            f->idle = true;
        if (is_session(f, str(props, "sessionID")) && status && strcmp(status, "retry") == 0)
            f->retrying = true;
    } else if (strcmp(type, "session.idle") == 0) {
        if (is_session(f, str(props, "sessionID")))
            f->idle = true;
    } else if (strcmp(type, "permission.asked") == 0) {
        const char *id = str(props, "id");
        if (id && in_tree(f, str(props, "sessionID")) && strlen(id) < cap)
            strcpy(permission, id);
    }
    json_decref(ev);
    return line;
}

char *oc_error_line(const char *session, const char *message, int64_t now_ms)
{
    json_t *err =
        json_pack("{s:s, s:{s:s}}", "name", "AgentBridgeError", "data", "message", message);
    char *line = err ? line_of(session ? session : "", "error", "error", err, now_ms) : NULL;
    json_decref(err);
    return line;
}

void oc_sse_init(struct oc_sse *s, size_t max)
{
    memset(s, 0, sizeof(*s));
    s->max = max;
}

void oc_sse_free(struct oc_sse *s)
{
    free(s->data);
    memset(s, 0, sizeof(*s));
}

static void sse_append(struct oc_sse *s, const char *p, size_t n)
{
    if (s->over)
        return;
    size_t need = s->len + n + (s->len ? 1 : 0);
    if (need > s->max) {
        s->over = true;
        return;
    }
    if (need + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < need + 1)
            cap *= 2;
        char *d = realloc(s->data, cap);
        if (!d) {
            s->over = true;
            return;
        }
        s->data = d;
        s->cap = cap;
    }
    if (s->len)
        s->data[s->len++] = '\n';
    memcpy(s->data + s->len, p, n);
    s->len += n;
    s->data[s->len] = '\0';
}

bool oc_sse_line(struct oc_sse *s, const char *line, size_t len, const char **data, size_t *dlen,
                 bool *over)
{
    if (len && line[len - 1] == '\r')
        len--;
    if (len == 0) {
        bool any = s->len > 0 || s->over;
        *data = s->data ? s->data : "";
        *dlen = s->over ? 0 : s->len;
        *over = s->over;
        s->len = 0;
        s->over = false;
        return any;
    }
    if (len >= 5 && memcmp(line, "data:", 5) == 0) {
        size_t skip = len > 5 && line[5] == ' ' ? 6 : 5;
        sse_append(s, line + skip, len - skip);
    }
    return false; /* comments, event names, ids and retry hints are not needed */
}

bool oc_uri_component(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || strchr("-_.!~*'()", *p);
        if (n + (plain ? 1 : 3) >= cap)
            return false;
        if (plain) {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    if (n >= cap)
        return false;
    out[n] = '\0';
    return true;
}

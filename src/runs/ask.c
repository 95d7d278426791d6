/* An agent's questions to the person who started its run, and plans it asks them to approve.
 *
 * The agent asks through a tool the server offers it (mcp/tools_agent.c): the question is stored
 * (run_questions, one unanswered per run), the run's phase becomes "waiting", its timeline says
 * what was asked, its owner is notified, and the agent's call is held here until the answer
 * comes. The answer may come through any node (answer_run, tasks/update, an input-required retry
 * of get_result, the run's page): it is recorded by one conditional update, so the first of two
 * answers wins, and the node holding the agent's call hands it over at once when it recorded it,
 * else within ASK_LOOK_MS when it looks. A question past its deadline is answered "no answer"
 * by whichever node looks first. While a run waits, its own timeout does not run. The other
 * things a run's agent does for its person (open_preview: the run's sandbox, a note in its
 * timeline, the previews its page lists) come through here too. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/utf8.h"
#include "base/util.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

#define ASK_LOOK_MS 1000  /* how often a held call's question is looked up in the store */
#define ASK_SWEEP_MS 1000 /* how often questions past their deadline are looked for */
#define ASK_DUE_BATCH 32  /* questions answered "no answer" in one look */
#define SHOWN_MAX 160     /* bytes of a question or an answer in a timeline's line */

struct ask_wait {
    struct runs *e;
    struct ask_wait *next;
    char question[64], run_id[64];
    runs_answer_fn cb;
    void *ctx;
    int64_t next_look; /* monotonic ms */
};

/* The first line of s, cut to SHOWN_MAX bytes on a character, "…" added when cut. */
static void shown(const char *s, char *out, size_t cap)
{
    size_t n = strcspn(s, "\r\n");
    if (n > SHOWN_MAX)
        n = utf8_boundary(s, SHOWN_MAX);
    bool cut = s[n] != '\0';
    snprintf(out, cap, "%.*s%s", (int)n, s, cut ? "\xE2\x80\xA6" : "");
}

static const char *by_words(const char *by)
{
    static const struct {
        const char *by, *words;
    } names[] = {
        {"tool", "with answer_run"},
        {"tasks", "through the client's task"},
        {"mrtr", "through get_result"},
        {"page", "on the run's page"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (strcmp(by, names[i].by) == 0)
            return names[i].words;
    return "";
}

static bool is_plan(const struct store_question *q)
{
    return strcmp(q->kind, RUNS_ASK_PLAN) == 0;
}

static long wait_minutes(const struct store_question *q)
{
    return (long)((q->deadline_at - q->asked_at + 59999) / 60000);
}

/* What the agent's call returns for answered question q (malloc'd). */
static char *reply_text(const struct store_question *q)
{
    const char *a = q->answer ? q->answer : "";
    if (strcmp(q->answered_by, "timeout") == 0)
        return is_plan(q) ? xasprintf("No approval came within %ld minutes, so the plan is not "
                                      "approved. Do not carry it out: change nothing, and end "
                                      "your turn saying that the plan waits for approval.",
                                      wait_minutes(q))
                          : xasprintf("No answer came within %ld minutes. Proceed with your best "
                                      "judgement, and say in your summary what you assumed.",
                                      wait_minutes(q));
    if (strcmp(q->answered_by, "ended") == 0)
        return xstrdup("The run has ended; stop.");
    if (is_plan(q))
        return *a ? xasprintf("Your plan is approved with these changes:\n\n%s\n\nCarry it out "
                              "with them now.",
                              a)
                  : xstrdup("Your plan is approved as written. Carry it out now.");
    return xasprintf("The person answered:\n\n%s", a);
}

/* The timeline's line for answered question q. */
static void answer_line(const struct store_question *q, char *out, size_t cap)
{
    char a[SHOWN_MAX + 8];
    shown(q->answer ? q->answer : "", a, sizeof(a));
    if (strcmp(q->answered_by, "timeout") == 0)
        snprintf(out, cap,
                 is_plan(q) ? "No approval within %ld min: the plan is not carried out"
                            : "No answer within %ld min: the agent proceeds on its own judgement",
                 wait_minutes(q));
    else if (strcmp(q->answered_by, "ended") == 0)
        snprintf(out, cap, "The run ended before an answer came");
    else if (is_plan(q) && !*a)
        snprintf(out, cap, "Plan approved %s", by_words(q->answered_by));
    else if (is_plan(q))
        snprintf(out, cap, "Plan approved %s, with changes: %s", by_words(q->answered_by), a);
    else
        snprintf(out, cap, "Answered %s: %s", by_words(q->answered_by), a);
}

/* The answer's event in the run's timeline (stored from any node: the run need not be here). */
static void answer_event(struct runs *e, const struct store_question *q)
{
    char line[2 * SHOWN_MAX + 128];
    answer_line(q, line, sizeof(line));
    json_t *raw =
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", "answer", "question_id", q->id, "kind",
                  q->kind, "answer", q->answer ? q->answer : "", "by", q->answered_by);
    char *text = json_dumps(raw, JSON_COMPACT);
    json_decref(raw);
    struct store_run_event ev = {
        .time = time_now_ms(), .type = "answer", .summary = line, .raw = text};
    struct err err = {0};
    if (store_run_add_events(e->st, q->run_id, &ev, 1, -1, &err) < 0)
        log_error("run event not stored run=%s type=answer err=\"%s\"", q->run_id, err.msg);
    free(text);
}

/* The run held here is waiting no more: its timeout runs again from where it stopped, and its
 * phase is the agent's. */
static void resume_run(struct runs *e, const char *run_id)
{
    struct run *r = runs_find(e, run_id);
    if (!r || r->ph_final || r->ended_in[0])
        return;
    if (r->wait_since) {
        r->deadline += time_mono_ms() - r->wait_since;
        r->wait_since = 0;
    }
    if (strcmp(r->ph_name, "waiting") == 0)
        run_set_phase(r, "agent", "working with the answer");
}

/* Hand answered question q to the calls held for it here. */
static void deliver(struct runs *e, const struct store_question *q)
{
    bool held = false;
    for (struct ask_wait **pp = &e->asks; *pp;) {
        struct ask_wait *w = *pp;
        if (strcmp(w->question, q->id) != 0) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        held = true;
        _cleanup_free_ char *text = reply_text(q);
        w->cb(w->ctx, text, NULL);
        free(w);
    }
    if (held || runs_find(e, q->run_id))
        resume_run(e, q->run_id);
    runs_notify_progress(e, q->run_id);
}

/* Record an answer to question id and tell everyone: 1 when this was the answer, 0 when it was
 * answered before. */
static int record_answer(struct runs *e, const char *id, const char *answer, const char *by,
                         struct err *err)
{
    int rc = store_question_answer(e->st, id, answer, by, time_now_ms(), err);
    if (rc <= 0)
        return rc;
    _cleanup_(store_question_release) struct store_question q = {0};
    if (store_question_get(e->st, id, &q, err) < 0)
        return 1;
    answer_event(e, &q);
    log_info("run question answered run=%s question=%s by=%s", q.run_id, q.id, by);
    deliver(e, &q);
    return 1;
}

static void fail_call(runs_answer_fn cb, void *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail_call(runs_answer_fn cb, void *ctx, int code, const char *fmt, ...)
{
    struct err err = {.code = code};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err.msg, sizeof(err.msg), fmt, ap);
    va_end(ap);
    cb(ctx, NULL, &err);
}

static struct ask_wait *hold(struct runs *e, const char *question, const char *run_id,
                             runs_answer_fn cb, void *ctx)
{
    struct ask_wait *w = xcalloc(1, sizeof(*w));
    w->e = e;
    snprintf(w->question, sizeof(w->question), "%s", question);
    snprintf(w->run_id, sizeof(w->run_id), "%s", run_id);
    w->cb = cb;
    w->ctx = ctx;
    w->next_look = time_mono_ms() + ASK_LOOK_MS;
    w->next = e->asks;
    e->asks = w;
    return w;
}

void *runs_ask(struct runs *e, const struct runs_ask *a, runs_answer_fn cb, void *ctx)
{
    struct run *r = runs_find(e, a->run_id);
    if (!r || r->phase != PH_AGENT || r->ph_final || strcmp(r->user_id, a->user_id) != 0) {
        fail_call(cb, ctx, -ENOENT, "run '%.64s' is not working here: there is nobody to ask",
                  a->run_id);
        return NULL;
    }
    struct err err = {0};
    int64_t asked = 0;
    if (store_question_count(e->st, r->id, &asked, &err) == 0 && asked >= RUNS_QUESTIONS_MAX) {
        char text[256];
        snprintf(text, sizeof(text),
                 "This run has asked %d questions, the most one may. Proceed with your best "
                 "judgement, and say in your summary what you assumed.",
                 RUNS_QUESTIONS_MAX);
        cb(ctx, text, NULL);
        return NULL;
    }
    int64_t now = time_now_ms();
    uint64_t wait_s = r->question_timeout_s ? r->question_timeout_s : e->cfg.question_timeout_s;
    struct store_question q = {.kind = "",
                               .text = (char *)a->text,
                               .asked_at = now,
                               .deadline_at = now + (int64_t)wait_s * 1000};
    id_new("q", q.id);
    snprintf(q.run_id, sizeof(q.run_id), "%s", r->id);
    snprintf(q.user_id, sizeof(q.user_id), "%s", r->user_id);
    snprintf(q.kind, sizeof(q.kind), "%s", a->kind);
    _cleanup_free_ char *choices =
        a->choices && json_array_size(a->choices) ? json_dumps(a->choices, JSON_COMPACT) : NULL;
    q.choices = choices;
    _cleanup_(store_question_release) struct store_question open = {0};
    int rc = store_question_ask(e->st, &q, &open, &err);
    if (rc == -EEXIST) {
        /* the same question again (the agent's call was cut: a restart, a reconnection) waits for
         * the same answer; another is refused while one waits */
        if (strcmp(open.kind, a->kind) == 0 && strcmp(open.text, a->text) == 0)
            return hold(e, open.id, r->id, cb, ctx);
        fail_call(cb, ctx, -EBUSY,
                  "another question is waiting for its answer (%.200s): ask one at a time",
                  open.text);
        return NULL;
    }
    if (rc < 0) {
        fail_call(cb, ctx, rc, "the question could not be stored: %.200s", err.msg);
        return NULL;
    }
    char line[SHOWN_MAX + 64], what[SHOWN_MAX + 8];
    shown(a->text, what, sizeof(what));
    bool plan = strcmp(a->kind, RUNS_ASK_PLAN) == 0;
    snprintf(line, sizeof(line), plan ? "Plan for approval: %s" : "Asked: %s", what);
    json_t *raw = json_pack("{s:s, s:s, s:s, s:I}", "question_id", q.id, "kind", q.kind, "text",
                            a->text, "deadline_ms", (json_int_t)q.deadline_at);
    if (a->choices && json_array_size(a->choices))
        json_object_set(raw, "choices", (json_t *)a->choices);
    run_server_event(r, "question", line, raw);
    if (!r->wait_since)
        r->wait_since = time_mono_ms();
    run_set_phase(r, "waiting", plan ? "waiting for the plan's approval" : "waiting for an answer");
    if (store_notify_question(e->st, r->id, q.id, now, &err) < 0)
        log_error("question not notified run=%s err=\"%s\"", r->id, err.msg);
    log_info("run asks run=%s question=%s kind=%s wait_s=%llu", r->id, q.id, q.kind,
             (unsigned long long)wait_s);
    return hold(e, q.id, r->id, cb, ctx);
}

void runs_ask_cancel(struct runs *e, void *handle)
{
    for (struct ask_wait **pp = &e->asks; *pp; pp = &(*pp)->next)
        if (*pp == handle) {
            *pp = ((struct ask_wait *)handle)->next;
            free(handle);
            return;
        }
}

int runs_answer(struct runs *e, const char *user_id, const char *run_id, const char *question_id,
                const char *answer, const char *by, struct err *err)
{
    struct store_run row = {0};
    int rc = store_run_get(e->st, user_id, run_id, &row, err);
    store_run_release(&row);
    if (rc < 0)
        return rc;
    size_t n = strlen(answer);
    if (n > RUNS_ANSWER_MAX)
        return err_set(err, -E2BIG, "the answer is %zu bytes, more than the %d an answer may have",
                       n, RUNS_ANSWER_MAX);
    if (!utf8_valid(answer, n))
        return err_set(err, -EINVAL, "the answer is not valid UTF-8");
    _cleanup_(store_question_release) struct store_question q = {0};
    rc = store_question_open(e->st, run_id, false, &q, err);
    if (rc == -ENOENT)
        return err_set(err, -EALREADY, "run '%.64s' is not waiting for an answer", run_id);
    if (rc < 0)
        return rc;
    if (question_id && *question_id && strcmp(question_id, q.id) != 0)
        return err_set(err, -EALREADY,
                       "question '%.64s' is no longer waiting for its answer (the run now "
                       "asks: %.200s)",
                       question_id, q.text);
    if (!is_plan(&q) && !*answer)
        return err_set(err, -EINVAL, "the answer is empty: the run asks: %.200s", q.text);
    rc = record_answer(e, q.id, answer, by, err);
    if (rc == 0)
        return err_set(err, -EALREADY, "the run's question was answered meanwhile");
    return rc < 0 ? rc : 0;
}

static void on_due(const struct store_question *q, void *ctx)
{
    struct runs *e = ctx;
    struct err err = {0};
    if (record_answer(e, q->id, "", "timeout", &err) < 0)
        log_error("question not closed question=%s err=\"%s\"", q->id, err.msg);
}

void runs_ask_tick(struct runs *e)
{
    int64_t now = time_mono_ms();
    struct err err = {0};
    if (now >= e->next_ask_sweep) {
        e->next_ask_sweep = now + ASK_SWEEP_MS;
        if (store_question_list_due(e->st, time_now_ms(), ASK_DUE_BATCH, on_due, e, &err) < 0)
            log_error("questions not looked at err=\"%s\"", err.msg);
    }
    /* answers recorded by another node */
    for (struct ask_wait *w = e->asks; w;) {
        if (now < w->next_look) {
            w = w->next;
            continue;
        }
        w->next_look = now + ASK_LOOK_MS;
        _cleanup_(store_question_release) struct store_question q = {0};
        if (store_question_get(e->st, w->question, &q, &err) == 0 && q.answered_at) {
            deliver(e, &q); /* frees w, and any other call held for q */
            w = e->asks;
            continue;
        }
        w = w->next;
    }
}

void run_questions_end(struct run *r)
{
    struct runs *e = r->e;
    struct err err = {0};
    _cleanup_(store_question_release) struct store_question q = {0};
    if (store_question_open(e->st, r->id, false, &q, &err) == 0)
        record_answer(e, q.id, "", "ended", &err);
    for (struct ask_wait **pp = &e->asks; *pp;) {
        struct ask_wait *w = *pp;
        if (strcmp(w->run_id, r->id) != 0) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        fail_call(w->cb, w->ctx, -ECANCELED, "run '%.64s' has ended", r->id);
        free(w);
    }
}

bool run_plan_approved(struct run *r, char *why, size_t cap)
{
    struct err err = {0};
    _cleanup_(store_question_release) struct store_question q = {0};
    int rc = store_question_last_plan(r->e->st, r->id, &q, &err);
    if (rc < 0) {
        snprintf(why, cap, "its agent never submitted a plan (run_task plan_first)");
        return false;
    }
    if (!q.answered_at || strcmp(q.answered_by, "ended") == 0) {
        snprintf(why, cap, "its plan was still waiting for approval");
        return false;
    }
    if (strcmp(q.answered_by, "timeout") == 0) {
        snprintf(why, cap, "its plan was not approved within %ld minutes", wait_minutes(&q));
        return false;
    }
    return true;
}

void runs_asks_release(struct runs *e)
{
    while (e->asks) {
        struct ask_wait *w = e->asks;
        e->asks = w->next;
        fail_call(w->cb, w->ctx, -ESHUTDOWN, "the server is stopping; ask again to keep waiting");
        free(w);
    }
}

json_t *runs_question_json(struct store *st, const char *run_id)
{
    struct err err = {0};
    _cleanup_(store_question_release) struct store_question q = {0};
    if (store_question_open(st, run_id, false, &q, &err) < 0)
        return NULL;
    char asked[32], until[32];
    time_format_rfc3339(q.asked_at, asked);
    time_format_rfc3339(q.deadline_at, until);
    json_t *choices = q.choices ? json_loads(q.choices, 0, NULL) : NULL;
    return json_pack("{s:s, s:s, s:s, s:o, s:s, s:s, s:s}", "id", q.id, "kind", q.kind, "text",
                     q.text, "choices", choices ? choices : json_array(), "asked_at", asked,
                     "answer_by", until, "how",
                     is_plan(&q) ? "approve with answer_run {run_id} (answer: the changes to "
                                   "make, or nothing to approve it as written), or on the run's "
                                   "page"
                                 : "answer with answer_run {run_id, answer}, or on the run's "
                                   "page");
}

json_t *runs_question_elicit_schema(const char *kind)
{
    if (strcmp(kind, RUNS_ASK_PLAN) == 0)
        return json_pack("{s:s, s:{s:{s:s, s:s, s:s, s:i}}}", "type", "object", "properties",
                         "changes", "type", "string", "title", "Changes to the plan", "description",
                         "Leave empty to approve the plan as written; anything here approves it "
                         "with these changes",
                         "maxLength", RUNS_ANSWER_MAX);
    return json_pack("{s:s, s:{s:{s:s, s:s, s:i, s:i}}, s:[s]}", "type", "object", "properties",
                     "answer", "type", "string", "title", "Your answer", "minLength", 1,
                     "maxLength", RUNS_ANSWER_MAX, "required", "answer");
}

const char *runs_question_elicit_answer(const char *kind, const json_t *content)
{
    const char *a = json_string_value(
        json_object_get(content, strcmp(kind, RUNS_ASK_PLAN) == 0 ? "changes" : "answer"));
    return a ? a : "";
}

char *runs_question_message(const char *kind, const char *text, const char *choices_json)
{
    json_t *choices = choices_json ? json_loads(choices_json, 0, NULL) : NULL;
    struct buf b;
    buf_init(&b, 256);
    buf_printf(&b, "%s\n\n%s",
               strcmp(kind, RUNS_ASK_PLAN) == 0 ? "The run's agent asks you to approve its plan:"
                                                : "The run's agent asks:",
               text);
    size_t i;
    json_t *c;
    json_array_foreach(choices, i, c)
        buf_printf(&b, "%s%s", i ? " | " : "\n\nChoices: ", json_string_value(c));
    json_decref(choices);
    return buf_steal(&b, NULL);
}

int runs_run_sandbox(struct runs *e, const char *user_id, const char *run_id, char sbx_id[64],
                     char session_id[64])
{
    struct run *r = runs_find(e, run_id);
    if (!r || !r->sbx || r->ph_final || strcmp(r->user_id, user_id) != 0)
        return -ENOENT;
    snprintf(sbx_id, 64, "%s", sandbox_id(r->sbx));
    snprintf(session_id, 64, "%s", r->session_id);
    return 0;
}

void runs_note(struct runs *e, const char *run_id, const char *type, const char *summary,
               json_t *raw)
{
    struct run *r = runs_find(e, run_id);
    if (r)
        run_server_event(r, type, summary, raw);
    else
        json_decref(raw);
}

void runs_set_previews(struct runs *e, runs_previews_fn fn, void *ctx)
{
    e->previews = fn;
    e->previews_ctx = ctx;
}

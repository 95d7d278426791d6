#pragma once
/* What every agent's event parser shares (opencode_events.c, codex_events.c): a line of JSON read
 * tolerantly, values read whatever their type, capped copies and one-line summaries as struct
 * agent_event wants them (agent.h). Pure functions; each returned string is malloc'd. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "runs/agent.h"

/* Each piece of a summary is cut to this many bytes before its whitespace is collapsed: plenty
 * for a 200-byte line, and a megabyte-long command costs no more than a short one. */
#define AGENT_PIECE_MAX 1024
/* The part of a summary kept for a tool's status, as in " (error)". */
#define AGENT_STATUS_MAX 32

/* A line of an agent's output as JSON, or NULL. What an agent can legitimately print and jansson
 * will not read (lone UTF-16 surrogate escapes, bytes that are not UTF-8, numbers beyond int64)
 * is read as U+FFFD or as a double rather than losing the line. */
json_t *agent_json_load(const char *line, size_t len);

/* A parser's start: ev cleared, the line read as a JSON object (NULL when it is not one: the
 * line is refused), its "type" (NULL and 0 when it has none) in *type and *tn and copied into
 * ev->type. The object is the caller's, and *type lives as long as it. */
json_t *agent_event_begin(struct agent_event *ev, const char *line, size_t len, const char **type,
                          size_t *tn);
/* A parser's end: every event has a summary, its type when there is nothing better. Returns 0. */
int agent_event_end(struct agent_event *ev);

/* The string at key (its length in *n), NULL when missing or not a string. */
const char *agent_str(const json_t *o, const char *key, size_t *n);
/* The same, also NULL when it is only whitespace. */
const char *agent_text(const json_t *o, const char *key, size_t *n);
/* The number at key, 0 when missing, not a number, not finite or beyond 2^53. */
double agent_num(const json_t *o, const char *key);
/* The number at key as a count: 0 when not positive. */
int64_t agent_count(const json_t *o, const char *key);
/* Whether s (n bytes, may be NULL) is lit. */
bool agent_str_is(const char *s, size_t n, const char *lit);
/* Whether n bytes of s are all ASCII whitespace. */
bool agent_blank(const char *s, size_t n);

/* A copy of n bytes of UTF-8 (NULs allowed) with NULs as U+FFFD, cut to cap bytes on a character
 * boundary (*truncated set then). */
char *agent_capped(const char *s, size_t n, size_t cap, bool *truncated);
/* A message from a JSON value: a string as it is, anything else but null as compact JSON; NULL
 * for none. Capped as agent_capped. */
char *agent_message(const json_t *v, size_t cap, bool *truncated);
/* Narrow s to its first line that is not blank. */
void agent_first_line(const char **s, size_t *n);
/* Narrow a path to its last component, or leave it whole when that is empty ("/"). */
void agent_basename(const char **s, size_t *n);
/* s as one line: valid UTF-8, whitespace and control runs collapsed to one space, trimmed, at
 * most limit bytes (limit >= 3), ending in "…" when it was cut (or cut says it was before). */
char *agent_squash(const char *s, size_t n, bool cut, size_t limit);

/* A summary built in pieces (each cut to AGENT_PIECE_MAX), then squashed to AGENT_SUMMARY_MAX
 * bytes with suffix (short, already one line) kept whole after whatever was cut. Zero it to
 * start. */
struct agent_summary {
    struct buf raw;
    bool cut; /* a piece was cut before squashing */
};
void agent_sum_add(struct agent_summary *s, const char *p, size_t n);
void agent_sum_puts(struct agent_summary *s, const char *p);
char *agent_sum_finish(struct agent_summary *s, const char *suffix);

/* A block of the model's text or thinking (o.text, ev->kind already set): its first line as the
 * summary (returned), and for AGENT_EV_TEXT the whole text, capped, as ev->text. */
char *agent_text_event(struct agent_event *ev, const json_t *o);

/* An agent's session id into out, only when it is 1-127 bytes of printable ASCII without spaces
 * (a cut or mangled id would continue the wrong session); else out is left as it is. */
void agent_copy_session(char out[128], const char *s, size_t n);
/* A name (an event's type, a tool's) into out (cap bytes), cut to cap - 1 bytes, bytes outside
 * printable ASCII as '?'. out is left as it is for NULL. */
void agent_copy_name(char *out, size_t cap, const char *s, size_t n);

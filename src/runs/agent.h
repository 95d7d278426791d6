#pragma once
/* Agent adapters: how to start a coding agent and how to read its event stream. This is the
 * reading side: an agent prints one JSON object per line on stdout, and its adapter's parser
 * turns each line into an agent_event, a small agent-neutral record that the run engine stores
 * and shows in timelines. Parsers are pure functions, safe from any thread; each event owns its
 * strings. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum agent_event_kind {
    AGENT_EV_STEP_START,  /* the model starts a turn */
    AGENT_EV_TOOL_USE,    /* a tool call finished (completed or failed) */
    AGENT_EV_STEP_FINISH, /* a turn ended, with its token counts and cost */
    AGENT_EV_TEXT,        /* a finished block of the model's text */
    AGENT_EV_REASONING,   /* a finished thinking block (OpenCode prints these with --thinking) */
    AGENT_EV_ERROR,       /* the session failed (provider error after retries, context full) */
    AGENT_EV_OTHER,       /* a JSON object of any other type */
};

#define AGENT_SUMMARY_MAX 200      /* bytes, "…" included */
#define AGENT_TEXT_MAX (64 * 1024) /* bytes */
#define AGENT_ERROR_MAX (4 * 1024) /* bytes */

struct agent_event {
    enum agent_event_kind kind;
    /* The event's "type" as the agent wrote it, cut to 31 bytes; bytes outside printable ASCII
     * become '?'. "" when absent or not a string. */
    char type[32];
    /* "timestamp" in milliseconds since the epoch; 0 when absent or not a number. */
    int64_t time_ms;
    /* The agent's own session id ("sessionID"), kept only when it is 1-127 bytes of printable
     * ASCII without spaces (a cut or mangled id would continue the wrong session); else "". */
    char session[128];
    /* One line for timelines: at most AGENT_SUMMARY_MAX bytes of valid UTF-8 without control
     * characters (whitespace runs collapse to one space), ending in "…" when something was cut.
     * Never NULL after a successful parse. Examples: "write hello.txt", "bash: Commit",
     * "bash: Commit (exit 128)" (OpenCode counts a failed command as completed), "read
     * missing.txt (error)", the first line of a text, "APIError 401: invalid x-api-key". */
    char *summary;
    /* AGENT_EV_TEXT: the full text, valid UTF-8 (NULs become U+FFFD), cut at AGENT_TEXT_MAX on a
     * character boundary; never NULL for that kind. Other kinds: NULL. */
    char *text;
    /* AGENT_EV_ERROR: the error message (OpenCode's error.data.message, else error.name); a
     * tool_use whose status is "error": the tool's error. Valid UTF-8, cut at AGENT_ERROR_MAX;
     * never NULL for those two. Otherwise NULL. */
    char *error;
    /* text or error was cut to its cap */
    bool truncated;
    /* AGENT_EV_TOOL_USE whose state.status is "error" */
    bool tool_failed;
    /* AGENT_EV_TOOL_USE: the tool's name as the agent gave it ("bash", "edit"), cut to 31 bytes,
     * bytes outside printable ASCII as '?'; "" when absent. */
    char tool[32];
    /* AGENT_EV_TOOL_USE: what the call worked on, as one line like summary: a command's first
     * line, a file's path as given, a search pattern, a URL; NULL when the call names none. */
    char *target;
    /* AGENT_EV_TOOL_USE of a command that completed with a non-zero exit status: that status;
     * otherwise 0. */
    int exit_status;
    /* AGENT_EV_STEP_FINISH: tokens as the provider counted them, so they add up to what the
     * proxy meters. OpenCode splits the provider's counts, so input_tokens = tokens.input +
     * tokens.cache.read + tokens.cache.write and output_tokens = tokens.output +
     * tokens.reasoning. Never negative; 0 for other kinds. */
    int64_t input_tokens, output_tokens;
    /* AGENT_EV_STEP_FINISH: the step's cost in USD as the agent estimated it, >= 0 */
    double cost;
};

/* Parse one line of OpenCode's `run --format json` output (a trailing newline is allowed).
 * Returns 0 and fills ev, or -EINVAL when the line is not a JSON object (ev left cleared). ev is
 * overwritten without being freed: clear it with agent_event_clear before reusing it. Lone
 * UTF-16 surrogate escapes and invalid UTF-8, which a strict JSON reader refuses, are read as
 * U+FFFD rather than losing the event. */
int opencode_parse_event(const char *line, size_t len, struct agent_event *ev);

/* Parse one line of Codex's `exec --json` output, as opencode_parse_event does OpenCode's (the
 * same contract). The thread's id (thread.started) is the session; a finished command, file
 * change, MCP or web search call is a tool use; the model's message a text; turn.completed a
 * step's end with its tokens (the thread's totals: codex_parse_line makes them the step's own);
 * only turn.failed is an error (a top-level "error" line is a notice, or repeats the failure
 * turn.failed tells). */
int codex_parse_event(const char *line, size_t len, struct agent_event *ev);

/* Free what an event owns and zero it. Accepts a zeroed or already cleared event. */
void agent_event_clear(struct agent_event *ev);

/* The type a timeline shows for ev: its kind's name ("step_start", "tool_use", "step_finish",
 * "text", "reasoning", "error"), the same for every agent, or for AGENT_EV_OTHER the type the
 * agent wrote. */
const char *agent_event_type(const struct agent_event *ev);
/* The kind whose name agent_event_type gives as type; AGENT_EV_OTHER for any other type. */
enum agent_event_kind agent_event_kind_of(const char *type);

/* --- agents whose lines are read with what came before (Claude Code) --- */

#define AGENT_LINE_EVENTS 4 /* events one line may become */
#define AGENT_CALLS_MAX 32  /* tool calls remembered until their results come */

/* What a parser keeps between the lines of one run's output, for an agent that prints a turn's
 * start and a tool's call apart from what ends them. Zero it to start; agent_reader_clear frees
 * it. It lives only in memory: after a restart a result whose call came before reads as a call
 * of an unknown tool, and the turn under way counts once more. */
struct agent_reader {
    char turn[64]; /* the model's message the last line belonged to */
    struct agent_call {
        char id[64];
        char tool[32];
        char *target; /* NULL: the call names none */
    } calls[AGENT_CALLS_MAX];
    unsigned next; /* the slot the next call takes, the oldest one's */
    /* For an agent that reports its conversation's token totals (Codex): the totals so far, so
     * that each step's end counts only its own. A run continuing a conversation starts them at
     * the totals its last run reported. */
    int64_t total_in, total_out;
};
void agent_reader_clear(struct agent_reader *rd);

/* Parse one line of Claude Code's `-p --output-format stream-json --verbose` output into
 * AGENT_LINE_EVENTS events at most, with what rd remembers of the lines before. Returns how many
 * (at least 1), or -EINVAL when the line is not a JSON object (evs left cleared). Each event keeps
 * opencode_parse_event's promises. A model message that is not the last line's begins a step; a
 * text or thinking block is a text or reasoning event; a tool call is remembered, and its result
 * is the tool use, with the call's tool and target, "Exit code N" as a command's exit status, and
 * any other error as the call's failure; the result line is the run's end: its tokens and cost
 * as a step's end, or an error when it says the run failed. */
int claude_parse_line(struct agent_reader *rd, const char *line, size_t len,
                      struct agent_event evs[AGENT_LINE_EVENTS]);

/* codex_parse_event with rd: a step's end counts the tokens since the totals rd holds (Codex
 * reports its thread's totals), which it then holds. Returns 1, or -EINVAL. */
int codex_parse_line(struct agent_reader *rd, const char *line, size_t len,
                     struct agent_event evs[AGENT_LINE_EVENTS]);
/* The token totals a line of Codex's output reports (turn.completed), into *in and *out: true
 * when it is such a line. */
bool codex_line_totals(const char *line, size_t len, int64_t *in, int64_t *out);

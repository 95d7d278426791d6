#pragma once
/* A repository's .devcontainer/devcontainer.json as a run's setup: the part of the Dev Container
 * specification (containers.dev) that applies to a sandbox the run did not build. Its
 * environment (containerEnv, then remoteEnv) and its three creation-time lifecycle commands
 * (onCreateCommand, updateContentCommand, postCreateCommand, in that order) become one POSIX sh
 * script; every other key present is named in a note ("skipped: image (...)") for the run's
 * timeline, never silently dropped. initializeCommand runs on the host in the specification: it
 * is only ever named, never run.
 *
 * A pure leaf: no I/O, no store, no loop; text in, a plan and a script out. Every function is
 * safe from any thread. Unit-tested in tests/unit/test_devcontainer.c (which runs the script
 * with /bin/sh) and fuzzed in tests/fuzz/fuzz_devcontainer.c. */

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

#define DEVCONTAINER_INPUT_MAX (64 * 1024)  /* bytes of devcontainer.json */
#define DEVCONTAINER_ENV_MAX 64             /* entries of containerEnv and of remoteEnv, each */
#define DEVCONTAINER_COMMANDS_MAX 16        /* entries of one lifecycle command's object form */
#define DEVCONTAINER_ARGS_MAX 64            /* elements of one command's array form */
#define DEVCONTAINER_STRING_MAX 8192        /* bytes of a command, an argument or a value */
#define DEVCONTAINER_NAME_MAX 128           /* bytes of a variable's or an object entry's name */
#define DEVCONTAINER_TOTAL_MAX (256 * 1024) /* bytes of all the words, once substituted */
#define DEVCONTAINER_NOTES_MAX 24           /* notes kept (the last says how many more) */
#define DEVCONTAINER_WORKSPACE_MAX 1024     /* bytes of the workspace's path */

/* The lifecycle stages that apply, in the order they run. */
enum devcontainer_stage {
    DEVCONTAINER_ON_CREATE,
    DEVCONTAINER_UPDATE_CONTENT,
    DEVCONTAINER_POST_CREATE,
    DEVCONTAINER_STAGES,
};

/* A string of the file once substituted: text as a person reads it (a ${containerEnv:NAME}
 * left as written, for it has its value only in the sandbox), sh the same as one shell word
 * that expands such references when the script runs. */
struct devcontainer_word {
    char *text;
    char *sh;
};

/* One command: a string (run by /bin/sh -c) or an array (run as its argv, no shell). */
struct devcontainer_command {
    char *name; /* the entry's name in an object form, else NULL */
    bool shell; /* the string form: argv[0] is the shell command */
    struct devcontainer_word *argv;
    size_t argc; /* 1 for the string form; the array's length for the array form */
};

/* A stage's commands: none (absent), one (the string or array form) or those of the object
 * form, run in parallel (parallel is set even when the object has one entry). */
struct devcontainer_step {
    struct devcontainer_command *cmds;
    size_t n;
    bool parallel;
};

/* One variable set (value non-NULL) or, for a remoteEnv entry that is null, unset. */
struct devcontainer_env {
    char *name;
    struct devcontainer_word *value; /* NULL: unset */
};

struct devcontainer_plan {
    struct devcontainer_env *env; /* containerEnv's entries, then remoteEnv's, in file order */
    size_t nenv;
    struct devcontainer_step steps[DEVCONTAINER_STAGES];
    /* What the file asks that is not done here, one short line each for a person reading the
     * run's timeline ("skipped: forwardPorts (ports are not forwarded)"); at most
     * DEVCONTAINER_NOTES_MAX, the last then saying how many more there were. */
    char **notes;
    size_t nnotes;
    char *workspace;
    /* the defaults of ${containerEnv:NAME:default}, which the script sets first */
    char **defaults;
    size_t ndefaults;
};

/* The key a stage is written as in devcontainer.json ("onCreateCommand", ...). */
const char *devcontainer_stage_name(enum devcontainer_stage s);

/* Strip JSON with comments (the format of devcontainer.json) down to JSON: each // and block
 * comment outside strings becomes spaces (its newlines kept, so that line numbers stay true) and
 * each comma that only whitespace and comments separate from a closing ] or } becomes a space.
 * Strings are copied as they are, escapes included. out has room for len bytes and is written
 * len bytes (not terminated). A comma alone in its brackets or after another ("[,]") is left for
 * the parser to refuse. 0, or -EINVAL with the line of an unterminated block comment. */
int devcontainer_strip(const char *in, size_t len, char *out, struct err *err);

/* The plan of the devcontainer.json text (len bytes, at most DEVCONTAINER_INPUT_MAX) for the
 * workspace at the absolute path workspace (the run's directory in the sandbox, which the
 * commands run in and ${containerWorkspaceFolder} names). Substitutions:
 * - ${containerWorkspaceFolder} and ${containerWorkspaceFolderBasename}: the workspace;
 * - ${containerEnv:NAME} (and ${containerEnv:NAME:default}, the default when NAME is unset):
 *   NAME's value in the sandbox at the time the script reaches the word (the sandbox's
 *   environment with containerEnv then remoteEnv exported in order);
 * - ${localWorkspaceFolder} and ${localWorkspaceFolderBasename}: the workspace too, with a note
 *   (there is no host folder); ${localEnv:NAME[:default]}: the default or "", with a note (the
 *   server's environment is never passed); ${devcontainerId}: "", with a note;
 * - anything else is left as written.
 * Refused (-EINVAL, err saying what and where; -EMSGSIZE for a cap): text that is not JSON
 * once stripped ("line 3, column 5: ..."), a top level that is not an object, an env whose
 * names are not shell names (or begin with "smcp_", the script's own) or whose values are not
 * strings (remoteEnv's may be null), a command that is not a string, an array of strings or an
 * object of those, an array form whose program is empty or begins with '-', control characters
 * in an object entry's name, and anything past a DEVCONTAINER_*_MAX. An empty array form is a
 * command that does nothing (argc 0). On success *ret is the plan (devcontainer_plan_free); on
 * failure *ret is untouched. */
int devcontainer_parse(const char *text, size_t len, const char *workspace,
                       struct devcontainer_plan **ret, struct err *err);
void devcontainer_plan_free(struct devcontainer_plan *p);

/* The plan as one POSIX sh script (malloc'd) for /bin/sh -c in the sandbox. It cds to the
 * workspace (exit 1 if it cannot), exports the env (and unsets remoteEnv's nulls), then runs the
 * stages in order, stdin from /dev/null: a string form by /bin/sh -c, an array form as its argv
 * (exec'd from PATH, no shell, no builtins), an object form's entries all at once, waiting for
 * every one. The first stage with a failing command is the last to run.
 *
 * Stdout carries only the script's own lines (the commands' stdout goes to stderr with their
 * stderr), each "smcp-devcontainer-" and a word:
 *   smcp-devcontainer-stage STAGE                  a stage begins
 *   smcp-devcontainer-failed STAGE INDEX STATUS[ NAME]
 *                                                  a command of it failed
 * STAGE is the stage's key, INDEX the command's place in its step (0 for the string and array
 * forms, the entry's place in file order for the object form), STATUS its exit status (decimal,
 * 128+N for signal N, 127 for a program not found) and NAME, after one space to the end of the
 * line, the entry's name in the object form. Every failed command of a parallel stage has its
 * line, in INDEX order. Exit status: 0 when every stage succeeded, else the first failed line's
 * STATUS. */
char *devcontainer_script(const struct devcontainer_plan *p);

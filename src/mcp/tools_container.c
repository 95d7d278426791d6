/* container_*: the caller's own Linux sandbox (or a run session's, with session_id). Every tool
 * first acquires the sandbox (starting it when it is stopped), then runs a command or a file
 * operation in it, and answers when that finishes. This file holds the job every call runs in,
 * the acquisition and the dispatch once the sandbox is up, container_initialize and
 * container_ping, and the schemas and registration of the family; the command is in
 * tools_container_exec.c, the file operations in tools_container_files.c. */
#include "mcp/tools_container.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

void container_job_free(struct job *j)
{
    json_decref(j->args);
    free(j->command);
    free(j->cwd);
    for (size_t i = 0; j->env && j->env[i]; i++)
        free(j->env[i]);
    free(j->env);
    free(j->stdin_data);
    free(j->data);
    free(j->res.out);
    free(j->res.err);
    for (int i = 0; i < 2; i++) {
        free(j->saved[i].path);
        free(j->saved[i].error);
    }
    free(j);
}

void container_job_end(struct job *j)
{
    if (j->sbx)
        sandbox_release(j->sbx);
    container_job_free(j);
}

static void on_cancel(struct mcp_call *call, void *ctx)
{
    struct job *j = ctx;
    j->cancelled = true;
    if (j->exec)
        sandbox_exec_kill(j->exec);
    if (j->waiter) {
        sandbox_acquire_cancel(j->waiter);
        j->waiter = NULL;
        mcp_call_tool_fail(j->call, MCP_TOOL_CANCELLED, "cancelled");
        container_job_end(j);
    }
}

/* --- dispatch once the sandbox is up --- */

static void on_ready(void *ctx, struct sandbox *sbx, const struct err *err)
{
    struct job *j = ctx;
    j->waiter = NULL;
    if (err) {
        mcp_call_tool_err(j->call, err);
        container_job_free(j);
        return;
    }
    j->sbx = sbx;
    if (j->cancelled) {
        mcp_call_tool_fail(j->call, MCP_TOOL_CANCELLED, "cancelled");
        container_job_end(j);
        return;
    }
    struct err e = {0};
    switch (j->op) {
    case OP_INIT: {
        json_t *d = sandbox_describe(sbx);
        const char *note = json_string_value(json_object_get(d, "template_note"));
        bool warm = json_is_true(json_object_get(d, "warm"));
        char *text = xasprintf("sandbox %s started fresh %s %lld ms (template %s)%s%s",
                               sandbox_id(sbx), warm ? "from the warm pool; its start took" : "in",
                               (long long)json_integer_value(json_object_get(d, "start_ms")),
                               json_string_value(json_object_get(d, "template")),
                               note ? "\n\n" : "", note ? note : "");
        mcp_call_tool_result(j->call, json_pack("[{s:s, s:s}]", "type", "text", "text", text), d,
                             false);
        free(text);
        container_job_end(j);
        return;
    }
    case OP_PING:
    case OP_EXEC: {
        struct sandbox_exec_opts o = {
            .command = j->op == OP_PING ? ":" : j->command,
            .cwd = j->cwd,
            .env = (const char *const *)j->env,
            .stdin_data = j->stdin_data,
            .stdin_len = j->stdin_len,
            .timeout_ms = j->op == OP_PING ? 10000 : j->timeout_ms,
        };
        j->exec = sandbox_exec_start(sbx, &o, j->op == OP_EXEC ? container_exec_output : NULL,
                                     container_exec_done, j, &e);
        if (!j->exec) {
            mcp_call_tool_err(j->call, &e);
            container_job_end(j);
        }
        return;
    }
    case OP_PREVIEW: container_preview_ready(j); return;
    default:
        if (sandbox_fs(sbx, &j->req, container_fs_done, j, &e) < 0) {
            mcp_call_tool_err(j->call, &e);
            container_job_end(j);
        }
        return;
    }
}

void container_job_start(struct job *j)
{
    const struct mcp_principal *who = mcp_call_principal(j->call);
    struct sandbox_acquire_opts o = {
        .user_id = who->user_id,
        .session_id = container_str_arg(j->args, "session_id"),
        .fresh = j->op == OP_INIT,
    };
    mcp_call_on_cancel(j->call, on_cancel, j);
    /* on_ready may run (and free j) before this returns; then no waiter comes back */
    struct sandbox_waiter *w = sandbox_acquire(j->t->mgr, &o, on_ready, j);
    if (w)
        j->waiter = w;
}

struct job *container_job_new(struct tools_container *t, struct mcp_call *call, const json_t *args,
                              enum op op)
{
    if (!t->mgr) {
        mcp_call_tool_fail(call, MCP_TOOL_UNAVAILABLE,
                           "sandboxes are not available on this server: %s", t->unavailable);
        return NULL;
    }
    struct job *j = xcalloc(1, sizeof(*j));
    j->t = t;
    j->call = call;
    j->op = op;
    j->args = json_incref((json_t *)args);
    j->t0 = time_mono_ms();
    return j;
}

/* --- tools --- */

static void tool_initialize(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct job *j = container_job_new(ctx, call, args, OP_INIT);
    if (j)
        container_job_start(j);
}

static void tool_ping(struct mcp_call *call, const json_t *args, void *ctx)
{
    struct job *j = container_job_new(ctx, call, args, OP_PING);
    if (j)
        container_job_start(j);
}

/* --- schemas and registration --- */

/* The JSON Schema text of the tools, one property a line (clang-format would scatter them).
 * Descriptions are written for a model that has never seen this server; those with a limit the
 * operator configures are made in tools_container_register. */
/* clang-format off */
#define SESSION_PROP                                                                               \
    "\"session_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"                        \
    "\"description\":\"Work in the sandbox of this run session (the session_id run_task "          \
    "returned) instead of your own\"}"
#define PATH_PROP(desc)                                                                            \
    "\"path\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,\"description\":\"" desc "\"}"
/* Output schemas: every field a success gives, and the ones it always gives. */
#define OUTPUT(props, req) "{\"type\":\"object\",\"properties\":{" props "},\"required\":[" req "]}"
#define NULLABLE(type) "{\"anyOf\":[{\"type\":\"" type "\"},{\"type\":\"null\"}]}"
#define SANDBOX_ID_OUT "\"sandbox_id\":{\"type\":\"string\",\"description\":\"The sandbox used\"}"

static const char session_only_schema[] =
    "{\"type\":\"object\",\"properties\":{" SESSION_PROP "},\"additionalProperties\":false}";

/* container_initialize and container_ping: sandbox_describe() */
#define SANDBOX_OUT                                                                                \
    SANDBOX_ID_OUT ","                                                                             \
    "\"template\":{\"type\":\"string\",\"description\":\"The root file system it runs on: "          \
        "debian (the default toolset) or host\"},"                                                  \
    "\"template_note\":{\"type\":\"string\",\"description\":\"When the sandbox is not on the "       \
        "default template: why (being built, failed) and how to move onto it\"},"                  \
    "\"cgroup\":{\"type\":\"string\"},"                                                            \
    "\"limits\":{\"type\":\"object\",\"description\":\"memory_bytes, processes, disk_bytes, "      \
        "tmp_bytes, and cpus when capped\"},"                                                      \
    "\"started_at\":{\"type\":\"string\"},"                                                        \
    "\"uptime_ms\":{\"type\":\"integer\"},"                                                        \
    "\"start_ms\":{\"type\":\"integer\",\"description\":\"How long its last start took\"},"        \
    "\"warm\":{\"type\":\"boolean\",\"description\":\"Taken from the warm pool: started before "    \
        "the call, never used by anyone\"}"

static const char initialize_output[] = OUTPUT(SANDBOX_OUT, "\"sandbox_id\"");

static const char ping_output[] = OUTPUT(
    SANDBOX_OUT ","
    "\"up\":{\"type\":\"boolean\"},"
    "\"memory_bytes\":{\"type\":\"integer\",\"description\":\"Memory in use\"},"
    "\"processes\":{\"type\":\"integer\"},"
    "\"answer_ms\":{\"type\":\"integer\"}",
    "\"sandbox_id\",\"up\"");

static char *exec_schema(const struct sandbox_config *c)
{
    char def[32], max[32];
    format_span_ms(c->exec_timeout_ms, def);
    format_span_ms(c->exec_timeout_max, max);
    return xasprintf("{\"type\":\"object\",\"properties\":{"
        "\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":%d,"
            "\"description\":\"Shell command line, run as /bin/sh -c COMMAND (pipes, && and "
            "redirections work)\"},"
        "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":%llu,"
            "\"description\":\"Kill the command and everything it started after this many "
            "milliseconds (default %llu, that is %s; at most %s)\"},"
        "\"cwd\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,"
            "\"description\":\"Working directory; relative paths are under /workspace (the "
            "default)\"},"
        "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
            "\"description\":\"Extra environment variables for this command, {NAME: value}\"},"
        "\"stdin\":{\"type\":\"string\","
            "\"description\":\"Text fed to the command's standard input (default: none)\"},"
        "\"args\":{\"type\":\"object\",\"properties\":{"
                "\"args\":{\"type\":\"string\",\"description\":\"Shell command line\"},"
                "\"timeout\":{\"type\":\"integer\",\"minimum\":1,"
                    "\"description\":\"Timeout in milliseconds\"}},"
            "\"required\":[\"args\"],"
            "\"description\":\"The same as command and timeout_ms, in the form the Cloudflare "
            "container server takes; give either this or command\"},"
        SESSION_PROP
        "},\"additionalProperties\":false}",
        COMMAND_MAX_BYTES, (unsigned long long)c->exec_timeout_max,
        (unsigned long long)c->exec_timeout_ms, def, max);
}

static const char exec_output[] = OUTPUT(
    "\"exit_code\":{\"type\":\"integer\","
        "\"description\":\"The command's exit status (-1 when a signal ended it)\"},"
    "\"signal\":" NULLABLE("integer") ","
    "\"timed_out\":{\"type\":\"boolean\",\"description\":\"Killed for running past timeout_ms\"},"
    "\"stdout\":{\"type\":\"string\"},"
    "\"stderr\":{\"type\":\"string\"},"
    "\"stdout_truncated\":{\"type\":\"boolean\","
        "\"description\":\"stdout was longer than the cap: its middle is left out\"},"
    "\"stderr_truncated\":{\"type\":\"boolean\"},"
    "\"truncated\":{\"type\":\"boolean\",\"description\":\"Either stream was cut\"},"
    "\"stdout_bytes\":{\"type\":\"integer\","
        "\"description\":\"All the bytes written to stdout, kept or not\"},"
    "\"stderr_bytes\":{\"type\":\"integer\"},"
    "\"duration_ms\":{\"type\":\"integer\"},"
    SANDBOX_ID_OUT ","
    "\"stdout_file\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],"
        "\"description\":\"Where the sandbox keeps stdout when this reply leaves part of it out "
        "(read it with container_file_read)\"},"
    "\"stdout_file_offset\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}],"
        "\"description\":\"Offset in stdout_file where the part left out begins\"},"
    "\"stderr_file\":" NULLABLE("string") ","
    "\"stderr_file_offset\":" NULLABLE("integer") ","
    "\"note\":{\"type\":\"string\",\"description\":\"Why the command may have failed when "
        "the sandbox is the cause (its disk stopped taking writes)\"}",
    "\"exit_code\",\"timed_out\",\"stdout\",\"stderr\",\"duration_ms\"");

static char *write_schema(size_t file_max)
{
    return xasprintf("{\"type\":\"object\",\"properties\":{"
        PATH_PROP("File path; relative paths are under /workspace") ","
        "\"content\":{\"type\":\"string\",\"description\":\"The file's content: text, or base64 "
            "when encoding is base64; at most %zu bytes (decoded) a call: write larger files "
            "in pieces with append\"},"
        "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"],"
            "\"description\":\"utf8 (the default) for text, base64 for any bytes\"},"
        "\"append\":{\"type\":\"boolean\",\"description\":\"Add content at the end of the file "
            "instead of replacing it (default false)\"},"
        "\"mode\":{\"anyOf\":[{\"type\":\"string\",\"minLength\":1,\"maxLength\":5},"
                "{\"type\":\"integer\",\"minimum\":0,\"maximum\":4095}],"
            "\"description\":\"Permission bits in octal, like \\\"0755\\\" for a program "
            "(default: the file's own, 0644 for a new file)\"},"
        SESSION_PROP
        "},\"required\":[\"path\",\"content\"],\"additionalProperties\":false}", file_max);
}

static const char write_output[] = OUTPUT(
    "\"path\":{\"type\":\"string\",\"description\":\"The absolute path written\"},"
    "\"bytes_written\":{\"type\":\"integer\"},"
    "\"size\":{\"type\":\"integer\",\"description\":\"The file's size after the write\"},"
    "\"created\":{\"type\":\"boolean\",\"description\":\"The file did not exist before\"},"
    SANDBOX_ID_OUT,
    "\"path\",\"bytes_written\"");

#define ENTRIES_OUT                                                                                \
    "\"entries\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"              \
        "\"name\":{\"type\":\"string\"},"                                                          \
        "\"type\":{\"type\":\"string\",\"enum\":[\"file\",\"directory\",\"symlink\",\"other\"]},"  \
        "\"size\":{\"type\":\"integer\"},"                                                         \
        "\"mtime\":{\"type\":\"string\"},"                                                         \
        "\"mode\":{\"type\":\"string\",\"description\":\"Permission bits in octal\"}}}},"          \
    "\"count\":{\"type\":\"integer\"}"

static char *read_schema(size_t read_max)
{
    return xasprintf("{\"type\":\"object\",\"properties\":{"
        PATH_PROP("File or directory path; relative paths are under /workspace") ","
        "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"Byte offset to start "
            "at (default 0); a read that stops before the end gives the offset to continue from "
            "as next_offset. Past 0, an image comes back as bytes (a base64 blob)\"},"
        "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":%zu,"
            "\"description\":\"Most bytes to return (default and largest %zu). Given, an image "
            "comes back as bytes (a base64 blob), not as an image\"},"
        SESSION_PROP
        "},\"required\":[\"path\"],\"additionalProperties\":false}", read_max, read_max);
}

static const char read_output[] = OUTPUT(
    "\"type\":{\"type\":\"string\",\"enum\":[\"file\",\"directory\"]},"
    "\"path\":{\"type\":\"string\",\"description\":\"The absolute path read\"},"
    "\"size\":{\"type\":\"integer\",\"description\":\"The whole file's size\"},"
    "\"offset\":{\"type\":\"integer\"},"
    "\"bytes\":{\"type\":\"integer\",\"description\":\"Bytes returned from offset on\"},"
    "\"truncated\":{\"type\":\"boolean\",\"description\":\"More follows (for a directory: "
        "more entries than listed)\"},"
    "\"next_offset\":{\"type\":\"integer\",\"description\":\"The offset to continue from\"},"
    "\"eof\":{\"type\":\"boolean\",\"description\":\"The read reached the end of the file\"},"
    "\"binary\":{\"type\":\"boolean\","
        "\"description\":\"Not text: the content is a base64 blob, or an image\"},"
    "\"image\":{\"type\":\"boolean\","
        "\"description\":\"The content is the whole file as an image (type image, its base64 "
        "data there and not here) of mime_type\"},"
    "\"mime_type\":{\"type\":\"string\"},"
    ENTRIES_OUT ","
    SANDBOX_ID_OUT,
    "\"type\",\"path\"");

static const char list_schema[] = "{\"type\":\"object\",\"properties\":{"
    PATH_PROP("Directory to list (default /workspace)") ","
    "\"recursive\":{\"type\":\"boolean\","
        "\"description\":\"Descend into subdirectories (default false)\"},"
    "\"max_entries\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,"
        "\"description\":\"Most entries to return (default 1000)\"},"
    SESSION_PROP
    "},\"additionalProperties\":false}";

static const char list_output[] = OUTPUT(
    "\"path\":{\"type\":\"string\"},"
    ENTRIES_OUT ","
    "\"truncated\":{\"type\":\"boolean\",\"description\":\"There were more than max_entries\"},"
    SANDBOX_ID_OUT,
    "\"path\",\"entries\"");

static const char delete_schema[] = "{\"type\":\"object\",\"properties\":{"
    PATH_PROP("File or directory to delete; relative paths are under /workspace") ","
    "\"recursive\":{\"type\":\"boolean\",\"description\":\"Delete a directory and everything "
        "in it (default false: a directory must be empty)\"},"
    SESSION_PROP
    "},\"required\":[\"path\"],\"additionalProperties\":false}";

static const char delete_output[] = OUTPUT(
    "\"path\":{\"type\":\"string\"},"
    "\"deleted\":{\"type\":\"integer\",\"description\":\"Files and directories removed\"},"
    SANDBOX_ID_OUT,
    "\"path\",\"deleted\"");
/* clang-format on */

/* What a sandbox may reach, in a sentence, for container_exec's description. */
static const char *network_sentence(const char *mode)
{
    if (strcmp(mode, "public") == 0)
        return "Network: any public internet host, through the HTTP(S) proxy that HTTP_PROXY and "
               "HTTPS_PROXY name (curl, pip, npm, git and apt use it); private and loopback "
               "addresses are refused, and raw TCP or UDP has no way out.";
    if (strcmp(mode, "allowlist") == 0)
        return "Network: only the hosts on this server's allow list (by default package "
               "registries such as pypi.org, registry.npmjs.org, deb.debian.org and crates.io, "
               "and git hosts such as github.com), through the HTTP(S) proxy that HTTP_PROXY and "
               "HTTPS_PROXY name (curl, pip, npm, git and apt use it); other hosts are refused "
               "with 403 and the reason, and raw TCP or UDP has no way out.";
    return "The sandbox has no network: connections to other hosts are refused.";
}

static const char preview_desc[] =
    "Give a port your sandbox serves (a web app, an API, a dev server with its WebSockets) a URL "
    "a person can open in a browser: PUBLIC_URL/preview/..., a capability URL (whoever has it "
    "may use it) that expires (ttl_minutes, default 60, at most 1440) or is revoked. The app "
    "must listen in the sandbox (0.0.0.0 or 127.0.0.1) on that port. Its pages run in a "
    "sandboxed origin of their own: cookies of the app are not kept, so log-ins by cookie do not "
    "work there. At most 4 open per sandbox. Without port or revoke it lists those open.";
/* clang-format off */
static const char preview_schema[] = "{\"type\":\"object\",\"properties\":{"
    "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535,"
        "\"description\":\"The port the app listens on in the sandbox\"},"
    "\"ttl_minutes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1440,"
        "\"description\":\"How long the URL works (default 60)\"},"
    "\"revoke\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
        "\"description\":\"End this preview (its id) instead: its URL answers no more\"},"
    SESSION_PROP "},\"additionalProperties\":false}";
static const char preview_output[] = OUTPUT(
    SANDBOX_ID_OUT ","
    "\"opened\":{\"type\":\"object\",\"description\":\"The preview opened: id, url, port, "
        "expires_at\"},"
    "\"previews\":{\"type\":\"array\",\"items\":{\"type\":\"object\"},"
        "\"description\":\"The sandbox's previews open now\"},"
    "\"revoked\":{\"type\":\"string\"}",
    "\"sandbox_id\",\"previews\"");
/* clang-format on */

static struct tools_container the_tools;

void tools_container_register(struct mcp_server *srv, struct sandbox_manager *mgr,
                              const char *unavailable, const struct tools_facts *f)
{
    const struct sandbox_config *cfg = f->sandbox;
    struct tools_container *t = &the_tools;
    t->mgr = mgr;
    free(t->unavailable);
    t->unavailable = xstrdup(unavailable ? unavailable : "unknown reason");
    t->timeout_max = cfg->exec_timeout_max;
    t->output_bytes = cfg->output_bytes;
    t->file_max_bytes = cfg->file_max_bytes;
    /* a read's bytes go out as base64 at worst (4 for 3), beside a few KiB of the rest */
    size_t budget = mcp_server_reply_budget(srv);
    size_t room = budget > REPLY_SLACK + 3072 ? budget - REPLY_SLACK - 3072 : 0;
    t->read_max = room / 4 * 3;
    if (t->read_max > FSOP_READ_MAX_BYTES)
        t->read_max = FSOP_READ_MAX_BYTES;
    if (t->read_max < 1024)
        t->read_max = 1024;
    /* built once per server start; the strings must outlive the server, as registered tools do */
    static char *exec_in, *exec_desc, *write_in, *write_desc, *read_in, *read_desc, *init_desc;
    free(exec_in);
    free(exec_desc);
    free(write_in);
    free(write_desc);
    free(read_in);
    free(read_desc);
    free(init_desc);
    char def[32], max[32], out[32], shown[32], read_max[32], image[32], idle[32];
    format_span_ms(cfg->exec_timeout_ms, def);
    format_span_ms(cfg->exec_timeout_max, max);
    format_bytes(cfg->output_bytes / 2, out);
    format_bytes((budget - REPLY_SLACK) / 2, shown);
    format_bytes(t->read_max, read_max);
    format_bytes(container_image_max(t), image);
    format_span_ms(cfg->idle_ms, idle);
    exec_in = exec_schema(cfg);
    exec_desc = xasprintf(
        "Run a shell command line (/bin/sh -c) in your own isolated Linux sandbox, as root "
        "inside it, in /workspace unless cwd says otherwise. Files, installed packages and "
        "background processes (nohup cmd > log 2>&1 &) stay between calls until "
        "container_initialize; the sandbox stops after %s idle and starts again with its files "
        "on the next call. The command is killed with everything it started after timeout_ms "
        "(default %s, at most %s). Returns stdout, stderr, the exit code or signal, and whether "
        "it timed out. Each stream keeps its first and last %s. A reply shows about %s of "
        "output: when there is more, it shows the head and tail and keeps the whole output in a "
        "file under " EXEC_SAVE_DIR ", whose path and the container_file_read offset to "
        "continue from are in the reply (stdout_file, stdout_file_offset). %s With a progress "
        "token, output arrives as progress notifications while the command runs.",
        idle, def, max, out, shown, network_sentence(f->network));
    write_in = write_schema(cfg->file_max_bytes);
    write_desc = xasprintf(
        "Write a file in your sandbox (relative paths are under /workspace), creating missing "
        "parent directories; with append, add to its end instead of replacing it. Content is "
        "UTF-8 text, or any bytes with encoding base64. At most %zu bytes of content a call (what "
        "one "
        "request carries as base64): write larger files in pieces, the first replacing the file "
        "and the others with append. The file is replaced atomically: a failed write leaves it "
        "as it was.",
        cfg->file_max_bytes);
    read_in = read_schema(t->read_max);
    read_desc = xasprintf(
        "Read a file from your sandbox (relative paths are under /workspace). A PNG, JPEG, GIF "
        "or WebP image comes back as an image you see, whole, up to %s (save plots as PNG to "
        "look at them; a larger image is refused: save it smaller). Valid UTF-8 text (SVG "
        "included) comes back as a text resource, anything else as a base64 blob, with its "
        "mimeType; a directory gives its listing. At most %s a call: a read that stops before "
        "the end says so and gives the offset to continue from (next_offset; eof is true at the "
        "end). With max_bytes, or an offset past 0, an image comes back as bytes like any other "
        "file.",
        image, read_max);
    init_desc = xasprintf(
        "Start your sandbox over from a clean state: every process in it is killed and all its "
        "files, /workspace included, are deleted. You do not need this to begin: the other "
        "container_* tools start the sandbox by themselves and its files stay between calls "
        "(it stops after %s idle and starts again with them). Returns the sandbox id, its "
        "template, limits and how long the start took.",
        idle);
    /* Whether a command may reach hosts outside the sandbox depends on the egress mode. */
    unsigned exec_world = strcmp(f->network, "none") != 0 ? MCP_TOOL_OPEN_WORLD : 0;
    const struct mcp_tool_def defs[] = {
        {"container_initialize", "Start a fresh sandbox", init_desc, session_only_schema,
         initialize_output, MCP_TOOL_DESTRUCTIVE | MCP_TOOL_IDEMPOTENT, tool_initialize, t},
        {"container_ping", "Check the sandbox",
         "Check that your sandbox is up and answers (starting it when it is stopped): uptime, "
         "memory in use and the number of processes.",
         session_only_schema, ping_output, MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT, tool_ping, t},
        {"container_exec", "Run a command", exec_desc, exec_in, exec_output,
         MCP_TOOL_DESTRUCTIVE | exec_world, container_tool_exec, t},
        {"container_file_write", "Write a file", write_desc, write_in, write_output,
         MCP_TOOL_DESTRUCTIVE, container_tool_file_write, t},
        {"container_file_read", "Read a file", read_desc, read_in, read_output,
         MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT, container_tool_file_read, t},
        {"container_files_list", "List files",
         "List a directory of your sandbox (default /workspace): name, type, size, mtime and "
         "mode of each entry, descending into subdirectories with recursive. At most "
         "max_entries entries (default 1000); truncated says when there were more.",
         list_schema, list_output, MCP_TOOL_READ_ONLY | MCP_TOOL_IDEMPOTENT,
         container_tool_files_list, t},
        {"container_file_delete", "Delete a file",
         "Delete a file, or with recursive a directory and everything in it, in your sandbox "
         "(relative paths are under /workspace). A missing path is an error (not_found); / and "
         "/workspace themselves are refused.",
         delete_schema, delete_output, MCP_TOOL_DESTRUCTIVE, container_tool_file_delete, t},
        {"container_preview", "Preview a port", preview_desc, preview_schema, preview_output,
         MCP_TOOL_OPEN_WORLD, container_tool_preview, t},
    };
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++)
        mcp_server_add_tool(srv, &defs[i]);
}

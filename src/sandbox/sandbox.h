#pragma once
/* Sandboxes: long-lived Linux namespace sandboxes that many exec and file calls enter.
 *
 * A sandbox is an init process (PID 1 of its own pid namespace) holding user, mount, pid, net,
 * uts, ipc and cgroup namespaces over an overlayfs root. The server keeps a pidfd on it; an exec
 * is sent to the init over its control socket and the init forks the command, which inherits
 * the namespaces, cgroup and policy; a file operation forks a worker that joins the sandbox with
 * setns. Sandboxes are not children that die with the server: a restarted server re-adopts them
 * from the database.
 *
 * Everything here runs on the main loop thread; slow work (mkfs, mounts, waiting for a command)
 * happens in child processes whose pipes the loop watches. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "sandbox/layer.h"

struct config;
struct store;
struct fsop_request;
struct sandbox;
struct sandbox_manager;

#define SANDBOX_AGENTS_MAX 4 /* agents' directories mounted into sandboxes */

struct sandbox_config {
    const char *data_dir;        /* sandboxes/ and templates/ live below it */
    const char *template_name;   /* "debian" (default) or "host" */
    const char *template_dir;    /* where templates live; NULL: DATA_DIR/templates */
    const char *template_mirror; /* Debian mirror for the debian template; NULL: the host's */
    uint64_t template_retry_ms;  /* first wait after a failed template build (then doubling) */
    uint64_t memory_bytes;       /* cgroup memory limit */
    uint64_t pids_max;           /* cgroup pids limit */
    double cpus;                 /* CPU quota in cores, 0 = fair share only */
    uint64_t disk_bytes;         /* writable layer + workspace size, 0 = no limit (plain dirs) */
    uint64_t tmp_bytes;          /* /tmp tmpfs size */
    unsigned max_running;        /* capacity: running sandboxes at once */
    unsigned max_running_user;   /* running sandboxes of one user at once */
    unsigned pool_size;          /* warm pool: unowned sandboxes kept running for new callers */
    unsigned standby;            /* idle-stopped sandboxes started again ahead of their owner */
    uint64_t disk_user_bytes;    /* disk images one user's sandboxes may commit, 0 = no limit */
    uint64_t disk_total_bytes;   /* images all sandboxes may commit; 0 = what the disk has free */
    bool disk_strict;            /* admit only while every running image could grow to its size
                                    (SANDBOX_DISK_ADMIT=strict); else by what images use (thin) */
    uint64_t disk_reserve_bytes; /* free space kept on the data dir's filesystem; 0 = 5% of it,
                                    from 256 MiB to 4 GiB (diskwatch.c) */
    uint64_t idle_ms;            /* stop after this long without calls or processes */
    uint32_t uid_base;           /* start of the host ids for sandboxes: each sandbox maps root to
                                    65536 ids of its own, uid_base + slot * 65536 (slot >= 1) */
    uint32_t uid_ranges;         /* how many such ranges (slots) there are */
    uint64_t exec_timeout_ms;    /* default exec timeout */
    uint64_t exec_timeout_max;   /* largest timeout a client may ask for */
    size_t output_bytes;         /* default cap per output stream */
    size_t file_max_bytes;       /* largest content of one file write */
    /* The coding agents' programs: each host directory mounted read-only at /opt/agents/<name> */
    struct sandbox_agent_dir {
        const char *name, *dir;
    } agents[SANDBOX_AGENTS_MAX];
    size_t nagents;
    const char *cgroup_root; /* where the cgroup hierarchies are mounted; NULL: /sys/fs/cgroup */
    bool allow_unlimited;    /* start sandboxes even without cgroup memory and pids limits */
};

/* Fill cfg with the built-in defaults (data_dir left NULL). */
void sandbox_config_defaults(struct sandbox_config *cfg);
/* Fill sc from the configuration table (SANDBOX_*, EXEC_*: sizes in MiB, times in seconds, as
 * operators write them) over the defaults, data_dir from DATA_DIR. Strings point into cfg, which
 * must outlive sc. Returns 0, or -EINVAL with err naming the key (sandbox/config.c). */
int sandbox_config_load(const struct config *cfg, struct sandbox_config *sc, struct err *err);

/* Create the manager: detect cgroups, build or load the template, prepare the seccomp filter and
 * re-adopt sandboxes recorded in the store. cfg strings
 * are copied. Returns 0 or a negative errno with err set. */
int sandbox_manager_new(const struct sandbox_config *cfg, struct store *store,
                        struct sandbox_manager **ret, struct err *err);
/* Free the manager. Running sandboxes keep running (a later server re-adopts them). */
void sandbox_manager_free(struct sandbox_manager *m);
/* Stop every running sandbox of this data directory and unmount every disk image, so the
 * directory can be removed. Returns how many sandboxes were stopped. */
int sandbox_manager_stop_all(struct sandbox_manager *m);

struct sandbox_info {
    const char *id, *user_id, *session_id;
    int pid;
    bool running;
};
/* Call fn for each sandbox the manager knows to be running. */
void sandbox_manager_list(struct sandbox_manager *m,
                          void (*fn)(const struct sandbox_info *i, void *ctx), void *ctx);

/* The sandbox id while it is not stopped: 0 and *out (valid until the manager next runs), or
 * -ENOENT. */
int sandbox_manager_find(struct sandbox_manager *m, const char *id, struct sandbox_info *out);

/* Each running sandbox has listening sockets on 127.0.0.1 inside its network namespace, which
 * the server serves from its own loop, so it knows the sandbox of every connection on them: the
 * proxy listener (LLM and git proxy) and the egress proxy (the sandbox's only way out). The
 * manager opens every registered port when a sandbox starts (or is re-adopted), all in one
 * helper run, and calls the port's fn with its listening socket (which fn then owns), and with
 * fd -1 when the sandbox stops. Registering a port opens it in the sandboxes already running.
 * At most SANDBOX_LISTENERS_MAX ports; main loop only. */
#define SANDBOX_PROXY_PORT 8788
#define SANDBOX_EGRESS_PORT 3128
#define SANDBOX_LISTENERS_MAX 4
typedef void (*sandbox_listener_fn)(void *ctx, const char *sandbox_id, int fd);
void sandbox_manager_set_listener(struct sandbox_manager *m, uint16_t port, sandbox_listener_fn fn,
                                  void *ctx);

/* The server's own directory in every sandbox, mounted read-only: the files set with
 * sandbox_manager_set_file, written when a sandbox starts, and SANDBOX_SERVER_SOCKET, a Unix
 * socket the manager listens on (on the host side, in the sandbox's directory) and hands to the
 * fn of sandbox_manager_set_socket as a port's listener is (fd -1 when the sandbox stops). A
 * socket needs no network: tools that can speak HTTP over one (gh) reach the server by it, and
 * it takes no port a sandbox's own server might want. Sandboxes made before this directory
 * existed have none. Main loop only. */
#define SANDBOX_SERVER_DIR "/opt/sandbox-mcp"
#define SANDBOX_SERVER_SOCKET SANDBOX_SERVER_DIR "/api.sock"
#define SANDBOX_SERVER_FILES_MAX 4
void sandbox_manager_set_file(struct sandbox_manager *m, const char *name, const char *content);
void sandbox_manager_set_socket(struct sandbox_manager *m, sandbox_listener_fn fn, void *ctx);

/* Stop the sandbox of (user_id, session_id) and remove its files (retention of finished
 * sessions). Returns 0, -ENOENT when it has none, -EBUSY while it is held. */
int sandbox_manager_discard(struct sandbox_manager *m, const char *user_id, const char *session_id,
                            struct err *err);

/* With SANDBOX_TEMPLATE=debian, take care of that template for the server (template_keeper.c):
 * new sandboxes get the tree in place at once if there is one, while a build child verifies it
 * (its tools run) or builds it when it is missing, outdated or broken, retried with backoff; until
 * it is usable they start on the host template. Loop thread; a no-op for "host". */
void sandbox_manager_keep_template(struct sandbox_manager *m);

/* What a sandbox on template sandbox_template should tell its user about the configured one
 * (being built, failed, ready to move onto), or NULL when nothing; the caller frees it. */
char *sandbox_manager_template_note(const struct sandbox_manager *m, const char *sandbox_template);

/* Serve from a warm pool of cfg.pool_size started, unowned sandboxes (pool.c): a user's first
 * call, a container_initialize and a run's new session take one instead of starting one, and the
 * pool is refilled in the background within SANDBOX_MAX_RUNNING. First stops what an earlier
 * server left behind: sandbox cgroups no row knows, and unowned sandboxes. Loop thread; for the
 * server only (not the command line's managers, which may run beside it). */
void sandbox_manager_keep_pool(struct sandbox_manager *m);
/* Prepare up to count of the pooled sandboxes for runs: once one has started, it is handed over
 * early (its network namespace and listeners made, confined, as pool_take would) and fn starts
 * in it what a run's new session would otherwise wait for (the runs engine: its agent), true when
 * it did. It is given to no one until fn's caller says it is ready (sandbox_pool_ready). Such a
 * sandbox goes only to a run (sandbox_acquire_opts.for_run), first; one prepared more than
 * SANDBOX_POOL_PREPARED_MAX_MS ago and not taken is replaced. Loop thread. */
#define SANDBOX_POOL_PREPARED_MAX_MS (12LL * 3600 * 1000)
typedef bool (*sandbox_pool_prepare_fn)(void *ctx, struct sandbox *sbx);
void sandbox_manager_pool_prepare(struct sandbox_manager *m, unsigned count,
                                  sandbox_pool_prepare_fn fn, void *ctx);
/* Keep one pooled sandbox started on each of the environment snapshots envs (n of them, at most
 * SANDBOX_POOL_ENVS_MAX), beside the pool's and prepared for runs like them (always, whatever
 * their count), for the next new session whose run starts on that snapshot
 * (sandbox_acquire_opts.env): only such a run takes it. Those kept on other snapshots before are
 * removed. Loop thread. */
#define SANDBOX_POOL_ENVS_MAX 8
void sandbox_pool_keep_envs(struct sandbox_manager *m, const char (*envs)[64], size_t n);
/* The snapshot sbx was started on, or "". */
const char *sandbox_env_of(const struct sandbox *sbx);
/* Why writes in sbx may fail: its image's filesystem went read-only on write errors (the
 * server's disk filled up), or the server's disk is under its reserve (or 64 MiB), or was in the
 * last minute. True with a sentence for the caller in buf; false otherwise. */
bool sandbox_disk_note(const struct sandbox *sbx, char *buf, size_t len);
/* For /healthz (http_server_set_health, ctx the manager): adds "disk" (whether the data dir is
 * under its reserve, sandboxes paused) when disk images are on, and returns whether it is under
 * the reserve. */
bool sandbox_manager_health(void *ctx, json_t *health);
/* The pooled sandbox sandbox_id, being prepared, is ready to be given to a run (ok), or is not
 * and is removed. Unknown or taken sandboxes are ignored. Loop thread. */
void sandbox_pool_ready(struct sandbox_manager *m, const char *sandbox_id, bool ok);
/* Stop and remove what this node keeps of sandboxes another node has taken over (while this
 * one was thought lost): their processes and files; their rows are the other node's. Called at
 * start (by keep_pool) and when the node finds it had been marked lost. */
void sandbox_manager_drop_moved(struct sandbox_manager *m);

/* "v2", "v1" or "none": which cgroup hierarchy limits sandboxes. */
const char *sandbox_manager_cgroup_mode(const struct sandbox_manager *m);

/* --- templates --- */

struct template_build_opts {
    const char *dir;    /* the templates directory (SANDBOX_TEMPLATE_DIR) */
    const char *mirror; /* the Debian mirror, or NULL for the host's apt mirror (else Debian's) */
    bool force;         /* rebuild even when up to date */
    int status_fd;      /* -1, or where to write one line per step for the server */
};

/* Build template `name` into o->dir/<name>. "debian" (root only; needs debootstrap and the
 * network, and takes minutes): a Debian tree made with debootstrap, apt and npm, moved into place
 * only after its tools ran in it. Without force a template of the same recipe that still passes
 * those checks is kept. Waits while another process builds it. Progress and the output of the
 * programs it runs go to stderr; with a status_fd, also lines "verifying", "outdated <why>",
 * "invalid <why>", "waiting <why>", "building <step>", "ready [<what>]", "failed <why>". "host"
 * needs no build: 0, with a note. Blocks; for the command line and the server's build child, not
 * the server's loop. Returns 0, or -EINVAL for an unknown name, or another negative errno, with
 * err set. */
int template_build(const char *name, const struct template_build_opts *o, struct err *err);

/* --- acquiring a sandbox --- */

/* Called once when the sandbox is running (sbx set, err NULL) or could not be started (sbx NULL,
 * err set: -EBUSY when at capacity, -ENOENT when session_id is not the user's). The sandbox is held
 * (not idle-stopped or evicted) until sandbox_release(). */
typedef void (*sandbox_ready_fn)(void *ctx, struct sandbox *sbx, const struct err *err);

struct sandbox_acquire_opts {
    const char *user_id;
    const char *session_id; /* NULL: the user's own sandbox */
    bool fresh;             /* kill, discard the writable layer and workspace, start again */
    bool create;            /* with session_id: create the session's sandbox if it has none */
    const char *env;        /* with create: the environment snapshot (sandbox_snapshot) a new
                               sandbox starts on; NULL/"" for the template alone */
    bool for_run;           /* for a run: a pooled sandbox prepared for runs is taken first
                               (sandbox_manager_pool_prepare) */
};

/* Get the caller's sandbox running, starting it (or restarting it fresh) when needed. cb may run
 * before this returns. Returns a handle to cancel the wait with sandbox_acquire_cancel(), or NULL
 * when cb has already run. */
struct sandbox_waiter;
struct sandbox_waiter *sandbox_acquire(struct sandbox_manager *m,
                                       const struct sandbox_acquire_opts *opts, sandbox_ready_fn cb,
                                       void *ctx);
void sandbox_acquire_cancel(struct sandbox_waiter *w);
/* Drop a hold taken by sandbox_acquire(); the sandbox's idle clock restarts. */
void sandbox_release(struct sandbox *sbx);
/* Hold back the calls that acquire sbx while work after a call's answer goes on in it (a command's
 * output saved into it after its reply, say), so that the next call sees what that work leaves:
 * sandbox_acquire() queues them until as many sandbox_barrier(sbx, false) as (sbx, true) have
 * come. The caller holds sbx meanwhile. */
void sandbox_barrier(struct sandbox *sbx, bool on);

/* --- environment snapshots (env.c) --- */

/* Whether env can name a snapshot: 1 to 63 of [a-z0-9-]. */
bool sandbox_env_name_ok(const char *env);
typedef void (*sandbox_snapshot_fn)(void *ctx, const struct layer_stats *stats,
                                    const struct err *err);
/* Copy sbx's writable layer and workspace into DATA_DIR/envs/<env> (layer_copy: ids moved to the
 * template's range, within lim, which counts both), on a worker thread; cb comes on the loop
 * with what was copied, or why not (nothing is left then). The caller holds sbx until cb, and
 * keeps what runs in it quiet meanwhile (what it writes during the copy may or may not be in
 * it). A sandbox that starts on a snapshot itself is refused (-ENOTSUP): snapshots are one layer
 * above the template. Returns 0, or a negative errno (cb is not called). */
int sandbox_snapshot(struct sandbox *sbx, const char *env, const struct layer_limits *lim,
                     sandbox_snapshot_fn cb, void *ctx, struct err *err);
/* Remove snapshot env from disk (renamed away at once, its files removed on a worker thread);
 * -EBUSY while a sandbox of this node starts on it. */
int sandbox_env_remove(struct sandbox_manager *m, const char *env, struct err *err);
/* Remove what a server that stopped left of snapshots: copies it did not finish (.part) and
 * removals it did not finish (.gone), on the worker thread. At the server's start. */
void sandbox_env_sweep_leftovers(struct sandbox_manager *m);

/* --- facts --- */

/* The template new sandboxes start on: its name, and the tree (which a rebuild replaces). */
const char *sandbox_template_name(const struct sandbox_manager *m);
const char *sandbox_template_tree(const struct sandbox_manager *m);

/* A TCP connection from the server to port on the loopback of running sandbox id of user_id
 * (connect.c): cb(ctx, fd, NULL) on the loop with the connected, non-blocking socket (the
 * caller's to close), or cb(ctx, -1, err) when nothing listens there, the sandbox stopped, or
 * the connection could not be made in 3 s. Port 0: the socket alone, made in the sandbox's
 * network namespace and not connected (blocking; its caller connects it to the sandbox's
 * loopback). Returns a handle for sandbox_connect_cancel, or NULL
 * with err set (the sandbox is not running, or too many connections are being made; cb is not
 * called then). A connection counts as a use of the sandbox. */
typedef void (*sandbox_connect_fn)(void *ctx, int fd, const struct err *err);
struct sandbox_connect;
struct sandbox_connect *sandbox_connect(struct sandbox_manager *m, const char *id,
                                        const char *user_id, uint16_t port, sandbox_connect_fn cb,
                                        void *ctx, struct err *err);
/* cb will not be called; a socket that comes is closed. */
void sandbox_connect_cancel(struct sandbox_connect *c);

const char *sandbox_id(const struct sandbox *sbx);
/* JSON description: id, template, limits, started_at, uptime_ms, cgroup mode, last start ms. */
json_t *sandbox_describe(const struct sandbox *sbx);
/* Memory in use and processes running (0 when unknown); returns 0 or -errno. */
int sandbox_usage(const struct sandbox *sbx, uint64_t *memory_bytes, uint64_t *processes);

/* --- exec --- */

enum sandbox_stream { SANDBOX_STDOUT = 1, SANDBOX_STDERR = 2 };

struct sandbox_exec_opts {
    const char *command;    /* run as /bin/sh -c command */
    const char *cwd;        /* inside the sandbox; NULL = /workspace */
    const char *const *env; /* extra NAME=VALUE entries, NULL-terminated, or NULL */
    const void *stdin_data; /* bytes fed to stdin (then EOF), or NULL for /dev/null */
    size_t stdin_len;
    int stdin_fd;        /* > 0: a host descriptor read as stdin instead (e.g. a file) */
    uint64_t timeout_ms; /* 0 = the configured default */
    size_t output_bytes; /* cap per stream; 0 = the configured default */
};

struct sandbox_exec_result {
    int exit_code; /* -1 when killed by a signal */
    int signal;    /* 0 unless killed by a signal */
    bool timed_out;
    char *out, *err; /* NUL-terminated valid UTF-8 (invalid bytes replaced), owned by result */
    size_t out_len, err_len;
    uint64_t out_total, err_total; /* bytes the command wrote */
    bool out_truncated, err_truncated;
    uint64_t duration_ms;
};

/* Output as it arrives (raw bytes, possibly cut mid-character); may be NULL. */
typedef void (*sandbox_output_fn)(void *ctx, enum sandbox_stream s, const char *data, size_t len);
/* Called once at the end: res on completion (err NULL), or err when the command could not be
 * started (bad cwd, sandbox died). res is valid during the call only; its strings too, unless
 * the callback takes them (leaving NULL in their place: then they are the callback's to free). */
typedef void (*sandbox_exec_done_fn)(void *ctx, struct sandbox_exec_result *res,
                                     const struct err *err);

struct sandbox_exec;
/* Start a command in sbx (which the caller holds). Returns the handle or NULL with err set. */
struct sandbox_exec *sandbox_exec_start(struct sandbox *sbx, const struct sandbox_exec_opts *opts,
                                        sandbox_output_fn on_output, sandbox_exec_done_fn on_done,
                                        void *ctx, struct err *err);
/* Kill the command's process group now; on_done still runs (with signal set). */
void sandbox_exec_kill(struct sandbox_exec *ex);

/* --- processes that outlive the server (agents of runs) --- */

struct sandbox_spawn_opts {
    const char *const *argv; /* absolute program path first; NULL-terminated */
    const char *cwd;         /* inside the sandbox */
    const char *const *env;  /* NAME=VALUE, NULL-terminated: the whole environment */
    int stdin_fd;            /* handed to the process as its stdin */
    /* Host files (opened for appending) that no process of the sandbox ever holds: the process
     * writes its stdout and stderr to memory files, and the sandbox's init copies at most out_max
     * and err_max bytes from them into these files and drops the rest. */
    int out_fd, err_fd;
    uint64_t out_max, err_max;
    /* A host file, empty, for the process's end: when the init has reaped the process and copied
     * the rest of its output, it writes "exit <wait status>\n" there (sandbox_spawn_status). */
    int status_fd;
};
/* Start a process in sbx (which the caller holds) in a session of its own. It belongs to the
 * sandbox, not to this server: it runs on when the server exits, and its output and end are
 * recorded by the sandbox's init whether a server is there or not. Blocks for the init's answer
 * (a fork's time). The descriptors in opts stay the caller's. Returns 0 and its pid inside the
 * sandbox, or a negative errno with err. */
int sandbox_spawn(struct sandbox *sbx, const struct sandbox_spawn_opts *opts, int *pid,
                  struct err *err);
/* Read the end of a spawned process from the text of its status file (len bytes): 1 and its
 * wait status when it is there, 0 when the process has not ended (or the init has not yet
 * finished recording it). */
int sandbox_spawn_status(const char *text, size_t len, int *wait_status);
/* Whether process pid (inside the sandbox) still runs. */
bool sandbox_pid_alive(struct sandbox *sbx, int pid);
/* Kill process group pid (inside the sandbox) with SIGKILL. Returns 0 or -ESRCH. */
int sandbox_kill_group(struct sandbox *sbx, int pid);

/* --- files --- */

/* Called once with the operation's JSON result (see fsops.h; stolen by the callee) or err. */
typedef void (*sandbox_fs_done_fn)(void *ctx, json_t *result, const struct err *err);
/* File operations under way on one sandbox at once; one more is refused with -EBUSY. */
#define SANDBOX_FS_OPS_MAX 32
/* Run a file operation in sbx's file worker, which has joined sbx (so nothing outside its root
 * is reachable). req and the data it points to are copied before this returns. */
int sandbox_fs(struct sandbox *sbx, const struct fsop_request *req, sandbox_fs_done_fn cb,
               void *ctx, struct err *err);

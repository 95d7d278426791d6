#pragma once
/* Shared between the files of src/sandbox. */

#include <h2o.h>
#include <limits.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/err.h"
#include "base/loop.h"
#include "base/proc_watch.h"
#include "sandbox/sandbox.h"

struct store_sandbox;

#define SANDBOX_ID_MAX 48
#define SANDBOX_IDS 65536 /* uids/gids mapped into each sandbox */
/* The init's control socket in the sandbox's directory (helper/init.c has its protocol). An
 * earlier init listened on the older name and took one command per connection; a sandbox of
 * that server is still adopted and served. */
#define SANDBOX_CTL_SOCK "control.sock"
#define SANDBOX_CTL_SOCK_OLD "ctl.sock"

/* --- cgroups (cgroup.c) --- */

enum cgroup_mode { CGROUP_NONE, CGROUP_V1, CGROUP_V2 };

struct cgroup_limits {
    uint64_t memory_bytes;
    uint64_t pids_max;
    double cpus;
};

/* Detect the hierarchy below root (NULL: /sys/fs/cgroup) and prepare the parent group for
 * sandboxes. Usable: v2 with the memory and pids controllers, or v1 with memory and pids (cpu
 * when present). Otherwise the mode is CGROUP_NONE, which the manager refuses unless the
 * operator allows sandboxes without limits. */
enum cgroup_mode cgroup_setup(const char *instance, const char *root);
enum cgroup_mode cgroup_mode(void);
const char *cgroup_mode_name(enum cgroup_mode mode);
/* Create (or reuse) the group `name` and apply limits. */
int cgroup_create(const char *name, const struct cgroup_limits *lim, struct err *err);
/* Files a child writes its pid into to join `name` ("cgroup.procs" per hierarchy), as a list of
 * up to 4 paths into out (each PATH_MAX); returns how many. */
int cgroup_procs_paths(const char *name, char out[][4096], int max);
/* v2: a descriptor of group `name`'s directory, for clone3's CLONE_INTO_CGROUP; -1 otherwise
 * (v1 has no such thing: a process joins by writing its pid, see cgroup_procs_paths). */
int cgroup_open_dir(const char *name);
/* Like fork(), but the child starts in the cgroup whose directory is cgfd (clone3 with
 * CLONE_INTO_CGROUP, v2 only): no migration afterwards, whose wait for an RCU grace period is
 * most of a sandbox start where it happens. Returns as fork() does, -1 with errno ENOSYS,
 * EINVAL, E2BIG, EOPNOTSUPP or EBUSY when the kernel or the group cannot (the caller forks and
 * joins the group the old way then). The child must not use what glibc's fork would have reset
 * (threads, locks held by other threads). */
pid_t proc_fork_into_cgroup(int cgfd);
/* Kill every process in `name` and remove it (best effort; returns 0 when gone). */
int cgroup_destroy(const char *name);
int cgroup_usage(const char *name, uint64_t *memory_bytes, uint64_t *tasks);
/* Freeze or thaw every process of group `name` (v2 cgroup.freeze, v1 freezer): 0, -ENOTSUP
 * without a freezer, or a negative errno. A frozen v1 process killed dies once thawed. */
int cgroup_freeze(const char *name, bool frozen);
/* Remove this instance's (empty) parent group. */
void cgroup_teardown(void);
/* Call fn for each existing sandbox group name. */
void cgroup_list(void (*fn)(const char *name, void *ctx), void *ctx);

/* --- security policy applied to every process that enters a sandbox (policy.c) --- */

/* The two seccomp programs of the sandbox policy for one architecture, loaded in this order:
 * allow, the allow list (libseccomp; EPERM for what is not on it, foreign ABIs kill), then guard
 * (ENOSYS for numbers above max_nr, TIOCSTI refused). max_nr is the highest system call number
 * the allow list knows for the architecture. */
struct policy_filters {
    struct sock_fprog allow;
    struct sock_fprog guard;
    int max_nr;
};
/* Build the programs for arch (an SCMP_ARCH_* value, SCMP_ARCH_NATIVE for this machine) without
 * loading them. On success *ret owns two allocated programs (policy_filters_release); on failure
 * *ret is untouched. Any thread. */
int policy_build(uint32_t arch, struct policy_filters *ret, struct err *err);
void policy_filters_release(struct policy_filters *f);
/* Build the native programs once for policy_apply_child (libseccomp, exported to BPF). Call at
 * start, before any child. */
int policy_init(struct err *err);
/* Called in a forked child that has joined the sandbox user namespace as root: drop capabilities
 * to the sandbox set, set no_new_privs, rlimits and the seccomp filter. Async-signal-safe; returns
 * 0 or -errno. */
int policy_apply_child(void);
/* The seccomp programs policy_init() built, in loading order, for workers that load them
 * themselves: points *filters at them and returns how many (0 before policy_init). */
size_t policy_filters_loaded(const struct sock_fprog **filters);

/* --- template (template.c) --- */

/* Build (or find the cached) template rootfs and the bind mounts that complete it. */
struct template_info {
    char name[32];
    char rootfs[4096];   /* overlay lower dir */
    char binds[8][4096]; /* host dirs bind-mounted read-only at the same path */
    int nbinds;
    int lock; /* "host": its marker (rootfs ".used"), locked shared while in use; else -1 */
};
/* base: the templates directory. "debian" fails with -ENOENT until it is built. "host" also
 * removes older host templates that no server holds and no sandbox may use. */
int template_prepare(const char *base, const char *name, struct template_info *out,
                     struct err *err);
/* When the oldest process in a mount namespace with a sandbox's overlay (of any data dir)
 * started, in epoch seconds; INT64_MAX when there is none. */
int64_t template_oldest_sandbox(void);
/* Remove the host templates of base other than keep (a directory name) that no server holds (an
 * exclusive lock on the marker is granted) and that no running sandbox may be on: the oldest
 * running sandbox (oldest_sandbox) started after the template was last marked used, with a margin,
 * since which template a sandbox mounts cannot be told. Each is moved aside first, so that a server
 * starting meanwhile builds its own. */
void template_prune_hosts(const char *base, const char *keep, int64_t (*oldest_sandbox)(void));
/* A sandbox starts on t: a host template's marker (t->lock) has its time set to now (the marker
 * rather than the tree, which is a mounted overlay's lower layer). */
void template_mark_used(const struct template_info *t);
/* The host template assembled as dir (uid: its owner), which may already be there: a tree
 * another server moved in first is kept, and nothing of this build is left. */
int template_build_host(const char *dir, uid_t uid, struct template_info *out, struct err *err);

/* --- a template build's programs (template_run.c) --- */

#define TEMPLATE_RUN_OUTPUT_MAX 16384

/* One program of a build: argv, and where and how it runs. */
struct template_run {
    const char *const *argv; /* argv[0] is the program's path (inside root when root is set) */
    const char *root;        /* chroot into this tree with /proc and /dev bound, or NULL */
    bool check;              /* the tree read-only, a tmpfs on /tmp, HOME=/tmp */
    const char *prefix;      /* copy output lines to stderr behind this, or NULL to keep them */
    char out[TEMPLATE_RUN_OUTPUT_MAX]; /* with prefix NULL: the start of the output, NUL-terminated
                                        */
    size_t out_len;
    pid_t parent; /* set by template_run() */
};

/* Run r to completion in a private mount namespace (chrooted when r->root is set), with a fixed
 * environment plus the caller's proxy settings. Blocks; for the build process, not the server's
 * loop. 0 when it exited 0, else -EIO (or the errno of pipe, fork, wait) with err naming the
 * program. */
int template_run(struct template_run *r, struct err *err);

/* Kill a build under way (its unfinished tree is removed by the next build). */
void keeper_stop(struct sandbox_manager *m);

/* --- directory trees (tree.c) --- */

typedef int (*tree_fn)(int dirfd, const char *name, const struct stat *st, void *ctx);
/* Call fn for name (below dirfd) and everything under it, directories after their contents,
 * never following symlinks nor entering another filesystem. A missing name is 0; stops at the
 * first error (negative errno). */
int tree_walk(int dirfd, const char *name, tree_fn fn, void *ctx);
/* Remove name and everything under it on its filesystem (a missing name is not an error). */
int tree_remove(int dirfd, const char *name);

/* --- process plumbing (proc.c) --- */

/* Write the whole buffer to fd (child side, async-signal-safe). */
void child_report(int fd, const char *stage, int errnum);
/* Read /proc/<pid>/stat's start time (clock ticks since boot); 0 when the process is gone. */
uint64_t proc_start_time(pid_t pid);
/* pidfd_open(2) wrapper. */
int pidfd_open_pid(pid_t pid);

/* --- the setup child (setup.c) --- */

#define MAX_BINDS 12

/* Everything the setup child needs, computed before the fork. */
struct setup_plan {
    uint32_t uid;        /* the sandbox's host id range starts here (root inside) */
    uint32_t uid_base;   /* where id ranges start: finding an older range of the sandbox's files */
    int userns_fd;       /* the sandbox's user namespace, once made */
    int userns_sync;     /* the namespace maker's end of its socket pair */
    bool userns_as_root; /* make it owned by root (the host refused an unprivileged owner) */
    bool defer_net;      /* pooled: no network namespace, listeners or policy until handed over */
    int park_netns;      /* with defer_net: the empty network namespace it waits in */
    int report_fd;
    int memfd;
    int ctl_fd;    /* the init's control socket, listening */
    int listen_fd; /* where the listeners of the registered ports are sent (SCM_RIGHTS) */
    int nports;
    uint16_t ports[SANDBOX_LISTENERS_MAX];
    bool disk;
    uint64_t disk_bytes;
    char mkfs[64], fsck[64];
    char disk_img[PATH_MAX], disk_mnt[PATH_MAX], dir[PATH_MAX];
    char upper[PATH_MAX], work[PATH_MAX], ws[PATH_MAX], root[PATH_MAX];
    char lower_src[PATH_MAX], lower[PATH_MAX]; /* the template, and where it is idmapped */
    /* An environment snapshot below the sandbox's own layer and workspace ("" for none): its
     * two trees, where they are idmapped, and the workspace overlay's work directory. */
    char env_root_src[PATH_MAX], env_root[PATH_MAX], env_ws_src[PATH_MAX], env_ws[PATH_MAX];
    char ws_work[PATH_MAX], ws_opts[3 * PATH_MAX + 64];
    char overlay_opts[4 * PATH_MAX + 64];
    int nbinds;
    char bind_src[MAX_BINDS][PATH_MAX], bind_dst[MAX_BINDS][PATH_MAX];
    char opt_dir[PATH_MAX];    /* created for the mounts under /opt, "" when there is none */
    char agents_dir[PATH_MAX]; /* opt_dir/agents, where they go */
    char ws_dst[PATH_MAX], tmp_dst[PATH_MAX], dev_dst[PATH_MAX], proc_dst[PATH_MAX];
    char tmp_opts[128], dev_opts[128], pts_opts[128], shm_opts[128];
    int ncg;
    char cg_procs[4][4096];
    char uid_map[64], gid_map[64];
    char mkfs_root_owner[80], size_arg[32];
};

/* The setup child's body, after sandbox_start's fork: builds the sandbox p describes, starts its
 * init and writes "pid N" (or why it failed) to p->report_fd. Never returns. Async-signal-safe:
 * no allocation, no lock, no logging (see setup.c). */
_Noreturn void setup_child(struct setup_plan *p);

/* --- sandboxes and their manager (sandbox.c, manager.c) --- */

enum sandbox_state { SBX_STOPPED, SBX_STARTING, SBX_RUNNING };

struct sandbox_waiter {
    struct sandbox_waiter *next;
    struct sandbox *sbx;
    sandbox_ready_fn cb;
    void *ctx;
};

struct sandbox {
    struct sandbox_manager *m;
    struct sandbox *next; /* in m->all */
    char id[SANDBOX_ID_MAX];
    char user_id[64];
    char session_id[64];
    char template_name[32];
    char dir[4096];   /* DATA_DIR/sandboxes/<id> (host, 0700) */
    char env[64];     /* the environment snapshot it starts on (DATA_DIR/envs/<env>), "" */
    char cgroup[64];  /* cgroup name of the current start */
    uint32_t id_slot; /* host id range: root inside is m->cfg.uid_base + slot * 65536 */
    enum sandbox_state state;
    pid_t init_pid;
    uint64_t init_start;
    int pidfd;
    int fs_sock;             /* the file worker's socket (sandbox_fs), -1 until needed */
    h2o_socket_t *ctl_spare; /* the connection the init kept after the last command, or NULL */
    pid_t fs_pid;
    unsigned fs_ops; /* file operations under way (at most SANDBOX_FS_OPS_MAX) */
    int dirfd;       /* O_PATH of dir: the init's control socket is dirfd/SANDBOX_CTL_SOCK */
    bool ctl_old;    /* adopted with an earlier init's SANDBOX_CTL_SOCK_OLD */
    int listen_rx;   /* during a start: where the setup child sends the listeners */
    int64_t created_at, started_at; /* epoch ms */
    int64_t last_used;              /* monotonic ms */
    int64_t start_t0;               /* monotonic us when the current start began */
    int64_t last_start_ms;          /* how long the last start took */
    unsigned holds;                 /* calls in flight */
    unsigned barriers;              /* sandbox_barrier: new calls wait while not 0 */
    unsigned generation;            /* starts so far, names cgroups */
    bool fresh_pending;             /* wipe before the start that is under way */
    bool retiring;                  /* replaced by a pooled one: being removed, never handed out */
    bool warm;                      /* taken from the pool, not started since */
    bool net_deferred;              /* pooled, not handed over: no network namespace yet */
    bool prepared;                  /* pooled: prepared for a run (pool_prepare), not yet taken */
    bool preparing;                 /* prepared, not yet ready (sandbox_pool_ready): kept back */
    int64_t prepared_at;            /* monotonic ms */
    bool standby;                   /* started again after an idle stop, kept for its owner */
    int64_t standby_at;             /* monotonic ms */
    bool disk_paused;               /* frozen for want of disk (diskwatch.c) */
    bool disk_failed;               /* its image's filesystem went read-only on write errors */
    uint64_t disk_seen;             /* bytes its image held at the watcher's last look */
    struct proc_watch start_watch;
    struct sandbox_waiter *waiters;
};

/* The server's care of the debian template (template_keeper.c). */
enum keeper_state {
    KEEPER_OFF,       /* the configured template is "host" */
    KEEPER_VERIFYING, /* checking the tree in place */
    KEEPER_WAITING,   /* another process builds it */
    KEEPER_BUILDING,  /* a build is under way */
    KEEPER_READY,     /* verified or built */
    KEEPER_RETRY,     /* the last build failed; the next is scheduled */
};

struct template_keeper {
    enum keeper_state state;
    bool usable;       /* the debian tree may be given to new sandboxes */
    unsigned failures; /* failed builds in a row */
    char step[160];    /* what the build is doing */
    char error[512];   /* why the last build failed */
    char built[160];   /* what the last build made, "" when it was verified only */
    int64_t since_ms;  /* epoch ms: when the current attempt began */
    int64_t retry_at;  /* epoch ms: when the next attempt starts (KEEPER_RETRY) */
    pid_t pid;         /* the build child, 0 when none */
    h2o_socket_t *sock;
    char line[600];
    size_t line_len;
    struct loop_timer retry;
};

/* The data dir's filesystem as the watcher last saw it (diskwatch.c). */
struct disk_watch {
    uint64_t avail, reserve; /* bytes free to the server, bytes kept free */
    bool low;                /* under the reserve: starts refused, writers paused */
    unsigned paused;         /* sandboxes paused */
    int64_t trimmed_at;      /* monotonic ms of the last trim of the images */
    int64_t short_at;        /* monotonic ms of the last look that found it under its reserve
                                (or 64 MiB), 0 when none */
};

struct sandbox_manager {
    struct sandbox_config cfg;
    char *data_dir;
    char *template_dir;
    char *template_mirror;
    char *template_name;
    char *agent_names[SANDBOX_AGENTS_MAX], *agent_dirs[SANDBOX_AGENTS_MAX];
    struct store *store;
    struct template_info tmpl;   /* what new starts get */
    struct template_info host;   /* the host template, always prepared */
    struct template_info debian; /* the debian template, when keeper.usable */
    struct template_keeper keeper;
    int init_memfd;        /* sealed, read-only: the sandbox helper (init and enter) */
    bool fork_into_warned; /* clone3 into a v2 group failed once (logged) */
    int devnull;           /* the stdin of commands given none */
    int spare_pipes[4];    /* the next command's stdout and stderr pipes, made ahead, or -1 */
    int park_netns;        /* empty network namespace where pooled sandboxes wait, or -1 */
    char mkfs[64];         /* mkfs.ext4 path, "" when disk limits are off */
    char fsck[64];         /* e2fsck path, beside it */
    struct disk_watch disk;
    struct loop_timer disk_timer;
    struct sandbox *all;
    unsigned running;
    struct loop_timer idle_timer;
    struct loop_timer exec_timer;
    struct sandbox_exec *execs; /* running execs, for deadlines */
    /* The warm pool (pool.c): unowned sandboxes started ahead of any call. */
    bool pool_on;           /* serving (sandbox_manager_keep_pool was called) */
    bool pool_armed;        /* pool_timer is set */
    bool pool_blocked;      /* short for want of disk room (logged once) */
    unsigned pool_failures; /* pool starts that failed in a row */
    int64_t pool_retry_at;  /* monotonic ms: no pool start before this */
    struct loop_timer pool_timer;
    /* sandbox_manager_pool_prepare: how many pooled sandboxes to prepare for runs, and how */
    unsigned pool_prepare_count;
    /* the snapshots a pooled sandbox is kept on each (sandbox_pool_keep_envs) */
    char pool_envs[SANDBOX_POOL_ENVS_MAX][64];
    size_t npool_envs;
    sandbox_pool_prepare_fn pool_prepare_fn;
    void *pool_prepare_ctx;
    struct sandbox_listener_hook {
        uint16_t port;
        sandbox_listener_fn fn;
        void *ctx;
    } listeners[SANDBOX_LISTENERS_MAX];
    int nlisteners;
    struct sandbox_listener_hook socket_hook; /* sandbox_manager_set_socket; fn NULL: none */
    struct {
        char name[64];
        char *content;
    } files[SANDBOX_SERVER_FILES_MAX]; /* sandbox_manager_set_file */
    size_t nfiles;
};

/* Start sbx (state STOPPED), admitted (admit.c: sandbox_admit_start, which sets start_t0): forks
 * the setup child; waiters run when it reports. */
void sandbox_start(struct sandbox *sbx);
/* A start that failed before its fork: log it and finish the waiters with err. */
void sandbox_start_failed(struct sandbox *sbx, const struct err *err);
/* Kill sbx's processes (init first, then its cgroup); files stay. */
void sandbox_stop(struct sandbox *sbx, const char *reason);
/* Discard the writable layer and workspace of a stopped sandbox. */
int sandbox_wipe(struct sandbox *sbx, struct err *err);
/* Whether the init process of a running sbx is still alive. */
bool sandbox_alive(struct sandbox *sbx);
/* Record sbx's state in the store (errors are logged). */
void sandbox_save(struct sandbox *sbx);
/* Finish waiters with sbx (err NULL) or err. */
void sandbox_notify(struct sandbox *sbx, const struct err *err);
/* Open sbx's listeners (every registered port, or only the one at index only >= 0) through the
 * helper and pass each to its hook (listeners.c). */
void sandbox_open_listeners(struct sandbox *sbx, int only);
/* A new sandbox struct for a row of the store, added to m->all. */
struct sandbox *sandbox_alloc(struct sandbox_manager *m, const struct store_sandbox *row);
/* Remove sbx for good: stop it, remove its files, then its row (with its id range), and free it.
 * Only for an unowned sandbox that nobody holds or waits for. */
void sandbox_forget(struct sandbox *sbx, const char *reason);
/* The sandbox of that id that is starting or running, NULL when none (manager.c). */
const struct sandbox *sandbox_find_running(const struct sandbox_manager *m, const char *id);
/* For cgroup_list: stop (kill and remove) sandbox group `name` unless ctx, the manager, knows a
 * running sandbox of that group. */
void sandbox_reap_unknown(const char *name, void *ctx);
/* Whether sbx belongs to nobody: started for the pool, or being removed. */
static inline bool sandbox_unowned(const struct sandbox *sbx)
{
    return sbx->user_id[0] == '\0';
}

/* --- admission (admit.c), decided before sandbox_start --- */

/* Whether sbx may start with its disk image (made now when it has none): what the images of
 * its user hold, and may still grow into while they run, stays within SANDBOX_DISK_PER_USER_MB;
 * what all images hold and the running ones may grow into stays within SANDBOX_DISK_TOTAL_MB,
 * or without it, what the running ones may grow into fits in the filesystem's free space. Idle
 * running sandboxes are stopped (least recently used first) while that makes room. 0; -EBUSY
 * when busy sandboxes ending would make room; -ENOSPC otherwise; err says which. */
int sandbox_disk_admit(struct sandbox_manager *m, const struct sandbox *sbx, struct err *err);
/* Whether user_id may have one more sandbox running (sbx and `replaces` not counted): stops
 * their least recently used idle one when that makes room; -EBUSY with err otherwise. */
int sandbox_user_room(struct sandbox_manager *m, const char *user_id, const struct sandbox *sbx,
                      const struct sandbox *replaces, struct err *err);
/* The disk checks of sandbox_disk_admit, once, without stopping anything; *user_limit tells
 * whether the user's share failed. */
int sandbox_disk_check(struct sandbox_manager *m, const struct sandbox *sbx, bool *user_limit,
                       struct err *err);
/* Whether s is in use: held by a call, not running, or running processes other than its init
 * and a warm agent's (src/sandbox/helper/agent.c). The idle tick leaves a busy one alone. */
bool sandbox_busy(struct sandbox *s);
/* Make room for one more running sandbox of sbx's user: past the user's own limit, stop their
 * least recently used idle one; past the server's, anyone's (a pooled one first). 0, or -EBUSY
 * with err. */
int sandbox_make_room(struct sandbox_manager *m, const struct sandbox *sbx, struct err *err);
/* Start sbx (state STOPPED, its waiters queued): a pending wipe (fresh_pending) first, then
 * sandbox_disk_admit, then sandbox_start. A refusal finishes the waiters as a failed start does
 * (sandbox_start_failed). Loop thread. */
void sandbox_admit_start(struct sandbox *sbx);

/* --- the data dir's disk (diskwatch.c) --- */

/* The free space kept on the data dir's filesystem of fs_bytes: SANDBOX_DISK_RESERVE_MB, else 5%
 * of it from 256 MiB to 4 GiB, at most a tenth of it. */
uint64_t disk_reserve(const struct sandbox_manager *m, uint64_t fs_bytes);
/* Look at the disk and act (see diskwatch.c); disk_watch_start looks now and every second. */
void disk_watch_tick(struct sandbox_manager *m);
void disk_watch_start(struct sandbox_manager *m);
/* Whether the ext4 image at img recorded errors: its superblock's state (offset 58 of the
 * superblock at 1024) has EXT4_ERROR_FS, or its error count (offset 0x194) is not 0. Allocates
 * nothing (the setup child calls it). */
bool sandbox_image_has_errors(const char *img);
/* Thaw a sandbox paused for want of disk (nothing when it is not). */
void sandbox_disk_resume(struct sandbox *s);
/* -ENOSPC with the sentence a paused sandbox's calls are answered with. */
int sandbox_disk_paused_err(const struct sandbox *s, struct err *err);
/* Answer every command in flight in sbx with err now; each goes on and is reaped unseen. */
void exec_answer_now(struct sandbox *sbx, const struct err *err);

/* --- standby (standby.c) --- */

/* A standby sandbox nobody took is stopped for good after this long. */
#define SANDBOX_STANDBY_MAX_MS (60 * 60 * 1000)
/* After sbx was stopped for being idle: start it again in the background and keep it for its
 * owner, when standby is on, the disk is not low, a slot is free and fewer than cfg.standby are
 * kept. */
void standby_after_idle(struct sandbox *sbx);
/* For a call acquiring sbx: 1 when sbx was on standby and is now the caller's running sandbox; 0
 * when it was not on standby, or is no longer (then stopped, or starting: the caller goes on as
 * for a stopped or starting sandbox); -EBUSY with err when its user has no room for it. */
int standby_take(struct sandbox *sbx, struct err *err);
/* The idle tick's share: stop standby sandboxes that died, were not taken in time, or are on an
 * old template. */
void standby_tick(struct sandbox_manager *m);
/* Set the gauges of running sandboxes (standby ones not counted) and standby ones. */
void standby_gauges(const struct sandbox_manager *m);

/* --- the warm pool (pool.c) --- */

/* Hand user_id's session (NULL: their own sandbox) a pooled sandbox that is running, in place of
 * creating one, or in place of `replaces` (a sandbox of theirs that nothing holds, which is
 * then removed by the caller with sandbox_forget). Only one on env (NULL/"": the template alone)
 * is taken. For a run (for_run) one prepared for runs is taken first; for anything else only one
 * that is not (what was started in it is a run's). 1 and *out when one was taken, 0 when the pool
 * has none to give (the caller starts one as before), or a negative errno with err (the user's
 * limits). */
int pool_take(struct sandbox_manager *m, const char *user_id, const char *session_id,
              struct sandbox *replaces, bool for_run, const char *env, struct sandbox **out,
              struct err *err);
/* How many pooled sandboxes on the template the pool is short of. */
unsigned pool_missing(const struct sandbox_manager *m);
/* Fill the pool from the loop soon (after a take, a stop, a failed start's wait). */
void pool_schedule(struct sandbox_manager *m);
/* The idle tick's share: drop pooled sandboxes that died or are on an old template. */
void pool_tick(struct sandbox_manager *m);
/* After a start: pass the listeners the setup child sent on sbx->listen_rx to their hooks (or
 * open them with the helper when it sent none), and close listen_rx (listeners.c). */
void sandbox_take_listeners(struct sandbox *sbx);
/* Hand a pooled sandbox over: its init makes the network namespace, brings loopback up, confines
 * itself and sends the listeners, which go to their hooks. Waits for the init (about 1.5 ms). 0
 * when done or not needed; -errno, and the sandbox is not to be used, when it failed
 * (listeners.c). */
int sandbox_arm(struct sandbox *sbx, struct err *err);
/* Close listen_rx and whatever waits on it (a start that failed). */
void sandbox_drop_listeners(struct sandbox *sbx);
/* The server's directory of sbx (SANDBOX_SERVER_DIR inside), made with the manager's files
 * written into it: its host path into out, for the setup's mount; false when it cannot be made
 * (logged; the sandbox then goes without it) (listeners.c). */
bool sandbox_server_dir(struct sandbox *sbx, char *out, size_t cap);
/* Listen on sbx's SANDBOX_SERVER_SOCKET and hand it to the socket hook, when there is one
 * (listeners.c). */
void sandbox_open_socket(struct sandbox *sbx);
/* A connection to the sandbox's init, on its control socket (exec.c). */
int sandbox_connect_init(struct sandbox *sbx, struct err *err);
/* Start the sandbox helper with argv (argv[0] its role) and fds[i] at descriptor 3 + i and
 * /dev/null as stdio. It runs from the sealed memfd: a fresh static program, nothing of this
 * process's memory. Returns 0 and its pid, or a positive errno (exec.c). */
int sandbox_spawn_helper(struct sandbox_manager *m, const char *const *argv, const int *fds,
                         int nfds, pid_t *pid);
/* Let sbx's file worker go (it leaves once it has read what it was sent); the next file
 * operation starts a new one. */
void sandbox_fs_worker_stop(struct sandbox *sbx);
/* Let go of what exec.c keeps for a running sandbox (its file worker, the connection its init
 * kept after the last command): the sandbox is stopping. */
void sandbox_exec_release(struct sandbox *sbx);
/* Count and kill execs of sbx (exec.c). */
void exec_tick(struct sandbox_manager *m);

#pragma once
/* The store: SQLite (one database file in WAL mode) for one machine, or PostgreSQL shared by
 * several nodes; schema from migrations/ (migrations/postgres/) applied at open. A store handle
 * belongs to one thread (the main loop); every call is short and indexed. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/embedded.h"
#include "base/err.h"
#include "base/seal.h"

struct store;

/* Open the database `where` names, a postgres:// (or postgresql://) URL or else the path of a
 * SQLite file (created if needed), and bring its schema up to date with the embedded
 * migrations. A database whose schema is newer than this binary knows is refused (-EPROTO). On
 * success *ret owns the handle. */
int store_open(const char *where, struct store **ret, struct err *err);
void store_close(struct store *st);
/* Whether where is a PostgreSQL URL. */
bool store_url_is_postgres(const char *where);
/* Whether st is a database other nodes may share (PostgreSQL). */
bool store_is_shared(const struct store *st);
/* A file database keeps a reserve file beside it (<path>-reserve, 16 MiB), removed the first
 * time a write finds the disk full so that the store can record what failed then; this makes it
 * again when the disk has room (nothing for a database server). */
void store_keep_reserve(struct store *st);

/* Apply the migrations in list (name order, "NNNN_name.sql") above the current user_version,
 * each in its own transaction. Exposed for tests. Returns the resulting version or < 0. */
int store_migrate_db(void *sqlite_db, const struct embedded_file *list, struct err *err);

/* A number that changes whenever another connection (another process: the CLI; on PostgreSQL,
 * another node) has changed the database since the last call: what this process caches from it
 * is still true while it stays the same. On PostgreSQL it also moves with this process's own
 * writes. -1 on error. */
int64_t store_data_version(struct store *st);

/* This node's id (store_open leaves it ""): the sandboxes of this node's are those the store's
 * sandbox calls list, and new ones are recorded as its. */
void store_set_node(struct store *st, const char *node_id);
const char *store_node(const struct store *st);

/* --- nodes (nodes.c) --- */

struct store_node {
    char id[64];
    char url[256];
    int64_t max_sandboxes, max_runs;
    int64_t started_at, heartbeat_at;
    char state[16]; /* up, lost, stopped */
};

/* Record node n as up (heartbeat now), whatever it was. */
int store_node_register(struct store *st, const struct store_node *n, struct err *err);
/* Move this node's heartbeat to now, and make it up again if another node had marked it lost
 * meanwhile (1 then, else 0), or < 0. */
int store_node_heartbeat(struct store *st, int64_t now, struct err *err);
/* Record this node as stopped (a clean shutdown: nothing of it is lost). */
int store_node_stop(struct store *st, struct err *err);
/* Find node id; -ENOENT when none. */
int store_node_get(struct store *st, const char *id, struct store_node *out, struct err *err);
/* Call fn for each node, in id order. */
int store_node_list(struct store *st, void (*fn)(const struct store_node *n, void *ctx), void *ctx,
                    struct err *err);
/* Mark lost the nodes other than this one, up or stopped, whose heartbeat is older than before
 * (a node stopped for longer than that is not coming back soon); fn
 * is called for each one this call marked (another node may have been first). Their sandboxes
 * stay theirs until a user's call takes one over (store_sandbox_take_over). */
int store_node_sweep(struct store *st, int64_t before,
                     void (*fn)(const struct store_node *n, void *ctx), void *ctx, struct err *err);

/* Highest migration number built in. */
int store_schema_version_known(void);

struct store_user {
    char id[64];
    char name[128];
    int64_t created_at;
};

#define STORE_USER_NAME_MAX 64

/* Validate a user name: 1..64 of [A-Za-z0-9._-], starting with a letter or digit. */
bool store_user_name_valid(const char *name);

/* Create a user; -EEXIST if the name is taken, -EINVAL if it is not valid. */
int store_user_add(struct store *st, const char *name, struct store_user *out, struct err *err);
/* Find a user by name; -ENOENT if none. */
int store_user_find(struct store *st, const char *name, struct store_user *out, struct err *err);
/* Call fn for each user in name order. */
int store_user_list(struct store *st, void (*fn)(const struct store_user *u, void *ctx), void *ctx,
                    struct err *err);
/* Number of users, or < 0. */
int store_user_count(struct store *st, struct err *err);

struct store_token {
    char id[64];
    char user_id[64];
    char user_name[128];
    char prefix[32];
    char label[128];
    int64_t created_at;
    int64_t last_used_at; /* 0 = never */
    int64_t revoked_at;   /* 0 = active */
};

/* A token as shown once to its owner: "smcp_" + 43 base64url characters. */
#define STORE_TOKEN_LEN 48

/* Create a token for the user; the plaintext goes to plain[STORE_TOKEN_LEN + 1] and only its
 * SHA-256 is stored. */
int store_token_create(struct store *st, const char *user_id, const char *label,
                       char plain[STORE_TOKEN_LEN + 1], struct store_token *out, struct err *err);

/* Call fn for each token (of user_name, or all when NULL), newest first. */
int store_token_list(struct store *st, const char *user_name,
                     void (*fn)(const struct store_token *t, void *ctx), void *ctx,
                     struct err *err);

/* Revoke a token by id; -ENOENT if no such active token. */
int store_token_revoke(struct store *st, const char *token_id, struct err *err);

/* Resolve a presented token to its user; -ENOENT when unknown or revoked. Records last use
 * (at most once a minute per token, so the hot path rarely writes). */
int store_token_authenticate(struct store *st, const char *plain, size_t len,
                             struct store_user *out, struct err *err);

/* --- passwords, one-time sign-in links and browser sessions (accounts.c) --- */

/* Set the password of user_name to hash, a crypto_pwhash_str() string made by password_hash()
 * (NULL or "" removes the password). It signs nobody out: a caller changing a password also
 * calls store_web_session_delete_user(). -ENOENT when there is no such user. */
int store_user_set_password(struct store *st, const char *user_name, const char *hash,
                            struct err *err);

/* Replace user_name's password hash old with new, the same password hashed with other limits
 * (a sign-in that found old made with limits since changed). The password's time stays. Only
 * while old is still the hash: a password set meanwhile is kept, and 0 is returned with nothing
 * changed (*replaced false). */
int store_user_rehash_password(struct store *st, const char *user_name, const char *old,
                               const char *new, bool *replaced, struct err *err);

/* The user named user_name into *out and its password hash into hash[cap] ("" when it has
 * none). -ENOENT when there is no such user; -EOVERFLOW when the hash does not fit in cap (128,
 * crypto_pwhash_STRBYTES, always does). */
int store_user_password(struct store *st, const char *user_name, struct store_user *out, char *hash,
                        size_t cap, struct err *err);

/* A sign-in link's token: 43 base64url characters (32 random bytes), no prefix. It is the `t`
 * of PUBLIC_URL/login/link?t=TOKEN, and the one-time code of the sign-in form. */
#define STORE_LINK_LEN 43
#define STORE_LINK_TTL_MAX_S (24 * 3600)

/* Make a one-time sign-in link for user_name, valid for ttl_s seconds (1 to 24 h): its token
 * goes to plain[STORE_LINK_LEN + 1] and only its SHA-256 is stored. Older links of the user
 * stay valid; used and expired links (of every user) are deleted on the way. -ENOENT when there
 * is no such user, -EINVAL for a ttl out of range. */
int store_login_link_create(struct store *st, const char *user_name, int64_t ttl_s,
                            char plain[STORE_LINK_LEN + 1], struct err *err);

/* Use a sign-in link's token (plain[len], need not be NUL-terminated): the first use before it
 * expires gives its user in *out and spends it. -ENOENT when it is unknown, used or expired, and
 * at once, without a query, when len is not STORE_LINK_LEN. */
int store_login_link_consume(struct store *st, const char *plain, size_t len,
                             struct store_user *out, struct err *err);

/* A browser session's token (the smcp_session cookie): 43 base64url characters. A session ends
 * when it has not been used for its ttl, and at the latest STORE_WEB_SESSION_MAX_AGE_S after it
 * was made; a user keeps STORE_WEB_SESSIONS_PER_USER sessions at most (the oldest go). */
#define STORE_WEB_SESSION_LEN 43
#define STORE_WEB_SESSION_MAX_AGE_S (30 * 24 * 3600)
#define STORE_WEB_SESSIONS_PER_USER 32

/* Make a session for user_id that lasts ttl_s seconds (1 s to 30 days) past its last use: its
 * token goes to plain[STORE_WEB_SESSION_LEN + 1], only its SHA-256 is stored. Expired sessions
 * (of every user) are deleted on the way. -ENOENT when there is no such user, -EINVAL for a ttl
 * out of range. */
int store_web_session_create(struct store *st, const char *user_id, int64_t ttl_s,
                             char plain[STORE_WEB_SESSION_LEN + 1], struct err *err);

/* The user of the session whose token is plain[len], into *out. Records the use (last seen, and
 * the expiry moves ttl past it) at most once a minute per session, so most calls only read.
 * -ENOENT when it is unknown or expired, at once when len is not STORE_WEB_SESSION_LEN. */
int store_web_session_get(struct store *st, const char *plain, size_t len, struct store_user *out,
                          struct err *err);

/* End the session whose token is plain[len] (signing out). -ENOENT when there was none. */
int store_web_session_delete(struct store *st, const char *plain, size_t len, struct err *err);

/* End every session of user_id (signing out everywhere, as when the password changes). Returns
 * how many there were, or < 0. */
int store_web_session_delete_user(struct store *st, const char *user_id, struct err *err);

/* --- sandboxes --- */

struct store_sandbox {
    char id[64];
    char user_id[64];    /* "" for an unowned sandbox (the warm pool's, or one being removed) */
    char session_id[64]; /* "" for the user's own sandbox */
    char template_name[32];
    bool running;
    int64_t init_pid;
    int64_t init_start; /* process start time in clock ticks since boot */
    char cgroup[64];
    int64_t created_at, started_at, last_used_at;
    uint32_t id_slot; /* host id range (SANDBOX_UID_BASE + slot * 65536), 0 = none yet */
    char node_id[64]; /* the node it lives on */
    char env[64];     /* the environment snapshot it starts on, "" for none */
};

/* --- environment snapshots (envs.c): rows of this node's --- */

struct store_env {
    char id[64];          /* its directory, DATA_DIR/envs/<id> */
    char key[80];         /* what a session must match (runs/envs.c) */
    char scope[64];       /* the user it serves, "" when shared */
    char user_id[64];     /* whose run built it */
    char repository[512]; /* owner/name or the address it was cloned from */
    char template_name[32];
    char fingerprint[4096]; /* its lock and setup files, "<blob> <path>" lines */
    char base[64];          /* the commit it was built at */
    int64_t bytes, files;
    int64_t created_at, last_used_at;
    int64_t uses; /* sessions that started on it (store_env_touch) */
    bool dropped; /* replaced or evicted: removed once no sandbox starts on it */
};

struct store_env_filter {
    const char *user_id;    /* built by or serving this user; NULL: any */
    const char *repository; /* NULL: any */
};

int store_env_insert(struct store *st, const struct store_env *e, struct err *err);
/* The newest snapshot of key not dropped: 0, or -ENOENT. */
int store_env_find(struct store *st, const char *key, struct store_env *out, struct err *err);
/* Record a session's start on snapshot id: its last use, and one more use. */
int store_env_touch(struct store *st, const char *id, int64_t now, struct err *err);
int store_env_drop(struct store *st, const char *id, struct err *err);
/* Remove the row of a dropped snapshot (its directory gone). */
int store_env_delete(struct store *st, const char *id, struct err *err);
/* Call fn for each snapshot f matches, least recently used first. */
int store_env_list(struct store *st, const struct store_env_filter *f,
                   void (*fn)(const struct store_env *e, void *ctx), void *ctx, struct err *err);

/* Find the sandbox of user_id (session_id NULL/"" = the user's own). -ENOENT when none. */
int store_sandbox_find(struct store *st, const char *user_id, const char *session_id,
                       struct store_sandbox *out, struct err *err);
/* Insert a new row. */
int store_sandbox_insert(struct store *st, const struct store_sandbox *sb, struct err *err);
/* Record state, init process, cgroup, times and environment snapshot of sb->id. */
int store_sandbox_update(struct store *st, const struct store_sandbox *sb, struct err *err);
/* How many of this node's sandboxes start on environment snapshot env, into *count. */
int store_sandbox_env_users(struct store *st, const char *env, int64_t *count, struct err *err);
/* Give sandbox id the lowest free host id range slot (1..max_slot) and return it in *slot.
 * -ENOSPC when every slot up to max_slot is held, -ENOENT when id has one already. */
int store_sandbox_claim_slot(struct store *st, const char *id, uint32_t max_slot, uint32_t *slot,
                             struct err *err);
/* Call fn with the id of each sandbox of user_id that holds an id range, that is, has files on
 * disk. */
int store_sandbox_list_with_files(struct store *st, const char *user_id,
                                  void (*fn)(const char *id, void *ctx), void *ctx,
                                  struct err *err);
/* Free sandbox id's slot (its files are gone) for reuse. */
int store_sandbox_release_slot(struct store *st, const char *id, struct err *err);
/* Give the unowned sandbox id (a warm pool's) to user_id's session (NULL or "": the user's own
 * sandbox); with replaces, in the same transaction take that one from its owner first (it is
 * then unowned until it is deleted). -ESTALE when id is owned, -EEXIST when the session has
 * another sandbox. */
int store_sandbox_assign(struct store *st, const char *id, const char *user_id,
                         const char *session_id, const char *replaces, struct err *err);
/* Remove sandbox id's row (once its files are gone). */
int store_sandbox_delete(struct store *st, const char *id, struct err *err);
/* Call fn for each sandbox of this node's without an owner (user_id ""). */
int store_sandbox_list_unowned(struct store *st,
                               void (*fn)(const struct store_sandbox *sb, void *ctx), void *ctx,
                               struct err *err);
/* Writes to a sandbox's row (update, release_slot, delete) touch it only while it is this
 * node's: one taken over by another node is theirs. */
/* Sandboxes and sessions from before nodes (node_id '') become this node's: the number taken,
 * or < 0. */
int store_node_adopt_legacy(struct store *st, struct err *err);
/* Make sandbox id, which lived on from_node (a lost node), this node's: stopped, without an id
 * range, its files left behind on from_node. -ESTALE if it is no longer from_node's. */
int store_sandbox_take_over(struct store *st, const char *id, const char *from_node,
                            struct err *err);
/* Call fn with the id of each sandbox of this node's. */
int store_sandbox_list_ids(struct store *st, void (*fn)(const char *id, void *ctx), void *ctx,
                           struct err *err);
/* Call fn for each sandbox of this node's recorded as running. */
int store_sandbox_list_running(struct store *st,
                               void (*fn)(const struct store_sandbox *sb, void *ctx), void *ctx,
                               struct err *err);

/* --- OAuth (oauth.c): clients, grants, codes, tokens --- */

#define STORE_OAUTH_CLIENT_ID_MAX 2048
#define STORE_OAUTH_CLIENT_NAME_MAX 200
/* Access tokens "smcp_at_" and refresh tokens "smcp_rt_", then 43 base64url characters; codes
 * are the 43 characters alone. */
#define STORE_OAUTH_TOKEN_LEN 51
#define STORE_OAUTH_CODE_LEN 43
#define STORE_OAUTH_ACCESS_PREFIX "smcp_at_"
#define STORE_OAUTH_REFRESH_PREFIX "smcp_rt_"

struct store_oauth_client {
    char id[STORE_OAUTH_CLIENT_ID_MAX + 1];
    char kind[16]; /* "registered" or "document" */
    char name[STORE_OAUTH_CLIENT_NAME_MAX + 1];
    char *redirect_uris;  /* JSON array text; owned (store_oauth_client_clear) */
    char auth_method[24]; /* none, client_secret_post, client_secret_basic */
    char secret_hash[65]; /* "" for public clients */
    int64_t created_at, expires_at;
};
void store_oauth_client_clear(struct store_oauth_client *c);
/* Insert or update (by id) a client. */
int store_oauth_client_put(struct store *st, const struct store_oauth_client *c, struct err *err);
/* -ENOENT when unknown. */
int store_oauth_client_get(struct store *st, const char *id, struct store_oauth_client *out,
                           struct err *err);
/* Forget registered clients older than max_age_ms that hold no grant, and documents past their
 * expiry that hold none. Returns the number of clients left that no user ever approved (one
 * index read, no table scan), or < 0. */
int store_oauth_clients_prune(struct store *st, int64_t max_age_ms, struct err *err);
/* Delete the oldest client (by created_at) that no user ever approved and that holds no grant,
 * to make room for a new one: 1 with its id in evicted, 0 when there is none, or < 0. A client
 * a user approved is never chosen, even after its grants were revoked. */
int store_oauth_client_evict(struct store *st, char evicted[STORE_OAUTH_CLIENT_ID_MAX + 1],
                             struct err *err);

struct store_oauth_grant {
    char id[64];
    char user_id[64];
    char user_name[128];
    char client_id[STORE_OAUTH_CLIENT_ID_MAX + 1];
    char client_name[STORE_OAUTH_CLIENT_NAME_MAX + 1];
    char redirect_host[256];
    char scope[128];
    int64_t created_at, last_used_at;
};
/* The user's grant to the client; -ENOENT when none. */
int store_oauth_grant_find(struct store *st, const char *user_id, const char *client_id,
                           struct store_oauth_grant *out, struct err *err);
/* Record the user's approval of the client for scope (replacing the scope of an existing grant,
 * whose id and tokens stay), and mark the client approved. out gets the grant. Returns 1 when
 * this is the first approval of a client the store holds (it stops counting as unapproved: see
 * store_oauth_clients_prune), 0 otherwise, or < 0. */
int store_oauth_grant_approve(struct store *st, const char *user_id, const char *client_id,
                              const char *client_name, const char *redirect_host, const char *scope,
                              struct store_oauth_grant *out, struct err *err);
/* Each grant (of user_name, or all when NULL), newest first. */
int store_oauth_grant_list(struct store *st, const char *user_name,
                           void (*fn)(const struct store_oauth_grant *g, void *ctx), void *ctx,
                           struct err *err);
/* Revoke a grant (with its codes and tokens); user_id, when not NULL, must own it. -ENOENT
 * when there is no such grant. */
int store_oauth_grant_revoke(struct store *st, const char *grant_id, const char *user_id,
                             struct err *err);

/* A new authorization code under grant_id, bound to redirect_uri, the PKCE challenge, resource
 * and scope; plain gets it. */
int store_oauth_code_create(struct store *st, const char *grant_id, const char *redirect_uri,
                            const char *challenge, const char *resource, const char *scope,
                            int64_t ttl_ms, char plain[STORE_OAUTH_CODE_LEN + 1], struct err *err);
struct store_oauth_code {
    char family[65]; /* the code's hash: the family of the tokens issued for it */
    struct store_oauth_grant grant;
    char redirect_uri[2049];
    char challenge[129];
    char resource[1024];
    char scope[128];
};
/* Redeem a code (once). -ENOENT unknown or expired; -EALREADY presented before, in which case
 * every token issued for it is revoked. */
int store_oauth_code_redeem(struct store *st, const char *plain, size_t len,
                            struct store_oauth_code *out, struct err *err);

/* Issue an access token (and a refresh token when refresh_ttl_ms > 0, else rt is "") in the
 * family. */
int store_oauth_tokens_issue(struct store *st, const char *grant_id, const char *family,
                             const char *scope, const char *resource, int64_t access_ttl_ms,
                             int64_t refresh_ttl_ms, char at[STORE_OAUTH_TOKEN_LEN + 1],
                             char rt[STORE_OAUTH_TOKEN_LEN + 1], struct err *err);
struct store_oauth_token {
    char family[65];
    struct store_oauth_grant grant;
    char scope[128];
    char resource[1024];
    int64_t expires_at;
};
/* The rotation overlap: a refresh token spent less than window_ms ago (0: none) may be
 * presented again by its own client, at most max times, each time for a fresh pair in its
 * family, so that a client refreshing with one token for each of several calls at once sees
 * them all succeed. */
struct store_oauth_reuse {
    int64_t window_ms;
    int max;
};
/* Spend a refresh token of client_id (rotation), atomically: of two concurrent spends of one
 * token, on one node or two, exactly one rotates it. Returns 0 when this call rotated it; n > 0
 * when it had been rotated within reuse's window and this is its n-th reuse (n <= reuse->max;
 * out is filled alike, for a fresh pair in out->family). -ENOENT unknown, expired, or another
 * client's unspent token (which leaves it unspent). -EALREADY spent before and not admitted
 * again (after the window, past max reuses, or presented by another client), in which case the
 * whole grant is revoked: the user's approval of the client, and every code and token under it;
 * err says which. */
int store_oauth_refresh_spend(struct store *st, const char *plain, size_t len,
                              const char *client_id, const struct store_oauth_reuse *reuse,
                              struct store_oauth_token *out, struct err *err);
/* An access token's user, scope, resource and expiry. -ENOENT unknown, revoked or expired.
 * Records the grant's last use (at most once a minute). */
int store_oauth_access_check(struct store *st, const char *plain, size_t len,
                             struct store_user *user, struct store_oauth_token *out,
                             struct err *err);
/* Revoke a token of client_id (RFC 7009): a refresh token ends its family, an access token
 * itself. Unknown tokens, or another client's, are not an error (0). */
int store_oauth_token_revoke(struct store *st, const char *plain, size_t len, const char *client_id,
                             struct err *err);

/* --- proxy tokens --- */

struct store_proxy_token {
    char jti[64];
    char user_id[64];
    char run_id[64], session_id[64], sandbox_id[64]; /* "" when none */
    char services[256];                              /* comma-separated */
    int64_t created_at, expires_at;                  /* epoch seconds */
};

/* Record a minted token. */
int store_proxy_token_add(struct store *st, const struct store_proxy_token *t, struct err *err);
/* Revoke by jti (-ENOENT when unknown); revoking twice is not an error. */
int store_proxy_token_revoke(struct store *st, const char *jti, struct err *err);
/* 0 when the token is known and not revoked; -EKEYREVOKED when revoked; -ENOENT when unknown. */
int store_proxy_token_check(struct store *st, const char *jti, struct err *err);
/* What requests with one token used, to be added to its row. */
struct store_token_usage {
    char jti[64];
    int64_t requests, input_tokens, output_tokens;
};
/* Add the usage of n tokens to their rows, in one transaction. */
int store_proxy_token_usage(struct store *st, const struct store_token_usage *u, size_t n,
                            struct err *err);
/* Revoke every token minted for a run (when it ends). Returns how many were revoked, or < 0. */
int store_proxy_token_revoke_run(struct store *st, const char *run_id, struct err *err);

/* --- sessions and runs --- */

struct store_session {
    char id[64];
    char user_id[64];
    char agent[32];
    char agent_session[128]; /* "" until the agent named its conversation */
    char repository[2048];   /* "" until a run named one */
    int64_t created_at, last_run_at, cleaned_at;
    char work_branch[256]; /* the branch its runs deliver to, "" until one delivers */
    char base_branch[256]; /* the branch work_branch was made from (the pull request's base) */
    int64_t pr_number;     /* its pull request, 0 = none yet */
    char pr_url[512];
    /* the node its runs and sandbox live on; STORE_SESSION_UNCLAIMED while its first run waits
     * for a node with room to claim it; "" on create: this node */
    char node_id[64];
    char pr_repo[200];    /* "owner/name" of pr_number, lowercase; "" until it has one */
    char pr_author[64];   /* the login that opened it (its credential's), "" when not known */
    char pr_state[16];    /* "open", "closed", "merged"; "" until it has one */
    bool fix_ci;          /* its pull request's failing CI is fixed by runs (run_task fix_ci) */
    char ci_head[64];     /* the head commit the server last pushed, "" before the first */
    unsigned ci_fixes;    /* fix runs queued since that lineage began */
    char poll_cursor[32]; /* the poller's: newest created_at read ("2026-01-02T03:04:05Z") */
    int64_t polled_at;    /* when the poller last looked (ms), 0 never */
};

/* The node of a session none has claimed yet (a shared store's new sessions). */
#define STORE_SESSION_UNCLAIMED "*"

int store_session_create(struct store *st, const struct store_session *s, struct err *err);
/* The session id of user_id (any user's when user_id is NULL); -ENOENT when there is none (or
 * it is another user's). */
int store_session_get(struct store *st, const char *user_id, const char *id,
                      struct store_session *out, struct err *err);
/* Record the agent's conversation id, the repository and the time of the latest run (NULL or
 * "" strings keep what is there). */
int store_session_update(struct store *st, const char *id, const char *agent_session,
                         const char *repository, int64_t last_run_at, struct err *err);
/* Hand session id to another agent: its runs from now on are that agent's, in a conversation
 * still to begin (agent_session emptied). */
int store_session_set_agent(struct store *st, const char *id, const char *agent, struct err *err);
/* Sessions whose last run ended before `before` (ms) and whose workspace is still there, with
 * no run queued or running. */
/* Record the branch a session's runs deliver to and the base it was made from (NULLs: none, the
 * next delivering run makes one). */
int store_session_set_branch(struct store *st, const char *id, const char *work_branch,
                             const char *base_branch, struct err *err);
/* Record the session's pull request, number in repo ("owner/name"), opened by author's
 * credential (its login, "" when not known), as open. */
int store_session_set_pull_request(struct store *st, const char *id, int64_t number,
                                   const char *url, const char *repo, const char *author,
                                   struct err *err);
/* The session (the newest, should there be several) whose pull request is number in repo
 * (case-insensitive); -ENOENT when none. */
int store_session_by_pull_request(struct store *st, const char *repo, int64_t number,
                                  struct store_session *out, struct err *err);
/* The session whose pull request in repo has head as the head the server last pushed (for CI
 * events that name no pull request); -ENOENT when none. */
int store_session_by_ci_head(struct store *st, const char *repo, const char *head,
                             struct store_session *out, struct err *err);
/* The poller looked at the session at `at` (ms) and read up to cursor (NULL: as before). */
int store_session_set_polled(struct store *st, const char *id, const char *cursor, int64_t at,
                             struct err *err);
/* Call fn for up to limit of this node's sessions with an open pull request and a run since
 * active_since (ms), the ones looked at longest ago first. */
int store_sessions_to_poll(struct store *st, int64_t active_since, unsigned limit,
                           void (*fn)(const struct store_session *s, void *ctx), void *ctx,
                           struct err *err);
/* Whether the session's failing CI is fixed by runs. */
int store_session_set_fix_ci(struct store *st, const char *id, bool on, struct err *err);
/* Record the head the server pushed (NULL: keep the one recorded) and the fix runs made since
 * the lineage began. */
int store_session_set_ci(struct store *st, const char *id, const char *head, unsigned fixes,
                         struct err *err);
/* Record what became of the session's pull request: "open", "closed", "merged". */
int store_session_set_pull_state(struct store *st, const char *id, const char *state,
                                 struct err *err);
/* Sessions of this node (or unclaimed) idle since before, with no run to end, whose workspace is
 * still there. */
int store_session_list_expired(struct store *st, int64_t before,
                               void (*fn)(const struct store_session *s, void *ctx), void *ctx,
                               struct err *err);
int store_session_mark_cleaned(struct store *st, const char *id, int64_t at, struct err *err);

#define STORE_RUN_STATUS_MAX 16

/* A run row. The long texts are malloc'd (NULL when absent) and freed by store_run_release(). */
/* "none", "allowlist" or "public", and its terminating NUL */
#define STORE_NETWORK_MAX 16

struct store_run {
    int64_t n; /* creation order */
    char id[64], user_id[64], session_id[64];
    char status[STORE_RUN_STATUS_MAX];
    char model[128], agent[32];
    char branch[256];
    char workdir[512];
    char base_commit[64];
    char *task, *title, *repository, *status_reason, *summary, *error, *changes;
    int64_t timeout_ms;
    int64_t created_at, started_at, finished_at; /* ms, 0 = not yet */
    int64_t agent_pid;
    int64_t events_offset, event_count;
    int exit_code; /* -1 = unknown */
    int success;   /* -1 = not finished */
    int64_t input_tokens, output_tokens;
    double cost;
    int64_t view_generation;         /* of its web address */
    char network[STORE_NETWORK_MAX]; /* its sandbox's network mode, "" for older runs */
    char pull_request[8];            /* "none", "draft", "ready"; "" for older runs */
    char *delivery;                  /* JSON, NULL until the run delivered or tried to */
    /* Its phase (runs/phase.c): "queued" ... "delivering", then "succeeded", "failed" or
     * "cancelled"; "" for runs from before phases were kept. */
    char phase[16];
    int64_t phase_step; /* the agent's steps so far */
    char *phase_detail; /* the phase in a few words, NULL when none */
    int64_t phase_at;   /* ms, when the phase began; 0 = unknown */
    char *setup;        /* the setup script run_task was given, NULL when none */
    char *setup_result; /* JSON, what became of its setup (runs/setup.c), NULL when none ran */
    /* The environment snapshot it rebuilds (runs/envs.c: a run without an agent, left out of
     * store_run_list and sending no notification), "" for every other run */
    char rebuild[64];
    /* The attempts it is one of (run_task attempts), "" for a run on its own */
    char group_id[64];
    /* The attempt whose commits it delivers (a run without an agent, made by deliver_run), ""
     * for every other run */
    char delivers[64];
    /* How the last test command its agent ran ended, "" when it ran none */
    char test_outcome[160];
    /* What started it when not its owner's call: JSON (migrations/0026), NULL or "" for none */
    char *origin;
    /* run_task plan_first: the agent's plan is approved before it changes anything */
    bool plan_first;
    /* how long its agent's questions wait for an answer (s); 0: the server's default */
    int64_t question_timeout_s;
};
void store_run_release(struct store_run *r);
/* The runs of group group_id (of user_id, any user's when NULL), oldest first: its attempts and
 * the run that delivers the picked one. -ENOENT when there are none. */
int store_group_runs(struct store *st, const char *user_id, const char *group_id,
                     void (*fn)(const struct store_run *r, void *ctx), void *ctx, struct err *err);

/* Insert a new queued run (and its first transition). */
int store_run_insert(struct store *st, const struct store_run *r, struct err *err);
/* Load run id; with user_id set, a run of another user is -ENOENT too. */
int store_run_get(struct store *st, const char *user_id, const char *id, struct store_run *out,
                  struct err *err);
/* Move a run to status with a reason, recording the transition; running sets started_at, the
 * final statuses set finished_at. A final status is never left: -EALREADY then. */
int store_run_transition(struct store *st, const char *id, const char *status, const char *reason,
                         int64_t at, struct err *err);
/* Move queued run id to running, if its user (user_id) has fewer than limit runs running on
 * every node together: 0, -EBUSY when the user has that many, -EALREADY when the run is no
 * longer queued (cancelled meanwhile through another node). */
int store_run_start(struct store *st, const char *id, const char *user_id, unsigned limit,
                    const char *reason, int64_t at, struct err *err);
/* End run id with status, if it is still queued: 0, or -EALREADY (it started or ended). */
int store_run_end_queued(struct store *st, const char *id, const char *status, const char *reason,
                         int64_t at, struct err *err);
/* How many runs of user_id are running and queued, on every node. */
int store_user_runs(struct store *st, const char *user_id, int64_t *running, int64_t *queued,
                    struct err *err);
/* Claim for this node the unclaimed session whose waiting run is the oldest, among users with
 * fewer than limit runs running: 1 with its id in session_id, 0 when there is none. Nodes
 * claiming at once claim different sessions (a session being claimed is passed over). A run
 * queued since prefer_before or later (epoch ms) whose repository has an environment snapshot
 * for its user on another node and none on this one is left to that node. */
int store_session_claim(struct store *st, unsigned limit, int64_t prefer_before,
                        char session_id[64], struct err *err);
/* Whether this node (*here) and another node that is up (*elsewhere) hold a live environment
 * snapshot that may serve user_id for repository. */
int store_env_held(struct store *st, const char *user_id, const char *repository, bool *here,
                   bool *elsewhere, struct err *err);
/* Call fn with each queued run of this node's sessions, oldest first (read whole first: fn may
 * write to the store). */
int store_run_list_queued(struct store *st, void (*fn)(const struct store_run *r, void *ctx),
                          void *ctx, struct err *err);
/* The repository of session_id's newest queued or running run that names one, or NULL, into
 * *out (free it). */
int store_session_run_repository(struct store *st, const char *session_id, char **out,
                                 struct err *err);
/* Record where the agent works (workdir, branch, starting commit) and its process. */
int store_run_set_started(struct store *st, const char *id, const char *workdir, const char *branch,
                          const char *base_commit, int64_t agent_pid, struct err *err);
/* Record the run's phase (see struct store_run), begun at `at`. */
int store_run_set_phase(struct store *st, const char *id, const char *phase, int64_t step,
                        const char *detail, int64_t at, struct err *err);
/* Record the outcome (before the final transition); a NULL summary or error keeps the one the
 * events gave. */
int store_run_set_outcome(struct store *st, const char *id, int success, const char *summary,
                          const char *error, const char *changes, int exit_code, struct err *err);

/* A run's full diff (JSON text, src/runs/diff.h), kept apart from the row's other columns:
 * store_run_get and the lists never read it (it is up to half a megabyte), only the run's page. */
int store_run_set_diff(struct store *st, const char *id, const char *diff, struct err *err);
/* *out: the stored diff (malloc'd; the caller frees), or NULL when there is none. -ENOENT when
 * there is no such run. */
int store_run_get_diff(struct store *st, const char *id, char **out, struct err *err);

struct store_run_event {
    int64_t time;
    const char *type, *summary, *raw;
    const char *text;  /* the agent's words: becomes the run's summary (NULL: no change) */
    const char *error; /* an error the agent reported: becomes the run's error (NULL: none) */
    int64_t input_tokens, output_tokens;
    double cost;
};
/* Record how the last test command of the run's agent ended (struct store_run.test_outcome) */
int store_run_set_tests(struct store *st, const char *id, const char *outcome, struct err *err);
/* Record what became of the run's setup (JSON, see runs/setup.c). */
int store_run_set_setup_result(struct store *st, const char *id, const char *result,
                               struct err *err);
/* Record what became of the run's delivery (JSON, see runs/deliver.c). */
int store_run_set_delivery(struct store *st, const char *id, const char *delivery, struct err *err);
/* Append events (numbered after the run's last) and move the run's offset to new_offset (a
 * negative one keeps it: events of the server's own, not from the agent's file), in one
 * transaction: an event is stored exactly once however often ingest is interrupted. Usage is
 * added to the run's; the latest text and error become its summary and error. */
int store_run_add_events(struct store *st, const char *run_id, const struct store_run_event *ev,
                         size_t n, int64_t new_offset, struct err *err);

struct store_run_list_opts {
    const char *user_id;
    const char *session_id; /* NULL = all sessions */
    const char *status;     /* NULL = any */
    int64_t before;         /* only runs with n < before; 0 = from the newest */
    int64_t created_before; /* only runs created before this time (ms); 0 = any */
    unsigned limit;
};
/* Runs newest first; fn gets each (valid during the call). *more tells whether older ones
 * match too. */
int store_run_list(struct store *st, const struct store_run_list_opts *o,
                   void (*fn)(const struct store_run *r, void *ctx), void *ctx, bool *more,
                   struct err *err);
/* Make session id, and its sandbox, which lived on from_node (a lost node), this node's; the
 * sandbox starts afresh. -ESTALE if the session is no longer from_node's. */
int store_session_take_over(struct store *st, const char *id, const char *from_node,
                            struct err *err);
/* Call fn with the id of each queued or running run of a session on node_id (or, with
 * session_id, of that session), oldest first. */
int store_run_list_active_on(struct store *st, const char *node_id, const char *session_id,
                             void (*fn)(const char *run_id, void *ctx), void *ctx, struct err *err);
/* Queued and running runs of this node's sessions (store_set_node), oldest first. */
int store_run_list_active(struct store *st, void (*fn)(const struct store_run *r, void *ctx),
                          void *ctx, struct err *err);

struct store_run_event_row {
    int64_t seq, time;
    const char *type, *summary, *raw;
};
/* Events of a run with seq > after, in order, at most limit. */
int store_run_events(struct store *st, const char *run_id, int64_t after, unsigned limit,
                     void (*fn)(const struct store_run_event_row *e, void *ctx), void *ctx,
                     struct err *err);
/* Events of a run with seq < before (0: from the newest), newest first, at most limit; raw is ""
 * (not read). */
int store_run_events_back(struct store *st, const char *run_id, int64_t before, unsigned limit,
                          void (*fn)(const struct store_run_event_row *e, void *ctx), void *ctx,
                          struct err *err);
/* The view generation of a run (session false) or session: the links to its page given out so
 * far carry it. -ENOENT when there is no such run or session. */
int store_view_generation(struct store *st, bool session, const char *id, int64_t *gen,
                          struct err *err);
/* Move to the next generation, so every link given out so far stops working. */
int store_view_revoke(struct store *st, bool session, const char *id, struct err *err);
/* Transitions of a run, oldest first. */
int store_run_transitions(struct store *st, const char *run_id,
                          void (*fn)(int64_t at, const char *status, const char *reason, void *ctx),
                          void *ctx, struct err *err);

/* --- an agent's questions to its run's owner (questions.c) --- */

struct store_question {
    char id[64], run_id[64], user_id[64];
    char kind[16]; /* "question", or "plan" (a plan to approve) */
    char *text;
    char *choices;                 /* a JSON array of strings, or NULL for a free answer */
    int64_t asked_at, deadline_at; /* ms */
    char *answer;                  /* NULL until answered */
    char answered_by[16];          /* "tool", "tasks", "mrtr", "page", "timeout", "ended" */
    int64_t answered_at;           /* ms, 0 until answered */
};
void store_question_release(struct store_question *q);
/* Insert q unanswered, unless its run already has an unanswered question: -EEXIST then, with that
 * one in *open (release it). */
int store_question_ask(struct store *st, const struct store_question *q,
                       struct store_question *open, struct err *err);
/* run_id's unanswered question (latest: its newest question, answered or not) into *out;
 * -ENOENT when there is none. */
int store_question_open(struct store *st, const char *run_id, bool latest,
                        struct store_question *out, struct err *err);
int store_question_get(struct store *st, const char *id, struct store_question *out,
                       struct err *err);
/* run_id's newest plan (kind "plan"), answered or not; -ENOENT when it has none. */
int store_question_last_plan(struct store *st, const char *run_id, struct store_question *out,
                             struct err *err);
/* Queue notification run.question of question_id (asked by run_id's agent) to the targets of the
 * run's user (notify.c). */
int store_notify_question(struct store *st, const char *run_id, const char *question_id, int64_t at,
                          struct err *err);
/* Record question id's answer if it has none yet: 1 when recorded, 0 when answered before. */
int store_question_answer(struct store *st, const char *id, const char *answer, const char *by,
                          int64_t at, struct err *err);
/* fn for each unanswered question whose deadline is at or before now (ms), at most limit, read
 * whole first (fn may write). */
int store_question_list_due(struct store *st, int64_t now, unsigned limit,
                            void (*fn)(const struct store_question *q, void *ctx), void *ctx,
                            struct err *err);
/* How many questions run_id's agent has asked. */
int store_question_count(struct store *st, const char *run_id, int64_t *n, struct err *err);

/* --- previews of sandboxes' ports (previews.c) --- */

struct store_preview {
    char id[64], user_id[64], session_id[64], sandbox_id[64];
    unsigned port;
    char run_id[64]; /* the run whose agent opened it, "" for container_preview */
    int64_t created_at, expires_at, revoked_at; /* ms; revoked_at 0 while not revoked */
};
/* Record preview p, unless its sandbox has max_open previews open at now (ms): -EMFILE then. */
int store_preview_open(struct store *st, const struct store_preview *p, unsigned max_open,
                       int64_t now, struct err *err);
/* Preview id, open or not; -ENOENT when none. */
int store_preview_get(struct store *st, const char *id, struct store_preview *out, struct err *err);
/* Revoke user_id's open preview id: 0, or -ENOENT. */
int store_preview_revoke(struct store *st, const char *user_id, const char *id, int64_t now,
                         struct err *err);
/* fn for each preview open at now of sandbox_id (run_id NULL) or of run_id, oldest first, 16 at
 * most. */
int store_preview_list(struct store *st, const char *sandbox_id, const char *run_id, int64_t now,
                       void (*fn)(const struct store_preview *p, void *ctx), void *ctx,
                       struct err *err);
/* Forget previews that ended before `before` (ms). */
int store_preview_prune(struct store *st, int64_t before, struct err *err);

/* --- groups of attempts (groups.c; their runs: store_group_runs above) --- */

/* The commit group_id's attempts start from: proposed when the group has none yet (the first
 * attempt to ask), else the one recorded, into out. */
int store_group_base(struct store *st, const char *group_id, const char *proposed, char out[64],
                     struct err *err);
/* Record attempt as group_id's pick if its pick is still expected ("" for none yet, or an attempt
 * whose delivery failed): 1 when recorded, 0 when another was recorded meanwhile; current gets
 * the pick either way. -ENOENT for a group with no start recorded. */
int store_group_pick(struct store *st, const char *group_id, const char *expected,
                     const char *attempt, char current[64], struct err *err);

/* --- sandbox network (egress.c) --- */

/* A user's network mode ("none", "allowlist", "public"), or "" when the deployment's applies. */
int store_user_network_get(struct store *st, const char *user_id, char out[STORE_NETWORK_MAX],
                           struct err *err);
/* Set it by user name; NULL or "" returns the user to the deployment's. -ENOENT for no user. */
int store_user_network_set(struct store *st, const char *name, const char *mode, struct err *err);

/* One destination of a sandbox (and run) with one outcome, and how often it was tried. */
struct store_egress_row {
    const char *user_id, *sandbox_id;
    const char *run_id; /* "" outside a run */
    const char *host;
    int port;
    const char *verdict, *reason, *why, *addr;
    int64_t attempts;
    int64_t bytes_up, bytes_down;
    int64_t first_at, last_at;
};
/* A sandbox and run keep at most this many rows; further destinations count under host '*'. */
#define STORE_EGRESS_ROWS_MAX 200
/* Add n rows, in one transaction, to the counts kept (a row of the same sandbox, run, host,
 * port, verdict and reason grows; why and addr become the latest). */
int store_egress_add(struct store *st, const struct store_egress_row *rows, size_t n,
                     struct err *err);
/* Call fn for each row of run_id, the most tried first. */
int store_egress_list(struct store *st, const char *run_id,
                      void (*fn)(const struct store_egress_row *row, void *ctx), void *ctx,
                      struct err *err);
/* Forget the rows outside runs last touched before before_ms. */
int store_egress_prune(struct store *st, int64_t before_ms, struct err *err);

/* --- users' credentials (credentials.c): sealed with the server's key (base/seal.h), bound to
 * the user and the service, so that a value copied onto another row does not open --- */

#define STORE_CREDENTIAL_KEY "credentials.key" /* in DATA_DIR/secrets */
#define STORE_CREDENTIAL_MAX 255               /* characters of a token */

struct store_credential {
    char service[16];
    int64_t created_at, updated_at;
};
/* The key credentials are sealed with, DATA_DIR/secrets/credentials.key (made when it does not
 * exist; see seal_key_load). The server loads it once at start, the CLI when it sets one. */
int store_credential_key_load(const char *data_dir, unsigned char key[SEAL_KEY_BYTES],
                              struct err *err);
/* Why value (n bytes) cannot be a credential, or NULL when it can: a token is 1 to
 * STORE_CREDENTIAL_MAX printable ASCII characters without spaces. The reason is a static string
 * that never quotes the value. */
const char *store_credential_problem(const char *value, size_t n);
/* Seal value (n bytes) with key for user_id and service, and set (or replace) it. -EINVAL (err
 * says why, never quoting the value) when store_credential_problem finds fault with it. */
int store_credential_seal(struct store *st, const unsigned char key[SEAL_KEY_BYTES],
                          const char *user_id, const char *service, const char *value, size_t n,
                          int64_t now, struct err *err);
/* Open user_id's credential for service: *value malloc'd and NUL-terminated, *n bytes; the
 * caller wipes (sodium_memzero) and frees it. -ENOENT when none is set, -EBADMSG when it does
 * not open with key. */
int store_credential_open(struct store *st, const unsigned char key[SEAL_KEY_BYTES],
                          const char *user_id, const char *service, char **value, size_t *n,
                          struct err *err);
/* 0, or -ENOENT when there was none. */
int store_credential_delete(struct store *st, const char *user_id, const char *service,
                            struct err *err);
/* Call fn for each of user_id's credentials (never the value), by service. */
int store_credential_list(struct store *st, const char *user_id,
                          void (*fn)(const struct store_credential *c, void *ctx), void *ctx,
                          struct err *err);

/* --- the review loop's rows (github.c) --- */

/* Record webhook delivery id (X-GitHub-Delivery) received at now (ms), keeping the newest keep:
 * 1 when it is new, 0 when it was recorded before, < 0 with err. */
int store_github_delivery_add(struct store *st, const char *id, int64_t now, uint64_t keep,
                              struct err *err);
/* How many deliveries are kept. */
int64_t store_github_deliveries_count(struct store *st, struct err *err);

/* --- users' settings for a repository's runs (repo_settings.c) --- */

#define STORE_REPO_SETTINGS_MAX 200      /* repositories a user holds settings for */
#define STORE_REPO_SETUP_MAX (64 * 1024) /* bytes of a setup script, as run_task's */
#define STORE_REPO_NAME_MAX 200          /* bytes of "owner/name" */
#define STORE_STEERERS_MAX 20            /* GitHub logins a user lets steer a repository's runs */
#define STORE_STEERERS_BYTES 800

struct store_repo_setting {
    char repository[STORE_REPO_NAME_MAX + 1]; /* "owner/name", lowercase */
    char *setup;                              /* the script, NULL when none */
    bool stop_on_failure;                     /* a failed setup ends the run failed */
    int64_t updated_at;
    bool fix_ci; /* new sessions' runs fix their pull requests' failing CI (run_task fix_ci) */
    char steerers[STORE_STEERERS_BYTES + 1]; /* GitHub logins who may steer them, "a,b" */
};
/* Set (or replace) user_id's settings for repository (already normalised: runs_repo_slug):
 * setup (NULL: none; at most STORE_REPO_SETUP_MAX bytes, else -EFBIG), and whether a failed
 * setup stops the run. -ENOSPC when the user holds STORE_REPO_SETTINGS_MAX others already. */
int store_repo_setting_set(struct store *st, const char *user_id, const char *repository,
                           const char *setup, bool stop_on_failure, int64_t now, struct err *err);
/* Whether user_id's runs on repository fix their failing CI, in the settings set before;
 * -ENOENT when there are none. */
int store_repo_setting_set_fix_ci(struct store *st, const char *user_id, const char *repository,
                                  bool on, struct err *err);
/* Whether list is STORE_STEERERS_MAX GitHub logins or fewer, comma-separated ("" is none). */
bool store_logins_valid(const char *list);
/* Who besides user_id may steer user_id's sessions on repository from their pull requests (GitHub
 * logins, comma-separated; "" for none), in the settings set before: -EINVAL for a list that is
 * not logins, -ENOENT when there are no settings. */
int store_repo_setting_set_steerers(struct store *st, const char *user_id, const char *repository,
                                    const char *logins, struct err *err);
/* user_id's settings for repository into *out (out->setup malloc'd: store_repo_setting_release),
 * or -ENOENT when there are none. */
int store_repo_setting_get(struct store *st, const char *user_id, const char *repository,
                           struct store_repo_setting *out, struct err *err);
void store_repo_setting_release(struct store_repo_setting *rs);
/* 0, or -ENOENT when there were none. */
int store_repo_setting_delete(struct store *st, const char *user_id, const char *repository,
                              struct err *err);
/* Call fn for each of user_id's settings, by repository (row->setup valid during the call). */
int store_repo_setting_list(struct store *st, const char *user_id,
                            void (*fn)(const struct store_repo_setting *row, void *ctx), void *ctx,
                            struct err *err);
/* --- users' secrets for runs (user_secrets.c): environment variables a run's setup sees (and
 * its agent, when marked), sealed like credentials under the credentials key, bound to the user
 * and the name --- */

#define STORE_SECRET_NAME_MAX 64             /* characters of a name */
#define STORE_SECRET_VALUE_MAX (16 * 1024)   /* bytes of a value */
#define STORE_SECRETS_MAX 100                /* secrets of one user */
#define STORE_SECRETS_TOTAL_MAX (256 * 1024) /* bytes of one user's values in all */
#define STORE_SECRET_REPOS_MAX 8             /* repository patterns of one secret */
#define STORE_SECRET_REPOS_TEXT 1200         /* their text, space-separated */

struct store_secret {
    char name[STORE_SECRET_NAME_MAX + 1];
    char repos[STORE_SECRET_REPOS_TEXT]; /* "*", or owner/name patterns, space-separated */
    bool agent;                          /* the agent sees it too, not only the setup */
    size_t size;                         /* the value's bytes */
    int64_t created_at, updated_at;
};
/* Why name cannot be a secret's, or NULL when it can: an environment variable's name
 * ([A-Z_][A-Z0-9_]*, at most STORE_SECRET_NAME_MAX), not one the server sets in the sandbox or
 * that would break it (PATH, HOME, the proxy variables, LD_*, GIT_*, OPENCODE_*, ...). A static
 * string. */
const char *store_secret_name_problem(const char *name);
/* Why value (n bytes) cannot be a secret's, or NULL: 1 to STORE_SECRET_VALUE_MAX bytes of valid
 * UTF-8 without NUL. A static string that never quotes the value. */
const char *store_secret_value_problem(const char *value, size_t n);
/* The repository patterns in (separated by spaces or commas; NULL or none: "*") checked and
 * written space-separated into out: "*", or owner/name where the name may hold '*' wildcards, at
 * most STORE_SECRET_REPOS_MAX. -EINVAL (err says which) otherwise. */
int store_secret_repos_normalize(const char *in, char out[STORE_SECRET_REPOS_TEXT],
                                 struct err *err);
/* Whether a secret with these (normalized) patterns applies to repo: "owner/name" of a run's
 * repository on GitHub (case-insensitively), or NULL or "" for a run without one, or on another
 * host, which only "*" applies to. */
bool store_secret_applies(const char *repos, const char *repo);
/* Seal value (n bytes) with key for user_id and s->name, and set (or replace) the secret with
 * s->repos (normalized here) and s->agent. -EINVAL when the name, the value or the patterns are
 * refused, -ENOSPC when the user's secrets would pass STORE_SECRETS_MAX or
 * STORE_SECRETS_TOTAL_MAX (err says which, never quoting the value). */
int store_secret_seal(struct store *st, const unsigned char key[SEAL_KEY_BYTES],
                      const char *user_id, const struct store_secret *s, const char *value,
                      size_t n, int64_t now, struct err *err);
/* 0, or -ENOENT when there was none. */
int store_secret_delete(struct store *st, const char *user_id, const char *name, struct err *err);
/* Call fn for each of user_id's secrets, by name. With key NULL, value is NULL (a listing never
 * opens one); with the key, value is the opened value (n bytes, NUL-terminated), valid during the
 * call only and wiped after it; -EBADMSG when one does not open. */
int store_secret_list(struct store *st, const unsigned char *key, const char *user_id,
                      void (*fn)(const struct store_secret *s, const char *value, size_t n,
                                 void *ctx),
                      void *ctx, struct err *err);

/* --- notifications (notify.c): users' targets and the outbox of what is to be sent them --- */

#define STORE_NOTIFY_TARGETS_MAX 5   /* per user */
#define STORE_NOTIFY_URL_MAX 1024    /* bytes of a target's URL */
#define STORE_NOTIFY_PENDING_MAX 100 /* rows of a user waiting to be sent; later events dropped */
#define STORE_NOTIFY_ENDED_MAX 100   /* ended rows a user keeps (until pruned) when testing */
#define STORE_NOTIFY_ERROR_MAX 300   /* bytes of an error kept */
#define STORE_NOTIFY_PR_URL_MAX 511

struct store_notify_target {
    char id[64], user_id[64];
    char kind[8]; /* "webhook" or "ntfy" */
    char url[STORE_NOTIFY_URL_MAX + 1];
    int64_t created_at;
    char last_status[16]; /* "delivered", "failed", "dropped"; "" before the first */
    char last_error[STORE_NOTIFY_ERROR_MAX + 1];
    int64_t last_at;
    int64_t pending;                                /* rows waiting (listing only) */
    char pending_error[STORE_NOTIFY_ERROR_MAX + 1]; /* the latest of their errors (listing only) */
};

/* Called once after a commit that queued rows (set by the sender; NULL: none). The store's
 * caller is in the middle of its work then: the hook only arms a timer. */
void store_set_notify_hook(struct store *st, void (*fn)(void *ctx), void *ctx);

/* Add a target of kind ("webhook", "ntfy") with url (checked by the caller) for user_id, with
 * secret (NUL-terminated, or NULL) sealed with key and bound to the user and the target. *out
 * gets the new row. -EDQUOT when the user has STORE_NOTIFY_TARGETS_MAX already. */
int store_notify_target_add(struct store *st, const unsigned char key[SEAL_KEY_BYTES],
                            const char *user_id, const char *kind, const char *url,
                            const char *secret, struct store_notify_target *out, struct err *err);
/* Target id of user_id (any user's when NULL); -ENOENT when none. */
int store_notify_target_get(struct store *st, const char *user_id, const char *id,
                            struct store_notify_target *out, struct err *err);
/* Delete target id of user_id, and whatever of it is waiting; -ENOENT when none. */
int store_notify_target_delete(struct store *st, const char *user_id, const char *id,
                               struct err *err);
/* Call fn for each of user_id's targets, oldest first, with pending and pending_error. */
int store_notify_target_list(struct store *st, const char *user_id,
                             void (*fn)(const struct store_notify_target *t, void *ctx), void *ctx,
                             struct err *err);
/* Open target id's secret: *secret malloc'd and NUL-terminated (the caller wipes and frees
 * it), or NULL when it has none. -EBADMSG when it does not open with key. */
int store_notify_target_secret(struct store *st, const unsigned char key[SEAL_KEY_BYTES],
                               const char *id, char **secret, struct err *err);

/* The id of an event: "evt_" and 32 hex digits derived from type and subject (a run id, a pull
 * request's URL), so that an event recorded twice is one event. */
void store_notify_event_id(const char *type, const char *subject, char out[64]);
/* Queue event type ("pull_request.opened") of run_id, with pr_url (or NULL), at `at` (ms) for
 * every target of the run's user, in a transaction of its own. A final run status queues its
 * event in the transition's own transaction (store_run_transition). Targets whose user has
 * STORE_NOTIFY_PENDING_MAX rows waiting get nothing, and say so (last_status "dropped"). */
int store_notify_event(struct store *st, const char *type, const char *run_id, const char *pr_url,
                       int64_t at, struct err *err);
/* Queue a test notification to target id of user_id; its event id goes to event_id. -ENOENT when
 * there is no such target, -EDQUOT when STORE_NOTIFY_PENDING_MAX rows are waiting. */
int store_notify_test(struct store *st, const char *user_id, const char *id, int64_t at,
                      char event_id[64], struct err *err);

/* A row of the outbox (the sender's view). */
struct store_notify_row {
    int64_t n;
    char target_id[64], user_id[64], event_id[64], run_id[64];
    char type[24];
    char pr_url[STORE_NOTIFY_PR_URL_MAX + 1];
    char *payload; /* malloc'd; NULL before the first attempt */
    char last_error[STORE_NOTIFY_ERROR_MAX + 1];
    int attempts;
    int64_t created_at, next_at;
};
/* Call fn for each waiting row due at now (next_at <= now), the longest due first, at most
 * limit, and at most per_user of each user's among the STORE_NOTIFY_DUE_SCAN longest due (so
 * that one user's many rows do not keep the others' waiting). row is valid during the call
 * only. */
#define STORE_NOTIFY_DUE_SCAN 256
int store_notify_due(struct store *st, int64_t now, unsigned limit, unsigned per_user,
                     void (*fn)(const struct store_notify_row *row, void *ctx), void *ctx,
                     struct err *err);
/* The earliest next_at of a waiting row into *at (0 when none). */
int store_notify_next_due(struct store *st, int64_t *at, struct err *err);
/* Claim row n for an attempt: count it, and move next_at to until so that no one else takes it
 * meanwhile (and a crash retries it then). -EALREADY when it is not waiting and due at now. */
int store_notify_claim(struct store *st, int64_t n, int64_t now, int64_t until, struct err *err);
/* Fix the row's payload (its first attempt). */
int store_notify_set_payload(struct store *st, int64_t n, const char *payload, struct err *err);
/* Try row n again at next_at; error (NULL: keep the last) says why the attempt failed. */
int store_notify_retry(struct store *st, int64_t n, int64_t next_at, const char *error,
                       struct err *err);
/* End row n, delivered or failed (with error), at now; its target remembers how it went. */
int store_notify_end(struct store *st, int64_t n, bool delivered, const char *error, int64_t now,
                     struct err *err);
/* Delete rows that ended before `before` (ms). Returns how many, or < 0. */
int store_notify_prune(struct store *st, int64_t before, struct err *err);

#pragma once
/* The node's caches on disk (DATA_DIR/cache): repository mirrors now, environment snapshots
 * next. An entry is a directory DATA_DIR/cache/<kind>/<owner>/<key>/ holding its data (data/,
 * filled by whoever uses it), a lock file and a small meta file (its label, its size as last
 * recorded, when it was made and last used). Sizes are recorded when an entry changes, never
 * measured here; the budget (ENV_CACHE_MB, ENV_CACHE_USER_MB a user) is kept by removing the
 * least recently used entries first. All state is on disk, so the server and the command line
 * see the same cache; every call blocks on the file system (small files, and the removal of
 * evicted entries). */

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct config;

/* The owner of entries shared between users (fetched without any credential) */
#define ENVCACHE_PUBLIC "_public"

struct envcache_config {
    char dir[PATH_MAX];      /* DATA_DIR/cache */
    uint64_t max_bytes;      /* ENV_CACHE_MB: all entries; 0: nothing is cached */
    uint64_t user_max_bytes; /* ENV_CACHE_USER_MB: the entries one user owns */
    uint64_t max_age_ms;     /* ENV_CACHE_MAX_AGE_HOURS: an older entry is made afresh */
    bool share_public;       /* ENV_CACHE_SHARE_PUBLIC: entries without a credential shared */
};

/* Read ENV_CACHE_MB (default 4096, 0 to 1048576), ENV_CACHE_USER_MB (default a quarter of it, at
 * least 1, at most ENV_CACHE_MB), ENV_CACHE_MAX_AGE_HOURS (default 24, 1 to 8760) and
 * ENV_CACHE_SHARE_PUBLIC (1/true; default off) into cc, its dir below data_dir. -EINVAL with err
 * naming the key. */
int envcache_config_load(const struct config *cfg, const char *data_dir, struct envcache_config *cc,
                         struct err *err);

/* An entry taken for use: its lock is held until envcache_release. */
struct envcache_entry {
    char path[PATH_MAX]; /* the entry's directory */
    char data[PATH_MAX]; /* path/data: what the user of the entry keeps */
    char label[512];     /* what it holds, for people (a repository's URL) */
    char owner[64];      /* a user's id, or ENVCACHE_PUBLIC */
    int lock_fd;         /* -1 when not held */
    bool fresh;          /* no data kept (new, or removed for its age): fill it afresh */
    int64_t created_ms;  /* when its data was made (now for a fresh one) */
};

/* Whether owner and key are names an entry may have ([A-Za-z0-9_-], 1..63, not "." or ".."). */
bool envcache_name_valid(const char *name);

/* Take the entry kind/owner/key (made when absent) for use, without waiting: -EBUSY when another
 * holds it. An entry older than cc's max age loses its data (fresh). label is recorded with its
 * next size. On failure ent->lock_fd is -1. */
int envcache_acquire(const struct envcache_config *cc, const char *kind, const char *owner,
                     const char *key, const char *label, struct envcache_entry *ent,
                     struct err *err);
/* Record ent's size (bytes of its data) and its use now; the lock stays held. */
int envcache_commit(struct envcache_entry *ent, uint64_t bytes, struct err *err);
/* Remove ent altogether (a first fill that failed) and let it go. */
void envcache_remove(struct envcache_entry *ent);
/* Let ent go (its lock; NULL or an entry not held is fine). */
void envcache_release(struct envcache_entry *ent);

/* An entry as the meta file records it. */
struct envcache_info {
    char kind[64], owner[64], key[64];
    char label[512];
    uint64_t bytes;
    int64_t used_ms, created_ms; /* 0 when it was never recorded */
    bool busy;                   /* held by a user at the time of the listing */
};
typedef void (*envcache_list_fn)(const struct envcache_info *i, void *ctx);
/* Call fn for each entry of owner (every entry for NULL), least recently used first. Returns
 * how many, or a negative errno. */
int envcache_list(const struct envcache_config *cc, const char *owner, envcache_list_fn fn,
                  void *ctx, struct err *err);
/* Remove the entry kind/owner/key, waiting for its user to let it go. 0, or -ENOENT. */
int envcache_drop(const struct envcache_config *cc, const char *kind, const char *owner,
                  const char *key, struct err *err);
/* Keep the budget: entries past the max age are removed; while owner (NULL: no one in
 * particular) holds more than user_max_bytes, owner's least recently used entries are removed;
 * then, while all hold more than max_bytes, the least recently used of all. other_all and
 * other_owner are the bytes the node's other caches (environment snapshots) hold in all and of
 * owner's: they count against the same budget, and are not removed here. Entries in use are
 * skipped. Returns how many were removed, or a negative errno. */
int envcache_evict(const struct envcache_config *cc, const char *owner, uint64_t other_all,
                   uint64_t other_owner, struct err *err);

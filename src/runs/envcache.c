/* The node's cache accounting (envcache.h): entries on disk with their size and last use, a lock
 * each, and eviction least recently used first. Rule: nothing here knows what an entry holds;
 * whoever fills one measures it and commits the size.
 *
 * An entry is removed while its lock is held, by renaming its directory away first: anyone who
 * opened the lock file before finds, once it has the lock, that the path no longer names the file
 * it locked, and starts again on a new entry. */
#include "runs/envcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/config.h"
#include "base/ids.h"
#include "base/util.h"

int envcache_config_load(const struct config *cfg, const char *data_dir, struct envcache_config *cc,
                         struct err *err)
{
    uint64_t mb, user_mb, hours;
    memset(cc, 0, sizeof(*cc));
    if (config_get_u64(cfg, "ENV_CACHE_MB", 4096, 0, 1u << 20, &mb, err) < 0)
        return err->code;
    uint64_t share = mb / 4 ? mb / 4 : 1;
    if (config_get_u64(cfg, "ENV_CACHE_USER_MB", mb ? share : 0, mb ? 1 : 0, mb, &user_mb, err) < 0)
        return err->code;
    if (config_get_u64(cfg, "ENV_CACHE_MAX_AGE_HOURS", 24, 1, 8760, &hours, err) < 0)
        return err->code;
    const char *pub = config_get(cfg, "ENV_CACHE_SHARE_PUBLIC");
    if (pub && strcmp(pub, "0") != 0 && strcmp(pub, "1") != 0 && strcmp(pub, "false") != 0 &&
        strcmp(pub, "true") != 0)
        return err_set(err, -EINVAL, "ENV_CACHE_SHARE_PUBLIC '%s' is not 1, 0, true or false", pub);
    cc->share_public = pub && (strcmp(pub, "1") == 0 || strcmp(pub, "true") == 0);
    cc->max_bytes = mb << 20;
    cc->user_max_bytes = user_mb << 20;
    cc->max_age_ms = hours * 3600 * 1000;
    if ((size_t)snprintf(cc->dir, sizeof(cc->dir), "%s/cache", data_dir ? data_dir : ".") >=
        sizeof(cc->dir))
        return err_set(err, -ENAMETOOLONG, "data directory '%s' is too long", data_dir);
    return 0;
}

bool envcache_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 63 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
              (name[i] >= '0' && name[i] <= '9') || name[i] == '_' || name[i] == '-'))
            return false;
    return true;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

static void rm_tree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int mkdirs(const char *path, struct err *err)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0700) < 0 && errno != EEXIST)
                return err_set(err, -errno, "cannot make '%s': %s", p, strerror(errno));
            *s = '/';
        }
    if (mkdir(p, 0700) < 0 && errno != EEXIST)
        return err_set(err, -errno, "cannot make '%s': %s", p, strerror(errno));
    return 0;
}

/* The meta file: "label <text>", "bytes <n>", "used <ms>", "created <ms>", a line each. */
static void meta_read(const char *dir, struct envcache_info *i)
{
    char path[PATH_MAX + 8], line[600];
    snprintf(path, sizeof(path), "%s/meta", dir);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "label ", 6) == 0)
            snprintf(i->label, sizeof(i->label), "%s", line + 6);
        else if (strncmp(line, "bytes ", 6) == 0)
            i->bytes = strtoull(line + 6, NULL, 10);
        else if (strncmp(line, "used ", 5) == 0)
            i->used_ms = strtoll(line + 5, NULL, 10);
        else if (strncmp(line, "created ", 8) == 0)
            i->created_ms = strtoll(line + 8, NULL, 10);
    }
    fclose(f);
}

static int meta_write(const char *dir, const struct envcache_info *i, struct err *err)
{
    char path[PATH_MAX + 8], tmp[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/meta", dir);
    snprintf(tmp, sizeof(tmp), "%s/meta.tmp", dir);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return err_set(err, -errno, "cannot write '%s': %s", tmp, strerror(errno));
    fprintf(f, "label %s\nbytes %llu\nused %lld\ncreated %lld\n", i->label,
            (unsigned long long)i->bytes, (long long)i->used_ms, (long long)i->created_ms);
    if (fclose(f) != 0 || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return err_set(err, -e, "cannot write '%s': %s", path, strerror(e));
    }
    return 0;
}

/* Lock dir's lock file: its fd, -EBUSY when held elsewhere (nonblocking), -ESTALE when the
 * entry was removed meanwhile (start again), or another negative errno. */
static int lock_entry(const char *dir, bool wait, struct err *err)
{
    char path[PATH_MAX + 8];
    snprintf(path, sizeof(path), "%s/lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return errno == ENOENT
                   ? -ESTALE
                   : err_set(err, -errno, "cannot open '%s': %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) < 0) {
        int e = errno;
        close(fd);
        return e == EWOULDBLOCK ? -EBUSY
                                : err_set(err, -e, "cannot lock '%s': %s", path, strerror(e));
    }
    struct stat a, b;
    if (fstat(fd, &a) < 0 || stat(path, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        close(fd);
        return -ESTALE;
    }
    return fd;
}

/* Remove the entry at dir, whose lock the caller holds: renamed first (to a name no scan takes)
 * so that whoever waits for its lock finds it gone. */
static void remove_locked(const char *dir)
{
    char trash[PATH_MAX + 32], rnd[17];
    unsigned char b[8];
    rand_bytes(b, sizeof(b));
    hex_encode(b, sizeof(b), rnd);
    snprintf(trash, sizeof(trash), "%s.trash-%s", dir, rnd);
    if (rename(dir, trash) == 0)
        rm_tree(trash);
    else
        rm_tree(dir);
}

int envcache_acquire(const struct envcache_config *cc, const char *kind, const char *owner,
                     const char *key, const char *label, struct envcache_entry *ent,
                     struct err *err)
{
    memset(ent, 0, sizeof(*ent));
    ent->lock_fd = -1;
    if (!envcache_name_valid(kind) || !envcache_name_valid(owner) || !envcache_name_valid(key))
        return err_set(err, -EINVAL, "cache entry '%s/%s/%s' has a malformed name", kind, owner,
                       key);
    if ((size_t)snprintf(ent->path, sizeof(ent->path), "%s/%s/%s/%s", cc->dir, kind, owner, key) >=
        sizeof(ent->path) - 16)
        return err_set(err, -ENAMETOOLONG, "cache directory '%s' is too long", cc->dir);
    snprintf(ent->data, sizeof(ent->data), "%s/data", ent->path);
    snprintf(ent->label, sizeof(ent->label), "%s", label);
    snprintf(ent->owner, sizeof(ent->owner), "%s", owner);
    int fd = -ESTALE;
    for (int tries = 0; fd == -ESTALE && tries < 8; tries++) {
        int r = mkdirs(ent->path, err);
        if (r < 0)
            return r;
        fd = lock_entry(ent->path, false, err);
    }
    if (fd == -EBUSY)
        return err_set(err, -EBUSY, "cache entry '%s' is in use", ent->path);
    if (fd < 0)
        return fd == -ESTALE ? err_set(err, -EAGAIN, "cache entry '%s' keeps going", ent->path)
                             : fd;
    ent->lock_fd = fd;
    struct envcache_info i = {0};
    meta_read(ent->path, &i);
    int64_t now = time_now_ms();
    struct stat st;
    bool have = stat(ent->data, &st) == 0;
    if (have && (i.created_ms <= 0 || now - i.created_ms > (int64_t)cc->max_age_ms)) {
        rm_tree(ent->data);
        have = false;
    }
    ent->fresh = !have;
    ent->created_ms = have ? i.created_ms : now;
    return 0;
}

int envcache_commit(struct envcache_entry *ent, uint64_t bytes, struct err *err)
{
    if (ent->lock_fd < 0)
        return err_set(err, -EBADF, "cache entry '%s' is not held", ent->path);
    struct envcache_info i = {
        .bytes = bytes, .used_ms = time_now_ms(), .created_ms = ent->created_ms};
    snprintf(i.label, sizeof(i.label), "%s", ent->label);
    for (char *p = i.label; *p; p++)
        if ((unsigned char)*p < ' ')
            *p = '?';
    return meta_write(ent->path, &i, err);
}

void envcache_remove(struct envcache_entry *ent)
{
    if (ent->lock_fd < 0)
        return;
    remove_locked(ent->path);
    envcache_release(ent);
}

void envcache_release(struct envcache_entry *ent)
{
    if (ent && ent->lock_fd >= 0) {
        close(ent->lock_fd);
        ent->lock_fd = -1;
    }
}

/* Every entry (of owner, when not NULL) into a malloc'd array, sorted by last use. */
struct list {
    struct envcache_info *v;
    size_t n, cap;
};

static bool busy(const char *dir)
{
    char path[PATH_MAX + 8];
    snprintf(path, sizeof(path), "%s/lock", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false;
    bool held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    close(fd);
    return held;
}

static void scan_dir(const char *path, void (*fn)(const char *name, void *ctx), void *ctx)
{
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)))
        if (envcache_name_valid(de->d_name))
            fn(de->d_name, ctx);
    closedir(d);
}

struct scan {
    const struct envcache_config *cc;
    const char *owner;
    struct list *l;
    const char *kind, *own;
};

static void scan_key(const char *key, void *ctx)
{
    struct scan *s = ctx;
    struct list *l = s->l;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 32;
        l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    struct envcache_info *i = &l->v[l->n++];
    memset(i, 0, sizeof(*i));
    snprintf(i->kind, sizeof(i->kind), "%s", s->kind);
    snprintf(i->owner, sizeof(i->owner), "%s", s->own);
    snprintf(i->key, sizeof(i->key), "%s", key);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/%s/%s/%s", s->cc->dir, s->kind, s->own, key);
    meta_read(dir, i);
    i->busy = busy(dir);
}

static void scan_owner(const char *owner, void *ctx)
{
    struct scan *s = ctx;
    if (s->owner && strcmp(owner, s->owner) != 0)
        return;
    s->own = owner;
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/%s/%s", s->cc->dir, s->kind, owner);
    scan_dir(dir, scan_key, s);
}

static void scan_kind(const char *kind, void *ctx)
{
    struct scan *s = ctx;
    s->kind = kind;
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/%s", s->cc->dir, kind);
    scan_dir(dir, scan_owner, s);
}

static int by_use(const void *a, const void *b)
{
    const struct envcache_info *x = a, *y = b;
    return x->used_ms < y->used_ms ? -1 : x->used_ms > y->used_ms;
}

static void list_all(const struct envcache_config *cc, const char *owner, struct list *l)
{
    struct scan s = {.cc = cc, .owner = owner, .l = l};
    scan_dir(cc->dir, scan_kind, &s);
    if (l->n)
        qsort(l->v, l->n, sizeof(*l->v), by_use);
}

int envcache_list(const struct envcache_config *cc, const char *owner, envcache_list_fn fn,
                  void *ctx, struct err *err)
{
    (void)err;
    struct list l = {0};
    list_all(cc, owner, &l);
    for (size_t k = 0; k < l.n; k++)
        fn(&l.v[k], ctx);
    free(l.v);
    return (int)l.n;
}

/* Remove i's entry if no one holds it: true when it went. */
static bool remove_entry(const struct envcache_config *cc, const struct envcache_info *i, bool wait,
                         struct err *err)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/%s/%s/%s", cc->dir, i->kind, i->owner, i->key);
    int fd = lock_entry(dir, wait, err);
    if (fd < 0)
        return false;
    remove_locked(dir);
    close(fd);
    return true;
}

int envcache_drop(const struct envcache_config *cc, const char *kind, const char *owner,
                  const char *key, struct err *err)
{
    if (!envcache_name_valid(kind) || !envcache_name_valid(owner) || !envcache_name_valid(key))
        return err_set(err, -EINVAL, "cache entry '%s/%s/%s' has a malformed name", kind, owner,
                       key);
    struct envcache_info i = {0};
    snprintf(i.kind, sizeof(i.kind), "%s", kind);
    snprintf(i.owner, sizeof(i.owner), "%s", owner);
    snprintf(i.key, sizeof(i.key), "%s", key);
    if (!remove_entry(cc, &i, true, err))
        return err->code ? err->code
                         : err_set(err, -ENOENT, "no cache entry '%s/%s/%s'", kind, owner, key);
    return 0;
}

int envcache_evict(const struct envcache_config *cc, const char *owner, uint64_t other_all,
                   uint64_t other_owner, struct err *err)
{
    struct list l = {0};
    list_all(cc, NULL, &l);
    int64_t now = time_now_ms();
    uint64_t total = other_all, mine = other_owner;
    int removed = 0;
    bool *gone = xcalloc(l.n ? l.n : 1, sizeof(bool));
    for (size_t k = 0; k < l.n; k++) {
        struct envcache_info *i = &l.v[k];
        if (!i->busy && i->created_ms > 0 && now - i->created_ms > (int64_t)cc->max_age_ms &&
            remove_entry(cc, i, false, err)) {
            gone[k] = true;
            removed++;
            continue;
        }
        total += i->bytes;
        if (owner && strcmp(i->owner, owner) == 0)
            mine += i->bytes;
    }
    /* what the other caches hold is not this one's to remove: it only counts */
    for (size_t k = 0; owner && mine > cc->user_max_bytes && k < l.n; k++) {
        struct envcache_info *i = &l.v[k];
        if (gone[k] || i->busy || strcmp(i->owner, owner) != 0 || !remove_entry(cc, i, false, err))
            continue;
        gone[k] = true;
        removed++;
        mine -= i->bytes;
        total -= i->bytes;
    }
    for (size_t k = 0; total > cc->max_bytes && k < l.n; k++) {
        struct envcache_info *i = &l.v[k];
        if (gone[k] || i->busy || !remove_entry(cc, i, false, err))
            continue;
        gone[k] = true;
        removed++;
        total -= i->bytes;
    }
    free(gone);
    free(l.v);
    return removed;
}

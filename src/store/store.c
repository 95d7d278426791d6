#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "store/db_backend.h"

#define STORE_RESERVE_BYTES (16ll << 20)

int store_fail(struct store *st, int rc, const char *what, struct err *err)
{
    int code = rc == DB_BUSY         ? -EBUSY
               : rc == DB_CONSTRAINT ? -EEXIST
               : rc == DB_FULL       ? -ENOSPC
                                     : -EIO;
    if (rc == DB_FULL) {
        /* what comes next (this failure's record) finds the reserve's room */
        if (st->reserve[0] && unlink(st->reserve) == 0)
            log_warn("store disk full: its reserve of %lld MiB given up, to record what fails",
                     STORE_RESERVE_BYTES >> 20);
        return err_set(err, code, "the server's disk is full (database %s: %s)", what,
                       db_errmsg(st));
    }
    return err_set(err, code, "database %s: %s", what, db_errmsg(st));
}

void store_keep_reserve(struct store *st)
{
    struct stat sb;
    if (!st->reserve[0] || stat(st->reserve, &sb) == 0)
        return;
    _cleanup_close_ int fd = open(st->reserve, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0 && fallocate(fd, 0, 0, STORE_RESERVE_BYTES) < 0)
        unlink(st->reserve); /* not the room for it yet */
}

int store_step_done(struct store *st, struct db_stmt *s, const char *what, struct err *err)
{
    int rc = db_step(s);
    return rc == DB_DONE ? 0 : store_fail(st, rc, what, err);
}

int store_exec(struct store *st, const char *sql, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, sql, &s, err);
    if (r < 0)
        return r;
    int rc = db_step(s);
    return rc == DB_DONE || rc == DB_ROW ? 0 : store_fail(st, rc, sql, err);
}

bool store_url_is_postgres(const char *url)
{
    return url && (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0);
}

int store_open(const char *where, struct store **ret, struct err *err)
{
    /* the one place a backend is chosen: by the form of where */
    struct store *st = xcalloc(1, sizeof(*st));
    st->watch_fd = -2;
    st->watched_version = -1;
    st->be = store_url_is_postgres(where) ? &db_pg : &db_sqlite;
    int r = st->be->open(where, st, err);
    if (r == 0 && !st->be->shared) {
        snprintf(st->path, sizeof(st->path), "%s", where);
        snprintf(st->reserve, sizeof(st->reserve), "%s-reserve", where);
        store_keep_reserve(st);
    }
    if (r == 0 && (r = store_migrate(st, st->be->migrations, err)) < 0) {
        err_wrap(err, "%s", st->label);
        st->be->close(st);
    }
    if (r < 0) {
        free(st);
        return r;
    }
    *ret = st;
    return 0;
}

void store_close(struct store *st)
{
    if (!st)
        return;
    db_forget(st);
    st->be->close(st);
    if (st->watch_fd >= 0)
        close(st->watch_fd);
    free(st);
}

bool store_is_shared(const struct store *st)
{
    return st->be->shared;
}

/* Watch a file database's files for writes: any commit, by any process, writes its write-ahead
 * log (or, outside WAL mode, the database file) through write(2), which inotify reports before
 * the commit returns. -1 when it cannot (no inotify instance left, no such file). */
static int watch_files(const struct store *st)
{
    if (!st->path[0])
        return -1;
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    char wal[sizeof(st->path) + 4];
    snprintf(wal, sizeof(wal), "%s-wal", st->path);
    if (fd >= 0 && (inotify_add_watch(fd, st->path, IN_MODIFY) < 0 ||
                    inotify_add_watch(fd, wal, IN_MODIFY) < 0)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Whether the watched files may have changed since the last call; on any doubt (a watch gone
 * with its file, an overflow, an error) the watch is dropped and the answer is yes from then
 * on. */
static bool files_touched(struct store *st)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n = read(st->watch_fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return errno == EINTR;
    bool keep = n > 0;
    for (ssize_t off = 0; keep && off < n;) {
        const struct inotify_event *e = (const void *)(buf + off);
        keep = !(e->mask & (IN_IGNORED | IN_Q_OVERFLOW));
        off += (ssize_t)(sizeof(*e) + e->len);
    }
    if (!keep) {
        close(st->watch_fd);
        st->watch_fd = -1;
    }
    return true;
}

int64_t store_data_version(struct store *st)
{
    /* A file database untouched since the last read has the version read then: no query (a
     * read transaction's two file locks, a good part of a small request's cost). */
    if (st->watch_fd == -2)
        st->watch_fd = watch_files(st);
    if (st->watch_fd >= 0 && st->watched_version >= 0 && !files_touched(st))
        return st->watched_version;
    /* given back at once: a statement left stepped keeps its read snapshot, and with it every
     * later query of this connection would miss what other processes wrote */
    _cleanup_stmt_ struct db_stmt *s = NULL;
    struct err err = {0};
    if (store_prepare(st, st->be->data_version_sql, &s, &err) < 0)
        return -1;
    int64_t v = db_step(s) == DB_ROW ? db_col_int64(s, 0) : -1;
    st->watched_version = v;
    return v;
}

void store_set_node(struct store *st, const char *node_id)
{
    snprintf(st->node_id, sizeof(st->node_id), "%s", node_id);
}

const char *store_node(const struct store *st)
{
    return st->node_id;
}

int store_find_row(struct store *st, const char *sql, const char *sql_by_user, const char *id,
                   const char *user_id, const char *kind, struct db_stmt **s, struct err *err)
{
    int r = store_prepare(st, user_id ? sql_by_user : sql, s, err);
    if (r < 0)
        return r;
    db_bind_text(*s, 1, id);
    if (user_id)
        db_bind_text(*s, 2, user_id);
    int rc = db_step(*s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "%s '%s' not found", kind, id);
    if (rc != DB_ROW)
        return store_fail(st, rc, kind, err);
    return 0;
}

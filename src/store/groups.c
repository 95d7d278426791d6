/* Groups of attempts (run_groups): the commit a group's attempts all start from, and the attempt
 * the user picked to deliver. Each is set once by whoever comes first, in one statement, so that
 * the attempts of a group on different nodes agree. The group's runs are in runs.c
 * (store_group_runs). */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store/store_internal.h"

/* One column of group_id's row into out (64 bytes); what names it for errors */
static int group_column(struct store *st, const char *sql, const char *group_id, char out[64],
                        const char *what, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, sql, &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, group_id);
    int rc = db_step(s);
    if (rc != DB_ROW)
        return rc == DB_DONE ? err_set(err, -ENOENT, "no run group '%.64s'", group_id)
                             : store_fail(st, rc, what, err);
    store_copy_text(out, 64, s, 0);
    return 0;
}

int store_group_base(struct store *st, const char *group_id, const char *proposed, char out[64],
                     struct err *err)
{
    {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        int r = store_prepare(st,
                              "INSERT INTO run_groups(id, base_commit) VALUES (?, ?) ON CONFLICT "
                              "(id) DO NOTHING",
                              &s, err);
        if (r < 0)
            return r;
        db_bind_text(s, 1, group_id);
        db_bind_text(s, 2, proposed);
        if ((r = store_step_done(st, s, "record a group's start", err)) < 0)
            return r;
    }
    return group_column(st, "SELECT base_commit FROM run_groups WHERE id = ?", group_id, out,
                        "read a group's start", err);
}

int store_group_pick(struct store *st, const char *group_id, const char *expected,
                     const char *attempt, char current[64], struct err *err)
{
    {
        _cleanup_stmt_ struct db_stmt *s = NULL;
        int r = store_prepare(st, "UPDATE run_groups SET picked = ?3 WHERE id = ?1 AND picked = ?2",
                              &s, err);
        if (r < 0)
            return r;
        db_bind_text(s, 1, group_id);
        db_bind_text(s, 2, expected);
        db_bind_text(s, 3, attempt);
        if ((r = store_step_done(st, s, "pick an attempt", err)) < 0)
            return r;
        if (db_changes(st) == 1) {
            snprintf(current, 64, "%s", attempt);
            return 1;
        }
    }
    return group_column(st, "SELECT picked FROM run_groups WHERE id = ?", group_id, current,
                        "read a group's pick", err);
}

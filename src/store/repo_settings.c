/* Users' settings for the runs on a repository (migrations/0020_setting_up.sql): a setup script
 * of their own and what a failed setup does to the run; capped per user. */
#include "store/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "store/store_internal.h"

static int count_others(struct store *st, const char *user_id, const char *repository, int64_t *n,
                        struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st, "SELECT count(*) FROM repo_settings WHERE user_id = ? AND repository <> ?", &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    db_bind_text(s, 2, repository);
    int rc = db_step(s);
    if (rc != DB_ROW)
        return store_fail(st, rc, "count repository settings", err);
    *n = db_col_int64(s, 0);
    return 0;
}

int store_repo_setting_set(struct store *st, const char *user_id, const char *repository,
                           const char *setup, bool stop_on_failure, int64_t now, struct err *err)
{
    if (strlen(repository) > STORE_REPO_NAME_MAX)
        return err_set(err, -EINVAL, "repository name is longer than %d bytes",
                       STORE_REPO_NAME_MAX);
    if (setup && strlen(setup) > STORE_REPO_SETUP_MAX)
        return err_set(err, -EFBIG, "the setup script is over %d bytes (%zu)", STORE_REPO_SETUP_MAX,
                       strlen(setup));
    int64_t n = 0;
    int r = count_others(st, user_id, repository, &n, err);
    if (r < 0)
        return r;
    if (n >= STORE_REPO_SETTINGS_MAX)
        return err_set(err, -ENOSPC,
                       "settings are kept for at most %d repositories; delete one first",
                       STORE_REPO_SETTINGS_MAX);
    _cleanup_stmt_ struct db_stmt *s = NULL;
    r = store_prepare(st,
                      "INSERT INTO repo_settings(user_id, repository, setup, on_setup_failure, "
                      "updated_at) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (user_id, repository) "
                      "DO UPDATE SET setup = excluded.setup, on_setup_failure = "
                      "excluded.on_setup_failure, updated_at = excluded.updated_at",
                      &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    db_bind_text(s, 2, repository);
    if (setup)
        db_bind_text(s, 3, setup);
    else
        db_bind_null(s, 3);
    db_bind_text(s, 4, stop_on_failure ? "stop" : "start");
    db_bind_int64(s, 5, now);
    return store_step_done(st, s, "store repository settings", err);
}

static void read_row(struct db_stmt *s, struct store_repo_setting *rs)
{
    memset(rs, 0, sizeof(*rs));
    store_copy_text(rs->repository, sizeof(rs->repository), s, 0);
    const char *setup = db_col_null(s, 1) ? NULL : db_col_text(s, 1);
    rs->setup = setup ? xstrdup(setup) : NULL;
    const char *on = db_col_text(s, 2);
    rs->stop_on_failure = on && strcmp(on, "stop") == 0;
    rs->updated_at = db_col_int64(s, 3);
    rs->fix_ci = db_col_int64(s, 4) != 0;
    store_copy_text(rs->steerers, sizeof(rs->steerers), s, 5);
}

bool store_logins_valid(const char *list)
{
    size_t n = 0, len = 0;
    for (const char *c = list; *c; c++) {
        if (*c == ',') {
            if (len == 0)
                return false;
            n++;
            len = 0;
        } else if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                   (*c >= '0' && *c <= '9') || *c == '-') {
            if (++len > 39)
                return false;
        } else {
            return false;
        }
    }
    return (len > 0 || n == 0) && n < STORE_STEERERS_MAX && strlen(list) <= STORE_STEERERS_BYTES;
}

/* One column of user_id's settings for repository: sql (an UPDATE of it, ?1 its value, text
 * when text is not NULL, else number; ?2 and ?3 the user and repository). -ENOENT when the
 * settings are not there. */
static int set_column(struct store *st, const char *sql, const char *user_id,
                      const char *repository, const char *text, int64_t number, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, sql, &s, err);
    if (r < 0)
        return r;
    if (text)
        db_bind_text(s, 1, text);
    else
        db_bind_int64(s, 1, number);
    db_bind_text(s, 2, user_id);
    db_bind_text(s, 3, repository);
    if ((r = store_step_done(st, s, "store repository settings", err)) < 0)
        return r;
    return db_changes(st) ? 0
                          : err_set(err, -ENOENT, "no settings for repository '%s'", repository);
}

int store_repo_setting_set_steerers(struct store *st, const char *user_id, const char *repository,
                                    const char *logins, struct err *err)
{
    if (!store_logins_valid(logins))
        return err_set(err, -EINVAL,
                       "steerers are at most %d GitHub logins (letters, digits and '-', at most "
                       "39 each), comma-separated",
                       STORE_STEERERS_MAX);
    return set_column(st,
                      "UPDATE repo_settings SET steerers = ?1 WHERE user_id = ?2 AND "
                      "repository = ?3",
                      user_id, repository, logins, 0, err);
}

int store_repo_setting_set_fix_ci(struct store *st, const char *user_id, const char *repository,
                                  bool on, struct err *err)
{
    return set_column(st,
                      "UPDATE repo_settings SET fix_ci = ?1 WHERE user_id = ?2 AND "
                      "repository = ?3",
                      user_id, repository, NULL, on, err);
}

int store_repo_setting_get(struct store *st, const char *user_id, const char *repository,
                           struct store_repo_setting *out, struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        "SELECT repository, setup, on_setup_failure, updated_at, fix_ci, steerers FROM "
        "repo_settings WHERE user_id = ? AND repository = ?",
        &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    db_bind_text(s, 2, repository);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return err_set(err, -ENOENT, "no settings for repository '%s'", repository);
    if (rc != DB_ROW)
        return store_fail(st, rc, "read repository settings", err);
    read_row(s, out);
    return 0;
}

void store_repo_setting_release(struct store_repo_setting *rs)
{
    free(rs->setup);
    rs->setup = NULL;
}

int store_repo_setting_delete(struct store *st, const char *user_id, const char *repository,
                              struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(st, "DELETE FROM repo_settings WHERE user_id = ? AND repository = ?", &s,
                          err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    db_bind_text(s, 2, repository);
    if ((r = store_step_done(st, s, "delete repository settings", err)) < 0)
        return r;
    return db_changes(st) ? 0
                          : err_set(err, -ENOENT, "no settings for repository '%s'", repository);
}

int store_repo_setting_list(struct store *st, const char *user_id,
                            void (*fn)(const struct store_repo_setting *row, void *ctx), void *ctx,
                            struct err *err)
{
    _cleanup_stmt_ struct db_stmt *s = NULL;
    int r = store_prepare(
        st,
        "SELECT repository, setup, on_setup_failure, updated_at, fix_ci, steerers FROM "
        "repo_settings WHERE user_id = ? ORDER BY repository",
        &s, err);
    if (r < 0)
        return r;
    db_bind_text(s, 1, user_id);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        struct store_repo_setting rs;
        read_row(s, &rs);
        fn(&rs, ctx);
        store_repo_setting_release(&rs);
    }
    return rc == DB_DONE ? 0 : store_fail(st, rc, "list repository settings", err);
}

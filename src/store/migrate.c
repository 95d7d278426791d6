/* The schema's migrations, on either backend: the numbered files of the backend's dialect
 * (migrations/ for SQLite, migrations/postgres/ for PostgreSQL) applied above the version the
 * database records, each in a transaction of its own with the new version. A new database of a
 * backend that has it gets the schema all of them leave (db_backend.schema) in one transaction
 * instead. Its rule: it speaks only through the backend's script, lock and version calls
 * (db_backend.h), never through the statement cache, so that it sits above both backends and
 * below nothing. */
#include "store/db_backend.h"

#include <errno.h>

#include "store/store.h"

static int migration_number(const char *name)
{
    int n = 0, digits = 0;
    for (; name[digits] >= '0' && name[digits] <= '9'; digits++)
        n = n * 10 + (name[digits] - '0');
    return digits == 4 && name[4] == '_' ? n : -1;
}

int store_schema_version_known(void)
{
    int max = 0;
    for (const struct embedded_file *m = embedded_migrations; m->name; m++)
        if (migration_number(m->name) > max)
            max = migration_number(m->name);
    return max;
}

/* Check that list's migrations are numbered in order and that the database's version current is
 * not above the last: the last number, or -EINVAL / -EPROTO. */
static int migrations_check(const struct embedded_file *list, int current, struct err *err)
{
    int known = 0;
    for (const struct embedded_file *m = list; m->name; m++) {
        int n = migration_number(m->name);
        if (n <= known)
            return err_set(err, -EINVAL, "migration '%s' is out of order or misnamed", m->name);
        known = n;
    }
    if (current > known)
        return err_set(err, -EPROTO,
                       "database schema version %d is newer than this binary knows (%d); "
                       "run a newer sandbox-mcp",
                       current, known);
    return known;
}

/* Run sql and set the version to version in one transaction of the backend's migrations; what
 * names it in an error. */
static int migrate_one(struct store *st, const char *what, const char *sql, int version,
                       struct err *err)
{
    const struct db_backend *be = st->be;
    int r;
    if ((r = be->script(st, be->migrate_begin, err)) < 0 || (r = be->script(st, sql, err)) < 0 ||
        (r = be->set_version(st, version, err)) < 0 ||
        (be->migrate_check && (r = be->migrate_check(st, err)) < 0) ||
        (r = be->script(st, "COMMIT", err)) < 0) {
        be->script(st, "ROLLBACK", NULL);
        if (be->migrate_end)
            be->script(st, be->migrate_end, NULL);
        return err_wrap(err, "migration '%s'", what);
    }
    if (be->migrate_end && (r = be->script(st, be->migrate_end, err)) < 0)
        return err_wrap(err, "migration '%s'", what);
    return 0;
}

static int apply(struct store *st, const struct embedded_file *list, struct err *err)
{
    const struct db_backend *be = st->be;
    int current = be->version(st, err);
    if (current < 0)
        return current;
    int known = migrations_check(list, current, err), r;
    if (known < 0)
        return known;
    /* a new database: the schema its migrations would leave, in one go (for the backend's own
     * list only, the one the schema was made from) */
    if (current == 0 && known > 0 && list == be->migrations && be->schema && be->schema->name) {
        if ((r = migrate_one(st, be->schema->name, be->schema->data, known, err)) < 0)
            return r;
        return known;
    }
    for (const struct embedded_file *m = list; m->name; m++) {
        int n = migration_number(m->name);
        if (n <= current)
            continue;
        if ((r = migrate_one(st, m->name, m->data, n, err)) < 0)
            return r;
        current = n;
    }
    return current;
}

int store_migrate(struct store *st, const struct embedded_file *list, struct err *err)
{
    const struct db_backend *be = st->be;
    int r = be->lock ? be->lock(st, true, err) : 0;
    if (r < 0)
        return r;
    r = apply(st, list, err);
    if (be->lock) {
        struct err ignored = {0};
        be->lock(st, false, &ignored);
    }
    return r;
}

#pragma once
/* Files compiled into the binary by src/embed.sh (migrations, web assets). */

#include <stddef.h>

struct embedded_file {
    const char *name; /* base name, e.g. "0001_users_tokens.sql"; NULL ends a table */
    const char *data; /* NUL-terminated */
    size_t size;
};

/* migrations/NNNN_*.sql in name order */
extern const struct embedded_file embedded_migrations[];
/* migrations/postgres/NNNN_*.sql: the same schema in PostgreSQL's dialect, numbered alike */
extern const struct embedded_file embedded_migrations_pg[];
/* schema.sql: the SQLite schema embedded_migrations leave on an empty database, in one script
 * (src/store/schema.sh, at build time) */
extern const struct embedded_file embedded_schema[];

/* proxy/<name>.json provider definitions in name order */
extern const struct embedded_file embedded_providers[];

/* src/web/assets/ of the run and session pages */
extern const struct embedded_file embedded_web[];

#pragma once

#include <sqlite3.h>

#include "store/store.h"

struct store {
    sqlite3 *db;
    sqlite3_stmt *data_version; /* prepared on first use */
};

static inline void cleanup_stmtp(sqlite3_stmt **s)
{
    sqlite3_finalize(*s);
}
#define _cleanup_stmt_ __attribute__((cleanup(cleanup_stmtp)))

/* Prepare sql on st; on failure fill err. */
int store_prepare(struct store *st, const char *sql, sqlite3_stmt **out, struct err *err);
/* Map an SQLite result code to a negative errno and fill err. */
int store_fail(struct store *st, int rc, const char *what, struct err *err);

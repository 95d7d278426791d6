#!/bin/sh
# Usage: schema.sh OUT MIGRATION...
# Writes to OUT the SQLite schema that the migrations, applied in order as migrate.c applies
# them, leave on an empty database: each table, then each index, view and trigger, as SQLite
# keeps its statement (sqlite_schema.sql). A new database is made with this one script
# (migrate.c) rather than by replaying every migration, each of whose ALTER TABLEs makes SQLite
# parse the whole schema again. The migrations hold no rows of their own (their INSERTs and
# UPDATEs carry rows over when a table is rebuilt), so the schema is all of an empty database;
# a migration that leaves a row stops the build.
set -eu
out=$1
shift
rm -f "$out.db"
trap 'rm -f "$out.db"' EXIT
for f in "$@"; do
    { echo 'PRAGMA foreign_keys = OFF; BEGIN;'; cat "$f"; echo ';'; echo 'COMMIT;'; } |
        sqlite3 -bail "$out.db"
done
own="name NOT LIKE 'sqlite\_%' ESCAPE '\\'"
# a query naming each table that holds a row
full=$(sqlite3 -bail "$out.db" "SELECT group_concat('SELECT ''' || name || ''' WHERE EXISTS
    (SELECT 1 FROM \"' || name || '\")', ' UNION ALL ') FROM sqlite_schema WHERE type = 'table' AND $own")
rows=$(sqlite3 -bail "$out.db" "$full")
if [ -n "$rows" ]; then
    echo "schema.sh: the migrations leave rows in" $rows "(a new database is made from the schema alone)" >&2
    exit 1
fi
sqlite3 -bail "$out.db" "SELECT sql || ';' FROM sqlite_schema WHERE sql IS NOT NULL AND $own
    ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 WHEN 'view' THEN 2 ELSE 3 END, rowid" > "$out.tmp"
mv "$out.tmp" "$out"

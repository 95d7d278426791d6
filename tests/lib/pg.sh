#!/bin/sh
# A throwaway PostgreSQL cluster for the tests, on a unix socket only (no TCP port).
#   pg.sh start DIR [durable]
#                     make DIR (outside /tmp, which other users cannot enter here), initdb and
#                     start a cluster in it; prints the URL to reach it. Without durable, no
#                     fsync (tests); with it, fsync on and commits not waiting for it, as the
#                     server's SQLite (WAL, synchronous=NORMAL) does (benchmarks)
#   pg.sh stop DIR    stop it and remove DIR
#   pg.sh down DIR    stop it, keeping DIR (its clients' connections are cut: -m fast)
#   pg.sh up DIR      start it again after down, as it was
# Debian's postgresql package; the server runs as the postgres user, as it must.
set -eu
cmd=$1 dir=$2 mode=${3:-}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bin" ] || { echo "pg.sh: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
as_pg() { runuser -u postgres -- "$@"; }
case "$cmd" in
start)
    mkdir -p "$dir"
    chown postgres: "$dir"
    chmod 0755 "$dir"
    as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --locale=C -E UTF8 \
        > "$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    # Durability is not what the tests are for: no fsync.
    sync="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    [ "$mode" = durable ] && sync="-c synchronous_commit=off -c shared_buffers=512MB"
    echo "-c listen_addresses='' -k $dir $sync -c max_connections=300" > "$dir/options"
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "$(cat "$dir/options")" start > /dev/null \
        || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgresql:///postgres?host=$dir&user=postgres"
    ;;
down)
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop > /dev/null
    ;;
up)
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "$(cat "$dir/options")" start > /dev/null \
        || { cat "$dir/server.log" >&2; exit 1; }
    ;;
stop)
    if [ -d "$dir/data" ]; then
        as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop > /dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: pg.sh start|stop|down|up DIR" >&2
    exit 2
    ;;
esac

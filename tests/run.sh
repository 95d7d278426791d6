#!/bin/sh
# Runs every test suite and ends with one line "N passed, N failed".
# Suites: C unit tests (ASan/UBSan), fuzz corpus replay, integration tests against the sanitized
# binary, end-to-end tests with the official MCP SDK client, and the MCP conformance suite.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=tests/out
mkdir -p "$OUT"
export SANDBOX_MCP_BIN="$PWD/$BUILD/asan/sandbox-mcp"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
passed=0
failed=0
summary=""

add() { # suite passed failed
    passed=$((passed + $2))
    failed=$((failed + $3))
    summary="$summary$(printf '  %-20s %4d passed, %d failed' "$1" "$2" "$3")
"
}

# The debian sandbox template, shared by the suites that need it (tests/lib/server.mjs
# debianTemplate()): built now, beside the unit tests, so that it is ready when they get there,
# at a lower priority than the tests, which mostly wait on sandboxes and leave it the rest. It
# is kept between runs on one machine and only verified when up to date.
export SANDBOX_MCP_TEST_TEMPLATES=${SANDBOX_MCP_TEST_TEMPLATES:-/var/tmp/sandbox-mcp-templates-test}
mkdir -p "$SANDBOX_MCP_TEST_TEMPLATES"
nice -n 10 env -u SANDBOX_TEMPLATE SANDBOX_TEMPLATE_DIR="$SANDBOX_MCP_TEST_TEMPLATES" \
    "$BUILD/sandbox-mcp" template build debian --data-dir "$SANDBOX_MCP_TEST_TEMPLATES" \
    --env-file /dev/null > "$OUT/template.log" 2>&1 &
template_pid=$!

# A throwaway PostgreSQL cluster (tests/lib/pg.sh) for the tests on PostgreSQL: the unit tests
# that open a store, run a second time; the integration files pg_*.test.mjs, which run others
# again with their servers' stores in it; and the nodes of cluster.test.mjs and of the SDK suite.
PG_DIR=/var/tmp/smcp-pg-$$
trap 'sh tests/lib/pg.sh stop "$PG_DIR"' EXIT INT TERM
if PG_URL=$(sh tests/lib/pg.sh start "$PG_DIR" 2> "$OUT/pg.log"); then
    export SANDBOX_MCP_TEST_DATABASE_URL="$PG_URL"
else
    PG_URL=""
    echo "-- cannot start PostgreSQL:"; cat "$OUT/pg.log"
fi

unit_suite() { # name [only the tests that open a store]
    up=0 uf=0
    for t in "$BUILD"/asan/tests/test_*; do
        case "$t" in *.d) continue ;; esac
        name=$(basename "$t")
        if [ -n "${2:-}" ]; then
            grep -q test_temp_db "tests/unit/$name.c" 2>/dev/null || continue
        fi
        log="$OUT/$name${2:+.pg}.log"
        if [ -n "${2:-}" ] && [ -z "$PG_URL" ]; then
            echo "-- $name: no PostgreSQL to run on" > "$log"; rc=1
        elif [ -n "${2:-}" ]; then
            "$t" > "$log" 2>&1; rc=$?
        else
            env -u SANDBOX_MCP_TEST_DATABASE_URL "$t" > "$log" 2>&1; rc=$?
        fi
        line=$(tail -n 1 "$log")
        p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
        f=$(echo "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
        if [ -z "$p" ]; then p=0; f=1; fi
        if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
        [ "$f" -ne 0 ] && { echo "-- $name failed:"; cat "$log"; }
        echo "   $name: $line"
        up=$((up + p)) uf=$((uf + f))
    done
    add "$1" $up $uf
}
echo "== unit tests (ASan/UBSan)"
unit_suite unit
echo "== unit tests that open a store, on PostgreSQL"
unit_suite unit-postgres pg

echo "== fuzz corpus replay"
fp=0 ff=0
for f in "$BUILD"/fuzz/fuzz_*; do
    case "$f" in *.d) continue ;; esac
    name=$(basename "$f")
    if "$f" -runs=0 "tests/fuzz/corpus/$name" > "$OUT/$name.log" 2>&1; then
        fp=$((fp + 1)); echo "   $name: $(ls "tests/fuzz/corpus/$name" | wc -l) inputs ok"
    else
        ff=$((ff + 1)); echo "-- $name failed:"; tail -n 30 "$OUT/$name.log"
    fi
done
add fuzz $fp $ff

node_suite() { # name file...
    name=$1
    shift
    [ -e "$1" ] || return 0
    echo "== $name"
    # Two test files at a time: most of a file's time is spent waiting on sandboxes, agents and
    # servers, so a second file uses the core the first leaves idle.
    node --test --test-concurrency="${TEST_CONCURRENCY:-2}" --test-reporter=tap "$@" \
        > "$OUT/$name.tap" 2>&1
    p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$OUT/$name.tap" | tail -n 1)
    f=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$OUT/$name.tap" | tail -n 1)
    [ -n "$p" ] || p=0
    [ -n "$f" ] || f=1
    if [ "$f" -ne 0 ]; then
        echo "-- $name failures:"; grep -B2 -A25 '^not ok\|^    not ok' "$OUT/$name.tap" | head -n 150
    fi
    echo "   $p passed, $f failed"
    add "$name" "$p" "$f"
}
node_suite integration tests/integration/*.test.mjs
node_suite e2e tests/e2e/*.test.mjs
if [ -x tests/conformance/run.sh ] || [ -f tests/conformance/run.sh ]; then
    echo "== MCP conformance suite"
    sh tests/conformance/run.sh > "$OUT/conformance.log" 2>&1
    rc=$?
    line=$(grep '^conformance: ' "$OUT/conformance.log" | tail -n 1)
    sed -n '/=== SUMMARY ===/,$p' "$OUT/conformance.log" | sed 's/\x1b\[[0-9;]*m//g' | sed 's/^/   /'
    p=$(echo "$line" | sed -n 's/^conformance: \([0-9]*\) passed, \([0-9]*\) failed.*/\1/p')
    f=$(echo "$line" | sed -n 's/^conformance: \([0-9]*\) passed, \([0-9]*\) failed.*/\2/p')
    [ -n "$p" ] || p=0
    [ -n "$f" ] || f=1
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    [ $rc -ne 0 ] && tail -n 40 "$OUT/conformance.log"
    add conformance "$p" "$f"
fi

wait "$template_pid"
echo "== debian template: $(grep -E '^template debian: (built|up to date)' "$OUT/template.log" | tail -n 1)"

echo
echo "== summary"
printf '%s' "$summary"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

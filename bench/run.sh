#!/bin/sh
# Run every benchmark against the release build, one after another; each writes its section to
# bench/out/<name>.md and its headline rows to bench/out/<name>.json, and bench/report.mjs then
# writes docs/BENCHMARKS.md from this run alone.
set -e
cd "$(dirname "$0")/.."
mkdir -p bench/out
rm -f bench/out/*.md bench/out/*.json
start=$(date +%s)
names=""
for name in sandbox mcp clients proxy egress runs runstart agents envs oauth cluster disk; do
    echo "== $name"
    BENCH_OUT="bench/out/$name.md" BENCH_HEADLINE="bench/out/$name.json" node "bench/$name.mjs" $BENCH_ARGS
    names="$names $name"
done
node bench/report.mjs $(($(date +%s) - start)) $names

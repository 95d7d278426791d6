#!/bin/sh
# Run every benchmark against the release build; each writes a markdown section to bench/out/.
# The results are pasted into docs/BENCHMARKS.md by hand, with the machine they ran on.
set -e
cd "$(dirname "$0")/.."
mkdir -p bench/out
for b in bench/*.mjs; do
    case "$b" in bench/lib.mjs) continue ;; esac
    name=$(basename "$b" .mjs)
    echo "== $name"
    BENCH_OUT="bench/out/$name.md" node "$b" $BENCH_ARGS
done

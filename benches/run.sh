#!/usr/bin/env bash
# Runs the criterion harness RUNS times (default 3) and keeps each run's
# estimates under $CARGO_TARGET_DIR/runs/<n>/, then prints the tables of
# benches/README.md (median over runs, min–max, per-run ratios).
#
#   benches/run.sh 3            # three full runs, then the report
#   benches/run.sh 0            # report only, from the runs already kept
#   FILTER=peers benches/run.sh 2   # only benchmarks matching a filter
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/bench}"
RUNS="${1:-3}"
KEEP="${KEEP:-$CARGO_TARGET_DIR/runs}"
mkdir -p "$KEEP"
for _ in $(seq 1 "$RUNS"); do
    n=$(($(find "$KEEP" -mindepth 1 -maxdepth 1 -type d | wc -l) + 1))
    rm -rf "$CARGO_TARGET_DIR/criterion"
    cargo bench --bench main --features coarse-clock -- --noplot ${FILTER:+"$FILTER"} >"$KEEP/log.$n" 2>&1
    cp -r "$CARGO_TARGET_DIR/criterion" "$KEEP/$n"
    echo "run $n done" >&2
done
python3 benches/report.py "$KEEP"/[0-9]*

#!/usr/bin/env bash
# Instructions per call under callgrind: for each case, run the driver with
# N = 0 and N = 10^6 and print (Ir(N) - Ir(0)) / N. Deterministic, unlike
# wall time on a shared machine.
#
#   benches/callgrind.sh                 # every case
#   benches/callgrind.sh failfast recloser   # only these impls
#
# Needs valgrind. Builds with CARGO_TARGET_DIR (default target/bench).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/bench}"
N="${N:-1000000}"
OUT="${OUT:-$CARGO_TARGET_DIR/callgrind}"
mkdir -p "$OUT"

# `tower` adds the keyed layer's rows (ff_keyed*); the breaker paths are the same code.
# FEATURES="tower,tracing,metrics" adds the per-call observability rows
# (ff_keyed_traced, ff_keyed_metrics, ff_keyed_histogram) and builds every
# layer row with those features compiled in.
FEATURES="${FEATURES:-tower}"
cargo bench --no-run --features "$FEATURES" --bench callgrind >&2
BIN=$(cargo bench --no-run --features "$FEATURES" --bench callgrind --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "callgrind" and m.get("executable"):
        print(m["executable"])')

# impl state: closed successes for everything; open rejections for breakers.
CASES=()
for impl in $("$BIN" list); do
    if [ $# -gt 0 ] && [[ ! " $* " =~ " $impl " ]]; then continue; fi
    CASES+=("$impl closed")
    case "$impl" in
    bare | failsafe_default | floor_* | ff_count* | ff_time* | ff_*slow | ff_failure | ff_ramp | ff_budget* | ff_retry* | ff_keyed* | reg_*) ;;
    *) CASES+=("$impl open") ;;
    esac
done

ir() { # impl state n -> total Ir
    local f="$OUT/$1.$2.$3.out"
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*measured*' \
        --callgrind-out-file="$f" "$BIN" "$1" "$2" "$3" >/dev/null 2>&1
    awk '/^(summary|totals):/ { print $2; exit }' "$f"
}

printf '| impl | state | Ir(0) | Ir(%s) | instr/call |\n|---|---|---:|---:|---:|\n' "$N"
for c in "${CASES[@]}"; do
    set -- $c
    a=$(ir "$1" "$2" 0)
    b=$(ir "$1" "$2" "$N")
    printf '| %s | %s | %s | %s | %s |\n' "$1" "$2" "$a" "$b" \
        "$(python3 -c "print(f'{($b - $a) / $N:.1f}')")"
done

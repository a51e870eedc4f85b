#!/usr/bin/env bash
# Mutation testing of the core (issue 3, item 4) with cargo-mutants.
#
# What is mutated, which tests run against each mutant, and the excluded
# (equivalent) mutants with their reasons are in `.cargo/mutants.toml`; the
# last full run is summarised in `.cargo/mutants-summary.md`.
#
#   .ci/mutants.sh              full run: every mutant of the core modules
#                               (about an hour on 2 busy cores; on demand)
#   .ci/mutants.sh diff [BASE]  only the mutants in lines changed since BASE
#                               (default HEAD~1, the previous commit); what
#                               .ci/run does
#
# Extra arguments after the mode go to `cargo mutants` (e.g. `--shard 1/4`,
# `-F REGEX`, `-o DIR`). The report is in mutants.out/ (not committed).
# Exit status: 0 when no mutant survives; 2 when one is missed (it is listed
# in mutants.out/missed.txt); 4 when the unmutated tests fail. Mutants that
# time out (an infinite loop) count as caught: cargo-mutants' status 3 is
# turned into 0 after listing them.
#
# Not `--in-place`: the copy in a temp dir keeps a tree that others are
# editing undisturbed. `--jobs 1`: the machine is shared; raise it on a
# dedicated runner.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=27.1.0
if ! cargo mutants --version 2>/dev/null | grep -qx "cargo-mutants $VERSION"; then
  echo "installing cargo-mutants $VERSION"
  cargo install cargo-mutants --locked --version "$VERSION"
fi

export CARGO_TERM_COLOR=never
# Loaded runners make the auto-set timeout (from the baseline) too tight.
export CARGO_MUTANTS_MINIMUM_TEST_TIMEOUT="${CARGO_MUTANTS_MINIMUM_TEST_TIMEOUT:-60}"
# One fixed seed for every proptest: each mutant meets the same cases as the
# baseline, so a mutant is never "caught" by a case the baseline never ran.
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261130}"

mode="${1:-full}"
[ $# -gt 0 ] && shift
args=(--test-tool cargo --jobs 1 --no-shuffle)

case "$mode" in
  full) ;;
  diff)
    base="${1:-HEAD~1}"
    [ $# -gt 0 ] && shift
    if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
      echo "mutants: no commit $base to diff against; nothing to do"
      exit 0
    fi
    diff_file="$(mktemp "${TMPDIR:-/tmp}/failfast-mutants.XXXXXX.diff")"
    trap 'rm -f "$diff_file"' EXIT
    git diff "$base" -- src/ >"$diff_file"
    if [ ! -s "$diff_file" ]; then
      echo "mutants: src/ unchanged since $base; nothing to mutate"
      exit 0
    fi
    args+=(--in-diff "$diff_file")
    ;;
  *)
    echo "usage: $0 [full | diff [BASE]] [cargo-mutants args...]" >&2
    exit 1
    ;;
esac

# Where the report goes: ./mutants.out unless `-o DIR` / `--output DIR` says otherwise.
out=mutants.out
prev=
for a in "$@"; do
  case "$prev" in -o | --output) out="$a/mutants.out" ;; esac
  case "$a" in --output=*) out="${a#--output=}/mutants.out" ;; esac
  prev="$a"
done

status=0
cargo mutants "${args[@]}" "$@" || status=$?
if [ "$status" -eq 3 ]; then
  echo "mutants: timeouts (caught by hanging):"
  cat "$out/timeout.txt" 2>/dev/null || true
  # cargo-mutants reports 3 when any mutant timed out, even if others were
  # missed: only a clean missed list makes the timeouts harmless.
  if [ -s "$out/missed.txt" ]; then status=2; else status=0; fi
fi
case "$status" in
  0) echo "mutants: OK, no mutant survived" ;;
  2) echo "mutants: FAILED, missed mutants:"; cat "$out/missed.txt" 2>/dev/null || true ;;
  *) echo "mutants: FAILED, cargo mutants exited with $status" ;;
esac
exit "$status"

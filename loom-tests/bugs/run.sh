#!/usr/bin/env bash
# The catalogue of deliberate bugs (loom-tests/README.md, "The bug catalogue").
#
# Each `*.patch` here breaks the core in one realistic way. Its header names
# the tests that must catch it, one per line:
#
#   # caught-by: loom BINARY TEST    a loom model (loom-tests/tests/BINARY.rs; `lib`
#                                    for one in src/, TEST its full path), p = 2
#   # caught-by: suite BINARY TEST   an ordinary test (tests/BINARY.rs; `lib` for
#                                    a unit test in src/, TEST its full path)
#
# For each selected patch, this script copies the working tree to a scratch
# directory, applies the patch (and fails loudly if it no longer applies),
# builds, and runs every named test, which must FAIL. Before that it runs the
# same tests on the unpatched copy, where they must PASS.
#
#   loom-tests/bugs/run.sh [--cheap | --all] [--changed REV] [NAME...]
#
#   --cheap   (default) only the loom catchers
#   --all     the loom and the suite catchers
#   --changed REV
#             only the selected bugs one of whose files differs between REV
#             and the working tree (`git diff --name-only REV`, and untracked
#             files): the files its patch touches, its `.patch` file, its
#             catchers' sources (`loom BIN`: loom-tests/tests/BIN.rs and
#             loom-tests/src/; `suite BIN`: tests/BIN.rs, its
#             .proptest-regressions, tests/BIN/ and the modules it declares
#             (tests/common/, ...); `lib`: the files of the test's module
#             path in src/), this script, Cargo.toml, Cargo.lock,
#             loom-tests/Cargo.toml, and for a loom catcher src/sync.rs (the
#             loom shim). Each other bug is named as skipped. A REV that does
#             not resolve (a shallow clone) selects every bug. What .ci/run
#             runs, with HEAD~1: the last commit, or for a merge its whole
#             branch (the diff against its first parent), as .ci/mutants.sh.
#             A change elsewhere can still stop a catcher from catching:
#             run the whole catalogue by hand (or nightly) without it.
#   NAME      a patch name without `.patch` (default: every patch)
#
# Scratch: $FAILFAST_BUGS_DIR (default target/bugs in this checkout): `tree/`
# is the copy (remade for every bug), `target/` the CARGO_TARGET_DIR every bug
# shares (`target/loom` for the models, `target/debug` for the suite: only
# failfast and the test crates recompile per bug), `logs/` the output of every
# build and test run. Never the checkout's own target dirs: cargo gives the
# copy's crates the same unit hashes as the checkout's (path crates hash
# relative to the workspace), so a shared target dir would leave a patched
# build where the checkout's cargo sees a fresh one. A missing scratch target
# is seeded with hard links to the dependencies the checkout's has built
# (target/loom, target/debug; see `seed`), so a CI run that already built the
# models builds no dependency again, and the seed takes no disk of its own.
#
# LOOM_MAX_PREEMPTIONS defaults to 2; the suite tests run with
# PROPTEST_CASES=1000 and a fixed PROPTEST_RNG_SEED. A test still running
# after BUG_TEST_TIMEOUT seconds (default 600) is stopped and counts as caught
# (the bug made it hang).
#
# Exit status: 0 when every selected patch applies and is caught by each of
# its tests; 1 otherwise (including a baseline failure or a stale patch).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bugs="$root/loom-tests/bugs"

mode=cheap
names=()
changed_rev=
while [ $# -gt 0 ]; do
  case "$1" in
    --cheap) mode=cheap ;;
    --all) mode=all ;;
    --changed)
      if [ $# -lt 2 ]; then echo "--changed needs a revision (say HEAD~1)" >&2; exit 1; fi
      changed_rev="$2"; shift ;;
    --changed=*) changed_rev="${1#--changed=}" ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 1 ;;
    *) names+=("${1%.patch}") ;;
  esac
  shift
done
if [ ${#names[@]} -eq 0 ]; then
  for p in "$bugs"/*.patch; do names+=("$(basename "$p" .patch)"); done
fi
for n in "${names[@]}"; do
  if [ ! -f "$bugs/$n.patch" ]; then echo "no such bug: $n" >&2; exit 1; fi
done

scratch="${FAILFAST_BUGS_DIR:-$root/target/bugs}"
mkdir -p "$scratch"
scratch="$(cd "$scratch" && pwd)"
targets="$scratch/target"
tree="$scratch/tree"
logs="$scratch/logs"
mkdir -p "$logs" "$targets"
# The scratch tree lies inside this checkout (target/bugs/tree). Without a
# ceiling, `git apply` there finds the checkout's repository above it, takes
# the patch's paths relative to the checkout's root, and skips them all as
# outside its directory, silently: every bug would build unpatched and pass.
export GIT_CEILING_DIRECTORIES="$scratch"
export CARGO_TERM_COLOR=never
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
export PROPTEST_CASES="${PROPTEST_CASES:-1000}"
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261130}"
unset LOOM_LOG LOOM_MAX_BRANCHES RUSTFLAGS

# The catchers of one patch in this mode: lines "KIND BINARY TEST".
catchers() {
  sed -n 's/^# caught-by: *\(loom\|suite\) \+\([^ ]\+\) \+\([^ ]\+\) *$/\1 \2 \3/p' "$bugs/$1.patch" |
    { if [ "$mode" = cheap ]; then grep '^loom ' || true; else cat; fi; }
}

# The files bug $1 depends on in this mode, one per line, relative to the
# checkout's root; one ending in `/` stands for everything under it. A path
# may name a file that does not exist (both `X.rs` and `X/mod.rs`).
bug_files() {
  local n="$1" kind bin test p seg mod loom=0
  printf '%s\n' "loom-tests/bugs/$n.patch" loom-tests/bugs/run.sh \
    Cargo.toml Cargo.lock loom-tests/Cargo.toml
  # What the patch touches: its `--- a/` and `+++ b/` paths (a created or
  # deleted file has /dev/null on one side).
  sed -n 's#^\(---\|+++\) [ab]/\([^\t]*\).*#\2#p' "$bugs/$n.patch"
  while read -r kind bin test; do
    [ -n "$kind" ] || continue
    if [ "$kind" = loom ]; then loom=1; fi
    if [ "$bin" = lib ]; then
      # A test in src/: the files of each module on its path (machine::tests::x:
      # src/machine.rs, src/machine/mod.rs, src/machine/tests.rs, ...), and
      # their proptest regressions.
      p='' mod="${test%::*}"
      for seg in ${mod//::/ }; do
        p="${p:+$p/}$seg"
        printf '%s\n' "src/$p.rs" "src/$p/mod.rs" "proptest-regressions/$p.txt"
      done
    elif [ "$kind" = loom ]; then
      printf '%s\n' "loom-tests/tests/$bin.rs" loom-tests/src/
    else
      printf '%s\n' "tests/$bin.rs" "tests/$bin.proptest-regressions" "tests/$bin/"
      if [ -f "$root/tests/$bin.rs" ]; then
        # The modules it declares (`mod common;`: tests/common/ or
        # tests/common.rs) and those it includes by path (`#[path = "..."]`).
        sed -n 's/^ *\(pub \)\?mod \([a-z0-9_]\+\);.*/\2/p' "$root/tests/$bin.rs" |
          while read -r p; do printf '%s\n' "tests/$p/" "tests/$p.rs"; done
        sed -n 's/^ *#\[path *= *"\([^"]*\)"\].*/\1/p' "$root/tests/$bin.rs" |
          while read -r p; do realpath -m --relative-to="$root" "$root/tests/$p"; done
      fi
    fi
  done < <(catchers "$n")
  if [ $loom = 1 ]; then echo src/sync.rs; fi
}

# Whether any of bug $1's files (bug_files) is in $changed (one path a line).
touched() {
  local f c
  while read -r f; do
    if [[ "$f" == */ ]]; then
      while read -r c; do
        if [[ "$c" == "$f"* ]]; then return 0; fi
      done <<<"$changed"
    elif [ -n "${changed_set[$f]:-}" ]; then
      return 0
    fi
  done < <(bug_files "$1")
  return 1
}

# --changed REV: keep the selected bugs that have a catcher in this mode and
# one of whose files changed since REV.
if [ -n "$changed_rev" ]; then
  if ! git -C "$root" rev-parse --verify --quiet "$changed_rev^{commit}" >/dev/null; then
    echo "--changed: no commit $changed_rev here (a shallow clone?): every selected bug runs"
  else
    # --no-renames: a renamed file is listed under its old name and its new.
    changed="$(
      git -C "$root" diff --no-renames --name-only "$changed_rev" --
      git -C "$root" ls-files --others --exclude-standard
    )"
    declare -A changed_set=()
    while read -r f; do [ -z "$f" ] || changed_set[$f]=1; done <<<"$changed"
    kept=() considered=0 uncaught=0
    for n in "${names[@]}"; do
      if [ -z "$(catchers "$n")" ]; then uncaught=$((uncaught + 1)); continue; fi
      considered=$((considered + 1))
      if touched "$n"; then kept+=("$n"); else echo "skip $n: none of its files changed"; fi
    done
    what="bugs" note=""
    if [ "$mode" = cheap ]; then what="bugs with a loom catcher"; fi
    if [ $uncaught -gt 0 ]; then note=" ($uncaught more have no $mode catcher: --all)"; fi
    echo "--changed $changed_rev: running ${#kept[@]} of $considered $what," \
      "$((considered - ${#kept[@]})) skipped$note"
    if [ ${#kept[@]} -eq 0 ]; then
      echo "bugs: OK, nothing to run (no bug's files changed since $changed_rev)"
      exit 0
    fi
    names=("${kept[@]}")
  fi
fi

# A fresh copy of the working tree. Every file is touched so that cargo
# rebuilds the crates whose sources a previous patch changed (a copy keeps
# the original mtimes, which would look older than the last build).
fresh_tree() {
  rm -rf "$tree"
  mkdir -p "$tree"
  tar -C "$root" -c --exclude=./target --exclude=./.git --exclude='./mutants.out*' . |
    tar -C "$tree" -x
  find "$tree" -type f -exec touch {} +
}

# Whether every file patch $1 names now differs from the checkout's copy (a
# patch that applied but changed nothing would test the unpatched code).
patched() {
  local added removed path
  while read -r added removed path; do
    if cmp -s "$root/$path" "$tree/$path"; then return 1; fi
  done < <(cd "$tree" && git apply --numstat "$bugs/$1.patch")
}

# `cargo test` in the scratch tree, for loom models or for the ordinary suite.
# $limit: an optional `timeout SECONDS` prefix (set while a test runs).
limit=()
# Loom: `-p failfast-loom-tests --test BIN` for a model in loom-tests/, or
# `-p failfast --lib` for one in a `cfg(all(test, failfast_loom))` module of src/.
loom_cargo() {
  (cd "$tree" && RUSTFLAGS="--cfg failfast_loom" CARGO_TARGET_DIR="$targets/loom" \
    "${limit[@]}" cargo test -q --release "$@")
}
suite_cargo() {
  (cd "$tree" && CARGO_TARGET_DIR="$targets" \
    "${limit[@]}" cargo test -q --all-features "$@")
}

# Seeds the scratch target dir $1 (loom or debug) from the checkout's, once:
# hard links to the dependencies' units (cargo never rewrites a fresh unit),
# and none of this workspace's own (failfast, its tests, examples, the loom
# crate), which the scratch tree builds anew into files of its own. A full
# copy cost the checkout's whole target again (10 GB and more); a link to one
# of the workspace's own files would let a patched build write through it
# into the checkout's target, since both trees give those units the same
# hashes.
seed() {
  local from="$root/target/$1" to="$targets/$1" profile h
  if [ -d "$to" ] || [ ! -d "$from" ]; then return 0; fi
  cp -al "$from" "$to"
  while read -r profile; do
    profile="$(dirname "$profile")"
    for h in $(ls "$profile/.fingerprint" | sed -n 's/^failfast\(-loom-tests\)\?-\([0-9a-f]\{16\}\)$/\2/p'); do
      find "$profile/deps" -maxdepth 1 -name "*-$h*" -delete
    done
    rm -rf "$profile"/.fingerprint/failfast-* "$profile"/build/failfast-* \
      "$profile/examples" "$profile/incremental"
    find "$profile" -maxdepth 1 -type f -delete
  done < <(find "$to" -maxdepth 2 -type d -name .fingerprint)
}

# Builds the test binaries the catchers need; prints the seconds it took.
build() {
  local log="$1"; shift
  local loom=() loomlib=0 suite=() kind bin test
  while read -r kind bin test; do
    [ -n "$kind" ] || continue
    if [ "$kind" = loom ] && [ "$bin" = lib ]; then loomlib=1
    elif [ "$kind" = loom ]; then loom+=(--test "$bin")
    elif [ "$bin" = lib ]; then
      # `--lib` once, however many unit tests are named (cargo refuses two).
      if [[ " ${suite[*]} " != *" --lib "* ]]; then suite+=(--lib); fi
    else suite+=(--test "$bin"); fi
  done <<<"$*"
  local t0=$EPOCHREALTIME
  if [ ${#loom[@]} -gt 0 ] || [ $loomlib = 1 ]; then seed loom; fi
  if [ ${#suite[@]} -gt 0 ]; then seed debug; fi
  if [ ${#loom[@]} -gt 0 ]; then
    loom_cargo -p failfast-loom-tests --no-run "${loom[@]}" >>"$log" 2>&1 || return 1
  fi
  if [ $loomlib = 1 ]; then loom_cargo -p failfast --lib --no-run >>"$log" 2>&1 || return 1; fi
  if [ ${#suite[@]} -gt 0 ]; then suite_cargo --no-run "${suite[@]}" >>"$log" 2>&1 || return 1; fi
  since "$t0"
}

# Runs one catcher; echoes "pass", "fail", "timeout" or "error" (no test of that name ran).
run_one() {
  local kind="$1" bin="$2" test="$3" log="$4" rc=0
  local limit=(timeout "${BUG_TEST_TIMEOUT:-600}")
  if [ "$kind" = loom ] && [ "$bin" = lib ]; then
    loom_cargo -p failfast --lib -- --exact "$test" >"$log" 2>&1 || rc=$?
  elif [ "$kind" = loom ]; then
    loom_cargo -p failfast-loom-tests --test "$bin" -- --exact "$test" >"$log" 2>&1 || rc=$?
  else
    local target=(--test "$bin")
    if [ "$bin" = lib ]; then target=(--lib); fi
    suite_cargo "${target[@]}" -- --exact "$test" >"$log" 2>&1 || rc=$?
  fi
  if [ $rc -eq 124 ]; then echo timeout
  elif grep -q 'test result: ok. 1 passed' "$log"; then echo pass
  elif grep -q 'test result: FAILED. 0 passed; 1 failed' "$log"; then echo fail
  else echo error
  fi
}

# Wall-clock seconds since $1 (an $EPOCHREALTIME), to 0.1 s.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

rows=()
status=0
start=$EPOCHREALTIME
row() { rows+=("$(printf '%-30s %-6s %-70s %-9s %6s' "$@")"); }

# 1. Every catcher passes on the unpatched tree.
all=""
for n in "${names[@]}"; do
  all+="$(catchers "$n")"$'\n'
done
all="$(sort -u <<<"$all" | sed '/^$/d')"
if [ -z "$all" ]; then
  # Every selected patch lacks a catcher of this mode (say --cheap over
  # suite-only bugs): nothing to build or run, and nothing caught.
  echo "no $mode catcher among the selected patches: run with --all" >&2
  exit 1
fi
echo "== baseline: $(wc -l <<<"$all") tests on the unpatched tree ($mode, LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS)"
fresh_tree
if ! secs=$(build "$logs/baseline.build.log" "$all"); then
  echo "FAILED: the unpatched tree does not build; see $logs/baseline.build.log" >&2
  exit 1
fi
row "(unpatched)" build "" "" "$secs"
while read -r kind bin test; do
  t0=$EPOCHREALTIME
  got=$(run_one "$kind" "$bin" "$test" "$logs/baseline.$bin.$test.log")
  ok=yes
  if [ "$got" != pass ]; then ok="NO ($got)"; status=1; fi
  row "(unpatched)" "$kind" "$bin::$test" "passes:$ok" "$(since "$t0")"
done <<<"$all"

# 2. Every patch applies, builds, and each of its catchers fails.
for n in "${names[@]}"; do
  cs="$(catchers "$n")"
  if [ -z "$cs" ]; then
    row "$n" "-" "(no $mode catcher: run with --all)" "skipped" ""
    continue
  fi
  echo "== $n"
  fresh_tree
  if ! (cd "$tree" && git apply --check "$bugs/$n.patch" 2>"$logs/$n.apply.log" &&
    git apply "$bugs/$n.patch") || ! patched "$n"; then
    echo "!! $n.patch NO LONGER APPLIES to the current tree: update it (loom-tests/README.md)." >&2
    sed 's/^/   /' "$logs/$n.apply.log" >&2
    row "$n" "-" "(patch does not apply)" "STALE" ""
    status=1
    continue
  fi
  if ! secs=$(build "$logs/$n.build.log" "$cs"); then
    echo "!! $n: the patched tree does not build; see $logs/$n.build.log" >&2
    row "$n" "-" "(patched tree does not build)" "STALE" ""
    status=1
    continue
  fi
  row "$n" build "" "" "$secs"
  while read -r kind bin test; do
    t0=$EPOCHREALTIME
    got=$(run_one "$kind" "$bin" "$test" "$logs/$n.$bin.$test.log")
    case "$got" in
      fail) caught=yes ;;
      timeout) caught="yes (hang)" ;;
      *) caught="NO ($got)"; status=1
         echo "!! $n is not caught by $bin::$test; see $logs/$n.$bin.$test.log" >&2 ;;
    esac
    row "$n" "$kind" "$bin::$test" "$caught" "$(since "$t0")"
  done <<<"$cs"
done

echo
printf '%-30s %-6s %-70s %-9s %6s\n' bug kind "catching test" caught seconds
printf '%s\n' "${rows[@]}"
echo "total: $(since "$start") s wall"
if [ $status -eq 0 ]; then
  echo "bugs: OK, every bug applies and is caught"
else
  echo "bugs: FAILED (see the rows marked NO or STALE above)"
fi
exit $status

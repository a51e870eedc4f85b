#!/usr/bin/env bash
# Mutation testing with cargo-mutants, in groups of files, each group against
# the test binaries that exercise it.
#
# What is mutated (`examine_globs`), the features built (all of them: the
# tower, http, reqwest, redis, serde, tracing and metrics lines are mutated
# like the rest) and the excluded (equivalent) mutants with their reasons are
# in `.cargo/mutants.toml`; the groups and their tests are below; the last
# full run is summarised in `.cargo/mutants-summary.md`.
#
#   .ci/mutants.sh full [GROUP...]     every mutant of the groups' files (all
#                                      groups when none is named; about 30 h
#                                      on 2 busy cores: on demand, by group)
#   .ci/mutants.sh diff [BASE] [GROUP...]
#                                      only the mutants in lines changed
#                                      since BASE (default HEAD~1: the last
#                                      commit; for a merge, give the merge
#                                      base to cover the whole branch), each
#                                      changed file in its group's run; what
#                                      .ci/run does
#   .ci/mutants.sh groups              list the groups, their files and tests
#
# Extra arguments after `--` go to every `cargo mutants` call (e.g.
# `-- --shard 1/4`). Each group's report is in mutants.out/GROUP/mutants.out
# (not committed).
#
# MUTANTS_MAX=N (CI sets it) caps the mutants tested in one call: when more
# are selected, a slice of about N of them is tested (`--shard K/M` of every
# group, K chosen from HEAD's hash, so successive commits test different
# slices) and the rest is named as not run.
#
# Held files: a survivor in a file matching HELD_RE below fails the run
# (exit 2). A survivor elsewhere is printed as a finding but does not fail
# it: those files have not had their full run recorded yet
# (`.cargo/mutants-summary.md` says which), and join HELD_RE when they have.
# Exit status: 0 when no mutant of a held file survives; 2 when one is
# missed (listed in the group's missed.txt and printed at the end); 4 when
# the unmutated tests fail.
# Mutants that time out (an infinite loop) count as caught: cargo-mutants'
# status 3 is turned into 0 after listing them.
#
# Builds go to $CARGO_TARGET_DIR (default: this checkout's target/, whose
# dependencies earlier CI steps built with --all-features), so only the crate
# is compiled again; set it elsewhere to keep a working tree's own builds
# unblocked. Such a directory may share the dependencies' files with another
# build (a hard-linked copy), never the crate's own: cargo rewrites its
# fingerprints in place, so another build of the crate through a shared
# inode makes a mutant's build look fresh, and its tests run the code of
# the mutant before (seen on a hard-linked copy: a mutant "missed" that its
# unit test catches).
#
# Not `--in-place`: the copy in a temp dir keeps a tree that others are
# editing undisturbed. `--jobs 1`: the machine is shared; raise it on a
# dedicated runner.
set -euo pipefail
cd "$(dirname "$0")/.."

# group NAME FILE_REGEX TEST...  (`lib` is the crate's unit tests)
# A file belongs to the first group whose regex matches its path; every
# mutated file must belong to one (`groups` checks it against the config).
GROUPS_TABLE=(
  "registry|^src/registry/|lib registry_model registry_behaviour registry_maintenance registry_capacity registry_discovery registry_hashing registry_config registry_str_keys registry_host_keys fleet_cap outliers hostile_keys key_normalisation"
  "hooks|^src/hooks\.rs$|lib hook_every_cause registry_behaviour s12_observability manual_modes"
  "outlier|^src/(outlier/|config/outliers\.rs$)|lib outliers outlier_evidence outlier_model outlier_memory s12_observability metrics_totals config_file"
  "share|^src/share/|lib share_replica share_spread share_store_faults share_convergence replica_model remote_reports metrics_totals alloc"
  "redis|^src/redis/|lib redis_store_rules redis_sync redis_faults redis_cluster"
  "http|^src/(http/|authority\.rs$|fault\.rs$)|lib tower_eos faults hints key_normalisation stream_progress fallback_layer example_tonic reqwest_middleware client_uploads retry_tower retry_reqwest"
  "tower|^src/tower/|lib tower_layers tower_eos faults unanswered stream_progress hostile_clients eject_ramp hints fallback_layer hook_every_cause call_metrics trace_calls alloc_keyed downstream_time client_uploads retry_tower retry_single"
  "reqwest|^src/reqwest[./]|reqwest_middleware reqwest_chain client_uploads retry_reqwest"
  "retry|^src/(config/)?retry[./]|lib retry_budget retry_model retry_config registry_model"
  "export|^src/export/|lib metrics_totals call_metrics trace_calls hook_every_cause s12_observability otel_export"
  "config|^src/config/|lib config_file config_errors"
  "hint|^src/hint\.rs$|lib hints recovery model registry_model"
  "core|^src/|lib model retry_budget windows recovery outliers outlier_evidence outlier_model manual_modes config_errors coarse_clock properties admission_transition registry_behaviour s01_slow_dependency s02_slow_call_breaker s03_retry s04_business_errors s05_keys_isolate s07_probe_race s08_consecutive_pix s09_late_results s10_lost_probe s11_jitter s12_observability clock_reads introspection plain_breaker endings neutral open_rejection remote_reports panicking_clock builder_templates fleet_cap share_replica fallback tower_layers call_metrics"
)

# Files whose every mutant is caught or excluded with its reason (their full
# run is recorded in `.cargo/mutants-summary.md`).
HELD_RE='^src/((state|machine|policy|ramp|storage|ticket|breaker|permit|builder|remote)\.rs|window/|registry/|outlier/(tally|sums|figures|pool|config|evidence|mark)\.rs)'

VERSION=27.1.0

export CARGO_TERM_COLOR=never
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
# Incremental builds of the crate (CI turns them off for its other steps):
# each mutant changes one line, and the crate is most of each build.
export CARGO_INCREMENTAL=1
# Loaded runners make the auto-set timeout (from the baseline) too tight.
export CARGO_MUTANTS_MINIMUM_TEST_TIMEOUT="${CARGO_MUTANTS_MINIMUM_TEST_TIMEOUT:-60}"
# One fixed seed for every proptest: each mutant meets the same cases as the
# baseline, so a mutant is never "caught" by a case the baseline never ran.
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261130}"

group_name() { printf '%s' "${1%%|*}"; }
# The regex is everything between the first and the last `|` (it may hold `|` itself).
group_re() { local r="${1#*|}"; printf '%s' "${r%|*}"; }
group_tests() { printf '%s' "${1##*|}"; }

# The group a file belongs to (first match), or nothing.
group_of() {
  local g
  for g in "${GROUPS_TABLE[@]}"; do
    if [[ "$1" =~ $(group_re "$g") ]]; then group_name "$g"; return; fi
  done
}

mode="${1:-full}"
[ $# -gt 0 ] && shift
base=
if [ "$mode" = diff ] && [ $# -gt 0 ] && [ "$1" != -- ] && git rev-parse --verify --quiet "$1^{commit}" >/dev/null; then
  base="$1"; shift
fi
[ "$mode" = diff ] && [ -z "$base" ] && base=HEAD~1
wanted=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do wanted+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
extra=("$@")

if [ "$mode" = diff ]; then
  if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
    echo "mutants: no commit $base to diff against; nothing to do"
    exit 0
  fi
  if git diff --quiet "$base" -- src/; then
    echo "mutants: src/ unchanged since $base; nothing to mutate"
    exit 0
  fi
fi

# Installed only when there is something to mutate (the install costs
# ~2.5 min of a clean CI run).
if ! cargo mutants --version 2>/dev/null | grep -qx "cargo-mutants $VERSION"; then
  echo "installing cargo-mutants $VERSION"
  cargo install cargo-mutants --locked --version "$VERSION"
fi

# The files cargo-mutants would mutate (examine_globs less exclude_globs),
# listed once.
MUTATED_FILES="$(cargo mutants --list-files 2>/dev/null | sed 's/ .*//')"
mutated_files() { printf '%s\n' "$MUTATED_FILES"; }

case "$mode" in
  groups)
    for g in "${GROUPS_TABLE[@]}"; do
      printf '%s: %s\n  tests: %s\n' "$(group_name "$g")" "$(group_re "$g")" "$(group_tests "$g")"
    done
    missing=0
    for f in $(mutated_files); do
      if [ -z "$(group_of "$f")" ]; then echo "no group for $f"; missing=1; fi
    done
    exit "$missing"
    ;;
  full | diff) ;;
  *)
    echo "usage: $0 full [GROUP...] [-- ARGS] | diff [BASE] [GROUP...] [-- ARGS] | groups" >&2
    exit 1
    ;;
esac

# Which groups run: those named, else all (full) or those with a changed
# mutated file (diff).
run=()
for g in "${GROUPS_TABLE[@]}"; do
  name="$(group_name "$g")"
  if [ ${#wanted[@]} -gt 0 ]; then
    [[ " ${wanted[*]} " == *" $name "* ]] || continue
  elif [ "$mode" = diff ]; then
    hit=0
    for f in $(git diff --name-only "$base" -- src/); do
      [ "$(group_of "$f")" = "$name" ] && hit=1
    done
    [ "$hit" -eq 1 ] || continue
  fi
  run+=("$g")
done
if [ ${#run[@]} -eq 0 ]; then
  echo "mutants: no group to run"
  exit 0
fi

# A group's mutated files, one a line: those its regex matches, less the
# files an earlier group already takes.
group_files() {
  local f
  for f in $(mutated_files); do
    if [ "$(group_of "$f")" = "$(group_name "$1")" ]; then printf '%s\n' "$f"; fi
  done
}

# The same as one regex over mutant names.
names_re() {
  local f re=
  for f in $(group_files "$1"); do
    re+="${re:+|}$(printf '%s' "$f" | sed 's/[.]/\\./g')"
  done
  printf '^(%s):' "$re"
}

# Each group's mutants are also chosen by a diff of its own files only: the
# lines changed since BASE (diff), or every line (full: the files against
# git's empty tree). cargo-mutants 27.1 lets struct-field deletions ("delete
# field X from struct Y expression") through every name and file filter
# (`--re`, `--exclude-re`, `-f`; its issue 632), so without this a group's
# run also tests other files' field deletions against the wrong tests;
# `--in-diff` is the one filter they obey.
EMPTY_TREE=4b825dc642cb6eb9a060e54bf8d69288fbee4904
declare -A group_diff=()
diff_dir="$(mktemp -d "${TMPDIR:-/tmp}/failfast-mutants.XXXXXX")"
trap 'rm -rf "$diff_dir"' EXIT
for g in "${run[@]}"; do
  name="$(group_name "$g")"
  mapfile -t files < <(group_files "$g")
  [ ${#files[@]} -gt 0 ] || continue
  git diff "${base:-$EMPTY_TREE}" -- "${files[@]}" >"$diff_dir/$name.diff"
  [ -s "$diff_dir/$name.diff" ] && group_diff[$name]="$diff_dir/$name.diff"
done

# Group arguments: its files and its tests.
group_args() {
  local g="$1" t
  printf '%s\n' --re "$(names_re "$g")"
  for t in $(group_tests "$g"); do
    if [ "$t" = lib ]; then printf '%s\n' --cargo-arg=--lib; else printf '%s\n' "--cargo-arg=--test=$t"; fi
  done
}

# The cap: how many mutants are selected, and the slice to test.
shard=()
if [ -n "${MUTANTS_MAX:-}" ]; then
  total=0
  for g in "${run[@]}"; do
    gd="${group_diff[$(group_name "$g")]:-}"
    [ -n "$gd" ] || continue
    mapfile -t ga < <(group_args "$g")
    n=$(cargo mutants --list --in-diff "$gd" "${ga[@]}" 2>/dev/null | wc -l)
    total=$((total + n))
  done
  if [ "$total" -gt "$MUTANTS_MAX" ]; then
    slices=$(((total + MUTANTS_MAX - 1) / MUTANTS_MAX))
    k=$(($(printf '%d' "0x$(git rev-parse --short=7 HEAD)") % slices))
    shard=(--shard "$k/$slices")
    echo "mutants: $total selected, more than MUTANTS_MAX=$MUTANTS_MAX: testing slice $k of $slices" \
      "(the others: .ci/mutants.sh ${mode} ${base} -- --shard J/$slices)"
  fi
fi

status=0
missed_all=()
for g in "${run[@]}"; do
  name="$(group_name "$g")"
  gd="${group_diff[$name]:-}"
  [ -n "$gd" ] || continue
  args=(--test-tool cargo --jobs 1 --no-shuffle -o "mutants.out/$name" --in-diff "$gd")
  mapfile -t ga < <(group_args "$g")
  args+=("${ga[@]}" "${shard[@]}")
  printf '\n--- mutants: group %s (%s)\n' "$name" "$(date -u +%H:%M:%S)"
  out="mutants.out/$name/mutants.out"
  mkdir -p "mutants.out/$name"
  s=0
  cargo mutants "${args[@]}" "${extra[@]}" || s=$?
  if [ "$s" -eq 3 ]; then
    echo "mutants: timeouts (caught by hanging):"
    cat "$out/timeout.txt" 2>/dev/null || true
    # cargo-mutants reports 3 when any mutant timed out, even if others were
    # missed: only a clean missed list makes the timeouts harmless.
    if [ -s "$out/missed.txt" ]; then s=2; else s=0; fi
  fi
  if [ "$s" -eq 2 ]; then
    missed_all+=("$out/missed.txt")
    # Only a held file's survivor fails the run.
    if grep -qE "$HELD_RE" "$out/missed.txt"; then s=2; else s=0; fi
  fi
  # A run that found no mutant in the diff (cargo-mutants' 0) is fine.
  if [ "$s" -ne 0 ] && [ "$status" -ne 4 ]; then status=$s; fi
done

if [ ${#missed_all[@]} -gt 0 ]; then
  echo "mutants: missed in files not yet held (findings, not failures):"
  cat "${missed_all[@]}" | grep -vE "$HELD_RE" || true
fi
case "$status" in
  0) echo "mutants: OK, no mutant of a held file survived" ;;
  2) echo "mutants: FAILED, missed mutants of held files:"; cat "${missed_all[@]}" | grep -E "$HELD_RE" || true ;;
  *) echo "mutants: FAILED, cargo mutants exited with $status" ;;
esac
exit "$status"

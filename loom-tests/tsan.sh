#!/usr/bin/env bash
# ThreadSanitizer over failfast's multi-thread tests, with std itself
# instrumented (`-Zbuild-std`), on the stable compiler.
#
#   loom-tests/tsan.sh            # the default set below
#   loom-tests/tsan.sh --test stress
#
# Needs RUSTC_BOOTSTRAP=1 for -Zsanitizer and -Zbuild-std, and the toolchain's
# rust-src component (`rustup component add rust-src`), from which std is
# built with TSan: its locks, channels and `OnceLock`s are then seen, so no
# suppression covers std or libtest (see loom-tests/README.md, "ThreadSanitizer").
# A data race makes TSan exit with status 66; a clean run exits 0. The tests
# run one at a time (`--test-threads=1`): each test's own threads race, and
# TSan's memory stays small.
set -euo pipefail
cd "$(dirname "$0")/.."
target="$(rustc -vV | sed -n 's/^host: //p')"
sysroot="$(rustc --print sysroot)"
if [ ! -d "$sysroot/lib/rustlib/src/rust/library" ]; then
  echo "tsan: rust-src is missing (rustup component add rust-src)" >&2
  exit 1
fi
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
  # One breaker under racing threads (stress, the probe races, chaos'
  # four-thread half), the registry's racing inserts and storms, its reads
  # while writers hold the shard's lock (the crate's unit tests, which also
  # hold the hooks' and the outlier pools' own tests), and outlier pools
  # under racing threads.
  tests=(--lib --test stress --test s07_probe_race --test s10_lost_probe
    --test chaos --test registry_behaviour --test registry_str_keys
    --test outlier_threads --test outliers)
fi
RUSTC_BOOTSTRAP=1 \
RUSTFLAGS="-Zsanitizer=thread" \
TSAN_OPTIONS="suppressions=$PWD/loom-tests/tsan.supp halt_on_error=0" \
CARGO_TARGET_DIR=target/tsan \
  cargo test -Zbuild-std --no-fail-fast --target "$target" "${tests[@]}" -- --test-threads=1

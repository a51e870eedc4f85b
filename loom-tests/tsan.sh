#!/usr/bin/env bash
# ThreadSanitizer over failfast's multi-thread tests, on the stable compiler.
#
#   loom-tests/tsan.sh            # the default set below
#   loom-tests/tsan.sh --test stress
#
# On demand, not in CI: it needs RUSTC_BOOTSTRAP=1 for -Zsanitizer (see
# /work/shared/research/verification.md §5 and loom-tests/README.md).
# -Cunsafe-allow-abi-mismatch=sanitizer: std is not TSan-built on stable.
# The suppression file covers libtest's uninstrumented channel only.
# A data race makes TSan exit with status 66; a clean run exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
target="$(rustc -vV | sed -n 's/^host: //p')"
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
  # The stress test plus the other tests that run threads on one breaker.
  # Not the registry's: its shards sit behind std's RwLock, and std is not
  # instrumented, so TSan cannot see the lock and reports every access under
  # it (hashbrown's table) as a race — noise, not a finding. loom checks the
  # registry instead (loom-tests/tests/registry*.rs, with loom's RwLock).
  tests=(--test stress --test s07_probe_race --test s10_lost_probe)
fi
RUSTC_BOOTSTRAP=1 \
RUSTFLAGS="-Zsanitizer=thread -Cunsafe-allow-abi-mismatch=sanitizer" \
TSAN_OPTIONS="suppressions=$PWD/loom-tests/tsan.supp" \
CARGO_TARGET_DIR=target/tsan \
  cargo test --no-fail-fast --target "$target" "${tests[@]}"

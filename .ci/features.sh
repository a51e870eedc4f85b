#!/usr/bin/env bash
# Every feature combination a user can pick compiles cleanly on its own:
# no features, each feature alone, all features (`cargo clippy --lib
# -D warnings`, so an import used only under another feature is caught).
# The feature list is read from Cargo.toml, so a new feature is checked
# without editing this file.
set -euo pipefail
cd "$(dirname "$0")/.."

features=$(cargo metadata --format-version 1 --no-deps --locked |
  python3 -c 'import json,sys; p=next(p for p in json.load(sys.stdin)["packages"] if p["name"]=="failfast"); print(" ".join(sorted(f for f in p["features"] if f != "default")))')

check() {
  printf -- '--- %s\n' "$*"
  cargo clippy --locked --lib --quiet "$@" -- -D warnings
}

check --no-default-features
for feature in $features; do
  check --no-default-features --features "$feature"
done
check --all-features

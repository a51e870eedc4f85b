#!/usr/bin/env bash
# MSRV check, in two parts:
#
# 1. Declared versions (always): every crate failfast depends on, for every
#    feature and every target platform, declares a `rust-version` no greater
#    than ours (`cargo-msrv verify`-style, read from `cargo metadata` and the
#    lockfile). Dev-dependencies (benches, tests, the proxy example) are not
#    part of the MSRV promise and are skipped; so is loom, which is only built
#    under `--cfg failfast_loom`. The walk is conservative: a shared
#    dependency's features are unified with the dev-dependencies', so a few
#    crates a user would not build are checked too.
# 2. A real build (when the toolchain is installed): `cargo +MSRV check
#    --all-features`. CI machines carry one toolchain and cannot download
#    another, so this part is skipped there with a note; clippy's
#    `incompatible_msrv` lint (the clippy step) still flags any standard
#    library API newer than `rust-version`.
set -euo pipefail
cd "$(dirname "$0")/.."

msrv=$(cargo metadata --format-version 1 --no-deps --locked |
  python3 -c 'import json,sys; print(next(p["rust_version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="failfast"))')
echo "failfast declares rust-version = $msrv"

cargo metadata --format-version 1 --all-features --locked | python3 -c '
import json, sys

def key(v):
    parts = [int(x) for x in (v or "0").split(".")]
    return tuple(parts + [0] * (3 - len(parts)))

msrv = sys.argv[1]
meta = json.load(sys.stdin)
packages = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
root = next(i for i, p in packages.items() if p["name"] == "failfast")

def wanted(dep, top):
    for kind in dep["dep_kinds"]:
        if kind["kind"] == "dev":
            continue
        if top and kind["target"] == "cfg(failfast_loom)":
            continue
        return True
    return False

seen, stack = {}, [(root, "failfast")]
while stack:
    node, path = stack.pop()
    for dep in nodes[node]["deps"]:
        if dep["pkg"] in seen or not wanted(dep, node == root):
            continue
        name = packages[dep["pkg"]]["name"]
        seen[dep["pkg"]] = path + " -> " + name
        stack.append((dep["pkg"], seen[dep["pkg"]]))

too_new = []
highest = ("0", "(none)")
for pkg_id, path in seen.items():
    p = packages[pkg_id]
    rv = p.get("rust_version")
    if key(rv) > key(highest[0]):
        highest = (rv, p["name"] + " " + p["version"])
    if key(rv) > key(msrv):
        name, version = p["name"], p["version"]
        too_new.append(f"  {name} {version} needs {rv}: {path}")
print(f"{len(seen)} dependencies (normal and build, all features, all targets);"
      f" the highest declared rust-version is {highest[0]} ({highest[1]})")
if too_new:
    print(f"error: these declare a rust-version above {msrv}:")
    print("\n".join(sorted(too_new)))
    sys.exit(1)
' "$msrv"

toolchain=$(rustup toolchain list 2>/dev/null | awk '{print $1}' |
  grep -E "^${msrv//./\\.}(\\.0)?(-|$)" | head -n1 || true)
if [ -n "$toolchain" ]; then
  echo "building with $toolchain"
  CARGO_TARGET_DIR=target/msrv cargo "+$toolchain" check --locked --all-features
else
  echo "no $msrv toolchain installed (rustup cannot download one here):" \
    "skipped the build; clippy's incompatible_msrv lint covers std APIs"
fi

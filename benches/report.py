#!/usr/bin/env python3
"""Tables for benches/README.md from criterion runs kept by benches/run.sh.

For each benchmark: the median over runs of criterion's median, the min-max
of the run medians, and ratios. Each ratio is computed inside one run (both
numbers from the same process, minutes apart) and then the median ratio over
runs is printed, so machine-wide drift between runs cancels.

    python3 benches/report.py target/bench/runs/[0-9]*
"""
import json
import os
import statistics
import sys


def load(run_dir):
    out = {}
    for root, _dirs, files in os.walk(run_dir):
        if os.path.basename(root) != "new" or "estimates.json" not in files:
            continue
        with open(os.path.join(root, "benchmark.json")) as f:
            full_id = json.load(f)["full_id"]
        with open(os.path.join(root, "estimates.json")) as f:
            out[full_id] = json.load(f)["median"]["point_estimate"]
    return out


RUNS = [load(d) for d in sys.argv[1:]]
RUNS = [r for r in RUNS if r]
if not RUNS:
    sys.exit("no criterion runs found")


def values(bid):
    return [r[bid] for r in RUNS if bid in r]


def ratio(bid, ref):
    rs = [r[bid] / r[ref] for r in RUNS if bid in r and ref in r]
    return statistics.median(rs) if rs else None


def fmt_ns(v):
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def fmt_x(x):
    return "–" if x is None else f"{x:.2f}×" if x < 10 else f"{x:.1f}×"


def ids(prefix):
    seen = []
    for r in RUNS:
        for k in r:
            if k.startswith(prefix) and k not in seen:
                seen.append(k)
    return seen


def table(title, prefix, refs, order=None):
    """One markdown table of every benchmark under `prefix`."""
    rows = sorted(ids(prefix), key=order)
    if not rows:
        return
    print(f"\n### {title}\n")
    head = ["benchmark", "median ns", "run medians (min–max)"] + [f"× {name}" for name, _ in refs]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" + "---:|" * (len(head) - 1))
    for bid in rows:
        v = values(bid)
        cells = [
            f"`{bid[len(prefix):]}`",
            fmt_ns(statistics.median(v)),
            f"{fmt_ns(min(v))}–{fmt_ns(max(v))}",
        ]
        for _name, ref in refs:
            cells.append(fmt_x(ratio(bid, ref(bid) if callable(ref) else ref)))
        print("| " + " | ".join(cells) + " |")


print(f"{len(RUNS)} run(s); ratios are medians of per-run ratios.")
table("Floors", "floors/", [("bare call", "floors/bare_call")])


def closed_floor(bid):
    return "floors/call+load" if bid.startswith("closed/consecutive/") else "floors/call+fetch_add"


table(
    "failfast, CLOSED, admitted + success (and failures)",
    "closed/",
    [
        ("floor (call+load for consecutive, call+fetch_add otherwise)", closed_floor),
        ("bare call", "floors/bare_call"),
    ],
)
table("failfast, OPEN, rejection", "open/", [("raw+2loads floor", "floors/raw+2loads"), ("quanta_raw", "floors/quanta_raw")])
peers_closed = [("failfast (call)", "peers_closed/failfast"), ("bare", "peers_closed/bare")]
table("Peers, CLOSED success, same adapter", "peers_closed/", peers_closed)
table("Peers, OPEN rejection, same adapter", "peers_open/", [("failfast (call)", "peers_open/failfast")])


def one_thread(bid):
    return bid.rsplit("/", 1)[0] + "/1_thread"


table("Two threads (ns per call per thread)", "contended/", [("1 thread", one_thread)])
def dashmap_same(bid):
    kind, rest = bid.split("/", 2)[1:]
    if kind == "get_or_insert_new":
        return "registry/get_or_insert_new/dashmap"
    return "registry/dashmap_get/" + rest


def by_size(bid):
    parts = bid.split("/")
    return (parts[-1].isdigit() and int(parts[-1]), bid)


table("Registry (String host keys, std RandomState hasher)", "registry/", [("DashMap, same n", dashmap_same)], by_size)

# Peers over failfast: how many times faster failfast is.
print("\n### How many times faster failfast is than each peer (median of per-run ratios)\n")
print("| peer | CLOSED success | OPEN rejection |")
print("|---|---:|---:|")
for bid in ids("peers_closed/"):
    name = bid.split("/", 1)[1]
    if name in ("bare", "failfast"):
        continue
    c = ratio(bid, "peers_closed/failfast")
    o = ratio("peers_open/" + name, "peers_open/failfast")
    print(f"| {name} | {fmt_x(c)} | {fmt_x(o)} |")

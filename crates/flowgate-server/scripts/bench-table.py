#!/usr/bin/env python3
"""Turns bench-server.sh's JSON lines into the BENCHMARKS.md tables, on stdout.

Usage: bench-table.py [FILE]. The lines are read from FILE, else from stdin when it is not a
terminal, else from the last run bench-server.sh kept: $CARGO_TARGET_DIR/bench-server/last-run.jsonl
(default target/, from the workspace root).
"""
import json, os, sys

def source():
    if len(sys.argv) > 1:
        return open(sys.argv[1])
    if not sys.stdin.isatty():
        return sys.stdin
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    return open(os.path.join(target, "bench-server", "last-run.jsonl"))

rows = [json.loads(l) for l in source() if l.startswith("{")]
by = {(r["label"], r["keys"], r["concurrency"]): r for r in rows}
print("| keys | in flight | floor req/s | memory req/s | memory / floor | redis req/s | library redis req/s | redis / library | redis / floor | redis / serial bound | p99 floor / memory / redis (us) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for keys in (1, 10000):
    for c in (1, 16, 64):
        f, m, r, l = (by.get((x, keys, c)) for x in ("floor", "memory", "redis", "lib-redis"))
        if not (f and m and r and l):
            continue
        # The serial bound: the floor's and the library's costs added, each request paying both.
        bound = 1 / (1 / f["throughput"] + 1 / l["throughput"])
        print(f"| {keys:,} | {c} | {f['throughput']:,.0f} | {m['throughput']:,.0f} | {m['throughput']/f['throughput']:.2f} "
              f"| {r['throughput']:,.0f} | {l['throughput']:,.0f} | {r['throughput']/l['throughput']:.2f} "
              f"| {r['throughput']/f['throughput']:.2f} | {r['throughput']/bound:.2f} "
              f"| {f['p99_us']} / {m['p99_us']} / {r['p99_us']} |")
# Side by side with limitador, when the run has it.
if any(r["label"].startswith("limitador") for r in rows):
    print()
    print("| keys | in flight | floor req/s | Flowgate embedded | limitador memory | Flowgate Redis | limitador Redis | p99 (us): floor / Flowgate embedded / limitador memory / Flowgate Redis / limitador Redis |")
    print("|---|---|---|---|---|---|---|---|")
    for keys in (1, 10000):
        for c in (1, 16, 64):
            f, m, lm, r, lr = (by.get((x, keys, c)) for x in ("floor", "memory", "limitador-memory", "redis", "limitador-redis"))
            if not (f and m and lm and r and lr):
                continue
            cell = lambda x: f"{x['throughput']:,.0f} ({x['throughput'] / f['throughput']:.2f})"
            print(f"| {keys:,} | {c} | {f['throughput']:,.0f} | {cell(m)} | {cell(lm)} | {cell(r)} | {cell(lr)} "
                  f"| {f['p99_us']} / {m['p99_us']} / {lm['p99_us']} / {r['p99_us']} / {lr['p99_us']} |")
print()
print("| run | requests | ok | over limit | errors (server store errors) | p50 / p90 / p99 / max (us) |")
print("|---|---|---|---|---|---|")
def se(r):
    return f" ({r['store_errors']:,})" if "store_errors" in r else ""
for r in rows:
    print(f"| {r['label']} {r['keys']:,} keys @{r['concurrency']} | {r['requests']:,} | {r['ok']:,} | {r['over_limit']:,} | {r['errors']:,}{se(r)} "
          f"| {r['p50_us']} / {r['p90_us']} / {r['p99_us']} / {r['max_us']} |")

cpu = [r for r in rows if "cpu_s" in r]
if cpu:
    print()
    print("| run | wall s | CPU s: generator / server / redis-server | share of the 2 cores | server CPU us per request |")
    print("|---|---|---|---|---|")
    for r in cpu:
        c = r["cpu_s"]
        total = c["bench"] + c["server"] + c["redis"]
        # Requests over the whole run (warm-up included), at the measured rate.
        per = c["server"] / max(r["throughput"] * r["wall_s"], 1) * 1e6 if c["server"] else 0
        print(f"| {r['label']} {r['keys']:,} keys @{r['concurrency']} | {r['wall_s']} "
              f"| {c['bench']:.2f} / {c['server']:.2f} / {c['redis']:.2f} | {total / (2 * r['wall_s']):.0%} "
              f"| {per:.1f} |")

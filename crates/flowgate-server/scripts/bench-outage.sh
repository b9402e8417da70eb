#!/usr/bin/env bash
# Decisions during a Redis outage: the server on the embedded store, against the same server on
# a redis-server that is killed (SIGKILL) before it is measured, once as it runs by default
# (Redis known down after 3 failed calls: decisions go straight to the failure policy, `open`
# here) and once with `--redis-down-after 0` (every decision waits out the 25 ms deadline).
# Each is loaded over Envoy's gRPC API for SECONDS (default 20) with 1 request in flight (the
# latency a caller sees) and then 64 (throughput), on 10,000 keys; the servers run on CPU 1 and
# the load generator on CPU 0. The table printed last gives each side's p50 and its ratio to the
# embedded store's.
# Usage: crates/flowgate-server/scripts/bench-outage.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECS=${1:-20}
TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/release/flowgate
OUT=$TARGET/bench-server/outage.jsonl
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
cargo build --release -p flowgate-server >&2
DATA=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DATA"; }
trap cleanup EXIT
taskset -c 1 redis-server --port 16391 --bind 127.0.0.1 --save '' --appendonly no >/dev/null & PIDS+=($!)
REDIS_PID=$!
sleep 0.5
serve() { # NAME HTTP GRPC ARGS...
  local name=$1 http=$2 grpc=$3; shift 3
  FLOWGATE_LOG=warn taskset -c 1 "$BIN" serve --config examples/bench.toml --no-watch \
    --data-dir "$DATA/$name" --http-addr "127.0.0.1:$http" --grpc-addr "127.0.0.1:$grpc" "$@" & PIDS+=($!)
}
serve memory 18290 18291
serve redis 18292 18293 --redis-url redis://127.0.0.1:16391/
serve redis-waits 18294 18295 --redis-url redis://127.0.0.1:16391/ --redis-down-after 0
sleep 2
kill -9 "$REDIS_PID"
sleep 1
for inflight in 1 64; do
  for side in memory redis redis-waits; do
    case $side in memory) port=18291 ;; redis) port=18293 ;; redis-waits) port=18295 ;; esac
    taskset -c 0 "$BIN" bench --api grpc --addr "127.0.0.1:$port" --label "$side-$inflight" \
      --concurrency "$inflight" --connections 1 --keys 10000 --duration "${SECS}s" --warmup 1s --quiet | tee -a "$OUT"
  done
done
python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {r["label"]: r for r in rows}
print("| in flight | server | p50 | p99 | req/s | p50 ÷ embedded |")
print("|---|---|---|---|---|---|")
for n in (1, 64):
    base = by[f"memory-{n}"]["p50_us"]
    for side, name in (("memory", "embedded store"), ("redis", "Redis down, known down (default)"),
                       ("redis-waits", "Redis down, `--redis-down-after 0`")):
        r = by[f"{side}-{n}"]
        print(f"| {n} | {name} | {r['p50_us']} µs | {r['p99_us']} µs | {r['throughput']:,.0f} | {r['p50_us'] / base:.2f} |")
PY

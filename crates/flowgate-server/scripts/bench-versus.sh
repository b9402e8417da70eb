#!/usr/bin/env bash
# Check throughput of this build against another build (BASELINE=<its flowgate binary>), paired
# in one run: the Envoy gRPC `ShouldRateLimit` throughput of `flowgate serve` (examples/bench.toml,
# a fixed window without charges) on the embedded store and on a redis-server started here, and
# the library's (`flowgate bench --api library`, a Limiter in the generator's process) on both
# stores. Each server runs on one worker thread, the generator takes the other core; the two
# builds are measured alternately (A B A B ...) in short rounds, ROUNDS times each, so that the
# load of a shared machine falls on both alike. Prints, per case, the median of the per-round
# ratios (this ÷ baseline) with their range; the JSON lines are kept in
# $CARGO_TARGET_DIR/bench-server/versus.jsonl.
# Usage: BASELINE=<flowgate binary> crates/flowgate-server/scripts/bench-versus.sh [SECONDS] [ROUNDS] [BINARY]
#        (without BINARY, this tree's flowgate is built with the release profile)
# A baseline binary: `git archive <commit> | tar -x -C <dir>`, `cargo build --release -p
# flowgate-server` there, and copy the binary out of the target directory: cargo names the
# workspace's artifacts without their path, so two trees built in one target directory overwrite
# each other's (and a tree whose files are older than the other's artifacts is not rebuilt:
# `cargo clean --release -p flowgate-core -p flowgate-redis …` first).
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECS=${1:-3}
ROUNDS=${2:-6}
TARGET=${CARGO_TARGET_DIR:-target}
BIN=${3:-}
: "${BASELINE:?BASELINE=<a flowgate binary of the other build> is needed}"
if [ -z "$BIN" ]; then
  cargo build --release -p flowgate-server >&2
  BIN=$TARGET/release/flowgate
fi
OUT=$TARGET/bench-server/versus.jsonl
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
command -v redis-server >/dev/null || { echo "redis-server is needed" >&2; exit 1; }
DATA=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DATA"; }
trap cleanup EXIT
REDIS_PORT=18290
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & PIDS+=($!)
for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
REDIS_URL=redis://127.0.0.1:$REDIS_PORT/
export FLOWGATE_LOG=warn
# serve NAME BINARY GRPC_PORT [ARGS...]: a server of BINARY on one worker thread.
serve() {
  local name=$1 bin=$2 port=$3
  shift 3
  FLOWGATE_WORKER_THREADS=1 "$bin" serve --config examples/bench.toml --no-watch \
    --data-dir "$DATA/$name" --http-addr 127.0.0.1:0 --grpc-addr "127.0.0.1:$port" "$@" & PIDS+=($!)
}
serve base-memory "$BASELINE" 18291
serve this-memory "$BIN" 18292
serve base-redis "$BASELINE" 18293 --redis-url "$REDIS_URL"
serve this-redis "$BIN" 18294 --redis-url "$REDIS_URL"
for port in 18291 18292 18293 18294; do
  for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
done
# run SIDE CASE KEYS ARGS...: one round of SIDE (base or this) on CASE.
run() {
  local side=$1 case=$2 keys=$3 bin
  shift 3
  bin=$([ "$side" = base ] && echo "$BASELINE" || echo "$BIN")
  "$bin" bench --label "$case/$side" --concurrency 64 --connections 4 --keys "$keys" \
    --duration "${SECS}s" --warmup 1s --quiet "$@" | tee -a "$OUT"
}
for round in $(seq "$ROUNDS"); do
  # Which build goes first alternates by round.
  sides=$([ $((round % 2)) = 1 ] && echo "base this" || echo "this base")
  for side in $sides; do
    port=$([ "$side" = base ] && echo 18291 || echo 18292)
    run "$side" grpc-memory-1key 1 --api grpc --addr "127.0.0.1:$port"
    run "$side" grpc-memory-10k 10000 --api grpc --addr "127.0.0.1:$port"
    port=$([ "$side" = base ] && echo 18293 || echo 18294)
    run "$side" grpc-redis-10k 10000 --api grpc --addr "127.0.0.1:$port"
    run "$side" library-memory-10k 10000 --api library
    run "$side" library-redis-10k 10000 --api library --redis-url "$REDIS_URL"
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cases = list(dict.fromkeys(r["label"].split("/")[0] for r in rows))
print("case | baseline (median) | this (median) | this ÷ baseline: median of rounds [min–max]")
for c in cases:
    base = [r["throughput"] for r in rows if r["label"] == f"{c}/base"]
    this = [r["throughput"] for r in rows if r["label"] == f"{c}/this"]
    ratios = sorted(t / b for t, b in zip(this, base))
    print(f"{c} | {statistics.median(base):.0f}/s | {statistics.median(this):.0f}/s | "
          f"{statistics.median(ratios):.3f} [{ratios[0]:.3f}–{ratios[-1]:.3f}]")
PY

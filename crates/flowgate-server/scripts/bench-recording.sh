#!/usr/bin/env bash
# What the dashboard's figures cost a decision: the embedded server's Envoy gRPC throughput with
# its figures counted (the default) against `--no-stats`, one hot key and 10,000 keys, 64 in
# flight. Both servers run on one worker thread (the generator takes the other core) and are
# measured alternately, ROUNDS times each; the medians and their ratio are printed last.
# Usage: crates/flowgate-server/scripts/bench-recording.sh [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECS=${1:-5}
ROUNDS=${2:-3}
TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/release/flowgate
OUT=$TARGET/bench-server/recording.jsonl
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
cargo build --release -p flowgate-server >&2
DATA=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DATA"; }
trap cleanup EXIT
FLOWGATE_WORKER_THREADS=1 FLOWGATE_LOG=warn $BIN serve --config examples/bench.toml --no-watch \
  --data-dir "$DATA/on" --http-addr 127.0.0.1:18180 --grpc-addr 127.0.0.1:18181 & PIDS+=($!)
FLOWGATE_WORKER_THREADS=1 FLOWGATE_LOG=warn $BIN serve --config examples/bench.toml --no-watch --no-stats \
  --data-dir "$DATA/off" --http-addr 127.0.0.1:18182 --grpc-addr 127.0.0.1:18183 & PIDS+=($!)
sleep 2
for keys in 1 10000; do
  for round in $(seq "$ROUNDS"); do
    for side in on off; do
      port=$([ "$side" = on ] && echo 18181 || echo 18183)
      $BIN bench --api grpc --addr "127.0.0.1:$port" --label "stats-$side" --concurrency 64 \
        --connections 4 --keys "$keys" --duration "${SECS}s" --warmup 1s --quiet | tee -a "$OUT"
    done
  done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for keys in sorted({r["keys"] for r in rows}):
    med = {side: statistics.median(r["throughput"] for r in rows if r["keys"] == keys and r["label"] == f"stats-{side}")
           for side in ("on", "off")}
    print(f"keys {keys}: counted {med['on']:.0f}/s, not counted {med['off']:.0f}/s, ratio {med['on'] / med['off']:.3f}")
PY

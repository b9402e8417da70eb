#!/usr/bin/env bash
# Flowgate's embedded server against limitador's memory store, and the protocol floor, over
# Envoy's gRPC API at 64 in flight, 1 and 10,000 keys (examples/bench.toml and
# limitador-limits.yaml: the same fixed window of 100/s per key). Each server runs on one thread
# (limitador's gRPC runtime is single-threaded), pinned to CPU 1, and the load generator to CPU 0,
# so that each server has a core of its own. Rounds alternate floor, Flowgate, limitador; the
# medians, their ratios and each server's CPU per request (from /proc) are printed last.
# Usage: LIMITADOR=<path to limitador-server> crates/flowgate-server/scripts/bench-limitador.sh [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECS=${1:-5}
ROUNDS=${2:-3}
: "${LIMITADOR:?set LIMITADOR to a limitador-server binary}"
TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/release/flowgate
OUT=$TARGET/bench-server/limitador.jsonl
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
cargo build --release -p flowgate-server >&2
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
taskset -c 1 $BIN floor --worker-threads 1 --grpc-addr 127.0.0.1:18191 2>/dev/null & FLOOR=$!; PIDS+=($!)
FLOWGATE_WORKER_THREADS=1 FLOWGATE_LOG=warn taskset -c 1 $BIN serve --config examples/bench.toml \
  --no-watch --http-addr 127.0.0.1:18180 --grpc-addr 127.0.0.1:18181 & MEMORY=$!; PIDS+=($!)
taskset -c 1 "$LIMITADOR" --rls-ip 127.0.0.1 --rls-port 18195 --http-ip 127.0.0.1 --http-port 18196 \
  crates/flowgate-server/scripts/limitador-limits.yaml memory >/dev/null 2>&1 & LIM=$!; PIDS+=($!)
sleep 2
HZ=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
run() {
  local pid=$1 label=$2 addr=$3 keys=$4 t0 line
  t0=$(ticks "$pid")
  line=$(taskset -c 0 $BIN bench --api grpc --addr "$addr" --label "$label" --concurrency 64 \
    --connections 4 --keys "$keys" --duration "${SECS}s" --warmup 1s --quiet)
  python3 -c 'import json, sys
d = json.loads(sys.argv[1]); d["server_cpu_s"] = (int(sys.argv[3]) - int(sys.argv[2])) / float(sys.argv[4])
print(json.dumps(d))' "$line" "$t0" "$(ticks "$pid")" "$HZ" | tee -a "$OUT"
}
for keys in 1 10000; do
  for round in $(seq "$ROUNDS"); do
    run "$FLOOR" floor 127.0.0.1:18191 "$keys"
    run "$MEMORY" flowgate 127.0.0.1:18181 "$keys"
    run "$LIM" limitador 127.0.0.1:18195 "$keys"
  done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for keys in sorted({r["keys"] for r in rows}):
    med, cpu = {}, {}
    for label in ("floor", "flowgate", "limitador"):
        rs = [r for r in rows if r["keys"] == keys and r["label"] == label]
        med[label] = statistics.median(r["throughput"] for r in rs)
        # The server's CPU covers the 1 s warm-up too: its requests are estimated at one
        # second's throughput.
        cpu[label] = statistics.median(r["server_cpu_s"] / (r["requests"] + r["throughput"]) * 1e6 for r in rs)
    print(f"keys {keys}: floor {med['floor']:.0f}/s ({cpu['floor']:.1f} us/req), "
          f"flowgate {med['flowgate']:.0f}/s ({cpu['flowgate']:.1f} us/req), "
          f"limitador {med['limitador']:.0f}/s ({cpu['limitador']:.1f} us/req); "
          f"flowgate / limitador {med['flowgate'] / med['limitador']:.2f}, floor / limitador {med['floor'] / med['limitador']:.2f}")
PY

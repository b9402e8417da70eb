#!/usr/bin/env bash
# The server benchmarks of BENCHMARKS.md, in one run on this machine:
# Envoy gRPC throughput and latency at 1/16/64 in flight, one hot key and 10,000 keys, against
#   - floor:  `flowgate floor`, a tonic server answering a constant OK (the protocol floor),
#   - memory: `flowgate serve` on the embedded store,
#   - redis:  `flowgate serve --redis-url` on a local redis-server,
#   - lib-redis: the same decisions through the library (Limiter + RedisStore) in-process;
#   - with LIMITADOR=<path to limitador-server> (built from github.com/Kuadrant/limitador),
#     limitador-memory and limitador-redis: Kuadrant's limitador with the same limits
#     (limitador-limits.yaml), in memory and on the same redis-server.
# Each JSON line also carries the CPU seconds used during that run (warm-up included) by the
# generator, the server under test and redis-server (from /proc, utime + stime), and the wall time.
# The binary is built with the production profile (PROFILE=release for the release profile).
# Usage: crates/flowgate-server/scripts/bench-server.sh [SECONDS] > results.jsonl
# The lines are also kept in $CARGO_TARGET_DIR/bench-server/last-run.jsonl (default target/), the
# input bench-table.py reads when none is given: results stay out of the source tree.
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECS=${1:-5}
TARGET=${CARGO_TARGET_DIR:-target}
PROFILE=${PROFILE:-production}
BIN=$TARGET/$PROFILE/flowgate
OUT=$TARGET/bench-server/last-run.jsonl
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
cargo build --profile "$PROFILE" -p flowgate-server >&2
command -v redis-server >/dev/null || { echo "redis-server is needed (apt-get install redis-server)" >&2; exit 1; }
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
command -v /usr/bin/time >/dev/null || { echo "/usr/bin/time is needed (apt-get install time)" >&2; exit 1; }
redis-server --port 16379 --save '' --appendonly no --daemonize no >/dev/null & REDIS=$!; PIDS+=($!)
$BIN floor --grpc-addr 127.0.0.1:18091 2>/dev/null & FLOOR=$!; PIDS+=($!)
FLOWGATE_LOG=warn $BIN serve --config examples/bench.toml --no-watch \
  --http-addr 127.0.0.1:18080 --grpc-addr 127.0.0.1:18081 & MEMORY=$!; PIDS+=($!)
sleep 1
FLOWGATE_LOG=warn $BIN serve --config examples/bench.toml --no-watch --redis-url redis://127.0.0.1:16379/ \
  --http-addr 127.0.0.1:18082 --grpc-addr 127.0.0.1:18083 2>/dev/null & SERVER=$!; PIDS+=($!)
LIM_MEMORY=0; LIM_REDIS=0
if [ -n "${LIMITADOR:-}" ]; then
  LIMITS=crates/flowgate-server/scripts/limitador-limits.yaml
  "$LIMITADOR" --rls-ip 127.0.0.1 --rls-port 18095 --http-ip 127.0.0.1 --http-port 18096 "$LIMITS" memory \
    >/dev/null 2>&1 & LIM_MEMORY=$!; PIDS+=($!)
  "$LIMITADOR" --rls-ip 127.0.0.1 --rls-port 18097 --http-ip 127.0.0.1 --http-port 18098 "$LIMITS" \
    redis redis://127.0.0.1:16379/ >/dev/null 2>&1 & LIM_REDIS=$!; PIDS+=($!)
fi
sleep 2
HZ=$(getconf CLK_TCK)
TIMES=$(mktemp)
ticks() { if [ "$1" = 0 ]; then echo 0; else awk '{print $14 + $15}' "/proc/$1/stat"; fi; }
# Store errors of the Redis server (decided by the failure policy, answered OK over gRPC).
store_errors() {
  curl -s http://127.0.0.1:18082/metrics | awk '/^flowgate_store_errors_total/ {n += $NF} END {print n + 0}'
}
# run TARGET_PID bench-args...: one `flowgate bench` run, its JSON line extended with CPU seconds.
run() {
  local target=$1; shift
  local s0 r0 t0 line
  s0=$(ticks "$target"); r0=$(ticks "$REDIS"); t0=$(date +%s.%N); e0=$(store_errors)
  line=$(/usr/bin/time -f '%U %S' -o "$TIMES" $BIN bench "$@")
  python3 -c 'import json, sys
d = json.loads(sys.argv[1]); hz = float(sys.argv[2]); u, s = open(sys.argv[3]).read().split()[-2:]
d["wall_s"] = round(float(sys.argv[8]) - float(sys.argv[7]), 2)
if d["label"] == "redis": d["store_errors"] = int(sys.argv[11]) - int(sys.argv[10])
d["cpu_s"] = {"bench": round(float(u) + float(s), 2), "server": (int(sys.argv[4]) - int(sys.argv[5])) / hz,
              "redis": (int(sys.argv[9]) - int(sys.argv[6])) / hz}
print(json.dumps(d))' "$line" "$HZ" "$TIMES" "$(ticks "$target")" "$s0" "$r0" "$t0" "$(date +%s.%N)" "$(ticks "$REDIS")" "$e0" "$(store_errors)" | tee -a "$OUT"
}
for keys in 1 10000; do
  for c in 1 16 64; do
    conns=$(( c == 1 ? 1 : 4 ))
    common=(--concurrency "$c" --connections "$conns" --keys "$keys" --duration "${SECS}s" --warmup 1s --quiet)
    run "$FLOOR" --api grpc --addr 127.0.0.1:18091 --label floor "${common[@]}"
    run "$MEMORY" --api grpc --addr 127.0.0.1:18081 --label memory "${common[@]}"
    run "$SERVER" --api grpc --addr 127.0.0.1:18083 --label redis "${common[@]}"
    run 0 --api library --redis-url redis://127.0.0.1:16379/ --label lib-redis "${common[@]}"
    if [ "$LIM_MEMORY" != 0 ]; then
      run "$LIM_MEMORY" --api grpc --addr 127.0.0.1:18095 --label limitador-memory "${common[@]}"
      run "$LIM_REDIS" --api grpc --addr 127.0.0.1:18097 --label limitador-redis "${common[@]}"
    fi
  done
done

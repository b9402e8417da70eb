#!/usr/bin/env bash
# The server benchmarks of BENCHMARKS.md, in one run on this machine:
# Envoy gRPC throughput and latency at 1/16/64 in flight, one hot key and 10,000 keys, against
#   - floor:  `flowgate floor`, a tonic server answering a constant OK (the protocol floor),
#   - memory: `flowgate serve` on the embedded store,
#   - redis:  `flowgate serve --redis-url` on a local redis-server,
#   - lib-redis: the same decisions through the library (Limiter + RedisStore) in-process.
# Usage: crates/flowgate-server/scripts/bench-server.sh [SECONDS] > results.jsonl
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECS=${1:-5}
BIN=target/release/flowgate
cargo build --release -p flowgate-server >&2
command -v redis-server >/dev/null || { echo "redis-server is needed (apt-get install redis-server)" >&2; exit 1; }
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
redis-server --port 16379 --save '' --appendonly no --daemonize no >/dev/null & PIDS+=($!)
$BIN floor --grpc-addr 127.0.0.1:18091 2>/dev/null & PIDS+=($!)
FLOWGATE_LOG=warn $BIN serve --config examples/bench.toml --no-watch \
  --http-addr 127.0.0.1:18080 --grpc-addr 127.0.0.1:18081 & PIDS+=($!)
sleep 1
FLOWGATE_LOG=warn $BIN serve --config examples/bench.toml --no-watch --redis-url redis://127.0.0.1:16379/ \
  --http-addr 127.0.0.1:18082 --grpc-addr 127.0.0.1:18083 & PIDS+=($!)
sleep 2
for keys in 1 10000; do
  for c in 1 16 64; do
    conns=$(( c == 1 ? 1 : 4 ))
    common=(--concurrency "$c" --connections "$conns" --keys "$keys" --duration "${SECS}s" --warmup 1s --quiet)
    $BIN bench --api grpc --addr 127.0.0.1:18091 --label floor "${common[@]}"
    $BIN bench --api grpc --addr 127.0.0.1:18081 --label memory "${common[@]}"
    $BIN bench --api grpc --addr 127.0.0.1:18083 --label redis "${common[@]}"
    $BIN bench --api library --redis-url redis://127.0.0.1:16379/ --label lib-redis "${common[@]}"
  done
done

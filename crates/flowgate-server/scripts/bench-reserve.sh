#!/usr/bin/env bash
# Reserve and commit against one check (BENCHMARKS.md, "What does a reservation cost?"):
# `flowgate bench --api http` (POST /v1/check) and `--api reserve` (POST /v1/reserve with an
# estimate of 1, then POST /v1/commit of its id with a cost of 1: one request of the report is
# the pair), alternating round by round on the same server, on the embedded store and on a
# local redis-server; each round is one JSON line on standard output. 10,000 keys of
# examples/bench.toml (100/s each: every request admitted), 16 in flight.
# Usage: crates/flowgate-server/scripts/bench-reserve.sh [ROUNDS] [SECONDS] > rounds.jsonl
# PROFILE (default release) picks the build; FLOWGATE=<binary> skips the build.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROUNDS=${1:-5}
SECS=${2:-3}
TARGET=${CARGO_TARGET_DIR:-target}
PROFILE=${PROFILE:-release}
if [ -z "${FLOWGATE:-}" ]; then
  cargo build --profile "$PROFILE" -p flowgate-server --bin flowgate >&2
  FLOWGATE=$TARGET/$PROFILE/flowgate
fi
command -v redis-server >/dev/null || { echo "redis-server is needed (apt-get install redis-server)" >&2; exit 1; }
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
redis-server --port 16389 --save '' --appendonly no --daemonize no >/dev/null & PIDS+=($!)
FLOWGATE_LOG=warn $FLOWGATE serve --config examples/bench.toml --no-watch \
  --http-addr 127.0.0.1:18180 --grpc-addr 127.0.0.1:18181 & PIDS+=($!)
FLOWGATE_LOG=warn $FLOWGATE serve --config examples/bench.toml --no-watch --redis-url redis://127.0.0.1:16389/ \
  --http-addr 127.0.0.1:18182 --grpc-addr 127.0.0.1:18183 & PIDS+=($!)
for port in 18180 18182; do
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
    sleep 0.1
  done
done
for round in $(seq "$ROUNDS"); do
  for store in memory:18180 redis:18182; do
    for api in http reserve; do
      $FLOWGATE bench --api "$api" --addr "127.0.0.1:${store#*:}" --keys 10000 --concurrency 16 \
        --warmup 1s --duration "${SECS}s" --label "${store%%:*}" --quiet
    done
  done
done

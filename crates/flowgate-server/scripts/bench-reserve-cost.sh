#!/usr/bin/env bash
# Where a reservation's cost goes on Redis (BENCHMARKS.md, "What does a reservation cost?"): for
# `flowgate bench --api http` (one check) and `--api reserve` (a reserve and its commit), ROUNDS
# times alternating on one server on a local redis-server, the script calls Redis ran per request
# (INFO commandstats, EVALSHA) and the CPU time per request of the `flowgate` and `redis-server`
# processes (utime + stime from /proc/<pid>/stat): figures that move less with the machine's load
# than throughput does. 10,000 keys of examples/bench.toml, 16 in flight, 3 s a round. One JSON
# line per round.
# Usage: crates/flowgate-server/scripts/bench-reserve-cost.sh [ROUNDS]
# PROFILE (default release) picks the build; FLOWGATE=<binary> skips the build.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROUNDS=${1:-3}
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
redis-server --port 16390 --save '' --appendonly no --daemonize no >/dev/null & REDIS=$!; PIDS+=($REDIS)
FLOWGATE_LOG=error $FLOWGATE serve --config examples/bench.toml --no-watch --redis-url redis://127.0.0.1:16390/ \
  --http-addr 127.0.0.1:18184 --grpc-addr 127.0.0.1:18185 & SERVER=$!; PIDS+=($SERVER)
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:18184/readyz" >/dev/null && break
  sleep 0.1
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
for _ in $(seq "$ROUNDS"); do
  for api in http reserve; do
    redis-cli -p 16390 config resetstat >/dev/null
    f0=$(ticks $SERVER); r0=$(ticks $REDIS)
    out=$($FLOWGATE bench --api "$api" --addr 127.0.0.1:18184 --keys 10000 --concurrency 16 \
      --warmup 0s --duration 3s --label redis --quiet)
    f1=$(ticks $SERVER); r1=$(ticks $REDIS)
    calls=$(redis-cli -p 16390 info commandstats | tr -d '\r' | grep '^cmdstat_evalsha:' \
      | sed 's/^[^:]*:calls=\([0-9]*\),.*/\1/')
    n=$(echo "$out" | sed 's/.*"requests":\([0-9]*\).*/\1/')
    awk -v api="$api" -v n="$n" -v c="${calls:-0}" -v f=$((f1 - f0)) -v r=$((r1 - r0)) -v hz="$HZ" 'BEGIN {
      printf "{\"api\":\"%s\",\"requests\":%d,\"script_calls_per_request\":%.2f,\"flowgate_cpu_us_per_request\":%.1f,\"redis_cpu_us_per_request\":%.1f}\n",
        api, n, c / n, f * 1e6 / hz / n, r * 1e6 / hz / n }'
  done
done

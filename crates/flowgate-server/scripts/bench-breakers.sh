#!/usr/bin/env bash
# What circuit breakers cost a decision: the embedded server's Envoy gRPC throughput with 100
# breakers declared (examples/bench-breakers.toml: every request matches one) and reports flowing
# (about 1,000 a second through POST /v1/report, all `ok`, so no breaker opens), against the
# same rule without breakers (examples/bench.toml) under the same reports. Both servers run on
# one worker thread, measured alternately, ROUNDS times each, one hot key and 10,000 keys at 64
# in flight; the medians and their ratio are printed last. With REDIS=1 both servers decide on
# a redis-server started here, and the breakers are the cluster's (reports sent to Redis in
# batches, phases read from it). The servers (and redis-server) run on CPU 1, the load generator
# and the reporter on CPU 0, so that the two sides see the same machine. Beside throughput, each
# run records the CPU the server and redis-server used (from /proc, warm-up included) per
# decision: steadier than throughput on a shared machine. Last, reports alone (no decisions):
# the CPU each report costs either side.
# Usage: [REDIS=1] crates/flowgate-server/scripts/bench-breakers.sh [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECS=${1:-5}
ROUNDS=${2:-3}
TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/release/flowgate
OUT=$TARGET/bench-server/breakers.jsonl
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
cargo build --release -p flowgate-server >&2
DATA=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DATA"; }
trap cleanup EXIT
EXTRA=()
REDIS_PID=
if [ -n "${REDIS:-}" ]; then
  taskset -c 1 redis-server --port 16390 --bind 127.0.0.1 --save '' --appendonly no >/dev/null & PIDS+=($!)
  REDIS_PID=$!
  EXTRA=(--redis-url redis://127.0.0.1:16390/)
  sleep 0.5
fi
FLOWGATE_WORKER_THREADS=1 FLOWGATE_LOG=warn taskset -c 1 $BIN serve --config examples/bench-breakers.toml --no-watch \
  --data-dir "$DATA/with" --http-addr 127.0.0.1:18280 --grpc-addr 127.0.0.1:18281 "${EXTRA[@]}" & PIDS+=($!)
WITH=$!
FLOWGATE_WORKER_THREADS=1 FLOWGATE_LOG=warn taskset -c 1 $BIN serve --config examples/bench.toml --no-watch \
  --data-dir "$DATA/without" --http-addr 127.0.0.1:18282 --grpc-addr 127.0.0.1:18283 "${EXTRA[@]}" & PIDS+=($!)
WITHOUT=$!
sleep 2
HZ=$(getconf CLK_TCK)
# ticks PID...: the CPU ticks those processes used so far.
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
# reports PORT SECONDS: about 1,000 reports a second (20 batches of 50) to one server.
reports() {
  taskset -c 0 python3 - "$1" "$2" <<'PY'
import http.client, json, random, sys, time
port, secs = int(sys.argv[1]), float(sys.argv[2])
conn = http.client.HTTPConnection("127.0.0.1", port)
end = time.monotonic() + secs
n = 0
while time.monotonic() < end:
    batch = [{"domain": "bench", "descriptors": [f"key={random.randrange(10000)}"],
              "outcome": "ok", "latency_ms": 5} for _ in range(50)]
    conn.request("POST", "/v1/report", json.dumps({"reports": batch}),
                 {"content-type": "application/json"})
    conn.getresponse().read()
    time.sleep(0.05)
    n += 50
print(n)
PY
}
for keys in 1 10000; do
  for round in $(seq "$ROUNDS"); do
    for side in with without; do
      if [ "$side" = with ]; then grpc=18281; http=18280; pid=$WITH; else grpc=18283; http=18282; pid=$WITHOUT; fi
      reports "$http" "$((SECS + 2))" >/dev/null & REPORTER=$!
      t0=$(ticks $pid $REDIS_PID)
      line=$(taskset -c 0 $BIN bench --api grpc --addr "127.0.0.1:$grpc" --label "breakers-$side" --concurrency 64 \
        --connections 4 --keys "$keys" --duration "${SECS}s" --warmup 1s --quiet)
      python3 -c 'import json, sys
d = json.loads(sys.argv[1]); d["server_cpu_s"] = (int(sys.argv[3]) - int(sys.argv[2])) / float(sys.argv[4])
print(json.dumps(d))' "$line" "$t0" "$(ticks $pid $REDIS_PID)" "$HZ" | tee -a "$OUT"
      wait "$REPORTER"
    done
  done
done
# What a report costs without decisions: reports alone for SECS to each side, twice; the CPU the
# server and redis-server used, per report.
for round in 1 2; do
  for side in with without; do
    if [ "$side" = with ]; then http=18280; pid=$WITH; else http=18282; pid=$WITHOUT; fi
    s0=$(ticks $pid); r0=0; [ -n "$REDIS_PID" ] && r0=$(ticks $REDIS_PID)
    n=$(reports "$http" "$SECS")
    s1=$(ticks $pid); r1=0; [ -n "$REDIS_PID" ] && r1=$(ticks $REDIS_PID)
    python3 -c 'import sys
n, hz = int(sys.argv[2]), float(sys.argv[7])
print(f"reports alone, {sys.argv[1]} breakers: {n} reports, server {(int(sys.argv[4]) - int(sys.argv[3])) / hz / n * 1e6:.1f} us/report, redis-server {(int(sys.argv[6]) - int(sys.argv[5])) / hz / n * 1e6:.1f} us/report")' \
      "$side" "$n" "$s0" "$s1" "$r0" "$r1" "$HZ"
  done
done
curl -s http://127.0.0.1:18280/metrics | grep -E '^flowgate_breaker_reports_total|^flowgate_breakers_shared' >&2 || true
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for keys in sorted({r["keys"] for r in rows}):
    rs = {side: [r for r in rows if r["keys"] == keys and r["label"] == f"breakers-{side}"] for side in ("with", "without")}
    med = {side: statistics.median(r["throughput"] for r in rs[side]) for side in rs}
    # The CPU covers the 1 s warm-up too: its requests are estimated at one second's throughput.
    cpu = {side: statistics.median(r["server_cpu_s"] / (r["requests"] + r["throughput"]) * 1e6 for r in rs[side]) for side in rs}
    print(f"keys {keys}: 100 breakers {med['with']:.0f}/s ({cpu['with']:.1f} us/decision), "
          f"none {med['without']:.0f}/s ({cpu['without']:.1f} us/decision); "
          f"throughput ratio {med['with'] / med['without']:.3f}, CPU ratio (none / breakers) {cpu['without'] / cpu['with']:.3f}")
PY

#!/usr/bin/env bash
# The limiter's decisions while the largest queue batch is submitted on the same Redis
# (BENCHMARKS.md, "Queues and the limiter on one Redis"): `flowgate bench` sends Envoy gRPC
# decisions (10,000 keys, 64 in flight) to `flowgate serve --redis-url` for SECONDS, alone and
# then while a loop submits a batch of 10,000 jobs of 3 KB (30 MB) to a queue through the same
# server every second (EVERY=0: back to back), in turn, ROUNDS times. Each JSON line is
# `flowgate bench`'s summary plus the store errors of the run (decisions that missed the store's 25 ms deadline and were decided by the
# failure policy) and the batches submitted meanwhile.
# Usage: crates/flowgate-server/scripts/bench-queue-submit.sh [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECS=${1:-6}
ROUNDS=${2:-3}
EVERY=${EVERY:-1}
TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/release/flowgate
cargo build --release -p flowgate-server >&2
command -v redis-server >/dev/null || { echo "redis-server is needed (apt-get install redis-server)" >&2; exit 1; }
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
cat examples/bench.toml - > "$WORK/flowgate.toml" <<'EOF'

[[queue]]
domain = "payments"
name = "bulk"
match = ["channel"]
rate = "1000/s"
max_payload = 4096
max_depth = 10000000
EOF
python3 - "$WORK/batch.json" <<'EOF'
import json, sys
memo = "x" * 3000
jobs = [{"payload": {"refund": i, "memo": memo}} for i in range(10000)]
json.dump({"domain": "payments", "descriptor": "channel=BULK", "jobs": jobs}, open(sys.argv[1], "w"))
EOF
redis-server --port 16389 --save '' --appendonly no --daemonize no >/dev/null & PIDS+=($!)
sleep 0.5
FLOWGATE_LOG=warn $BIN serve --config "$WORK/flowgate.toml" --no-watch --redis-url redis://127.0.0.1:16389/ \
  --http-addr 127.0.0.1:18180 --grpc-addr 127.0.0.1:18181 2>/dev/null & PIDS+=($!)
sleep 2
store_errors() {
  curl -s http://127.0.0.1:18180/metrics | awk '/^flowgate_store_errors_total/ {n += $NF} END {print n + 0}'
}
# Submits the batch every EVERY seconds until the file `stop` appears; counts them in `submitted`.
submitter() {
  local n=0
  while [ ! -e "$WORK/stop" ]; do
    curl -s -o /dev/null -w '%{http_code}\n' -H 'content-type: application/json' \
      --data-binary @"$WORK/batch.json" http://127.0.0.1:18180/v1/queues/submit >> "$WORK/codes" &
    n=$((n + 1))
    echo "$n" > "$WORK/submitted"
    if [ "$EVERY" = 0 ]; then wait; else sleep "$EVERY"; fi
  done
  wait
}
run() {
  local label=$1 e0 e1 line submitted=0
  e0=$(store_errors)
  if [ "$label" = with-submits ]; then
    rm -f "$WORK/stop" "$WORK/submitted"; submitter & SUB=$!
    sleep 0.5
  fi
  line=$($BIN bench --api grpc --addr 127.0.0.1:18181 --keys 10000 --concurrency 64 --connections 4 \
    --duration "${SECS}s" --warmup 1s --quiet --label "$label")
  if [ "$label" = with-submits ]; then
    touch "$WORK/stop"; wait "$SUB"; submitted=$(cat "$WORK/submitted" 2>/dev/null || echo 0)
  fi
  e1=$(store_errors)
  python3 -c 'import json, sys
d = json.loads(sys.argv[1]); d["store_errors"] = int(sys.argv[3]) - int(sys.argv[2]); d["batches_submitted"] = int(sys.argv[4])
print(json.dumps(d))' "$line" "$e0" "$e1" "$submitted"
}
for _ in $(seq "$ROUNDS"); do
  run alone
  run with-submits
done
echo "submit answers: $(sort "$WORK/codes" | uniq -c | tr '\n' ' ')" >&2

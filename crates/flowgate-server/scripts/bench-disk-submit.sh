#!/usr/bin/env bash
# The embedded store while big batches go in (BENCHMARKS.md, "Lease answers through a stall"):
# `flowgate serve --data-dir` takes three batches of 10,000 jobs of 3 KB (30 MB) for one queue
# instance, one after another, while single jobs are submitted to another instance every 20 ms
# (60 of them), each answered after its own fsync. Prints each batch's time and the four slowest
# single submits (seconds).
# Usage: crates/flowgate-server/scripts/bench-disk-submit.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/release/flowgate
cargo build --release -p flowgate-server >&2
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
cat > "$WORK/flowgate.toml" <<'TOML'
domain = "payments"
[[queue]]
name = "bulk"
match = ["channel=BULK"]
rate = "1000/s"
max_payload = 4096
max_depth = 10000000
[[queue]]
name = "small"
match = ["channel=SMALL"]
rate = "1000/s"
TOML
python3 - "$WORK/batch.json" <<'PY'
import json, sys
memo = "x" * 3000
jobs = [{"payload": {"refund": i, "memo": memo}} for i in range(10000)]
json.dump({"domain": "payments", "descriptor": "channel=BULK", "jobs": jobs}, open(sys.argv[1], "w"))
PY
FLOWGATE_LOG=warn $BIN serve --config "$WORK/flowgate.toml" --no-watch --data-dir "$WORK/data" \
  --http-addr 127.0.0.1:18380 --grpc-addr 127.0.0.1:18381 & PIDS+=($!)
sleep 1.5
URL=http://127.0.0.1:18380/v1/queues/submit
( for _ in 1 2 3; do
    curl -s -o /dev/null -w "batch %{http_code} %{time_total}s\n" -H 'content-type: application/json' \
      --data-binary @"$WORK/batch.json" "$URL"
  done ) & BIG=$!
for _ in $(seq 60); do
  curl -s -o /dev/null -w "%{time_total}\n" -H 'content-type: application/json' \
    -d '{"domain":"payments","descriptor":"channel=SMALL","payload":1}' "$URL"
  sleep 0.02
done | sort -n | tail -4 | tr '\n' ' ' | sed 's/^/slowest single submits: /'
echo
wait "$BIG"

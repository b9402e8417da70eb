#!/usr/bin/env bash
# Client instructions per request, counted by callgrind on the bench binary itself (the store,
# the runtime and the bench's own loop) against a plain redis-server on a free loopback port:
# focus mode `three`, 64 in flight, coalesced. Instruction counts do not move with the machine's
# load; they do move a little with how many requests a call carries.
#
#   FOCUS=1|3 crates/flowgate-redis/benches/client-cost.sh [seconds]
#   BENCH_BIN=path: another build of the bench (e.g. of an earlier commit).
set -euo pipefail
cd "$(dirname "$0")/../../.."
secs=${1:-4}
bench=${BENCH_BIN:-}
if [ -z "$bench" ]; then
  cargo bench -q -p flowgate-redis --bench redis --no-run 2>/dev/null
  bench=$(ls -t target/release/deps/redis-* | grep -v '\.d$' | head -1)
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
out=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
rp=$!
trap 'kill "$rp" 2>/dev/null || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
line=$(BENCH_REDIS_URL="redis://127.0.0.1:$port/" BENCH_KEYS=400 FOCUS=${FOCUS:-1} INFLIGHT=64 \
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" "$bench" "$secs" only three 2>/dev/null | grep "in all")
n=$(sed -E 's/.* ([0-9]+) decisions$/\1/' <<<"$line")
ir=$(callgrind_annotate "$out/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "FOCUS=${FOCUS:-1}: $((ir / n)) client instructions per request ($n requests; callgrind output: $out/cg.out)"

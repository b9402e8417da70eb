#!/usr/bin/env bash
# Redis instructions per coalesced decision, counted by callgrind inside EVALSHA (repeatable,
# unlike a rate on this shared machine): a redis-server under valgrind on a free port, the
# bench's focus mode against it (64 in flight, coalesced) with few enough keys that each key is
# decided about as often as in the full-speed bench (valgrind slows Redis ~25x).
#
#   crates/flowgate-redis/benches/script-cost.sh [algorithm] [seconds] [keys]
#   FOCUS=direct ...: one decision per call instead (the fixed cost of a call).
#   FOCUS=1|3 INFLIGHT=64 ... three 4 400: per request of 1 rule or of the field's 3 rules.
set -euo pipefail
cd "$(dirname "$0")/../../.."
alg=${1:-token_bucket}
secs=${2:-4}
keys=${3:-400}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
out=$(mktemp -d)
# BENCH_BIN=path: another build of this bench (e.g. of an earlier commit) to measure.
bench=${BENCH_BIN:-}
if [ -z "$bench" ]; then
  cargo bench -q -p flowgate-redis --bench redis --no-run 2>/dev/null
  bench=$(ls -t target/release/deps/redis-* | grep -v '\.d$' | head -1)
fi
valgrind --tool=callgrind --toggle-collect=evalShaCommand --callgrind-out-file="$out/cg.out" \
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$out/valgrind.log" 2>&1 &
vg=$!
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
line=$(BENCH_REDIS_URL="redis://127.0.0.1:$port/" BENCH_KEYS="$keys" FOCUS=${FOCUS:-coalesced} "$bench" "$secs" only "$alg" | tail -1)
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$vg"
wait "$vg" 2>/dev/null || true
decisions=$(sed -E 's/.* ([0-9]+) decisions$/\1/' <<<"$line")
ir=$(callgrind_annotate "$out/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "$alg: $line"
echo "$alg: $ir instructions in EVALSHA for $decisions decisions: $((ir / decisions)) per decision (callgrind output: $out/cg.out)"

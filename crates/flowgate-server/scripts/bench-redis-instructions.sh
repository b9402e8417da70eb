#!/usr/bin/env bash
# Redis's instructions per request (BENCHMARKS.md, "What does a reservation cost?"): one second of
# a real server's traffic to Redis under `flowgate bench --api API` (16 in flight, 10,000 keys of
# examples/bench.toml) is captured with MONITOR, then sent again, pipelined, into a fresh
# redis-server running under valgrind's callgrind, whose script cache holds the same scripts (a
# server started against it made one request of each kind, then its keys were flushed). The
# instructions Redis ran for the replay, divided by the requests captured (for `reserve`, a pair:
# the reservations' records written), do not move with the machine's load as its CPU time does.
# Needs valgrind, redis-server, redis-cli and python3.
# Usage: crates/flowgate-server/scripts/bench-redis-instructions.sh [API (http|reserve)] [BINARY]
set -euo pipefail
cd "$(dirname "$0")/../../.."
API=${1:-reserve}
BIN=${2:-}
if [ -z "$BIN" ]; then
  cargo build --release -p flowgate-server --bin flowgate >&2
  BIN=${CARGO_TARGET_DIR:-target}/release/flowgate
fi
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
ready() { for _ in $(seq 300); do curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return; sleep 0.1; done; exit 1; }

# 1. The traffic, captured from a live Redis.
redis-server --port 16410 --save '' --appendonly no >/dev/null & PIDS+=($!)
FLOWGATE_LOG=error "$BIN" serve --config examples/bench.toml --no-watch --redis-url redis://127.0.0.1:16410/ \
  --http-addr 127.0.0.1:18410 --grpc-addr 127.0.0.1:18411 & SERVER=$!; PIDS+=($SERVER)
ready 18410
"$BIN" bench --api "$API" --addr 127.0.0.1:18410 --keys 10000 --concurrency 16 --duration 4s --quiet >/dev/null &
BENCH=$!
sleep 1.5
timeout 1 redis-cli -p 16410 monitor > "$WORK/monitor.txt" || true
wait $BENCH
kill $SERVER; wait $SERVER 2>/dev/null || true

# 2. A redis-server under callgrind, its script cache filled by a server's first requests.
valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out" --instr-atstart=no \
  redis-server --port 16412 --save '' --appendonly no >/dev/null 2>&1 & REDIS=$!; PIDS+=($REDIS)
for _ in $(seq 100); do redis-cli -p 16412 ping >/dev/null 2>&1 && break; sleep 0.2; done
FLOWGATE_LOG=error "$BIN" serve --config examples/bench.toml --no-watch --redis-url redis://127.0.0.1:16412/ \
  --redis-deadline 5s --http-addr 127.0.0.1:18412 --grpc-addr 127.0.0.1:18413 & SERVER=$!; PIDS+=($SERVER)
ready 18412
"$BIN" bench --api "$API" --addr 127.0.0.1:18412 --keys 10 --concurrency 1 --warmup 0s --duration 1s --quiet >/dev/null
kill $SERVER; wait $SERVER 2>/dev/null || true
redis-cli -p 16412 flushall >/dev/null

# 3. The replay, counted.
callgrind_control -i on $REDIS >/dev/null 2>&1
python3 - "$WORK/monitor.txt" 16412 "$API" <<'PY'
import re, socket, sys
path, port, api = sys.argv[1], int(sys.argv[2]), sys.argv[3]
escape = re.compile(rb'\\x([0-9a-f]{2})|\\(.)')
def unquote(t):
    def one(m):
        if m.group(1):
            return bytes([int(m.group(1), 16)])
        c = m.group(2)
        return {b'n': b'\n', b'r': b'\r', b't': b'\t', b'a': b'\a', b'b': b'\b'}.get(c, c)
    return escape.sub(one, t)
token = re.compile(rb'"((?:[^"\\]|\\.)*)"')
calls, requests, records = [], 0, set()
for line in open(path, 'rb'):
    if b'"EVALSHA"' not in line:
        continue
    args = [unquote(t) for t in token.findall(line)]
    calls.append(args)
    nkeys = int(args[2])
    keys = args[3:3 + nkeys]
    records.update(k for k in keys if k.startswith(b'{flowgate:res}:r:'))
    requests += sum(1 for k in keys if k.startswith(b'flowgate:{'))
def command(args):
    out = b'*%d\r\n' % len(args)
    for a in args:
        out += b'$%d\r\n%s\r\n' % (len(a), a)
    return out
s = socket.create_connection(('127.0.0.1', port))
f = s.makefile('rb')
def read():
    line = f.readline()
    kind = line[:1]
    if kind == b'$':
        n = int(line[1:])
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b'*':
        n = int(line[1:])
        return None if n < 0 else [read() for _ in range(n)]
    return line
for i in range(0, len(calls), 50):
    batch = calls[i:i + 50]
    s.sendall(b''.join(command(c) for c in batch))
    for _ in batch:
        read()
n = len(records) if api == 'reserve' else requests
open(sys.argv[1] + '.n', 'w').write('%d %d\n' % (n, len(calls)))
PY
callgrind_control -i off $REDIS >/dev/null 2>&1
redis-cli -p 16412 shutdown nosave >/dev/null 2>&1 || true
wait $REDIS 2>/dev/null || true
read -r N CALLS < "$WORK/monitor.txt.n"
IR=$(grep -h '^totals' "$WORK"/callgrind.out* | head -1 | awk '{print $2}')
awk -v api="$API" -v ir="$IR" -v n="$N" -v c="$CALLS" 'BEGIN {
  printf "{\"api\":\"%s\",\"requests\":%d,\"script_calls\":%d,\"redis_instructions_per_request\":%d}\n", api, n, c, ir / n }'

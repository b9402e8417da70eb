#!/usr/bin/env bash
# Instructions per gRPC request: the protocol floor (`flowgate floor`, a constant OK) against
# Flowgate's embedded server (examples/bench.toml), each on one thread under valgrind's callgrind,
# counted while h2load sends N requests (one hot key, 64 in flight on 4 connections) after a
# warm-up of 2,000. Instruction counts do not move with the machine's load, so they show a change
# to the request path that a timed run (bench-limitador.sh) cannot tell from its noise; they do
# not count the kernel, cache misses or the cost of each instruction.
# With LIMITADOR=<path to limitador-server>, limitador's memory store (limitador-limits.yaml, the
# same limit) is counted too.
# With PROFILES=<dir>, the callgrind profiles are kept there, to read where the instructions go
# (`callgrind_annotate --inclusive=yes <dir>/flowgate.<pid>`).
# With REDIS=1, the same server on Redis is counted too (a redis-server started here, the
# decision deadline raised to 2 s so that callgrind's slowness never lets a failure policy
# decide): the instructions of the Flowgate process only, not Redis's.
# With BASELINE=<another flowgate binary>, that binary is counted too, in the same run, and the
# ratio of each figure printed (baseline / binary: 0.97 is 3 % more instructions per request).
# With API=http, the same over the HTTP/JSON API instead: `POST /v1/check` with the same request
# as JSON, over HTTP/1.1 (16 connections, one request at a time each); the floor is not counted
# (it serves gRPC only).
# With CLOSED=1, Flowgate's `decide` scope is closed (a credentials file with one decide token)
# and every request sends that token: the cost of a decision that must be authenticated.
# Needs valgrind and h2load (apt-get install valgrind nghttp2-client).
# Without a binary, it builds one with the production profile (PROFILE=release for the release
# profile).
# Usage: [API=http] [LIMITADOR=…] [REDIS=1] [BASELINE=…] crates/flowgate-server/scripts/bench-instructions.sh
#        [N] [FLOWGATE BINARY]
set -euo pipefail
cd "$(dirname "$0")/../../.."
N=${1:-20000}
TARGET=${CARGO_TARGET_DIR:-target}
BIN=${2:-}
if [ -z "$BIN" ]; then
  PROFILE=${PROFILE:-production}
  cargo build --profile "$PROFILE" -p flowgate-server >&2
  BIN=$TARGET/$PROFILE/flowgate
fi
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
python3 - "$WORK/body" <<'PY'
import struct, sys
def field(n, b): return bytes([n << 3 | 2, len(b)]) + b
# RateLimitRequest{domain: "bench", descriptors: [{entries: [{key: "key", value: "0"}]}]}
req = field(1, b"bench") + field(2, field(1, field(1, b"key") + field(2, b"0")))
open(sys.argv[1], "wb").write(b"\x00" + struct.pack(">I", len(req)) + req)
PY
printf '{"domain":"bench","descriptors":["key=0"]}' > "$WORK/body.json"
AUTH=()
if [ -n "${CLOSED:-}" ]; then
  TOKEN=bench-decide-token-0123456789abcdef0123456789abcdef
  printf 'bench:decide:%s\n' "$TOKEN" > "$WORK/credentials"
  export FLOWGATE_CREDENTIALS_FILE="$WORK/credentials"
  AUTH=(-H "authorization: Bearer $TOKEN")
fi
API=${API:-grpc}
# count LABEL PORT COMMAND...: instructions per request of the server COMMAND serving on PORT.
count() {
  local label=$1 port=$2 pid url out total
  shift 2
  valgrind --tool=callgrind --callgrind-out-file="$WORK/$label.%p" --instr-atstart=no "$@" \
    >/dev/null 2>&1 & pid=$!; PIDS+=("$pid")
  for _ in $(seq 120); do
    sleep 1
    (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  done
  if [ "$label" = flowgate-http ]; then
    url="http://127.0.0.1:$port/v1/check"
    h2() { h2load --h1 -c 16 -m 1 -t 1 -d "$WORK/body.json" -H 'content-type: application/json' ${AUTH[@]+"${AUTH[@]}"} "$@" "$url"; }
  else
    url="http://127.0.0.1:$port/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
    h2() { h2load -c 4 -m 16 -t 1 -d "$WORK/body" -H 'content-type: application/grpc' -H 'te: trailers' ${AUTH[@]+"${AUTH[@]}"} "$@" "$url"; }
  fi
  h2 -n 2000 >/dev/null
  callgrind_control -i on "$pid" >/dev/null 2>&1
  out=$(h2 -n "$N")
  callgrind_control -i off "$pid" >/dev/null 2>&1
  callgrind_control -d "$pid" >/dev/null 2>&1
  # (over HTTP the hot key is mostly refused, 429: every request must be done, not 2xx)
  local ok="$N succeeded"
  if [ "$label" = flowgate-http ]; then ok="$N done"; fi
  grep -q "$ok" <<<"$out" || { echo "$label: not every request succeeded: $out" >&2; exit 1; }
  kill "$pid"; wait "$pid" 2>/dev/null || true
  if [ -n "${PROFILES:-}" ]; then mkdir -p "$PROFILES" && cp "$WORK/$label".* "$PROFILES/"; fi
  total=$(for f in "$WORK/$label".*; do callgrind_annotate "$f" 2>/dev/null; done \
    | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); if ($1 > max) max = $1} END {print max}')
  echo $((total / N))
}
export FLOWGATE_WORKER_THREADS=1 FLOWGATE_LOG=warn
if [ -n "${REDIS:-}" ]; then
  redis-server --port 28596 --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & PIDS+=("$!")
  for _ in $(seq 50); do redis-cli -p 28596 ping >/dev/null 2>&1 && break; sleep 0.1; done
fi
# serve LABEL BINARY [ARGS...]: instructions per request of BINARY serving examples/bench.toml.
serve() {
  local label=$1 bin=$2
  shift 2
  count "$label" 28592 "$bin" serve --config examples/bench.toml --no-watch \
    --data-dir "$WORK/data-$label" --http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:28592 "$@"
}
# stores LABEL BINARY: "embedded redis" figures of BINARY (redis 0 without REDIS).
stores() {
  local label=$1 bin=$2 mem red=0
  mem=$(serve "$label" "$bin")
  if [ -n "${REDIS:-}" ]; then
    redis-cli -p 28596 flushall >/dev/null
    red=$(serve "$label-redis" "$bin" --redis-url redis://127.0.0.1:28596/ --redis-deadline 2s)
  fi
  echo "$mem $red"
}
if [ "$API" = http ]; then
  http=$(count flowgate-http 28595 "$BIN" serve --config examples/bench.toml --no-watch \
    --data-dir "$WORK/data" --http-addr 127.0.0.1:28595 --grpc-addr 127.0.0.1:0)
  echo "instructions per request: flowgate over HTTP (POST /v1/check) $http"
  exit 0
fi
floor=$(count floor 28591 "$BIN" floor --worker-threads 1 --grpc-addr 127.0.0.1:28591)
out=$(stores flowgate "$BIN")
read -r flowgate redis <<<"$out"
base=0; base_redis=0
if [ -n "${BASELINE:-}" ]; then
  out=$(stores baseline "$BASELINE")
  read -r base base_redis <<<"$out"
fi
lim=0
if [ -n "${LIMITADOR:-}" ]; then
  lim=$(count limitador 28593 "$LIMITADOR" --rls-ip 127.0.0.1 --rls-port 28593 --http-ip 127.0.0.1 \
    --http-port 28594 crates/flowgate-server/scripts/limitador-limits.yaml memory)
fi
python3 - "$floor" "$flowgate" "$lim" "$redis" "$base" "$base_redis" <<'PY'
import sys
f, g, l, r, b, br = (int(a) for a in sys.argv[1:])
line = f"instructions per request: floor {f}, flowgate {g}; flowgate / floor {g / f:.3f}"
if l:
    line += f"; limitador {l}; limitador / flowgate {l / g:.2f}"
if r:
    line += f"; flowgate on redis {r}"
print(line)
if b:
    line = f"baseline: flowgate {b}; baseline / flowgate {b / g:.3f}"
    if br and r:
        line += f"; on redis {br}; baseline / flowgate on redis {br / r:.3f}"
    print(line)
PY

#!/usr/bin/env bash
# Flowgate's embedded server against limitador's memory store, and the protocol floor, over
# Envoy's gRPC API at 64 in flight, 1 and 10,000 keys (examples/bench.toml and
# limitador-limits.yaml: the same fixed window of 100/s per key). Each server runs on one thread
# (limitador's gRPC runtime is single-threaded), pinned to CPU 1, and the load generator to CPU 0,
# so that each server has a core of its own. Rounds alternate floor, Flowgate, limitador; the
# medians, their ratios and each server's CPU per request (from /proc) are printed last, then
# each round's ratios.
# `flowgate bench` (a tonic client) is the generator for 1 and 10,000 keys. On one hot key its
# core bounds every server's rate (the floor reaches only about 1.2x limitador), so the hot key
# is measured again with h2load (nghttp2's HTTP/2 load generator, in C: apt-get install
# nghttp2-client), which sends one pre-encoded ShouldRateLimit request (domain bench, key=0)
# over and over; those rows are labelled "h2load". Without h2load they are skipped.
# Usage: LIMITADOR=<path to limitador-server> crates/flowgate-server/scripts/bench-limitador.sh [SECONDS] [ROUNDS]
# (FLOWGATE=<path to a flowgate binary> measures that build instead of building this one with
# the production profile, as limitador's release build is: PROFILE=release for the release one.)
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECS=${1:-5}
ROUNDS=${2:-3}
: "${LIMITADOR:?set LIMITADOR to a limitador-server binary}"
TARGET=${CARGO_TARGET_DIR:-target}
PROFILE=${PROFILE:-production}
BIN=${FLOWGATE:-$TARGET/$PROFILE/flowgate}
OUT=$TARGET/bench-server/limitador.jsonl
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
[ -n "${FLOWGATE:-}" ] || cargo build --profile "$PROFILE" -p flowgate-server >&2
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
taskset -c 1 $BIN floor --worker-threads 1 --grpc-addr 127.0.0.1:18191 2>/dev/null & FLOOR=$!; PIDS+=($!)
FLOWGATE_WORKER_THREADS=1 FLOWGATE_LOG=warn taskset -c 1 $BIN serve --config examples/bench.toml \
  --no-watch --http-addr 127.0.0.1:18180 --grpc-addr 127.0.0.1:18181 & MEMORY=$!; PIDS+=($!)
taskset -c 1 "$LIMITADOR" --rls-ip 127.0.0.1 --rls-port 18195 --http-ip 127.0.0.1 --http-port 18196 \
  crates/flowgate-server/scripts/limitador-limits.yaml memory >/dev/null 2>&1 & LIM=$!; PIDS+=($!)
sleep 2
HZ=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
run() {
  local pid=$1 label=$2 addr=$3 keys=$4 t0 line
  t0=$(ticks "$pid")
  line=$(taskset -c 0 $BIN bench --api grpc --addr "$addr" --label "$label" --concurrency 64 \
    --connections 4 --keys "$keys" --duration "${SECS}s" --warmup 1s --quiet)
  python3 -c 'import json, sys
d = json.loads(sys.argv[1]); d["server_cpu_s"] = (int(sys.argv[3]) - int(sys.argv[2])) / float(sys.argv[4])
print(json.dumps(d))' "$line" "$t0" "$(ticks "$pid")" "$HZ" | tee -a "$OUT"
}
# h2load PID LABEL ADDR: one hot key through h2load, 64 in flight on 4 connections.
BODY=$(mktemp)
python3 - "$BODY" <<'PY'
import struct, sys
def field(n, b): return bytes([n << 3 | 2, len(b)]) + b
# RateLimitRequest{domain: "bench", descriptors: [{entries: [{key: "key", value: "0"}]}]}
req = field(1, b"bench") + field(2, field(1, field(1, b"key") + field(2, b"0")))
open(sys.argv[1], "wb").write(b"\x00" + struct.pack(">I", len(req)) + req)
PY
h2run() {
  local pid=$1 label=$2 addr=$3 t0 out
  t0=$(ticks "$pid")
  out=$(taskset -c 0 h2load -D "$SECS" --warm-up-time 1 -c 4 -m 16 -t 1 -d "$BODY" \
    -H 'content-type: application/grpc' -H 'te: trailers' \
    "http://$addr/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
  python3 -c 'import json, re, sys
out, secs = sys.argv[1], float(sys.argv[5])
done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", out).group(1))
ok = int(re.search(r"status codes: (\d+) 2xx", out).group(1))
print(json.dumps({"label": sys.argv[6], "generator": "h2load", "keys": 1, "requests": done,
  "throughput": done / secs, "errors": done - ok,
  "server_cpu_s": (int(sys.argv[3]) - int(sys.argv[2])) / float(sys.argv[4])}))' \
    "$out" "$t0" "$(ticks "$pid")" "$HZ" "$SECS" "$label" | tee -a "$OUT"
}
for keys in 1 10000; do
  for round in $(seq "$ROUNDS"); do
    run "$FLOOR" floor 127.0.0.1:18191 "$keys"
    run "$MEMORY" flowgate 127.0.0.1:18181 "$keys"
    run "$LIM" limitador 127.0.0.1:18195 "$keys"
  done
done
if command -v h2load >/dev/null; then
  for round in $(seq "$ROUNDS"); do
    h2run "$FLOOR" floor 127.0.0.1:18191
    h2run "$MEMORY" flowgate 127.0.0.1:18181
    h2run "$LIM" limitador 127.0.0.1:18195
  done
else
  echo "h2load not found (apt-get install nghttp2-client): its rows are skipped" >&2
fi
rm -f "$BODY"
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
groups = sorted({(r.get("generator", "flowgate bench"), r["keys"]) for r in rows}, reverse=True)
for gen, keys in groups:
    med, cpu = {}, {}
    for label in ("floor", "flowgate", "limitador"):
        rs = [r for r in rows if r["keys"] == keys and r["label"] == label
              and r.get("generator", "flowgate bench") == gen]
        med[label] = statistics.median(r["throughput"] for r in rs)
        # The server's CPU covers the 1 s warm-up too: its requests are estimated at one
        # second's throughput.
        cpu[label] = statistics.median(r["server_cpu_s"] / (r["requests"] + r["throughput"]) * 1e6 for r in rs)
    print(f"{gen}, keys {keys}: floor {med['floor']:.0f}/s ({cpu['floor']:.1f} us/req), "
          f"flowgate {med['flowgate']:.0f}/s ({cpu['flowgate']:.1f} us/req), "
          f"limitador {med['limitador']:.0f}/s ({cpu['limitador']:.1f} us/req); "
          f"flowgate / limitador {med['flowgate'] / med['limitador']:.2f}, floor / limitador {med['floor'] / med['limitador']:.2f}, "
          f"flowgate CPU / floor CPU {cpu['flowgate'] / cpu['floor']:.2f}")
    # Round by round (each round runs the three servers one after the other): how far the
    # ratios spread on this machine.
    by = {label: [r for r in rows if r["keys"] == keys and r["label"] == label
                  and r.get("generator", "flowgate bench") == gen]
          for label in ("floor", "flowgate", "limitador")}
    per = lambda r: r["server_cpu_s"] / (r["requests"] + r["throughput"])
    rounds = zip(by["floor"], by["flowgate"], by["limitador"])
    print("  rounds (flowgate / limitador, flowgate CPU / floor CPU): " + " ".join(
        f"({g['throughput'] / l['throughput']:.2f}, {per(g) / per(f):.2f})" for f, g, l in rounds))
PY

#!/usr/bin/env bash
# What the Java client costs (BENCHMARKS.md, "What does the Java client cost?"): the release
# `flowgate serve --config examples/bench.toml` (embedded store) on free loopback ports, loaded
# alternately, round by round, by the server's own load generator (`flowgate bench`) and by the
# Java client's (clients/java/flowgate-bench: `check` in a loop on threads sharing one client),
# over HTTP/1.1 keep-alive (as many connections as calls in flight, on both sides) and over gRPC
# (one connection), at 1 and 64 in flight, the same 10,000 keys (all admitted at these rates).
# Each run is measured after a warm-up: 1 s for `flowgate bench`, 5 s for the JVM (whose JIT is
# still compiling the client's path after 2 s). One line per round and case; last, the medians
# and their ratio (Java calls/s over `flowgate bench` calls/s).
# With PIN=1 the server runs on CPU 1 and the load generators on CPU 0 (taskset), so that the
# Java client's CPU is not taken from the server.
# With FLOWGATE_BIN=path that release binary is used and nothing is built by cargo.
# Usage: [PIN=1] [FLOWGATE_BIN=path] clients/java/scripts/bench.sh [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECS=${1:-5}
ROUNDS=${2:-3}
KEYS=10000
TARGET=${CARGO_TARGET_DIR:-target}
BIN=${FLOWGATE_BIN:-$TARGET/release/flowgate}
OUT=$TARGET/bench-java/last-run.jsonl
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
[ -n "${FLOWGATE_BIN:-}" ] || cargo build --release -p flowgate-server --bin flowgate >&2
mvn -B -q -f clients/java/pom.xml install -DskipTests >&2
CP_FILE=$(mktemp)
mvn -B -q -f clients/java/flowgate-bench/pom.xml dependency:build-classpath -Dmdep.outputFile="$CP_FILE" >&2
CP="clients/java/flowgate-bench/target/classes:$(cat "$CP_FILE")"
DATA=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DATA" "$CP_FILE"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
HTTP=127.0.0.1:$(free_port)
GRPC=127.0.0.1:$(free_port)
SERVER_CPU=(); LOAD_CPU=()
if [ -n "${PIN:-}" ]; then SERVER_CPU=(taskset -c 1); LOAD_CPU=(taskset -c 0); fi
FLOWGATE_LOG=warn "${SERVER_CPU[@]}" $BIN serve --config examples/bench.toml --no-watch --data-dir "$DATA" \
  --http-addr "$HTTP" --grpc-addr "$GRPC" & PIDS+=($!)
for _ in $(seq 100); do
  curl -sf "http://$HTTP/readyz" >/dev/null && break
  sleep 0.1
done
curl -sf "http://$HTTP/readyz" >/dev/null || { echo "flowgate did not become ready on $HTTP" >&2; exit 1; }
echo "$(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); ${SECS}s per run, $ROUNDS rounds${PIN:+, pinned}" >&2
# tag JSON LINE: the line with "side" and "round" added, kept in $OUT.
tag() { python3 -c 'import json, sys; d = json.loads(sys.argv[3]); d["side"] = sys.argv[1]; d["round"] = int(sys.argv[2]); print(json.dumps(d))' "$@" | tee -a "$OUT" >/dev/null; }
for round in $(seq "$ROUNDS"); do
  for api in http grpc; do
    addr=$HTTP; [ "$api" = grpc ] && addr=$GRPC
    for c in 1 64; do
      # HTTP/1.1: one connection per call in flight, as the Java client's pool opens; gRPC: one.
      conns=1; [ "$api" = http ] && conns=$c
      tag flowgate "$round" "$("${LOAD_CPU[@]}" $BIN bench --api "$api" --addr "$addr" --concurrency "$c" --connections "$conns" \
        --keys "$KEYS" --duration "${SECS}s" --warmup 1s --label "$api-$c" --quiet)"
      tag java "$round" "$("${LOAD_CPU[@]}" java -cp "$CP" dev.flowgate.bench.ClientBench --api "$api" --addr "$addr" \
        --threads "$c" --keys "$KEYS" --duration "$SECS" --warmup 5)"
      python3 - "$OUT" "$round" "$api" "$c" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rnd, api, c = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
f = [r for r in rows if r["side"] == "flowgate" and r["round"] == rnd and r["label"] == f"{api}-{c}"][-1]
j = [r for r in rows if r["side"] == "java" and r["round"] == rnd and r["api"] == api and r["threads"] == c][-1]
print(f"round {rnd} {api:4} {c:2} in flight: java {j['throughput']:.0f}/s p50 {j['p50_us']} us p99 {j['p99_us']} us "
      f"(errors {j['errors']}) | flowgate bench {f['throughput']:.0f}/s p50 {f['p50_us']} us p99 {f['p99_us']} us | ratio {j['throughput'] / f['throughput']:.2f}")
PY
    done
  done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| case | Java calls/s | p50 | p99 | flowgate bench calls/s | ratio |")
print("|---|---:|---:|---:|---:|---:|")
for api in ("http", "grpc"):
    for c in (1, 64):
        j = [r for r in rows if r["side"] == "java" and r["api"] == api and r["threads"] == c]
        f = [r for r in rows if r["side"] == "flowgate" and r["label"] == f"{api}-{c}"]
        jt = statistics.median(r["throughput"] for r in j)
        ft = statistics.median(r["throughput"] for r in f)
        p50 = statistics.median(r["p50_us"] for r in j)
        p99 = statistics.median(r["p99_us"] for r in j)
        name = "HTTP/1.1" if api == "http" else "gRPC"
        print(f"| {name}, {c} thread{'s' if c > 1 else ''} | {jt:,.0f} | {p50 / 1000:.2f} ms | {p99 / 1000:.2f} ms | {ft:,.0f} | {jt / ft:.2f} |")
PY

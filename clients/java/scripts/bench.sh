#!/usr/bin/env bash
# What the Java client costs (BENCHMARKS.md, "What does the Java client cost?"): the release
# `flowgate serve --config examples/bench.toml` (embedded store) on free loopback ports, loaded
# alternately, round by round, by the server's own load generator (`flowgate bench`) and by the
# Java client's (clients/java/flowgate-bench: `check` in a loop on threads sharing one client),
# over HTTP/1.1 keep-alive (as many connections as calls in flight, on both sides) and over gRPC
# (one connection), at 1 and 64 in flight, the same 10,000 keys (all admitted at these rates).
# Each run is measured after a warm-up: 1 s for `flowgate bench`, 5 s for the JVM (whose JIT is
# still compiling the client's path after 2 s). At 64 threads over HTTP/1.1 the Java client runs
# twice: as built by default (the checks of many threads share connections, pipelined up to 16
# deep: docs/clients.md) and with `pipelining(1)` (a connection per call in flight). One line per round and case; last,
# the medians and their ratio (Java calls/s over `flowgate bench` calls/s), and the CPU time (user
# and system) per call of each load generator and of the server under each: the Java client's
# and the server's over the measured phase, `flowgate bench`'s over its whole run (warm-up
# included) and the server's over the same. CPU per call holds when other work loads the
# machine; the ratio does not.
# With PIN=1 the server runs on CPU 1 and the load generators on CPU 0 (taskset), so that the
# Java client's CPU is not taken from the server. With REDIS=1 the server runs on a local
# redis-server instead of the embedded store (the figures of pipelining on Redis).
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
# The modules' own classes first: ~/.m2's snapshots may be another checkout's.
CP="clients/java/flowgate-bench/target/classes:clients/java/flowgate-client/target/classes"
CP="$CP:clients/java/flowgate-client-grpc/target/classes:$(cat "$CP_FILE")"
DATA=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DATA" "$CP_FILE"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
HTTP=127.0.0.1:$(free_port)
GRPC=127.0.0.1:$(free_port)
SERVER_CPU=(); LOAD_CPU=()
if [ -n "${PIN:-}" ]; then SERVER_CPU=(taskset -c 1); LOAD_CPU=(taskset -c 0); fi
STORE=()
if [ -n "${REDIS:-}" ]; then
  REDIS_PORT=$(free_port)
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DATA" >/dev/null & PIDS+=($!)
  for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  STORE=(--redis-url "redis://127.0.0.1:$REDIS_PORT/")
fi
FLOWGATE_LOG=warn "${SERVER_CPU[@]}" $BIN serve --config examples/bench.toml --no-watch --data-dir "$DATA" \
  "${STORE[@]}" --http-addr "$HTTP" --grpc-addr "$GRPC" & SERVER_PID=$!; PIDS+=($SERVER_PID)
for _ in $(seq 100); do
  curl -sf "http://$HTTP/readyz" >/dev/null && break
  sleep 0.1
done
curl -sf "http://$HTTP/readyz" >/dev/null || { echo "flowgate did not become ready on $HTTP" >&2; exit 1; }
echo "$(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); ${SECS}s per run, $ROUNDS rounds${PIN:+, pinned}${REDIS:+, on Redis}" >&2
# tag JSON LINE: the line with "side" and "round" added, kept in $OUT.
tag() { python3 -c 'import json, sys; d = json.loads(sys.argv[3]); d["side"] = sys.argv[1]; d["round"] = int(sys.argv[2]); print(json.dumps(d))' "$@" | tee -a "$OUT" >/dev/null; }
# cpu_run SERVER_PID WARMUP_SECS SECS COMMAND...: runs `flowgate bench`, prints its JSON line with
# its own CPU and the server's over the run, per call (calls: throughput x (warm-up + duration)).
cpu_run() {
  python3 - "$@" <<'PY'
import json, os, subprocess, sys
server, warm, secs, cmd = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read()
    f = f[f.rindex(")") + 2:].split()
    return (int(f[11]) + int(f[12])) * 1e6 / os.sysconf("SC_CLK_TCK")
s0 = cpu(server)
p = subprocess.Popen(cmd, stdout=subprocess.PIPE)
out = p.stdout.read()
ru = os.wait4(p.pid, 0)[2]
s1 = cpu(server)
d = json.loads(out)
calls = d["throughput"] * (warm + secs)
d["cpu_us_per_call"] = round(1e6 * (ru.ru_utime + ru.ru_stime) / calls, 1)
d["server_cpu_us_per_call"] = round((s1 - s0) / calls, 1)
print(json.dumps(d))
PY
}
for round in $(seq "$ROUNDS"); do
  for api in http grpc; do
    addr=$HTTP; [ "$api" = grpc ] && addr=$GRPC
    for c in 1 64; do
      # HTTP/1.1: one connection per call in flight, as the Java client's pool opens; gRPC: one.
      conns=1; [ "$api" = http ] && conns=$c
      tag flowgate "$round" "$(cpu_run "$SERVER_PID" 1 "$SECS" "${LOAD_CPU[@]}" $BIN bench --api "$api" --addr "$addr" \
        --concurrency "$c" --connections "$conns" --keys "$KEYS" --duration "${SECS}s" --warmup 1s --label "$api-$c" --quiet)"
      # HTTP/1.1: as built by default (pipelining up to 16), and at 64 threads with pipelining(1).
      depths=(1); [ "$api" = http ] && depths=(16); [ "$api" = http ] && [ "$c" -gt 1 ] && depths=(16 1)
      for depth in "${depths[@]}"; do
        tag java "$round" "$("${LOAD_CPU[@]}" java -cp "$CP" dev.flowgate.bench.ClientBench --api "$api" --addr "$addr" \
          --threads "$c" --pipelining "$depth" --keys "$KEYS" --duration "$SECS" --warmup 5 --server-pid "$SERVER_PID")"
        python3 - "$OUT" "$round" "$api" "$c" "$depth" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rnd, api, c, depth = int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
f = [r for r in rows if r["side"] == "flowgate" and r["round"] == rnd and r["label"] == f"{api}-{c}"][-1]
j = [r for r in rows if r["side"] == "java" and r["round"] == rnd and r["api"] == api and r["threads"] == c
     and r["pipelining"] == depth][-1]
print(f"round {rnd} {api:4} {c:2} in flight{' pipelining off' if api == 'http' and depth == 1 else ''}: java {j['throughput']:.0f}/s "
      f"p50 {j['p50_us']} us p99 {j['p99_us']} us (errors {j['errors']}) cpu {j['cpu_us_per_call']} us/call, server {j['server_cpu_us_per_call']} "
      f"| flowgate bench {f['throughput']:.0f}/s p50 {f['p50_us']} us p99 {f['p99_us']} us cpu {f['cpu_us_per_call']} us/call, "
      f"server {f['server_cpu_us_per_call']} | ratio {j['throughput'] / f['throughput']:.2f}")
PY
      done
    done
  done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| case | Java calls/s | p50 | p99 | flowgate bench calls/s | ratio "
      "| CPU/call: Java | server under Java | flowgate bench | server under it |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
med = lambda rs, k: statistics.median(r[k] for r in rs)
for api, c, depth in (("http", 1, 16), ("http", 64, 16), ("http", 64, 1), ("grpc", 1, 1), ("grpc", 64, 1)):
    j = [r for r in rows if r["side"] == "java" and r["api"] == api and r["threads"] == c and r["pipelining"] == depth]
    f = [r for r in rows if r["side"] == "flowgate" and r["label"] == f"{api}-{c}"]
    jt, ft = med(j, "throughput"), med(f, "throughput")
    name = ("HTTP/1.1" if api == "http" else "gRPC") + f", {c} thread{'s' if c > 1 else ''}"
    if api == "http" and depth == 1:
        name += ", pipelining(1)"
    print(f"| {name} | {jt:,.0f} | {med(j, 'p50_us') / 1000:.2f} ms | {med(j, 'p99_us') / 1000:.2f} ms | {ft:,.0f} | {jt / ft:.2f} "
          f"| {med(j, 'cpu_us_per_call'):.1f} us | {med(j, 'server_cpu_us_per_call'):.1f} us "
          f"| {med(f, 'cpu_us_per_call'):.1f} us | {med(f, 'server_cpu_us_per_call'):.1f} us |")
PY

#!/usr/bin/env bash
# Microseconds per piece of a decide script inside Redis's Lua: reading a key (MGET), writing
# one (SET KEEPTTL, SETRANGE, SET PXAT), decoding an item (fast.lua's bytes, or struct.unpack as
# before session 9), a shared TAT as a string or a number, a new sliding log by pack or by
# concatenation.
# Starts a redis-server on a free loopback port and stops it.
#
#   crates/flowgate-redis/benches/lua-costs.sh [value bytes ...]   (default: 8 148)
set -euo pipefail
cd "$(dirname "$0")"
[ $# -gt 0 ] || set -- 8 148
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
keys=$(for i in $(seq 27); do echo -n "flowgate:{bench:lua:$((i * 371))}:l "; done)
for bytes in "$@"; do
  for mode in mget set setrange pxat; do
    echo "$bytes-byte values, $mode: $(redis-cli -p "$port" --eval lua-costs.lua $keys , "$mode" "$bytes") us"
  done
done
for mode in decode decode-struct tat-string tat-number; do
  echo "$mode: $(redis-cli -p "$port" --eval lua-costs.lua $keys , "$mode" 8) us"
done
for entries in 8 50; do
  for mode in log-pack log-concat; do
    echo "$entries-entry log, $mode: $(redis-cli -p "$port" --eval lua-costs.lua $keys , "$mode" "$entries") us"
  done
done

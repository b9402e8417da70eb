#!/usr/bin/env bash
# The HTTP API against its own OpenAPI document, from outside the code: schemathesis runs every
# operation of the document that a real `flowgate serve` publishes at /openapi.json, with a
# bounded number of generated requests each (valid and invalid), and fails on any 5xx and on any
# answer the document does not describe (its status, content type, headers or body).
#
# The server runs on free loopback ports with an admin token (so the admin operations are
# reached), rules of each kind, a breaker and a queue, and is stopped by its PID at the end.
# schemathesis is installed into a virtualenv under target/ when missing, with the first Python
# that runs (a pyenv shim may name a version it cannot run) of python3.13, python3.12, pyenv's
# 3.12 or later, and python3: CPython 3.11's parser fails on schemathesis's own source now and
# then ("SystemError: AST constructor recursion depth mismatch"), so 3.12 or later is preferred.
#
# Usage: crates/flowgate-server/scripts/schemathesis.sh
# Environment: FLOWGATE_BIN (default target/debug/flowgate, built when missing),
# SCHEMATHESIS_EXAMPLES (per operation, default 60), SCHEMATHESIS_SEED (default 1; any other
# number explores other requests).
set -euo pipefail
cd "$(dirname "$0")/../../.."
TARGET=${CARGO_TARGET_DIR:-target}
VERSION=4.32.5
VENV=$TARGET/schemathesis
if ! "$VENV/bin/st" --version 2>/dev/null | grep -q "version $VERSION\$"; then
  PYTHON=""
  PYENV_PYTHONS=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV || true)
  for p in python3.13 python3.12 $PYENV_PYTHONS python3; do
    if "$p" -c "import venv, ensurepip" >/dev/null 2>&1; then PYTHON=$p; break; fi
  done
  if [ -z "$PYTHON" ]; then echo "schemathesis needs python3 (3.12 or later preferred)" >&2; exit 1; fi
  echo "== installing schemathesis $VERSION into $VENV ($($PYTHON --version))"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==$VERSION"
fi
BIN=${FLOWGATE_BIN:-$TARGET/debug/flowgate}
if [ ! -x "$BIN" ]; then cargo build -p flowgate-server --bin flowgate; fi

WORK=$(mktemp -d)
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

cat > "$WORK/rules.toml" <<'TOML'
domain = "api"

[[rule]]
name = "per-client"
match = "client"
limit = "5/s"

[[rule]]
name = "shaped"
match = "channel=WPG"
limit = "10/s"
algorithm = "leaky_bucket"
mode = "delay"
max_wait = "100ms"

[[rule]]
name = "in-flight"
match = "export"
limit = "2/1m"
algorithm = "concurrency"

[[breaker]]
name = "pay"
match = "psp"
strategy = "error_ratio"
threshold = 0.5
window = "10s"
min_calls = 5
open_for = "5s"

[[queue]]
name = "jobs"
match = ["biz=JOB", "channel"]
rate = "100/s"
max_payload = 4096
max_depth = 100
TOML

# An event stream is read for its first 2 events (one a second), not schemathesis's default 20.
cat > "$WORK/schemathesis.toml" <<'TOML'
max-stream-events = 2
TOML

TOKEN=schemathesis-admin-token-0123456789abcdef
FLOWGATE_ADMIN_TOKEN="$TOKEN" FLOWGATE_LOG=info "$BIN" serve --config "$WORK/rules.toml" --no-watch --data-dir "$WORK/data" \
  --http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 2>"$WORK/log" &
PID=$!
ADDR=""
for _ in $(seq 300); do
  ADDR=$(sed -n 's/.*flowgate serving.* http_addr=\([0-9.:]*\).*/\1/p' "$WORK/log" | head -1)
  if [ -n "$ADDR" ]; then break; fi
  kill -0 "$PID" 2>/dev/null || { cat "$WORK/log" >&2; exit 1; }
  sleep 0.1
done
if [ -z "$ADDR" ]; then echo "flowgate did not start:" >&2; cat "$WORK/log" >&2; exit 1; fi
echo "== schemathesis against http://$ADDR/openapi.json (server PID $PID)"

"$VENV/bin/st" --config-file "$WORK/schemathesis.toml" run "http://$ADDR/openapi.json" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance \
  --header "Authorization: Bearer $TOKEN" \
  --max-examples "${SCHEMATHESIS_EXAMPLES:-60}" \
  --seed "${SCHEMATHESIS_SEED:-1}" \
  --request-timeout 10 \
  --workers 2 \
  --no-color \
  --warnings off

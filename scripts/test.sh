#!/usr/bin/env bash
# Flowgate's whole test suite, on a fresh machine: installs redis-server when it is missing
# (tests start their own servers on free loopback ports), promtool, prometheus-alertmanager
# (the alerts' end-to-end test) and chromium with chromedriver (the dashboard's browser test),
# Maven and a JDK (the Java client), then formatting, lints, the docs, and every test (unit,
# property, conformance against memory, Redis and Redis Cluster, integration, doc tests), the Java
# client's build and tests against the binary those built, and last schemathesis against a real
# server, from the API's OpenAPI document.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1 \
  || ! command -v redis-sentinel >/dev/null 2>&1 \
  || ! command -v curl >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
  echo "== installing redis-server, redis-sentinel, curl and iproute2 (Debian packages; the docs test runs the curl examples, the partition test makes network namespaces with ip)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-sentinel redis-tools curl iproute2 >/dev/null
fi
redis-server --version

# promtool (Debian's prometheus package) checks and unit-tests deploy/prometheus/alerts.yml and
# parses the Grafana dashboard's queries (crates/flowgate-server/tests/deploy.rs).
if ! command -v promtool >/dev/null 2>&1; then
  echo "== installing promtool (Debian's prometheus package)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
promtool --version | head -1

# The alerts' end-to-end test sends to a real Alertmanager (Debian's prometheus-alertmanager).
if ! command -v prometheus-alertmanager >/dev/null 2>&1 && ! command -v alertmanager >/dev/null 2>&1; then
  echo "== installing prometheus-alertmanager (Debian's package)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus-alertmanager >/dev/null
fi
(prometheus-alertmanager --version 2>&1 || alertmanager --version 2>&1) | head -1

# schemathesis (crates/flowgate-server/scripts/schemathesis.sh) is installed by pip into a
# virtualenv under target/, which needs Python's venv and ensurepip (Debian's python3-venv).
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  echo "== installing python3 and python3-venv (Debian packages; schemathesis's virtualenv)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null
fi

# The dashboard's browser test drives a headless Chromium through chromedriver.
if ! command -v chromedriver >/dev/null 2>&1; then
  echo "== installing chromium and chromium-driver (Debian packages; the dashboard's browser test)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
chromedriver --version

# The Java client (clients/java) builds with Maven on a JDK 17 or newer.
if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
  echo "== installing maven and openjdk-17-jdk-headless (Debian packages; the Java client)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless maven >/dev/null
fi

# A one-off build (CI's fresh clone) gains nothing from incremental caches, which would double
# the disk it needs.
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo doc (warnings, broken and private links included, are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
echo "== cargo test"
cargo test --workspace --locked
echo "== the Java client: mvn verify in clients/java, against the flowgate binary cargo test built"
scripts/test-java.sh
echo "== schemathesis: the HTTP API against its OpenAPI document"
crates/flowgate-server/scripts/schemathesis.sh

#!/usr/bin/env bash
# The Java modules of clients/java: build them and run their tests (against the real `flowgate`
# binary, which must be built already: `cargo build -p flowgate-server --bin flowgate`, or the
# workspace's `cargo test`). Maven resolves its dependencies from Maven Central into ~/.m2 the
# first time, then from there. Prints a closing line `java: N passed, N failed`.
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
binary="$(cd "$target" && pwd)/debug/flowgate"
if [ ! -x "$binary" ]; then
  echo "no flowgate binary at $binary: build it with cargo build -p flowgate-server --bin flowgate" >&2
  exit 1
fi

status=0
(cd clients/java && mvn -q -B -ntp -Dstyle.color=never clean verify -Dflowgate.binary="$binary") || status=$?

# The tests' count, from Surefire's reports, on a line of its own (Debian's Maven ends its quiet
# output with colour resets and no newline).
echo
python3 - <<'PY' || true
import glob, xml.etree.ElementTree as ET
tests = failed = skipped = 0
for f in glob.glob("clients/java/*/target/surefire-reports/TEST-*.xml"):
    r = ET.parse(f).getroot()
    tests += int(r.get("tests", 0))
    failed += int(r.get("failures", 0)) + int(r.get("errors", 0))
    skipped += int(r.get("skipped", 0))
print(f"java: {tests - failed - skipped} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
PY
exit "$status"

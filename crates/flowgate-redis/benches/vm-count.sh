#!/usr/bin/env bash
# Lua VM instructions the fast decide script runs per request, 1 rule against the field's 3
# rules, counted in a stand-alone Lua 5.1 (see vm-count.lua). `lines` adds the count per line of
# the assembled script.
#
#   REDIS_SRC=<redis source> crates/flowgate-redis/benches/vm-count.sh [lines|-] [code]
#   (code: the 1-rule request's algorithm instead of a token bucket, e.g. 4 for a sliding log)
#
# Needs lua5.1 and liblua5.1-0-dev (apt) and Redis's struct library, deps/lua/src/lua_struct.c,
# from a Redis source tree (`apt-get source redis` with deb-src enabled).
set -euo pipefail
cd "$(dirname "$0")"
: "${REDIS_SRC:?set REDIS_SRC to a Redis source tree}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gcc -O2 -shared -fPIC -I/usr/include/lua5.1 "$REDIS_SRC/deps/lua/src/lua_struct.c" -o "$out/struct.so"
# The fast script as scripts.rs assembles it: fast.lua with each algorithm's fragment.
python3 - "$out/fast.lua" <<'PY'
import sys
algs = ['gcra', 'fixed_window', 'sliding_window', 'sliding_log', 'concurrency']
d = ''
for i, a in enumerate(algs):
    frag = open('../scripts/%s.lua' % a).read().split('\n-- @@fast\n', 1)[1]
    d += ('if' if i == 0 else 'elseif') + ' code < %d then\n' % (i + 2) + frag + '\n'
d += 'end'
open(sys.argv[1], 'w').write(open('../scripts/fast.lua').read().replace('@ALGORITHMS@', d))
PY
lua5.1 vm-count.lua "$out/struct.so" "$out/fast.lua" "${1:-}" "${2:-1}"

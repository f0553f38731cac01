#!/usr/bin/env bash
# test_layering.sh: the layering of src/ (docs/architecture.md) holds: no include cycle
# between its folders (scripts/include_graph.py, which also prints the order), and no
# function over 150 lines (scripts/long_functions.py). Both scripts exit 1 on a
# violation; each is also checked to catch one, on a copy of src/ with one planted.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
fail() { echo "FAIL: $*"; exit 1; }
out=$($PY scripts/include_graph.py) || { echo "$out"; fail "include cycle in src/"; }
grep -m1 '^layering' <<<"$out"
out=$($PY scripts/long_functions.py) || { echo "$out"; fail "a function over 150 lines in src/"; }
echo "no function over 150 lines"
# The checks are not vacuous: a planted cycle (model including train) and a planted long
# function both fail.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp -r src "$tmp/src"
printf '#include "train/trainer.h"\n' >> "$tmp/src/model/params.c"
(cd "$tmp" && $PY "$OLDPWD/scripts/include_graph.py" >/dev/null) && fail "include_graph.py missed a planted model -> train cycle"
cp -r src/. "$tmp/src/"
{ echo "int planted_long(void) {"; for i in $(seq 160); do echo "    int v$i = $i;"; done; echo "    return 0;"; echo "}"; } >> "$tmp/src/util/common.c"
(cd "$tmp" && $PY "$OLDPWD/scripts/long_functions.py" >/dev/null) && fail "long_functions.py missed a planted 163-line function"
echo "planted cycle and long function both caught"

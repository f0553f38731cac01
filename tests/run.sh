#!/usr/bin/env bash
# run.sh: runs every test (C programs in build/tests, tests/test_*.py with Debian's
# python3, tests/test_*.sh, tests/test_*.mjs with node) and ends with the line
# "N passed, N failed". A test passes when it exits 0. Optional args: name filters.
cd "$(dirname "$0")/.."
export OLMO_BIN="$PWD/build/olmo"
export PYTHON=/usr/bin/python3
pass=0; fail=0; failed=()
run_one() {
  local name=$1; shift
  if [ "${#FILTERS[@]}" -gt 0 ]; then
    local hit=0; for f in "${FILTERS[@]}"; do [[ $name == *$f* ]] && hit=1; done
    [ $hit = 1 ] || return 0
  fi
  local t0=$(date +%s%N) log; log=$(mktemp)
  if "$@" >"$log" 2>&1; then
    pass=$((pass+1)); local ms=$(( ($(date +%s%N) - t0) / 1000000 )); printf 'PASS %-40s %5d.%01ds\n' "$name" $((ms/1000)) $((ms%1000/100))
  else
    fail=$((fail+1)); failed+=("$name"); printf 'FAIL %-40s\n' "$name"; sed 's/^/    | /' "$log" | tail -40
  fi
  rm -f "$log"
}
FILTERS=("$@")
for t in build/tests/test_*; do [ -x "$t" ] && [[ $t != *.o && $t != *.d ]] && run_one "$(basename "$t")" "$t"; done
for t in tests/test_*.py; do [ -f "$t" ] && run_one "$(basename "$t")" "$PYTHON" "$t"; done
for t in tests/test_*.sh; do [ -f "$t" ] && run_one "$(basename "$t")" bash "$t"; done
for t in tests/test_*.mjs; do [ -f "$t" ] && run_one "$(basename "$t")" node "$t"; done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

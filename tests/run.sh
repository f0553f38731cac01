#!/usr/bin/env bash
# run.sh: runs every test (C programs in build/tests, tests/test_*.py with Debian's
# python3, tests/test_*.sh, tests/test_*.mjs with node) and ends with the line
# "N passed, N failed". A test passes when it exits 0. Optional args: name filters.
cd "$(dirname "$0")/.."
# A full temporary directory makes tests fail in ways that look like bugs (a short write
# here, a missing file there): check it first. Measured: the whole suite's peak use of its
# TMPDIR, sampled every 2 s with du in a fresh clone, was 526 and 603 MiB in two runs
# (2026-12-02); 2 GiB
# leaves room for what a 2 s sample misses and for growth.
need_mb=${OLMO_TEST_TMP_MB:-2048}
tmpdir=${TMPDIR:-/tmp}
avail_mb=$(df -Pm "$tmpdir" 2>/dev/null | awk 'NR == 2 {print $4}')
if [ -z "$avail_mb" ] || [ "$avail_mb" -lt "$need_mb" ]; then
  echo "run.sh: ${avail_mb:-no} MiB free in TMPDIR=$tmpdir; the suite needs about $need_mb MiB there (point TMPDIR at a roomier directory)"
  echo "0 passed, 1 failed"
  exit 1
fi
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

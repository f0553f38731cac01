#!/usr/bin/env bash
# test_blas_core.sh: the product and every test and tool program run the same OpenBLAS
# kernels (src/util/blas_core.h), whatever OPENBLAS_CORETYPE the environment sets or
# leaves unset, so the suite checks the kernels `olmo` runs. Each program says which
# core it would run with OLMO_BLAS_CORE_REPORT=exit (printed after blas_core_init's
# choice, then exit 0); all must equal build/olmo's, and a core the environment sets is
# kept as given.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${OLMO_BUILD:-build}
fail() { echo "FAIL: $*"; exit 1; }
core_of() {   # core_of PROGRAM [VAR=VALUE...]: the core it reports
  local p=$1; shift
  env "$@" OLMO_BLAS_CORE_REPORT=exit "$p" </dev/null 2>&1 >/dev/null | sed -n 's/^openblas core: //p' | head -1
}
progs=("$BUILD/olmo")
for p in "$BUILD"/tests/test_* "$BUILD"/tests/tool_*; do
  [ -x "$p" ] && [[ $p != *.o && $p != *.d ]] && progs+=("$p")
done
[ ${#progs[@]} -ge 12 ] || fail "only ${#progs[@]} programs under $BUILD"
check_env() {   # check_env [VAR=VALUE...]: prints the one core every program reports
  local want; want=$(core_of "$BUILD/olmo" "$@")
  [ -n "$want" ] || fail "${*:-unset}: build/olmo reported no core"
  for p in "${progs[@]}"; do
    local got; got=$(core_of "$p" "$@")
    [ "$got" = "$want" ] || fail "${*:-OPENBLAS_CORETYPE unset}: $(basename "$p") runs '${got:-no report}', build/olmo '$want'"
  done
  echo "$want"
}
unset OPENBLAS_CORETYPE
auto=$(check_env)
echo "OPENBLAS_CORETYPE unset: all ${#progs[@]} programs run $auto"
# Unset, the choice uses what the CPU has: never the SSE3 fallback on an AVX2+FMA CPU.
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  [ "$auto" != Prescott ] || fail "AVX2+FMA CPU but the programs run Prescott (SSE3)"
fi
# Set by the user, the core stands as given in every program.
cores=(Prescott)
grep -qw fma /proc/cpuinfo && grep -qw avx2 /proc/cpuinfo && cores+=(Haswell)
grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && cores+=(SkylakeX)
# Debian 12's OpenBLAS (0.3.21) has no SapphireRapids core ("Core not found", it falls back to
# Cooperlake): on AMX machines Cooperlake, the newest core it has, is the one to set.
grep -qw avx512_bf16 /proc/cpuinfo && cores+=(Cooperlake)
for c in "${cores[@]}"; do
  got=$(check_env OPENBLAS_CORETYPE=$c)
  [ "${got,,}" = "${c,,}" ] || fail "OPENBLAS_CORETYPE=$c: the programs run '$got'"
  echo "OPENBLAS_CORETYPE=$c: all ${#progs[@]} programs run $got"
done

#!/usr/bin/env bash
# kernel_matrix.sh: the suite (or the tests named by FILTERs, as tests/run.sh takes them)
# under every OpenBLAS kernel set this CPU can run, at each thread count given, so a
# verdict that depends on the kernels or the threads shows (docs: tests/ref/README.md,
# "Kernel matrix"). One line per run at the end: kernels, threads, passed, failed, seconds.
#   bash scripts/kernel_matrix.sh [--threads "1 2"] [--cores "Haswell Zen"] [FILTER...]
# Defaults: the kernel sets the CPU has (Prescott always; Haswell and Zen with AVX2 + FMA;
# SkylakeX with AVX-512; Cooperlake with AVX512_BF16) and OMP_NUM_THREADS unset (each test
# sets its own where it matters) -- "unset" in --threads means that. Needs a built tree
# (make). The logs: $OUT (default ./kernel-matrix) / CORE-THREADS.log.
set -uo pipefail
cd "$(dirname "$0")/.."
threads="unset" cores=""
while [ $# -gt 0 ]; do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --cores) cores=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
if [ -z "$cores" ]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo)
  cores="Prescott"
  grep -qw avx2 <<<"$flags" && grep -qw fma <<<"$flags" && cores+=" Haswell Zen"
  grep -qw avx512f <<<"$flags" && cores+=" SkylakeX"
  grep -qw avx512_bf16 <<<"$flags" && cores+=" Cooperlake"
fi
out=${OUT:-kernel-matrix}; mkdir -p "$out"
summary=()
for c in $cores; do
  for th in $threads; do
    log="$out/$c-$th.log"; t0=$SECONDS
    if [ "$th" = unset ]; then env -u OMP_NUM_THREADS OPENBLAS_CORETYPE=$c bash tests/run.sh "$@" >"$log" 2>&1
    else OMP_NUM_THREADS=$th OPENBLAS_CORETYPE=$c bash tests/run.sh "$@" >"$log" 2>&1; fi
    line=$(tail -1 "$log")
    summary+=("$(printf '%-11s threads %-6s %-24s %5d s' "$c" "$th" "$line" $((SECONDS - t0)))")
    echo "${summary[-1]}"
    grep -aq "^failed:" "$log" && grep -a "^failed:" "$log"
  done
done
echo "== kernel matrix ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)): ${*:-the whole suite}"
printf '%s\n' "${summary[@]}"

#!/usr/bin/env bash
# bench_bf16_gemm.sh: olmo.c's matmuls against oneDNN's on the model's shapes, side by side
# (scripts/bench_bf16_gemm.c says what is timed). Needs `make` done and oneDNN's headers
# (apt-get install libdnnl-dev; the product does not use oneDNN). Three comparisons, each
# at OMP_NUM_THREADS (default: all cores):
#   fp32:        olmo.c sgemm path vs oneDNN f32, ISA up to AVX512_CORE;
#   avx512bf16:  OLMO_BF16_ENGINE=avx512bf16 vs oneDNN bf16 with DNNL_MAX_CPU_ISA=AVX512_CORE_BF16;
#   amx:         OLMO_BF16_ENGINE=amx vs oneDNN bf16 with DNNL_MAX_CPU_ISA=AVX512_CORE_AMX
# (each only where the CPU has the instructions), and with AVX512_BF16 the instruction
# ceilings of one core (VDPBF16PS vs fp32 FMA, --insn). Extra args: M N K triples.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f /usr/include/oneapi/dnnl/dnnl.h ] || { echo "bench_bf16_gemm: oneDNN headers missing (apt-get install libdnnl-dev)" >&2; exit 2; }
[ -f build/libolmo.a ] || { echo "bench_bf16_gemm: run make first" >&2; exit 2; }
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
cc -O3 -march=native -std=c11 -D_GNU_SOURCE -fopenmp -Isrc scripts/bench_bf16_gemm.c -o "$TMP/bench" \
  build/libolmo.a -ldnnl -lopenblas -lm
flags=$(grep -m1 '^flags' /proc/cpuinfo)
DNNL_MAX_CPU_ISA=AVX512_CORE "$TMP/bench" --fp32 "$@"
if [[ $flags == *avx512_bf16* ]]; then
  "$TMP/bench" --insn
  OLMO_BF16_ENGINE=avx512bf16 DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 "$TMP/bench" "$@"
fi
if [[ $flags == *amx_bf16* ]]; then
  OLMO_BF16_ENGINE=amx DNNL_MAX_CPU_ISA=AVX512_CORE_AMX "$TMP/bench" "$@"
fi

#!/usr/bin/env bash
# bench_bf16_parts.sh: the packed bf16 matmul's parts (packing A, packing B, the GEMM in
# each block order) timed apart on config (b)'s step shapes, or on the M N K at bt
# quintuples given (scripts/bench_bf16_parts.c). Needs `make` done and a CPU with AMX or
# AVX512_BF16 (OLMO_BF16_ENGINE picks one).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/libolmo.a ] || { echo "bench_bf16_parts: run make first" >&2; exit 2; }
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
cc -O3 -march=native -std=c11 -D_GNU_SOURCE -fopenmp -Isrc scripts/bench_bf16_parts.c -o "$TMP/bench" \
  build/libolmo.a -lopenblas -lm
"$TMP/bench" "$@"

// gemm.h: matmul.c's bf16 helpers for the rest of src/kernels/cpu (lmhead.c's emulated
// path) and the tests. Deterministic at any thread count. ws: the caller's scratch
// (kernels.h's Bf16Work).
#ifndef OLMO_CPU_GEMM_H
#define OLMO_CPU_GEMM_H

#include <stddef.h>

#include "kernels/kernels.h"

// bf16 operands, fp32 accumulation: C (M, N) = A @ B (+ C when accumulate). a_trans: A is
// stored (K, M); b_trans: B is stored (N, K); lda/ldb are the stored row strides.
void gemm_bf16(int a_trans, int b_trans, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
               int accumulate, float *C, int ldc, Bf16Work *ws);
// n floats of src rounded to bf16 values (kept as fp32) in slot `slot` of ws
const float *bf16_rounded_copy(Bf16Work *ws, int slot, const float *src, size_t n);

#endif

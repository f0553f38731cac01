// matmul.c: nn.Linear (no bias) forward/backward on OpenBLAS sgemm, made deterministic.
// A multi-threaded OpenBLAS sgemm tiles its output by thread count, and elements on a
// different tile edge get a different summation order (tests/test_kernels.c caught it).
// So we split the output ourselves into blocks along its larger dimension and run one
// single-threaded sgemm per block inside an OpenMP loop (OpenBLAS runs single-threaded
// inside a parallel region). Block sizes are a function of the shape alone (about 32
// blocks, multiples of 64, at least 256 once the dim reaches 1024), never of the thread count, so neither is any
// result. Large blocks keep the per-call packing of the shared operand cheap.
// PRECISION_BF16 (kernels.h) packs both operands to bf16 tiles and runs bf16_gemm on AMX or
// AVX512_BF16, or, without either, multiplies bf16-rounded fp32 copies with the same sgemm_det.
#include <cblas.h>
#include <string.h>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm.h"
#include "kernels/kernels.h"

void matmul_bf16_init(void) { bf16_engine(); }
const char *matmul_bf16_engine(void) { return bf16_engine_name(bf16_engine()); }
int matmul_bf16_engine_on_cpu(const char *name) {
    for (Bf16Engine e = BF16_EMULATED; e <= BF16_AMX; e++)
        if (!strcmp(name, bf16_engine_name(e))) return bf16_engine_on_cpu(e);
    return 0;
}

// Each block's call repacks the whole shared operand, so blocks below 256 rows cost more
// in packing than they gain; large dims (the LM head's vocab) get ~32 blocks.

static int block_size(int dim) {
    int b = (dim + 31) / 32;
    b = (b + 63) / 64 * 64;
    if (b < 256 && dim >= 1024) b = 256;
    return b < 64 ? 64 : b;
}

// C (M, N) = alpha * op(A) (M, K) @ op(B) (K, N) + beta * C, row-major.
static void sgemm_det(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc) {
    if (M >= N) {
        const int BLOCK = block_size(M);
        int nb = (M + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(dynamic, 1)
        for (int b = 0; b < nb; b++) {
            int i0 = b * BLOCK, m = M - i0 < BLOCK ? M - i0 : BLOCK;
            const float *Ab = ta == CblasNoTrans ? A + (size_t)i0 * lda : A + i0;
            cblas_sgemm(CblasRowMajor, ta, tb, m, N, K, 1.0f, Ab, lda, B, ldb, beta, C + (size_t)i0 * ldc, ldc);
        }
    } else {
        const int BLOCK = block_size(N);
        int nb = (N + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(dynamic, 1)
        for (int b = 0; b < nb; b++) {
            int j0 = b * BLOCK, n = N - j0 < BLOCK ? N - j0 : BLOCK;
            const float *Bb = tb == CblasTrans ? B + (size_t)j0 * ldb : B + j0;
            cblas_sgemm(CblasRowMajor, ta, tb, M, n, K, 1.0f, A, lda, Bb, ldb, beta, C + j0, ldc);
        }
    }
}

// n floats of src rounded to bf16 values (kept as fp32) into workspace `slot`
const float *bf16_rounded_copy(Bf16Work *ws, int slot, const float *src, size_t n) {
    float *dst = bf16_workspace(ws, slot, sizeof(float) * n);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float(bf16_round(src[i]));
    return dst;
}

// bf16 C (M, N) (+)= A (M, K) @ B (K, N); a_trans/b_trans as in bf16_pack_a/_b, lda/ldb the
// source row strides; emulated: the same products from rounded copies through sgemm_det.
void gemm_bf16(int a_trans, int b_trans, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
               int accumulate, float *C, int ldc, Bf16Work *ws) {
    if (bf16_packed()) {
        int kbt = bf16_ktiles(K);
        uint16_t *pa = bf16_workspace(ws, 0, sizeof(uint16_t) * bf16_packed_a_size(M, kbt));
        uint16_t *pb = bf16_workspace(ws, 1, sizeof(uint16_t) * bf16_packed_b_size(N, kbt));
        bf16_pack_a(pa, kbt, 0, A, lda, a_trans, M, K);
        bf16_pack_b(pb, kbt, 0, B, ldb, b_trans, K, N);
        bf16_gemm(C, ldc, 0, pa, kbt, pb, kbt, M, N, K, accumulate);
        return;
    }
    // the stored extent of a strided operand: (rows - 1) full strides plus one row
    const size_t na = (size_t)((a_trans ? K : M) - 1) * lda + (a_trans ? M : K);
    const size_t nb = (size_t)((b_trans ? N : K) - 1) * ldb + (b_trans ? K : N);
    const float *ra = bf16_rounded_copy(ws, 0, A, na), *rb = bf16_rounded_copy(ws, 1, B, nb);
    sgemm_det(a_trans ? CblasTrans : CblasNoTrans, b_trans ? CblasTrans : CblasNoTrans, M, N, K, ra, lda, rb, ldb,
              accumulate ? 1.0f : 0.0f, C, ldc);
}

// out (OC) = W (OC, C) @ x (C): one input row. sgemm would pack all of W for that row (most
// of a KV-cache decode step at a 100k vocab); sgemv streams W once. Blocks of output rows
// are a function of OC only, each one single-threaded sgemv, so no result depends on the
// thread count.
static void sgemv_det(float *out, const float *x, const float *W, int C, int OC) {
    const int BLOCK = 256, nb = (OC + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nb; b++) {
        int o0 = b * BLOCK, m = OC - o0 < BLOCK ? OC - o0 : BLOCK;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, m, C, 1.0f, W + (size_t)o0 * C, C, x, 1, 0.0f, out + o0, 1);
    }
}

// out (N, OC) = inp (N, C) @ W^T, W (OC, C)
void matmul_forward(float *out, const float *inp, const float *W, int N, int C, int OC, Precision p, Bf16Work *ws) {
    if (p == PRECISION_BF16) {
        gemm_bf16(0, 1, N, OC, C, inp, C, W, C, 0, out, OC, ws);
        return;
    }
    if (N == 1) {   // a decode step (or a one-token micro-batch)
        sgemv_det(out, inp, W, C, OC);
        return;
    }
    sgemm_det(CblasNoTrans, CblasTrans, N, OC, C, inp, C, W, C, 0.0f, out, OC);
}

void matmul_backward(float *dinp, float *dW, const float *dout, const float *inp, const float *W,
                     int N, int C, int OC, int accumulate_dinp, int accumulate_dW, Precision p, Bf16Work *ws) {
    if (p == PRECISION_BF16) {
        if (dinp) gemm_bf16(0, 0, N, C, OC, dout, OC, W, C, accumulate_dinp, dinp, C, ws);
        if (dW) gemm_bf16(1, 0, OC, C, N, dout, OC, inp, C, accumulate_dW, dW, C, ws);
        return;
    }
    // dinp (N, C) = dout (N, OC) @ W (OC, C)
    if (dinp) sgemm_det(CblasNoTrans, CblasNoTrans, N, C, OC, dout, OC, W, C, accumulate_dinp ? 1.0f : 0.0f, dinp, C);
    // dW (OC, C) = dout^T (OC, N) @ inp (N, C)
    if (dW) sgemm_det(CblasTrans, CblasNoTrans, OC, C, N, dout, OC, inp, C, accumulate_dW ? 1.0f : 0.0f, dW, C);
}

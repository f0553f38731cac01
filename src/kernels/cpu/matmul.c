// matmul.c: nn.Linear (no bias) forward/backward on OpenBLAS sgemm, made deterministic.
// A multi-threaded OpenBLAS sgemm tiles its output by thread count, and elements on a
// different tile edge get a different summation order (tests/test_kernels.c caught it).
// So we split the output ourselves into blocks along its larger dimension and run one
// single-threaded sgemm per block inside an OpenMP loop (OpenBLAS runs single-threaded
// inside a parallel region). Block sizes are a function of the shape alone (about 32
// blocks, multiples of 64, at least 256 once the dim reaches 1024), never of the thread count, so neither is any
// result. Large blocks keep the per-call packing of the shared operand cheap.
#include <cblas.h>

#include "kernels/kernels.h"

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

// out (N, OC) = inp (N, C) @ W^T, W (OC, C)
void matmul_forward(float *out, const float *inp, const float *W, int N, int C, int OC) {
    sgemm_det(CblasNoTrans, CblasTrans, N, OC, C, inp, C, W, C, 0.0f, out, OC);
}

void matmul_backward(float *dinp, float *dW, const float *dout, const float *inp, const float *W,
                     int N, int C, int OC, int accumulate_dinp, int accumulate_dW) {
    // dinp (N, C) = dout (N, OC) @ W (OC, C)
    if (dinp) sgemm_det(CblasNoTrans, CblasNoTrans, N, C, OC, dout, OC, W, C, accumulate_dinp ? 1.0f : 0.0f, dinp, C);
    // dW (OC, C) = dout^T (OC, N) @ inp (N, C)
    if (dW) sgemm_det(CblasTrans, CblasNoTrans, OC, C, N, dout, OC, inp, C, accumulate_dW ? 1.0f : 0.0f, dW, C);
}

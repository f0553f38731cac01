// matmul.c: nn.Linear (no bias) forward/backward on OpenBLAS sgemm.
// OpenBLAS splits sgemm work over M/N tiles, never over K, so each output element's sum
// has the same order at any thread count (checked by tests/test_determinism.sh).
#include <cblas.h>

#include "kernels/kernels.h"

// out (N, OC) = inp (N, C) @ W^T, W (OC, C)
void matmul_forward(float *out, const float *inp, const float *W, int N, int C, int OC) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, W, C, 0.0f, out, OC);
}

void matmul_backward(float *dinp, float *dW, const float *dout, const float *inp, const float *W,
                     int N, int C, int OC, int accumulate_dinp, int accumulate_dW) {
    // dinp (N, C) = dout (N, OC) @ W (OC, C)
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, W, C,
                    accumulate_dinp ? 1.0f : 0.0f, dinp, C);
    // dW (OC, C) = dout^T (OC, N) @ inp (N, C)
    if (dW)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C,
                    accumulate_dW ? 1.0f : 0.0f, dW, C);
}

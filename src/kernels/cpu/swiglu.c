// swiglu.c: SwiGLU activation over fused [gate | up] rows and the residual add. The sigmoid
// takes vexp.h's vexpf_glibc, libm's expf bit for bit but inlined, so the loops vectorize.
#include <math.h>

#include "kernels/cpu/vexp.h"
#include "kernels/kernels.h"

void swiglu_forward(float *out, const float *gu, int N, int H) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * H, *u = g + H;
        float *o = out + (size_t)n * H;
#pragma omp simd
        for (int j = 0; j < H; j++) {
            float sig = 1.0f / (1.0f + vexpf_glibc(-g[j]));
            o[j] = g[j] * sig * u[j];
        }
    }
}

void swiglu_backward(float *dgu, const float *dout, const float *gu, int N, int H) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * H, *u = g + H, *dy = dout + (size_t)n * H;
        float *dg = dgu + (size_t)n * 2 * H, *du = dg + H;
#pragma omp simd
        for (int j = 0; j < H; j++) {
            float sig = 1.0f / (1.0f + vexpf_glibc(-g[j]));
            float silu = g[j] * sig;
            du[j] = dy[j] * silu;
            dg[j] = dy[j] * u[j] * sig * (1.0f + g[j] * (1.0f - sig));
        }
    }
}

void residual_forward(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

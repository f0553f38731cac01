// norm_rope.cuh: the per-element math of RMSNorm and RoPE, one definition shared by the
// unfused kernels (norm.cu, rope.cu) and the fused QK-norm + RoPE + V split (qkv_split.cu),
// so that the fused pass computes every element by the same expression, rounded to the
// activation type at the same points: bitwise the unfused chain.
#pragma once
#include "kernels/cuda/common.cuh"

// RMSNorm forward of one element: w * (x * rstd).
__device__ __forceinline__ float norm_elem(float x, float w, float r) { return w * (x * r); }

// RMSNorm backward of one element: r * (w dy - xhat m), m = mean over the row of w dy xhat.
__device__ __forceinline__ float norm_dx_elem(float dy, float x, float w, float r, float m) {
    return r * (w * dy - (x * r) * m);
}

// RoPE rotate-half of the pair (x1, x2) = (v[j], v[j + D/2]) by (c, sn); sn = -sin: the
// backward (the inverse rotation).
__device__ __forceinline__ void rope_pair(float x1, float x2, float c, float sn, float *o1, float *o2) {
    *o1 = x1 * c - x2 * sn;
    *o2 = x2 * c + x1 * sn;
}

// dy of a norm backward as the row's stored gradient (Td fp32 or bf16, row stride ld).
template <typename Td> struct DyPlain {
    const Td *dy;
    int ld;
    __device__ __forceinline__ float operator()(int n, int c) const { return tof(dy[(size_t)n * ld + c]); }
};

// The RMSNorm backward of rows [n0, n1) of chunk blockIdx.x of NORM_PARTS, one pass: per row
// dx = norm_dx_elem (the row's dot product in double, the threads' strided order and
// block_sum as the one-row-per-block kernel it replaces, so dx is bitwise that kernel's),
// and, per column, this chunk's weight-gradient partial sum over its rows in row order of
// dy * xhat in double (bitwise norm_dw_partial_kernel's), kept in shared memory (C doubles,
// the column c of thread c % blockDim) and stored once: partial[chunk][c]. Reads dy and x
// twice a row (dot, then dx) where the unfused pair read them three times, writes dx once.
// DyF: the gradient's loader (DyPlain; the fused QK-norm's undoes RoPE on the fly).
template <typename DyF, typename Ti, typename To>
__global__ void rmsnorm_bwd_parts_kernel(To *dinp, double *partial, DyF dyf, const Ti *inp, const float *w,
                                         const float *rstd, int N, int C, int nparts, int in_stride, int din_stride) {
    extern __shared__ __align__(128) unsigned char smem[];
    double *acc = (double *)smem;
    __shared__ double sh[32];
    const int p = blockIdx.x;
    const int n0 = (int)((long)N * p / nparts), n1 = (int)((long)N * (p + 1) / nparts);
    for (int c = threadIdx.x; c < C; c += blockDim.x) acc[c] = 0.0;
    for (int n = n0; n < n1; n++) {
        const Ti *x = inp + (size_t)n * in_stride;
        const float r = rstd[n];
        double dot = 0.0;
        for (int c = threadIdx.x; c < C; c += blockDim.x) dot += (double)(w[c] * dyf(n, c)) * (tof(x[c]) * r);
        dot = block_sum(dot, sh);
        const float m = (float)(dot / C);
        To *dx = dinp + (size_t)n * din_stride;
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            const float dy = dyf(n, c), xv = tof(x[c]);
            dx[c] = fromf<To>(norm_dx_elem(dy, xv, w[c], r, m));
            acc[c] += (double)dy * (xv * r);
        }
    }
    for (int c = threadIdx.x; c < C; c += blockDim.x) partial[(size_t)p * C + c] = acc[c];
}

// norm_rope.cuh: the per-element math of RMSNorm and RoPE, one definition shared by the
// unfused kernels (norm.cu, rope.cu) and the fused QK-norm + RoPE + V split (qkv_split.cu),
// so that the fused pass computes every element by the same expression, rounded to the
// activation type at the same points: bitwise the unfused chain.
#pragma once
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.cuh"

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

// dy of a norm backward: raw(n, c) loads element c of row n's stored gradient as float, and
// at(s, n, c) forms dy[c] from the row staged raw in shared memory (s). DyPlain: the gradient
// itself (Td fp32 or bf16, row stride ld).
template <typename Td> struct DyPlain {
    const Td *dy;
    int ld;
    __device__ __forceinline__ float raw(int n, int c) const { return tof(dy[(size_t)n * ld + c]); }
    __device__ __forceinline__ float at(const float *s, int, int c) const { return s[c]; }
};

// The shared memory of rmsnorm_bwd_parts_kernel for rows of C: the chunk's partials (C
// doubles), w, the staged dy and x (C floats each).
static inline size_t norm_parts_smem(int C) { return (size_t)C * (8 + 4 + 4 + 4); }

// The RMSNorm backward of rows [n0, n1) of chunk blockIdx.x of nparts, one pass: per row
// dx = norm_dx_elem (the row's dot product in double, the threads' strided order and
// block_sum as the one-row-per-block kernel it replaces, so dx is bitwise that kernel's),
// and, per column, this chunk's weight-gradient partial sum over its rows in row order of
// dy * xhat in double (bitwise norm_dw_partial_kernel's), kept in shared memory (column c
// of thread c % blockDim) and stored once: partial[chunk][c]. Each row's dy and x are read
// from global memory once and staged in shared memory for both of its passes (dot, then dx),
// w once a block: the unfused pair read dy and x three times and w once a row.
// DyF: the gradient's loader (DyPlain; the fused QK-norm's undoes RoPE from the staged row).
template <typename DyF, typename Ti, typename To>
__global__ void rmsnorm_bwd_parts_kernel(To *dinp, double *partial, DyF dyf, const Ti *inp, const float *w,
                                         const float *rstd, int N, int C, int nparts, int in_stride, int din_stride) {
    extern __shared__ __align__(128) unsigned char smem[];
    double *acc = (double *)smem;
    float *ws = (float *)(acc + C), *dys = ws + C, *xs = dys + C;
    __shared__ double sh[32];
    const int p = blockIdx.x;
    const int n0 = (int)((long)N * p / nparts), n1 = (int)((long)N * (p + 1) / nparts);
    for (int c = threadIdx.x; c < C; c += blockDim.x) acc[c] = 0.0, ws[c] = w[c];
    for (int n = n0; n < n1; n++) {
        const Ti *x = inp + (size_t)n * in_stride;
        const float r = rstd[n];
        __syncthreads();   // the previous row's dx pass has read its staged dy
        for (int c = threadIdx.x; c < C; c += blockDim.x) dys[c] = dyf.raw(n, c), xs[c] = tof(x[c]);
        __syncthreads();
        double dot = 0.0;
        for (int c = threadIdx.x; c < C; c += blockDim.x) dot += (double)(ws[c] * dyf.at(dys, n, c)) * (xs[c] * r);
        dot = block_sum(dot, sh);
        const float m = (float)(dot / C);
        To *dx = dinp + (size_t)n * din_stride;
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            const float dy = dyf.at(dys, n, c), xv = xs[c];
            dx[c] = fromf<To>(norm_dx_elem(dy, xv, ws[c], r, m));
            acc[c] += (double)dy * (xv * r);
        }
    }
    for (int c = threadIdx.x; c < C; c += blockDim.x) partial[(size_t)p * C + c] = acc[c];
}

// Launch rmsnorm_bwd_parts_kernel, NORM_PARTS blocks of 256 (two an SM of an H100 at C 4096:
// 80 KiB of shared memory each), its shared-memory limit raised past the default 48 KiB
// where it needs more (callers check norm_parts_fit(C) first).
template <typename DyF, typename Ti, typename To>
static void norm_bwd_parts_launch(cudaStream_t st, To *dinp, double *part, DyF f, const Ti *inp, const float *w,
                                  const float *rstd, int N, int C, int in_stride, int din_stride) {
    const size_t smem = norm_parts_smem(C);
    if (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(rmsnorm_bwd_parts_kernel<DyF, Ti, To>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    rmsnorm_bwd_parts_kernel<DyF, Ti, To><<<NORM_PARTS, 256, smem, st>>>(dinp, part, f, inp, w, rstd, N, C, NORM_PARTS,
                                                                         in_stride, din_stride);
    CUDA_LAUNCH_CHECK();
}

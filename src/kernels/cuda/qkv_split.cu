// qkv_split.cu: the qkv projection's QK-norm + RoPE + V split in one pass on the CUDA
// backend (kernels/ops.h qkv_split_forward / qkv_split_backward), where the unfused chain is
// five launches (two norms, the V copy, two rotations) and the rotations re-read and re-write
// q and k. Every element is computed by norm_rope.cuh's expressions and rounded to the
// activation type where the chain stored it, so both directions are bitwise the chain.
#include "kernels/cuda/norm_rope.cuh"
#include "kernels/cuda/ops.cuh"

// One block per row n (blockIdx.x) and part (blockIdx.y): 0 q, 1 k, 2 v. q (N, NH*D) =
// RoPE(RMSNorm(qkv[n, :Q])) (the row statistic in double, the threads' strided order and
// block_sum as rmsnorm_fwd_kernel's with its 256 threads), k (N, NKV*D) likewise over
// qkv[n, Q:Q+KV), v = qkv[n, Q+KV:]. The norm's output is rounded to T before the rotation
// as the chain's stored q was. Tables cos, sin (Tn, D/2): row n % Tn. Shared memory: the
// row as floats (qkv_split_fwd_smem).
template <typename T>
__global__ void qkv_split_fwd_kernel(T *q, T *k, T *v, float *q_rstd, float *k_rstd, const T *qkv, const float *qw,
                                     const float *kw, const float *cos_t, const float *sin_t, int Tn, int NH, int NKV,
                                     int D, float eps) {
    __shared__ double sh[32];
    const int n = blockIdx.x, part = blockIdx.y;
    const int Q = NH * D, KV = NKV * D, ld = Q + 2 * KV;
    const T *row = qkv + (size_t)n * ld;
    if (part == 2) {
        T *o = v + (size_t)n * KV;
        for (int c = threadIdx.x; c < KV; c += blockDim.x) o[c] = row[Q + KV + c];
        return;
    }
    const int C = part ? KV : Q;
    const T *x = part ? row + Q : row;
    const float *w = part ? kw : qw;
    T *o = (part ? k : q) + (size_t)n * C;
    extern __shared__ __align__(128) unsigned char smem[];
    float *xs = (float *)smem;   // the row, read from global memory once for both passes
    double ss = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        xs[c] = tof(x[c]);
        double xv = xs[c];
        ss += xv * xv;
    }
    ss = block_sum(ss, sh);   // (its barriers also order the staging before the reads below)
    const float r = (float)(1.0 / sqrt(ss / C + eps));
    if (threadIdx.x == 0) (part ? k_rstd : q_rstd)[n] = r;
    const int half = D / 2;
    const float *ct = cos_t + (size_t)(n % Tn) * half, *st = sin_t + (size_t)(n % Tn) * half;
    for (int i = threadIdx.x; i < C / 2; i += blockDim.x) {   // the pairs (j, j + D/2) of each head
        const int c1 = i / half * D + i % half, c2 = c1 + half, j = i % half;
        const float x1 = tof(fromf<T>(norm_elem(xs[c1], w[c1], r)));
        const float x2 = tof(fromf<T>(norm_elem(xs[c2], w[c2], r)));
        float o1, o2;
        rope_pair(x1, x2, ct[j], 1.0f * st[j], &o1, &o2);
        o[c1] = fromf<T>(o1);
        o[c2] = fromf<T>(o2);
    }
}

// The norm backward's dy from the gradient of the rotated output (rows of C = heads x D,
// row stride C): the inverse rotation of element c's pair in the staged row, rounded to T
// as rope_backward's in-place result was.
template <typename T> struct DyRope {
    const T *dy;
    const float *cos_t, *sin_t;
    int C, Tn, D;
    __device__ __forceinline__ float raw(int n, int c) const { return tof(dy[(size_t)n * C + c]); }
    __device__ __forceinline__ float at(const float *s, int n, int c) const {
        const int half = D / 2, j = c % D, jj = j < half ? j : j - half;
        const float *h = s + (c - j);
        const size_t tj = (size_t)(n % Tn) * half + jj;
        float o1, o2;
        rope_pair(h[jj], h[jj + half], cos_t[tj], -1.0f * sin_t[tj], &o1, &o2);
        return tof(fromf<T>(j < half ? o1 : o2));
    }
};

void qkv_split_forward_cuda(cudaStream_t st, void *q, void *k, void *v, float *q_rstd, float *k_rstd, const void *qkv,
                            DType t, const float *q_norm, const float *k_norm, const float *cos_t, const float *sin_t,
                            int B, int T, int NH, int NKV, int D, float eps) {
    const int N = B * T;
    if (N == 0) return;
    DT_DISPATCH(t, TT,
        qkv_split_fwd_kernel<TT><<<dim3(N, 3), 256, qkv_split_fwd_smem(NH, NKV, D), st>>>((TT *)q, (TT *)k, (TT *)v, q_rstd, k_rstd,
                                                             (const TT *)qkv, q_norm, k_norm, cos_t, sin_t, T, NH,
                                                             NKV, D, eps));
    CUDA_LAUNCH_CHECK();
}

// q then k: the fused norm backward (dx into dqkv's columns, the chunk partials into part)
// and its chunk-order sum into the weight gradient; then dv into dqkv's V columns.
void qkv_split_backward_cuda(cudaStream_t st, void *dqkv, float *dq_norm, float *dk_norm, int acc_dw, const void *dq,
                             const void *dk, const void *dv, const void *qkv, DType t, const float *q_norm,
                             const float *k_norm, const float *q_rstd, const float *k_rstd, const float *cos_t,
                             const float *sin_t, int B, int T, int NH, int NKV, int D, double *part) {
    const int N = B * T, Q = NH * D, KV = NKV * D, ld = Q + 2 * KV;
    DT_DISPATCH(t, TT, {
        for (int p = 0; p < 2; p++) {
            const int C = p ? KV : Q, col = p ? Q : 0;
            const DyRope<TT> f{(const TT *)(p ? dk : dq), cos_t, sin_t, C, T, D};
            norm_bwd_parts_launch(st, (TT *)dqkv + col, part, f, (const TT *)qkv + col, p ? k_norm : q_norm,
                                  p ? k_rstd : q_rstd, N, C, ld, ld);
            norm_dw_final_cuda(st, p ? dk_norm : dq_norm, part, C, acc_dw);
        }
    });
    copy_cols_cuda(st, dqkv, dv, t, N, KV, ld, Q + KV, KV, 0);
}

// attention.cu: causal / sliding-window grouped-query attention, flash style: tiles of
// queries and keys in shared memory, online softmax, the (T, T) matrix never exists; the
// forward saves each row's log-sum-exp and the backward recomputes the probabilities.
//
// Layout: a block owns BQ (or BK) rows with TPR = 8 threads per row; each thread holds
// the head dimensions d = s*TPR + lane (interleaved, so the 8 threads of a row read 8
// consecutive shared-memory words: no bank conflicts). Dot products are reduced over the
// 8 threads with xor-shuffles (a fixed tree). All arithmetic is fp32 (bf16 in/out).
//
// Tile skipping: a query tile visits only the key tiles its rows can see (causal + window);
// a key tile visits only the query tiles that can see it.
//
// Determinism, no float atomics anywhere:
//   forward   one block per (query tile, head, batch); each output row has one owner.
//   dK, dV    one block per (key tile, kv head, batch) walks the query heads of its group
//             and their query tiles in a fixed order.
//   dQ        one block per (query tile, head, batch) walks its key tiles in order.
// The probabilities are recomputed in both backward kernels (twice the exp work of a fused
// atomic-add backward, in exchange for bitwise-reproducible gradients).
//
// These are plain SIMT fp32 kernels (no tensor cores): correct and memory-lean, but far
// slower than a wgmma/mma flash attention; docs/cuda.md says so.
#include "kernels/cuda/common.cuh"

#define TPR 8
#define BQ 32
#define BK 32
#define NTHREADS (BQ * TPR)

__device__ __forceinline__ float row_reduce(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 4);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x;
}

// Key j is visible to query i: j <= i and j > i - window.
__device__ __forceinline__ bool visible(int i, int j, int Tn, int window) {
    return i < Tn && j < Tn && j <= i && j > i - window;
}

template <typename T, int D>
__global__ void __launch_bounds__(NTHREADS) attn_fwd_kernel(T *out, float *lse, const T *q, const T *k, const T *v,
                                                            int Tn, int NH, int NKV, int window, float scale) {
    constexpr int S = D / TPR;
    __shared__ float Ks[BK][D], Vs[BK][D];
    const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (NH / NKV);
    const int r = threadIdx.x / TPR, lane = threadIdx.x % TPR;
    const int i = qt * BQ + r;
    const int ldq = NH * D, ldk = NKV * D;
    float qr[S], o[S];
#pragma unroll
    for (int s = 0; s < S; s++) {
        qr[s] = i < Tn ? tof(q[((size_t)b * Tn + i) * ldq + (size_t)h * D + s * TPR + lane]) : 0.0f;
        o[s] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const int q0 = qt * BQ, q1 = min(q0 + BQ, Tn) - 1;
    const int klo = max(0, q0 - window + 1);
    for (int k0 = (klo / BK) * BK; k0 <= q1; k0 += BK) {
        __syncthreads();
        for (int e = threadIdx.x; e < BK * D; e += NTHREADS) {
            int j = e / D, d = e % D, key = k0 + j;
            size_t off = ((size_t)b * Tn + key) * ldk + (size_t)g * D + d;
            Ks[j][d] = key < Tn ? tof(k[off]) : 0.0f;
            Vs[j][d] = key < Tn ? tof(v[off]) : 0.0f;
        }
        __syncthreads();
        float sc[BK];
        float tmax = -INFINITY;
#pragma unroll
        for (int j = 0; j < BK; j++) {
            float acc = 0.0f;
#pragma unroll
            for (int s = 0; s < S; s++) acc += qr[s] * Ks[j][s * TPR + lane];
            acc = row_reduce(acc) * scale;
            sc[j] = visible(i, k0 + j, Tn, window) ? acc : -INFINITY;
            tmax = fmaxf(tmax, sc[j]);
        }
        float mnew = fmaxf(m, tmax);
        if (mnew == -INFINITY) continue;   // nothing visible yet for this row
        float alpha = expf(m - mnew);      // m = -inf -> 0
        l *= alpha;
#pragma unroll
        for (int s = 0; s < S; s++) o[s] *= alpha;
#pragma unroll
        for (int j = 0; j < BK; j++) {
            float p = sc[j] == -INFINITY ? 0.0f : expf(sc[j] - mnew);
            l += p;
#pragma unroll
            for (int s = 0; s < S; s++) o[s] += p * Vs[j][s * TPR + lane];
        }
        m = mnew;
    }
    if (i < Tn) {
        float inv = 1.0f / l;
#pragma unroll
        for (int s = 0; s < S; s++) out[((size_t)b * Tn + i) * ldq + (size_t)h * D + s * TPR + lane] = fromf<T>(o[s] * inv);
        if (lane == 0) lse[((size_t)b * NH + h) * Tn + i] = m + logf(l);
    }
}

// Di[b,h,i] = sum_d dO * O (the softmax backward's row term).
template <typename T>
__global__ void attn_di_kernel(float *Di, const T *dout, const T *out, int B, int Tn, int NH, int D) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;   // over (b, i, h)
    if (idx >= (size_t)B * Tn * NH) return;
    int h = (int)(idx % NH);
    size_t bi = idx / NH;
    int i = (int)(bi % Tn), b = (int)(bi / Tn);
    const T *o = out + idx * D, *d_o = dout + idx * D;
    float acc = 0.0f;
    for (int d = 0; d < D; d++) acc += tof(d_o[d]) * tof(o[d]);
    Di[((size_t)b * NH + h) * Tn + i] = acc;
}

template <typename T, int D>
__global__ void __launch_bounds__(NTHREADS) attn_dkdv_kernel(T *dk, T *dv, const float *Di, const T *dout, const T *q,
                                                             const T *k, const T *v, const float *lse, int Tn, int NH,
                                                             int NKV, int window, float scale) {
    constexpr int S = D / TPR;
    __shared__ float Qs[BQ][D], dOs[BQ][D];
    __shared__ float Ls[BQ], Ds[BQ];
    const int kt = blockIdx.x, g = blockIdx.y, b = blockIdx.z, group = NH / NKV;
    const int r = threadIdx.x / TPR, lane = threadIdx.x % TPR;
    const int j = kt * BK + r;
    const int ldq = NH * D, ldk = NKV * D;
    float kr[S], vr[S], dkr[S], dvr[S];
#pragma unroll
    for (int s = 0; s < S; s++) {
        size_t off = ((size_t)b * Tn + j) * ldk + (size_t)g * D + s * TPR + lane;
        kr[s] = j < Tn ? tof(k[off]) : 0.0f;
        vr[s] = j < Tn ? tof(v[off]) : 0.0f;
        dkr[s] = dvr[s] = 0.0f;
    }
    const int k0 = kt * BK, k1 = min(k0 + BK, Tn) - 1;
    const int qhi = min(Tn - 1, k1 + window - 1);
    for (int h = g * group; h < (g + 1) * group; h++) {
        for (int q0 = (k0 / BQ) * BQ; q0 <= qhi; q0 += BQ) {
            __syncthreads();
            for (int e = threadIdx.x; e < BQ * D; e += NTHREADS) {
                int rr = e / D, d = e % D, i = q0 + rr;
                size_t off = ((size_t)b * Tn + i) * ldq + (size_t)h * D + d;
                Qs[rr][d] = i < Tn ? tof(q[off]) : 0.0f;
                dOs[rr][d] = i < Tn ? tof(dout[off]) : 0.0f;
            }
            if (threadIdx.x < BQ) {
                int i = q0 + threadIdx.x;
                Ls[threadIdx.x] = i < Tn ? lse[((size_t)b * NH + h) * Tn + i] : 0.0f;
                Ds[threadIdx.x] = i < Tn ? Di[((size_t)b * NH + h) * Tn + i] : 0.0f;
            }
            __syncthreads();
            for (int rr = 0; rr < BQ; rr++) {
                const int i = q0 + rr;
                float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
                for (int s = 0; s < S; s++) {
                    s1 += kr[s] * Qs[rr][s * TPR + lane];
                    s2 += vr[s] * dOs[rr][s * TPR + lane];
                }
                s1 = row_reduce(s1) * scale;
                s2 = row_reduce(s2);
                float p = visible(i, j, Tn, window) ? expf(s1 - Ls[rr]) : 0.0f;
                float ds = p * (s2 - Ds[rr]) * scale;
#pragma unroll
                for (int s = 0; s < S; s++) {
                    dvr[s] += p * dOs[rr][s * TPR + lane];
                    dkr[s] += ds * Qs[rr][s * TPR + lane];
                }
            }
        }
    }
    if (j < Tn) {
#pragma unroll
        for (int s = 0; s < S; s++) {
            size_t off = ((size_t)b * Tn + j) * ldk + (size_t)g * D + s * TPR + lane;
            dk[off] = fromf<T>(dkr[s]);
            dv[off] = fromf<T>(dvr[s]);
        }
    }
}

template <typename T, int D>
__global__ void __launch_bounds__(NTHREADS) attn_dq_kernel(T *dq, const float *Di, const T *dout, const T *q,
                                                           const T *k, const T *v, const float *lse, int Tn, int NH,
                                                           int NKV, int window, float scale) {
    constexpr int S = D / TPR;
    __shared__ float Ks[BK][D], Vs[BK][D];
    const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (NH / NKV);
    const int r = threadIdx.x / TPR, lane = threadIdx.x % TPR;
    const int i = qt * BQ + r;
    const int ldq = NH * D, ldk = NKV * D;
    float qr[S], dor[S], dqr[S];
#pragma unroll
    for (int s = 0; s < S; s++) {
        size_t off = ((size_t)b * Tn + i) * ldq + (size_t)h * D + s * TPR + lane;
        qr[s] = i < Tn ? tof(q[off]) : 0.0f;
        dor[s] = i < Tn ? tof(dout[off]) : 0.0f;
        dqr[s] = 0.0f;
    }
    const float L = i < Tn ? lse[((size_t)b * NH + h) * Tn + i] : 0.0f;
    const float Dr = i < Tn ? Di[((size_t)b * NH + h) * Tn + i] : 0.0f;
    const int q0 = qt * BQ, q1 = min(q0 + BQ, Tn) - 1;
    const int klo = max(0, q0 - window + 1);
    for (int k0 = (klo / BK) * BK; k0 <= q1; k0 += BK) {
        __syncthreads();
        for (int e = threadIdx.x; e < BK * D; e += NTHREADS) {
            int jj = e / D, d = e % D, key = k0 + jj;
            size_t off = ((size_t)b * Tn + key) * ldk + (size_t)g * D + d;
            Ks[jj][d] = key < Tn ? tof(k[off]) : 0.0f;
            Vs[jj][d] = key < Tn ? tof(v[off]) : 0.0f;
        }
        __syncthreads();
        for (int jj = 0; jj < BK; jj++) {
            float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
            for (int s = 0; s < S; s++) {
                s1 += qr[s] * Ks[jj][s * TPR + lane];
                s2 += dor[s] * Vs[jj][s * TPR + lane];
            }
            s1 = row_reduce(s1) * scale;
            s2 = row_reduce(s2);
            float p = visible(i, k0 + jj, Tn, window) ? expf(s1 - L) : 0.0f;
            float ds = p * (s2 - Dr) * scale;
#pragma unroll
            for (int s = 0; s < S; s++) dqr[s] += ds * Ks[jj][s * TPR + lane];
        }
    }
    if (i < Tn) {
#pragma unroll
        for (int s = 0; s < S; s++) dq[((size_t)b * Tn + i) * ldq + (size_t)h * D + s * TPR + lane] = fromf<T>(dqr[s]);
    }
}

int attention_head_dim_supported(int D) { return D == 16 || D == 32 || D == 64 || D == 128; }

#define DISPATCH_D(D, ...)                                  \
    switch (D) {                                            \
    case 16: { constexpr int DD = 16; __VA_ARGS__; } break; \
    case 32: { constexpr int DD = 32; __VA_ARGS__; } break; \
    case 64: { constexpr int DD = 64; __VA_ARGS__; } break; \
    case 128: { constexpr int DD = 128; __VA_ARGS__; } break; \
    default: fprintf(stderr, "olmo: error: CUDA attention: head_dim %d not supported\n", D); exit(1); \
    }

template <typename T>
void attention_forward_cuda(T *out, float *lse, const T *q, const T *k, const T *v, int B, int Tn, int NH, int NKV,
                            int D, int window, cudaStream_t st) {
    float scale = 1.0f / sqrtf((float)D);
    dim3 grid((Tn + BQ - 1) / BQ, NH, B);
    DISPATCH_D(D, attn_fwd_kernel<T, DD><<<grid, NTHREADS, 0, st>>>(out, lse, q, k, v, Tn, NH, NKV, window, scale));
    CUDA_LAUNCH_CHECK();
}

template <typename T>
void attention_backward_cuda(T *dq, T *dk, T *dv, float *Di, const T *dout, const T *q, const T *k, const T *v,
                             const T *out, const float *lse, int B, int Tn, int NH, int NKV, int D, int window,
                             cudaStream_t st) {
    float scale = 1.0f / sqrtf((float)D);
    size_t rows = (size_t)B * Tn * NH;
    attn_di_kernel<T><<<(unsigned)((rows + 255) / 256), 256, 0, st>>>(Di, dout, out, B, Tn, NH, D);
    CUDA_LAUNCH_CHECK();
    dim3 gkv((Tn + BK - 1) / BK, NKV, B), gq((Tn + BQ - 1) / BQ, NH, B);
    DISPATCH_D(D, attn_dkdv_kernel<T, DD><<<gkv, NTHREADS, 0, st>>>(dk, dv, Di, dout, q, k, v, lse, Tn, NH, NKV, window, scale));
    CUDA_LAUNCH_CHECK();
    DISPATCH_D(D, attn_dq_kernel<T, DD><<<gq, NTHREADS, 0, st>>>(dq, Di, dout, q, k, v, lse, Tn, NH, NKV, window, scale));
    CUDA_LAUNCH_CHECK();
}

template void attention_forward_cuda<float>(float *, float *, const float *, const float *, const float *, int, int,
                                            int, int, int, int, cudaStream_t);
template void attention_forward_cuda<bf16>(bf16 *, float *, const bf16 *, const bf16 *, const bf16 *, int, int, int,
                                           int, int, int, cudaStream_t);
template void attention_backward_cuda<float>(float *, float *, float *, float *, const float *, const float *,
                                             const float *, const float *, const float *, const float *, int, int, int,
                                             int, int, int, cudaStream_t);
template void attention_backward_cuda<bf16>(bf16 *, bf16 *, bf16 *, float *, const bf16 *, const bf16 *, const bf16 *,
                                            const bf16 *, const bf16 *, const float *, int, int, int, int, int, int,
                                            cudaStream_t);

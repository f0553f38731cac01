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
#include <string.h>

#include "kernels/cuda/ops.cuh"

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

// With the document mask (docs = doc_start (B, T), NULL = none) query i of row b also sees
// only keys of its own document: j >= docs[b, i] (OLMo-core intra-document attention;
// model/docmask.h). doc_start never decreases along a row, so a query tile's first row
// has the smallest start: the key-tile loops start at max(window start, docs[b, q0]).
__device__ __forceinline__ bool visible_doc(const int32_t *docs, int b, int i, int j, int Tn, int window) {
    return visible(i, j, Tn, window) && (!docs || j >= docs[(size_t)b * Tn + i]);
}

template <typename T, int D>
__global__ void __launch_bounds__(NTHREADS) attn_fwd_kernel(T *out, float *lse, const T *q, const T *k, const T *v,
                                                            int Tn, int NH, int NKV, int window, const int32_t *docs, float scale) {
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
    const int klo = max(max(0, q0 - window + 1), docs ? docs[(size_t)b * Tn + q0] : 0);
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
            sc[j] = visible_doc(docs, b, i, k0 + j, Tn, window) ? acc : -INFINITY;
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
                                                             int NKV, int window, const int32_t *docs, float scale) {
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
                float p = visible_doc(docs, b, i, j, Tn, window) ? expf(s1 - Ls[rr]) : 0.0f;
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
                                                           int NKV, int window, const int32_t *docs, float scale) {
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
    const int klo = max(max(0, q0 - window + 1), docs ? docs[(size_t)b * Tn + q0] : 0);
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
            float p = visible_doc(docs, b, i, k0 + jj, Tn, window) ? expf(s1 - L) : 0.0f;
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


// ---------------------------------------------------------------------------------------
// Tensor-core (WMMA bf16 16x16x16, fp32 accumulate) kernels for the bf16 mode. Same
// algorithm, tiles and determinism as the SIMT kernels above (fixed loop orders, no
// atomics), with 64-row tiles and 4 warps per block, each warp owning 16 rows:
//   forward  S = Q K^T (wmma) -> fp32 shared memory; online softmax by the warp's lanes
//            (2 lanes per row); O (fp32, shared memory) rescaled, then O += P V (wmma,
//            P rounded to bf16 as in FlashAttention-2).
//   dK, dV   per key tile: S^T = K Q^T and dP^T = V dO^T (wmma), P^T and dS^T by the
//            lanes, then dV += P^T dO and dK += dS^T Q into register accumulators.
//   dQ       per query tile: S = Q K^T and dP = dO V^T, dS, then dQ += dS K.
// OLMO_CUDA_ATTN=simt selects the SIMT kernels instead (comparison, fallback).
// ---------------------------------------------------------------------------------------
#include <mma.h>
using namespace nvcuda;

#define WQ 64
#define WK 64
#define WTHREADS 128

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> FragA;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> FragBt;   // B = X^T, X row-major
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> FragB;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> FragC;

__device__ __forceinline__ bf16 bzero() { return __float2bfloat16(0.0f); }

// Load rows [r0, r0+rows) of a (B, T, heads, D) tensor's head `hh` into shared (rows, D).
template <int D>
__device__ __forceinline__ void load_tile(bf16 *dst, const bf16 *src, int b, int Tn, int heads, int hh, int r0, int rows) {
    const size_t ld = (size_t)heads * D;
    for (int e = threadIdx.x; e < rows * D; e += WTHREADS) {
        int r = e / D, d = e % D, t = r0 + r;
        dst[e] = t < Tn ? src[((size_t)b * Tn + t) * ld + (size_t)hh * D + d] : bzero();
    }
}

template <int D> constexpr size_t fwd_smem() {
    return (size_t)(WQ + 2 * WK) * D * 2 + (size_t)WQ * WK * 4 + (size_t)WQ * WK * 2 + (size_t)WQ * D * 4 + 3 * WQ * 4;
}

template <int D>
__global__ void __launch_bounds__(WTHREADS) attn_fwd_wmma(bf16 *out, float *lse, const bf16 *q, const bf16 *k,
                                                          const bf16 *v, int Tn, int NH, int NKV, int window, const int32_t *docs,
                                                          float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Qs = (bf16 *)smem, *Ks = Qs + WQ * D, *Vs = Ks + WK * D;
    float *Ss = (float *)(Vs + WK * D);
    bf16 *Ps = (bf16 *)(Ss + WQ * WK);
    float *Os = (float *)(Ps + WQ * WK);
    float *Ms = Os + WQ * D, *Ls = Ms + WQ;
    const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (NH / NKV);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r0 = warp * 16;
    const int q0 = qt * WQ;
    load_tile<D>(Qs, q, b, Tn, NH, h, q0, WQ);
    for (int e = threadIdx.x; e < WQ * D; e += WTHREADS) Os[e] = 0.0f;
    if (threadIdx.x < WQ) {
        Ms[threadIdx.x] = -INFINITY;
        Ls[threadIdx.x] = 0.0f;
    }
    const int q1 = min(q0 + WQ, Tn) - 1, klo = max(max(0, q0 - window + 1), docs ? docs[(size_t)b * Tn + q0] : 0);
    const int r = r0 + lane / 2, i = q0 + r, c0 = (lane & 1) * (WK / 2), d0 = (lane & 1) * (D / 2);
    for (int k0 = (klo / WK) * WK; k0 <= q1; k0 += WK) {
        __syncthreads();
        load_tile<D>(Ks, k, b, Tn, NKV, g, k0, WK);
        load_tile<D>(Vs, v, b, Tn, NKV, g, k0, WK);
        __syncthreads();
#pragma unroll
        for (int kb = 0; kb < WK / 16; kb++) {
            FragC acc;
            wmma::fill_fragment(acc, 0.0f);
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                FragA fa;
                FragBt fb;
                wmma::load_matrix_sync(fa, Qs + r0 * D + kk * 16, D);
                wmma::load_matrix_sync(fb, Ks + kb * 16 * D + kk * 16, D);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(Ss + r0 * WK + kb * 16, acc, WK, wmma::mem_row_major);
        }
        __syncwarp();
        float *srow = Ss + r * WK;
        float mx = -INFINITY;
        for (int c = c0; c < c0 + WK / 2; c++) {
            float sv = visible_doc(docs, b, i, k0 + c, Tn, window) ? srow[c] * scale : -INFINITY;
            srow[c] = sv;
            mx = fmaxf(mx, sv);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float mold = Ms[r], mnew = fmaxf(mold, mx);
        const float alpha = mnew == -INFINITY ? 1.0f : expf(mold - mnew);
        float sum = 0.0f;
        for (int c = c0; c < c0 + WK / 2; c++) {
            float p = srow[c] == -INFINITY ? 0.0f : expf(srow[c] - mnew);
            sum += p;
            Ps[r * WK + c] = __float2bfloat16(p);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        for (int d = d0; d < d0 + D / 2; d++) Os[r * D + d] *= alpha;
        __syncwarp();   // both lanes of a row have read Ms[r]
        if ((lane & 1) == 0) {
            Ms[r] = mnew;
            Ls[r] = Ls[r] * alpha + sum;
        }
        __syncwarp();
#pragma unroll
        for (int nb = 0; nb < D / 16; nb++) {
            FragC acc;
            wmma::load_matrix_sync(acc, Os + r0 * D + nb * 16, D, wmma::mem_row_major);
#pragma unroll
            for (int kb = 0; kb < WK / 16; kb++) {
                FragA fa;
                FragB fb;
                wmma::load_matrix_sync(fa, Ps + r0 * WK + kb * 16, WK);
                wmma::load_matrix_sync(fb, Vs + kb * 16 * D + nb * 16, D);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(Os + r0 * D + nb * 16, acc, D, wmma::mem_row_major);
        }
        __syncwarp();
    }
    __syncthreads();
    const size_t ldq = (size_t)NH * D;
    for (int e = threadIdx.x; e < WQ * D; e += WTHREADS) {
        int rr = e / D, d = e % D, ii = q0 + rr;
        if (ii < Tn) out[((size_t)b * Tn + ii) * ldq + (size_t)h * D + d] = __float2bfloat16(Os[e] / Ls[rr]);
    }
    if (threadIdx.x < WQ && q0 + (int)threadIdx.x < Tn)
        lse[((size_t)b * NH + h) * Tn + q0 + threadIdx.x] = Ms[threadIdx.x] + logf(Ls[threadIdx.x]);
}

template <int D> constexpr size_t dkdv_smem() {
    return (size_t)(2 * WK + 2 * WQ) * D * 2 + (size_t)WK * WQ * 4 * 2 + (size_t)WK * WQ * 2 * 2 + 2 * WQ * 4;
}

// Stage a 16x16 accumulator through the warp's fp32 scratch (ld = lds) and write rows
// [t0, t0+16) of a (B, T, heads, D) bf16 tensor, columns [c0, c0+16) of head hh.
__device__ __forceinline__ void write_frag(bf16 *dst, const FragC &f, float *scratch, int lds, int b, int Tn,
                                           int heads, int hh, int D, int t0, int c0) {
    wmma::store_matrix_sync(scratch, f, lds, wmma::mem_row_major);
    __syncwarp();
    const int lane = threadIdx.x % 32;
    for (int e = lane; e < 256; e += 32) {
        int rr = e / 16, cc = e % 16, t = t0 + rr;
        if (t < Tn) dst[((size_t)b * Tn + t) * heads * D + (size_t)hh * D + c0 + cc] = __float2bfloat16(scratch[rr * lds + cc]);
    }
    __syncwarp();
}

template <int D>
__global__ void __launch_bounds__(WTHREADS) attn_dkdv_wmma(bf16 *dk, bf16 *dv, const float *Di, const bf16 *dout,
                                                           const bf16 *q, const bf16 *k, const bf16 *v,
                                                           const float *lse, int Tn, int NH, int NKV, int window, const int32_t *docs,
                                                           float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Ks = (bf16 *)smem, *Vs = Ks + WK * D, *Qs = Vs + WK * D, *dOs = Qs + WQ * D;
    float *St = (float *)(dOs + WQ * D), *dPt = St + WK * WQ;
    bf16 *Pt = (bf16 *)(dPt + WK * WQ), *dSt = Pt + WK * WQ;
    float *Lq = (float *)(dSt + WK * WQ), *Dq = Lq + WQ;
    const int kt = blockIdx.x, g = blockIdx.y, b = blockIdx.z, group = NH / NKV;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r0 = warp * 16;
    const int k0 = kt * WK;
    load_tile<D>(Ks, k, b, Tn, NKV, g, k0, WK);
    load_tile<D>(Vs, v, b, Tn, NKV, g, k0, WK);
    FragC dKf[D / 16], dVf[D / 16];
#pragma unroll
    for (int nb = 0; nb < D / 16; nb++) {
        wmma::fill_fragment(dKf[nb], 0.0f);
        wmma::fill_fragment(dVf[nb], 0.0f);
    }
    const int k1 = min(k0 + WK, Tn) - 1, qhi = min(Tn - 1, k1 + window - 1);
    const int r = r0 + lane / 2, j = k0 + r, c0 = (lane & 1) * (WQ / 2);
    for (int h = g * group; h < (g + 1) * group; h++) {
        for (int q0 = (k0 / WQ) * WQ; q0 <= qhi; q0 += WQ) {
            __syncthreads();
            load_tile<D>(Qs, q, b, Tn, NH, h, q0, WQ);
            load_tile<D>(dOs, dout, b, Tn, NH, h, q0, WQ);
            if (threadIdx.x < WQ) {
                int i = q0 + threadIdx.x;
                Lq[threadIdx.x] = i < Tn ? lse[((size_t)b * NH + h) * Tn + i] : 0.0f;
                Dq[threadIdx.x] = i < Tn ? Di[((size_t)b * NH + h) * Tn + i] : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int qb = 0; qb < WQ / 16; qb++) {
                FragC a1, a2;
                wmma::fill_fragment(a1, 0.0f);
                wmma::fill_fragment(a2, 0.0f);
#pragma unroll
                for (int kk = 0; kk < D / 16; kk++) {
                    FragA fa;
                    FragBt fb;
                    wmma::load_matrix_sync(fa, Ks + r0 * D + kk * 16, D);
                    wmma::load_matrix_sync(fb, Qs + qb * 16 * D + kk * 16, D);
                    wmma::mma_sync(a1, fa, fb, a1);
                    wmma::load_matrix_sync(fa, Vs + r0 * D + kk * 16, D);
                    wmma::load_matrix_sync(fb, dOs + qb * 16 * D + kk * 16, D);
                    wmma::mma_sync(a2, fa, fb, a2);
                }
                wmma::store_matrix_sync(St + r0 * WQ + qb * 16, a1, WQ, wmma::mem_row_major);
                wmma::store_matrix_sync(dPt + r0 * WQ + qb * 16, a2, WQ, wmma::mem_row_major);
            }
            __syncwarp();
            for (int c = c0; c < c0 + WQ / 2; c++) {
                int i = q0 + c;
                float p = visible_doc(docs, b, i, j, Tn, window) ? expf(St[r * WQ + c] * scale - Lq[c]) : 0.0f;
                float ds = p * (dPt[r * WQ + c] - Dq[c]) * scale;
                Pt[r * WQ + c] = __float2bfloat16(p);
                dSt[r * WQ + c] = __float2bfloat16(ds);
            }
            __syncwarp();
#pragma unroll
            for (int nb = 0; nb < D / 16; nb++) {
#pragma unroll
                for (int qb = 0; qb < WQ / 16; qb++) {
                    FragA fa;
                    FragB fb;
                    wmma::load_matrix_sync(fa, Pt + r0 * WQ + qb * 16, WQ);
                    wmma::load_matrix_sync(fb, dOs + qb * 16 * D + nb * 16, D);
                    wmma::mma_sync(dVf[nb], fa, fb, dVf[nb]);
                    wmma::load_matrix_sync(fa, dSt + r0 * WQ + qb * 16, WQ);
                    wmma::load_matrix_sync(fb, Qs + qb * 16 * D + nb * 16, D);
                    wmma::mma_sync(dKf[nb], fa, fb, dKf[nb]);
                }
            }
        }
    }
    __syncwarp();
#pragma unroll
    for (int nb = 0; nb < D / 16; nb++) {
        write_frag(dk, dKf[nb], St + r0 * WQ, WQ, b, Tn, NKV, g, D, k0 + r0, nb * 16);
        write_frag(dv, dVf[nb], St + r0 * WQ, WQ, b, Tn, NKV, g, D, k0 + r0, nb * 16);
    }
}

template <int D> constexpr size_t dq_smem() {
    return (size_t)(2 * WQ + 2 * WK) * D * 2 + (size_t)WQ * WK * 4 * 2 + (size_t)WQ * WK * 2 + 2 * WQ * 4;
}

template <int D>
__global__ void __launch_bounds__(WTHREADS) attn_dq_wmma(bf16 *dq, const float *Di, const bf16 *dout, const bf16 *q,
                                                         const bf16 *k, const bf16 *v, const float *lse, int Tn,
                                                         int NH, int NKV, int window, const int32_t *docs, float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Qs = (bf16 *)smem, *dOs = Qs + WQ * D, *Ks = dOs + WQ * D, *Vs = Ks + WK * D;
    float *Ss = (float *)(Vs + WK * D), *dPs = Ss + WQ * WK;
    bf16 *dSs = (bf16 *)(dPs + WQ * WK);
    float *Lr = (float *)(dSs + WQ * WK), *Dr = Lr + WQ;
    const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (NH / NKV);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r0 = warp * 16;
    const int q0 = qt * WQ;
    load_tile<D>(Qs, q, b, Tn, NH, h, q0, WQ);
    load_tile<D>(dOs, dout, b, Tn, NH, h, q0, WQ);
    if (threadIdx.x < WQ) {
        int i = q0 + threadIdx.x;
        Lr[threadIdx.x] = i < Tn ? lse[((size_t)b * NH + h) * Tn + i] : 0.0f;
        Dr[threadIdx.x] = i < Tn ? Di[((size_t)b * NH + h) * Tn + i] : 0.0f;
    }
    FragC dQf[D / 16];
#pragma unroll
    for (int nb = 0; nb < D / 16; nb++) wmma::fill_fragment(dQf[nb], 0.0f);
    const int q1 = min(q0 + WQ, Tn) - 1, klo = max(max(0, q0 - window + 1), docs ? docs[(size_t)b * Tn + q0] : 0);
    const int r = r0 + lane / 2, i = q0 + r, c0 = (lane & 1) * (WK / 2);
    for (int k0 = (klo / WK) * WK; k0 <= q1; k0 += WK) {
        __syncthreads();
        load_tile<D>(Ks, k, b, Tn, NKV, g, k0, WK);
        load_tile<D>(Vs, v, b, Tn, NKV, g, k0, WK);
        __syncthreads();
#pragma unroll
        for (int kb = 0; kb < WK / 16; kb++) {
            FragC a1, a2;
            wmma::fill_fragment(a1, 0.0f);
            wmma::fill_fragment(a2, 0.0f);
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                FragA fa;
                FragBt fb;
                wmma::load_matrix_sync(fa, Qs + r0 * D + kk * 16, D);
                wmma::load_matrix_sync(fb, Ks + kb * 16 * D + kk * 16, D);
                wmma::mma_sync(a1, fa, fb, a1);
                wmma::load_matrix_sync(fa, dOs + r0 * D + kk * 16, D);
                wmma::load_matrix_sync(fb, Vs + kb * 16 * D + kk * 16, D);
                wmma::mma_sync(a2, fa, fb, a2);
            }
            wmma::store_matrix_sync(Ss + r0 * WK + kb * 16, a1, WK, wmma::mem_row_major);
            wmma::store_matrix_sync(dPs + r0 * WK + kb * 16, a2, WK, wmma::mem_row_major);
        }
        __syncwarp();
        for (int c = c0; c < c0 + WK / 2; c++) {
            float p = visible_doc(docs, b, i, k0 + c, Tn, window) ? expf(Ss[r * WK + c] * scale - Lr[r]) : 0.0f;
            dSs[r * WK + c] = __float2bfloat16(p * (dPs[r * WK + c] - Dr[r]) * scale);
        }
        __syncwarp();
#pragma unroll
        for (int nb = 0; nb < D / 16; nb++) {
#pragma unroll
            for (int kb = 0; kb < WK / 16; kb++) {
                FragA fa;
                FragB fb;
                wmma::load_matrix_sync(fa, dSs + r0 * WK + kb * 16, WK);
                wmma::load_matrix_sync(fb, Ks + kb * 16 * D + nb * 16, D);
                wmma::mma_sync(dQf[nb], fa, fb, dQf[nb]);
            }
        }
    }
    __syncwarp();
#pragma unroll
    for (int nb = 0; nb < D / 16; nb++) write_frag(dq, dQf[nb], Ss + r0 * WK, WK, b, Tn, NH, h, D, q0 + r0, nb * 16);
}

static bool use_wmma() {
    const char *e = getenv("OLMO_CUDA_ATTN");
    return !(e && !strcmp(e, "simt"));
}

// Raise a kernel's dynamic shared-memory limit once per (kernel, size).
template <typename K> static void smem_limit(K kernel, size_t bytes) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

int attention_head_dim_supported(int D) { return D == 16 || D == 32 || D == 64 || D == 128; }

#define DISPATCH_D(D, ...)                                  \
    switch (D) {                                            \
    case 16: { constexpr int DD = 16; __VA_ARGS__; } break; \
    case 32: { constexpr int DD = 32; __VA_ARGS__; } break; \
    case 64: { constexpr int DD = 64; __VA_ARGS__; } break; \
    case 128: { constexpr int DD = 128; __VA_ARGS__; } break; \
    default: die("CUDA attention: head_dim %d not supported", D); \
    }

template <typename T>
void attention_forward_cuda(T *out, float *lse, const T *q, const T *k, const T *v, int B, int Tn, int NH, int NKV,
                            int D, int window, const int32_t *docs, cudaStream_t st) {
    float scale = 1.0f / sqrtf((float)D);
    if constexpr (sizeof(T) == 2) {
        if (use_wmma()) {
            dim3 gw((Tn + WQ - 1) / WQ, NH, B);
            DISPATCH_D(D, smem_limit(attn_fwd_wmma<DD>, fwd_smem<DD>());
                       attn_fwd_wmma<DD><<<gw, WTHREADS, fwd_smem<DD>(), st>>>(out, lse, q, k, v, Tn, NH, NKV, window, docs, scale));
            CUDA_LAUNCH_CHECK();
            return;
        }
    }
    dim3 grid((Tn + BQ - 1) / BQ, NH, B);
    DISPATCH_D(D, attn_fwd_kernel<T, DD><<<grid, NTHREADS, 0, st>>>(out, lse, q, k, v, Tn, NH, NKV, window, docs, scale));
    CUDA_LAUNCH_CHECK();
}

template <typename T>
void attention_backward_cuda(T *dq, T *dk, T *dv, float *Di, const T *dout, const T *q, const T *k, const T *v,
                             const T *out, const float *lse, int B, int Tn, int NH, int NKV, int D, int window,
                             const int32_t *docs, cudaStream_t st) {
    float scale = 1.0f / sqrtf((float)D);
    size_t rows = (size_t)B * Tn * NH;
    attn_di_kernel<T><<<(unsigned)((rows + 255) / 256), 256, 0, st>>>(Di, dout, out, B, Tn, NH, D);
    CUDA_LAUNCH_CHECK();
    if constexpr (sizeof(T) == 2) {
        if (use_wmma()) {
            dim3 gkw((Tn + WK - 1) / WK, NKV, B), gqw((Tn + WQ - 1) / WQ, NH, B);
            DISPATCH_D(D, smem_limit(attn_dkdv_wmma<DD>, dkdv_smem<DD>());
                       attn_dkdv_wmma<DD><<<gkw, WTHREADS, dkdv_smem<DD>(), st>>>(dk, dv, Di, dout, q, k, v, lse, Tn, NH, NKV, window, docs, scale));
            CUDA_LAUNCH_CHECK();
            DISPATCH_D(D, smem_limit(attn_dq_wmma<DD>, dq_smem<DD>());
                       attn_dq_wmma<DD><<<gqw, WTHREADS, dq_smem<DD>(), st>>>(dq, Di, dout, q, k, v, lse, Tn, NH, NKV, window, docs, scale));
            CUDA_LAUNCH_CHECK();
            return;
        }
    }
    dim3 gkv((Tn + BK - 1) / BK, NKV, B), gq((Tn + BQ - 1) / BQ, NH, B);
    DISPATCH_D(D, attn_dkdv_kernel<T, DD><<<gkv, NTHREADS, 0, st>>>(dk, dv, Di, dout, q, k, v, lse, Tn, NH, NKV, window, docs, scale));
    CUDA_LAUNCH_CHECK();
    DISPATCH_D(D, attn_dq_kernel<T, DD><<<gq, NTHREADS, 0, st>>>(dq, Di, dout, q, k, v, lse, Tn, NH, NKV, window, docs, scale));
    CUDA_LAUNCH_CHECK();
}

template void attention_forward_cuda<float>(float *, float *, const float *, const float *, const float *, int, int,
                                            int, int, int, int, const int32_t *, cudaStream_t);
template void attention_forward_cuda<bf16>(bf16 *, float *, const bf16 *, const bf16 *, const bf16 *, int, int, int,
                                           int, int, int, const int32_t *, cudaStream_t);
template void attention_backward_cuda<float>(float *, float *, float *, float *, const float *, const float *,
                                             const float *, const float *, const float *, const float *, int, int, int,
                                             int, int, int, const int32_t *, cudaStream_t);
template void attention_backward_cuda<bf16>(bf16 *, bf16 *, bf16 *, float *, const bf16 *, const bf16 *, const bf16 *,
                                            const bf16 *, const bf16 *, const float *, int, int, int, int, int, int,
                                            const int32_t *, cudaStream_t);

// The DType entry points (ops.cuh) over the templates.
void attention_forward_cuda_dt(cudaStream_t st, void *out, float *lse, const void *q, const void *k, const void *v,
                               DType t, int B, int Tn, int NH, int NKV, int D, int window, const int32_t *docs) {
    DT_DISPATCH(t, TT,
                attention_forward_cuda<TT>((TT *)out, lse, (const TT *)q, (const TT *)k, (const TT *)v, B, Tn, NH, NKV,
                                           D, window, docs, st));
}

void attention_backward_cuda_dt(cudaStream_t st, void *dq, void *dk, void *dv, float *Di, const void *dout,
                                const void *q, const void *k, const void *v, const void *out, const float *lse, DType t,
                                int B, int Tn, int NH, int NKV, int D, int window, const int32_t *docs) {
    DT_DISPATCH(t, TT,
                attention_backward_cuda<TT>((TT *)dq, (TT *)dk, (TT *)dv, Di, (const TT *)dout, (const TT *)q,
                                            (const TT *)k, (const TT *)v, (const TT *)out, lse, B, Tn, NH, NKV, D,
                                            window, docs, st));
}

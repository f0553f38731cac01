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
// The SIMT kernels recompute the probabilities in both backward kernels (twice the exp
// work of a fused atomic-add backward); the tensor-core ones below hand dS over instead.
//
// These are plain SIMT fp32 kernels (no tensor cores): correct and memory-lean, but far
// slower than the tensor-core kernels below (bf16 mode); docs/cuda.md says so.
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

// Di[b,h,i] = sum_d dO * O (the softmax backward's row term): one warp a row (lanes over
// d, coalesced; a thread a row read 32 rows D apart), summed lane-wise in d order, then a
// fixed xor tree.
#define DI_ROWS 8   // rows (warps) a block
template <typename T>
__global__ void attn_di_kernel(float *Di, const T *dout, const T *out, int B, int Tn, int NH, int D) {
    const size_t idx = (size_t)blockIdx.x * DI_ROWS + threadIdx.x / 32;   // over (b, i, h)
    const int lane = threadIdx.x % 32;
    if (idx >= (size_t)B * Tn * NH) return;   // whole warps leave together
    int h = (int)(idx % NH);
    size_t bi = idx / NH;
    int i = (int)(bi % Tn), b = (int)(bi / Tn);
    const T *o = out + idx * D, *d_o = dout + idx * D;
    float acc = 0.0f;
    for (int d = lane; d < D; d += 32) acc += tof(d_o[d]) * tof(o[d]);
#pragma unroll
    for (int m = 16; m >= 1; m /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, m);
    if (lane == 0) Di[((size_t)b * NH + h) * Tn + i] = acc;
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
// algorithm and determinism as the SIMT kernels above (fixed loop orders, no atomics),
// laid out on the counted cost model of the emulation (tests/cuemu/cost.cpp, docs/cuda.md
// "Cost model"): padded shared tiles, lanes walking rotated column pairs (8-byte reads,
// 4-byte bf16 pair writes), 16-byte tile loads and output stores, operands reused from
// registers. Warps own 16 rows each:
//   forward  128 query rows (8 warps) x 64-key tiles: Q fragments and the O accumulators
//            in registers; S = Q K^T (wmma) -> the warp's fp32 slice; online softmax by
//            the lanes in one pass (the row's scores read once into registers); O
//            rescaled in registers (frag_rows); O += P V (P rounded to bf16 as in
//            FlashAttention-2).
//   dK, dV   per 64-key tile: S^T = K Q^T and dP^T = V dO^T (wmma, each K / V fragment
//            loaded once for the 4 query blocks), P^T and dS^T by the lanes (in place,
//            bf16), then dV += P^T dO and dK += dS^T Q in registers; the bf16 dS^T tile
//            also goes to global memory (8 KiB a tile pair).
//   dQ       per 64-query tile: dQ += dS K over its key tiles in order, dS read back from
//            the dK/dV kernel's tiles; dQ in registers.
// 5 tile matmuls, as FlashAttention-2, and deterministic: FA2 adds each pair's dQ into an
// fp32 dQ with atomics (any order); here the pair's dS (an eighth of those bytes at D 128)
// waits in global memory for the dQ kernel, which sums in key-tile order. The dS scratch is
// bounded (CUDA_ATTN_DS_BUDGET, kernels/cuda/sizes.h): the backward runs a launch pair per
// chunk of kv-head groups. WMMA, not mma.sync PTX: the emulation executes WMMA (include/mma.h) and not
// inline PTX, and on sm_80/sm_90 both issue the same HMMA instructions; what separated
// these kernels from FlashAttention-2 was shared-memory traffic, which the layouts fix.
// No cp.async double buffering (the emulation does not model it): the tile loads stall.
// OLMO_CUDA_ATTN=simt selects the SIMT kernels instead (comparison, fallback).
// ---------------------------------------------------------------------------------------
#include <mma.h>
using namespace nvcuda;

#define WQ 64
#define WK 64
static_assert(WQ == CUDA_ATTN_TILE && WK == CUDA_ATTN_TILE, "the dS tile pairs (kernels/cuda/sizes.h) are of these tiles");
#define WTHREADS 128

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> FragA;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> FragBt;   // B = X^T, X row-major
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> FragB;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> FragC;

__device__ __forceinline__ bf16 bzero() { return __float2bfloat16(0.0f); }

// Shared layouts are padded by 16 bytes a row: a bf16 tile's rows (ld D + 8) then start
// 16 bytes further round the 32 banks each, so the 8 row pieces of each ldmatrix phase hit
// 8 different bank groups (at ld D every row starts at bank 0: 8-way); an fp32 score tile
// at ld 72 puts the 4 rows of an accumulator half-warp store 8 banks apart (at 64: 4-way).
// The counted figures before/after are in docs/cuda.md ("Cost model").
#define PADT(D) ((D) + 8)   // bf16 Q/K/V/dO tiles
#define LDS (WK + 8)        // fp32 score tiles (S, dP), 64 columns
#define LDP (WK + 8)        // bf16 probability tiles (P, dS), 64 columns

// The lanes' walk over the 32 columns [half*32, half*32+32) of their row r (2 lanes a row,
// half = lane & 1), as 16 column pairs: step s takes pair ((s + r + 8 half) & 15), columns
// half*32 + 2 pair, +1. With the fp32 tile's rows 72 words apart the 16 lanes of each
// half-warp's 8-byte reads (a pair of S, the pair's two lse or Di) then hit 32 different
// banks, and with the bf16 tile's rows 4 (mod 32) words apart the 32 lanes' 4-byte
// writes (the pair as bf16) too: one wavefront a step, 2 bytes a column written.
__device__ __forceinline__ int rot_pair(int s, int r, int half) { return (s + r + 8 * half) & 15; }

// Which row of its 16x16 tile each of a lane's 8 accumulator elements holds: the layout is
// the hardware's (the WMMA API does not name it), so it is read off a tile whose elements
// are their row numbers. scratch: 16 x 16 fp32 of the warp's shared memory.
static_assert(FragC::num_elements == 8, "a 16x16 fp32 accumulator holds 8 elements a lane");
__device__ __forceinline__ void frag_rows(int rows[8], float *scratch) {
    const int lane = threadIdx.x % 32;
    for (int e = lane; e < 256; e += 32) scratch[e] = (float)(e / 16);
    __syncwarp();
    FragC f;
    wmma::load_matrix_sync(f, scratch, 16, wmma::mem_row_major);
#pragma unroll
    for (int i = 0; i < 8; i++) rows[i] = (int)f.x[i];
    __syncwarp();
}

// Rows [r0, r0+rows) of a (B, T, heads, D) bf16 tensor's head hh into shared (rows, ld),
// 16 bytes a lane (rows past T are zeros). Pointers are 16-byte aligned (host check).
template <int D>
__device__ __forceinline__ void load_tile16(bf16 *dst, int ld, const bf16 *src, int b, int Tn, int heads, int hh, int r0,
                                            int rows, int nthreads) {
    constexpr int C = D / 8;   // 16-byte chunks a row
    const size_t lds = (size_t)heads * D;
    for (int e = threadIdx.x; e < rows * C; e += nthreads) {
        const int r = e / C, c = e % C, t = r0 + r;
        uint4 z = make_uint4(0, 0, 0, 0);
        *(uint4 *)(dst + (size_t)r * ld + c * 8) = t < Tn ? *(const uint4 *)(src + ((size_t)b * Tn + t) * lds + (size_t)hh * D + c * 8) : z;
    }
}

// Two floats as a bf16 pair (round to nearest, as __float2bfloat16): one 32-bit word.
__device__ __forceinline__ uint32_t bf16x2_bits(float a, float b) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16(a)) | (uint32_t)__bfloat16_as_ushort(__float2bfloat16(b)) << 16;
}

// A 16 x 16 fp32 accumulator to rows [t0, t0+16) (those < T), columns [c0, c0+16) of head
// hh of a (B, T, heads, D) bf16 tensor, through the warp's scratch (16 x 24 fp32): stored at
// ld 24 (the 4 rows of a half-warp's 8-byte stores 24 words apart: conflict-free), read
// back by lane l as row l/2, columns (l&1)*8 .. +7 in two 16-byte reads whose order goes by
// the row's parity (the 8 lanes of a quarter-warp, 4 rows x 2 halves, then hit 32
// different banks: 8 wavefronts for the tile), rounded to bf16 in registers and written
// as 16 bytes a lane (16 rows x 32 bytes: one sector a row).
__device__ __forceinline__ void write_frag16(bf16 *dst, const FragC &f, float *scratch, int b, int Tn, int heads, int hh,
                                             int D, int t0, int c0) {
    wmma::store_matrix_sync(scratch, f, 24, wmma::mem_row_major);
    __syncwarp();
    const int lane = threadIdx.x % 32, rr = lane / 2, cc = (lane & 1) * 8, t = t0 + rr, a = rr & 1;
    float4 x, y;   // assigned: 16-byte accesses in the emulation's count too (cuemu.h)
    x = *(const float4 *)(scratch + rr * 24 + cc + 4 * a);
    y = *(const float4 *)(scratch + rr * 24 + cc + 4 * (1 - a));
    __syncwarp();   // the scratch is read before the caller reuses it
    const float4 lo = a ? y : x, hi = a ? x : y;
    if (t < Tn)
        *(uint4 *)(dst + ((size_t)b * Tn + t) * heads * D + (size_t)hh * D + c0 + cc) =
            make_uint4(bf16x2_bits(lo.x, lo.y), bf16x2_bits(lo.z, lo.w), bf16x2_bits(hi.x, hi.y), bf16x2_bits(hi.z, hi.w));
}

// A warp's 16 rows of 64 bf16 (128 bytes each) from shared src (ld bf16; NULL: zeros) to
// the contiguous global rows at dst, 16 bytes a lane: 4 steps of 4 full rows (4 sectors
// each), the 8 lanes of a row reading 8 consecutive 16-byte pieces of shared memory.
__device__ __forceinline__ void store_rows16(bf16 *dst, const bf16 *src, int ld) {
    const int lane = threadIdx.x % 32, c = (lane % 8) * 8;
#pragma unroll
    for (int st = 0; st < 4; st++) {
        const int r = st * 4 + lane / 8;
        *(uint4 *)(dst + r * 64 + c) = src ? *(const uint4 *)(src + r * ld + c) : make_uint4(0, 0, 0, 0);
    }
}

// The key tile at k0 into Ks, Vs (ld LDT) between block barriers; whether any of the
// warp's 16 rows from w_lo (< T) sees one of its keys (causal, window). A warp that sees
// none skips the tile: what it would add is exactly nothing (p = 0, alpha = 1).
template <int D>
__device__ __forceinline__ bool kv_tile(bf16 *Ks, bf16 *Vs, int ldt, const bf16 *k, const bf16 *v, int b, int Tn, int NKV,
                                        int g, int k0, int nthreads, int w_lo, int window) {
    __syncthreads();
    load_tile16<D>(Ks, ldt, k, b, Tn, NKV, g, k0, WK, nthreads);
    load_tile16<D>(Vs, ldt, v, b, Tn, NKV, g, k0, WK, nthreads);
    __syncthreads();
    const int w_hi = min(w_lo + 15, Tn - 1);
    return w_lo < Tn && k0 <= w_hi && k0 + WK - 1 > w_lo - window;
}

// Forward: 128 query rows a block, 8 warps of 16 rows; Q (A fragments) and O (fp32
// accumulators) stay in registers for the whole key loop; per 64-key tile a warp computes
// S = Q K^T into its shared slice, the online softmax by its lanes (2 a row, rotated
// columns), rescales O in its registers (frag_rows) and adds P V. A warp whose 16 rows see
// none of a key tile (causal / window) skips it: its state is what the skipped work would
// have left (alpha 1, p 0).
#define FQ 128
#define FTHREADS 256
template <int D> constexpr size_t fwd_smem() {
    return (size_t)2 * WK * PADT(D) * 2 + (size_t)FQ * LDS * 4 + (size_t)FQ * LDP * 2 + 3 * FQ * 4;
}
static_assert((size_t)FQ * PADT(128) * 2 <= (size_t)FQ * LDS * 4, "the Q staging tile fits in the score tile");

template <int D>
__global__ void __launch_bounds__(FTHREADS) attn_fwd_wmma(bf16 *out, float *lse, const bf16 *q, const bf16 *k,
                                                          const bf16 *v, int Tn, int NH, int NKV, int window, const int32_t *docs,
                                                          float scale) {
    constexpr int LDT = PADT(D), NB = D / 16;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Ks = (bf16 *)smem, *Vs = Ks + WK * LDT;
    float *Ss = (float *)(Vs + WK * LDT);
    bf16 *Ps = (bf16 *)(Ss + FQ * LDS);
    float *Ms = (float *)(Ps + FQ * LDP), *Ls = Ms + FQ, *As = Ls + FQ;
    const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (NH / NKV);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r0 = warp * 16;
    const int q0 = qt * FQ;
    float *Sw = Ss + r0 * LDS;   // this warp's 16 score rows
    bf16 *Pw = Ps + r0 * LDP;
    // Q: staged through the score tile once, then in registers
    load_tile16<D>((bf16 *)Ss, LDT, q, b, Tn, NH, h, q0, FQ, FTHREADS);
    if (threadIdx.x < FQ) {
        Ms[threadIdx.x] = -INFINITY;
        Ls[threadIdx.x] = 0.0f;
    }
    __syncthreads();
    FragA qf[NB];
#pragma unroll
    for (int kk = 0; kk < NB; kk++) wmma::load_matrix_sync(qf[kk], (bf16 *)Ss + r0 * LDT + kk * 16, LDT);
    __syncthreads();   // the staging is read before S overwrites it
    int frow[8];
    frag_rows(frow, Sw);
    FragC of[NB];
#pragma unroll
    for (int nb = 0; nb < NB; nb++) wmma::fill_fragment(of[nb], 0.0f);
    const int q1 = min(q0 + FQ, Tn) - 1, klo = max(max(0, q0 - window + 1), docs ? docs[(size_t)b * Tn + q0] : 0);
    const int rl = lane / 2, r = r0 + rl, i = q0 + r, half = lane & 1;
    for (int k0 = (klo / WK) * WK; k0 <= q1; k0 += WK) {
        if (!kv_tile<D>(Ks, Vs, LDT, k, v, b, Tn, NKV, g, k0, FTHREADS, q0 + r0, window)) continue;
#pragma unroll
        for (int kb = 0; kb < WK / 16; kb++) {
            FragC acc;
            wmma::fill_fragment(acc, 0.0f);
#pragma unroll
            for (int kk = 0; kk < NB; kk++) {
                FragBt fb;
                wmma::load_matrix_sync(fb, Ks + kb * 16 * LDT + kk * 16, LDT);
                wmma::mma_sync(acc, qf[kk], fb, acc);
            }
            wmma::store_matrix_sync(Sw + kb * 16, acc, LDS, wmma::mem_row_major);
        }
        __syncwarp();
        // the row's 32 scores (this lane's half) once into registers, masked and scaled
        const float *srow = Sw + rl * LDS;
        float2 sv[WK / 4];
        float mx = -INFINITY;
#pragma unroll
        for (int st = 0; st < WK / 4; st++) {
            const int c = half * (WK / 2) + 2 * rot_pair(st, rl, half);
            float2 x;   // assigned: one 8-byte access in the emulation's count too (cuemu.h)
            x = *(const float2 *)(srow + c);
            sv[st].x = visible_doc(docs, b, i, k0 + c, Tn, window) ? x.x * scale : -INFINITY;
            sv[st].y = visible_doc(docs, b, i, k0 + c + 1, Tn, window) ? x.y * scale : -INFINITY;
            mx = fmaxf(mx, fmaxf(sv[st].x, sv[st].y));
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float mold = Ms[r], mnew = fmaxf(mold, mx);
        const float alpha = mnew == -INFINITY ? 1.0f : expf(mold - mnew);
        float sum = 0.0f;
#pragma unroll
        for (int st = 0; st < WK / 4; st++) {
            const int c = half * (WK / 2) + 2 * rot_pair(st, rl, half);
            const float p0 = sv[st].x == -INFINITY ? 0.0f : expf(sv[st].x - mnew);
            const float p1 = sv[st].y == -INFINITY ? 0.0f : expf(sv[st].y - mnew);
            sum += p0;
            sum += p1;
            *(uint32_t *)(Pw + rl * LDP + c) = bf16x2_bits(p0, p1);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        __syncwarp();   // both lanes of a row have read Ms[r]
        if (half == 0) {
            Ms[r] = mnew;
            Ls[r] = Ls[r] * alpha + sum;
            As[r] = alpha;
        }
        __syncwarp();
        float al[8];
#pragma unroll
        for (int e = 0; e < 8; e++) al[e] = As[r0 + frow[e]];
        FragA pf[WK / 16];
#pragma unroll
        for (int kb = 0; kb < WK / 16; kb++) wmma::load_matrix_sync(pf[kb], Pw + kb * 16, LDP);
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
#pragma unroll
            for (int e = 0; e < 8; e++) of[nb].x[e] *= al[e];
#pragma unroll
            for (int kb = 0; kb < WK / 16; kb++) {
                FragB fb;
                wmma::load_matrix_sync(fb, Vs + kb * 16 * LDT + nb * 16, LDT);
                wmma::mma_sync(of[nb], pf[kb], fb, of[nb]);
            }
        }
    }
    // O / l in registers (each element's row: frow), 16 columns at a time to global memory
    // through the warp's score slice
    __syncwarp();
    float lr[8];
#pragma unroll
    for (int e = 0; e < 8; e++) lr[e] = Ls[r0 + frow[e]];
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
#pragma unroll
        for (int e = 0; e < 8; e++) of[nb].x[e] /= lr[e];
        write_frag16(out, of[nb], Sw, b, Tn, NH, h, D, q0 + r0, nb * 16);
    }
    __syncthreads();   // thread t writes row t's lse: rows of other warps
    if (threadIdx.x < FQ && q0 + (int)threadIdx.x < Tn)
        lse[((size_t)b * NH + h) * Tn + q0 + threadIdx.x] = Ms[threadIdx.x] + logf(Ls[threadIdx.x]);
}

// dK, dV: 64 keys a block, 4 warps of 16; per query tile S^T = K Q^T and dP^T = V dO^T
// (each K and V fragment loaded once, the 4 query blocks' accumulators in registers) into
// the warp's fp32 slices (ld 72), P^T and dS^T by the lanes (column pairs, rot_pair), kept
// in registers until the warp has read its slices, then written as bf16 over them (ld 136
// bf16: conflict-free ldmatrix), and dV += P^T dO, dK += dS^T Q with P^T, dS^T fragments
// loaded once. In place, so that the padded tiles fit twice per SM. Each warp also stores its 16 rows of dS^T to the pair's
// global tile (g_base: the first kv group of this launch's chunk), zeros where a warp whose
// 16 keys no query of the tile sees skips it.
#define LST (WQ + 8)        // fp32 S^T, dP^T
#define LPT (2 * WQ + 8)    // their bf16 overlays (P^T, dS^T), in the warp's own fp32 rows
static_assert(LPT * 2 <= LST * 4, "a warp's bf16 overlay fits in its 16 fp32 rows");
template <int D> constexpr size_t dkdv_smem() {
    return (size_t)4 * WK * PADT(D) * 2 + (size_t)2 * WK * LST * 4 + 2 * WQ * 4;
}

template <int D>
__global__ void __launch_bounds__(WTHREADS) attn_dkdv_wmma(bf16 *dk, bf16 *dv, bf16 *dS, const float *Di,
                                                           const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v,
                                                           const float *lse, int Tn, int NH, int NKV, int window,
                                                           const int32_t *docs, float scale, int g_base) {
    constexpr int LDT = PADT(D), NB = D / 16;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Ks = (bf16 *)smem, *Vs = Ks + WK * LDT, *Qs = Vs + WK * LDT, *dOs = Qs + WQ * LDT;
    float *St = (float *)(dOs + WQ * LDT), *dPt = St + WK * LST;
    float *Lq = dPt + WK * LST, *Dq = Lq + WQ;
    const int kt = blockIdx.x, g = g_base + blockIdx.y, b = blockIdx.z, group = NH / NKV;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r0 = warp * 16;
    const int k0 = kt * WK, c_reach = cuda_attn_reach(window);
    const long long npairs = cuda_attn_pair_base(gridDim.x, c_reach);
    float *Sw = St + r0 * LST, *dPw = dPt + r0 * LST;
    bf16 *Pw = (bf16 *)Sw, *dSw = (bf16 *)dPw;   // the bf16 overlays, ld LPT
    load_tile16<D>(Ks, LDT, k, b, Tn, NKV, g, k0, WK, WTHREADS);
    load_tile16<D>(Vs, LDT, v, b, Tn, NKV, g, k0, WK, WTHREADS);
    FragC dKf[NB], dVf[NB];
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
        wmma::fill_fragment(dKf[nb], 0.0f);
        wmma::fill_fragment(dVf[nb], 0.0f);
    }
    const int k1 = min(k0 + WK, Tn) - 1, qhi = min(Tn - 1, k1 + window - 1);
    const int rl = lane / 2, j = k0 + r0 + rl, c0 = (lane & 1) * (WQ / 2);
    const int w_lo = k0 + r0, w_hi = min(w_lo + 15, Tn - 1);   // this warp's keys
    for (int h = g * group; h < (g + 1) * group; h++) {
        for (int q0 = (k0 / WQ) * WQ; q0 <= qhi; q0 += WQ) {
            __syncthreads();
            load_tile16<D>(Qs, LDT, q, b, Tn, NH, h, q0, WQ, WTHREADS);
            load_tile16<D>(dOs, LDT, dout, b, Tn, NH, h, q0, WQ, WTHREADS);
            if (threadIdx.x < WQ) {
                int i = q0 + threadIdx.x;
                Lq[threadIdx.x] = i < Tn ? lse[((size_t)b * NH + h) * Tn + i] : 0.0f;
                Dq[threadIdx.x] = i < Tn ? Di[((size_t)b * NH + h) * Tn + i] : 0.0f;
            }
            __syncthreads();
            // this pair's dS^T tile (keys x queries) for the dQ kernel: the chunk's heads in order
            bf16 *dSg = dS + (((long long)b * gridDim.y + blockIdx.y) * group + (h - g * group)) * npairs * (WK * WQ) +
                        cuda_attn_pair(q0 / WQ, kt, c_reach) * (WK * WQ) + (size_t)r0 * WQ;
            // no query of the tile sees these keys (past their window; the tiles start at the
            // key tile's own, so the last query is never before the warp's first key): dS = 0
            if (w_lo >= Tn || q0 > w_hi + window - 1) {
                store_rows16(dSg, nullptr, 0);
                continue;
            }
            FragC a1[WQ / 16], a2[WQ / 16];
#pragma unroll
            for (int qb = 0; qb < WQ / 16; qb++) {
                wmma::fill_fragment(a1[qb], 0.0f);
                wmma::fill_fragment(a2[qb], 0.0f);
            }
#pragma unroll
            for (int kk = 0; kk < NB; kk++) {
                FragA fk, fv;
                wmma::load_matrix_sync(fk, Ks + r0 * LDT + kk * 16, LDT);
                wmma::load_matrix_sync(fv, Vs + r0 * LDT + kk * 16, LDT);
#pragma unroll
                for (int qb = 0; qb < WQ / 16; qb++) {
                    FragBt fb;
                    wmma::load_matrix_sync(fb, Qs + qb * 16 * LDT + kk * 16, LDT);
                    wmma::mma_sync(a1[qb], fk, fb, a1[qb]);
                    wmma::load_matrix_sync(fb, dOs + qb * 16 * LDT + kk * 16, LDT);
                    wmma::mma_sync(a2[qb], fv, fb, a2[qb]);
                }
            }
#pragma unroll
            for (int qb = 0; qb < WQ / 16; qb++) {
                wmma::store_matrix_sync(Sw + qb * 16, a1[qb], LST, wmma::mem_row_major);
                wmma::store_matrix_sync(dPw + qb * 16, a2[qb], LST, wmma::mem_row_major);
            }
            __syncwarp();
            uint32_t pv[WQ / 4], dsv[WQ / 4];   // bf16 pairs
#pragma unroll
            for (int st = 0; st < WQ / 4; st++) {
                const int c = c0 + 2 * rot_pair(st, rl, lane & 1), i = q0 + c;
                float2 sv, dp, L, Dd;   // assigned: 8-byte accesses (cuemu.h)
                sv = *(const float2 *)(Sw + rl * LST + c);
                dp = *(const float2 *)(dPw + rl * LST + c);
                L = *(const float2 *)(Lq + c);
                Dd = *(const float2 *)(Dq + c);
                const float p0 = visible_doc(docs, b, i, j, Tn, window) ? expf(sv.x * scale - L.x) : 0.0f;
                const float p1 = visible_doc(docs, b, i + 1, j, Tn, window) ? expf(sv.y * scale - L.y) : 0.0f;
                pv[st] = bf16x2_bits(p0, p1);
                dsv[st] = bf16x2_bits(p0 * (dp.x - Dd.x) * scale, p1 * (dp.y - Dd.y) * scale);
            }
            __syncwarp();   // the warp's fp32 values are read: overwrite them with bf16
#pragma unroll
            for (int st = 0; st < WQ / 4; st++) {
                const int c = c0 + 2 * rot_pair(st, rl, lane & 1);
                *(uint32_t *)(Pw + rl * LPT + c) = pv[st];
                *(uint32_t *)(dSw + rl * LPT + c) = dsv[st];
            }
            __syncwarp();
            store_rows16(dSg, dSw, LPT);
            FragA pf[WQ / 16], dsf[WQ / 16];
#pragma unroll
            for (int qb = 0; qb < WQ / 16; qb++) {
                wmma::load_matrix_sync(pf[qb], Pw + qb * 16, LPT);
                wmma::load_matrix_sync(dsf[qb], dSw + qb * 16, LPT);
            }
#pragma unroll
            for (int nb = 0; nb < NB; nb++) {
#pragma unroll
                for (int qb = 0; qb < WQ / 16; qb++) {
                    FragB fb;
                    wmma::load_matrix_sync(fb, dOs + qb * 16 * LDT + nb * 16, LDT);
                    wmma::mma_sync(dVf[nb], pf[qb], fb, dVf[nb]);
                    wmma::load_matrix_sync(fb, Qs + qb * 16 * LDT + nb * 16, LDT);
                    wmma::mma_sync(dKf[nb], dsf[qb], fb, dKf[nb]);
                }
            }
        }
    }
    __syncwarp();
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
        write_frag16(dk, dKf[nb], Sw, b, Tn, NKV, g, D, k0 + r0, nb * 16);
        write_frag16(dv, dVf[nb], Sw, b, Tn, NKV, g, D, k0 + r0, nb * 16);
    }
}

// dQ: 64 query rows a block, 4 warps of 16, dQ (accumulators) in registers; per key tile the
// K tile and the dS^T tile the dK/dV kernel left for this pair (cuda_attn_pair) into padded
// shared tiles, then dQ += dS K with dS read as the col-major A of its transpose: the fifth
// tile matmul, in key-tile order (no atomics). S, P and dP are not recomputed here.
template <int D> constexpr size_t dq_smem() {
    return (size_t)WK * PADT(D) * 2 + (size_t)WK * LDP * 2 + (size_t)WQ * 32 * 4;
}

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> FragAt;   // A = X^T, X row-major

template <int D>
__global__ void __launch_bounds__(WTHREADS) attn_dq_wmma(bf16 *dq, const bf16 *dS, const bf16 *k, int Tn, int NH,
                                                         int NKV, int window, const int32_t *docs, int h_base) {
    constexpr int LDT = PADT(D), NB = D / 16;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Ks = (bf16 *)smem, *dSt = Ks + WK * LDT;
    float *scratch = (float *)(dSt + WK * LDP);
    const int qt = blockIdx.x, h = h_base + blockIdx.y, b = blockIdx.z, g = h / (NH / NKV);
    const int warp = threadIdx.x / 32, r0 = warp * 16;
    const int q0 = qt * WQ, c_reach = cuda_attn_reach(window);
    const long long npairs = cuda_attn_pair_base(gridDim.x, c_reach);
    const bf16 *dSh = dS + ((long long)b * gridDim.y + blockIdx.y) * npairs * (WK * WQ);
    float *Sw = scratch + r0 * 32;   // the warp's 2 KiB for write_frag16
    FragC dQf[NB];
#pragma unroll
    for (int nb = 0; nb < NB; nb++) wmma::fill_fragment(dQf[nb], 0.0f);
    const int q1 = min(q0 + WQ, Tn) - 1, klo = max(max(0, q0 - window + 1), docs ? docs[(size_t)b * Tn + q0] : 0);
    const int w_lo = q0 + r0, w_hi = min(w_lo + 15, Tn - 1);
    for (int k0 = (klo / WK) * WK; k0 <= q1; k0 += WK) {
        __syncthreads();
        load_tile16<D>(Ks, LDT, k, b, Tn, NKV, g, k0, WK, WTHREADS);
        const bf16 *src = dSh + cuda_attn_pair(qt, k0 / WK, c_reach) * (WK * WQ);
        for (int e = threadIdx.x; e < WK * WQ / 8; e += WTHREADS)
            *(uint4 *)(dSt + (e / 8) * LDP + (e % 8) * 8) = *(const uint4 *)(src + e * 8);
        __syncthreads();
        // none of the warp's rows sees the tile: its dS rows are zeros (nothing to add)
        if (w_lo >= Tn || k0 > w_hi || k0 + WK - 1 <= w_lo - window) continue;
        FragAt dsf[WK / 16];
#pragma unroll
        for (int kb = 0; kb < WK / 16; kb++) wmma::load_matrix_sync(dsf[kb], dSt + kb * 16 * LDP + r0, LDP);
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
#pragma unroll
            for (int kb = 0; kb < WK / 16; kb++) {
                FragB fb;
                wmma::load_matrix_sync(fb, Ks + kb * 16 * LDT + nb * 16, LDT);
                wmma::mma_sync(dQf[nb], dsf[kb], fb, dQf[nb]);
            }
        }
    }
    __syncwarp();
#pragma unroll
    for (int nb = 0; nb < NB; nb++) write_frag16(dq, dQf[nb], Sw, b, Tn, NH, h, D, q0 + r0, nb * 16);
}

static bool use_wmma() {
    const char *e = getenv("OLMO_CUDA_ATTN");
    return !(e && !strcmp(e, "simt"));
}

// Raise a kernel's dynamic shared-memory limit once per (kernel, size).
template <typename K> static void smem_limit(K kernel, size_t bytes) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// The tensor-core kernels move 16 bytes a lane: their tensors must be 16-byte aligned
// (cudaMalloc's are 256; a view at an odd offset is a caller bug, not a slow path).
static void check_aligned16(const void *a, const void *b, const void *c, const void *d) {
    if (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) % 16)
        die("CUDA attention: q/k/v/out pointers %p %p %p %p are not 16-byte aligned", a, b, c, d);
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
            check_aligned16(q, k, v, out);
            dim3 gw((Tn + FQ - 1) / FQ, NH, B);
            DISPATCH_D(D, smem_limit(attn_fwd_wmma<DD>, fwd_smem<DD>());
                       attn_fwd_wmma<DD><<<gw, FTHREADS, fwd_smem<DD>(), st>>>(out, lse, q, k, v, Tn, NH, NKV, window, docs, scale));
            CUDA_LAUNCH_CHECK();
            return;
        }
    }
    dim3 grid((Tn + BQ - 1) / BQ, NH, B);
    DISPATCH_D(D, attn_fwd_kernel<T, DD><<<grid, NTHREADS, 0, st>>>(out, lse, q, k, v, Tn, NH, NKV, window, docs, scale));
    CUDA_LAUNCH_CHECK();
}

template <typename T>
void attention_backward_cuda(T *dq, T *dk, T *dv, float *Di, void *ds, size_t ds_bytes, const T *dout, const T *q,
                             const T *k, const T *v, const T *out, const float *lse, int B, int Tn, int NH, int NKV,
                             int D, int window, const int32_t *docs, cudaStream_t st) {
    float scale = 1.0f / sqrtf((float)D);
    size_t rows = (size_t)B * Tn * NH;
    attn_di_kernel<T><<<(unsigned)((rows + DI_ROWS - 1) / DI_ROWS), DI_ROWS * 32, 0, st>>>(Di, dout, out, B, Tn, NH, D);
    CUDA_LAUNCH_CHECK();
    if constexpr (sizeof(T) == 2) {
        if (use_wmma()) {
            check_aligned16(q, k, v, dout);
            check_aligned16(dq, dk, dv, out);
            check_aligned16(ds, ds, ds, ds);
            // kv-head groups a launch pair: as many as the dS scratch holds at this window
            const int nt = (Tn + WK - 1) / WK, group = NH / NKV;
            const size_t unit = (size_t)B * group * (size_t)cuda_attn_pair_base(nt, cuda_attn_reach(window)) * CUDA_ATTN_DS_TILE_BYTES;
            if (!ds || ds_bytes < unit)
                die("CUDA attention backward: dS scratch of %zu bytes, under one head group's %zu", ds_bytes, unit);
            const int gc = (int)min((size_t)NKV, ds_bytes / unit);
            for (int g0 = 0; g0 < NKV; g0 += gc) {
                const int ng = min(gc, NKV - g0);
                dim3 gkw(nt, ng, B), gqw((Tn + WQ - 1) / WQ, ng * group, B);
                DISPATCH_D(D, smem_limit(attn_dkdv_wmma<DD>, dkdv_smem<DD>());
                           attn_dkdv_wmma<DD><<<gkw, WTHREADS, dkdv_smem<DD>(), st>>>(dk, dv, (bf16 *)ds, Di, dout, q, k, v, lse, Tn, NH, NKV, window, docs, scale, g0));
                CUDA_LAUNCH_CHECK();
                DISPATCH_D(D, smem_limit(attn_dq_wmma<DD>, dq_smem<DD>());
                           attn_dq_wmma<DD><<<gqw, WTHREADS, dq_smem<DD>(), st>>>(dq, (const bf16 *)ds, k, Tn, NH, NKV, window, docs, g0 * group));
                CUDA_LAUNCH_CHECK();
            }
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
template void attention_backward_cuda<float>(float *, float *, float *, float *, void *, size_t, const float *, const float *,
                                             const float *, const float *, const float *, const float *, int, int, int,
                                             int, int, int, const int32_t *, cudaStream_t);
template void attention_backward_cuda<bf16>(bf16 *, bf16 *, bf16 *, float *, void *, size_t, const bf16 *, const bf16 *, const bf16 *,
                                            const bf16 *, const bf16 *, const float *, int, int, int, int, int, int,
                                            const int32_t *, cudaStream_t);

// The DType entry points (ops.cuh) over the templates.
void attention_forward_cuda_dt(cudaStream_t st, void *out, float *lse, const void *q, const void *k, const void *v,
                               DType t, int B, int Tn, int NH, int NKV, int D, int window, const int32_t *docs) {
    DT_DISPATCH(t, TT,
                attention_forward_cuda<TT>((TT *)out, lse, (const TT *)q, (const TT *)k, (const TT *)v, B, Tn, NH, NKV,
                                           D, window, docs, st));
}

void attention_backward_cuda_dt(cudaStream_t st, void *dq, void *dk, void *dv, float *Di, void *ds, const void *dout,
                                const void *q, const void *k, const void *v, const void *out, const float *lse, DType t,
                                int B, int Tn, int NH, int NKV, int D, int window, const int32_t *docs) {
    const size_t ds_bytes = t == DT_BF16 ? cuda_attn_ds_bytes(B, Tn, NH, NKV) : 0;
    DT_DISPATCH(t, TT,
                attention_backward_cuda<TT>((TT *)dq, (TT *)dk, (TT *)dv, Di, ds, ds_bytes, (const TT *)dout, (const TT *)q,
                                            (const TT *)k, (const TT *)v, (const TT *)out, lse, B, Tn, NH, NKV, D,
                                            window, docs, st));
}

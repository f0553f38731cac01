// attention_at.cu: the context-parallel attention ops (ops.h attention_forward_at /
// attention_backward_at, kernels.h's contract): one chunk of queries at global positions
// p0..p0+T-1 of one sequence against its all-gathered keys 0..p0+T-1, with row strides
// (a head group's columns), causal, sliding window and the document mask (doc_start
// indexed by global position). Plain SIMT kernels, one thread per output row: no shared
// memory, no shuffles, no atomics, so every sum has one owner and a fixed order
// (deterministic) -- correctness first; the context-parallel path is the only user and
// the flash kernels of attention.cu keep the C = 1 path. All arithmetic is fp32 (bf16 in
// and out in bf16 mode); the probabilities are recomputed from q, k and lse.
#include <math.h>

#include "kernels/cuda/ops.cuh"

#define AT_THREADS 128

// The first key query i sees: the window's start, raised to its document's start
// (attention.c's first_key).
__device__ __forceinline__ int at_first_key(int i, int wlen, const int32_t *ds) {
    int lo = i - wlen + 1 > 0 ? i - wlen + 1 : 0;
    if (ds && ds[i] > lo) lo = ds[i];
    return lo;
}

template <typename T, int D> __device__ __forceinline__ float at_dot(const T *a, const T *b) {
    float s = 0.0f;
#pragma unroll
    for (int d = 0; d < D; d++) s += tof(a[d]) * tof(b[d]);
    return s;
}

// One thread per (query row r, head h): the row max, then the sum of exp and P V in key order.
template <typename T, int D>
__global__ void at_fwd_kernel(T *out, float *lse, const T *q, const T *k, const T *v, int Tn, int p0, int NH, int NKV,
                              int ldq, int ldk, int wlen, const int32_t *ds, float scale) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= Tn * NH) return;
    const int h = idx / Tn, r = idx % Tn, i = p0 + r, g = h / (NH / NKV);
    const T *qi = q + (size_t)r * ldq + (size_t)h * D;
    const int lo = at_first_key(i, wlen, ds);
    float mx = -INFINITY;
    for (int j = lo; j <= i; j++) mx = fmaxf(mx, scale * at_dot<T, D>(qi, k + (size_t)j * ldk + (size_t)g * D));
    float acc[D], sum = 0.0f;
#pragma unroll
    for (int d = 0; d < D; d++) acc[d] = 0.0f;
    for (int j = lo; j <= i; j++) {
        const size_t ko = (size_t)j * ldk + (size_t)g * D;
        const float p = expf(scale * at_dot<T, D>(qi, k + ko) - mx);
        sum += p;
#pragma unroll
        for (int d = 0; d < D; d++) acc[d] += p * tof(v[ko + d]);
    }
    const float inv = 1.0f / sum;
    T *o = out + (size_t)r * ldq + (size_t)h * D;
#pragma unroll
    for (int d = 0; d < D; d++) o[d] = fromf<T>(acc[d] * inv);
    lse[(size_t)h * Tn + r] = mx + logf(sum);
}

// dQ and Di per (query row, head): Di = rowsum(P * dP) from the same P and dP (as the CPU
// takes it: a row that sees one key gets dS = 0 exactly), then dQ = sum_j dS_ij k_j.
template <typename T, int D>
__global__ void at_dq_kernel(T *dq, float *Di, const T *dout, const T *q, const T *k, const T *v, const float *lse,
                             int Tn, int p0, int NH, int NKV, int ldq, int ldk, int wlen, const int32_t *ds, float scale) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= Tn * NH) return;
    const int h = idx / Tn, r = idx % Tn, i = p0 + r, g = h / (NH / NKV);
    const size_t qo = (size_t)r * ldq + (size_t)h * D;
    const float l = lse[(size_t)h * Tn + r];
    const int lo = at_first_key(i, wlen, ds);
    float di = 0.0f;
    for (int j = lo; j <= i; j++) {
        const size_t ko = (size_t)j * ldk + (size_t)g * D;
        di += expf(scale * at_dot<T, D>(q + qo, k + ko) - l) * at_dot<T, D>(dout + qo, v + ko);
    }
    float acc[D];
#pragma unroll
    for (int d = 0; d < D; d++) acc[d] = 0.0f;
    for (int j = lo; j <= i; j++) {
        const size_t ko = (size_t)j * ldk + (size_t)g * D;
        const float p = expf(scale * at_dot<T, D>(q + qo, k + ko) - l);
        const float dsij = p * (at_dot<T, D>(dout + qo, v + ko) - di) * scale;
#pragma unroll
        for (int d = 0; d < D; d++) acc[d] += dsij * tof(k[ko + d]);
    }
#pragma unroll
    for (int d = 0; d < D; d++) dq[qo + d] = fromf<T>(acc[d]);
    Di[(size_t)h * Tn + r] = di;
}

// dK, dV per (key j, kv head g), ADDED to what is there: the group's query heads in order,
// each over the chunk's queries that see key j in order (first_key grows with i, so the
// first query past the window or into a later document ends the walk).
template <typename T, int D>
__global__ void at_dkv_kernel(T *dk, T *dv, const float *Di, const T *dout, const T *q, const T *k, const T *v,
                              const float *lse, int Tn, int p0, int NH, int NKV, int ldq, int ldk, int wlen,
                              const int32_t *ds, float scale) {
    const int Tk = p0 + Tn, idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= Tk * NKV) return;
    const int g = idx / Tk, j = idx % Tk, group = NH / NKV;
    const size_t ko = (size_t)j * ldk + (size_t)g * D;
    float ak[D], av[D];
#pragma unroll
    for (int d = 0; d < D; d++) ak[d] = av[d] = 0.0f;
    for (int h = g * group; h < (g + 1) * group; h++)
        for (int i = j > p0 ? j : p0; i < Tk && at_first_key(i, wlen, ds) <= j; i++) {
            const int r = i - p0;
            const size_t qo = (size_t)r * ldq + (size_t)h * D;
            const float p = expf(scale * at_dot<T, D>(q + qo, k + ko) - lse[(size_t)h * Tn + r]);
            const float dsij = p * (at_dot<T, D>(dout + qo, v + ko) - Di[(size_t)h * Tn + r]) * scale;
#pragma unroll
            for (int d = 0; d < D; d++) {
                ak[d] += dsij * tof(q[qo + d]);
                av[d] += p * tof(dout[qo + d]);
            }
        }
#pragma unroll
    for (int d = 0; d < D; d++) {
        dk[ko + d] = fromf<T>(tof(dk[ko + d]) + ak[d]);
        dv[ko + d] = fromf<T>(tof(dv[ko + d]) + av[d]);
    }
}

#define AT_DISPATCH_D(D, ...)                               \
    switch (D) {                                            \
    case 16: { constexpr int DD = 16; __VA_ARGS__; } break; \
    case 32: { constexpr int DD = 32; __VA_ARGS__; } break; \
    case 64: { constexpr int DD = 64; __VA_ARGS__; } break; \
    case 128: { constexpr int DD = 128; __VA_ARGS__; } break; \
    default: die("cuda backend: attention_forward_at: head_dim %d not supported (16, 32, 64, 128)", D); \
    }

static int at_blocks(long long n) { return (int)((n + AT_THREADS - 1) / AT_THREADS); }

void attention_forward_at_cuda_dt(cudaStream_t st, void *out, float *lse, const void *q, const void *k, const void *v,
                                  DType t, int Tn, int p0, int NH, int NKV, int D, int ldq, int ldk, int window,
                                  const int32_t *ds) {
    const int Tk = p0 + Tn, wlen = window < Tk ? window : Tk;
    const float scale = 1.0f / sqrtf((float)D);
    DT_DISPATCH(t, TT, AT_DISPATCH_D(D, at_fwd_kernel<TT, DD><<<at_blocks((long long)Tn * NH), AT_THREADS, 0, st>>>(
                                            (TT *)out, lse, (const TT *)q, (const TT *)k, (const TT *)v, Tn, p0, NH,
                                            NKV, ldq, ldk, wlen, ds, scale)));
    CUDA_CHECK(cudaGetLastError());
}

void attention_backward_at_cuda_dt(cudaStream_t st, void *dq, void *dk, void *dv, float *Di, const void *dout,
                                   const void *q, const void *k, const void *v, const float *lse, DType t, int Tn,
                                   int p0, int NH, int NKV, int D, int ldq, int ldk, int window, const int32_t *ds) {
    const int Tk = p0 + Tn, wlen = window < Tk ? window : Tk;
    const float scale = 1.0f / sqrtf((float)D);
    DT_DISPATCH(t, TT, AT_DISPATCH_D(D, {
        at_dq_kernel<TT, DD><<<at_blocks((long long)Tn * NH), AT_THREADS, 0, st>>>(
            (TT *)dq, Di, (const TT *)dout, (const TT *)q, (const TT *)k, (const TT *)v, lse, Tn, p0, NH, NKV, ldq,
            ldk, wlen, ds, scale);
        at_dkv_kernel<TT, DD><<<at_blocks((long long)Tk * NKV), AT_THREADS, 0, st>>>(
            (TT *)dk, (TT *)dv, Di, (const TT *)dout, (const TT *)q, (const TT *)k, (const TT *)v, lse, Tn, p0, NH,
            NKV, ldq, ldk, wlen, ds, scale);
    }));
    CUDA_CHECK(cudaGetLastError());
}

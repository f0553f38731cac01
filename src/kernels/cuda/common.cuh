// common.cuh: shared helpers of the CUDA kernels: error checks, bf16/fp32 conversion,
// deterministic block reductions (fixed tree: warp shuffles, then warps in index order).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "util/common.h"
}

// A failed library call (CUDA runtime, cuBLASLt, NCCL) dies (util/common.h: the one exit
// path, with the hook the fuzzers use) with the library's message, where it happened and
// the call's text: CUDA_CHECK here, LT_CHECK in ops.cuh, NCCL_CHECK in nccl.cu.
#define OLMO_LIB_CHECK(lib, type, ok, errstr, x)                                     \
    do {                                                                              \
        type r_ = (x);                                                                \
        if (r_ != (ok)) die("%s: %s (%s:%d: %s)", lib, errstr(r_), __FILE__, __LINE__, #x); \
    } while (0)
#define CUDA_CHECK(x) OLMO_LIB_CHECK("CUDA", cudaError_t, cudaSuccess, cudaGetErrorString, x)
#define CUDA_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float tof(float x) { return x; }
__device__ __forceinline__ float tof(bf16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T fromf(float x);
template <> __device__ __forceinline__ float fromf<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 fromf<bf16>(float x) { return __float2bfloat16(x); }

// Sum over the block (blockDim.x a multiple of 32, <= 1024) in a fixed order; every
// thread gets the result. shared: >= 32 entries.
template <typename V> __device__ V block_sum(V x, V *shared) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    int w = threadIdx.x / 32, nw = blockDim.x / 32;
    __syncthreads();
    if ((threadIdx.x & 31) == 0) shared[w] = x;
    __syncthreads();
    V t = 0;
    for (int i = 0; i < nw; i++) t += shared[i];
    return t;
}

__device__ __forceinline__ float block_max(float x, float *shared) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    int w = threadIdx.x / 32, nw = blockDim.x / 32;
    __syncthreads();
    if ((threadIdx.x & 31) == 0) shared[w] = x;
    __syncthreads();
    float t = -INFINITY;
    for (int i = 0; i < nw; i++) t = fmaxf(t, shared[i]);
    return t;
}

// Attention entry points (attention.cu), T = float or bf16.
// q (B,T,NH,D), k, v (B,T,NKV,D), out (B,T,NH,D), lse (B,NH,T). window <= T. docs: device
// doc_start (B,T) (query t sees keys max(docs[b,t], t-window+1) .. t), or NULL = no document mask.
template <typename T>
void attention_forward_cuda(T *out, float *lse, const T *q, const T *k, const T *v, int B, int Tn, int NH, int NKV,
                            int D, int window, const int32_t *docs, cudaStream_t st);
// Di (B,NH,T) scratch; ds: ds_bytes >= cuda_attn_ds_bytes(B, T, NH, NKV) of scratch for the
// bf16 tensor-core path (kernels/cuda/sizes.h; unused otherwise). dq, dk, dv overwritten.
template <typename T>
void attention_backward_cuda(T *dq, T *dk, T *dv, float *Di, void *ds, size_t ds_bytes, const T *dout, const T *q,
                             const T *k, const T *v, const T *out, const float *lse, int B, int Tn, int NH, int NKV,
                             int D, int window, const int32_t *docs, cudaStream_t st);
int attention_head_dim_supported(int D);

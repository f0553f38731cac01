// convert.cu: layout ops of the CUDA backend: fp32 -> compute type (the bf16 weight copy,
// the bf16 GEMM operand of a residual row) and column slices of rows (v out of the fused
// QKV projection, dv back into dqkv).
#include "kernels/cuda/ops.cuh"

template <typename T> __global__ void cast_kernel(T *dst, const float *src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = fromf<T>(src[i]);
}

// dst[n, dcol + i] = src[n, scol + i], i < width
template <typename T>
__global__ void copy_cols_kernel(T *dst, const T *src, int N, int width, int dstride, int dcol, int sstride, int scol) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * width) return;
    size_t n = idx / width, i = idx % width;
    dst[n * dstride + dcol + i] = src[n * sstride + scol + i];
}

template <typename T> __global__ void gather_rows_kernel(T *dst, const T *src, const int32_t *idx, int n, int C) {
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)n * C) return;
    size_t i = e / C, c = e % C;
    dst[e] = src[(size_t)idx[i] * C + c];
}

void gather_rows_cuda(cudaStream_t st, void *dst, const void *src, DType t, const int32_t *idx, int n, int C) {
    if ((size_t)n * C == 0) return;
    DT_DISPATCH(t, TT,
                gather_rows_kernel<TT><<<nblk((size_t)n * C), 256, 0, st>>>((TT *)dst, (const TT *)src, idx, n, C));
    CUDA_LAUNCH_CHECK();
}

void cast_cuda(cudaStream_t st, void *dst, DType t, const float *src, size_t n) {
    if (n == 0) return;
    DT_DISPATCH(t, TT, cast_kernel<TT><<<nblk(n), 256, 0, st>>>((TT *)dst, src, n));
    CUDA_LAUNCH_CHECK();
}

void copy_cols_cuda(cudaStream_t st, void *dst, const void *src, DType t, int N, int width, int dstride, int dcol,
                    int sstride, int scol) {
    if ((size_t)N * width == 0) return;
    DT_DISPATCH(t, TT,
                copy_cols_kernel<TT><<<nblk((size_t)N * width), 256, 0, st>>>((TT *)dst, (const TT *)src, N, width,
                                                                               dstride, dcol, sstride, scol));
    CUDA_LAUNCH_CHECK();
}

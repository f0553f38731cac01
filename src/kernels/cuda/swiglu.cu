// swiglu.cu: SwiGLU on the CUDA backend, out = silu(gate) * up over gu = [gate | up] per
// row, and its backward; fp32 arithmetic on fp32 or bf16 buffers.
#include "kernels/cuda/ops.cuh"

template <typename T> __global__ void swiglu_fwd_kernel(T *out, const T *gu, int N, int H) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * H) return;
    size_t n = idx / H, j = idx % H;
    float g = tof(gu[n * 2 * H + j]), u = tof(gu[n * 2 * H + H + j]);
    float sig = 1.0f / (1.0f + expf(-g));
    out[idx] = fromf<T>(g * sig * u);
}

template <typename T> __global__ void swiglu_bwd_kernel(T *dgu, const T *dout, const T *gu, int N, int H) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * H) return;
    size_t n = idx / H, j = idx % H;
    float g = tof(gu[n * 2 * H + j]), u = tof(gu[n * 2 * H + H + j]), dy = tof(dout[idx]);
    float sig = 1.0f / (1.0f + expf(-g));
    float silu = g * sig;
    dgu[n * 2 * H + H + j] = fromf<T>(dy * silu);
    dgu[n * 2 * H + j] = fromf<T>(dy * u * sig * (1.0f + g * (1.0f - sig)));
}

void swiglu_forward_cuda(cudaStream_t st, void *out, const void *gu, DType t, int N, int H) {
    if ((size_t)N * H == 0) return;
    DT_DISPATCH(t, TT, swiglu_fwd_kernel<TT><<<nblk((size_t)N * H), 256, 0, st>>>((TT *)out, (const TT *)gu, N, H));
    CUDA_LAUNCH_CHECK();
}

void swiglu_backward_cuda(cudaStream_t st, void *dgu, const void *dout, const void *gu, DType t, int N, int H) {
    if ((size_t)N * H == 0) return;
    DT_DISPATCH(t, TT,
                swiglu_bwd_kernel<TT><<<nblk((size_t)N * H), 256, 0, st>>>((TT *)dgu, (const TT *)dout,
                                                                           (const TT *)gu, N, H));
    CUDA_LAUNCH_CHECK();
}

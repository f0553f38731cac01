// rope.cu: RoPE (rotate-half) in place on the CUDA backend, over tables the host computed
// with the CPU's rope_tables (plain or YaRN), so both backends rotate by the same floats.
#include "kernels/cuda/norm_rope.cuh"
#include "kernels/cuda/ops.cuh"

// RoPE rotate-half in place on x (B*T rows of H heads of D, row stride H*D); sign -1 = backward.
template <typename T>
__global__ void rope_kernel(T *x, const float *cos_t, const float *sin_t, int BT, int Tn, int H, int D, float sign) {
    const int half = D / 2;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;   // over (row, h, j)
    if (idx >= (size_t)BT * H * half) return;
    int j = (int)(idx % half);
    size_t rh = idx / half;
    size_t row = rh / H;
    int t = (int)(row % Tn);
    T *v = x + rh * D;
    float c = cos_t[(size_t)t * half + j], sn = sign * sin_t[(size_t)t * half + j];
    float x1 = tof(v[j]), x2 = tof(v[j + half]);
    float o1, o2;
    rope_pair(x1, x2, c, sn, &o1, &o2);
    v[j] = fromf<T>(o1);
    v[j + half] = fromf<T>(o2);
}

void rope_cuda(cudaStream_t st, void *x, DType t, const float *cos_t, const float *sin_t, int B, int T, int H, int D,
               float sign) {
    size_t n = (size_t)B * T * H * (D / 2);
    if (n == 0) return;
    DT_DISPATCH(t, TT, rope_kernel<TT><<<nblk(n), 256, 0, st>>>((TT *)x, cos_t, sin_t, B * T, T, H, D, sign));
    CUDA_LAUNCH_CHECK();
}

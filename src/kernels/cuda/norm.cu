// norm.cu: RMSNorm on the CUDA backend, forward (optionally fused with the residual add
// and a second bf16 copy of the output) and backward. Row statistics in double as the CPU
// kernel (kernels/cpu/norm.c); the weight gradient from NORM_PARTS fixed row chunks whose
// double partials are summed in chunk order: deterministic, no atomics. The backward is one
// pass (norm_rope.cuh's rmsnorm_bwd_parts_kernel: dx and the chunk partials, one block a
// chunk) and the chunk-order sum; NORM_PARTS = 2 x 132 so that pass fills an H100's SMs.
#include "kernels/cuda/norm_rope.cuh"
#include "kernels/cuda/ops.cuh"

// out = w * (x * rstd) (+ res); one block per row. Statistics in double as the CPU kernel.
// Types: Ti input, To output and residual (fp32 for the residual stream), Tc an optional
// second copy of the output (the bf16 GEMM operand of an fp32 residual row).
template <typename Ti, typename To, typename Tc>
__global__ void rmsnorm_fwd_kernel(To *out, Tc *copy, float *rstd, const Ti *inp, const float *w, const To *res,
                                   int C, int in_stride, int out_stride, float eps) {
    __shared__ double sh[32];
    const int n = blockIdx.x;
    const Ti *x = inp + (size_t)n * in_stride;
    double ss = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        double xv = tof(x[c]);
        ss += xv * xv;
    }
    ss = block_sum(ss, sh);
    float r = (float)(1.0 / sqrt(ss / C + eps));
    if (threadIdx.x == 0) rstd[n] = r;
    To *o = out + (size_t)n * out_stride;
    Tc *cp = copy ? copy + (size_t)n * out_stride : nullptr;
    const To *rr = res ? res + (size_t)n * out_stride : nullptr;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float y = norm_elem(tof(x[c]), w[c], r);
        float yo = rr ? tof(rr[c]) + y : y;
        o[c] = fromf<To>(yo);
        if (cp) cp[c] = fromf<Tc>(yo);
    }
}

// dx = r * (w*dy - xhat * mean(w*dy*xhat)); one block per row. Td: dy (fp32 when it is the
// residual gradient), Ti: x, To: dx (fp32 when dx is the residual gradient).
template <typename Td, typename Ti, typename To>
__global__ void rmsnorm_bwd_kernel(To *dinp, const Td *dout, const Ti *inp, const float *w, const float *rstd, int C,
                                   int dout_stride, int in_stride, int din_stride) {
    __shared__ double sh[32];
    const int n = blockIdx.x;
    const Ti *x = inp + (size_t)n * in_stride;
    const Td *dy = dout + (size_t)n * dout_stride;
    const float r = rstd[n];
    double dot = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dot += (double)(w[c] * tof(dy[c])) * (tof(x[c]) * r);
    dot = block_sum(dot, sh);
    const float m = (float)(dot / C);
    To *dx = dinp + (size_t)n * din_stride;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dx[c] = fromf<To>(norm_dx_elem(tof(dy[c]), tof(x[c]), w[c], r, m));
}

// partial[p][c] = sum over rows of chunk p of dy * xhat (double).
template <typename Td, typename Ti>
__global__ void norm_dw_partial_kernel(double *partial, const Td *dout, const Ti *inp, const float *rstd, int N, int C,
                                       int dout_stride, int in_stride) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, p = blockIdx.y;
    if (c >= C) return;
    int n0 = (int)((long)N * p / NORM_PARTS), n1 = (int)((long)N * (p + 1) / NORM_PARTS);
    double acc = 0.0;
    for (int n = n0; n < n1; n++)
        acc += (double)tof(dout[(size_t)n * dout_stride + c]) * (tof(inp[(size_t)n * in_stride + c]) * rstd[n]);
    partial[(size_t)p * C + c] = acc;
}

// dw (=, or += when accumulating micro-batches) the chunk partials summed in chunk order.
__global__ void norm_dw_final_kernel(float *dw, const double *partial, int C, int accumulate) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double acc = 0.0;
    for (int p = 0; p < NORM_PARTS; p++) acc += partial[(size_t)p * C + c];
    dw[c] = accumulate ? dw[c] + (float)acc : (float)acc;
}

void rmsnorm_forward_cuda(cudaStream_t st, void *out, DType out_t, bf16 *copy, float *rstd, const void *inp,
                          DType in_t, const float *w, const float *resid, int N, int C, int in_stride, int out_stride,
                          float eps) {
    if (resid && out_t != DT_F32) {
        die("CUDA rmsnorm_forward: a residual needs an fp32 output");
    }
    if (N == 0) return;
    DT_DISPATCH(in_t, TI, DT_DISPATCH(out_t, TO,
        rmsnorm_fwd_kernel<TI, TO, bf16><<<N, 256, 0, st>>>((TO *)out, copy, rstd, (const TI *)inp, w,
                                                             (const TO *)(const void *)resid, C, in_stride,
                                                             out_stride, eps)));
    CUDA_LAUNCH_CHECK();
}

void norm_dw_final_cuda(cudaStream_t st, float *dw, const double *part, int C, int acc_dw) {
    norm_dw_final_kernel<<<nblk(C), 256, 0, st>>>(dw, part, C, acc_dw);
    CUDA_LAUNCH_CHECK();
}

void rmsnorm_backward_cuda(cudaStream_t st, void *dinp, DType din_t, float *dw, int acc_dw, const void *dout,
                           DType dout_t, const void *inp, DType in_t, const float *w, const float *rstd, int N, int C,
                           int dout_stride, int in_stride, int din_stride, double *part) {
    DT_DISPATCH(dout_t, TD, DT_DISPATCH(in_t, TI, {
        if (norm_parts_fit(C)) {   // one pass: dx and the chunk partials (bitwise the two kernels below)
            DT_DISPATCH(din_t, TO,
                norm_bwd_parts_launch(st, (TO *)dinp, part, DyPlain<TD>{(const TD *)dout, dout_stride},
                                      (const TI *)inp, w, rstd, N, C, in_stride, din_stride));
        } else {   // rows too wide for the partials in shared memory: dx per row, then the partials
            if (N > 0) {
                DT_DISPATCH(din_t, TO,
                    rmsnorm_bwd_kernel<TD, TI, TO><<<N, 256, 0, st>>>((TO *)dinp, (const TD *)dout, (const TI *)inp,
                                                                       w, rstd, C, dout_stride, in_stride, din_stride));
                CUDA_LAUNCH_CHECK();
            }
            dim3 g(nblk(C), NORM_PARTS);
            norm_dw_partial_kernel<TD, TI><<<g, 256, 0, st>>>(part, (const TD *)dout, (const TI *)inp, rstd, N, C,
                                                              dout_stride, in_stride);
            CUDA_LAUNCH_CHECK();
        }
    }));
    norm_dw_final_cuda(st, dw, part, C, acc_dw);
}

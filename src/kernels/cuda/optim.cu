// optim.cu: the optimizer's kernels on the CUDA backend over flat fp32 ranges: the chunked
// sum of squares of the gradient norm (kernels/cpu/optim.c's chunks, partials in double),
// scaling for the clip, accumulation, and AdamW element for element as the CPU computes it.
#include "kernels/cuda/ops.cuh"

__global__ void scale_kernel(float *x, float s, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}

__global__ void add_kernel(float *acc, const float *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) acc[i] += x[i];
}

// One block per SUMSQ_CHUNK elements: partial[b] = sum x^2 in double, fixed tree.
__global__ void sumsq_kernel(double *partial, const float *x, size_t n) {
    __shared__ double sh[32];
    size_t lo = (size_t)blockIdx.x * SUMSQ_CHUNK, hi = lo + SUMSQ_CHUNK < n ? lo + SUMSQ_CHUNK : n;
    double s = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s += (double)x[i] * x[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// adamw_update (kernels/cpu/optim.c) for element i with gradient gi; _rn intrinsics keep
// the compiler from contracting into FMAs, so fp32 results match the CPU's (gcc -std=c11:
// no contraction).
template <typename T>
__device__ __forceinline__ void adamw_elem(float *p, float *m, float *v, T *wcopy, size_t i, float gi, float beta1,
                                           float beta2, float eps, float decay, float step_size, float bc2_sqrt) {
    float pi = __fmul_rn(p[i], decay);
    float mi = __fadd_rn(__fmul_rn(m[i], beta1), __fmul_rn(gi, __fsub_rn(1.0f, beta1)));
    float vi = __fadd_rn(__fmul_rn(v[i], beta2), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, beta2), gi), gi));
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
    pi = __fsub_rn(pi, __fmul_rn(step_size, __fdiv_rn(mi, denom)));
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if (wcopy) wcopy[i] = fromf<T>(pi);
}

template <typename T>
__global__ void adamw_kernel(float *p, float *m, float *v, const float *g, T *wcopy, size_t n, float beta1,
                             float beta2, float eps, float decay, float step_size, float bc2_sqrt) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) adamw_elem(p, m, v, wcopy, i, g[i], beta1, beta2, eps, decay, step_size, bc2_sqrt);
}

// adamw_kernel over many spans in one launch: block b updates 256 elements of the span
// whose block range [blk0, blk0 + ceil(n / 256)) holds b (binary search over the sorted
// blk0); the gradient times clip first when use_clip (scale_kernel's one rounding), the
// decay formed as the host forms it for adamw_kernel (1 - lr wd, two roundings).
template <typename T>
__global__ void adamw_spans_kernel(float *p, float *m, float *v, const float *g, T *wcopy, const AdamWSpanDev *spans,
                                   int nspans, float clip, int use_clip, float lr, float beta1, float beta2, float eps,
                                   float step_size, float bc2_sqrt) {
    const unsigned long long b = blockIdx.x;
    int lo = 0, hi = nspans - 1;
    while (lo < hi) {   // the last span with blk0 <= b
        const int mid = (lo + hi + 1) / 2;
        if (spans[mid].blk0 <= b) lo = mid;
        else hi = mid - 1;
    }
    const AdamWSpanDev s = spans[lo];
    const size_t e = (size_t)(b - s.blk0) * blockDim.x + threadIdx.x;
    if (e >= s.n) return;
    const size_t i = s.at + e;
    const float gi = use_clip ? __fmul_rn(g[i], clip) : g[i];
    const float decay = __fsub_rn(1.0f, __fmul_rn(lr, s.wd));
    adamw_elem(p, m, v, wcopy, i, gi, beta1, beta2, eps, decay, step_size, bc2_sqrt);
}

__global__ void poison_kernel(float *x) { x[0] = NAN; }

void adamw_spans_cuda(cudaStream_t st, float *p, float *m, float *v, const float *g, void *wcopy, DType wt,
                      const AdamWSpanDev *spans, int nspans, unsigned long long nblocks, float clip, int use_clip,
                      float lr, float beta1, float beta2, float eps, float step_size, float bc2_sqrt) {
    if (nblocks == 0) return;
    DT_DISPATCH(wt, TT,
                adamw_spans_kernel<TT><<<(unsigned)nblocks, 256, 0, st>>>(p, m, v, g, (TT *)wcopy, spans, nspans, clip,
                                                                          use_clip, lr, beta1, beta2, eps, step_size,
                                                                          bc2_sqrt));
    CUDA_LAUNCH_CHECK();
}

void scale_cuda(cudaStream_t st, float *x, float s, size_t n) {
    if (n == 0) return;
    scale_kernel<<<nblk(n), 256, 0, st>>>(x, s, n);
    CUDA_LAUNCH_CHECK();
}

void add_cuda(cudaStream_t st, float *acc, const float *x, size_t n) {
    if (n == 0) return;
    add_kernel<<<nblk(n), 256, 0, st>>>(acc, x, n);
    CUDA_LAUNCH_CHECK();
}

void sumsq_chunks_cuda(cudaStream_t st, double *partial, const float *x, size_t n) {
    size_t nch = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    if (nch == 0) return;
    sumsq_kernel<<<(unsigned)nch, 256, 0, st>>>(partial, x, n);
    CUDA_LAUNCH_CHECK();
}

void adamw_cuda(cudaStream_t st, float *p, float *m, float *v, const float *g, void *wcopy, DType wt, size_t n,
                float beta1, float beta2, float eps, float decay, float step_size, float bc2_sqrt) {
    if (n == 0) return;
    DT_DISPATCH(wt, TT,
                adamw_kernel<TT><<<nblk(n), 256, 0, st>>>(p, m, v, g, (TT *)wcopy, n, beta1, beta2, eps, decay,
                                                          step_size, bc2_sqrt));
    CUDA_LAUNCH_CHECK();
}

void poison_cuda(cudaStream_t st, float *x) {
    poison_kernel<<<1, 1, 0, st>>>(x);
    CUDA_LAUNCH_CHECK();
}

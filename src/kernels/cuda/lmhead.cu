// lmhead.cu: the loss rows of the LM head on the CUDA backend. The logits of a chunk of
// tokens come from a cuBLASLt GEMM (matmul.cu) in fp32; one block per row forms max,
// log-sum-exp (double), CE, z-loss and, for the backward, the logits' gradient.
#include "kernels/cuda/ops.cuh"

// One block per row of the logits chunk: lse, CE, z; with grad, dlogits (type T) =
// inv_count * (softmax * (1 + 2 z lse) - onehot); masked rows get zeros, and row_z -1 (a
// valid row's lse^2 is >= 0): the host tells masked rows from the rows it downloads anyway
// and needs no download of the targets.
template <typename T>
__global__ void lm_row_kernel(T *dlogits, const float *logits, const int32_t *targets, int V, float z_coef,
                              float inv_count, int want_grad, double *row_ce, double *row_z, float *tok_ce) {
    __shared__ float shf[32];
    __shared__ double shd[32];
    const int r = blockIdx.x;
    const float *lg = logits + (size_t)r * V;
    const int32_t t = targets[r];
    float mx = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, lg[v]);
    mx = block_max(mx, shf);
    double sum = 0.0;
    for (int v = threadIdx.x; v < V; v += blockDim.x) sum += (double)expf(lg[v] - mx);
    sum = block_sum(sum, shd);
    const double lse = mx + log(sum);
    if (threadIdx.x == 0) {
        row_ce[r] = t >= 0 ? lse - lg[t] : 0.0;
        row_z[r] = t >= 0 ? lse * lse : -1.0;
        if (tok_ce) tok_ce[r] = t >= 0 ? (float)(lse - lg[t]) : 0.0f;
    }
    if (!want_grad) return;
    T *dl = dlogits + (size_t)r * V;
    if (t < 0) {
        for (int v = threadIdx.x; v < V; v += blockDim.x) dl[v] = fromf<T>(0.0f);
        return;
    }
    const float a = (float)((1.0 + 2.0 * z_coef * lse) * inv_count / sum);
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float d = expf(lg[v] - mx) * a;
        if (v == t) d -= inv_count;
        dl[v] = fromf<T>(d);
    }
}

void lmhead_rows_cuda(cudaStream_t st, void *dlogits, DType t, const float *logits, const int32_t *targets, int nrows,
                      int V, float z_coef, float inv_count, int want_grad, double *row_ce, double *row_z,
                      float *tok_ce) {
    if (nrows == 0) return;
    DT_DISPATCH(t, TT,
                lm_row_kernel<TT><<<nrows, 512, 0, st>>>((TT *)dlogits, logits, targets, V, z_coef, inv_count,
                                                         want_grad, row_ce, row_z, tok_ce));
    CUDA_LAUNCH_CHECK();
}

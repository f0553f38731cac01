// embedding.cu: the token embedding on the CUDA backend. Forward: one thread per output
// element reads its row of E (fp32 or bf16) into the fp32 residual stream. Backward without
// atomics: the positions are grouped by token on the host, and one thread per (distinct
// token, column) sums its positions in order and adds the sum to dE once.
#include <algorithm>
#include <vector>

#include "kernels/cuda/ops.cuh"

// out (N, C) = rows of E; the residual stream is fp32 whatever the weights' type.
template <typename TE>
__global__ void embedding_fwd_kernel(float *out, const int32_t *tok, const TE *E, int N, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * C) return;
    size_t n = idx / C, c = idx % C;
    out[idx] = tof(E[(size_t)tok[n] * C + c]);
}

// dE (V, C) += this micro-batch's rows of the fp32 residual gradient. Positions are grouped
// by token on the host (rows[u], its positions pos[off[u] .. off[u+1]) in order): each
// distinct token's sum is formed on its own, from 0 in token order, and added to dE once.
// So in-place accumulation of micro-batches gives exactly g1 + g2, the sum the CPU's
// gradient tree and the host-MPI reduce form. One thread per (distinct token, column).
__global__ void embedding_bwd_kernel(float *dE, const float *dout, const int32_t *rows, const int32_t *off,
                                     const int32_t *pos, int C) {
    const int u = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float acc = 0.0f;
    for (int i = off[u]; i < off[u + 1]; i++) acc += dout[(size_t)pos[i] * C + c];
    dE[(size_t)rows[u] * C + c] += acc;
}

void embedding_forward_cuda(cudaStream_t st, float *out, const int32_t *tokens, const void *E, DType et, int N, int C) {
    if ((size_t)N * C == 0) return;
    DT_DISPATCH(et, TT, embedding_fwd_kernel<TT><<<nblk((size_t)N * C), 256, 0, st>>>(out, tokens, (const TT *)E, N, C));
    CUDA_LAUNCH_CHECK();
}

int embedding_group_tokens(const int32_t *tok, int N, int M, int32_t *host) {
    std::vector<int32_t> idx(N);
    for (int n = 0; n < N; n++) idx[n] = n;
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return tok[a] < tok[b]; });
    std::fill(host, host + 3 * (size_t)M + 1, 0);
    int32_t *rows = host, *offs = rows + M, *pos = offs + M + 1;
    int u = 0;
    for (int i = 0; i < N; i++) {
        if (i == 0 || tok[idx[i]] != tok[idx[i - 1]]) {
            rows[u] = tok[idx[i]];
            offs[u++] = i;
        }
        pos[i] = idx[i];
    }
    offs[u] = N;
    return u;
}

void embedding_backward_cuda(cudaStream_t st, float *dE, const float *dout, const int32_t *groups, int M, int U, int C) {
    if (U == 0 || C == 0) return;
    const int32_t *rows = groups, *off = groups + M, *pos = off + M + 1;
    embedding_bwd_kernel<<<dim3((unsigned)U, nblk(C, 128)), 128, 0, st>>>(dE, dout, rows, off, pos, C);
    CUDA_LAUNCH_CHECK();
}

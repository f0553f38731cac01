// ops_cuda.cu: the CUDA backend's Ops table (kernels/ops.h) over the launchers of ops.cuh:
// one stream, a cuBLASLt handle and workspace, and a scratch arena for what an op needs
// besides its arguments (norm weight-gradient partials, attention's Di and dS tiles, the LM
// head's logits chunk and loss rows, the embedding's token groups, the chunk partials of the
// norm). The scratch grows on demand and is kept, so a sequence of same-shaped calls allocates once.
#include <math.h>
#include <string.h>

#include <vector>

#include "kernels/cuda/sizes.h"
#include "kernels/cuda/ops.cuh"

#define LM_CHUNK CUDA_LM_CHUNK_MAX   // tokens per logits chunk

namespace {

struct Scratch {
    void *p = nullptr;
    size_t bytes = 0;
};

struct CudaOps {
    cudaStream_t st;
    CudaGemm g;
    Scratch s[OPS_CUDA_SLOTS];
    // adamw_spans' span table on the device, uploaded when it changes (the same every step)
    std::vector<AdamWSpanDev> spans_host;
    AdamWSpanDev *spans_dev = nullptr;
    size_t spans_cap = 0;
};

enum {
    S_NORM = OPS_CUDA_S_NORM, S_DI = OPS_CUDA_S_DI, S_LOGITS = OPS_CUDA_S_LOGITS, S_DLOGITS = OPS_CUDA_S_DLOGITS,
    S_ROWS = OPS_CUDA_S_ROWS, S_GROUPS = OPS_CUDA_S_GROUPS, S_PART = OPS_CUDA_S_PART, S_IDX = OPS_CUDA_S_IDX, S_DS = OPS_CUDA_S_DS
};

CudaOps *impl(OpsBackend *be) { return (CudaOps *)be->impl; }

// Scratch slot k with at least `bytes`, reallocated (after the stream drains) when smaller.
void *scratch(OpsBackend *be, int k, size_t bytes) {
    Scratch &s = impl(be)->s[k];
    if (s.bytes < bytes) {
        CUDA_CHECK(cudaStreamSynchronize(impl(be)->st));
        if (s.p) CUDA_CHECK(cudaFree(s.p));
        CUDA_CHECK(cudaMalloc(&s.p, bytes));
        s.bytes = bytes;
    }
    return s.p;
}

void *c_alloc(OpsBackend *be, size_t bytes) {
    (void)be;
    void *p = nullptr;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    return p;
}
void c_free(OpsBackend *be, void *p) {
    CUDA_CHECK(cudaStreamSynchronize(impl(be)->st));
    if (p) CUDA_CHECK(cudaFree(p));
}
void c_upload(OpsBackend *be, void *dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, impl(be)->st));
    CUDA_CHECK(cudaStreamSynchronize(impl(be)->st));   // the host buffer may be reused at once
}
void c_download(OpsBackend *be, void *dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, impl(be)->st));
    CUDA_CHECK(cudaStreamSynchronize(impl(be)->st));
}
void c_zero(OpsBackend *be, void *p, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, impl(be)->st));
}
void c_sync(OpsBackend *be) { CUDA_CHECK(cudaStreamSynchronize(impl(be)->st)); }
void c_destroy(OpsBackend *be) {
    CudaOps *c = impl(be);
    cudaStreamSynchronize(c->st);
    for (Scratch &s : c->s)
        if (s.p) cudaFree(s.p);
    cudaFree(c->spans_dev);
    cudaFree(c->g.workspace);
    cublasLtDestroy(c->g.lt);
    cudaStreamDestroy(c->st);
    delete c;
    delete be;
}

void c_cast(OpsBackend *be, void *dst, DType t, const float *src, size_t n) { cast_cuda(impl(be)->st, dst, t, src, n); }
void c_copy_cols(OpsBackend *be, void *dst, const void *src, DType t, int N, int width, int dstride, int dcol,
                 int sstride, int scol) {
    copy_cols_cuda(impl(be)->st, dst, src, t, N, width, dstride, dcol, sstride, scol);
}

void c_gather_rows(OpsBackend *be, void *dst, const void *src, DType t, const int32_t *idx_host, int n, int C) {
    int32_t *idx = (int32_t *)scratch(be, S_IDX, sizeof(int32_t) * (n > 0 ? n : 1));
    c_upload(be, idx, idx_host, sizeof(int32_t) * n);
    gather_rows_cuda(impl(be)->st, dst, src, t, idx, n, C);
}

void c_embedding_forward(OpsBackend *be, float *out, const int32_t *tokens, const void *E, DType et, int N, int C) {
    embedding_forward_cuda(impl(be)->st, out, tokens, E, et, N, C);
}
void c_embedding_backward(OpsBackend *be, float *dE, const float *dout, const int32_t *tokens_host, int N, int C) {
    std::vector<int32_t> h(3 * (size_t)N + 1);
    int U = embedding_group_tokens(tokens_host, N, N, h.data());
    int32_t *d = (int32_t *)scratch(be, S_GROUPS, h.size() * 4);
    c_upload(be, d, h.data(), h.size() * 4);
    embedding_backward_cuda(impl(be)->st, dE, dout, d, N, U, C);
}

void c_matmul_forward(OpsBackend *be, void *out, const void *inp, const void *W, DType t, int N, int C, int OC) {
    matmul_forward_cuda(&impl(be)->g, out, inp, W, t, N, C, OC);
}
void c_matmul_backward(OpsBackend *be, void *dinp, DType dinp_t, float *dW, const void *dout, const void *inp,
                       const void *W, DType t, int N, int C, int OC, int acc_dinp, int acc_dW) {
    matmul_backward_cuda(&impl(be)->g, dinp, dinp_t, dW, dout, inp, W, t, N, C, OC, acc_dinp, acc_dW);
}

void c_rmsnorm_forward(OpsBackend *be, void *out, DType out_t, void *copy, float *rstd, const void *inp, DType in_t,
                       const float *w, const float *resid, int N, int C, int in_stride, int out_stride, float eps) {
    rmsnorm_forward_cuda(impl(be)->st, out, out_t, (bf16 *)copy, rstd, inp, in_t, w, resid, N, C, in_stride,
                         out_stride, eps);
}
void c_rmsnorm_backward(OpsBackend *be, void *dinp, DType din_t, float *dw, int acc_dw, const void *dout, DType dout_t,
                        const void *inp, DType in_t, const float *w, const float *rstd, int N, int C, int dout_stride,
                        int in_stride, int din_stride) {
    double *part = (double *)scratch(be, S_NORM, sizeof(double) * NORM_PARTS * (size_t)C);
    rmsnorm_backward_cuda(impl(be)->st, dinp, din_t, dw, acc_dw, dout, dout_t, inp, in_t, w, rstd, N, C, dout_stride,
                          in_stride, din_stride, part);
}

void c_rope_forward(OpsBackend *be, void *x, DType t, const float *cos_t, const float *sin_t, int B, int T, int H,
                    int D) {
    rope_cuda(impl(be)->st, x, t, cos_t, sin_t, B, T, H, D, 1.0f);
}
void c_rope_backward(OpsBackend *be, void *dx, DType t, const float *cos_t, const float *sin_t, int B, int T, int H,
                     int D) {
    rope_cuda(impl(be)->st, dx, t, cos_t, sin_t, B, T, H, D, -1.0f);
}

// The fused QK-norm + RoPE + V split; forward and backward fall back to the unfused ops
// (bitwise the same) where a row would not fit their shared memory.
void c_qkv_split_forward(OpsBackend *be, void *q, void *k, void *v, float *q_rstd, float *k_rstd, const void *qkv,
                         DType t, const float *q_norm, const float *k_norm, const float *cos_t, const float *sin_t,
                         int B, int T, int NH, int NKV, int D, float eps) {
    if (qkv_split_fwd_smem(NH, NKV, D) > 48 * 1024) {   // rows too wide to stage: the unfused chain
        const int N = B * T, Q = NH * D, KV = NKV * D, ld = Q + 2 * KV;
        const size_t es = dtype_size(t);
        c_rmsnorm_forward(be, q, t, NULL, q_rstd, qkv, t, q_norm, NULL, N, Q, ld, Q, eps);
        c_rmsnorm_forward(be, k, t, NULL, k_rstd, (const char *)qkv + Q * es, t, k_norm, NULL, N, KV, ld, KV, eps);
        copy_cols_cuda(impl(be)->st, v, qkv, t, N, KV, KV, 0, ld, Q + KV);
        c_rope_forward(be, q, t, cos_t, sin_t, B, T, NH, D);
        c_rope_forward(be, k, t, cos_t, sin_t, B, T, NKV, D);
        return;
    }
    qkv_split_forward_cuda(impl(be)->st, q, k, v, q_rstd, k_rstd, qkv, t, q_norm, k_norm, cos_t, sin_t, B, T, NH, NKV,
                           D, eps);
}
void c_qkv_split_backward(OpsBackend *be, void *dqkv, float *dq_norm, float *dk_norm, int acc_dw, const void *dq,
                          const void *dk, const void *dv, const void *qkv, DType t, const float *q_norm,
                          const float *k_norm, const float *q_rstd, const float *k_rstd, const float *cos_t,
                          const float *sin_t, int B, int T, int NH, int NKV, int D) {
    const int N = B * T, Q = NH * D, KV = NKV * D, ld = Q + 2 * KV, C = Q > KV ? Q : KV;
    if (!norm_parts_fit(C)) {
        c_rope_backward(be, (void *)dq, t, cos_t, sin_t, B, T, NH, D);
        c_rope_backward(be, (void *)dk, t, cos_t, sin_t, B, T, NKV, D);
        c_rmsnorm_backward(be, dqkv, t, dq_norm, acc_dw, dq, t, qkv, t, q_norm, q_rstd, N, Q, Q, ld, ld);
        c_rmsnorm_backward(be, (char *)dqkv + (size_t)Q * dtype_size(t), t, dk_norm, acc_dw, dk, t,
                           (const char *)qkv + (size_t)Q * dtype_size(t), t, k_norm, k_rstd, N, KV, KV, ld, ld);
        copy_cols_cuda(impl(be)->st, dqkv, dv, t, N, KV, ld, Q + KV, KV, 0);
        return;
    }
    double *part = (double *)scratch(be, S_NORM, sizeof(double) * NORM_PARTS * (size_t)C);
    qkv_split_backward_cuda(impl(be)->st, dqkv, dq_norm, dk_norm, acc_dw, dq, dk, dv, qkv, t, q_norm, k_norm, q_rstd,
                            k_rstd, cos_t, sin_t, B, T, NH, NKV, D, part);
}

void c_attention_forward(OpsBackend *be, void *out, float *lse, const void *q, const void *k, const void *v, DType t,
                         int B, int T, int NH, int NKV, int D, int window, const int32_t *doc_start) {
    if (!attention_head_dim_supported(D)) {
        die("cuda backend: attention_forward: head_dim %d not supported (16, 32, 64, 128)", D);
    }
    attention_forward_cuda_dt(impl(be)->st, out, lse, q, k, v, t, B, T, NH, NKV, D, window, doc_start);
}
void c_attention_backward(OpsBackend *be, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                          const void *v, const void *out, const float *lse, DType t, int B, int T, int NH, int NKV,
                          int D, int window, const int32_t *doc_start) {
    float *Di = (float *)scratch(be, S_DI, sizeof(float) * (size_t)B * NH * T);
    void *ds = t == DT_BF16 ? scratch(be, S_DS, cuda_attn_ds_bytes(B, T, NH, NKV)) : nullptr;
    attention_backward_cuda_dt(impl(be)->st, dq, dk, dv, Di, ds, dout, q, k, v, out, lse, t, B, T, NH, NKV, D, window,
                               doc_start);
}

void c_attention_forward_at(OpsBackend *be, void *out, float *lse, const void *q, const void *k, const void *v,
                            DType t, int T, int p0, int NH, int NKV, int D, int ldq, int ldk, int window,
                            const int32_t *doc_start) {
    attention_forward_at_cuda_dt(impl(be)->st, out, lse, q, k, v, t, T, p0, NH, NKV, D, ldq, ldk, window, doc_start);
}
void c_attention_backward_at(OpsBackend *be, void *dq, void *dk, void *dv, const void *dout, const void *q,
                             const void *k, const void *v, const float *lse, DType t, int T, int p0, int NH, int NKV,
                             int D, int ldq, int ldk, int window, const int32_t *doc_start) {
    float *Di = (float *)scratch(be, S_DI, sizeof(float) * (size_t)NH * T);
    attention_backward_at_cuda_dt(impl(be)->st, dq, dk, dv, Di, dout, q, k, v, lse, t, T, p0, NH, NKV, D, ldq, ldk,
                                  window, doc_start);
}

void c_swiglu_forward(OpsBackend *be, void *out, const void *gu, DType t, int N, int H) {
    swiglu_forward_cuda(impl(be)->st, out, gu, t, N, H);
}
void c_swiglu_backward(OpsBackend *be, void *dgu, const void *dout, const void *gu, DType t, int N, int H) {
    swiglu_backward_cuda(impl(be)->st, dgu, dout, gu, t, N, H);
}

// Chunks of LM_CHUNK tokens: logits (fp32) by cuBLASLt, the loss rows, then
// the chunk's two backward GEMMs (dW accumulated over chunks in order).
LossSums c_lmhead_loss(OpsBackend *be, void *dx, float *dW, int acc_dW, const void *x, const void *W, DType t,
                       const int32_t *targets, int N, int C, int V, float z_coef, float inv_count, float *logits_host,
                       float *tok_ce_host) {
    CudaOps *c = impl(be);
    const int chunk = N < LM_CHUNK ? (N > 0 ? N : 1) : LM_CHUNK;
    const size_t es = dtype_size(t);
    float *logits = (float *)scratch(be, S_LOGITS, sizeof(float) * (size_t)chunk * V);
    void *dlogits = dx ? scratch(be, S_DLOGITS, es * (size_t)chunk * V) : nullptr;
    double *rows = (double *)scratch(be, S_ROWS, (2 * sizeof(double) + sizeof(float)) * (size_t)(N > 0 ? N : 1));
    double *row_ce = rows, *row_z = rows + N;
    float *tok_ce = (float *)(rows + 2 * (size_t)N);
    for (int n0 = 0; n0 < N; n0 += chunk) {
        const int nc = N - n0 < chunk ? N - n0 : chunk;
        const char *xc = (const char *)x + (size_t)n0 * C * es;
        gemm_cuda(&c->g, true, false, V, nc, C, W, C, xc, C, logits, V, 0.0f, t, DT_F32);
        if (logits_host)
            CUDA_CHECK(cudaMemcpyAsync(logits_host + (size_t)n0 * V, logits, sizeof(float) * (size_t)nc * V,
                                       cudaMemcpyDeviceToHost, c->st));
        lmhead_rows_cuda(c->st, dlogits, t, logits, targets + n0, nc, V, z_coef, inv_count, dx != nullptr,
                         row_ce + n0, row_z + n0, tok_ce + n0);
        if (dx)
            matmul_backward_cuda(&c->g, (char *)dx + (size_t)n0 * C * es, t, dW, dlogits, xc, W, t, nc, C, V, 0,
                                 acc_dW || n0 > 0);
    }
    // one download (one sync) of the rows: CE, z (-1 marks a masked row: lmhead.cu), and
    // the per-token CE behind them in the same buffer when asked for
    std::vector<double> rows_h(2 * (size_t)N + (tok_ce_host ? (N + 1) / 2 : 0));
    c_download(be, rows_h.data(), rows, sizeof(double) * 2 * N + (tok_ce_host ? sizeof(float) * N : 0));
    const double *ce = rows_h.data(), *zz = ce + N;
    if (tok_ce_host) memcpy(tok_ce_host, zz + N, sizeof(float) * N);
    LossSums sums = {0.0, 0.0, 0};
    for (int n = 0; n < N; n++) {   // token order, as the CPU's chunk loop
        if (zz[n] < 0) continue;
        sums.ce_sum += ce[n];
        sums.z_sum += zz[n];
        sums.n_valid++;
    }
    return sums;
}

double c_sumsq(OpsBackend *be, const float *x, size_t n, double *part_host) {
    const size_t nch = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    if (nch == 0) return 0.0;
    double *part = (double *)scratch(be, S_PART, sizeof(double) * nch);
    sumsq_chunks_cuda(impl(be)->st, part, x, n);
    std::vector<double> h(nch);
    c_download(be, h.data(), part, sizeof(double) * nch);
    double total = 0.0;
    for (size_t i = 0; i < nch; i++) {
        if (part_host) part_host[i] = h[i];
        total += h[i];
    }
    return total;
}
void c_scale(OpsBackend *be, float *x, float s, size_t n) { scale_cuda(impl(be)->st, x, s, n); }
void c_add(OpsBackend *be, float *acc, const float *x, size_t n) { add_cuda(impl(be)->st, acc, x, n); }
void c_adamw(OpsBackend *be, float *p, float *m, float *v, const float *g, void *wcopy, DType wt, size_t n, float lr,
             float beta1, float beta2, float eps, float wd, int step) {
    // the scalars exactly as adamw_update (kernels/cpu/optim.c) forms them
    double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    adamw_cuda(impl(be)->st, p, m, v, g, wcopy, wt, n, beta1, beta2, eps, 1.0f - lr * wd, (float)(lr / bc1),
               (float)sqrt(bc2));
}

// The span table (block offsets added) to the device only when it differs from the last
// call's: a training run uploads it once.
void c_adamw_spans(OpsBackend *be, float *p, float *m, float *v, const float *g, void *wcopy, DType wt,
                   const AdamWSpan *spans, int nspans, float clip, float lr, float beta1, float beta2, float eps,
                   int step) {
    CudaOps *c = impl(be);
    std::vector<AdamWSpanDev> t;
    unsigned long long blocks = 0;
    for (int i = 0; i < nspans; i++) {
        if (!spans[i].n) continue;
        t.push_back(AdamWSpanDev{spans[i].at, spans[i].n, blocks, spans[i].wd, 0.0f});
        blocks += (spans[i].n + 255) / 256;
    }
    if (t.empty()) return;
    if (blocks > 0x7fffffffull) die("CUDA adamw_spans: %llu blocks of 256 elements, above a grid's 2^31 - 1", blocks);
    if (t.size() != c->spans_host.size() || memcmp(t.data(), c->spans_host.data(), t.size() * sizeof t[0])) {
        if (t.size() > c->spans_cap) {
            CUDA_CHECK(cudaStreamSynchronize(c->st));
            if (c->spans_dev) CUDA_CHECK(cudaFree(c->spans_dev));
            CUDA_CHECK(cudaMalloc(&c->spans_dev, t.size() * sizeof t[0]));
            c->spans_cap = t.size();
        }
        c_upload(be, c->spans_dev, t.data(), t.size() * sizeof t[0]);
        c->spans_host = t;
    }
    // the scalars exactly as c_adamw forms them
    double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    adamw_spans_cuda(c->st, p, m, v, g, wcopy, wt, c->spans_dev, (int)t.size(), blocks, clip, clip < 1.0f, lr, beta1,
                     beta2, eps, (float)(lr / bc1), (float)sqrt(bc2));
}

Ops make_ops() {
    Ops o;
    memset(&o, 0, sizeof o);
    o.alloc = c_alloc; o.free = c_free; o.upload = c_upload; o.download = c_download; o.zero = c_zero;
    o.sync = c_sync; o.destroy = c_destroy; o.cast = c_cast; o.copy_cols = c_copy_cols;
    o.gather_rows = c_gather_rows;
    o.embedding_forward = c_embedding_forward; o.embedding_backward = c_embedding_backward;
    o.matmul_forward = c_matmul_forward; o.matmul_backward = c_matmul_backward;
    o.rmsnorm_forward = c_rmsnorm_forward; o.rmsnorm_backward = c_rmsnorm_backward;
    o.rope_forward = c_rope_forward; o.rope_backward = c_rope_backward;
    o.qkv_split_forward = c_qkv_split_forward; o.qkv_split_backward = c_qkv_split_backward;
    o.attention_forward = c_attention_forward; o.attention_backward = c_attention_backward;
    o.attention_forward_at = c_attention_forward_at; o.attention_backward_at = c_attention_backward_at;
    o.swiglu_forward = c_swiglu_forward; o.swiglu_backward = c_swiglu_backward;
    o.lmhead_loss = c_lmhead_loss;
    o.sumsq = c_sumsq; o.scale = c_scale; o.add = c_add; o.adamw = c_adamw; o.adamw_spans = c_adamw_spans;
    return o;
}
const Ops CUDA_OPS = make_ops();

}   // namespace

cudaStream_t ops_cuda_stream(OpsBackend *be) { return impl(be)->st; }

size_t ops_cuda_reserve(OpsBackend *be, const OpsLimits *l) {
    size_t total = 0;
    for (int k = 0; k < OPS_CUDA_SLOTS; k++) {
        size_t b = ops_cuda_scratch_slot(k, l, (int)dtype_size(be->act));
        if (!b) continue;
        Scratch &s = impl(be)->s[k];
        if (s.bytes < b) {
            CUDA_CHECK(cudaStreamSynchronize(impl(be)->st));
            if (s.p) CUDA_CHECK(cudaFree(s.p));
            s.p = nullptr;
            s.bytes = 0;
            if (cudaMalloc(&s.p, b) != cudaSuccess) {
                cudaGetLastError();
                return 0;
            }
            s.bytes = b;
        }
        total += s.bytes;
    }
    return total;
}

extern "C" OpsBackend *ops_cuda_create(DType act, char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(err, errlen, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        cudaGetLastError();
        return NULL;
    }
    CudaOps *c = new CudaOps;
    CUDA_CHECK(cudaStreamCreate(&c->st));
    LT_CHECK(cublasLtCreate(&c->g.lt));
    CUDA_CHECK(cudaMalloc(&c->g.workspace, CUDA_WORKSPACE_BYTES));
    c->g.st = c->st;
    OpsBackend *be = new OpsBackend;
    be->ops = &CUDA_OPS;
    be->name = "cuda";
    be->act = act;
    be->prec = PRECISION_FP32;
    be->impl = c;
    return be;
}

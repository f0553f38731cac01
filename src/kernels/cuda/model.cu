// model.cu: the OLMo 3 model on one CUDA device (see cuda_backend.h): the same forward and
// backward as src/model/model.c, kernel for kernel, with
//   GEMMs       cuBLASLt, fp32 accumulation; bf16 mode: bf16 operands, activations out in
//               bf16, weight gradients out in fp32 straight into the gradient buffer;
//               fp32 mode: plain fp32 GEMMs (CUBLAS_COMPUTE_32F, no TF32).
//   norms       RMSNorm statistics in fp32 (row sums of squares in double); weight
//               gradients from fixed row chunks (partials in double) summed in chunk order.
//   LM head     chunked over tokens: logits chunk (fp32) by cuBLASLt, one block per row for
//               max / logsumexp / CE / z-loss and dlogits, then the two backward GEMMs.
//   embedding   backward: one thread per column walks the tokens in order (no atomics).
//   optimizer   gradient tree, chunked sum of squares, clip and AdamW on the device.
// Nothing uses float atomics; every reduction has a fixed order, so a run is reproducible
// bit for bit on the same GPU model, driver and library versions.
#include <cublasLt.h>
#include <math.h>
#include <string.h>

#include <vector>

extern "C" {
#include "model/config.h"
#include "model/params.h"
}
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_backend.h"

#define LT_CHECK(x)                                                                                          \
    do {                                                                                                     \
        cublasStatus_t s_ = (x);                                                                             \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                   \
            fprintf(stderr, "olmo: error: cuBLASLt status %d (%s:%d: %s)\n", (int)s_, __FILE__, __LINE__, #x); \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

#define NORM_PARTS 64          // row chunks of a norm weight gradient
#define SUMSQ_CHUNK 65536      // as kernels/cpu/optim.c
#define LM_CHUNK_MAX 1024      // tokens per LM-head chunk
#define WORKSPACE_BYTES (32u << 20)
#define MAX_LEVELS 32

// ---------------------------------------------------------------------------------------
// elementwise and row kernels
// ---------------------------------------------------------------------------------------

template <typename T> __global__ void cast_kernel(T *dst, const float *src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = fromf<T>(src[i]);
}

template <typename T> __global__ void to_float_kernel(float *dst, const T *src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = tof(src[i]);
}

template <typename T>
__global__ void embedding_fwd_kernel(T *out, const int32_t *tok, const T *E, int N, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * C) return;
    size_t n = idx / C, c = idx % C;
    out[idx] = E[(size_t)tok[n] * C + c];
}

// dE (V, C) += dout rows, tokens in order; one thread per column.
template <typename T>
__global__ void embedding_bwd_kernel(float *dE, const T *dout, const int32_t *tok, int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int n = 0; n < N; n++) dE[(size_t)tok[n] * C + c] += tof(dout[(size_t)n * C + c]);
}

// out = w * (x * rstd) (+ res); one block per row. Statistics in double as the CPU kernel.
template <typename T>
__global__ void rmsnorm_fwd_kernel(T *out, float *rstd, const T *inp, const float *w, const T *res, int C,
                                   int in_stride, int out_stride, float eps) {
    __shared__ double sh[32];
    const int n = blockIdx.x;
    const T *x = inp + (size_t)n * in_stride;
    double ss = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        double xv = tof(x[c]);
        ss += xv * xv;
    }
    ss = block_sum(ss, sh);
    float r = (float)(1.0 / sqrt(ss / C + eps));
    if (threadIdx.x == 0) rstd[n] = r;
    T *o = out + (size_t)n * out_stride;
    const T *rr = res ? res + (size_t)n * out_stride : nullptr;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float y = w[c] * (tof(x[c]) * r);
        o[c] = fromf<T>(rr ? tof(rr[c]) + y : y);
    }
}

// dx = r * (w*dy - xhat * mean(w*dy*xhat)); one block per row.
template <typename T>
__global__ void rmsnorm_bwd_kernel(T *dinp, const T *dout, const T *inp, const float *w, const float *rstd, int C,
                                   int dout_stride, int in_stride, int din_stride) {
    __shared__ double sh[32];
    const int n = blockIdx.x;
    const T *x = inp + (size_t)n * in_stride, *dy = dout + (size_t)n * dout_stride;
    const float r = rstd[n];
    double dot = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dot += (double)(w[c] * tof(dy[c])) * (tof(x[c]) * r);
    dot = block_sum(dot, sh);
    const float m = (float)(dot / C);
    T *dx = dinp + (size_t)n * din_stride;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dx[c] = fromf<T>(r * (w[c] * tof(dy[c]) - (tof(x[c]) * r) * m));
}

// partial[p][c] = sum over rows of chunk p of dy * xhat (double).
template <typename T>
__global__ void norm_dw_partial_kernel(double *partial, const T *dout, const T *inp, const float *rstd, int N, int C,
                                       int dout_stride, int in_stride) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, p = blockIdx.y;
    if (c >= C) return;
    int n0 = (int)((long)N * p / NORM_PARTS), n1 = (int)((long)N * (p + 1) / NORM_PARTS);
    double acc = 0.0;
    for (int n = n0; n < n1; n++)
        acc += (double)tof(dout[(size_t)n * dout_stride + c]) * (tof(inp[(size_t)n * in_stride + c]) * rstd[n]);
    partial[(size_t)p * C + c] = acc;
}

__global__ void norm_dw_final_kernel(float *dw, const double *partial, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double acc = 0.0;
    for (int p = 0; p < NORM_PARTS; p++) acc += partial[(size_t)p * C + c];
    dw[c] = (float)acc;
}

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
    v[j] = fromf<T>(x1 * c - x2 * sn);
    v[j + half] = fromf<T>(x2 * c + x1 * sn);
}

// dst[n, dcol + i] = src[n, scol + i], i < width
template <typename T>
__global__ void copy_cols_kernel(T *dst, const T *src, int N, int width, int dstride, int dcol, int sstride, int scol) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * width) return;
    size_t n = idx / width, i = idx % width;
    dst[n * dstride + dcol + i] = src[n * sstride + scol + i];
}

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

// One block per row of the logits chunk: lse, CE, z; with grad, dlogits (type T) =
// inv_count * (softmax * (1 + 2 z lse) - onehot); masked rows get zeros.
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
        row_z[r] = t >= 0 ? lse * lse : 0.0;
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

__global__ void add_kernel(float *acc, const float *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) acc[i] += x[i];
}

__global__ void scale_kernel(float *x, float s, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
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

// adamw_update (kernels/cpu/optim.c) element for element; _rn intrinsics keep the compiler
// from contracting into FMAs, so fp32 results match the CPU's (gcc -std=c11: no contraction).
template <typename T>
__global__ void adamw_kernel(float *p, float *m, float *v, const float *g, T *wcopy, size_t n, float beta1,
                             float beta2, float eps, float decay, float step_size, float bc2_sqrt) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float gi = g[i];
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

__global__ void poison_kernel(float *x) { x[0] = NAN; }

static inline unsigned nblk(size_t n, int t = 256) { return (unsigned)((n + t - 1) / t); }

// ---------------------------------------------------------------------------------------
// the model
// ---------------------------------------------------------------------------------------

struct Dims { int N, C, Q, KV, QKV, H, NH, NKV, D, L; };

struct CudaModelBase {
    virtual ~CudaModelBase() {}
    ModelConfig cfg;
    const ParamTable *table;
    int max_B, max_T, is_bf16, recompute = 0;
    size_t total, bytes = 0;
    cudaStream_t st;
    cublasLtHandle_t lt;
    void *workspace;
    float *master, *m, *v;
    float *gbuf[MAX_LEVELS + 1];
    long span[MAX_LEVELS + 1];
    int depth = 0, nbuf = 0;
    float *grad_total = nullptr;
    double *sumsq_partial;
    std::vector<double> host_partial;

    template <typename P> P *alloc(size_t count) {
        void *p = nullptr;
        if (count == 0) count = 1;
        if (cudaMalloc(&p, count * sizeof(P)) != cudaSuccess) {
            cudaGetLastError();
            return nullptr;
        }
        bytes += count * sizeof(P);
        ptrs.push_back(p);
        return (P *)p;
    }
    std::vector<void *> ptrs;
    bool oom = false;
    template <typename P> P *must(size_t count) {
        P *p = alloc<P>(count);
        if (!p) oom = true;
        return p;
    }
    void free_all() {
        for (void *p : ptrs) cudaFree(p);
        ptrs.clear();
    }

    virtual void refresh_weights() = 0;
    virtual LossSums fwd_bwd(const int32_t *inputs, const int32_t *targets, int B, int T, float z, float inv_count,
                             int want_grads, float *logits_out, float *tok_ce) = 0;
    float *slot() {
        if (depth >= MAX_LEVELS) { fprintf(stderr, "olmo: error: CUDA gradient tree: too many micro-batches\n"); exit(1); }
        while (nbuf <= depth) {
            gbuf[nbuf] = alloc<float>(total);
            if (!gbuf[nbuf]) { fprintf(stderr, "olmo: error: CUDA: out of memory for a gradient buffer (%zu MiB)\n", total * 4 >> 20); exit(1); }
            nbuf++;
        }
        return gbuf[depth];
    }

    static uint32_t align_of(const void *p) {
        uintptr_t a = (uintptr_t)p;
        uint32_t al = 256;
        while (al > 1 && (a % al)) al >>= 1;
        return al;
    }
    // GEMM in cuBLASLt column-major terms: C (m x n, ldc) = op(A) op(B) (+ beta C).
    void gemm(bool ta, bool tb, int mm, int nn, int kk, const void *A, int lda, const void *B, int ldb, void *Cp,
              int ldc, float beta, cudaDataType_t in_t, cudaDataType_t out_t) {
        cublasLtMatmulDesc_t op;
        LT_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa));
        LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob));
        cublasLtMatrixLayout_t la, lb, lc;
        LT_CHECK(cublasLtMatrixLayoutCreate(&la, in_t, ta ? kk : mm, ta ? mm : kk, lda));
        LT_CHECK(cublasLtMatrixLayoutCreate(&lb, in_t, tb ? nn : kk, tb ? kk : nn, ldb));
        LT_CHECK(cublasLtMatrixLayoutCreate(&lc, out_t, mm, nn, ldc));
        cublasLtMatmulPreference_t pref;
        LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        size_t ws = WORKSPACE_BYTES;
        LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
        // The heuristic assumes 256-byte aligned operands unless told otherwise; tensors of
        // the flat table can sit at any 4-byte (bf16: 2-byte) offset after the small norm
        // vectors, so tell it the real alignment of each pointer.
        uint32_t al[3] = {align_of(A), align_of(B), align_of(Cp)};
        LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], 4));
        LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], 4));
        LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], 4));
        LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[2], 4));
        cublasLtMatmulHeuristicResult_t h;
        int nres = 0;
        LT_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &h, &nres));
        if (nres == 0) { fprintf(stderr, "olmo: error: cuBLASLt: no algorithm for %dx%dx%d\n", mm, nn, kk); exit(1); }
        float alpha = 1.0f;
        LT_CHECK(cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &beta, Cp, lc, Cp, lc, &h.algo, workspace, ws, st));
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(lc);
        cublasLtMatmulDescDestroy(op);
    }
};

template <typename T> struct CudaModelT : CudaModelBase {
    static constexpr cudaDataType_t DT = sizeof(T) == 4 ? CUDA_R_32F : CUDA_R_16BF;
    T *w;   // weights in compute type (== master in fp32 mode)
    ModelView mv;   // views into master (device); offsets give the T copy and gradients
    // activations
    T *res, *mid, *qkv, *q, *k, *vv, *att, *ao, *gu, *act, *mo, *xf;
    float *q_rstd, *k_rstd, *a_rstd, *m_rstd, *xf_rstd, *lse;
    // scratch
    T *dres, *dxf, *da, *datt, *dq, *dk, *dv, *dqkv, *dgu, *dact, *dm;
    float *Di, *logits, *rope_cos, *rope_sin, *tok_ce_d;
    T *dlogits;
    double *row_ce, *row_z, *norm_part;
    int32_t *tok_d, *tgt_d;
    int lm_chunk;

    size_t off(const float *p) const { return (size_t)(p - master); }
    size_t slot_of(int l) const { return recompute ? 0 : (size_t)l; }
    const T *W(const float *p) const { return w + off(p); }

    Dims dims(int B, int T_) const {
        Dims d;
        d.N = B * T_; d.C = cfg.d_model; d.NH = cfg.n_heads; d.NKV = cfg.n_kv_heads; d.D = cfg.head_dim;
        d.Q = d.NH * d.D; d.KV = d.NKV * d.D; d.QKV = d.Q + 2 * d.KV; d.H = cfg.mlp_hidden; d.L = cfg.n_layers;
        return d;
    }

    bool init() {
        Dims d = dims(max_B, max_T);
        size_t N = d.N, L = recompute ? 1 : d.L;   // per-layer activation buffers (res keeps all L+1)
        master = must<float>(total);
        m = must<float>(total);
        v = must<float>(total);
        if (sizeof(T) == 4) w = (T *)master;
        else w = must<T>(total);
        res = must<T>(((size_t)d.L + 1) * N * d.C); mid = must<T>(L * N * d.C); qkv = must<T>(L * N * d.QKV);
        q = must<T>(L * N * d.Q); k = must<T>(L * N * d.KV); vv = must<T>(L * N * d.KV); att = must<T>(L * N * d.Q);
        ao = must<T>(L * N * d.C); gu = must<T>(L * N * 2 * d.H); act = must<T>(L * N * d.H); mo = must<T>(L * N * d.C);
        xf = must<T>(N * d.C);
        q_rstd = must<float>(L * N); k_rstd = must<float>(L * N); a_rstd = must<float>(L * N); m_rstd = must<float>(L * N);
        xf_rstd = must<float>(N); lse = must<float>(L * N * d.NH);
        dres = must<T>(N * d.C); dxf = must<T>(N * d.C); da = must<T>(N * d.C); datt = must<T>(N * d.Q);
        dq = must<T>(N * d.Q); dk = must<T>(N * d.KV); dv = must<T>(N * d.KV); dqkv = must<T>(N * d.QKV);
        dgu = must<T>(N * 2 * d.H); dact = must<T>(N * d.H); dm = must<T>(N * d.C);
        Di = must<float>(N * d.NH);
        lm_chunk = (int)(N < LM_CHUNK_MAX ? N : LM_CHUNK_MAX);
        logits = must<float>((size_t)lm_chunk * cfg.padded_vocab);
        dlogits = must<T>((size_t)lm_chunk * cfg.padded_vocab);
        row_ce = must<double>(N); row_z = must<double>(N); tok_ce_d = must<float>(N);
        size_t maxw = d.C > d.Q ? d.C : d.Q;
        norm_part = must<double>((size_t)NORM_PARTS * maxw);
        tok_d = must<int32_t>(N); tgt_d = must<int32_t>(N);
        rope_cos = must<float>((size_t)max_T * d.D / 2); rope_sin = must<float>((size_t)max_T * d.D / 2);
        size_t nchunks = (total + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
        sumsq_partial = must<double>(nchunks);
        host_partial.resize(nchunks);
        if (oom) return false;
        CUDA_CHECK(cudaMemset(m, 0, total * 4));
        CUDA_CHECK(cudaMemset(v, 0, total * 4));
        std::vector<float> c((size_t)max_T * d.D / 2), s(c.size());
        rope_tables(c.data(), s.data(), max_T, d.D, cfg.rope_theta, NULL);
        CUDA_CHECK(cudaMemcpy(rope_cos, c.data(), c.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(rope_sin, s.data(), s.size() * 4, cudaMemcpyHostToDevice));
        model_view(&mv, table, &cfg, master);
        return true;
    }

    void refresh_weights() override {
        if (sizeof(T) != 4) {
            cast_kernel<T><<<nblk(total), 256, 0, st>>>(w, master, total);
            CUDA_LAUNCH_CHECK();
        }
    }

    // row-major nn.Linear: out (N, OC) = inp (N, C) @ W^T
    void mm_fwd(T *out, const T *inp, const T *Wt, int N, int C, int OC) {
        gemm(true, false, OC, N, C, Wt, C, inp, C, out, OC, 0.0f, DT, DT);
    }
    // dinp (N, C) (+)= dout @ W; dW (OC, C) = dout^T @ inp (fp32, overwritten or accumulated)
    void mm_bwd(T *dinp, float *dW, const T *dout, const T *inp, const T *Wt, int N, int C, int OC, int acc_dinp,
                int acc_dW) {
        if (dinp) gemm(false, false, C, N, OC, Wt, C, dout, OC, dinp, C, acc_dinp ? 1.0f : 0.0f, DT, DT);
        if (dW) gemm(false, true, C, OC, N, inp, C, dout, OC, dW, C, acc_dW ? 1.0f : 0.0f, DT, CUDA_R_32F);
    }
    void norm_fwd(T *out, float *rstd, const T *inp, const float *wt, const T *resid, int N, int C, int is, int os) {
        rmsnorm_fwd_kernel<T><<<N, 256, 0, st>>>(out, rstd, inp, wt, resid, C, is, os, (float)cfg.rms_eps);
        CUDA_LAUNCH_CHECK();
    }
    void norm_bwd(T *dinp, float *dw, const T *dout, const T *inp, const float *wt, const float *rstd, int N, int C,
                  int ds, int is, int dis) {
        rmsnorm_bwd_kernel<T><<<N, 256, 0, st>>>(dinp, dout, inp, wt, rstd, C, ds, is, dis);
        CUDA_LAUNCH_CHECK();
        dim3 g(nblk(C), NORM_PARTS);
        norm_dw_partial_kernel<T><<<g, 256, 0, st>>>(norm_part, dout, inp, rstd, N, C, ds, is);
        CUDA_LAUNCH_CHECK();
        norm_dw_final_kernel<<<nblk(C), 256, 0, st>>>(dw, norm_part, C);
        CUDA_LAUNCH_CHECK();
    }
    void rope(T *x, int B, int T_, int H, int D, float sign) {
        size_t n = (size_t)B * T_ * H * (D / 2);
        rope_kernel<T><<<nblk(n), 256, 0, st>>>(x, rope_cos, rope_sin, B * T_, T_, H, D, sign);
        CUDA_LAUNCH_CHECK();
    }
    void copy_cols(T *dst, const T *src, int N, int width, int dstride, int dcol, int sstride, int scol) {
        copy_cols_kernel<T><<<nblk((size_t)N * width), 256, 0, st>>>(dst, src, N, width, dstride, dcol, sstride, scol);
        CUDA_LAUNCH_CHECK();
    }

    // Forward of block l (activations into the layer's buffers, or slot 0 with recompute).
    void layer_fwd(int l, int B, int T_) {
        const Dims d = dims(B, T_);
        const size_t N = d.N;
        const LayerView *lw = &mv.layers[l];
        const int window = model_layer_window(&cfg, l, T_);
        T *x = res + l * N * d.C, *y = res + (l + 1) * N * d.C;
        const size_t sl = slot_of(l);   // per-layer buffers: layer l, or slot 0 with recompute
        T *qkv_l = qkv + sl * N * d.QKV, *q_l = q + sl * N * d.Q, *k_l = k + sl * N * d.KV, *v_l = vv + sl * N * d.KV;
        T *att_l = att + sl * N * d.Q, *ao_l = ao + sl * N * d.C, *h = mid + sl * N * d.C;
        T *gu_l = gu + sl * N * 2 * d.H, *act_l = act + sl * N * d.H, *mo_l = mo + sl * N * d.C;
        mm_fwd(qkv_l, x, W(lw->wqkv), d.N, d.C, d.QKV);
        norm_fwd(q_l, q_rstd + sl * N, qkv_l, lw->q_norm, nullptr, d.N, d.Q, d.QKV, d.Q);
        norm_fwd(k_l, k_rstd + sl * N, qkv_l + d.Q, lw->k_norm, nullptr, d.N, d.KV, d.QKV, d.KV);
        copy_cols(v_l, qkv_l, d.N, d.KV, d.KV, 0, d.QKV, d.Q + d.KV);
        rope(q_l, B, T_, d.NH, d.D, 1.0f);
        rope(k_l, B, T_, d.NKV, d.D, 1.0f);
        attention_forward_cuda<T>(att_l, lse + sl * N * d.NH, q_l, k_l, v_l, B, T_, d.NH, d.NKV, d.D, window, st);
        mm_fwd(ao_l, att_l, W(lw->wo), d.N, d.Q, d.C);
        norm_fwd(h, a_rstd + sl * N, ao_l, lw->attn_norm, x, d.N, d.C, d.C, d.C);        // h = x + norm(a)
        mm_fwd(gu_l, h, W(lw->wgu), d.N, d.C, 2 * d.H);
        swiglu_fwd_kernel<T><<<nblk(N * d.H), 256, 0, st>>>(act_l, gu_l, d.N, d.H);
        CUDA_LAUNCH_CHECK();
        mm_fwd(mo_l, act_l, W(lw->wdown), d.N, d.H, d.C);
        norm_fwd(y, m_rstd + sl * N, mo_l, lw->mlp_norm, h, d.N, d.C, d.C, d.C);         // y = h + norm(m)
    }

    LossSums fwd_bwd(const int32_t *inputs, const int32_t *targets, int B, int T_, float z, float inv_count,
                     int want_grads, float *logits_out, float *tok_ce) override {
        if (B > max_B || T_ > max_T) { fprintf(stderr, "olmo: error: CUDA model: (B=%d, T=%d) exceeds (%d, %d)\n", B, T_, max_B, max_T); exit(1); }
        const Dims d = dims(B, T_);
        const size_t N = d.N;
        const int Vp = cfg.padded_vocab;
        CUDA_CHECK(cudaMemcpyAsync(tok_d, inputs, N * 4, cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaMemcpyAsync(tgt_d, targets, N * 4, cudaMemcpyHostToDevice, st));
        embedding_fwd_kernel<T><<<nblk(N * d.C), 256, 0, st>>>(res, tok_d, W(mv.embed), d.N, d.C);
        CUDA_LAUNCH_CHECK();
        for (int l = 0; l < d.L; l++) layer_fwd(l, B, T_);
        T *xL = res + (size_t)d.L * N * d.C;
        norm_fwd(xf, xf_rstd, xL, mv.final_norm, nullptr, d.N, d.C, d.C, d.C);

        // LM head + loss, chunked; the backward GEMMs per chunk (dW accumulated over chunks in order)
        float *g = want_grads ? slot() : nullptr;
        ModelView gw;
        if (g) model_view(&gw, table, &cfg, g);
        for (int n0 = 0; n0 < d.N; n0 += lm_chunk) {
            int nc = d.N - n0 < lm_chunk ? d.N - n0 : lm_chunk;
            const T *xc = xf + (size_t)n0 * d.C;
            gemm(true, false, Vp, nc, d.C, W(mv.lm_head), d.C, xc, d.C, logits, Vp, 0.0f, DT, CUDA_R_32F);
            if (logits_out)
                CUDA_CHECK(cudaMemcpyAsync(logits_out + (size_t)n0 * Vp, logits, (size_t)nc * Vp * 4, cudaMemcpyDeviceToHost, st));
            lm_row_kernel<T><<<nc, 512, 0, st>>>(dlogits, logits, tgt_d + n0, Vp, z, inv_count, g != nullptr,
                                                 row_ce + n0, row_z + n0, tok_ce_d + n0);
            CUDA_LAUNCH_CHECK();
            if (g) mm_bwd(dxf + (size_t)n0 * d.C, gw.lm_head, dlogits, xc, W(mv.lm_head), nc, d.C, Vp, 0, n0 > 0);
        }
        if (g) backward(gw, B, T_);
        std::vector<double> ce(N), zz(N);
        CUDA_CHECK(cudaMemcpyAsync(ce.data(), row_ce, N * 8, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaMemcpyAsync(zz.data(), row_z, N * 8, cudaMemcpyDeviceToHost, st));
        if (tok_ce) CUDA_CHECK(cudaMemcpyAsync(tok_ce, tok_ce_d, N * 4, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        LossSums sums = {0.0, 0.0, 0};
        for (size_t n = 0; n < N; n++) {   // token order, as the CPU's chunk loop
            if (targets[n] < 0) continue;
            sums.ce_sum += ce[n];
            sums.z_sum += zz[n];
            sums.n_valid++;
        }
        return sums;
    }

    void backward(ModelView &gw, int B, int T_) {
        const Dims d = dims(B, T_);
        const size_t N = d.N;
        T *xL = res + (size_t)d.L * N * d.C;
        norm_bwd(dres, gw.final_norm, dxf, xL, mv.final_norm, xf_rstd, d.N, d.C, d.C, d.C, d.C);
        for (int l = d.L - 1; l >= 0; l--) {
            const LayerView *lw = &mv.layers[l];
            LayerView *lg = &gw.layers[l];
            const int window = model_layer_window(&cfg, l, T_);
            // Recompute: the block's activations again, bitwise the same (the slot still holds
            // the last block's from the forward).
            if (recompute && l != d.L - 1) layer_fwd(l, B, T_);
            const size_t sl = slot_of(l);
            T *x = res + l * N * d.C;
            T *qkv_l = qkv + sl * N * d.QKV, *q_l = q + sl * N * d.Q, *k_l = k + sl * N * d.KV, *v_l = vv + sl * N * d.KV;
            T *att_l = att + sl * N * d.Q, *ao_l = ao + sl * N * d.C, *h = mid + sl * N * d.C;
            T *gu_l = gu + sl * N * 2 * d.H, *act_l = act + sl * N * d.H, *mo_l = mo + sl * N * d.C;
            norm_bwd(dm, lg->mlp_norm, dres, mo_l, lw->mlp_norm, m_rstd + sl * N, d.N, d.C, d.C, d.C, d.C);
            mm_bwd(dact, lg->wdown, dm, act_l, W(lw->wdown), d.N, d.H, d.C, 0, 0);
            swiglu_bwd_kernel<T><<<nblk(N * d.H), 256, 0, st>>>(dgu, dact, gu_l, d.N, d.H);
            CUDA_LAUNCH_CHECK();
            mm_bwd(dres, lg->wgu, dgu, h, W(lw->wgu), d.N, d.C, 2 * d.H, 1, 0);
            norm_bwd(da, lg->attn_norm, dres, ao_l, lw->attn_norm, a_rstd + sl * N, d.N, d.C, d.C, d.C, d.C);
            mm_bwd(datt, lg->wo, da, att_l, W(lw->wo), d.N, d.Q, d.C, 0, 0);
            attention_backward_cuda<T>(dq, dk, dv, Di, datt, q_l, k_l, v_l, att_l, lse + sl * N * d.NH, B, T_, d.NH,
                                       d.NKV, d.D, window, st);
            rope(dq, B, T_, d.NH, d.D, -1.0f);
            rope(dk, B, T_, d.NKV, d.D, -1.0f);
            norm_bwd(dqkv, lg->q_norm, dq, qkv_l, lw->q_norm, q_rstd + sl * N, d.N, d.Q, d.Q, d.QKV, d.QKV);
            norm_bwd(dqkv + d.Q, lg->k_norm, dk, qkv_l + d.Q, lw->k_norm, k_rstd + sl * N, d.N, d.KV, d.KV, d.QKV, d.QKV);
            copy_cols(dqkv, dv, d.N, d.KV, d.QKV, d.Q + d.KV, d.KV, 0);
            mm_bwd(dres, lg->wqkv, dqkv, x, W(lw->wqkv), d.N, d.C, d.QKV, 1, 0);
        }
        CUDA_CHECK(cudaMemsetAsync(gw.embed, 0, sizeof(float) * (size_t)cfg.padded_vocab * d.C, st));
        embedding_bwd_kernel<T><<<nblk(d.C, 128), 128, 0, st>>>(gw.embed, dres, tok_d, d.N, d.C);
        CUDA_LAUNCH_CHECK();
    }
};

struct CudaModel { CudaModelBase *impl; };

extern "C" {

int cuda_device_count(char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        if (err) snprintf(err, errlen, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        cudaGetLastError();
        return 0;
    }
    return n;
}

void cuda_select_device(int local_rank) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return;
    CUDA_CHECK(cudaSetDevice(local_rank % n));
}

void cuda_device_describe(char *out, size_t outlen) {
    cudaDeviceProp p;
    int dev = 0;
    cudaGetDevice(&dev);
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) { snprintf(out, outlen, "unknown CUDA device"); return; }
    snprintf(out, outlen, "%s (sm_%d%d, %d SMs, %.1f GiB)", p.name, p.major, p.minor, p.multiProcessorCount,
             p.totalGlobalMem / 1073741824.0);
}

CudaModel *cuda_model_create(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int use_bf16,
                             int recompute, char *err, size_t errlen) {
    if (!cuda_device_count(err, errlen)) return NULL;
    if (!attention_head_dim_supported(cfg->head_dim)) {
        snprintf(err, errlen, "CUDA backend: head_dim %d not supported (16, 32, 64, 128)", cfg->head_dim);
        return NULL;
    }
    CudaModelBase *b = use_bf16 ? (CudaModelBase *)new CudaModelT<bf16>() : (CudaModelBase *)new CudaModelT<float>();
    b->cfg = *cfg;
    b->table = t;
    b->max_B = max_B;
    b->max_T = max_T;
    b->is_bf16 = use_bf16;
    b->recompute = recompute;
    b->total = t->total;
    CUDA_CHECK(cudaStreamCreate(&b->st));
    LT_CHECK(cublasLtCreate(&b->lt));
    b->workspace = b->alloc<char>(WORKSPACE_BYTES);
    bool ok = b->workspace && (use_bf16 ? ((CudaModelT<bf16> *)b)->init() : ((CudaModelT<float> *)b)->init());
    if (!ok) {
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        snprintf(err, errlen, "CUDA backend: out of device memory (%.2f GiB allocated before failing, %.2f GiB total)",
                 b->bytes / 1073741824.0, tot / 1073741824.0);
        b->free_all();
        cublasLtDestroy(b->lt);
        cudaStreamDestroy(b->st);
        delete b;
        return NULL;
    }
    CudaModel *cm = new CudaModel;
    cm->impl = b;
    return cm;
}

void cuda_model_destroy(CudaModel *cm) {
    if (!cm) return;
    CudaModelBase *b = cm->impl;
    cudaStreamSynchronize(b->st);
    b->free_all();
    cublasLtDestroy(b->lt);
    cudaStreamDestroy(b->st);
    delete b;
    delete cm;
}

size_t cuda_model_bytes(const CudaModel *cm) { return cm->impl->bytes; }

void cuda_sync(CudaModel *cm) { CUDA_CHECK(cudaStreamSynchronize(cm->impl->st)); }

void cuda_upload_params(CudaModel *cm, const float *host) {
    CudaModelBase *b = cm->impl;
    CUDA_CHECK(cudaMemcpy(b->master, host, b->total * 4, cudaMemcpyHostToDevice));
    b->refresh_weights();
    CUDA_CHECK(cudaStreamSynchronize(b->st));
}

void cuda_download_params(CudaModel *cm, float *host) {
    CudaModelBase *b = cm->impl;
    CUDA_CHECK(cudaStreamSynchronize(b->st));
    CUDA_CHECK(cudaMemcpy(host, b->master, b->total * 4, cudaMemcpyDeviceToHost));
}

void cuda_upload_adam(CudaModel *cm, const float *m, const float *v) {
    CudaModelBase *b = cm->impl;
    CUDA_CHECK(cudaMemcpy(b->m, m, b->total * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b->v, v, b->total * 4, cudaMemcpyHostToDevice));
}

void cuda_download_adam(CudaModel *cm, float *m, float *v) {
    CudaModelBase *b = cm->impl;
    CUDA_CHECK(cudaStreamSynchronize(b->st));
    CUDA_CHECK(cudaMemcpy(m, b->m, b->total * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(v, b->v, b->total * 4, cudaMemcpyDeviceToHost));
}

LossSums cuda_forward_backward(CudaModel *cm, const int32_t *inputs, const int32_t *targets, int B, int T,
                               float z_coef, float inv_count, int want_grads, float *logits_out, float *tok_ce) {
    return cm->impl->fwd_bwd(inputs, targets, B, T, z_coef, inv_count, want_grads, logits_out, tok_ce);
}

void cuda_grad_reset(CudaModel *cm) { cm->impl->depth = 0; }

void cuda_grad_push(CudaModel *cm) {
    CudaModelBase *b = cm->impl;
    b->span[b->depth] = 1;
    b->depth++;
    while (b->depth >= 2 && b->span[b->depth - 1] == b->span[b->depth - 2]) {
        add_kernel<<<nblk(b->total), 256, 0, b->st>>>(b->gbuf[b->depth - 2], b->gbuf[b->depth - 1], b->total);
        CUDA_LAUNCH_CHECK();
        b->span[b->depth - 2] *= 2;
        b->depth--;
    }
}

void cuda_grad_finish(CudaModel *cm) {
    CudaModelBase *b = cm->impl;
    if (b->depth == 0) { fprintf(stderr, "olmo: error: CUDA gradient tree: no micro-batch pushed\n"); exit(1); }
    for (int i = b->depth - 1; i >= 1; i--) {
        add_kernel<<<nblk(b->total), 256, 0, b->st>>>(b->gbuf[i - 1], b->gbuf[i], b->total);
        CUDA_LAUNCH_CHECK();
        b->span[i - 1] += b->span[i];
    }
    b->depth = 1;
    b->grad_total = b->gbuf[0];
}

void cuda_grad_download(CudaModel *cm, float *host) {
    CudaModelBase *b = cm->impl;
    CUDA_CHECK(cudaStreamSynchronize(b->st));
    CUDA_CHECK(cudaMemcpy(host, b->grad_total, b->total * 4, cudaMemcpyDeviceToHost));
}

void cuda_grad_poison(CudaModel *cm) {
    poison_kernel<<<1, 1, 0, cm->impl->st>>>(cm->impl->grad_total);
    CUDA_LAUNCH_CHECK();
}

double cuda_grad_sumsq(CudaModel *cm) {
    CudaModelBase *b = cm->impl;
    size_t nch = (b->total + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    sumsq_kernel<<<(unsigned)nch, 256, 0, b->st>>>(b->sumsq_partial, b->grad_total, b->total);
    CUDA_LAUNCH_CHECK();
    CUDA_CHECK(cudaMemcpyAsync(b->host_partial.data(), b->sumsq_partial, nch * 8, cudaMemcpyDeviceToHost, b->st));
    CUDA_CHECK(cudaStreamSynchronize(b->st));
    double s = 0.0;
    for (size_t i = 0; i < nch; i++) s += b->host_partial[i];
    return s;
}

void cuda_grad_scale(CudaModel *cm, float s) {
    CudaModelBase *b = cm->impl;
    scale_kernel<<<nblk(b->total), 256, 0, b->st>>>(b->grad_total, s, b->total);
    CUDA_LAUNCH_CHECK();
}

void cuda_adamw(CudaModel *cm, float lr, float beta1, float beta2, float eps, float wd, int decay_embedding, int step) {
    CudaModelBase *b = cm->impl;
    double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    for (int i = 0; i < b->table->n; i++) {
        const ParamInfo *p = &b->table->p[i];
        float wdi = (p->kind == PARAM_EMBEDDING && !decay_embedding) ? 0.0f : wd;
        float decay = 1.0f - lr * wdi;
        size_t o = p->offset;
        if (b->is_bf16) {
            bf16 *wc = ((CudaModelT<bf16> *)b)->w + o;
            adamw_kernel<bf16><<<nblk(p->numel), 256, 0, b->st>>>(b->master + o, b->m + o, b->v + o, b->grad_total + o,
                                                                  wc, p->numel, beta1, beta2, eps, decay, step_size, bc2_sqrt);
        } else {
            adamw_kernel<float><<<nblk(p->numel), 256, 0, b->st>>>(b->master + o, b->m + o, b->v + o, b->grad_total + o,
                                                                   nullptr, p->numel, beta1, beta2, eps, decay, step_size,
                                                                   bc2_sqrt);
        }
        CUDA_LAUNCH_CHECK();
    }
}

}   // extern "C"

// ops_cpu.c: the CPU backend's Ops table (kernels/ops.h) over the kernels of kernels.h:
// buffers are host memory, every op is the CPU kernel itself, fp32 buffers only. The
// matmuls, attention's products and the LM head run at the backend's precision (be->prec:
// fp32, or bf16 operands with fp32 accumulation), passed to the kernels with the backend's own bf16 scratch (its
// Bf16Work, made on the first bf16 call), so CPU backends of different precision live in
// one process without sharing anything.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/bf16.h"
#include "kernels/ops.h"
#include "util/common.h"

typedef struct {
    float *lm_scratch;   // the LM head's (chunk, V) logits, kept between calls
    size_t lm_floats;
    Bf16Work *bf16;      // the bf16 matmuls' operand scratch (NULL until the first)
} CpuOps;

static CpuOps *impl(OpsBackend *be) { return be->impl; }

// The scratch of be's bf16 matmuls (NULL in fp32, where none is used).
static Bf16Work *bf16_work(OpsBackend *be) {
    CpuOps *c = impl(be);
    if (be->prec == PRECISION_BF16 && !c->bf16) c->bf16 = bf16_work_create();
    return c->bf16;
}

static void need_f32(const char *op, DType t) {
    if (t != DT_F32) die("cpu backend: %s: %s buffers are not supported (the CPU keeps fp32 activations)", op, dtype_name(t));
}

static void *cpu_alloc(OpsBackend *be, size_t bytes) {
    (void)be;
    return xmalloc_aligned(bytes ? bytes : 1);
}
static void cpu_free(OpsBackend *be, void *p) { (void)be, free(p); }
static void cpu_copy(OpsBackend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes) memcpy(dst, src, bytes);
}
// Large buffers (the embedding's gradient, V x C, every micro-batch) in 1 MiB pieces
// over the threads: one core's stores do not reach the memory bandwidth.
static void cpu_zero(OpsBackend *be, void *p, size_t bytes) {
    (void)be;
    const size_t piece = (size_t)1 << 20;
    const long n = (long)((bytes + piece - 1) / piece);
#pragma omp parallel for schedule(static) if (n > 4)
    for (long i = 0; i < n; i++) {
        const size_t at = (size_t)i * piece;
        memset((char *)p + at, 0, bytes - at < piece ? bytes - at : piece);
    }
}
static void cpu_sync(OpsBackend *be) { (void)be; }
static void cpu_destroy(OpsBackend *be) {
    free(impl(be)->lm_scratch);
    bf16_work_free(impl(be)->bf16);
    free(be->impl);
    free(be);
}

static void cpu_cast(OpsBackend *be, void *dst, DType t, const float *src, size_t n) {
    need_f32("cast", t);
    cpu_copy(be, dst, src, n * sizeof(float));
}

static void cpu_copy_cols(OpsBackend *be, void *dst, const void *src, DType t, int N, int width, int dstride,
                          int dcol, int sstride, int scol) {
    (void)be;
    need_f32("copy_cols", t);
    float *d = dst;
    const float *s = src;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        memcpy(d + (size_t)n * dstride + dcol, s + (size_t)n * sstride + scol, sizeof(float) * width);
}

static void cpu_gather_rows(OpsBackend *be, void *dst, const void *src, DType t, const int32_t *idx_host, int n,
                            int C) {
    (void)be;
    need_f32("gather_rows", t);
    float *d = dst;
    const float *s = src;
    for (int i = 0; i < n; i++) memcpy(d + (size_t)i * C, s + (size_t)idx_host[i] * C, sizeof(float) * C);
}

static void cpu_embedding_forward(OpsBackend *be, float *out, const int32_t *tokens, const void *E, DType et, int N,
                                  int C) {
    (void)be;
    need_f32("embedding_forward", et);
    embedding_forward(out, tokens, E, N, C);
}

static void cpu_embedding_backward(OpsBackend *be, float *dE, const float *dout, const int32_t *tokens_host, int N,
                                   int C) {
    (void)be;
    embedding_backward(dE, dout, tokens_host, N, C);
}

static void cpu_matmul_forward(OpsBackend *be, void *out, const void *inp, const void *W, DType t, int N, int C,
                               int OC) {
    need_f32("matmul_forward", t);
    matmul_forward(out, inp, W, N, C, OC, be->prec, bf16_work(be));
}

static void cpu_matmul_backward(OpsBackend *be, void *dinp, DType dinp_t, float *dW, const void *dout,
                                const void *inp, const void *W, DType t, int N, int C, int OC, int acc_dinp,
                                int acc_dW) {
    need_f32("matmul_backward", t);
    need_f32("matmul_backward (dinp)", dinp_t);
    matmul_backward(dinp, dW, dout, inp, W, N, C, OC, acc_dinp, acc_dW, be->prec, bf16_work(be));
}

// The residual add after the norm, in place: out = norm(x), then out += resid. IEEE
// addition is commutative, so this is bitwise model.c's residual_forward(h, x, norm).
static void cpu_rmsnorm_forward(OpsBackend *be, void *out, DType out_t, void *copy, float *rstd, const void *inp,
                                DType in_t, const float *w, const float *resid, int N, int C, int in_stride,
                                int out_stride, float eps) {
    (void)be;
    need_f32("rmsnorm_forward", out_t);
    need_f32("rmsnorm_forward", in_t);
    if (copy) die("cpu backend: rmsnorm_forward: a bf16 copy is not supported");
    rmsnorm_forward(out, rstd, inp, w, N, C, in_stride, out_stride, eps);
    if (resid) {
        float *o = out;
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++) o[(size_t)n * out_stride + c] += resid[(size_t)n * out_stride + c];
    }
}

static void cpu_rmsnorm_backward(OpsBackend *be, void *dinp, DType din_t, float *dw, int acc_dw, const void *dout,
                                 DType dout_t, const void *inp, DType in_t, const float *w, const float *rstd, int N,
                                 int C, int dout_stride, int in_stride, int din_stride) {
    (void)be;
    need_f32("rmsnorm_backward", din_t);
    need_f32("rmsnorm_backward", dout_t);
    need_f32("rmsnorm_backward", in_t);
    if (!acc_dw) {
        rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C, dout_stride, in_stride, din_stride);
        return;
    }
    float *tmp = xmalloc(sizeof(float) * C);
    rmsnorm_backward(dinp, tmp, dout, inp, w, rstd, N, C, dout_stride, in_stride, din_stride);
    for (int c = 0; c < C; c++) dw[c] += tmp[c];
    free(tmp);
}

static void cpu_rope_forward(OpsBackend *be, void *x, DType t, const float *cos_t, const float *sin_t, int B, int T,
                             int H, int D) {
    (void)be;
    need_f32("rope_forward", t);
    rope_forward(x, cos_t, sin_t, B, T, H, D);
}

static void cpu_rope_backward(OpsBackend *be, void *dx, DType t, const float *cos_t, const float *sin_t, int B,
                              int T, int H, int D) {
    (void)be;
    need_f32("rope_backward", t);
    rope_backward(dx, cos_t, sin_t, B, T, H, D);
}

static void cpu_attention_forward(OpsBackend *be, void *out, float *lse, const void *q, const void *k, const void *v,
                                  DType t, int B, int T, int NH, int NKV, int D, int window,
                                  const int32_t *doc_start) {
    need_f32("attention_forward", t);
    attention_forward(out, lse, q, k, v, B, T, NH, NKV, D, window, doc_start, be->prec);
}

static void cpu_attention_backward(OpsBackend *be, void *dq, void *dk, void *dv, const void *dout, const void *q,
                                   const void *k, const void *v, const void *out, const float *lse, DType t, int B,
                                   int T, int NH, int NKV, int D, int window, const int32_t *doc_start) {
    need_f32("attention_backward", t);
    attention_backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, D, window, doc_start, be->prec);
}

static void cpu_attention_forward_kv(OpsBackend *be, void *out, float *lse, const void *q, const void *k,
                                     const void *v, DType t, int B, int T, int p0, int NH, int NKV, int D, int window,
                                     const int32_t *doc_start) {
    need_f32("attention_forward_kv", t);
    attention_forward_kv(out, lse, q, k, v, B, T, p0, NH, NKV, D, window, doc_start, be->prec);
}

static void cpu_attention_forward_at(OpsBackend *be, void *out, float *lse, const void *q, const void *k,
                                     const void *v, DType t, int T, int p0, int NH, int NKV, int D, int ldq, int ldk,
                                     int window, const int32_t *doc_start) {
    need_f32("attention_forward_at", t);
    attention_forward_at(out, lse, q, k, v, T, p0, NH, NKV, D, ldq, ldk, window, doc_start, be->prec);
}

static void cpu_attention_backward_at(OpsBackend *be, void *dq, void *dk, void *dv, const void *dout, const void *q,
                                      const void *k, const void *v, const float *lse, DType t, int T, int p0, int NH,
                                      int NKV, int D, int ldq, int ldk, int window, const int32_t *doc_start) {
    need_f32("attention_backward_at", t);
    attention_backward_at(dq, dk, dv, dout, q, k, v, lse, T, p0, NH, NKV, D, ldq, ldk, window, doc_start, be->prec);
}

static void cpu_swiglu_forward(OpsBackend *be, void *out, const void *gu, DType t, int N, int H) {
    (void)be;
    need_f32("swiglu_forward", t);
    swiglu_forward(out, gu, N, H);
}

static void cpu_swiglu_backward(OpsBackend *be, void *dgu, const void *dout, const void *gu, DType t, int N, int H) {
    (void)be;
    need_f32("swiglu_backward", t);
    swiglu_backward(dgu, dout, gu, N, H);
}


static LossSums cpu_lmhead_loss(OpsBackend *be, void *dx, float *dW, int acc_dW, const void *x, const void *W,
                                DType t, const int32_t *targets, int N, int C, int V, float z_coef, float inv_count,
                                float *logits_host, float *tok_ce_host) {
    need_f32("lmhead_loss", t);
    CpuOps *c = impl(be);
    // the packed bf16 path keeps its logits in per-thread blocks (lmhead.c): no scratch
    const int needs_scratch = !(be->prec == PRECISION_BF16 && bf16_packed());
    if (needs_scratch && c->lm_floats < (size_t)CPU_LM_CHUNK * V) {
        free(c->lm_scratch);
        c->lm_floats = (size_t)CPU_LM_CHUNK * V;
        c->lm_scratch = xmalloc_aligned(sizeof(float) * c->lm_floats);
    }
    float *scratch = c->lm_scratch;
    float *dWt = dW && acc_dW ? xmalloc_aligned(sizeof(float) * (size_t)V * C) : dW;
    LossSums s = lmhead_loss_forward_backward(dx, dWt, x, W, targets, N, C, V, z_coef, inv_count, scratch,
                                              CPU_LM_CHUNK, logits_host, tok_ce_host, be->prec, bf16_work(be));
    if (dWt != dW) {
        add_inplace(dW, dWt, (size_t)V * C);
        free(dWt);
    }
    return s;
}


static double cpu_sumsq(OpsBackend *be, const float *x, size_t n, double *part_host) {
    (void)be;
    size_t nch = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    double *part = part_host ? part_host : xmalloc(sizeof(double) * (nch ? nch : 1)), total = 0.0;
    // sumsq() of one chunk is that chunk's partial (its own loop runs single-threaded inside
    // this parallel one); the partials are added in chunk order.
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < nch; c++) {
        size_t lo = c * SUMSQ_CHUNK, len = n - lo < SUMSQ_CHUNK ? n - lo : SUMSQ_CHUNK;
        part[c] = sumsq(x + lo, len);
    }
    for (size_t c = 0; c < nch; c++) total += part[c];
    if (part != part_host) free(part);
    return total;
}

static void cpu_scale(OpsBackend *be, float *x, float s, size_t n) { (void)be, scale_inplace(x, s, n); }
static void cpu_add(OpsBackend *be, float *acc, const float *x, size_t n) { (void)be, add_inplace(acc, x, n); }

static void cpu_adamw(OpsBackend *be, float *p, float *m, float *v, const float *g, void *wcopy, DType wt, size_t n,
                      float lr, float beta1, float beta2, float eps, float wd, int step) {
    adamw_update(p, m, v, g, n, lr, beta1, beta2, eps, wd, step);
    if (wcopy) cpu_cast(be, wcopy, wt, p, n);
}

// The clip folded into AdamW (ops.h): one pass over p, m, v, g instead of two over g first.
static void cpu_adamw_spans(OpsBackend *be, float *p, float *m, float *v, const float *g, void *wcopy, DType wt,
                            const AdamWSpan *spans, int nspans, float clip, float lr, float beta1, float beta2,
                            float eps, int step) {
    for (int s = 0; s < nspans; s++) {
        const AdamWSpan *sp = &spans[s];
        adamw_update_clipped(p + sp->at, m + sp->at, v + sp->at, g + sp->at, sp->n, clip, lr, beta1, beta2, eps,
                             sp->wd, step);
        if (wcopy) cpu_cast(be, (char *)wcopy + sp->at * dtype_size(wt), wt, p + sp->at, sp->n);
    }
}

static const Ops CPU_OPS = {
    .alloc = cpu_alloc, .free = cpu_free, .upload = cpu_copy, .download = cpu_copy, .zero = cpu_zero,
    .sync = cpu_sync, .destroy = cpu_destroy, .cast = cpu_cast, .copy_cols = cpu_copy_cols,
    .gather_rows = cpu_gather_rows,
    .embedding_forward = cpu_embedding_forward, .embedding_backward = cpu_embedding_backward,
    .matmul_forward = cpu_matmul_forward, .matmul_backward = cpu_matmul_backward,
    .rmsnorm_forward = cpu_rmsnorm_forward, .rmsnorm_backward = cpu_rmsnorm_backward,
    .rope_forward = cpu_rope_forward, .rope_backward = cpu_rope_backward,
    .attention_forward = cpu_attention_forward, .attention_backward = cpu_attention_backward,
    .attention_forward_kv = cpu_attention_forward_kv,
    .attention_forward_at = cpu_attention_forward_at, .attention_backward_at = cpu_attention_backward_at,
    .swiglu_forward = cpu_swiglu_forward, .swiglu_backward = cpu_swiglu_backward,
    .lmhead_loss = cpu_lmhead_loss,
    .sumsq = cpu_sumsq, .scale = cpu_scale, .add = cpu_add, .adamw = cpu_adamw,
    .adamw_spans = cpu_adamw_spans,
};

OpsBackend *ops_cpu_create(Precision prec) {
    OpsBackend *be = xcalloc(1, sizeof *be);
    be->impl = xcalloc(1, sizeof(CpuOps));
    be->ops = &CPU_OPS;
    be->name = "cpu";
    be->act = DT_F32;
    be->prec = prec;
    if (prec == PRECISION_BF16) matmul_bf16_init();
    return be;
}

// ops_profile.c: `olmo bench --profile` (ops_profile.h): a copy of a CPU backend's op table
// whose compute entries time the original entry and add its wall time, model FLOPs and
// minimal memory traffic to the op's family. Rates: GEMMs, the LM head and attention in
// model FLOPs (2 per multiply-add; backward twice the forward, recomputation not counted,
// as MFU counts), the memory-bound ops in the bytes they must read and write once (fp32).
#include "kernels/cpu/ops_profile.h"

#include <stdlib.h>
#include <string.h>

#include "util/common.h"

typedef enum {
    F_QKV, F_AO, F_UP, F_DOWN, F_GEMM, F_LMHEAD, F_ATTN, F_NORM, F_ROPE, F_SWIGLU, F_EMBED, F_OPTIM, F_COPY, NFAM
} Family;
// What a family's rate is measured against: the GEMM peak of the run's precision (the
// matmuls, the LM head and attention's products all run at it), or memory bandwidth.
enum { RATE_GEMM, RATE_BW };
static const struct { const char *name; int rate; } FAMILY[NFAM] = {
    {"GEMM qkv", RATE_GEMM},          {"GEMM attn-out", RATE_GEMM}, {"GEMM mlp up/gate", RATE_GEMM},
    {"GEMM mlp down", RATE_GEMM},     {"GEMM other", RATE_GEMM},    {"LM head + loss", RATE_GEMM},
    {"attention", RATE_GEMM},         {"RMSNorm", RATE_BW},         {"RoPE", RATE_BW},
    {"SwiGLU", RATE_BW},              {"embedding", RATE_BW},       {"optimizer (norm, clip, AdamW)", RATE_BW},
    {"copies (cast, zero, columns)", RATE_BW},
};

static struct {
    const Ops *orig;
    Ops table;
    ProfileShapes shapes;
    double sec[NFAM], work[NFAM];   // work: FLOPs (RATE_GEMM) or bytes (RATE_BW)
    long calls[NFAM];
} P;

static void add(Family f, double t0, double work) {
    P.sec[f] += now_seconds() - t0;
    P.work[f] += work;
    P.calls[f]++;
}

// A matmul's role from its input and output widths (ops_profile.h).
static Family gemm_role(int C, int OC) {
    const ProfileShapes *s = &P.shapes;
    if (C == s->d_model && OC == s->q_width + 2 * s->kv_width) return F_QKV;
    if (C == s->q_width && OC == s->d_model) return F_AO;
    if (C == s->d_model && OC == 2 * s->mlp_hidden) return F_UP;
    if (C == s->mlp_hidden && OC == s->d_model) return F_DOWN;
    return F_GEMM;
}

// (query, key) pairs attention computes: query t of each row sees keys first..t (attention.c).
static double attention_pairs(int B, int T, int p0, int window, const int32_t *doc_start) {
    double pairs = 0;
    const int Tk = p0 + T, wlen = window < Tk ? window : Tk;
    for (int b = 0; b < B; b++)
        for (int t = p0; t < Tk; t++) {
            int lo = t - wlen + 1 > 0 ? t - wlen + 1 : 0;
            if (doc_start && doc_start[(size_t)b * Tk + t] > lo) lo = doc_start[(size_t)b * Tk + t];
            pairs += t - lo + 1;
        }
    return pairs;
}

static void p_matmul_forward(OpsBackend *be, void *out, const void *inp, const void *W, DType t, int N, int C,
                             int OC) {
    double t0 = now_seconds();
    P.orig->matmul_forward(be, out, inp, W, t, N, C, OC);
    add(gemm_role(C, OC), t0, 2.0 * N * C * OC);
}

static void p_matmul_backward(OpsBackend *be, void *dinp, DType dinp_t, float *dW, const void *dout, const void *inp,
                              const void *W, DType t, int N, int C, int OC, int acc_dinp, int acc_dW) {
    double t0 = now_seconds();
    P.orig->matmul_backward(be, dinp, dinp_t, dW, dout, inp, W, t, N, C, OC, acc_dinp, acc_dW);
    add(gemm_role(C, OC), t0, 2.0 * N * C * OC * ((dinp != NULL) + (dW != NULL)));
}

static LossSums p_lmhead_loss(OpsBackend *be, void *dx, float *dW, int acc_dW, const void *x, const void *W, DType t,
                              const int32_t *targets, int N, int C, int V, float z_coef, float inv_count,
                              float *logits_host, float *tok_ce_host) {
    double t0 = now_seconds();
    LossSums s = P.orig->lmhead_loss(be, dx, dW, acc_dW, x, W, t, targets, N, C, V, z_coef, inv_count, logits_host,
                                     tok_ce_host);
    add(F_LMHEAD, t0, 2.0 * N * C * V * (1 + (dx != NULL) + (dW != NULL)));
    return s;
}

static void p_attention_forward(OpsBackend *be, void *out, float *lse, const void *q, const void *k, const void *v,
                                DType t, int B, int T, int NH, int NKV, int D, int window, const int32_t *doc_start) {
    const double pairs = attention_pairs(B, T, 0, window, doc_start), t0 = now_seconds();
    P.orig->attention_forward(be, out, lse, q, k, v, t, B, T, NH, NKV, D, window, doc_start);
    add(F_ATTN, t0, 4.0 * D * NH * pairs);   // QK^T and PV
}

static void p_attention_backward(OpsBackend *be, void *dq, void *dk, void *dv, const void *dout, const void *q,
                                 const void *k, const void *v, const void *out, const float *lse, DType t, int B,
                                 int T, int NH, int NKV, int D, int window, const int32_t *doc_start) {
    const double pairs = attention_pairs(B, T, 0, window, doc_start), t0 = now_seconds();
    P.orig->attention_backward(be, dq, dk, dv, dout, q, k, v, out, lse, t, B, T, NH, NKV, D, window, doc_start);
    add(F_ATTN, t0, 8.0 * D * NH * pairs);   // dP, dV, dQ, dK (the recomputed scores not counted)
}

static void p_rmsnorm_forward(OpsBackend *be, void *out, DType out_t, void *copy, float *rstd, const void *inp,
                              DType in_t, const float *w, const float *resid, int N, int C, int in_stride,
                              int out_stride, float eps) {
    double t0 = now_seconds();
    P.orig->rmsnorm_forward(be, out, out_t, copy, rstd, inp, in_t, w, resid, N, C, in_stride, out_stride, eps);
    add(F_NORM, t0, 4.0 * N * C * (2 + (resid != NULL)));
}

static void p_rmsnorm_backward(OpsBackend *be, void *dinp, DType din_t, float *dw, int acc_dw, const void *dout,
                               DType dout_t, const void *inp, DType in_t, const float *w, const float *rstd, int N,
                               int C, int dout_stride, int in_stride, int din_stride) {
    double t0 = now_seconds();
    P.orig->rmsnorm_backward(be, dinp, din_t, dw, acc_dw, dout, dout_t, inp, in_t, w, rstd, N, C, dout_stride,
                             in_stride, din_stride);
    add(F_NORM, t0, 4.0 * N * C * 3);
}

static void p_rope_forward(OpsBackend *be, void *x, DType t, const float *cos_t, const float *sin_t, int B, int T,
                           int H, int D) {
    double t0 = now_seconds();
    P.orig->rope_forward(be, x, t, cos_t, sin_t, B, T, H, D);
    add(F_ROPE, t0, 8.0 * B * T * H * D);
}

static void p_rope_backward(OpsBackend *be, void *dx, DType t, const float *cos_t, const float *sin_t, int B, int T,
                            int H, int D) {
    double t0 = now_seconds();
    P.orig->rope_backward(be, dx, t, cos_t, sin_t, B, T, H, D);
    add(F_ROPE, t0, 8.0 * B * T * H * D);
}

static void p_swiglu_forward(OpsBackend *be, void *out, const void *gu, DType t, int N, int H) {
    double t0 = now_seconds();
    P.orig->swiglu_forward(be, out, gu, t, N, H);
    add(F_SWIGLU, t0, 12.0 * N * H);   // read (N, 2H), write (N, H)
}

static void p_swiglu_backward(OpsBackend *be, void *dgu, const void *dout, const void *gu, DType t, int N, int H) {
    double t0 = now_seconds();
    P.orig->swiglu_backward(be, dgu, dout, gu, t, N, H);
    add(F_SWIGLU, t0, 20.0 * N * H);   // read dout (N, H) and gu (N, 2H), write dgu (N, 2H)
}

static void p_embedding_forward(OpsBackend *be, float *out, const int32_t *tokens, const void *E, DType et, int N,
                                int C) {
    double t0 = now_seconds();
    P.orig->embedding_forward(be, out, tokens, E, et, N, C);
    add(F_EMBED, t0, 8.0 * N * C);
}

static void p_embedding_backward(OpsBackend *be, float *dE, const float *dout, const int32_t *tokens_host, int N,
                                 int C) {
    double t0 = now_seconds();
    P.orig->embedding_backward(be, dE, dout, tokens_host, N, C);
    add(F_EMBED, t0, 12.0 * N * C);   // read dout, read and write dE's rows
}

static double p_sumsq(OpsBackend *be, const float *x, size_t n, double *part_host) {
    double t0 = now_seconds(), s = P.orig->sumsq(be, x, n, part_host);
    add(F_OPTIM, t0, 4.0 * n);
    return s;
}

static void p_scale(OpsBackend *be, float *x, float s, size_t n) {
    double t0 = now_seconds();
    P.orig->scale(be, x, s, n);
    add(F_OPTIM, t0, 8.0 * n);
}

static void p_adamw(OpsBackend *be, float *p, float *m, float *v, const float *g, void *wcopy, DType wt, size_t n,
                    float lr, float beta1, float beta2, float eps, float wd, int step) {
    double t0 = now_seconds();
    P.orig->adamw(be, p, m, v, g, wcopy, wt, n, lr, beta1, beta2, eps, wd, step);
    add(F_OPTIM, t0, 28.0 * n + (wcopy ? (double)dtype_size(wt) * n : 0));   // read p m v g, write p m v
}

static void p_adamw_spans(OpsBackend *be, float *p, float *m, float *v, const float *g, void *wcopy, DType wt,
                          const AdamWSpan *spans, int nspans, float clip, float lr, float beta1, float beta2,
                          float eps, int step) {
    double t0 = now_seconds(), n = 0;
    P.orig->adamw_spans(be, p, m, v, g, wcopy, wt, spans, nspans, clip, lr, beta1, beta2, eps, step);
    for (int s = 0; s < nspans; s++) n += (double)spans[s].n;
    add(F_OPTIM, t0, 28.0 * n + (wcopy ? (double)dtype_size(wt) * n : 0));   // as p_adamw: the clip is in the read of g
}

static void p_cast(OpsBackend *be, void *dst, DType t, const float *src, size_t n) {
    double t0 = now_seconds();
    P.orig->cast(be, dst, t, src, n);
    add(F_COPY, t0, (4.0 + dtype_size(t)) * n);
}

static void p_zero(OpsBackend *be, void *p, size_t bytes) {
    double t0 = now_seconds();
    P.orig->zero(be, p, bytes);
    add(F_COPY, t0, (double)bytes);
}

static void p_copy_cols(OpsBackend *be, void *dst, const void *src, DType t, int N, int width, int dstride, int dcol,
                        int sstride, int scol) {
    double t0 = now_seconds();
    P.orig->copy_cols(be, dst, src, t, N, width, dstride, dcol, sstride, scol);
    add(F_COPY, t0, 2.0 * dtype_size(t) * N * width);
}

void ops_profile_attach(OpsBackend *be, const ProfileShapes *shapes) {
    if (P.orig) die("ops_profile_attach: one profiled backend per process");
    P.orig = be->ops;
    P.shapes = *shapes;
    P.table = *be->ops;
    Ops *o = &P.table;
    o->matmul_forward = p_matmul_forward, o->matmul_backward = p_matmul_backward, o->lmhead_loss = p_lmhead_loss;
    o->attention_forward = p_attention_forward, o->attention_backward = p_attention_backward;
    o->rmsnorm_forward = p_rmsnorm_forward, o->rmsnorm_backward = p_rmsnorm_backward;
    o->rope_forward = p_rope_forward, o->rope_backward = p_rope_backward;
    o->swiglu_forward = p_swiglu_forward, o->swiglu_backward = p_swiglu_backward;
    o->embedding_forward = p_embedding_forward, o->embedding_backward = p_embedding_backward;
    o->sumsq = p_sumsq, o->scale = p_scale, o->adamw = p_adamw;
    if (o->adamw_spans) o->adamw_spans = p_adamw_spans;
    o->cast = p_cast, o->zero = p_zero, o->copy_cols = p_copy_cols;
    be->ops = o;
}

void ops_profile_reset(void) {
    memset(P.sec, 0, sizeof P.sec);
    memset(P.work, 0, sizeof P.work);
    memset(P.calls, 0, sizeof P.calls);
}

void ops_profile_report(FILE *f, double step_s, int steps, const ProfilePeaks *pk) {
    const double per = 1.0 / steps, step = step_s * per;
    double in_ops = 0;
    for (int i = 0; i < NFAM; i++) in_ops += P.sec[i];
    fprintf(f, "profile: %.1f ms/step; rates against: GEMM peak (%s) %.1f GFLOP/s, "
               "%s %.1f GB/s (above 100%%: cache-resident operands)\n",
            1e3 * step, pk->gemm_name, pk->gemm_peak / 1e9, pk->bw_about, pk->bandwidth / 1e9);
    for (int i = 0; i < NFAM; i++) {
        if (!P.calls[i]) continue;
        const double s = P.sec[i] * per, rate = P.sec[i] > 0 ? P.work[i] / P.sec[i] : 0;
        const int r = FAMILY[i].rate;
        const double peak = r == RATE_GEMM ? pk->gemm_peak : pk->bandwidth;
        fprintf(f, "profile:   %-30s %8.2f ms/step %5.1f%% | %8.1f %s %5.1f%% of %s (%ld calls/step)\n", FAMILY[i].name,
                1e3 * s, 100 * s / step, rate / 1e9, r == RATE_BW ? "GB/s   " : "GFLOP/s", 100 * rate / peak,
                r == RATE_GEMM ? pk->gemm_name : "bandwidth", (long)(P.calls[i] * per));
    }
    const double rest = step - in_ops * per;
    fprintf(f, "profile:   %-30s %8.2f ms/step %5.1f%% | outside the op table: gradient accumulation over "
               "micro-batches, reduction, step loop\n", "rest of the step", 1e3 * rest, 100 * rest / step);
}

double ops_profile_triad_bandwidth(size_t floats, int reps) {
    float *a = xmalloc_aligned(sizeof(float) * floats), *b = xmalloc_aligned(sizeof(float) * floats),
          *c = xmalloc_aligned(sizeof(float) * floats);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < floats; i++) a[i] = 0, b[i] = 1, c[i] = 2;
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_seconds();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < floats; i++) a[i] = b[i] + 0.5f * c[i];
        double t = now_seconds() - t0;
        if (t > 0 && 12.0 * floats / t > best) best = 12.0 * floats / t;
    }
    free(a), free(b), free(c);
    return best;
}

// test_backend_ops.c: every op of kernels/ops.h, forward and backward, on every backend this
// binary has, against the CPU fp32 kernel (kernels.h) on the same inputs -- ggml's
// test-backend-ops for olmo.c. Backends: cpu (fp32), cpu-bf16 (the bf16 matmul engine of
// this CPU: AMX, AVX512_BF16 or emulated), and in CUDA builds (real, or emulated by
// tests/cuemu in CI) cuda-fp32 and cuda-bf16 (bf16 activations).
// Shapes hold the edge cases: T = 33 and 150 (not a multiple of any tile), window 1 (a
// query sees only itself), a window shorter than a tile, GQA 2:1 and 4:1, document
// boundaries crossing tiles, YaRN tables, masked targets, strided QK-norm rows, an
// accumulating backward, an LM head longer than the CPU's token chunk (CPU_LM_CHUNK).
// Inputs of a bf16 backend are rounded to bf16 before the reference sees them, so what is
// measured is the backend's arithmetic, not the input rounding.
// Error: max |backend - reference| / max |reference| per output. Tolerances:
//   cpu        0 (bitwise: the table calls the reference kernels; the KV-cache attention,
//              a different summation path than the full forward it is checked against, 1e-5);
//   cpu-bf16   1e-5 (operands already bf16 values: only the summation order differs);
//   cuda-fp32  1e-5 (summation order);
//   cuda-bf16  1e-2 (outputs rounded to bf16, 2^-9 relative each, through a few ops).
// Ops that round intermediates they form themselves are held to each backend's "inner"
// tolerance (the last column of run_backend: 0, 1e-2, 1e-5, 1e-2): the LM head's backward
// multiplies by dlogits it forms, and bf16 attention multiplies by P and dS it forms, each
// rounded to bf16 (2^-9 relative) as a matmul operand, so on cpu-bf16 their outputs are held
// to the bf16 tolerance, 1e-2 (the tolerance of the CUDA bf16 attention kernels too).
//
// The cases are one table (CASES below: op family, the Ops entries it runs, shape); the
// test FAILS when an entry of the Ops table (kernels/ops.h) has no case. A failure prints
// backend, op, output, shape, max error and tolerance.
//   test_backend_ops [-o OP] [-b BACKEND] [-p] [-l]
//   -o OP       only cases whose family or Ops entry contains OP (e.g. -o attention)
//   -b BACKEND  only that backend: cpu, cpu-bf16, cuda-fp32, cuda-bf16
//   -p          also time each case's backend calls (after one warm-up run of the case) and
//               print GFLOP/s (compute-bound ops) or GB/s (memory-bound ops)
//   -l          list the cases and exit
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/blas_core.h"
#include "check.h"
#include "kernels/cpu/bf16.h"
#include "kernels/ops.h"
#include "model/docmask.h"

typedef struct {
    OpsBackend *be;
    const char *label;
    double tol;
    double tol_inner;   // outputs of an op that rounds its own intermediates to bf16 (the LM head's dlogits)
} Case;

static Case g_case;
static const char *g_shape = "";   // the running case's shape, for failure messages
static int g_perf;                 // -p: time the backend calls
static double g_secs;              // seconds in backend calls of the running case
static double g_worst, g_worst_inner;   // under tol, under tol_inner
static int g_inner;                     // 1 while outputs are held to tol_inner

// ---- host <-> backend buffers in the backend's type ---------------------------------------
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {   // uniform in [-1, 1)
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) / 8388608.0 - 1.0);
}

static float *rand_vec(size_t n, float scale) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = scale * frand();
    return x;
}

// The values the backend will hold for x in type t (bf16: rounded), in place.
static void round_to(float *x, size_t n, DType t) {
    if (t == DT_BF16)
        for (size_t i = 0; i < n; i++) x[i] = bf16_to_float(bf16_round(x[i]));
}

static void *to_dev(const float *x, size_t n, DType t) {
    OpsBackend *be = g_case.be;
    void *d = be->ops->alloc(be, n * dtype_size(t));
    if (t == DT_BF16) {
        uint16_t *h = malloc(2 * (n ? n : 1));
        for (size_t i = 0; i < n; i++) h[i] = bf16_round(x[i]);
        be->ops->upload(be, d, h, 2 * n);
        free(h);
    } else {
        be->ops->upload(be, d, x, 4 * n);
    }
    return d;
}

static void *to_dev_i32(const int32_t *x, size_t n) {
    OpsBackend *be = g_case.be;
    void *d = be->ops->alloc(be, 4 * n);
    be->ops->upload(be, d, x, 4 * n);
    return d;
}

static float *from_dev(const void *d, size_t n, DType t) {
    OpsBackend *be = g_case.be;
    float *x = malloc(sizeof(float) * (n ? n : 1));
    be->ops->sync(be);
    if (t == DT_BF16) {
        uint16_t *h = malloc(2 * (n ? n : 1));
        be->ops->download(be, h, d, 2 * n);
        for (size_t i = 0; i < n; i++) x[i] = bf16_to_float(h[i]);
        free(h);
    } else {
        be->ops->download(be, x, d, 4 * n);
    }
    return x;
}

static void dfree(void *d) { g_case.be->ops->free(g_case.be, d); }

// Compare the backend's output d (n of type t) with ref; frees nothing.
static void expect(const char *op, const char *what, const void *d, DType t, const float *ref, size_t n) {
    float *x = from_dev(d, n, t);
    double mx = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs((double)ref[i]));
        double e = fabs((double)x[i] - ref[i]);
        if (!(e <= err)) err = isnan(e) ? INFINITY : e;
    }
    double rel = mx > 0 ? err / mx : err;
    double *worst = g_inner ? &g_worst_inner : &g_worst;
    if (rel > *worst) *worst = rel;
    CHECK(rel <= g_case.tol, "%s: %s %s [%s]: max rel err %.3g > tolerance %.1g", g_case.label, op, what, g_shape, rel,
          g_case.tol);
    free(x);
}

static float *copy_vec(const float *x, size_t n) {
    float *y = malloc(sizeof(float) * (n ? n : 1));
    memcpy(y, x, sizeof(float) * n);
    return y;
}

#define OPS (g_case.be->ops)
#define BE (g_case.be)
#define ACT (g_case.be->act)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
// One backend call; with -p its time (the queue drained before and after) adds to g_secs.
#define TIMED(call)                               \
    do {                                          \
        double t0_ = 0;                           \
        if (g_perf) OPS->sync(BE), t0_ = now_s(); \
        call;                                     \
        if (g_perf) OPS->sync(BE), g_secs += now_s() - t0_; \
    } while (0)

// ---- the ops ------------------------------------------------------------------------------
static void test_matmul(int N, int C, int OC) {
    const DType t = ACT;
    float *x = rand_vec((size_t)N * C, 1), *w = rand_vec((size_t)OC * C, 0.2f), *dy = rand_vec((size_t)N * OC, 1);
    round_to(x, (size_t)N * C, DT_BF16 == t || BE->prec == PRECISION_BF16 ? DT_BF16 : DT_F32);
    round_to(w, (size_t)OC * C, DT_BF16 == t || BE->prec == PRECISION_BF16 ? DT_BF16 : DT_F32);
    round_to(dy, (size_t)N * OC, DT_BF16 == t || BE->prec == PRECISION_BF16 ? DT_BF16 : DT_F32);
    float *y = malloc(sizeof(float) * N * OC), *dx = malloc(sizeof(float) * N * C), *dw0 = rand_vec((size_t)OC * C, 1);
    float *dw = copy_vec(dw0, (size_t)OC * C);
    matmul_forward(y, x, w, N, C, OC, PRECISION_FP32, NULL);
    matmul_backward(dx, dw, dy, x, w, N, C, OC, 0, 1, PRECISION_FP32, NULL);   // dW accumulates onto dw0
    void *X = to_dev(x, (size_t)N * C, t), *Wd = to_dev(w, (size_t)OC * C, t), *DY = to_dev(dy, (size_t)N * OC, t);
    void *Y = OPS->alloc(BE, (size_t)N * OC * dtype_size(t)), *DX = OPS->alloc(BE, (size_t)N * C * 4);
    float *DW = to_dev(dw0, (size_t)OC * C, DT_F32);
    TIMED(OPS->matmul_forward(BE, Y, X, Wd, t, N, C, OC));
    TIMED(OPS->matmul_backward(BE, DX, DT_F32, DW, DY, X, Wd, t, N, C, OC, 0, 1));
    expect("matmul_forward", "out", Y, t, y, (size_t)N * OC);
    expect("matmul_backward", "dinp", DX, DT_F32, dx, (size_t)N * C);
    expect("matmul_backward", "dW (accumulated)", DW, DT_F32, dw, (size_t)OC * C);
    dfree(X), dfree(Wd), dfree(DY), dfree(Y), dfree(DX), dfree(DW);
    free(x), free(w), free(dy), free(y), free(dx), free(dw0), free(dw);
}

// QK-norm's shape: rows of C inside wider rows (in_stride), optionally + a residual.
static void test_rmsnorm(int N, int C, int in_stride, int with_resid) {
    const DType t = ACT, out_t = with_resid ? DT_F32 : t;
    const float eps = 1e-6f;
    float *x = rand_vec((size_t)N * in_stride, 2), *w = rand_vec(C, 1), *res = rand_vec((size_t)N * C, 1);
    float *dy = rand_vec((size_t)N * C, 1), *dw0 = rand_vec(C, 1);
    round_to(x, (size_t)N * in_stride, t);
    round_to(dy, (size_t)N * C, out_t);
    float *y = malloc(sizeof(float) * N * C), *rstd = malloc(sizeof(float) * N);
    float *dx = calloc((size_t)N * in_stride, sizeof(float)), *dw = malloc(sizeof(float) * C);
    rmsnorm_forward(y, rstd, x, w, N, C, in_stride, C, eps);
    if (with_resid)
        for (size_t i = 0; i < (size_t)N * C; i++) y[i] += res[i];
    rmsnorm_backward(dx, dw, dy, x, w, rstd, N, C, C, in_stride, in_stride);
    for (int c = 0; c < C; c++) dw[c] += dw0[c];
    void *X = to_dev(x, (size_t)N * in_stride, t), *Wd = to_dev(w, C, DT_F32), *R = to_dev(res, (size_t)N * C, DT_F32);
    void *Y = OPS->alloc(BE, (size_t)N * C * dtype_size(out_t)), *RS = OPS->alloc(BE, 4 * (size_t)N);
    void *DY = to_dev(dy, (size_t)N * C, out_t), *DW = to_dev(dw0, C, DT_F32);
    float *zeros = calloc((size_t)N * in_stride, sizeof(float));
    void *DX = to_dev(zeros, (size_t)N * in_stride, t);
    TIMED(OPS->rmsnorm_forward(BE, Y, out_t, NULL, RS, X, t, Wd, with_resid ? R : NULL, N, C, in_stride, C, eps));
    TIMED(OPS->rmsnorm_backward(BE, DX, t, DW, 1, DY, out_t, X, t, Wd, RS, N, C, C, in_stride, in_stride));
    expect("rmsnorm_forward", with_resid ? "out (+ residual)" : "out", Y, out_t, y, (size_t)N * C);
    expect("rmsnorm_forward", "rstd", RS, DT_F32, rstd, N);
    expect("rmsnorm_backward", "dinp", DX, t, dx, (size_t)N * in_stride);
    expect("rmsnorm_backward", "dw (accumulated)", DW, DT_F32, dw, C);
    dfree(X), dfree(Wd), dfree(R), dfree(Y), dfree(RS), dfree(DY), dfree(DW), dfree(DX);
    free(x), free(w), free(res), free(dy), free(dw0), free(y), free(rstd), free(dx), free(dw), free(zeros);
}

static void test_rope(int B, int T, int H, int D, int yarn) {
    const DType t = ACT;
    RopeScaling s = {ROPE_SCALING_YARN, 8.0, 32.0, 1.0, 16};
    float *cs = malloc(sizeof(float) * T * D / 2), *sn = malloc(sizeof(float) * T * D / 2);
    rope_tables(cs, sn, T, D, 500000.0, yarn ? &s : NULL);
    size_t n = (size_t)B * T * H * D;
    float *x = rand_vec(n, 1), *dx = rand_vec(n, 1);
    round_to(x, n, t), round_to(dx, n, t);
    void *X = to_dev(x, n, t), *DX = to_dev(dx, n, t), *CS = to_dev(cs, (size_t)T * D / 2, DT_F32);
    void *SN = to_dev(sn, (size_t)T * D / 2, DT_F32);
    rope_forward(x, cs, sn, B, T, H, D);
    rope_backward(dx, cs, sn, B, T, H, D);
    TIMED(OPS->rope_forward(BE, X, t, CS, SN, B, T, H, D));
    TIMED(OPS->rope_backward(BE, DX, t, CS, SN, B, T, H, D));
    expect(yarn ? "rope_forward (YaRN)" : "rope_forward", "x", X, t, x, n);
    expect(yarn ? "rope_backward (YaRN)" : "rope_backward", "dx", DX, t, dx, n);
    dfree(X), dfree(DX), dfree(CS), dfree(SN);
    free(cs), free(sn), free(x), free(dx);
}

// The fused QK-norm + RoPE + V split (a backend with qkv_split_*; the CPU has none) against
// the same backend's unfused chain, bitwise: both directions, dw accumulating.
static void test_qkv_split(int B, int T, int NH, int NKV, int D) {
    if (!OPS->qkv_split_forward) return;
    const DType t = ACT;
    const int N = B * T, Q = NH * D, KV = NKV * D, ld = Q + 2 * KV;
    const float eps = 1e-6f;
    float *cs = malloc(sizeof(float) * T * D / 2), *sn = malloc(sizeof(float) * T * D / 2);
    rope_tables(cs, sn, T, D, 500000.0, NULL);
    float *qkv = rand_vec((size_t)N * ld, 2), *wq = rand_vec(Q, 1), *wk = rand_vec(KV, 1), *dw0 = rand_vec(Q + KV, 1);
    float *dq = rand_vec((size_t)N * Q, 1), *dk = rand_vec((size_t)N * KV, 1), *dv = rand_vec((size_t)N * KV, 1);
    void *CS = to_dev(cs, (size_t)T * D / 2, DT_F32), *SN = to_dev(sn, (size_t)T * D / 2, DT_F32);
    void *X = to_dev(qkv, (size_t)N * ld, t), *WQ = to_dev(wq, Q, DT_F32), *WK = to_dev(wk, KV, DT_F32);
    void *out[2][5], *grad[2][5];   // [fused?][q k v q_rstd k_rstd], [dqkv dwq dwk dq dk]
    for (int f = 0; f < 2; f++) {
        out[f][0] = OPS->alloc(BE, (size_t)N * Q * dtype_size(t));
        out[f][1] = OPS->alloc(BE, (size_t)N * KV * dtype_size(t));
        out[f][2] = OPS->alloc(BE, (size_t)N * KV * dtype_size(t));
        out[f][3] = OPS->alloc(BE, 4 * (size_t)N), out[f][4] = OPS->alloc(BE, 4 * (size_t)N);
        grad[f][0] = OPS->alloc(BE, (size_t)N * ld * dtype_size(t));
        grad[f][1] = to_dev(dw0, Q, DT_F32), grad[f][2] = to_dev(dw0 + Q, KV, DT_F32);
        grad[f][3] = to_dev(dq, (size_t)N * Q, t), grad[f][4] = to_dev(dk, (size_t)N * KV, t);
    }
    void *DV = to_dev(dv, (size_t)N * KV, t);
    void **u = out[0], **g = grad[0];
    OPS->rmsnorm_forward(BE, u[0], t, NULL, u[3], X, t, WQ, NULL, N, Q, ld, Q, eps);
    OPS->rmsnorm_forward(BE, u[1], t, NULL, u[4], (char *)X + (size_t)Q * dtype_size(t), t, WK, NULL, N, KV, ld, KV, eps);
    OPS->copy_cols(BE, u[2], X, t, N, KV, KV, 0, ld, Q + KV);
    OPS->rope_forward(BE, u[0], t, CS, SN, B, T, NH, D);
    OPS->rope_forward(BE, u[1], t, CS, SN, B, T, NKV, D);
    OPS->rope_backward(BE, g[3], t, CS, SN, B, T, NH, D);
    OPS->rope_backward(BE, g[4], t, CS, SN, B, T, NKV, D);
    OPS->rmsnorm_backward(BE, g[0], t, g[1], 1, g[3], t, X, t, WQ, u[3], N, Q, Q, ld, ld);
    OPS->rmsnorm_backward(BE, (char *)g[0] + (size_t)Q * dtype_size(t), t, g[2], 1, g[4], t,
                          (char *)X + (size_t)Q * dtype_size(t), t, WK, u[4], N, KV, KV, ld, ld);
    OPS->copy_cols(BE, g[0], DV, t, N, KV, ld, Q + KV, KV, 0);
    void **F = out[1], **G = grad[1];
    TIMED(OPS->qkv_split_forward(BE, F[0], F[1], F[2], F[3], F[4], X, t, WQ, WK, CS, SN, B, T, NH, NKV, D, eps));
    TIMED(OPS->qkv_split_backward(BE, G[0], G[1], G[2], 1, G[3], G[4], DV, X, t, WQ, WK, F[3], F[4], CS, SN, B, T, NH,
                                  NKV, D));
    const double tol = g_case.tol;
    g_case.tol = 0;
    static const char *const on[5] = {"q", "k", "v", "q_rstd", "k_rstd"}, *const gn[3] = {"dqkv", "dq_norm", "dk_norm"};
    const size_t no[5] = {(size_t)N * Q, (size_t)N * KV, (size_t)N * KV, N, N}, ng[3] = {(size_t)N * ld, Q, KV};
    for (int i = 0; i < 5; i++) {
        float *ref = from_dev(u[i], no[i], i < 3 ? t : DT_F32);
        expect("qkv_split_forward (= the unfused chain, bitwise)", on[i], F[i], i < 3 ? t : DT_F32, ref, no[i]);
        free(ref);
    }
    for (int i = 0; i < 3; i++) {
        float *ref = from_dev(g[i], ng[i], i ? DT_F32 : t);
        expect("qkv_split_backward (= the unfused chain, bitwise)", gn[i], G[i], i ? DT_F32 : t, ref, ng[i]);
        free(ref);
    }
    g_case.tol = tol;
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < 5; i++) dfree(out[f][i]), dfree(grad[f][i]);
    dfree(CS), dfree(SN), dfree(X), dfree(WQ), dfree(WK), dfree(DV);
    free(cs), free(sn), free(qkv), free(wq), free(wk), free(dw0), free(dq), free(dk), free(dv);
}

static void test_attention(int B, int T, int NH, int NKV, int D, int window, int docs) {
    const DType t = ACT;
    size_t nq = (size_t)B * T * NH * D, nk = (size_t)B * T * NKV * D;
    float *q = rand_vec(nq, 1), *k = rand_vec(nk, 1), *v = rand_vec(nk, 1), *dout = rand_vec(nq, 1);
    round_to(q, nq, t), round_to(k, nk, t), round_to(v, nk, t), round_to(dout, nq, t);
    int32_t *doc = NULL;
    if (docs) {   // documents of 7, 40, 1, ... tokens: boundaries inside and across the 32-row tiles
        int32_t *tok = malloc(sizeof(int32_t) * B * T);
        for (int i = 0; i < B * T; i++) tok[i] = (i % T == 6 || i % T == 46 || i % T == 47 || i % T == 90) ? 7 : 1;
        doc = malloc(sizeof(int32_t) * B * T);
        doc_starts_from_tokens(tok, B, T, 7, doc);
        free(tok);
    }
    float *out = malloc(sizeof(float) * nq), *lse = malloc(sizeof(float) * B * NH * T);
    float *dq = malloc(sizeof(float) * nq), *dk = malloc(sizeof(float) * nk), *dv = malloc(sizeof(float) * nk);
    attention_forward(out, lse, q, k, v, B, T, NH, NKV, D, window, doc, PRECISION_FP32);
    float *out_r = copy_vec(out, nq);
    round_to(out_r, nq, t);   // the backward reads the backend's stored out
    attention_backward(dq, dk, dv, dout, q, k, v, out_r, lse, B, T, NH, NKV, D, window, doc, PRECISION_FP32);
    void *Q = to_dev(q, nq, t), *K = to_dev(k, nk, t), *V = to_dev(v, nk, t), *DO = to_dev(dout, nq, t);
    void *DOC = doc ? to_dev_i32(doc, (size_t)B * T) : NULL;
    void *O = OPS->alloc(BE, nq * dtype_size(t)), *L = OPS->alloc(BE, 4 * (size_t)B * NH * T);
    void *DQ = OPS->alloc(BE, nq * dtype_size(t)), *DK = OPS->alloc(BE, nk * dtype_size(t));
    void *DV = OPS->alloc(BE, nk * dtype_size(t));
    TIMED(OPS->attention_forward(BE, O, L, Q, K, V, t, B, T, NH, NKV, D, window, DOC));
    TIMED(OPS->attention_backward(BE, DQ, DK, DV, DO, Q, K, V, O, L, t, B, T, NH, NKV, D, window, DOC));
    char what[96];
    snprintf(what, sizeof what, "attention (B=%d T=%d NH=%d NKV=%d D=%d window=%d%s)", B, T, NH, NKV, D, window,
             docs ? " docs" : "");
    const double tol = g_case.tol;   // attention rounds P and dS in bf16 (the inner tolerance)
    g_case.tol = g_case.tol_inner, g_inner = 1;
    expect(what, "out", O, t, out, nq);
    expect(what, "lse", L, DT_F32, lse, (size_t)B * NH * T);
    expect(what, "dq", DQ, t, dq, nq);
    expect(what, "dk", DK, t, dk, nk);
    expect(what, "dv", DV, t, dv, nk);
    g_case.tol = tol, g_inner = 0;
    dfree(Q), dfree(K), dfree(V), dfree(DO), dfree(O), dfree(L), dfree(DQ), dfree(DK), dfree(DV);
    if (DOC) dfree(DOC);
    free(q), free(k), free(v), free(dout), free(doc), free(out), free(out_r), free(lse), free(dq), free(dk), free(dv);
}

// The KV-cache form: the last T of p0 + T queries against all p0 + T keys equals the full
// attention's last T rows (where a backend has it; CUDA's generation runs on the CPU).
static void test_attention_kv(int p0, int T, int NH, int NKV, int D, int window) {
    const DType t = ACT;
    if (!OPS->attention_forward_kv) {
        printf("%-15s attention_forward_kv: not in this backend (generation runs on the CPU)\n", g_case.label);
        return;
    }
    const int Tk = p0 + T;
    size_t nq = (size_t)Tk * NH * D, nk = (size_t)Tk * NKV * D;
    float *q = rand_vec(nq, 1), *k = rand_vec(nk, 1), *v = rand_vec(nk, 1);
    round_to(q, nq, t), round_to(k, nk, t), round_to(v, nk, t);
    float *out = malloc(sizeof(float) * nq), *lse = malloc(sizeof(float) * NH * Tk);
    attention_forward(out, lse, q, k, v, 1, Tk, NH, NKV, D, window, NULL, PRECISION_FP32);
    float *lse_t = malloc(sizeof(float) * NH * T);
    for (int h = 0; h < NH; h++) memcpy(lse_t + (size_t)h * T, lse + (size_t)h * Tk + p0, sizeof(float) * T);
    const size_t row = (size_t)NH * D;
    void *Q = to_dev(q + (size_t)p0 * row, (size_t)T * row, t), *K = to_dev(k, nk, t), *V = to_dev(v, nk, t);
    void *O = OPS->alloc(BE, (size_t)T * row * dtype_size(t)), *L = OPS->alloc(BE, 4 * (size_t)NH * T);
    TIMED(OPS->attention_forward_kv(BE, O, L, Q, K, V, t, 1, T, p0, NH, NKV, D, window, NULL));
    // a different summation path than the full forward (a decode step scores with sgemv):
    // 1e-5 even on the CPU, whose other ops are held bitwise; bf16: the inner tolerance
    const double tol = g_case.tol, worst = g_worst;
    g_case.tol = g_case.tol_inner > 1e-5 ? g_case.tol_inner : 1e-5;
    expect("attention_forward_kv", "out", O, t, out + (size_t)p0 * row, (size_t)T * row);
    expect("attention_forward_kv", "lse", L, DT_F32, lse_t, (size_t)NH * T);
    if (!g_perf)
        printf("%-15s attention_forward_kv (p0 %d, T %d) vs the full forward: %.3g (tolerance %.0e)\n", g_case.label, p0,
               T, g_worst, g_case.tol);
    g_case.tol = tol, g_worst = worst;
    dfree(Q), dfree(K), dfree(V), dfree(O), dfree(L);
    free(q), free(k), free(v), free(out), free(lse), free(lse_t);
}

static void test_swiglu(int N, int H) {
    const DType t = ACT;
    float *gu = rand_vec((size_t)N * 2 * H, 3), *dy = rand_vec((size_t)N * H, 1);
    round_to(gu, (size_t)N * 2 * H, t), round_to(dy, (size_t)N * H, t);
    float *y = malloc(sizeof(float) * N * H), *dgu = malloc(sizeof(float) * N * 2 * H);
    swiglu_forward(y, gu, N, H);
    swiglu_backward(dgu, dy, gu, N, H);
    void *GU = to_dev(gu, (size_t)N * 2 * H, t), *DY = to_dev(dy, (size_t)N * H, t);
    void *Y = OPS->alloc(BE, (size_t)N * H * dtype_size(t)), *DGU = OPS->alloc(BE, (size_t)N * 2 * H * dtype_size(t));
    TIMED(OPS->swiglu_forward(BE, Y, GU, t, N, H));
    TIMED(OPS->swiglu_backward(BE, DGU, DY, GU, t, N, H));
    expect("swiglu_forward", "out", Y, t, y, (size_t)N * H);
    expect("swiglu_backward", "dgu", DGU, t, dgu, (size_t)N * 2 * H);
    dfree(GU), dfree(DY), dfree(Y), dfree(DGU);
    free(gu), free(dy), free(y), free(dgu);
}

static void test_embedding(int N, int C, int V) {
    const DType t = ACT;
    int32_t *tok = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N; i++) tok[i] = (i * 7 + i / 5) % V;   // repeated tokens, not in order
    float *E = rand_vec((size_t)V * C, 1), *dy = rand_vec((size_t)N * C, 1);
    round_to(E, (size_t)V * C, t);
    float *y = malloc(sizeof(float) * N * C), *dE = calloc((size_t)V * C, sizeof(float));
    embedding_forward(y, tok, E, N, C);
    embedding_backward(dE, dy, tok, N, C);
    void *TK = to_dev_i32(tok, N), *Ed = to_dev(E, (size_t)V * C, t), *DY = to_dev(dy, (size_t)N * C, DT_F32);
    float *Y = OPS->alloc(BE, sizeof(float) * N * C), *DE = OPS->alloc(BE, sizeof(float) * V * C);
    TIMED(OPS->zero(BE, DE, sizeof(float) * V * C));
    TIMED(OPS->embedding_forward(BE, Y, TK, Ed, t, N, C));
    TIMED(OPS->embedding_backward(BE, DE, DY, tok, N, C));
    expect("embedding_forward", "out", Y, DT_F32, y, (size_t)N * C);
    expect("embedding_backward", "dE", DE, DT_F32, dE, (size_t)V * C);
    dfree(TK), dfree(Ed), dfree(DY), dfree(Y), dfree(DE);
    free(tok), free(E), free(dy), free(y), free(dE);
}

static void test_lmhead(int N, int C, int V) {
    const DType t = ACT;
    const int bf = t == DT_BF16 || BE->prec == PRECISION_BF16;
    float *x = rand_vec((size_t)N * C, 1), *W = rand_vec((size_t)V * C, 0.3f), *dW0 = rand_vec((size_t)V * C, 1);
    round_to(x, (size_t)N * C, bf ? DT_BF16 : DT_F32), round_to(W, (size_t)V * C, bf ? DT_BF16 : DT_F32);
    int32_t *tg = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N; i++) tg[i] = i % 5 == 3 ? -100 : (i * 13) % V;
    const float z = 1e-4f, inv = 1.0f / N;
    float *dx = malloc(sizeof(float) * N * C), *dW = malloc(sizeof(float) * V * C);
    float *scr = malloc(sizeof(float) * CPU_LM_CHUNK * V), *lg = malloc(sizeof(float) * N * V), *ce = malloc(sizeof(float) * N);
    LossSums ref = lmhead_loss_forward_backward(dx, dW, x, W, tg, N, C, V, z, inv, scr, CPU_LM_CHUNK, lg, ce, PRECISION_FP32, NULL);
    for (size_t i = 0; i < (size_t)V * C; i++) dW[i] += dW0[i];
    void *X = to_dev(x, (size_t)N * C, t), *Wd = to_dev(W, (size_t)V * C, t), *TG = to_dev_i32(tg, N);
    void *DX = OPS->alloc(BE, (size_t)N * C * dtype_size(t));
    float *DW = to_dev(dW0, (size_t)V * C, DT_F32);
    float *lg_b = malloc(sizeof(float) * N * V), *ce_b = malloc(sizeof(float) * N);
    LossSums got;
    TIMED(got = OPS->lmhead_loss(BE, DX, DW, 1, X, Wd, t, TG, N, C, V, z, inv, lg_b, ce_b));
    // the tolerance of a bf16 backend covers its logits (rounded inputs, fp32 out) and dx
    double ce_rel = fabs(got.ce_sum - ref.ce_sum) / fabs(ref.ce_sum), z_rel = fabs(got.z_sum - ref.z_sum) / ref.z_sum;
    CHECK(got.n_valid == ref.n_valid, "%s: lmhead_loss n_valid %ld != %ld", g_case.label, got.n_valid, ref.n_valid);
    CHECK(ce_rel <= g_case.tol && z_rel <= g_case.tol, "%s: lmhead_loss ce_sum rel %.3g, z_sum rel %.3g > %.1g",
          g_case.label, ce_rel, z_rel, g_case.tol);
    if (ce_rel > g_worst) g_worst = ce_rel;
    double mx = 0, e = 0, ec = 0;
    for (size_t i = 0; i < (size_t)N * V; i++) mx = fmax(mx, fabs(lg[i])), e = fmax(e, fabs(lg[i] - lg_b[i]));
    for (int i = 0; i < N; i++) ec = fmax(ec, fabs(ce[i] - ce_b[i]) / fabs(ref.ce_sum / ref.n_valid));
    CHECK(e / mx <= g_case.tol && ec <= g_case.tol, "%s: lmhead_loss logits rel %.3g, tok_ce rel %.3g", g_case.label,
          e / mx, ec);
    const double tol = g_case.tol;
    g_case.tol = g_case.tol_inner, g_inner = 1;
    expect("lmhead_loss", "dx", DX, t, dx, (size_t)N * C);
    expect("lmhead_loss", "dW (accumulated)", DW, DT_F32, dW, (size_t)V * C);
    g_case.tol = tol, g_inner = 0;
    dfree(X), dfree(Wd), dfree(TG), dfree(DX), dfree(DW);
    free(x), free(W), free(dW0), free(tg), free(dx), free(dW), free(scr), free(lg), free(ce), free(lg_b), free(ce_b);
}

// An AdamW update's p, m, v and weight copy against the host's, bit for bit (the same
// float operations on every backend).
static void expect_adam(const char *op, const void *P, const void *M, const void *V, const void *WC, const float *p,
                        const float *m, const float *v, const float *wc, size_t n) {
    const double tol = g_case.tol;
    g_case.tol = 0;
    expect(op, "p", P, DT_F32, p, n);
    expect(op, "m", M, DT_F32, m, n);
    expect(op, "v", V, DT_F32, v, n);
    expect(op, "the weight copy", WC, ACT, wc, n);
    g_case.tol = tol;
}

// adamw_spans (where the backend has it): two spans with their own weight decay, a gap
// between them and an untouched tail, the clip folded in (0.37) and not (1): bit for bit
// scale then adamw span by span, and the gradient left as it was.
static void test_adamw_spans(size_t n) {
    const size_t a0 = n / 3, b0 = a0 + 5, b1 = n - 7;
    const AdamWSpan sp[2] = {{0, a0, 0.1f}, {b0, b1 - b0, 0.0f}};
    for (int pass = 0; pass < 2; pass++) {
        const float clip = pass ? 1.0f : 0.37f;
        float *g = rand_vec(n, 1), *p = rand_vec(n, 1), *m = rand_vec(n, 0.1f), *v = rand_vec(n, 0.01f);
        for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
        float *G = to_dev(g, n, DT_F32), *P = to_dev(p, n, DT_F32), *M = to_dev(m, n, DT_F32), *Vd = to_dev(v, n, DT_F32);
        float *g0 = malloc(sizeof(float) * n), *wc = malloc(sizeof(float) * n);
        memcpy(g0, g, sizeof(float) * n);
        memcpy(wc, p, sizeof(float) * n);
        round_to(wc, n, ACT);   // the weight copy outside the spans: the input p's rounding
        void *WC = to_dev(wc, n, ACT);
        if (clip < 1.0f) scale_inplace(g, clip, n);
        for (int s = 0; s < 2; s++) {
            adamw_update(p + sp[s].at, m + sp[s].at, v + sp[s].at, g + sp[s].at, sp[s].n, 3e-3f, 0.9f, 0.95f, 1e-8f,
                         sp[s].wd, 7);
            memcpy(wc + sp[s].at, p + sp[s].at, sizeof(float) * sp[s].n);
            round_to(wc + sp[s].at, sp[s].n, ACT);
        }
        TIMED(OPS->adamw_spans(BE, P, M, Vd, G, WC, ACT, sp, 2, clip, 3e-3f, 0.9f, 0.95f, 1e-8f, 7));
        expect_adam("adamw_spans", P, M, Vd, WC, p, m, v, wc, n);
        const double tol = g_case.tol;
        g_case.tol = 0;
        expect("adamw_spans", "g (unchanged)", G, DT_F32, g0, n);
        g_case.tol = tol;
        dfree(G), dfree(P), dfree(M), dfree(Vd), dfree(WC);
        free(g), free(g0), free(p), free(m), free(v), free(wc);
    }
}

static void test_optimizer(size_t n) {
    float *g = rand_vec(n, 1), *p = rand_vec(n, 1), *m = rand_vec(n, 0.1f), *v = rand_vec(n, 0.01f), *a = rand_vec(n, 1);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    size_t nch = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    double ref = sumsq(g, n), *part = malloc(sizeof(double) * nch);
    float *G = to_dev(g, n, DT_F32), *P = to_dev(p, n, DT_F32), *M = to_dev(m, n, DT_F32), *Vd = to_dev(v, n, DT_F32);
    float *A = to_dev(a, n, DT_F32);
    void *WC = OPS->alloc(BE, n * dtype_size(ACT));
    double got;
    TIMED(got = OPS->sumsq(BE, G, n, part));
    double parts = 0;
    for (size_t c = 0; c < nch; c++) parts += part[c];
    CHECK(fabs(got - ref) <= 1e-12 * ref && parts == got, "%s: sumsq %.17g vs %.17g (parts %.17g)", g_case.label, got,
          ref, parts);
    add_inplace(a, g, n);
    scale_inplace(g, 0.37f, n);
    adamw_update(p, m, v, g, n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7);
    TIMED(OPS->add(BE, A, G, n));
    TIMED(OPS->scale(BE, G, 0.37f, n));
    TIMED(OPS->adamw(BE, P, M, Vd, G, WC, ACT, n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7));
    // elementwise ops in the same float operations: bitwise on every backend
    const double tol = g_case.tol;
    g_case.tol = 0;
    expect("add", "acc", A, DT_F32, a, n);
    expect("scale", "x", G, DT_F32, g, n);
    g_case.tol = tol;
    float *wc = malloc(sizeof(float) * n);
    memcpy(wc, p, sizeof(float) * n);
    round_to(wc, n, ACT);
    expect_adam("adamw", P, M, Vd, WC, p, m, v, wc, n);
    free(wc);
    dfree(G), dfree(P), dfree(M), dfree(Vd), dfree(A), dfree(WC);
    free(g), free(p), free(m), free(v), free(a), free(part);
    if (OPS->adamw_spans) test_adamw_spans(n);
}

static void test_layout(int N) {
    const DType t = ACT;
    const int Q = 32, KV = 16, QKV = Q + 2 * KV;
    float *qkv = rand_vec((size_t)N * QKV, 1), *src = rand_vec((size_t)N * 40, 1);
    round_to(qkv, (size_t)N * QKV, t);
    float *v = malloc(sizeof(float) * N * KV);
    for (int n = 0; n < N; n++) memcpy(v + (size_t)n * KV, qkv + (size_t)n * QKV + Q + KV, sizeof(float) * KV);
    void *QKVd = to_dev(qkv, (size_t)N * QKV, t), *Vd = OPS->alloc(BE, (size_t)N * KV * dtype_size(t));
    TIMED(OPS->copy_cols(BE, Vd, QKVd, t, N, KV, KV, 0, QKV, Q + KV));
    float *S = to_dev(src, (size_t)N * 40, DT_F32);
    void *CST = OPS->alloc(BE, (size_t)N * 40 * dtype_size(t));
    TIMED(OPS->cast(BE, CST, t, S, (size_t)N * 40));
    const double tol = g_case.tol;
    g_case.tol = 0;
    expect("copy_cols", "dst", Vd, t, v, (size_t)N * KV);
    round_to(src, (size_t)N * 40, t);
    expect("cast", "dst", CST, t, src, (size_t)N * 40);
    int32_t idx[5] = {3, 0, N - 1, 3, 17};
    void *G = OPS->alloc(BE, 5 * (size_t)QKV * dtype_size(t));
    TIMED(OPS->gather_rows(BE, G, QKVd, t, idx, 5, QKV));
    float *gref = malloc(sizeof(float) * 5 * QKV);
    for (int i = 0; i < 5; i++) memcpy(gref + (size_t)i * QKV, qkv + (size_t)idx[i] * QKV, sizeof(float) * QKV);
    expect("gather_rows", "dst", G, t, gref, 5 * (size_t)QKV);
    free(gref);
    dfree(G);
    g_case.tol = tol;
    dfree(QKVd), dfree(Vd), dfree(S), dfree(CST);
    free(qkv), free(src), free(v);
}
// The context-parallel form: a sequence cut into query chunks (at multiples of the CPU's
// 64-query block, as context parallelism cuts it), each chunk's queries against the keys
// before its end, dk and dv added over the chunks, equals the whole attention (where a
// backend has it: the CPU, and CUDA's SIMT kernels of cuda/attention_at.cu).
static void test_attention_at(int T, int NH, int NKV, int D, int window, int chunk) {
    const DType t = ACT;
    if (!OPS->attention_forward_at) {
        printf("%-15s attention_forward_at: not in this backend\n", g_case.label);
        return;
    }
    size_t nq = (size_t)T * NH * D, nk = (size_t)T * NKV * D;
    float *q = rand_vec(nq, 1), *k = rand_vec(nk, 1), *v = rand_vec(nk, 1), *dout = rand_vec(nq, 1);
    round_to(q, nq, t), round_to(k, nk, t), round_to(v, nk, t), round_to(dout, nq, t);
    int32_t *tok = malloc(sizeof(int32_t) * T), *doc = malloc(sizeof(int32_t) * T);
    for (int i = 0; i < T; i++) tok[i] = (i == 6 || i == 70 || i == 71 || i == 130) ? 7 : 1;
    doc_starts_from_tokens(tok, 1, T, 7, doc);
    float *out = malloc(sizeof(float) * nq), *lse = malloc(sizeof(float) * NH * T);
    float *dq = malloc(sizeof(float) * nq), *dk = malloc(sizeof(float) * nk), *dv = malloc(sizeof(float) * nk);
    attention_forward(out, lse, q, k, v, 1, T, NH, NKV, D, window, doc, PRECISION_FP32);
    attention_backward(dq, dk, dv, dout, q, k, v, out, lse, 1, T, NH, NKV, D, window, doc, PRECISION_FP32);
    float *lse_c = malloc(sizeof(float) * NH * T);   // the chunks' (NH, chunk) blocks, in chunk order
    for (int p0 = 0; p0 < T; p0 += chunk) {
        const int n = p0 + chunk < T ? chunk : T - p0;
        for (int h = 0; h < NH; h++)
            memcpy(lse_c + (size_t)p0 * NH + (size_t)h * n, lse + (size_t)h * T + p0, sizeof(float) * n);
    }
    void *Q = to_dev(q, nq, t), *K = to_dev(k, nk, t), *V = to_dev(v, nk, t), *DO = to_dev(dout, nq, t);
    void *DOC = to_dev_i32(doc, T);
    void *O = OPS->alloc(BE, nq * dtype_size(t)), *L = OPS->alloc(BE, 4 * (size_t)NH * T);
    void *DQ = OPS->alloc(BE, nq * dtype_size(t)), *DK = OPS->alloc(BE, nk * dtype_size(t));
    void *DV = OPS->alloc(BE, nk * dtype_size(t));
    OPS->zero(BE, DK, nk * dtype_size(t)), OPS->zero(BE, DV, nk * dtype_size(t));
    const int ldq = NH * D, ldk = NKV * D;
    for (int p0 = 0; p0 < T; p0 += chunk) {
        const int n = p0 + chunk < T ? chunk : T - p0;
        const size_t qo = (size_t)p0 * ldq * dtype_size(t);
        float *Lc = (float *)L + (size_t)p0 * NH;
        TIMED(OPS->attention_forward_at(BE, (char *)O + qo, Lc, (char *)Q + qo, K, V, t, n, p0, NH, NKV, D, ldq, ldk,
                                        window, DOC));
        TIMED(OPS->attention_backward_at(BE, (char *)DQ + qo, DK, DV, (char *)DO + qo, (char *)Q + qo, K, V, Lc, t, n,
                                         p0, NH, NKV, D, ldq, ldk, window, DOC));
    }
    // dk, dv add the chunks' partial sums in another order than one pass (the query heads
    // of a KV head, then the chunks): 1e-5 even on the CPU, whose other ops are held bitwise;
    // bf16: the inner tolerance
    const double tol = g_case.tol, worst = g_worst;
    g_case.tol = g_case.tol_inner > 1e-5 ? g_case.tol_inner : 1e-5;
    expect("attention_forward_at", "out", O, t, out, nq);
    expect("attention_forward_at", "lse", L, DT_F32, lse_c, (size_t)NH * T);
    expect("attention_backward_at", "dq", DQ, t, dq, nq);
    expect("attention_backward_at", "dk", DK, t, dk, nk);
    expect("attention_backward_at", "dv", DV, t, dv, nk);
    if (!g_perf)
        printf("%-15s attention_*_at (T %d in chunks of %d) vs the whole attention: %.3g (tolerance %.0e)\n",
               g_case.label, T, chunk, g_worst, g_case.tol);
    g_case.tol = tol, g_worst = worst;
    dfree(Q), dfree(K), dfree(V), dfree(DO), dfree(DOC), dfree(O), dfree(L), dfree(DQ), dfree(DK), dfree(DV);
    free(q), free(k), free(v), free(dout), free(tok), free(doc), free(out), free(lse), free(lse_c), free(dq), free(dk),
        free(dv);
}


// ---- the case table --------------------------------------------------------------------------
// Work of a case's backend calls, for -p: FLOPs of the compute-bound ops (a multiply-add is 2),
// bytes read + written by the memory-bound ones (es: bytes per activation element).
static double es(void) { return (double)dtype_size(ACT); }
static double pairs(int T, int window, int p0) {   // visible (query, key) pairs of T queries after p0
    double n = 0;
    for (int i = p0; i < p0 + T; i++) n += window > 0 && window < i + 1 ? window : i + 1;
    return n;
}
static void c_layout(const int *a) { test_layout(a[0]); }
static double w_layout(const int *a) { return a[0] * (2.0 * 16 * es() + 40 * (4 + es()) + 2.0 * 5 * 64 * es() / a[0]); }
static void c_embedding(const int *a) { test_embedding(a[0], a[1], a[2]); }
static double w_embedding(const int *a) { return (double)a[0] * a[1] * (es() + 4 + 12) + 4.0 * a[2] * a[1]; }
static void c_matmul(const int *a) { test_matmul(a[0], a[1], a[2]); }
static double w_matmul(const int *a) { return 6.0 * a[0] * a[1] * a[2]; }
static void c_rmsnorm(const int *a) { test_rmsnorm(a[0], a[1], a[2], a[3]); }
static double w_rmsnorm(const int *a) { return (double)a[0] * a[1] * (5 * es() + (a[3] ? 8 : 0) + 4); }
static void c_rope(const int *a) { test_rope(a[0], a[1], a[2], a[3], a[4]); }
static double w_rope(const int *a) { return 4.0 * a[0] * a[1] * a[2] * a[3] * es() + 8.0 * a[1] * a[3]; }
static void c_qkv_split(const int *a) { test_qkv_split(a[0], a[1], a[2], a[3], a[4]); }
static double w_qkv_split(const int *a) { return 6.0 * a[0] * a[1] * (a[2] + 2 * a[3]) * a[4] * es(); }
static void c_attention(const int *a) { test_attention(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); }
// forward: S = QK^T and O = PV (2 matmuls), backward: 5 (S again, dP, dV, dQ, dK)
static double w_attention(const int *a) { return 14.0 * a[0] * a[2] * a[4] * pairs(a[1], a[5], 0); }
static void c_attention_kv(const int *a) { test_attention_kv(a[0], a[1], a[2], a[3], a[4], a[5]); }
static double w_attention_kv(const int *a) { return 4.0 * a[2] * a[4] * pairs(a[1], a[5], a[0]); }
static void c_attention_at(const int *a) { test_attention_at(a[0], a[1], a[2], a[3], a[4], a[5]); }
static double w_attention_at(const int *a) { return 14.0 * a[1] * a[3] * pairs(a[0], a[4], 0); }
static void c_swiglu(const int *a) { test_swiglu(a[0], a[1]); }
static double w_swiglu(const int *a) { return 8.0 * a[0] * a[1] * es(); }
static void c_lmhead(const int *a) { test_lmhead(a[0], a[1], a[2]); }
static double w_lmhead(const int *a) { return 6.0 * a[0] * a[1] * a[2]; }
static void c_optimizer(const int *a) { test_optimizer((size_t)a[0]); }
static double w_optimizer(const int *a) { return a[0] * (4.0 + 12 + 8 + 28 + es()); }

typedef struct {
    const char *op;       // the family, what -o matches
    const char *covers;   // the Ops entries it runs, space-separated
    void (*run)(const int *a);
    double (*work)(const int *a);
    int bytes;            // work counts bytes (GB/s), else FLOPs (GFLOP/s)
    int a[7];
    const char *shape;
    int perf_only;        // a model-sized shape, run (and checked) only with -p
} OpCase;

static const OpCase CASES[] = {
    {"layout", "copy_cols cast gather_rows", c_layout, w_layout, 1, {37}, "N=37", 0},
    {"embedding", "zero embedding_forward embedding_backward", c_embedding, w_embedding, 1, {70, 24, 50}, "N=70 C=24 V=50", 0},
    {"matmul", "matmul_forward matmul_backward", c_matmul, w_matmul, 0, {33, 48, 80}, "N=33 C=48 OC=80", 0},
    {"matmul", "matmul_forward matmul_backward", c_matmul, w_matmul, 0, {64, 40, 24}, "N=64 C=40 OC=24", 0},
    {"rmsnorm", "rmsnorm_forward rmsnorm_backward", c_rmsnorm, w_rmsnorm, 1, {33, 32, 64, 0}, "N=33 C=32 stride=64 (q-norm slice)", 0},
    {"rmsnorm", "rmsnorm_forward rmsnorm_backward", c_rmsnorm, w_rmsnorm, 1, {33, 48, 48, 1}, "N=33 C=48 + residual", 0},
    {"rmsnorm", "rmsnorm_forward rmsnorm_backward", c_rmsnorm, w_rmsnorm, 1, {600, 40, 40, 1},
     "N=600 C=40 + residual (rows > NORM_PARTS: chunks of 2 and 3 rows)", 0},
    {"rope", "rope_forward rope_backward", c_rope, w_rope, 1, {2, 33, 3, 16, 0}, "B=2 T=33 H=3 D=16", 0},
    {"rope", "rope_forward rope_backward", c_rope, w_rope, 1, {1, 33, 2, 32, 1}, "B=1 T=33 H=2 D=32 YaRN", 0},
    {"qkv_split", "qkv_split_forward qkv_split_backward", c_qkv_split, w_qkv_split, 1, {2, 33, 4, 2, 16},
     "B=2 T=33 NH=4 NKV=2 D=16 (GQA 2:1)", 0},
    {"qkv_split", "qkv_split_forward qkv_split_backward", c_qkv_split, w_qkv_split, 1, {1, 600, 2, 1, 16},
     "B=1 T=600 NH=2 NKV=1 D=16 (rows > NORM_PARTS: chunks of 2 and 3 rows)", 0},
    {"qkv_split", "qkv_split_forward qkv_split_backward", c_qkv_split, w_qkv_split, 1, {1, 5, 49, 7, 128},
     "B=1 T=5 NH=49 NKV=7 D=128 (q rows past the shared-memory partials: the unfused fallback)", 0},
    {"attention", "attention_forward attention_backward", c_attention, w_attention, 0, {2, 33, 4, 2, 16, 33, 0},
     "B=2 T=33 NH=4 NKV=2 D=16 window=33 (GQA 2:1, T not a tile multiple)", 0},
    {"attention", "attention_forward attention_backward", c_attention, w_attention, 0, {1, 33, 2, 2, 16, 1, 0},
     "B=1 T=33 NH=2 NKV=2 D=16 window=1", 0},
    {"attention", "attention_forward attention_backward", c_attention, w_attention, 0, {1, 150, 4, 1, 32, 20, 1},
     "B=1 T=150 NH=4 NKV=1 D=32 window=20 docs (GQA 4:1, window < tile)", 0},
    {"attention_kv", "attention_forward_kv", c_attention_kv, w_attention_kv, 0, {37, 1, 4, 2, 16, 9},
     "p0=37 T=1 NH=4 NKV=2 D=16 window=9 (a decode step)", 0},
    {"attention_kv", "attention_forward_kv", c_attention_kv, w_attention_kv, 0, {20, 13, 4, 1, 32, 50},
     "p0=20 T=13 NH=4 NKV=1 D=32 window=50 (a prefill chunk)", 0},
    {"attention_at", "attention_forward_at attention_backward_at", c_attention_at, w_attention_at, 0,
     {150, 4, 2, 16, 40, 64}, "T=150 NH=4 NKV=2 D=16 window=40 docs, chunks of 64", 0},
    {"swiglu", "swiglu_forward swiglu_backward", c_swiglu, w_swiglu, 1, {33, 40}, "N=33 H=40", 0},
    {"lmhead", "lmhead_loss", c_lmhead, w_lmhead, 0, {600, 32, 96}, "N=600 C=32 V=96 (> the CPU's 512-token chunk)", 0},
    {"optimizer", "sumsq add scale adamw adamw_spans", c_optimizer, w_optimizer, 1, {2 * 65536 + 123}, "n=131195 (3 sum-of-squares chunks)", 0},
    // -p only: shapes of a training step of bench config (a) (d_model 256, MLP 768, T 256)
    {"matmul", "matmul_forward matmul_backward", c_matmul, w_matmul, 0, {2048, 256, 768}, "N=2048 C=256 OC=768", 1},
    {"rmsnorm", "rmsnorm_forward rmsnorm_backward", c_rmsnorm, w_rmsnorm, 1, {2048, 256, 256, 1}, "N=2048 C=256 + residual", 1},
    {"rope", "rope_forward rope_backward", c_rope, w_rope, 1, {8, 256, 4, 64, 0}, "B=8 T=256 H=4 D=64", 1},
    {"attention", "attention_forward attention_backward", c_attention, w_attention, 0, {8, 256, 4, 4, 64, 128, 0},
     "B=8 T=256 NH=4 NKV=4 D=64 window=128", 1},
    {"swiglu", "swiglu_forward swiglu_backward", c_swiglu, w_swiglu, 1, {2048, 768}, "N=2048 H=768", 1},
    {"lmhead", "lmhead_loss", c_lmhead, w_lmhead, 0, {512, 256, 8192}, "N=512 C=256 V=8192", 1},
    {"optimizer", "sumsq add scale adamw", c_optimizer, w_optimizer, 1, {1 << 22}, "n=4194304", 1},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

// Every entry of the Ops table; the static assert fails the build when kernels/ops.h gains
// a field this list lacks. The memory ops run in every case (to_dev, from_dev, dfree).
#define ENTRY(f) {#f, offsetof(Ops, f)}
static const struct {
    const char *name;
    size_t offset;
} OPS_ENTRIES[] = {
    ENTRY(alloc), ENTRY(free), ENTRY(upload), ENTRY(download), ENTRY(zero), ENTRY(sync), ENTRY(destroy),
    ENTRY(cast), ENTRY(copy_cols), ENTRY(gather_rows), ENTRY(embedding_forward), ENTRY(embedding_backward),
    ENTRY(matmul_forward), ENTRY(matmul_backward), ENTRY(rmsnorm_forward), ENTRY(rmsnorm_backward),
    ENTRY(rope_forward), ENTRY(rope_backward), ENTRY(qkv_split_forward), ENTRY(qkv_split_backward),
    ENTRY(attention_forward), ENTRY(attention_backward),
    ENTRY(attention_forward_kv), ENTRY(attention_forward_at), ENTRY(attention_backward_at), ENTRY(swiglu_forward),
    ENTRY(swiglu_backward), ENTRY(lmhead_loss), ENTRY(sumsq), ENTRY(scale), ENTRY(add), ENTRY(adamw), ENTRY(adamw_spans),
};
_Static_assert(sizeof OPS_ENTRIES / sizeof OPS_ENTRIES[0] * sizeof(void (*)(void)) == sizeof(Ops),
               "kernels/ops.h's Ops has an entry OPS_ENTRIES does not list: add it and a case that runs it");
static const char *const MEMORY_OPS = "alloc free upload download sync destroy";

static int has_word(const char *list, const char *w) {
    size_t n = strlen(w);
    for (const char *p = list; (p = strstr(p, w)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == 0 || p[n] == ' ')) return 1;
    return 0;
}

// Every Ops entry has a case; returns the number without one (each named).
static int check_coverage(void) {
    int missing = 0;
    for (size_t i = 0; i < sizeof OPS_ENTRIES / sizeof OPS_ENTRIES[0]; i++) {
        const char *e = OPS_ENTRIES[i].name;
        int hit = has_word(MEMORY_OPS, e);
        for (size_t c = 0; c < NCASES && !hit; c++) hit = has_word(CASES[c].covers, e);
        CHECK(hit, "Ops entry %s (kernels/ops.h) has no case in CASES", e);
        missing += !hit;
    }
    return missing;
}

static const char *g_filter_op, *g_filter_be;
static int selected(const OpCase *c) {
    if (c->perf_only && !g_perf) return 0;
    return !g_filter_op || strstr(c->op, g_filter_op) || strstr(c->covers, g_filter_op);
}

static void run_backend(OpsBackend *be, const char *id, const char *label, double tol, double tol_inner) {
    if (g_filter_be && strcmp(g_filter_be, id)) return;
    g_case = (Case){be, label, tol, tol_inner};
    g_worst = g_worst_inner = 0;
    int before = failures, ran = 0;
    for (size_t i = 0; i < NCASES; i++) {
        const OpCase *c = &CASES[i];
        if (!selected(c)) continue;
        g_shape = c->shape;
        ran++;
        if (!g_perf) {
            c->run(c->a);
            continue;
        }
        c->run(c->a);   // warm-up: first-touch allocation, caches, cuBLASLt's plan
        g_secs = 0;
        c->run(c->a);
        double w = c->work(c->a);
        printf("%-15s %-13s %-62s %9.3f ms %9.2f %s\n", label, c->op, c->shape, 1e3 * g_secs,
               g_secs > 0 ? w / g_secs / 1e9 : 0.0, c->bytes ? "GB/s" : "GFLOP/s");
    }
    g_shape = "";
    printf("%-15s %s: %d cases, worst relative error %.3g (tolerance %.0e); attention, LM-head backward %.3g "
           "(tolerance %.0e)\n",
           label, failures == before ? "ok" : "FAILED", ran, g_worst, tol, g_worst_inner, tol_inner);
}

static void usage(void) {
    fprintf(stderr, "usage: test_backend_ops [-o OP] [-b cpu|cpu-bf16|cuda-fp32|cuda-bf16] [-p] [-l]\n");
}

int main(int argc, char **argv) {
    blas_core_init(argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) g_filter_op = argv[++i];
        else if (!strcmp(argv[i], "-b") && i + 1 < argc) g_filter_be = argv[++i];
        else if (!strcmp(argv[i], "-p")) g_perf = 1;
        else if (!strcmp(argv[i], "-l")) {
            for (size_t c = 0; c < NCASES; c++)
                printf("%-13s %-45s %s%s\n", CASES[c].op, CASES[c].covers, CASES[c].shape, CASES[c].perf_only ? " (-p)" : "");
            return 0;
        } else {
            usage();
            return 2;
        }
    }
    if (g_filter_be && strcmp(g_filter_be, "cpu") && strcmp(g_filter_be, "cpu-bf16") && strcmp(g_filter_be, "cuda-fp32") &&
        strcmp(g_filter_be, "cuda-bf16")) {
        fprintf(stderr, "test_backend_ops: unknown backend '%s' (-b cpu, cpu-bf16, cuda-fp32 or cuda-bf16)\n", g_filter_be);
        return 2;
    }
    int n_sel = 0;
    for (size_t c = 0; c < NCASES; c++) n_sel += selected(&CASES[c]);
    if (!n_sel) {
        fprintf(stderr, "test_backend_ops: no case matches -o '%s' (-l lists them)\n", g_filter_op);
        return 2;
    }
    if (check_coverage()) printf("test_backend_ops: the Ops table has entries without a case\n");
    if (g_perf)
        printf("%-15s %-13s %-62s %12s %14s\n", "backend", "op", "shape", "time", "rate (fwd+bwd)");
    OpsBackend *cpu = ops_cpu_create(PRECISION_FP32);
    run_backend(cpu, "cpu", "cpu", 0.0, 0.0);
    ops_destroy(cpu);
    OpsBackend *cbf = ops_cpu_create(PRECISION_BF16);
    char label[64];
    snprintf(label, sizeof label, "cpu-bf16 (%s)", matmul_bf16_engine());
    run_backend(cbf, "cpu-bf16", label, 1e-5, 1e-2);
    ops_destroy(cbf);
    char err[256];
    OpsBackend *cuda = ops_cuda_create(DT_F32, err, sizeof err);
    if (!cuda) {
        printf("cuda: SKIP (%s)\n", err);
    } else {
        run_backend(cuda, "cuda-fp32", "cuda-fp32", 1e-5, 1e-5);
        ops_destroy(cuda);
        cuda = ops_cuda_create(DT_BF16, err, sizeof err);
        run_backend(cuda, "cuda-bf16", "cuda-bf16", 1e-2, 1e-2);
        ops_destroy(cuda);
    }
    printf("%s\n", failures ? "test_backend_ops: FAILED" : "test_backend_ops: all ops passed");
    return failures != 0;
}
